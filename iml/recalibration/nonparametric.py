"""The non-parametric recalibration maps, step functions of the score fitted to the labels:
isotonic regression by pool adjacent violators (Zadrozny & Elkan 2002), a monotone map
interpolated between the distinct scores, and histogram binning, the event rate of each score
bin (Zadrozny & Elkan 2001). Their pure ``*_fit``/``*_transform`` functions and their
:class:`~iml.recalibration.interface.Recalibrator` classes.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml._bootstrap import sort_order, sorted_rows
from iml._device import to_device
from iml.calibration._checks import as_float
from iml.recalibration._common import as_weights, check_binary
from iml.recalibration.interface import Recalibrator

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "HistogramBinning",
    "HistogramParams",
    "IsotonicCalibration",
    "IsotonicParams",
    "histogram_binning_fit",
    "histogram_binning_transform",
    "isotonic_fit",
    "isotonic_transform",
    "pool_adjacent_violators",
]


class IsotonicParams(NamedTuple):
    """A monotone piecewise-linear map: knots ``x`` (sorted) and values ``y``, both ``[N]``.

    Knots past the number of distinct fitted scores repeat the last knot (fixed-size padding).
    """

    x: Array
    y: Array


def pool_adjacent_violators(values: ArrayLike, weights: ArrayLike, n: ArrayLike) -> Array:
    """Weighted least-squares non-decreasing fit of ``values[:n]`` (in their given order).

    The classic stack algorithm with fixed-size buffers: each value is pushed as a block and
    merged with its predecessor while their means violate monotonicity. Entries from ``n`` on
    are ignored (padding); the output holds the fitted value of each of the first ``n`` entries
    and repeats the last fitted value after them. ``O(N)`` amortised, jit- and vmap-able.

    Args:
      values: ``[N]`` responses in the order of the covariate.
      weights: ``[N]`` positive weights.
      n: how many leading entries are real (an int or a traced scalar).

    Returns:
      ``[N]`` fitted values.
    """
    v = as_float(values)
    w = jnp.asarray(weights, v.dtype)
    size = v.shape[0]
    zeros = jnp.zeros(size, v.dtype)

    def violated(state: tuple[Array, Array, Array, Array]) -> Array:
        wy, ws, _, k = state
        # mean[k-2] > mean[k-1], cross-multiplied (weights are positive).
        return (k >= 2) & (wy[k - 2] * ws[k - 1] > wy[k - 1] * ws[k - 2])

    def merge(state: tuple[Array, Array, Array, Array]) -> tuple[Array, Array, Array, Array]:
        wy, ws, count, k = state
        wy = wy.at[k - 2].add(wy[k - 1]).at[k - 1].set(0.0)
        ws = ws.at[k - 2].add(ws[k - 1]).at[k - 1].set(0.0)
        count = count.at[k - 2].add(count[k - 1]).at[k - 1].set(0)
        return wy, ws, count, k - 1

    def push(i: Array, state: tuple[Array, Array, Array, Array]) -> tuple:
        wy, ws, count, k = state
        state = (wy.at[k].set(w[i] * v[i]), ws.at[k].set(w[i]), count.at[k].set(1), k + 1)
        return jax.lax.while_loop(violated, merge, state)

    init = (zeros, zeros, jnp.zeros(size, jnp.int32), jnp.asarray(0, jnp.int32))
    wy, ws, count, k = jax.lax.fori_loop(0, jnp.asarray(n, jnp.int32), push, init)
    means = wy / jnp.where(ws > 0, ws, 1.0)
    fitted = jnp.repeat(means, count, total_repeat_length=size)
    last = means[jnp.maximum(k - 1, 0)]
    return jnp.where(jnp.arange(size) < n, fitted, last)


def isotonic_fit(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
) -> IsotonicParams:
    """Isotonic regression of the labels on the scores (Zadrozny & Elkan 2002).

    Tied scores are pooled first (their weighted mean label), then
    :func:`pool_adjacent_violators` fits a non-decreasing step function through the distinct
    scores; :func:`isotonic_transform` interpolates linearly between them and clips outside
    their range, as scikit-learn's ``IsotonicRegression(out_of_bounds="clip")`` does. Concrete
    arrays are fitted on the host, the ties pooled by NumPy and the steps by SciPy's compiled
    ``isotonic_regression`` (the same fit; XLA's loop over the scores one at a time is
    slower); traced ones (under ``jit`` or ``vmap``) by :func:`pool_adjacent_violators`.

    Args:
      scores: ``[N]`` scores (any real numbers).
      labels: ``[N]`` labels in ``{0, 1}`` (any real responses work arithmetically).
      sample_weight: rows of weight zero are ignored, so calibration sets of different sizes can
        be padded to one shape and vmapped.

    Returns:
      :class:`IsotonicParams` of size ``N``.
    """
    if V.is_concrete(scores, labels, sample_weight):
        check_binary(scores, labels, sample_weight, probabilities=False)
        dtype = jax.dtypes.canonicalize_dtype(np.float64)
        s = np.asarray(scores, dtype)
        w = np.ones(len(s), dtype) if sample_weight is None else np.asarray(sample_weight, dtype)
        if np.any(w > 0):
            return _isotonic_on_host(s, np.asarray(labels, dtype), w)
    s = as_float(scores)
    return _isotonic_kernel(s, jnp.asarray(labels, s.dtype), as_weights(sample_weight, s))


def _isotonic_on_host(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> IsotonicParams:
    """:func:`_isotonic_kernel` of host arrays ``[N]`` with some positive weight, as device
    arrays (:func:`_isotonic_host_fit`)."""
    x, values = _isotonic_host_fit(s, y, w)
    return IsotonicParams(x=to_device(x), y=to_device(values))


def _isotonic_host_fit(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
    """The knots and values ``[N]`` of :func:`_isotonic_kernel` for host arrays ``[N]`` with some
    positive weight: the rows of positive weight in score order (rows already in it, as the
    report's baselines pass them, are not sorted again), pooled by distinct score (float64
    sums), their weighted means fitted by SciPy's pool adjacent violators, the knots and values
    padded as the kernel pads them (the last repeated)."""
    # imported here: only a fit of concrete scores needs scipy.optimize, which loads slowly
    from scipy.optimize import isotonic_regression

    valid = w > 0
    sv, yv, wv = s[valid], y[valid], w[valid].astype(np.float64)
    if not np.all(sv[1:] >= sv[:-1]):  # a stable sort leaves sorted scores as they are
        order = np.argsort(sv, kind="stable")
        sv, yv, wv = sv[order], yv[order], wv[order]
    # Each distinct score's first position in score order (np.unique's return_index).
    first = np.flatnonzero(np.concatenate([[True], sv[1:] != sv[:-1]]))
    knots = sv[first]
    ws = np.add.reduceat(wv, first)
    wy = np.add.reduceat(wv * yv, first)
    fitted = isotonic_regression(wy / ws, weights=ws, increasing=True).x
    x = np.full(len(s), knots[-1], s.dtype)
    values = np.full(len(s), fitted[-1], s.dtype)
    x[: len(knots)], values[: len(knots)] = knots, fitted
    return x, values


@jax.jit
def _isotonic_kernel(s: Array, y: Array, w: Array) -> IsotonicParams:
    size = s.shape[0]
    valid = w > 0
    # Zero-weight rows go last and join the last real group with no weight: they are padding,
    # so calibration sets of different sizes can share one shape (and be vmapped).
    order = sort_order(jnp.where(valid, s, jnp.nan))  # valid rows by score, NaN padding last
    s, y, w, valid = s[order], y[order], w[order], valid[order]
    is_new = jnp.concatenate([jnp.array([True]), s[1:] != s[:-1]]) & valid
    group = jnp.cumsum(is_new) - 1
    n_unique = jnp.sum(is_new)
    ws = jax.ops.segment_sum(w, group, num_segments=size)
    wy = jax.ops.segment_sum(w * y, group, num_segments=size)
    knots = jax.ops.segment_max(jnp.where(valid, s, -jnp.inf), group, num_segments=size)
    knots = jnp.where(jnp.arange(size) < n_unique, knots, knots[n_unique - 1])
    means = wy / jnp.where(ws > 0, ws, 1.0)
    fitted = pool_adjacent_violators(means, jnp.where(ws > 0, ws, 1.0), n_unique)
    return IsotonicParams(x=knots, y=fitted)


def isotonic_transform(params: IsotonicParams, scores: ArrayLike) -> Array:
    """Evaluate a fitted isotonic map: linear between knots, constant outside them."""
    return jnp.interp(as_float(scores), params.x, params.y)


class HistogramParams(NamedTuple):
    """Bin edges ``[n_bins + 1]`` (first 0, last 1) and each bin's calibrated value ``[n_bins]``."""

    edges: Array
    values: Array


