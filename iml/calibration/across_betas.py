"""Calibration across betas: calibration of the loss-corrected scores ``g^beta(a)`` (Corollary 1)
for many class weights at once, from one set of scores (no training). By Proposition 5 they are
calibrated (Definition 1) exactly when the raw scores are loss-calibrated (Definition 2) to the
beta-weighted loss ``L^beta``; both are reported, with the smooth calibration error of the
corrected scores."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from iml import _validation as V
from iml._bootstrap import bootstrap_counts, check_bootstrap, percentile_interval
from iml.calibration._checks import as_float, as_labels, as_weights, check_binary, check_n_bins
from iml.calibration.binning import (
    BinnedStatistics,
    assign_bins,
    bin_edges,
    safe_div,
    weighted_bin_sums,
)
from iml.calibration.loss_calibration import LossSums, loss_matrices, loss_reduction, loss_sums
from iml.calibration.metrics import calibration_error_from_statistics, check_norm
from iml.calibration.smooth import SMOOTH_BISECTION, SMOOTH_GRID, smooth_ece_of, smooth_inputs
from iml.losses import BinaryLoss, log_loss
from iml.scoring import loss_corrected_score, optimal_score

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["CalibrationAcrossBetas", "calibration_across_betas"]


class CalibrationAcrossBetas(NamedTuple):
    """Calibration of the loss-corrected scores ``g^beta(a)`` for every ``beta`` (a pytree).

    The bins are the quantile bins of the raw scores, which are those of every set of corrected
    scores (``g^beta`` is strictly increasing), so counts and event rates do not depend on beta.

    Attributes:
      betas: ``(m,)``.
      edges: quantile edges of the raw scores, ``(n_bins + 1,)``.
      count: sum of weights per bin, ``(n_bins,)``.
      event_rate: rate of label 1 per bin, ``(n_bins,)`` (NaN if empty).
      mean_score: mean loss-corrected score per bin, ``(m, n_bins)`` (NaN if empty).
      ece: calibration error of the corrected scores, ``(m,)``.
      loss_calibration_gap: the loss-calibration gap of the raw scores under the beta-weighted
        base loss, per observation, ``(m,)``: per bin, the bin's loss minus that of the single
        score ``c^beta(event rate)`` (Definition 2's wholesale switch,
        :func:`~iml.calibration.loss_calibration.loss_reduction`), summed over the bins and
        divided by the total weight. A point estimate, not the statistic of
        :func:`loss_calibration_test`, which compares each bin's positives with the sum of its
        corrected scores.
      smooth_ece: the smooth calibration error of the corrected scores (:func:`smooth_ece`, at
        its fixed-point bandwidth), ``(m,)``; a point estimate, without bootstrap interval.
      event_rate_interval: ``(2, n_bins)`` percentile bootstrap interval (``None`` without
        bootstrap); likewise ``mean_score_interval`` ``(2, m, n_bins)``, ``ece_interval``
        ``(2, m)`` and ``gap_interval`` ``(2, m)``.
    """

    betas: Array
    edges: Array
    count: Array
    event_rate: Array
    mean_score: Array
    ece: Array
    loss_calibration_gap: Array
    smooth_ece: Array
    event_rate_interval: Array | None = None
    mean_score_interval: Array | None = None
    ece_interval: Array | None = None
    gap_interval: Array | None = None


def _prefix_products(weights: Array, values: Array, boundaries: Array, tile: int) -> Array:
    """``sum_{i < k} weights[r, i] * values[i, j]`` at every boundary ``k``: ``(K, R, J)``.

    A matrix product per tile of ``tile`` rows, a cumulative sum over tiles, and one masked
    partial-tile product per boundary: exact, with static shapes for traced boundaries, at the cost
    of one ``(R, n) @ (n, J)`` product plus ``K`` small ones. Requires ``n % tile == 0`` and
    every boundary ``< n``.
    """
    r, n = weights.shape
    t = n // tile
    per_tile = jnp.einsum(
        "rtc,tcj->trj",
        weights.reshape(r, t, tile),
        values.reshape(t, tile, -1),
        precision=jax.lax.Precision.HIGHEST,
    )
    cumulative = jnp.concatenate([jnp.zeros_like(per_tile[:1]), jnp.cumsum(per_tile, axis=0)])

    def at(k: Array) -> Array:
        i = k // tile
        w_tile = jax.lax.dynamic_slice_in_dim(weights, i * tile, tile, axis=1)
        w_tile = jnp.where(jnp.arange(tile) < k - i * tile, w_tile, 0.0)
        v_tile = jax.lax.dynamic_slice_in_dim(values, i * tile, tile, axis=0)
        return cumulative[i] + jnp.matmul(w_tile, v_tile, precision=jax.lax.Precision.HIGHEST)

    return jax.vmap(at)(boundaries)


def calibration_across_betas(
    scores: ArrayLike,
    labels: ArrayLike,
    betas: ArrayLike,
    n_bins: int = 10,
    n_bootstrap: int = 200,
    key: Array | None = None,
    *,
    sample_weight: ArrayLike | None = None,
    norm: str = "l1",
    debias: bool = False,
    base_loss: BinaryLoss = log_loss,
    confidence: float = 0.95,
    beta_chunk: int = 64,
    tile: int = 1024,
) -> CalibrationAcrossBetas:
    """Calibration curves, ECE and loss-calibration gaps of ``g^beta(a)`` for every beta at once.

    For each candidate weight ``beta``, the loss-corrected scores ``g^beta(a)`` (Cor. 1) are binned
    into the quantile bins (deciles for ``n_bins=10``) and compared with the event rates; by
    Prop. 5 they are calibrated exactly when the raw scores are loss-calibrated to ``L^beta``.
    Beside the ECE are the loss-calibration gap of the raw scores (the loss that replacing each
    bin's scores with the one score ``c^beta(event rate)`` would save; not the statistic of
    :func:`loss_calibration_test`) and the bin-free smooth calibration error of the corrected
    scores (:func:`smooth_ece`).

    The work is arranged so that only what depends on beta is recomputed per beta: the scores are
    sorted once (quantile bins are contiguous runs of the sorted scores), the bootstrap
    replicates are multinomial weight vectors drawn once, the per-bin label and loss sums of every
    replicate are computed once, and the per-bin sums of corrected scores of all replicates come
    from one matrix product per chunk of ``beta_chunk`` betas (:func:`_prefix_products`). The
    bootstrap is exact (observations resampled, bins held fixed), not an approximation.

    Args:
      scores: raw positive-class scores ``(n,)`` in ``[0, 1]``.
      labels: ``{0, 1}`` labels ``(n,)``.
      betas: candidate class weights ``(m,)`` in ``(0, 1)``.
      norm, debias: as :func:`expected_calibration_error`.
      base_loss: strictly proper base loss of the beta-weighted loss (for the gap).
      beta_chunk: betas per matrix product (bounds memory: ``n x beta_chunk`` floats).
      tile: rows per tile of the product.
    """
    check_n_bins(n_bins)
    check_binary(scores, labels, sample_weight, n_bins)
    check_bootstrap(n_bootstrap, key, confidence)
    check_norm(norm, debias)
    if V.concrete_value(betas) is not None:
        V.check_betas("betas", betas, distinct=False)
    return _calibration_across_betas(
        scores,
        labels,
        betas,
        sample_weight,
        key,
        n_bins,
        n_bootstrap,
        norm,
        debias,
        base_loss,
        confidence,
        beta_chunk,
        tile,
    )


@functools.partial(jax.jit, static_argnums=tuple(range(5, 13)))
def _calibration_across_betas(
    scores: ArrayLike,
    labels: ArrayLike,
    betas: ArrayLike,
    sample_weight: ArrayLike | None,
    key: Array | None,
    n_bins: int,
    n_bootstrap: int,
    norm: str,
    debias: bool,
    base_loss: BinaryLoss,
    confidence: float,
    beta_chunk: int,
    tile: int,
) -> CalibrationAcrossBetas:
    a = as_float(scores)
    n = a.shape[0]
    betas = jnp.asarray(betas, a.dtype)
    m = betas.shape[0]
    w = as_weights(sample_weight, a)

    # Sort once; quantile bins are contiguous runs of the sorted scores.
    order = jnp.argsort(a)
    a_sorted, y_sorted, w_sorted = a[order], as_labels(labels, a)[order], w[order]
    edges = bin_edges(a, n_bins, "quantile")
    bins = assign_bins(a_sorted, edges)
    boundaries = jnp.searchsorted(bins, jnp.arange(n_bins + 1), side="left")

    # Row 0: the sample itself; rows 1..B: bootstrap replicates (multinomial multiplicities).
    if n_bootstrap > 0:
        multiplicity = bootstrap_counts(key, n, n_bootstrap)
        replicate_w = jnp.concatenate([w_sorted[None], w_sorted * multiplicity])
    else:
        replicate_w = w_sorted[None]

    # Everything linear in the weights but independent of beta, for all replicates at once.
    l_pos = base_loss(a_sorted, jnp.ones_like(a_sorted))
    l_neg = base_loss(a_sorted, jnp.zeros_like(a_sorted))
    sums = loss_sums(replicate_w, y_sorted, loss_matrices(bins, n_bins, l_pos, l_neg))
    ones = jnp.ones_like(a_sorted)[None]
    weight_sq = weighted_bin_sums(replicate_w * replicate_w, ones, bins, n_bins)[:, 0]

    # Pad observations to whole tiles (zero weight) so every boundary k <= n lies in a tile.
    n_pad = (n // tile + 1) * tile
    w_pad = jnp.pad(replicate_w, ((0, 0), (0, n_pad - n)))
    a_pad = jnp.pad(a_sorted, (0, n_pad - n))
    n_chunks = -(-m // beta_chunk)
    betas_pad = jnp.pad(betas, (0, n_chunks * beta_chunk - m), constant_values=0.5)

    def smooth_of(corrected: Array) -> Array:
        s, y, w_, invalid = smooth_inputs(corrected, y_sorted, w_sorted)
        ece = smooth_ece_of(s, y, w_, None, SMOOTH_GRID, SMOOTH_BISECTION).ece
        return jnp.where(invalid, jnp.nan, ece)

    def chunk(beta_c: Array):
        corrected = loss_corrected_score(a_pad[:, None], beta_c[None, :])  # (n_pad, J)
        prefix = _prefix_products(w_pad, corrected, boundaries, tile)  # (K, R, J)
        score_sum = jnp.moveaxis(prefix[1:] - prefix[:-1], 0, -1)  # (R, J, n_bins)
        stats = BinnedStatistics(
            sums.count[:, None], score_sum, sums.positives[:, None], weight_sq[:, None]
        )
        ece = calibration_error_from_statistics(stats, norm, debias)  # (R, J)
        scaled = LossSums(
            sums.count[:, None],
            sums.positives[:, None],
            beta_c[None, :, None] * sums.loss_pos[:, None],
            (1.0 - beta_c[None, :, None]) * sums.loss_neg[:, None],
        )
        reduction, _ = loss_reduction(
            scaled,
            lambda g: optimal_score(g, beta_c[None, :, None]),
            lambda s: beta_c[None, :, None] * base_loss(s, jnp.ones_like(s)),
            lambda s: (1.0 - beta_c[None, :, None]) * base_loss(s, jnp.zeros_like(s)),
        )
        gap = jnp.sum(reduction, axis=-1) / jnp.sum(sums.count, axis=-1)[:, None]  # (R, J)
        mean = safe_div(score_sum, sums.count[:, None])
        smooth = jax.vmap(smooth_of, in_axes=1)(corrected[:n])
        if n_bootstrap == 0:
            return mean[0], ece[0], gap[0], smooth
        return (
            mean[0],
            ece[0],
            gap[0],
            smooth,
            percentile_interval(mean[1:], confidence),
            percentile_interval(ece[1:], confidence),
            percentile_interval(gap[1:], confidence),
        )

    out = jax.lax.map(chunk, betas_pad.reshape(n_chunks, beta_chunk))

    def unchunk(x: Array, interval: bool = False) -> Array:
        if interval:  # (chunks, 2, J, ...) -> (2, m, ...)
            x = jnp.moveaxis(x, 1, 0)
            return x.reshape(2, n_chunks * beta_chunk, *x.shape[3:])[:, :m]
        return x.reshape(n_chunks * beta_chunk, *x.shape[2:])[:m]

    count = sums.count[0]
    event_rate = safe_div(sums.positives[0], count)
    result = CalibrationAcrossBetas(
        betas,
        edges,
        count,
        event_rate,
        unchunk(out[0]),
        unchunk(out[1]),
        unchunk(out[2]),
        unchunk(out[3]),
    )
    if n_bootstrap == 0:
        return result
    return result._replace(
        event_rate_interval=percentile_interval(
            safe_div(sums.positives[1:], sums.count[1:]), confidence
        ),
        mean_score_interval=unchunk(out[4], True),
        ece_interval=unchunk(out[5], True),
        gap_interval=unchunk(out[6], True),
    )
