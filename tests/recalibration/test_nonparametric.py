"""Tests of iml.recalibration.nonparametric: isotonic regression (pool adjacent violators) and
histogram binning, against scikit-learn and hand computations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from iml.recalibration import (
    HistogramBinning,
    histogram_binning_fit,
    histogram_binning_transform,
    isotonic_fit,
    isotonic_transform,
    pool_adjacent_violators,
)

# ---------------------------------------------------------------------------------------------
# Isotonic regression (pool adjacent violators)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("weighted", [False, True])
def test_isotonic_matches_sklearn_fitted_values(binary_data, weighted):
    s, y, w = binary_data
    w = w if weighted else None
    params = isotonic_fit(s, y, w)
    reference = IsotonicRegression(out_of_bounds="clip").fit(s, y, sample_weight=w)
    grid = np.linspace(-0.05, 1.05, 301)
    np.testing.assert_allclose(isotonic_transform(params, s), reference.predict(s), atol=1e-5)
    np.testing.assert_allclose(isotonic_transform(params, grid), reference.predict(grid), atol=1e-5)


def test_pool_adjacent_violators_vmaps_and_ignores_padding():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(3, 40)).astype(np.float32)
    weights = rng.uniform(0.5, 2.0, size=(3, 40)).astype(np.float32)
    n = jnp.array([40, 25, 7])
    batched = jax.jit(jax.vmap(pool_adjacent_violators))(values, weights, n)
    for i in range(3):
        k = int(n[i])
        alone = IsotonicRegression().fit_transform(
            np.arange(k), values[i, :k], sample_weight=weights[i, :k]
        )
        np.testing.assert_allclose(batched[i, :k], alone, atol=1e-5)
        assert np.all(batched[i, k:] == batched[i, k - 1])  # padding repeats the last value
        assert np.all(np.diff(np.asarray(batched[i, :k])) >= -1e-6)


def test_isotonic_zero_weight_rows_are_padding_so_replicates_of_any_size_vmap(binary_data):
    s, y, _ = binary_data
    sizes = (1500, 900, 300)
    weights = np.stack([(np.arange(1500) < k).astype(np.float32) for k in sizes])
    fits = jax.vmap(isotonic_fit, in_axes=(None, None, 0))(s, y, weights)
    grid = np.linspace(0.0, 1.0, 101)
    for i, k in enumerate(sizes):
        reference = IsotonicRegression(out_of_bounds="clip").fit(s[:k], y[:k])
        got = isotonic_transform(jax.tree.map(lambda a, i=i: a[i], fits), grid)
        np.testing.assert_allclose(got, reference.predict(grid), atol=1e-5)


def test_isotonic_on_the_host_equals_the_compiled_fit_with_ties_and_padding():
    # Concrete arrays are fitted on the host (NumPy's pooled ties, SciPy's steps); the
    # compiled kernel (what jit and vmap run) must give the same knots, padding and values.
    from iml.recalibration.nonparametric import _isotonic_kernel

    rng = np.random.default_rng(7)
    n = 700
    s = np.round(rng.uniform(size=n), 2).astype(np.float32)  # about a hundred distinct scores
    y = (rng.uniform(size=n) < s).astype(np.float32)
    w = rng.uniform(0.2, 3.0, size=n).astype(np.float32)
    w[rng.uniform(size=n) < 0.3] = 0.0  # a held-out fold: padding
    host = isotonic_fit(s, y, w)
    compiled = _isotonic_kernel(jnp.asarray(s), jnp.asarray(y), jnp.asarray(w))
    np.testing.assert_array_equal(np.asarray(host.x), np.asarray(compiled.x))
    np.testing.assert_allclose(np.asarray(host.y), np.asarray(compiled.y), atol=1e-6)
    knots, distinct = np.asarray(host.x), len(np.unique(s[w > 0]))
    assert distinct < n and np.all(knots[distinct:] == knots[distinct - 1])
    assert np.all(np.diff(np.asarray(host.y)) >= 0)


def _sorted_pooled_isotonic(s, y, w):
    """A reference host fit: the rows of positive weight sorted (stable), their ties pooled by
    ``np.unique``, the steps by scikit-learn's ``isotonic_regression``, padded as the kernel
    pads."""
    from sklearn.isotonic import isotonic_regression

    valid = w > 0
    order = np.argsort(s[valid], kind="stable")
    sv, yv, wv = s[valid][order], y[valid][order], w[valid][order].astype(np.float64)
    knots, first = np.unique(sv, return_index=True)
    ws, wy = np.add.reduceat(wv, first), np.add.reduceat(wv * yv, first)
    fitted = isotonic_regression(wy / ws, sample_weight=ws, increasing=True)
    x, values = np.full(len(s), knots[-1], s.dtype), np.full(len(s), fitted[-1], s.dtype)
    x[: len(knots)], values[: len(knots)] = knots, fitted
    return x, values


@pytest.mark.parametrize("in_order", [False, True])
def test_isotonic_on_the_host_equals_a_sorted_and_pooled_reference(in_order):
    """Concrete arrays: the knots and values of the reference fit to the last bit, for scores in
    score order (not sorted again) or not, with ties, signed zeros, fractional weights and rows
    of weight zero."""
    rng = np.random.default_rng(9)
    n = 900
    s = np.round(rng.uniform(size=n), 2).astype(np.float32)
    s[:40] = np.where(np.arange(40) % 2, 0.0, -0.0)
    y = (rng.uniform(size=n) < s).astype(np.float32)
    w = rng.uniform(0.1, 3.0, size=n).astype(np.float32)
    w[rng.uniform(size=n) < 0.2] = 0.0
    if in_order:
        order = np.argsort(s, kind="stable")
        s, y, w = s[order], y[order], w[order]
    fit = isotonic_fit(s, y, w)
    x, values = _sorted_pooled_isotonic(s, y, w)
    np.testing.assert_array_equal(np.asarray(fit.x), x)
    np.testing.assert_array_equal(np.asarray(fit.y), values)


def test_isotonic_folds_fitted_at_once_on_the_host_equal_each_fit_alone():
    """``IsotonicCalibration._fit_folds`` (a cross-fit's folds, fitted on the host) gives each
    row of weights the knots and values of fitting with those weights alone, whether the scores
    come in score order (not sorted again) or not."""
    from iml.recalibration import IsotonicCalibration

    rng = np.random.default_rng(8)
    n = 600
    s = np.round(rng.uniform(size=n), 2).astype(np.float32)
    y = (rng.uniform(size=n) < s).astype(np.float32)
    weights = np.stack([rng.uniform(size=n) < q for q in (0.3, 0.7, 0.95)]).astype(np.float32)
    weights[1] *= rng.uniform(0.5, 2.0, size=n).astype(np.float32)
    order = np.argsort(s, kind="stable")
    for scores, labels, w in ((s, y, weights), (s[order], y[order], weights[:, order])):
        stacked = IsotonicCalibration()._fit_folds(scores, labels, w)
        for row in range(3):
            alone = isotonic_fit(scores, labels, w[row])
            np.testing.assert_array_equal(np.asarray(stacked.x[row]), np.asarray(alone.x))
            np.testing.assert_array_equal(np.asarray(stacked.y[row]), np.asarray(alone.y))


# ---------------------------------------------------------------------------------------------
# Histogram binning
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_histogram_binning_matches_hand_computation(binary_data, strategy):
    s, y, w = binary_data
    n_bins = 7
    params = histogram_binning_fit(s, y, w, n_bins=n_bins, strategy=strategy)
    if strategy == "uniform":
        edges = np.linspace(0, 1, n_bins + 1)
    else:
        edges = np.quantile(s, np.linspace(0, 1, n_bins + 1))
        edges[0], edges[-1] = 0.0, 1.0
    np.testing.assert_allclose(params.edges, edges, atol=1e-6)
    # Bins as the fit draws them, by its float32 edges and scores: a score within 1e-6 of an
    # edge may fall on either side of it.
    edges, s = np.asarray(params.edges), np.asarray(s, np.float32)
    expected = np.empty(n_bins)
    for b in range(n_bins):
        upper = s <= edges[b + 1] if b == n_bins - 1 else s < edges[b + 1]
        inside = (s >= edges[b]) & upper
        expected[b] = np.sum(w[inside] * y[inside]) / np.sum(w[inside])
    np.testing.assert_allclose(params.values, expected, atol=1e-5)
    out = histogram_binning_transform(params, s)
    index = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, n_bins - 1)
    np.testing.assert_allclose(out, expected[index], atol=1e-5)


def test_histogram_binning_empty_bin_keeps_its_midpoint():
    s = np.array([0.05, 0.1, 0.15, 0.95])
    y = np.array([0, 1, 0, 1])
    params = HistogramBinning(n_bins=4).fit(s, y).params_
    np.testing.assert_allclose(params.values, [1 / 3, 0.375, 0.625, 1.0], atol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 9, 1000, 20_001])
def test_the_quantiles_of_the_host_sort_are_jnp_nanquantile_to_the_last_bit(n):
    """The histogram's edges come from NumPy's sort on the CPU: bit for bit the linear
    ``jnp.nanquantile`` of the rows of positive weight, jitted or not, all-NaN included."""
    from iml.recalibration.nonparametric import nan_quantiles

    rng = np.random.default_rng(n)
    q = jnp.linspace(0.0, 1.0, 11, dtype=jnp.float32)
    for dropped in (0.0, 0.3, 1.0):
        values = rng.beta(2.0, 5.0, n).astype(np.float32)
        values[rng.random(n) < dropped] = np.nan
        values[: n // 3] = np.round(values[: n // 3], 2)  # ties
        expected = np.asarray(jnp.nanquantile(jnp.asarray(values), q))
        for fn in (nan_quantiles, jax.jit(nan_quantiles)):
            np.testing.assert_array_equal(fn(jnp.asarray(values), q), expected)