def _bin_index(edges: Array, scores: Array) -> Array:
    n_bins = edges.shape[0] - 1
    return jnp.clip(jnp.searchsorted(edges, scores, side="right") - 1, 0, n_bins - 1)


def histogram_binning_fit(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None = None,
    *,
    n_bins: int = 10,
    strategy: str = "uniform",
) -> HistogramParams:
    """Histogram binning: each score bin is mapped to its (weighted) event rate.

    Bins are ``[e_k, e_{k+1})`` (the last one closed). ``strategy="uniform"`` splits ``[0, 1]``
    into equal widths, ``"quantile"`` puts equal numbers of scores in each bin (the linear
    quantiles of the scores of positive weight; rows of weight zero change nothing). A bin with
    no calibration data keeps the midpoint of its edges.

    Args:
      n_bins: number of bins (static).
      strategy: ``"uniform"`` or ``"quantile"``.

    References:
      Zadrozny & Elkan (2001), Obtaining calibrated probability estimates from decision trees
      and naive Bayesian classifiers.
    """
    if V.is_concrete(scores, labels, sample_weight):
        check_binary(scores, labels, sample_weight)
        V.check_count("n_bins", n_bins)
        if strategy not in ("uniform", "quantile"):
            raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}")
    s = as_float(scores)
    return _histogram_kernel(
        s, jnp.asarray(labels, s.dtype), as_weights(sample_weight, s), n_bins, strategy
    )


