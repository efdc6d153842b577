"""Bootstrap comparisons of calibration errors: percentile intervals of the ECE of many sets of
scores on the same resampled rows (binary, and top-label and class-wise for multiclass scores),
and the paired comparison of two ECEs (their difference and ratio)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml._bootstrap import (
    bootstrap_counts,
    bootstrap_rows,
    check_bootstrap,
    percentile_interval,
)
from iml.calibration._checks import (
    as_float,
    as_labels,
    check_binary,
    check_bins,
    check_n_bins,
)
from iml.calibration.binning import assign_bins, bin_edges
from iml.calibration.metrics import expected_calibration_error

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "ECEComparison",
    "compare_ece",
    "ece_intervals",
    "multiclass_ece_intervals",
    "paired_comparison",
]


def ece_intervals(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    *,
    n_bootstrap: int = 200,
    key: Array | None = None,
    confidence: float = 0.95,
    differences: ArrayLike | None = None,
) -> Array | tuple[Array, Array]:
    """Bootstrap percentile intervals of the ECE of every row of ``scores [m, N]``: ``[m, 2]``.

    Each replicate resamples the observations (multinomial counts, the same rows for every row
    of ``scores``, so rows compare on equal draws) with each row's bins held fixed at its own
    quantiles; the ECE is then one weighted sum per bin, a single matrix product for all
    replicates. The interval covers the evaluation data's sampling noise.

    Args:
      scores: ``[m, N]`` binary scores (or ``[N]`` for one row).
      labels: ``{0, 1}`` labels ``[N]``.
      n_bootstrap: replicates (at least 2).
      key: ``jax.random`` key (required).
      differences: ``[p, 2]`` pairs of rows ``(i, j)``: also the paired intervals of
        ``ECE_i - ECE_j``, read off the same replicates (so each difference carries the
        correlation of its two ECEs).

    Returns:
      The ``[m, 2]`` intervals; with ``differences``, ``(intervals, difference_intervals
      [p, 2])``.

    Raises:
      ValueError: for bad scores, labels, bins or bootstrap settings, or ``differences`` that
        are not pairs of row indices.
    """
    a = np.asarray(scores)
    one = a.ndim == 1
    a = a[None] if one else a
    check_bins(n_bins, strategy)
    for row in a:
        check_binary(row, labels, None, n_bins)
    V.check_count("n_bootstrap", n_bootstrap, 2)
    check_bootstrap(n_bootstrap, key, confidence)
    pairs = _pairs(differences, len(a))
    out, apart = _ece_intervals(a, labels, key, pairs, n_bins, strategy, n_bootstrap, confidence)
    out = out[0] if one else out
    return out if differences is None else (out, apart)


@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7))
def _ece_intervals(scores, labels, key, pairs, n_bins, strategy, n_bootstrap, confidence):
    a = as_float(scores)
    y = jnp.broadcast_to(as_labels(labels, a[0]), a.shape)
    replicates = _ece_replicates(a, y, key, n_bins, strategy, n_bootstrap)  # [m, B]
    return _intervals(replicates, pairs, confidence)


def _ece_replicates(
    scores: Array, labels: Array, key: Array, n_bins: int, strategy: str, n_bootstrap: int
) -> Array:
    """The ECE of every row of ``scores [m, N]`` against its row of ``labels [m, N]`` in each
    bootstrap replicate, ``[m, B]``: the same resampled observations for every row, each row's
    bins fixed at its own quantiles."""
    counts = bootstrap_counts(key, scores.shape[1], n_bootstrap)  # [B, N]
    total = jnp.sum(counts, axis=1)

    def row(pair: tuple[Array, Array]) -> Array:
        s, y = pair
        bins = assign_bins(s, bin_edges(s, n_bins, strategy))
        gap = jax.nn.one_hot(bins, n_bins, dtype=s.dtype) * (s - y)[:, None]  # [N, S]
        sums = jnp.matmul(counts, gap, precision=jax.lax.Precision.HIGHEST)  # [B, S]
        return jnp.sum(jnp.abs(sums), axis=1) / total

    return jax.lax.map(row, (scores, labels))


def multiclass_ece_intervals(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    *,
    n_bootstrap: int = 200,
    key: Array | None = None,
    confidence: float = 0.95,
    differences: ArrayLike | None = None,
) -> dict[str, Array]:
    """Bootstrap percentile intervals of the top-label and the class-wise ECE (l1, quantile
    bins; :func:`expected_calibration_error`) of every score matrix ``scores [m, N, n]``:
    ``{"top_label_ece": [m, 2], "classwise_ece": [m, 2]}``.

    As :func:`ece_intervals`: each replicate resamples the observations, the same ones for every
    matrix and class, with bins fixed; the class-wise ECE's replicate is the mean of its classes'
    ECEs on the same draw. With ``differences`` ``[p, 2]`` (pairs of matrices ``(i, j)``), also
    the paired intervals of ``ECE_i - ECE_j`` on the same replicates:
    ``"top_label_ece_difference"`` and ``"classwise_ece_difference"``, ``[p, 2]`` each.
    """
    a = np.asarray(scores)
    if a.ndim != 3 or a.shape[-1] < 2:
        raise ValueError(f"scores must be [m, N, n] class scores, got shape {a.shape}")
    y = np.asarray(labels)
    V.check_shape("labels", y, a.shape[1:2])
    check_n_bins(n_bins)
    V.check_count("n_bootstrap", n_bootstrap, 2)
    check_bootstrap(n_bootstrap, key, confidence)
    pairs = _pairs(differences, len(a))
    top, classwise, top_apart, classwise_apart = _multiclass_ece_intervals(
        a, y, key, pairs, n_bins, n_bootstrap, confidence
    )
    out = {"top_label_ece": top, "classwise_ece": classwise}
    if differences is not None:
        out |= {"top_label_ece_difference": top_apart, "classwise_ece_difference": classwise_apart}
    return out


def _pairs(differences: ArrayLike | None, m: int) -> np.ndarray:
    """``differences`` as int32 pairs ``[p, 2]`` of rows in ``[0, m)`` (none: ``[0, 2]``)."""
    pairs = np.asarray([] if differences is None else differences)
    pairs = np.zeros((0, 2), np.int32) if pairs.size == 0 else pairs
    if (
        pairs.ndim != 2
        or pairs.shape[1] != 2
        or pairs.dtype.kind not in "iu"
        or ((pairs < 0) | (pairs >= m)).any()
    ):
        raise ValueError(f"differences must be pairs [p, 2] of rows in [0, {m}); got "
                         f"{pairs.tolist()!r}")  # fmt: skip
    return pairs.astype(np.int32)


def _intervals(replicates: Array, pairs: Array, confidence: float) -> tuple[Array, Array]:
    """The percentile intervals of replicates ``[m, B]`` and of their paired differences."""
    interval = functools.partial(percentile_interval, confidence=confidence)
    apart = replicates[pairs[:, 0]] - replicates[pairs[:, 1]]
    return jax.lax.map(interval, replicates), jax.lax.map(interval, apart)


@functools.partial(jax.jit, static_argnums=(4, 5, 6))
def _multiclass_ece_intervals(scores, labels, key, pairs, n_bins, n_bootstrap, confidence):
    s = as_float(scores)
    m, n, k = s.shape
    y = jnp.asarray(labels)
    correct = (jnp.argmax(s, axis=-1) == y).astype(s.dtype)
    top = _ece_replicates(jnp.max(s, axis=-1), correct, key, n_bins, "quantile", n_bootstrap)
    per_class = jnp.moveaxis(s, -1, 1).reshape(m * k, n)
    onehot = jnp.broadcast_to(jax.nn.one_hot(y, k, dtype=s.dtype).T, (m, k, n)).reshape(m * k, n)
    classes = _ece_replicates(per_class, onehot, key, n_bins, "quantile", n_bootstrap)
    classwise = jnp.mean(classes.reshape(m, k, n_bootstrap), axis=1)
    (top, top_apart), (classwise, classwise_apart) = (
        _intervals(r, pairs, confidence) for r in (top, classwise)
    )
    return top, classwise, top_apart, classwise_apart


class ECEComparison(NamedTuple):
    """Two ECEs on the same observations, their difference and ratio, with paired intervals.

    Attributes:
      ece: ``[2]`` the ECE of the first and of the second scores.
      ece_interval: ``[2, 2]`` their percentile intervals (rows: lower, upper).
      difference, difference_interval: ``ECE_1 - ECE_2`` and its interval ``[2]``.
      ratio, ratio_interval: ``ECE_1 / ECE_2`` and its interval ``[2]``.
    """

    ece: Array
    ece_interval: Array
    difference: Array
    difference_interval: Array
    ratio: Array
    ratio_interval: Array


def compare_ece(
    first: ArrayLike,
    second: ArrayLike,
    labels: ArrayLike,
    second_labels: ArrayLike | None = None,
    n_bins: int = 10,
    strategy: str = "quantile",
    *,
    n_bootstrap: int = 1000,
    key: Array | None = None,
    confidence: float = 0.95,
) -> ECEComparison:
    """Whether one set of scores is better calibrated than another: both ECEs, their difference
    and their ratio, each with a paired bootstrap percentile interval.

    Each replicate draws the observations with replacement, the same rows for both sets of
    scores, and recomputes both ECEs with their bins (the whole estimator is resampled), so the
    intervals of the difference and of the ratio carry the correlation of the two ECEs.

    Args:
      first, second: binary scores ``(n,)`` on the same observations.
      labels: their ``{0, 1}`` labels ``(n,)``; ``second_labels`` the second's where they differ
        (for instance two classes' indicators of the same rows).
      n_bootstrap: replicates (at least 2).
      key: ``jax.random`` key (required).
    """
    check_bins(n_bins, strategy)
    second_labels = labels if second_labels is None else second_labels
    check_binary(first, labels, None, n_bins, scores_name="first")
    check_binary(second, second_labels, None, n_bins, scores_name="second")
    if np.shape(first) != np.shape(second):
        raise ValueError(
            f"first and second must score the same observations; got shapes {np.shape(first)} "
            f"and {np.shape(second)}"
        )
    V.check_count("n_bootstrap", n_bootstrap, 2)
    check_bootstrap(n_bootstrap, key, confidence)
    return _compare_ece(
        first, second, labels, second_labels, key, n_bins, strategy, n_bootstrap, confidence
    )


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8))
def _compare_ece(
    first, second, labels, second_labels, key, n_bins, strategy, n_bootstrap, confidence
):
    a, b = as_float(first), as_float(second)
    y, z = as_labels(labels, a), as_labels(second_labels, b)

    def both(rows: Array) -> Array:
        return jnp.stack(
            [
                expected_calibration_error(a[rows], y[rows], n_bins, strategy),
                expected_calibration_error(b[rows], z[rows], n_bins, strategy),
            ]
        )

    return paired_comparison(both, a.shape[0], n_bootstrap, key, confidence)


def paired_comparison(
    statistic: Callable[[Array], Array],
    n: int,
    n_bootstrap: int,
    key: Array,
    confidence: float = 0.95,
) -> ECEComparison:
    """:func:`compare_ece`'s paired bootstrap for any two statistics of the same ``n`` rows:
    ``statistic(rows) -> [2]`` on the row indices of a replicate (``arange(n)`` for the estimate),
    the rows drawn from ``key`` as :func:`compare_ece` draws them. Works under ``jax.jit``."""
    estimate = statistic(jnp.arange(n))
    rows = bootstrap_rows(key, n, n_bootstrap)
    draws = jax.lax.map(statistic, rows)  # [B, 2]
    interval = functools.partial(percentile_interval, confidence=confidence)
    return ECEComparison(
        estimate,
        interval(draws),
        estimate[0] - estimate[1],
        interval(draws[:, 0] - draws[:, 1]),
        estimate[0] / estimate[1],
        interval(draws[:, 0] / draws[:, 1]),
    )
