"""Binning: the bin edges of the scores (quantile or uniform), the bin of every score, and the
weighted per-bin sums from which every binned curve and metric of :mod:`iml.calibration` is
computed.

Bins are right-closed, the first also holding its lower edge, and quantile edges are the
unweighted quantiles of the scores, so that reweighting keeps the bins fixed (the conventions of
:mod:`iml.calibration`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml._bootstrap import host_or_device, host_rows, sorted_rows
from iml.calibration._checks import (
    as_float,
    as_labels,
    check_bins,
)

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "BinnedStatistics",
    "assign_bins",
    "bin_edges",
    "binned_statistics",
    "merged_bins",
]


def bin_edges(scores: ArrayLike, n_bins: int = 10, strategy: str = "quantile") -> Array:
    """Bin edges for a calibration curve.

    Args:
      scores: scores in ``[0, 1]``, shape ``(n,)``.
      strategy: ``"quantile"`` (edges at the quantiles of ``scores``, as :mod:`iml.calibration`
        states) or ``"uniform"`` (``n_bins`` equal widths on ``[0, 1]``).

    Returns:
      Nondecreasing edges, shape ``(n_bins + 1,)``. Quantile edges may repeat where scores tie.
    """
    check_bins(n_bins, strategy)
    s = as_float(scores)
    q = jnp.linspace(0.0, 1.0, n_bins + 1, dtype=s.dtype)
    if strategy == "uniform":
        return q
    if s.dtype != jnp.float32 or s.ndim != 1:
        return jnp.quantile(s, q, method="linear")
    return quantile_edges(s[None], n_bins)[0]


def _sorted_at(rows: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The order statistics of positions ``at`` (``[m]``, or with leading axes of one) of
    each row."""
    return np.sort(rows, axis=-1)[..., np.reshape(at, (-1, np.shape(at)[-1]))[0]]


SORTED_AT = host_rows("iml_sorted_at", _sorted_at)


@functools.partial(jax.jit, static_argnums=1)
def quantile_edges(scores: Array, n_bins: int) -> Array:
    """``bin_edges(row, n_bins, "quantile")`` of every row of float32 ``scores [K, N]``:
    ``[K, n_bins + 1]``, equal to ``jnp.quantile(row, q, method="linear")`` to the last bit (the
    same interpolation, in XLA, between the same order statistics), NaN edges for a row holding
    NaN. Jitted, so that the interpolation compiles as ``jnp.quantile``'s does (an eager
    multiply and add may round differently from a fused one). On the CPU, rows of
    :data:`iml._bootstrap.HOST_SORT_MIN_LENGTH` or more are sorted by NumPy in a host function
    (:mod:`iml._ffi`) that returns the order statistics the edges need alone (XLA's CPU sort of
    tens of thousands of scores is many times slower, and the sorted rows need not come back);
    otherwise XLA sorts them."""
    s = jnp.asarray(scores, jnp.float32)
    low, high, high_weight = _interpolation(s.shape[-1], n_bins)
    at = np.concatenate([low, high])

    def device(v: Array) -> Array:
        return sorted_rows(v)[..., at]

    picked = host_or_device(s, SORTED_AT, device, jnp.float32, operands=(jnp.asarray(at),),
                            out_shape=lambda shape: (*shape[:-1], at.size))  # fmt: skip
    low_value, high_value = picked[..., : low.size], picked[..., low.size :]
    edges = low_value * (jnp.float32(1.0) - high_weight) + high_value * high_weight
    return jnp.where(jnp.any(jnp.isnan(s), axis=-1, keepdims=True), jnp.nan, edges)


