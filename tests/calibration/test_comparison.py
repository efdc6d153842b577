"""Tests of iml.calibration.comparison: bootstrap intervals of many ECEs on the same resampled
rows, and the paired comparison of two ECEs."""

import jax
import numpy as np
import pytest


def _numpy_ece(scores, labels, n_bins=10):
    """ECE with quantile bins, as np.quantile and np.searchsorted place them."""
    edges = np.quantile(scores, np.linspace(0, 1, n_bins + 1))
    bins = np.clip(np.searchsorted(edges, scores, side="left") - 1, 0, n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        m = bins == b
        if m.any():
            total += m.sum() * abs(scores[m].mean() - labels[m].mean())
    return total / len(scores)


@pytest.mark.slow
def test_compare_ece_pairs_the_rows_and_matches_an_independent_bootstrap():
    from iml.calibration import compare_ece

    rng = np.random.default_rng(0)
    p = rng.uniform(0.02, 0.98, 3000)
    y = (rng.uniform(size=3000) < p).astype(np.int32)
    good, bad = p, np.clip(p + 0.08, 0, 1)  # the second is miscalibrated by 0.08
    key = jax.random.key(4)
    c = compare_ece(good, bad, y, n_bootstrap=300, key=key)
    assert float(c.ece[0]) == pytest.approx(_numpy_ece(good, y), abs=1e-5)
    assert float(c.ece[1]) == pytest.approx(_numpy_ece(bad, y), abs=1e-5)
    rows = np.asarray(jax.random.randint(key, (300, 3000), 0, 3000))
    diff = [_numpy_ece(good[r], y[r]) - _numpy_ece(bad[r], y[r]) for r in rows]
    np.testing.assert_allclose(c.difference_interval, np.quantile(diff, [0.025, 0.975]), atol=2e-4)
    assert float(c.difference_interval[1]) < 0  # the better model is told apart
    assert float(c.ratio_interval[1]) < 1
    same = compare_ece(good, good, y, n_bootstrap=50, key=key)
    np.testing.assert_array_equal(same.difference_interval, [0.0, 0.0])
    np.testing.assert_array_equal(same.ratio_interval, [1.0, 1.0])
    with pytest.raises(ValueError, match=r"labels has shape \(3000,\) but second has shape"):
        compare_ece(good, good[:100], y, n_bootstrap=10, key=key)
    with pytest.raises(ValueError, match="same observations"):
        compare_ece(good, good[:100], y, y[:100], n_bootstrap=10, key=key)


def test_ece_intervals_are_weighted_ece_quantiles_on_the_shared_resamples():
    from iml._bootstrap import bootstrap_counts
    from iml.calibration import ece_intervals

    rng = np.random.default_rng(1)
    p = rng.uniform(0.02, 0.98, 2000)
    y = (rng.uniform(size=2000) < p).astype(np.int32)
    rows = np.stack([p, np.clip(p + 0.12, 0, 1)]).astype(np.float32)
    key = jax.random.key(9)
    got = np.asarray(ece_intervals(rows, y, n_bootstrap=300, key=key))
    counts = np.asarray(bootstrap_counts(key, 2000, 300), np.float64)
    for r, interval in zip(rows, got, strict=True):
        edges = np.quantile(r, np.linspace(0, 1, 11))
        bins = np.clip(np.searchsorted(edges, r, side="left") - 1, 0, 9)
        gap = np.zeros((2000, 10))
        gap[np.arange(2000), bins] = r - y
        ece = np.abs(counts @ gap).sum(1) / counts.sum(1)
        np.testing.assert_allclose(interval, np.quantile(ece, [0.025, 0.975]), atol=2e-4)
    assert got[1, 0] > got[0, 1]  # the shifted scores' interval lies above
    one = np.asarray(ece_intervals(rows[0], y, n_bootstrap=300, key=key))
    np.testing.assert_array_equal(one, got[0])


def test_ece_differences_are_paired_quantiles_of_the_same_resamples():
    """The intervals of ECE_i - ECE_j are the quantiles of the replicates' differences, on the
    draws of the rows' own intervals (NumPy, independently); a row against itself gives [0, 0];
    the intervals of the rows are those asked without differences."""
    from iml._bootstrap import bootstrap_counts
    from iml.calibration import ece_intervals

    rng = np.random.default_rng(2)
    p = rng.uniform(0.02, 0.98, 1500)
    y = (rng.uniform(size=1500) < p).astype(np.int32)
    rows = np.stack([p, np.clip(p + 0.12, 0, 1), np.clip(p - 0.03, 0, 1)]).astype(np.float32)
    key = jax.random.key(3)
    pairs = [[1, 0], [2, 0], [0, 0]]
    got, apart = ece_intervals(rows, y, n_bootstrap=300, key=key, differences=pairs)
    np.testing.assert_array_equal(got, ece_intervals(rows, y, n_bootstrap=300, key=key))
    counts = np.asarray(bootstrap_counts(key, 1500, 300), np.float64)
    replicates = []
    for r in rows:
        edges = np.quantile(r, np.linspace(0, 1, 11))
        bins = np.clip(np.searchsorted(edges, r, side="left") - 1, 0, 9)
        gap = np.zeros((1500, 10))
        gap[np.arange(1500), bins] = r - y
        replicates.append(np.abs(counts @ gap).sum(1) / counts.sum(1))
    for (i, j), interval in zip(pairs, np.asarray(apart), strict=True):
        want = np.quantile(replicates[i] - replicates[j], [0.025, 0.975])
        np.testing.assert_allclose(interval, want, atol=2e-4)
    assert np.asarray(apart)[0, 0] > 0  # the shifted scores are told apart, paired
    np.testing.assert_array_equal(np.asarray(apart)[2], [0.0, 0.0])
    with pytest.raises(ValueError, match="differences must be pairs"):
        ece_intervals(rows, y, n_bootstrap=10, key=key, differences=[[0, 3]])


@pytest.mark.slow
def test_multiclass_ece_intervals_are_top_label_and_mean_classwise_on_shared_resamples():
    from iml._bootstrap import bootstrap_counts
    from iml.calibration import multiclass_ece_intervals

    rng = np.random.default_rng(2)
    n, k = 1500, 3
    p = rng.dirichlet(np.ones(k), n)
    y = np.array([rng.choice(k, p=row) for row in p])
    scores = np.stack([p, 0.7 * p + 0.1]).astype(np.float32)  # the second over-smoothed
    key = jax.random.key(4)
    got = multiclass_ece_intervals(scores, y, n_bootstrap=300, key=key)
    paired = multiclass_ece_intervals(scores, y, n_bootstrap=300, key=key,
                                      differences=[[1, 0], [0, 0]])  # fmt: skip
    assert set(got) == {"top_label_ece", "classwise_ece"}
    for name in got:  # the same intervals, and the differences on the same replicates
        np.testing.assert_array_equal(paired[name], got[name])
        np.testing.assert_array_equal(paired[f"{name}_difference"][1], [0.0, 0.0])
    counts = np.asarray(bootstrap_counts(key, n, 300), np.float64)

    def replicates(s, hit):  # a binary ECE per replicate, bins fixed at the full sample's deciles
        edges = np.quantile(s, np.linspace(0, 1, 11))
        bins = np.clip(np.searchsorted(edges, s, side="left") - 1, 0, 9)
        gap = np.zeros((n, 10))
        gap[np.arange(n), bins] = s - hit
        return np.abs(counts @ gap).sum(1) / counts.sum(1)

    drawn = {}
    for m, s in enumerate(scores.astype(np.float64)):
        top = replicates(s.max(1), (s.argmax(1) == y).astype(float))
        classwise = np.mean([replicates(s[:, j], (y == j).astype(float)) for j in range(k)], 0)
        for name, reps in (("top_label_ece", top), ("classwise_ece", classwise)):
            want = np.quantile(reps, [0.025, 0.975])
            np.testing.assert_allclose(np.asarray(got[name])[m], want, atol=3e-4)
            drawn[name, m] = reps
    for name in got:
        want = np.quantile(drawn[name, 1] - drawn[name, 0], [0.025, 0.975])
        np.testing.assert_allclose(paired[f"{name}_difference"][0], want, atol=3e-4)
    # the over-smoothed scores' class-wise interval lies above the calibrated ones'
    assert got["classwise_ece"][1, 0] > got["classwise_ece"][0, 1]
    with pytest.raises(ValueError, match="class scores"):
        multiclass_ece_intervals(scores[0], y, key=key)
