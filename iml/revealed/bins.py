"""The signals of a model: the bins of its scores, quantile (per model), uniform, or adaptive
(quantile bins merged until each holds enough expected positives and negatives under every
model's loss); for ``n`` classes, the cells of its loss-corrected class posteriors (top class,
then a quantile of confidence within it, merged alike). The bins depend on the scores alone and
stay fixed under reweighting, as the bootstrap and the tests assume."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.calibration._checks import as_float, check_binary, check_n_bins
from iml.calibration.binning import (
    assign_bins,
    bin_edges,
    merged_bins,
    quantile_edges,
)
from iml.revealed.losses import loss_corrected
from iml.spec import LossSpec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike


# The bins of a model's scores: the calibration module's, and quantile bins merged until each
# holds enough expected positives and negatives (see revealed_experiments).
STRATEGIES = ("quantile", "uniform", "adaptive")


# The least expected positives and negatives an adaptive bin holds.
MIN_COUNT = 10


def check_scores(scores: ArrayLike, labels: ArrayLike, n_bins: int, strategy: str) -> None:
    check_n_bins(n_bins)
    V.check_choice("strategy", strategy, STRATEGIES)
    shape = np.shape(scores)
    if len(shape) != 2 or 0 in shape:
        raise ValueError(
            f"scores must be a non-empty [K, N] array (one row per model); got {shape}"
        )
    if V.is_concrete(scores):
        s = np.asarray(scores)
        for k in range(shape[0]):
            check_binary(s[k], labels, None, n_bins, scores_name=f"scores[{k}]")
    else:
        check_binary(np.zeros(shape[1]), labels)


def as_min_count(min_count: int | None) -> int:
    if min_count is None:
        return MIN_COUNT
    V.check_count("min_count", min_count)
    return int(min_count)


def signals_from_scores(
    scores: ArrayLike,
    n_bins: int,
    strategy: str,
    losses: LossSpec | list[LossSpec] | None = None,
    min_count: int = MIN_COUNT,
) -> Array:
    """Each model's bins ``[K, N]``, with the edges of :func:`iml.calibration.bin_edges`, or
    adaptive bins (``losses`` required). Quantile edges come from
    :func:`iml.calibration.binning.quantile_edges`.
    """
    if strategy == "adaptive":
        if losses is None:
            raise ValueError("strategy 'adaptive' needs the models' losses (losses=...)")
        quantile = signals_from_scores(scores, n_bins, "quantile")
        return merged_signals(scores, quantile, losses, n_bins, min_count)
    return bin_signals(scores, n_bins, strategy)


@functools.partial(jax.jit, static_argnums=(3, 4))
def merged_signals(
    scores: ArrayLike, signals: Array, losses: LossSpec | list[LossSpec], n_bins: int, m: int
) -> Array:
    """Quantile bins merged in score order until each holds at least ``m`` expected positives
    and ``m`` expected negatives under every model's own loss-corrected scores; a short last run
    joins the bin below it. The merges are common to all models (a model's bins are the same
    quantile ranges as every other's): merges that differed between models would garble their
    experiments differently, and a finer experiment is more informative, which NIS would read
    as a violation. Bins keep the indices ``0..`` of the merged groups."""
    g = loss_corrected(losses, scores)
    positives = per_signal(g, signals, n_bins)  # [K, S]
    negatives = per_signal(1.0 - g, signals, n_bins)
    group = merged_bins(positives, negatives, m)  # [S]
    merged = jnp.broadcast_to(group, positives.shape)
    return jnp.take_along_axis(merged, signals, axis=1)


@functools.partial(jax.jit, static_argnums=(1, 2))
def bin_signals(scores: ArrayLike, n_bins: int, strategy: str) -> Array:
    s = as_float(scores)
    if strategy == "uniform":
        edges = jax.vmap(bin_edges, in_axes=(0, None, None))(s, n_bins, strategy)
    else:
        edges = quantile_edges(s, n_bins)  # a row with a NaN gets NaN edges
    return jax.vmap(assign_bins)(s, edges)


def per_signal(values: Array, signals: Array, n_signals: int) -> Array:
    """``sum_{i: s_ki = s} values[k, i, ...]``, ``[K, S, ...]`` for values ``[K, N, ...]`` and
    signals ``[K, N]`` (any integer type): one segment sum over all models, model ``k``'s
    signal ``s`` its segment ``k S + s``, the sums of one segment sum per model. A signal outside
    ``[0, S)`` counts nowhere, as in a segment sum per model."""
    n_models, n = signals.shape[:2]
    s = jnp.asarray(signals, jnp.int32)
    ids = s + n_signals * jnp.arange(n_models, dtype=jnp.int32)[:, None]
    ids = jnp.where((s >= 0) & (s < n_signals), ids, n_models * n_signals)
    flat = jnp.reshape(values, (n_models * n, *values.shape[2:]))
    sums = jax.ops.segment_sum(flat, ids.reshape(-1), n_models * n_signals)
    return sums.reshape(n_models, n_signals, *values.shape[2:])


# ----------------------------------------------------------------------------------------------
# Cells of the simplex: the signals of a model of n classes
# ----------------------------------------------------------------------------------------------


def check_class_scores(scores: ArrayLike, labels: ArrayLike, n_bins: int, strategy: str) -> None:
    """Class scores ``[K, N, n]`` in ``[0, 1]`` (``n >= 2``) and class indices ``[N]``.

    Raises:
      ValueError: naming ``scores``, ``labels``, ``n_bins`` or ``strategy``.
    """
    check_n_bins(n_bins)
    V.check_choice("strategy", strategy, ("quantile", "adaptive"))
    shape = np.shape(scores)
    if len(shape) != 3 or 0 in shape or shape[2] < 2:
        raise ValueError(
            f"scores must be a non-empty [K, N, n] array of class scores, n >= 2; got {shape}"
        )
    if np.shape(labels) != shape[1:2]:
        raise ValueError(f"labels must have shape [{shape[1]}]; got {np.shape(labels)}")
    if V.is_concrete(scores):
        V.check_unit("scores", scores)
    y = V.concrete_value(labels)
    if y is not None and not np.all((y >= 0) & (y < shape[2]) & (y == np.round(y))):
        raise ValueError(f"labels must be class indices in [0, {shape[2]})")


def cell_signals(posteriors: ArrayLike, n_bins: int, strategy: str, min_count: int) -> Array:
    """Each model's cell of the simplex ``[K, N]``, in ``[0, n n_bins)``: the signals of models
    of ``n`` classes.

    An observation's cell is its top class ``t`` (the largest loss-corrected posterior) and the
    quantile ``q`` of its confidence (that posterior over the posteriors' sum) among the
    observations whose top class under that model is ``t``: ``n_bins`` equal-count quantiles
    per class, cell ``t n_bins + q``, so that every model's cells are the same quantile ranges
    of its own posteriors, as binary quantile bins are. ``"adaptive"`` merges adjacent
    quantiles of a class, in confidence order and alike for every model (as
    :func:`merged_signals` merges binary bins, so that no model's experiment is garbled
    differently), until each cell holds at least ``min_count`` expected observations of its
    top class and ``min_count`` of the others under every model's posteriors; a class that no
    model reaches ``min_count`` in stays one cell. Merged cells keep the indices of their
    groups and leave signals with ``P_k(s) = 0``.

    Args:
      posteriors: loss-corrected class posteriors ``[K, N, n]`` (rows need not sum to one).
      n_bins: confidence quantiles per class.
      strategy: ``"quantile"`` (no merging) or ``"adaptive"``.
      min_count: the least expected count of a merged cell.

    Returns:
      integer cells ``[K, N]``.
    """
    return _cell_signals(as_float(posteriors), int(n_bins), strategy, int(min_count))


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _cell_signals(g: Array, n_bins: int, strategy: str, m: int) -> Array:
    K, N, n = g.shape
    total = jnp.sum(g, axis=-1, keepdims=True)
    q = jnp.where(total > 0, g / jnp.where(total > 0, total, 1.0), 1.0 / n)
    top = jnp.argmax(q, axis=-1).astype(jnp.int32)  # [K, N]
    confidence = jnp.max(q, axis=-1)
    index = jnp.broadcast_to(jnp.arange(N, dtype=jnp.int32), (K, N))
    # Sorted by top class, then confidence: each class's observations are one run.
    sorted_top, _, order = jax.lax.sort((top, confidence, index), dimension=1, num_keys=2)
    counts = jax.vmap(lambda t: jnp.bincount(t, length=n))(top)  # [K, n]
    start = jnp.cumsum(counts, axis=1) - counts
    rank = index - jnp.take_along_axis(start, sorted_top, axis=1)
    size = jnp.take_along_axis(counts, sorted_top, axis=1)
    quantile = jnp.minimum(rank * n_bins // jnp.maximum(size, 1), n_bins - 1)
    quantile = jax.vmap(lambda o, v: jnp.zeros(N, jnp.int32).at[o].set(v))(order, quantile)
    if strategy == "adaptive":
        cells = top * n_bins + quantile
        own = jnp.take_along_axis(q, top[..., None], axis=-1)[..., 0]
        mine = per_signal(own, cells, n * n_bins).reshape(K, n, n_bins)
        others = per_signal(1.0 - own, cells, n * n_bins).reshape(K, n, n_bins)
        groups = jax.vmap(merged_bins, in_axes=(1, 1, None))(mine, others, m)  # [n, n_bins]
        quantile = groups[top, quantile]
    return top * n_bins + quantile