def _interpolation(n: int, n_bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The order statistics (``low``, ``high``: int32 ``[n_bins + 1]``) between which
    ``jnp.quantile``'s linear method interpolates the quantiles ``i / n_bins`` of ``n`` sorted
    float32 values, and the weight of the higher one."""
    with jax.ensure_compile_time_eval():  # the fractions of bin_edges, to the last bit
        fractions = np.asarray(jnp.linspace(0.0, 1.0, n_bins + 1, dtype=jnp.float32))
    q = fractions * np.float32(n - 1)
    low, high = np.floor(q), np.ceil(q)
    return low.astype(np.int32), high.astype(np.int32), (q - low).astype(np.float32)


# Up to this many edges, assign_bins compares each score with every edge.
_COMPARE_ALL_EDGES = 256


def assign_bins(scores: ArrayLike, edges: ArrayLike) -> Array:
    """Bin index of every score: bins are ``(e_b, e_{b+1}]`` and the first holds ``e_0`` too.

    Scores below the first edge go to bin 0 and above the last edge to the last bin, so every score
    is assigned (as in scikit-learn's ``calibration_curve``).

    Args:
      scores: any shape.
      edges: nondecreasing, shape ``(n_bins + 1,)``.

    Returns:
      Integer bin indices in ``[0, n_bins)``, the shape of ``scores``.
    """
    edges = jnp.asarray(edges)
    # A few edges: every score compared with each (vectorised, many times faster on the CPU
    # than a binary search per score); the same indices either way.
    method = "compare_all" if edges.shape[-1] <= _COMPARE_ALL_EDGES else "scan"
    inner = edges[1:-1]
    return jnp.searchsorted(
        inner, jnp.asarray(scores, edges.dtype), side="left", method=method
    ).astype(jnp.int32)


class BinnedStatistics(NamedTuple):
    """Weighted per-bin sums, the sufficient statistics of every binned metric here.

    Attributes:
      count: sum of weights per bin, ``(..., n_bins)``.
      score_sum: sum of weight x score per bin.
      label_sum: sum of weight x label per bin.
      weight_sq_sum: sum of squared weights per bin (for effective sample sizes).
    """

    count: Array
    score_sum: Array
    label_sum: Array
    weight_sq_sum: Array


def binned_statistics(
    scores: ArrayLike, labels: ArrayLike, bins: ArrayLike, n_bins: int, weights: ArrayLike
) -> BinnedStatistics:
    """Weighted per-bin sums of a fixed bin assignment (jit/vmap-safe).

    ``weights`` may carry leading batch axes (e.g. bootstrap replicates): the sums of all of them
    are one matrix product. A NaN score or a label outside {0, 1} makes its own bin's sums NaN and
    no other bin's.
    """
    s, w = as_float(scores), jnp.asarray(weights)
    y = as_labels(labels, s)
    w = w.astype(s.dtype)
    nan = jnp.isnan(s) | jnp.isnan(y)
    s, y = jnp.where(nan, 0.0, s), jnp.where(nan, 0.0, y)
    features = jnp.stack([jnp.ones_like(s), s, y, nan.astype(s.dtype)])
    count, score_sum, label_sum, nan_count = unstack(weighted_bin_sums(w, features, bins, n_bins))
    weight_sq = weighted_bin_sums(w * w, jnp.ones_like(s)[None], bins, n_bins)[..., 0, :]
    score_sum = jnp.where(nan_count > 0, jnp.nan, score_sum)
    label_sum = jnp.where(nan_count > 0, jnp.nan, label_sum)
    return BinnedStatistics(count, score_sum, label_sum, weight_sq)


def unstack(x: Array) -> list[Array]:
    return [x[..., k, :] for k in range(x.shape[-2])]


def bin_matrix(features: Array, bins: ArrayLike, n_bins: int) -> Array:
    """``M[i, (k, b)] = features[k, i] 1[bins_i = b]``, shape ``(n, k * n_bins)``."""
    onehot = jax.nn.one_hot(jnp.asarray(bins), n_bins, dtype=features.dtype)
    k, n = features.shape
    return (features.T[:, :, None] * onehot[:, None, :]).reshape(n, k * n_bins)


def weighted_bin_sums(weights: Array, features: Array, bins: ArrayLike, n_bins: int) -> Array:
    """``sum_i weights[..., i] features[k, i] 1[bins_i = b]``, shape ``(..., k, n_bins)``.

    One weight vector ``[n]``: :func:`bin_sums` of the weighted features. A batch of weight
    vectors (bootstrap replicates): one matrix product with :func:`bin_matrix`, rather than a
    scatter per vector. ``features`` must be finite (``0 * inf`` would leak across bins).
    """
    weights = jnp.asarray(weights)
    if weights.ndim == 1:
        return bin_sums(weights * features, bins, n_bins)
    m = bin_matrix(features, bins, n_bins)
    out = jnp.matmul(weights, m, precision=jax.lax.Precision.HIGHEST)
    return out.reshape(*weights.shape[:-1], features.shape[0], n_bins)


def bin_sums(values: Array, bins: ArrayLike, n_bins: int) -> Array:
    """``sum_i values[k, i] 1[bins_i = b]``, shape ``(k, n_bins)``: a segment sum within each of
    :data:`_SUM_BLOCKS` blocks of the observations, then the blocks' sums added (closer to the
    exact sums than one running sum, and many times faster on the CPU than a product with the
    one-hot bins)."""
    k, n = values.shape
    size = -(-n // _SUM_BLOCKS)
    pad = size * _SUM_BLOCKS - n
    padded = jnp.pad(values.T, ((0, pad), (0, 0)))  # [n', k]; the padding adds zeros to bin 0
    block = jnp.arange(size * _SUM_BLOCKS, dtype=jnp.int32) // size
    ids = jnp.pad(jnp.asarray(bins, jnp.int32), (0, pad)) + n_bins * block
    sums = jax.ops.segment_sum(padded, ids, n_bins * _SUM_BLOCKS)
    return sums.reshape(_SUM_BLOCKS, n_bins, k).sum(axis=0).T


# Blocks of observations whose per-bin sums bin_sums adds at the end.
_SUM_BLOCKS = 64


def safe_div(num: Array, den: Array) -> Array:
    """``num / den`` where ``den > 0``, NaN elsewhere (empty bins)."""
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), jnp.nan)


def merged_bins(positives: Array, negatives: Array, min_count: float) -> Array:
    """Adjacent bins merged in order until each group holds ``min_count`` of both labels.

    ``positives`` and ``negatives`` ``(k, n_bins)`` are the expected counts of ``k`` models (or
    one, ``k = 1``) in the same ordered bins; a group closes when every model's sums reach
    ``min_count`` for both labels, and a short last run joins the group below it (all bins form
    one group when none closes). Returns each bin's group ``(n_bins,)``, numbered ``0..`` in
    order, so ``group[bins]`` relabels observations. The groups are common to the models.
    """

    def step(carry, x):
        group, p, q = carry
        p, q = p + x[0], q + x[1]
        close = jnp.all(p >= min_count) & jnp.all(q >= min_count)
        keep = jnp.where(close, 0.0, 1.0)
        return (group + close, p * keep, q * keep), group

    start = (jnp.int32(0), jnp.zeros(positives.shape[0]), jnp.zeros(positives.shape[0]))
    (last, _, _), group = jax.lax.scan(step, start, (positives.T, negatives.T))
    return jnp.where((group == last) & (last > 0), last - 1, group)
