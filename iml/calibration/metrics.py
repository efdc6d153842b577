"""Metrics of binary or multiclass scores: the expected calibration error, which measures the
failure of Definition 1 (binned; the l1, l2 and max norms, and the debiased l2 estimator of
Kumar, Liang & Ma 2019), the Brier score, the log loss and the AUROC."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from iml import _validation as V
from iml._bootstrap import sort_order
from iml.calibration._checks import (
    as_float,
    as_labels,
    as_weights,
    check_bins,
    check_scores_labels,
    class_labels_invalid,
)
from iml.calibration.binning import BinnedStatistics, assign_bins, bin_edges, binned_statistics

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "auroc",
    "brier_score",
    "calibration_error_from_statistics",
    "expected_calibration_error",
    "mean_log_loss",
]


NORMS = ("l1", "l2", "max")
MULTICLASS_MODES = ("top_label", "classwise")


def check_norm(norm: str, debias: bool) -> None:
    V.check_choice("norm", norm, NORMS)
    if debias and norm != "l2":
        raise ValueError("debias is defined for norm='l2' only (Kumar, Liang & Ma 2019)")


def calibration_error_from_statistics(
    stats: BinnedStatistics, norm: str = "l1", debias: bool = False
) -> Array:
    """Binned calibration error from per-bin sums (batched over leading axes).

    With ``p_b`` the bin's share of the weight and ``d_b`` its mean score minus its event rate:
    ``l1`` is ``sum_b p_b |d_b|`` (the usual ECE), ``l2`` is ``sqrt(sum_b p_b d_b^2)`` and ``max``
    is ``max_b |d_b|`` over nonempty bins. With ``debias`` (``l2`` only) each squared gap is
    reduced by the sampling variance of the bin's event rate, ``r_b (1 - r_b) / (n_b - 1)``, the
    debiased estimator of Kumar, Liang & Ma (2019, "Verified Uncertainty Calibration"), and the
    square root is taken of its positive part; ``n_b`` is the bin's effective sample size
    ``(sum w)^2 / sum w^2`` (its count when unweighted), and bins with ``n_b <= 1`` keep their
    plug-in term.

    Args:
      stats: per-bin sums, arrays ``(..., n_bins)``.

    Returns:
      The calibration error, shape ``(...)``.
    """
    check_norm(norm, debias)
    filled = stats.count > 0
    safe_count = jnp.where(filled, stats.count, 1.0)
    gap = jnp.where(filled, (stats.score_sum - stats.label_sum) / safe_count, 0.0)
    share = stats.count / jnp.sum(stats.count, axis=-1, keepdims=True)
    if norm == "l1":
        return jnp.sum(share * jnp.abs(gap), axis=-1)
    if norm == "max":
        return jnp.max(jnp.abs(gap), axis=-1)
    sq = jnp.square(gap)
    if debias:
        rate = jnp.where(filled, stats.label_sum / safe_count, 0.0)
        n_eff = jnp.square(stats.count) / jnp.where(filled, stats.weight_sq_sum, 1.0)
        noise = rate * (1.0 - rate) / jnp.where(n_eff > 1.0, n_eff - 1.0, 1.0)
        sq = sq - jnp.where(n_eff > 1.0, noise, 0.0)
        return jnp.sqrt(jnp.maximum(jnp.sum(share * sq, axis=-1), 0.0))
    return jnp.sqrt(jnp.sum(share * sq, axis=-1))


def _binary_ece(
    scores: Array,
    labels: Array,
    weights: Array,
    n_bins: int,
    strategy: str,
    norm: str,
    debias: bool,
) -> Array:
    edges = bin_edges(scores, n_bins, strategy)
    stats = binned_statistics(scores, labels, assign_bins(scores, edges), n_bins, weights)
    return calibration_error_from_statistics(stats, norm, debias)


def expected_calibration_error(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    sample_weight: ArrayLike | None = None,
    *,
    norm: str = "l1",
    debias: bool = False,
    multiclass: str = "top_label",
) -> Array:
    """Expected calibration error: the binned distance of the calibration curve from the diagonal.

    Measures the failure of Definition 1 (``a = P(y | a)``). See
    :func:`calibration_error_from_statistics` for the norms and the debiased estimator.

    Args:
      scores: binary positive-class scores ``(n,)`` or multiclass scores ``(n, k)``.
      labels: ``{0, 1}`` labels ``(n,)``, or class indices in ``[0, k)`` for multiclass.
      norm: ``"l1"`` (ECE), ``"l2"`` (RMS calibration error) or ``"max"`` (MCE).
      debias: the debiased ``l2`` estimator of Kumar, Liang & Ma (2019).
      multiclass: for ``(n, k)`` scores, ``"top_label"`` (calibration of the top score as the
        probability that the top class is right) or ``"classwise"`` (the mean over classes of the
        binary error of class ``j``'s scores against ``labels == j``).

    Returns:
      A scalar.
    """
    check_bins(n_bins, strategy)
    V.check_choice("multiclass", multiclass, MULTICLASS_MODES)
    check_scores_labels(scores, labels, sample_weight, n_bins)
    check_norm(norm, debias)
    return _expected_calibration_error(
        scores, labels, sample_weight, n_bins, strategy, norm, debias, multiclass
    )


@functools.partial(jax.jit, static_argnums=(3, 4, 5, 6, 7))
def _expected_calibration_error(
    scores, labels, sample_weight, n_bins, strategy, norm, debias, multiclass
) -> Array:
    s = as_float(scores)
    w = as_weights(sample_weight, s)
    y = jnp.asarray(labels)
    if s.ndim == 1:
        return _binary_ece(s, y, w, n_bins, strategy, norm, debias)
    if multiclass == "top_label":
        correct = jnp.argmax(s, axis=-1) == y
        error = _binary_ece(jnp.max(s, axis=-1), correct, w, n_bins, strategy, norm, debias)
    else:
        onehot = jax.nn.one_hot(y, s.shape[1], dtype=s.dtype)
        per_class = jax.vmap(
            lambda sk, yk: _binary_ece(sk, yk, w, n_bins, strategy, norm, debias), in_axes=1
        )(s, onehot)
        error = jnp.mean(per_class)
    return jnp.where(class_labels_invalid(y, s.shape[1]), jnp.nan, error)


def _weighted_mean(values: Array, weights: Array) -> Array:
    return jnp.sum(weights * values) / jnp.sum(weights)


def _inputs(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None
) -> tuple[int, Array, Array, Array]:
    """Validated binary ``(n,)`` or multiclass ``(n, k)`` input: ``(ndim, scores, weights,
    labels)``."""
    ndim = check_scores_labels(scores, labels, sample_weight, None)
    s = as_float(scores)
    return ndim, s, as_weights(sample_weight, s), jnp.asarray(labels)


def brier_score(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
) -> Array:
    """Weighted mean squared error of binary ``(n,)`` or multiclass ``(n, k)`` scores, a scalar:
    ``(a - y)^2`` (binary) or ``sum_k (a_k - 1{y=k})^2``."""
    ndim, s, w, y = _inputs(scores, labels, sample_weight)
    if ndim == 1:
        return _weighted_mean(jnp.square(s - as_labels(y, s)), w)
    per_obs = jnp.sum(jnp.square(s - jax.nn.one_hot(y, s.shape[1], dtype=s.dtype)), axis=-1)
    return jnp.where(class_labels_invalid(y, s.shape[1]), jnp.nan, _weighted_mean(per_obs, w))


def mean_log_loss(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
) -> Array:
    """Weighted mean cross-entropy ``-log a_y`` of binary ``(n,)`` or multiclass ``(n, k)`` scores,
    a scalar (no clipping: a score of 0 on the true class gives ``inf``)."""
    ndim, s, w, y = _inputs(scores, labels, sample_weight)
    if ndim == 1:
        y = as_labels(y, s)
        per_obs = jnp.where(y == 1, -jnp.log(s), -jnp.log1p(-s))
        return _weighted_mean(jnp.where(jnp.isnan(y), jnp.nan, per_obs), w)
    per_obs = -jnp.log(jnp.take_along_axis(s, y[:, None].astype(jnp.int32), axis=-1)[:, 0])
    return jnp.where(class_labels_invalid(y, s.shape[1]), jnp.nan, _weighted_mean(per_obs, w))


def _binary_auroc(scores: Array, positive: Array, weights: Array) -> Array:
    """Weighted Mann-Whitney statistic: P(score of a positive > of a negative) + P(tie) / 2.
    In score order, a score's ties run from the first position holding its value to the last;
    the negatives' weight below it and among its ties are differences of their running sum. The
    sums do not depend on the order within ties, so the order need not be stable."""
    order = sort_order(scores, stable=False)
    s_sorted = scores[order]
    neg_w = (weights * (1.0 - positive))[order]
    pos_w = (weights * positive)[order]
    cum = jnp.concatenate([jnp.zeros(1, neg_w.dtype), jnp.cumsum(neg_w)])
    index = jnp.arange(s_sorted.shape[0])
    changes = s_sorted[1:] != s_sorted[:-1]
    first = jnp.concatenate([jnp.array([True]), changes])  # a run of ties starts
    last = jnp.concatenate([changes, jnp.array([True])])  # and ends
    lo = jax.lax.cummax(jnp.where(first, index, 0))
    hi = jax.lax.cummin(jnp.where(last, index + 1, index.shape[0]), reverse=True)
    below, tied = cum[lo], cum[hi] - cum[lo]
    area = jnp.sum(pos_w * (below + 0.5 * tied)) / (jnp.sum(pos_w) * jnp.sum(neg_w))
    return jnp.where(jnp.any(jnp.isnan(scores)), jnp.nan, area)


def auroc(scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None) -> Array:
    """Area under the ROC curve of binary ``(n,)`` scores, a scalar in ``[0, 1]``, ties counted one
    half (the Mann-Whitney statistic).

    For multiclass scores ``(n, k)``, the unweighted mean over classes of the one-vs-rest AUROC
    (scikit-learn's ``multi_class="ovr", average="macro"``). NaN where a class has no positive or
    no negative observation.
    """
    ndim, s, w, y = _inputs(scores, labels, sample_weight)
    if ndim == 1:
        return _binary_auroc(s, as_labels(y, s), w)
    onehot = jax.nn.one_hot(y, s.shape[1], dtype=s.dtype)
    area = jnp.mean(jax.vmap(lambda sk, yk: _binary_auroc(sk, yk, w), in_axes=1)(s, onehot))
    return jnp.where(class_labels_invalid(y, s.shape[1]), jnp.nan, area)