@functools.partial(jax.jit, static_argnums=(3, 4))
def _histogram_kernel(s: Array, y: Array, w: Array, n_bins: int, strategy: str) -> HistogramParams:
    grid = jnp.linspace(0.0, 1.0, n_bins + 1, dtype=s.dtype)
    if strategy == "quantile":  # NaN rows are left out of the quantiles
        edges = nan_quantiles(jnp.where(w > 0, s, jnp.nan), grid).at[0].set(0.0).at[-1].set(1.0)
    else:
        edges = grid
    index = _bin_index(edges, s)
    mass = jax.ops.segment_sum(w, index, num_segments=n_bins)
    events = jax.ops.segment_sum(w * y, index, num_segments=n_bins)
    midpoints = 0.5 * (edges[:-1] + edges[1:])
    values = jnp.where(mass > 0, events / jnp.where(mass > 0, mass, 1.0), midpoints)
    return HistogramParams(edges=edges, values=values)


def nan_quantiles(values: Array, q: Array) -> Array:
    """``jnp.nanquantile(values, q)`` (linear interpolation) of ``values [n]``, to the last bit:
    the order statistics of the non-NaN values, float32 ones sorted by
    :func:`iml._bootstrap.sorted_rows` (NumPy on the CPU for long rows). NaN where every value
    is NaN."""
    if values.dtype != jnp.float32:
        return jnp.nanquantile(values, q)
    ordered = sorted_rows(values)  # NaN last
    counts = jnp.sum(~jnp.isnan(values)).astype(q.dtype)
    position = q * (counts - 1.0)
    low, high = jnp.floor(position), jnp.ceil(position)
    high_weight = position - low
    low_weight = 1.0 - high_weight
    low = jnp.clip(jnp.minimum(low, counts - 1.0), 0.0).astype(jnp.int32)
    high = jnp.clip(jnp.minimum(high, counts - 1.0), 0.0).astype(jnp.int32)
    return ordered[low] * low_weight + ordered[high] * high_weight


def histogram_binning_transform(params: HistogramParams, scores: ArrayLike) -> Array:
    """Map each score to the calibrated value of its bin."""
    return params.values[_bin_index(params.edges, as_float(scores))]


class IsotonicCalibration(Recalibrator):
    """Isotonic regression by pool adjacent violators (:func:`isotonic_fit`)."""

    fits_by_weight = True
    folds_at_once = True
    folds_on_host = True

    def _fit(self, scores, labels, sample_weight) -> IsotonicParams:
        check_binary(scores, labels, sample_weight)
        return isotonic_fit(scores, labels, sample_weight)

    def _fit_folds(self, scores, labels, weights) -> IsotonicParams:
        """One fit per row of ``weights`` ``[F, N]`` on the host (each row with some positive
        weight; checked input), the fields stacked ``[F, N]``: equal to :meth:`_fit` of each."""
        dtype = jax.dtypes.canonicalize_dtype(np.float64)
        s, y = np.asarray(scores, dtype), np.asarray(labels, dtype)
        fits = [_isotonic_host_fit(s, y, w) for w in np.asarray(weights, dtype)]
        return IsotonicParams(*(to_device(np.stack(field)) for field in zip(*fits, strict=True)))

    def _transform(self, params, scores) -> Array:
        return isotonic_transform(params, scores)


class HistogramBinning(Recalibrator):
    """Histogram binning (:func:`histogram_binning_fit`).

    Args:
      n_bins: number of bins.
      strategy: ``"uniform"`` or ``"quantile"``.
    """

    def __init__(self, n_bins: int = 10, strategy: str = "uniform") -> None:
        self.n_bins = n_bins
        self.strategy = strategy

    fits_by_weight = True
    folds_at_once = True

    def _fit(self, scores, labels, sample_weight) -> HistogramParams:
        return histogram_binning_fit(
            scores, labels, sample_weight, n_bins=self.n_bins, strategy=self.strategy
        )

    def _transform(self, params, scores) -> Array:
        return histogram_binning_transform(params, scores)
