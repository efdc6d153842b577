"""Loss calibration (Definition 2): the gap, the curve of Figure 3, the test, and its power.

Scores are loss-calibrated when no wholesale switch of a bin's scores to another single score
reduces the loss. The gap measures the best such switch per bin, against the rule applied to the
bin's event rate (``c^beta`` of eq. ``choice-b1`` for a class weight); the curve plots the bins
against the theoretical map ``c`` (Proposition 2); the test judges the gap against its
distribution under H0, simulated from the loss-corrected scores (Proposition 4). The per-bin loss
sums (:class:`LossSums`) are linear in the weights, so that bootstrap replicates, simulated labels
and, in :mod:`iml.calibration.beta_sweep`, many class weights cost one matrix product each.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml._bootstrap import bootstrap_counts, check_bootstrap, percentile_interval
from iml.calibration._checks import (
    as_float,
    as_labels,
    as_weights,
    check_binary,
    check_bins,
)
from iml.calibration.binning import (
    assign_bins,
    bin_edges,
    bin_matrix,
    unstack,
    weighted_bin_sums,
)
from iml.calibration.curves import calibration_curve
from iml.spec import LossLike, LossSpec, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "LossCalibrationCurve",
    "LossCalibrationTest",
    "TestPower",
    "loss_calibration_curve",
    "loss_calibration_power",
    "loss_calibration_test",
]


def _binary_loss(loss: LossLike) -> LossSpec:
    """The one binary loss that loss calibration is judged against (:func:`iml.loss_spec`)."""
    spec = loss_spec(loss)
    if spec.multiclass:
        raise ValueError(f"loss must be a binary loss here; got the {spec.describe()}")
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


class LossCalibrationTest(NamedTuple):
    """Result of :func:`loss_calibration_test` (a pytree).

    Attributes:
      loss_reduction: per bin, the loss that switching all of the bin's scores to ``a'`` would
        save, divided by the total weight (so the bins sum to ``gap``); 0 for empty bins. It can be
        negative: the bin's own scores may discriminate better than any single score.
      gap: the total per observation, the test statistic.
      p_value: parametric-bootstrap p-value under H0 (the scores are loss-calibrated).
      gap_interval: nonparametric-bootstrap percentile interval of ``gap``, ``(2,)``.
      null_gaps: the gaps of the labels simulated under H0, ``(n_bootstrap,)``.
      optimal_score: ``a' = c(event rate)`` per bin (NaN if empty).
      count: sum of weights per bin.
      edges: bin edges.
    """

    loss_reduction: Array
    gap: Array
    p_value: Array
    gap_interval: Array
    null_gaps: Array
    optimal_score: Array
    count: Array
    edges: Array


def loss_calibration_test(
    scores: ArrayLike,
    labels: ArrayLike,
    loss: LossLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    sample_weight: ArrayLike | None = None,
    *,
    n_bootstrap: int = 200,
    key: Array | None = None,
    confidence: float = 0.95,
) -> LossCalibrationTest:
    """Test of loss calibration (Definition 2) by a wholesale switch of each bin's scores.

    For each bin ``b`` (scores binned as in :func:`calibration_curve`), the statistic compares the
    loss of the bin's own scores with the loss of the best single alternative, the rule applied to
    the bin's empirical posterior, ``a'_b = c(event rate of b)``::

        reduction_b = sum_{i in b} w_i [L(a_i, y_i) - L(a'_b, y_i)],
        gap = sum_b reduction_b / sum_i w_i.

    Definition 2 says no switch reduces the loss. With binned, non-constant scores the gap of a
    loss-calibrated model is not exactly 0 (negative where scores discriminate within a bin,
    positive by sampling noise), so it is judged against its distribution under H0, obtained by a
    parametric bootstrap: by Prop. 4, under H0 each label is ``y* ~ Bernoulli(c^{-1}(a))`` (the
    loss-corrected score; for a general loss ``iml.scoring.loss_corrected_score_for_loss``); the
    gap is recomputed on the simulated labels (bins fixed) and
    ``p = (1 + #{null gap >= observed gap}) / (1 + n_bootstrap)``. The interval of the gap
    resamples observations (nonparametric bootstrap, bins fixed).

    Under jit, with unvalidated input, a NaN loss-corrected score (a general loss whose rule is not
    invertible at some score) makes the p-value NaN.

    Args:
      scores: raw positive-class scores ``(n,)`` in ``[0, 1]`` of a model trained with the loss.
      labels: ``{0, 1}`` labels ``(n,)``.
      loss: the binary loss the model was trained with, as :func:`iml.loss_spec` reads it: a
        class weight ``beta`` in ``(0, 1)`` (the beta-weighted log loss, eq. ``b-loss-bin``;
        ``loss_spec("squared", beta=...)`` for the weighted Brier score), a
        :class:`iml.LossSpec`, a loss name or any differentiable ``L(a, y)``.
      n_bootstrap: replicates, for the null distribution and for the interval each.
      key: ``jax.random`` key (required).

    Returns:
      A :class:`LossCalibrationTest`. A score of exactly 0 or 1 with the opposite label makes the
      log-loss gap infinite (such a label is impossible under H0): ``p = 1 / (1 + n_bootstrap)``.
    """
    check_bins(n_bins, strategy)
    check_binary(scores, labels, sample_weight, n_bins)
    V.check_count("n_bootstrap", n_bootstrap)
    check_bootstrap(n_bootstrap, key, confidence)
    spec = _binary_loss(loss)
    return _loss_calibration_test(
        scores,
        labels,
        sample_weight,
        key,
        spec,
        n_bins,
        strategy,
        n_bootstrap,
        confidence,
    )


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8))
def _loss_calibration_test(
    scores, labels, sample_weight, key, spec, n_bins, strategy, n_bootstrap, confidence
) -> LossCalibrationTest:
    loss_pos, loss_neg = _label_losses(spec)
    a = as_float(scores)
    y = as_labels(labels, a)
    w = as_weights(sample_weight, a)
    edges = bin_edges(a, n_bins, strategy)
    bins = assign_bins(a, edges)
    matrices = loss_matrices(bins, n_bins, loss_pos(a), loss_neg(a))

    def gap_of(labels_: Array, weights_: Array) -> tuple[Array, Array]:
        sums = loss_sums(weights_, labels_, matrices)
        reduction, best = loss_reduction(sums, spec.optimal_score, loss_pos, loss_neg)
        return reduction / jnp.sum(weights_, axis=-1, keepdims=True), best

    reduction, best = gap_of(y, w)
    gap = jnp.sum(reduction)
    key_null, key_boot = jax.random.split(key)
    posterior = spec.loss_corrected_score(a)

    # H0 labels for all replicates at once (B x n); their gaps are one matrix product.
    uniforms = jax.random.uniform(key_null, (n_bootstrap, a.shape[0]), a.dtype)
    y_star = (uniforms < posterior).astype(a.dtype)
    null_gaps = jnp.sum(gap_of(y_star, w)[0], axis=-1)
    exceed = jnp.sum(null_gaps >= gap)
    p_value = (1.0 + exceed) / (1.0 + n_bootstrap)
    p_value = jnp.where(jnp.any(jnp.isnan(posterior)) | jnp.isnan(gap), jnp.nan, p_value)
    counts = bootstrap_counts(key_boot, a.shape[0], n_bootstrap)
    boot = jnp.sum(gap_of(y, w * counts)[0], axis=-1)
    interval = percentile_interval(boot, confidence)
    count = weighted_bin_sums(w, jnp.ones_like(w)[None], bins, n_bins)[0]
    return LossCalibrationTest(reduction, gap, p_value, interval, null_gaps, best, count, edges)


class TestPower(NamedTuple):
    """A test's rejection rate over simulated data sets (a pytree).

    Attributes:
      rate: the fraction of data sets in which the test rejected at ``1 - confidence``.
      standard_error: its Monte Carlo standard error ``sqrt(rate (1 - rate) / n)``.
      rejected: each data set's verdict ``(n_simulations,)``.
    """

    rate: Array
    standard_error: Array
    rejected: Array


def loss_calibration_power(
    scores: ArrayLike,
    true_loss: LossLike,
    tested_loss: LossLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    *,
    n_simulations: int = 200,
    n_bootstrap: int = 200,
    key: Array | None = None,
    confidence: float = 0.95,
) -> TestPower:
    """How often :func:`loss_calibration_test` under ``tested_loss`` rejects scores that are
    loss-calibrated under ``true_loss``: its power against that alternative at these scores.

    Each simulated data set keeps ``scores`` and draws labels ``y ~ Bernoulli(g)`` with
    ``g = (c^{true})^{-1}(a)`` (Proposition 4: the labels of a model calibrated under the true
    loss), then tests loss calibration under ``tested_loss``. With ``tested_loss == true_loss`` the
    rate is the test's size. A low power against a neighbouring loss (say beta = 1/2 when the
    truth is 10/11) says that a non-rejection cannot tell the two apart.

    Args:
      scores: raw positive-class scores ``(n,)`` in ``[0, 1]``, the scores to simulate labels for.
      true_loss, tested_loss: binary losses (as :func:`loss_calibration_test` reads ``loss``).
      n_bins, strategy, n_bootstrap, confidence: as :func:`loss_calibration_test`.
      n_simulations: simulated data sets.
      key: ``jax.random`` key (required).
    """
    check_bins(n_bins, strategy)
    a = V.concrete_value(scores)
    if a is not None:
        V.check_shape("scores", a, (np.shape(a)[0],))
        V.check_unit("scores", a)
    V.check_count("n_simulations", n_simulations)
    V.check_count("n_bootstrap", n_bootstrap)
    check_bootstrap(n_bootstrap, key, confidence)
    truth, tested = _binary_loss(true_loss), _binary_loss(tested_loss)
    return _loss_calibration_power(
        scores, truth, tested, key, n_bins, strategy, n_simulations, n_bootstrap, confidence
    )


@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7, 8))
def _loss_calibration_power(
    scores, truth, tested, key, n_bins, strategy, n_simulations, n_bootstrap, confidence
) -> TestPower:
    a = as_float(scores)
    posterior = truth.loss_corrected_score(a)

    def one(k: Array) -> Array:
        k_labels, k_test = jax.random.split(k)
        y = (jax.random.uniform(k_labels, a.shape, a.dtype) < posterior).astype(jnp.int32)
        result = _loss_calibration_test(
            a, y, None, k_test, tested, n_bins, strategy, n_bootstrap, confidence
        )
        return result.p_value <= 1.0 - confidence

    rejected = jax.lax.map(one, jax.random.split(key, n_simulations))
    rate = jnp.mean(rejected.astype(jnp.float32))
    return TestPower(rate, jnp.sqrt(rate * (1.0 - rate) / n_simulations), rejected)
