"""Loss calibration (Definition 2): the curve of Figure 3, the test, and the gap.

Scores are loss-calibrated when no wholesale switch of a bin's scores to another single score
reduces the loss; by Proposition 4 that holds exactly when the labels, given the scores, are
Bernoulli with the loss-corrected scores as their means. :func:`loss_calibration_test` tests
that, with its power against a stated alternative and the size of the miss; the curve plots the
bins against the theoretical map ``c`` (Proposition 2). The per-bin loss sums of the wholesale
switch (:class:`LossSums`, linear in the weights) give the loss-calibration gap that
:mod:`iml.calibration.across_betas` reports beside the ECE for many class weights at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml._bootstrap import check_bootstrap, percentile_interval
from iml.calibration._checks import (
    as_float,
    as_labels,
    as_weights,
    check_binary,
    check_multiclass,
    check_n_bins,
)
from iml.calibration.binning import (
    assign_bins,
    bin_edges,
    bin_matrix,
    bin_sums,
    merged_bins,
    unstack,
)
from iml.calibration.curves import calibration_curve
from iml.spec import LossLike, LossSpec, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "MIN_COUNT",
    "POWER_ODDS",
    "LossCalibrationCurve",
    "LossCalibrationTest",
    "calibration_test",
    "holm_adjusted",
    "loss_calibration_curve",
    "loss_calibration_test",
    "loss_calibration_verdict",
]


def _binary_loss(loss: LossLike) -> LossSpec:
    """The one binary loss that loss calibration is judged against (:func:`iml.loss_spec`)."""
    spec = _one_loss(loss)
    if spec.multiclass:
        raise ValueError(f"loss must be a binary loss here; got the {spec.describe()}")
    return spec


def _one_loss(loss: LossLike) -> LossSpec:
    spec = loss_spec(loss)
    if spec.batch_shape:
        raise ValueError(
            f"loss must be one loss, not a batch of shape {spec.batch_shape}; map over a batch "
            "with jax.vmap"
        )
    return spec


def _label_losses(spec: LossSpec) -> tuple[Callable[[Array], Array], Callable[[Array], Array]]:
    """``a -> L(a, 1)`` and ``a -> L(a, 0)``."""
    return (lambda a: spec.loss(a, jnp.ones_like(a)), lambda a: spec.loss(a, jnp.zeros_like(a)))


class LossSums(NamedTuple):
    """Per-bin sums that determine the loss-calibration gap (all linear in the weights)."""

    count: Array  # sum w
    positives: Array  # sum w y
    loss_pos: Array  # sum w y L(a, 1)
    loss_neg: Array  # sum w (1 - y) L(a, 0)


def loss_matrices(bins: Array, n_bins: int, l_pos: Array, l_neg: Array) -> tuple[Array, Array]:
    """Bin matrices ``(M0, M1)`` with ``LossSums(w, y) = w @ M0 + (w * y) @ M1`` (all linear).

    Rows: count, positives, finite parts of ``y L(a, 1)`` and ``(1 - y) L(a, 0)``, and flags of
    infinite and NaN losses, so that an infinite loss (a score of 0 or 1 with the other label)
    makes its own bin's sum infinite without ``0 * inf`` leaking into other bins.
    """
    fin_pos = jnp.where(jnp.isfinite(l_pos), l_pos, 0.0)
    fin_neg = jnp.where(jnp.isfinite(l_neg), l_neg, 0.0)
    inf_pos = (l_pos == jnp.inf).astype(l_pos.dtype)
    inf_neg = (l_neg == jnp.inf).astype(l_neg.dtype)
    nan_pos = jnp.isnan(l_pos).astype(l_pos.dtype)
    nan_neg = jnp.isnan(l_neg).astype(l_neg.dtype)
    one, zero = jnp.ones_like(fin_pos), jnp.zeros_like(fin_pos)
    f0 = jnp.stack([one, zero, zero, fin_neg, zero, inf_neg, nan_neg])
    f1 = jnp.stack([zero, one, fin_pos, -fin_neg, inf_pos, -inf_neg, nan_pos - nan_neg])
    return bin_matrix(f0, bins, n_bins), bin_matrix(f1, bins, n_bins)


def loss_sums(weights: Array, labels: Array, matrices: tuple[Array, Array]) -> LossSums:
    """Per-bin loss sums for weights and labels ``(..., n)`` (broadcast), ``(..., n_bins)``."""
    m0, m1 = matrices
    hp = jax.lax.Precision.HIGHEST
    y = labels.astype(weights.dtype)
    flat = jnp.matmul(weights, m0, precision=hp) + jnp.matmul(weights * y, m1, precision=hp)
    out = flat.reshape(*flat.shape[:-1], 7, -1)
    count, positives, loss_pos, loss_neg, inf_pos, inf_neg, nan = unstack(out)
    nan = nan > 0
    loss_pos = jnp.where(nan, jnp.nan, jnp.where(inf_pos > 0, jnp.inf, loss_pos))
    loss_neg = jnp.where(nan, jnp.nan, jnp.where(inf_neg > 0, jnp.inf, loss_neg))
    return LossSums(count, positives, loss_pos, loss_neg)


def loss_reduction(
    sums: LossSums, optimal: Callable[[Array], Array], loss_pos: Callable, loss_neg: Callable
) -> tuple[Array, Array]:
    """Per bin: the loss of the bin's scores minus the loss of the best single alternative
    ``a' = c(event rate)`` (Definition 2's wholesale switch). Returns (reduction, a')."""
    filled = sums.count > 0
    rate = jnp.where(filled, sums.positives / jnp.where(filled, sums.count, 1.0), 0.5)
    best = optimal(rate)
    negatives = sums.count - sums.positives
    alt = jnp.where(sums.positives > 0, sums.positives * loss_pos(best), 0.0) + jnp.where(
        negatives > 0, negatives * loss_neg(best), 0.0
    )
    # Only a truly empty bin counts 0; a NaN count (invalid input under jit) stays NaN.
    empty = sums.count == 0
    reduction = jnp.where(empty, 0.0, sums.loss_pos + sums.loss_neg - alt)
    return reduction, jnp.where(filled, best, jnp.nan)


class LossCalibrationCurve(NamedTuple):
    """The loss calibration curve of the paper's Figure 3 (a pytree).

    Attributes:
      mean_score: mean raw score per bin, ``(n_bins,)`` (NaN if empty).
      event_rate: rate of label 1 per bin, the bin's empirical posterior (NaN if empty).
      count: sum of weights per bin.
      edges: bin edges, ``(n_bins + 1,)``.
      optimal_score: ``c(event_rate)``, the score the rule assigns to the bin's empirical
        posterior (NaN if empty). Loss calibration (Def. 2) holds when it matches ``mean_score``.
      posterior_grid: posteriors ``gamma`` (logit-spaced on ``[1e-4, 1 - 1e-4]``), ``(n_grid,)``.
      optimal_score_grid: the theoretical map ``c(gamma)`` on the grid: plotting
        ``(optimal_score_grid, posterior_grid)`` next to ``(mean_score, event_rate)`` is Fig. 3.
      event_rate_interval: bootstrap interval of ``event_rate``, ``(2, n_bins)``, or ``None``.
    """

    mean_score: Array
    event_rate: Array
    count: Array
    edges: Array
    optimal_score: Array
    posterior_grid: Array
    optimal_score_grid: Array
    event_rate_interval: Array | None = None


def loss_calibration_curve(
    scores: ArrayLike,
    labels: ArrayLike,
    loss: LossLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    sample_weight: ArrayLike | None = None,
    *,
    n_grid: int = 200,
    n_bootstrap: int = 0,
    key: Array | None = None,
    confidence: float = 0.95,
) -> LossCalibrationCurve:
    """The empirical calibration curve against the theoretical map ``c`` (Figure 3, Prop. 2).

    If the scores are loss-calibrated (Definition 2), the points ``(mean_score, event_rate)`` lie
    on the curve ``a = c(gamma)``: for a class weight ``beta`` it is ``c^beta`` of eq.
    ``choice-b1``; for any other differentiable loss, the generic rule
    ``iml.scoring.optimal_score_for_loss``.

    Args:
      scores, labels, loss: as :func:`loss_calibration_test`.
      n_grid: number of points of the theoretical curve.
      n_bootstrap: replicates for the event rates' percentile intervals (0 for none).
    """
    spec = _binary_loss(loss)
    curve = calibration_curve(
        scores,
        labels,
        n_bins,
        strategy,
        sample_weight,
        n_bootstrap=n_bootstrap,
        key=key,
        confidence=confidence,
    )
    grid = jax.nn.sigmoid(jnp.linspace(-9.21024, 9.21024, n_grid))  # logit(1e-4) .. logit(1-1e-4)
    filled = curve.count > 0
    best = jnp.where(filled, spec.optimal_score(jnp.where(filled, curve.event_rate, 0.5)), jnp.nan)
    return LossCalibrationCurve(
        curve.mean_score,
        curve.event_rate,
        curve.count,
        curve.edges,
        best,
        grid,
        spec.optimal_score(grid),
        curve.event_rate_interval,
    )


# The test's defaults: decile bins merged until each holds this many expected positives and
# negatives (where the chi-square reference is close; docs/results/loss_calibration_tests), and
# the alternative its power is stated against: true odds twice or half the corrected odds.
MIN_COUNT = 10
POWER_ODDS = 2.0
_POWER_DRAWS = 2000


class LossCalibrationTest(NamedTuple):
    """Result of :func:`loss_calibration_test` (a pytree; a batch of tests adds leading axes).

    Attributes:
      statistic: ``T = sum_s (O_s - E_s)^2 / V_s`` over the test's bins ``s``: the observed and
        expected (weighted) positives and the variance of ``O_s`` under H0.
      p_value: ``P(chi2_S >= T)``, with ``S`` the bins holding observations; NaN when not
        testable.
      n_bins: ``S`` (int32).
      testable: ``S >= 2``: with fewer bins the test has nothing to compare, and its verdict is
        "not testable", never "not rejected".
      power: the chance of rejecting at ``level`` were the true odds ``POWER_ODDS`` times (or
        ``1 / POWER_ODDS`` times) the corrected odds, the smaller of the two, from the normal
        approximation of each bin's count under that alternative; NaN when not testable.
      calibration_error: ``sum_s |O_s - E_s| / sum_i w_i``, the binned calibration error of the
        loss-corrected scores on the test's bins (the effect size).
      null_calibration_error: ``sqrt(2 / pi) sum_s sqrt(V_s) / sum_i w_i``, what
        ``calibration_error`` averages for loss-calibrated scores at this N and these bins
        (each bin's residual sum taken as normal).
      calibration_error_interval: percentile bootstrap interval of ``calibration_error``,
        ``(2,)``: each bin's residual sum drawn from its normal approximation under resampling
        (bins fixed), ``N(O_s - E_s, sum_{i in s} w_i^2 (y_i - g_i)^2)``; NaN with
        ``n_bootstrap = 0``. Like the estimate, it is biased upwards by the bins' noise: read it
        beside ``null_calibration_error``, the level that noise alone gives.
      observed, expected, variance, count: ``O_s``, ``E_s``, ``V_s`` and ``sum_{i in s} w_i``
        per bin, ``(n_bins,)`` (bins past ``S`` are empty).
      bins: each observation's bin, ``(n,)``.
    """

    statistic: Array
    p_value: Array
    n_bins: Array
    testable: Array
    power: Array
    calibration_error: Array
    null_calibration_error: Array
    calibration_error_interval: Array
    observed: Array
    expected: Array
    variance: Array
    count: Array
    bins: Array


def loss_calibration_test(
    scores: ArrayLike,
    labels: ArrayLike,
    loss: LossLike,
    n_bins: int = 10,
    sample_weight: ArrayLike | None = None,
    *,
    min_count: float = MIN_COUNT,
    level: float = 0.05,
    n_bootstrap: int = 200,
    key: Array | None = None,
    confidence: float = 0.95,
) -> LossCalibrationTest:
    """Are these scores loss-calibrated for this loss (Definition 2)? One test, everywhere.

    By Proposition 4, scores that are loss-calibrated for ``L`` have labels
    ``y ~ Bernoulli(g)`` given the scores, with ``g = (c^L)^{-1}(a)`` the loss-corrected score
    (Corollary 1). The test checks that: it bins the observations by ``g`` into ``n_bins``
    quantile bins, merges adjacent bins until each holds ``min_count`` expected positives and
    negatives (:func:`iml.calibration.binning.merged_bins`), and compares each bin's positives
    ``O_s = sum w y`` with their expectation ``E_s = sum w g`` under H0::

        T = sum_s (O_s - E_s)^2 / V_s,    V_s = sum_{i in s} w_i^2 g_i (1 - g_i),

    a Hosmer-Lemeshow statistic whose posteriors are given rather than fitted, so that under H0
    it is approximately chi-square with ``S`` (the number of bins) degrees of freedom; its size
    and power are simulated in ``docs/results/loss_calibration_tests``. The bins depend on the
    scores alone.

    A multiclass loss tests each class's one-vs-rest posteriors and the top label: the result
    has a leading axis of ``n_classes + 1`` tests (the classes in order, then the top label),
    each with its own bins; :func:`holm_adjusted` combines them into one familywise verdict.

    Args:
      scores: raw scores of a model trained with ``loss``: ``(n,)`` in ``[0, 1]``, or
        ``(n, k)`` for a multiclass loss.
      labels: ``{0, 1}`` labels, or class indices ``[0, k)``, ``(n,)``.
      loss: the loss the model was trained with, as :func:`iml.loss_spec` reads it.
      n_bins: quantile bins before merging (at most the number of bins tested).
      min_count: the least expected positives and negatives of a merged bin.
      level: the level at which ``power`` is computed.
      n_bootstrap: draws of the calibration error's interval (0 for none).
      key: ``jax.random`` key of the power's and the interval's draws (default: key 0, so a
        result is reproducible).
      confidence: the coverage of the interval.

    Returns:
      A :class:`LossCalibrationTest`.
    """
    spec = _one_loss(loss)
    if spec.multiclass:
        check_multiclass(scores, labels, sample_weight, n_bins)
    else:
        check_binary(scores, labels, sample_weight, n_bins)
    posteriors = spec.loss_corrected_score(as_float(scores))
    return calibration_test(
        posteriors, labels, n_bins, sample_weight, min_count=min_count, level=level,
        n_bootstrap=n_bootstrap, key=key, confidence=confidence,
    )  # fmt: skip


def calibration_test(
    posteriors: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    sample_weight: ArrayLike | None = None,
    *,
    min_count: float = MIN_COUNT,
    level: float = 0.05,
    n_bootstrap: int = 200,
    key: Array | None = None,
    confidence: float = 0.95,
) -> LossCalibrationTest:
    """:func:`loss_calibration_test` of stated posteriors: are the labels ``Bernoulli(g)``?

    ``posteriors`` are ``(n,)`` probabilities of label 1, or ``(n, k)`` rows of class
    probabilities (then ``k`` one-vs-rest tests and the top label's, as in
    :func:`loss_calibration_test`). A NaN posterior (a rule with no inverse at some score)
    makes the result NaN rather than a verdict.
    """
    check_n_bins(n_bins)
    g = V.concrete_value(posteriors)
    multiclass = np.ndim(posteriors) == 2
    if g is not None and not np.isnan(g).any():
        if multiclass:
            check_multiclass(g, labels, sample_weight, n_bins)
        else:
            check_binary(g, labels, sample_weight, n_bins, scores_name="posteriors")
    V.check_interval("min_count", min_count, 0.0, np.inf, open_low=True, open_high=True)
    V.check_interval("level", level, 0.0, 1.0, open_low=True, open_high=True)
    V.check_count("n_bootstrap", n_bootstrap, 0)
    key = jax.random.key(0) if key is None else key
    check_bootstrap(n_bootstrap, key, confidence)
    g = as_float(posteriors)
    if multiclass:
        k = g.shape[1]
        classes = jnp.asarray(labels)
        top = jnp.argmax(g, axis=1)
        g = jnp.concatenate([g.T, jnp.max(g, axis=1)[None]])  # (k + 1, n)
        y = jnp.concatenate([classes[None] == jnp.arange(k)[:, None], (classes == top)[None]])
        y = jnp.where((classes >= 0) & (classes < k), y.astype(g.dtype), jnp.nan)
        return calibration_test_in_parts(g, y, sample_weight, key, min_count, level, n_bins,
                                         n_bootstrap, confidence)  # fmt: skip
    return calibration_test_in_parts(
        g, labels, sample_weight, key, min_count, level, n_bins, n_bootstrap, confidence
    )


def calibration_test_in_parts(
    g: Array,
    labels: ArrayLike,
    weight: ArrayLike | None,
    key: Array,
    min_count: ArrayLike,
    level: ArrayLike,
    n_bins: int,
    n_bootstrap: int,
    confidence: float = 0.95,
    deciles: Array | None = None,
) -> LossCalibrationTest:
    """:func:`calibration_test` of checked posteriors ``g`` (traceable; ``n_bins``,
    ``n_bootstrap`` and ``confidence`` static) in parts: the sums over the ``n`` observations
    (a program for each ``n``), the test from them (one program whatever ``n``), and each
    observation's merged bin.

    ``g`` is ``(n,)`` or ``(m, n)`` (then ``m`` tests, a leading axis ``m`` on every field), with
    ``labels`` of its shape or ``(n,)`` shared by the ``m`` tests (``{0, 1}``; another label
    makes the test NaN), and ``weight`` ``(n,)`` or None for unit weights; ``deciles``, where
    given, each observation's quantile bin of ``g`` (its shape)."""
    sums, impossible, quantile = _observation_sums(g, labels, weight, n_bins, deciles)
    test, group = _test_of_sums_program(
        sums, impossible, key, min_count, level, n_bins, n_bootstrap, confidence
    )
    return test._replace(bins=jnp.take_along_axis(group, quantile, axis=-1))


@functools.partial(jax.jit, static_argnums=(3,))
def _observation_sums(g, labels, weight, n_bins, deciles=None):
    row = g if g.ndim == 1 else g[0]
    y, w = as_labels(labels, row), as_weights(weight, row)

    def one(gk, yk, quantile):
        if quantile is None:
            quantile = assign_bins(gk, bin_edges(gk, n_bins, "quantile"))
        return (*_decile_sums(gk, yk, w, quantile, n_bins), quantile)

    if g.ndim == 1:
        return one(g, y, deciles)
    rows = y if y.ndim == 2 else None  # else one row of labels for every test
    # Rows in turn: XLA's CPU runs one product per row several times faster than a batched one.
    return jax.lax.map(lambda a: one(a[0], y if a[1] is None else a[1], a[2]), (g, rows, deciles))


def _decile_sums(g: Array, y: Array, w: Array, quantile: Array, n_bins: int):
    """Every sum the test needs, per decile, in one pass ``(11, n_bins)``: the expected
    positives and negatives (unweighted, for merging), the weights, observed and expected
    positives, their variance under H0, the squared residuals, and the mean and variance of the
    positives were the odds ``POWER_ODDS`` times, or ``1 / POWER_ODDS`` times, g's; and whether
    any label is one that H0 gives no chance (a positive at 0, a negative at 1)."""
    r = POWER_ODDS
    up, down = r * g / (1.0 + (r - 1.0) * g), g / (r - (r - 1.0) * g)
    ww = w * w
    rows = [g, 1.0 - g, w, w * y, w * g, ww * g * (1.0 - g), ww * (y - g) ** 2,
            w * up, ww * up * (1.0 - up), w * down, ww * down * (1.0 - down)]  # fmt: skip
    sums = bin_sums(jnp.stack(rows), quantile, n_bins)
    impossible = jnp.any((w > 0) & (((g == 0) & (y == 1)) | ((g == 1) & (y == 0))))
    return sums, impossible


def _test_of_sums(
    by_decile, impossible, key, min_count, level, n_bins, n_bootstrap, confidence
) -> tuple[LossCalibrationTest, Array]:
    """The test from its per-decile sums (no array of length N here): the merged bins, the
    statistic, its p-value and power, the effect size; ``bins`` left for the caller."""
    group = merged_bins(by_decile[:1], by_decile[1:2], min_count)
    dtype = by_decile.dtype
    merged = jnp.matmul(by_decile, jax.nn.one_hot(group, n_bins, dtype=dtype),
                        precision=jax.lax.Precision.HIGHEST)  # fmt: skip
    count, observed, expected, variance, spread = merged[2:7]
    n_used = jnp.sum(count > 0).astype(jnp.int32)
    testable = n_used >= 2
    held = variance > 0

    def statistic_of(o: Array) -> Array:
        gap = o - expected
        # A bin whose posteriors are all 0 or 1 has no variance: any miss there is impossible
        # under H0 (an infinite statistic), and a hit adds nothing.
        miss = jnp.abs(gap) > 1e-6 * jnp.maximum(count, 1.0)
        term = jnp.where(held, gap**2 / jnp.where(held, variance, 1.0), 0.0)
        term = jnp.where(~held & miss, jnp.inf, term)
        return jnp.sum(term, axis=-1)

    statistic = jnp.where(impossible, jnp.inf, statistic_of(observed))
    p_value = jnp.where(testable, chi2_sf(statistic, n_used, n_bins), jnp.nan)

    key_power, key_interval = jax.random.split(key)
    z = jax.random.normal(key_power, (_POWER_DRAWS, n_bins), dtype)

    def power_against(mean: Array, var: Array) -> Array:
        rejected = chi2_sf(statistic_of(mean + jnp.sqrt(var) * z), n_used, n_bins) <= level
        return jnp.mean(rejected.astype(dtype))

    power = jnp.minimum(power_against(*merged[7:9]), power_against(*merged[9:11]))
    power = jnp.where(testable, power, jnp.nan)

    total = jnp.sum(count)
    calibration_error = jnp.sum(jnp.abs(observed - expected)) / total
    null_error = jnp.sqrt(2.0 / jnp.pi) * jnp.sum(jnp.sqrt(variance)) / total
    if n_bootstrap:
        draws = jax.random.normal(key_interval, (n_bootstrap, n_bins), dtype)
        resampled = jnp.abs(observed - expected + jnp.sqrt(spread) * draws)
        interval = percentile_interval(jnp.sum(resampled, axis=-1) / total, confidence)
    else:
        interval = jnp.full((2,), jnp.nan, dtype)
    test = LossCalibrationTest(
        statistic, p_value, n_used, testable, power, calibration_error, null_error, interval,
        observed, expected, variance, count, jnp.zeros((0,), jnp.int32),
    )  # fmt: skip
    return test, group


@functools.partial(jax.jit, static_argnums=(5, 6, 7))
def _test_of_sums_program(by_decile, impossible, key, min_count, level, n_bins, n_bootstrap,
                          confidence):  # fmt: skip
    if by_decile.ndim == 3:  # the tests of a multiclass loss
        return jax.vmap(
            lambda s, i: _test_of_sums(s, i, key, min_count, level, n_bins, n_bootstrap, confidence)
        )(by_decile, impossible)
    return _test_of_sums(
        by_decile, impossible, key, min_count, level, n_bins, n_bootstrap, confidence
    )


def chi2_sf(x: Array, k: Array, max_k: int) -> Array:
    """``P(chi2_k >= x)`` for an integer ``k`` in ``[1, max_k]`` (traced), by the closed forms
    (with ``h = x / 2``): ``e^{-h} sum_{i < k/2} h^i / i!`` for even ``k``, and
    ``erfc(sqrt(h)) + e^{-h} sum_{i < (k-1)/2} h^{i+1/2} / Gamma(i + 3/2)`` for odd ``k``; a
    few exponentials, where the general incomplete gamma function compiles to long loops."""
    h = x / 2.0
    i = jnp.arange(max_k // 2 + 1, dtype=x.dtype)
    hh = h[..., None]
    use = i < (k // 2)

    def series(power: Array) -> Array:
        log = jax.scipy.special.xlogy(power, hh) - jax.scipy.special.gammaln(power + 1) - hh
        return jnp.sum(jnp.where(use, jnp.exp(log), 0.0), axis=-1)

    odd = jax.scipy.special.erfc(jnp.sqrt(h)) + series(i + 0.5)
    sf = jnp.where(k % 2 == 0, series(i), odd)
    return jnp.where(jnp.isposinf(x), 0.0, jnp.clip(sf, 0.0, 1.0))


@jax.jit
def holm_adjusted(p_value: ArrayLike) -> Array:
    """Holm's step-down adjusted p-values of a family of tests ``(m,)``, valid whatever their
    dependence: ``max_{j <= i} min(1, (m' - j + 1) p_(j))`` in sorted order, with ``m'`` the
    tests that have a p-value. A NaN p-value (a test that is not testable) stays NaN and does
    not count; rejecting where the adjusted value is at most ``alpha`` controls the chance of
    rejecting any true hypothesis at ``alpha``."""
    p = as_float(p_value)
    missing = jnp.isnan(p)
    m = jnp.sum(~missing)
    filled = jnp.where(missing, jnp.inf, p)
    order = jnp.argsort(filled)
    ranked = jnp.take(filled, order)
    factor = jnp.maximum(m - jnp.arange(p.shape[0]), 1).astype(ranked.dtype)
    adjusted = jax.lax.cummax(jnp.minimum(1.0, factor * ranked))
    return jnp.where(missing, jnp.nan, jnp.zeros_like(p).at[order].set(adjusted))


def loss_calibration_verdict(
    p_value: float, n_bins: int, power: float, level: float = 0.05, what: str = "bins"
) -> str:
    """The verdict a report prints: ``"rejected (p = 3.1e-05, 6 bins)"``, ``"not rejected (p =
    0.41, 6 bins; power 0.93 against odds x2)"`` or ``"not testable (1 bin)"``.

    ``p_value`` is the p-value the verdict is read from (familywise-adjusted where a report
    tests several losses); ``what`` names the units (``"bins"``, ``"signals"``).
    """
    n = int(n_bins)
    if n < 2 or not np.isfinite(p_value):
        return f"not testable ({n} {what[:-1] if n == 1 else what})"
    # a p-value that underflows float32 is stated as a bound, not as 0
    p = f"p = {p_value:.2g}" if p_value > 0 else f"p < {np.finfo(np.float32).tiny:.0e}"
    if p_value <= level:
        return f"rejected ({p}, {n} {what})"
    odds = f"{POWER_ODDS:g}"
    return f"not rejected ({p}, {n} {what}; power {power:.2f} against odds x{odds})"
