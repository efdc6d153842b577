"""The smooth calibration error and smooth reliability diagram of Blasiok & Nakkiran (2023),
"Smooth ECE: Principled Reliability Diagrams via Kernel Smoothing" (ICLR 2024): the residuals
smoothed by a reflected Gaussian kernel instead of binned, at the fixed-point bandwidth."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from iml._bootstrap import bootstrap_counts, check_bootstrap, percentile_interval
from iml.calibration._checks import (
    as_float,
    as_labels,
    as_weights,
    check_binary,
    check_smooth_options,
)
from iml.calibration.binning import safe_div

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["SmoothCalibrationCurve", "SmoothECE", "smooth_calibration_curve", "smooth_ece"]


SMOOTH_GRID = 1001  # grid nodes on [0, 1]: spacing 1e-3, the bandwidth search's resolution
_MIN_BANDWIDTH = 1e-3  # bandwidths below this count as too small in the search (relplot's eps)
SMOOTH_BISECTION = 10  # halvings of [0, 1]: the bandwidth to 2**-10 < _MIN_BANDWIDTH


class SmoothECE(NamedTuple):
    """Result of :func:`smooth_ece` (a pytree).

    Attributes:
      ece: the smooth calibration error ``smECE_sigma``, a scalar in ``[0, 1]``.
      bandwidth: the kernel bandwidth ``sigma`` it was computed with: the fixed point
        ``smECE_sigma = sigma`` when none was given.
    """

    ece: Array
    bandwidth: Array


class SmoothCalibrationCurve(NamedTuple):
    """The smooth reliability diagram of Blasiok & Nakkiran (2023) (a pytree).

    Attributes:
      grid: the evaluation points ``t_j = j / (n_grid - 1)``, ``(n_grid,)``.
      event_rate: the Nadaraya-Watson estimate of ``P(y = 1 | a = t)`` with the reflected
        Gaussian kernel, ``(n_grid,)``; NaN where no score lies within reach of the kernel
        (the weight there underflows to 0), like an empty bin.
      density: the kernel density of the scores (integrates to about 1), ``(n_grid,)``.
      bandwidth: the kernel bandwidth ``sigma``.
      ece: the smooth calibration error at that bandwidth.
      event_rate_interval: percentile bootstrap band of ``event_rate``, ``(2, n_grid)``
        (row 0 lower, row 1 upper; observations resampled, bandwidth held fixed), or ``None``.
    """

    grid: Array
    event_rate: Array
    density: Array
    bandwidth: Array
    ece: Array
    event_rate_interval: Array | None = None


def _linear_binning(scores: Array, values: Array, n_grid: int) -> Array:
    """``values (..., n)`` spread onto the grid nodes by linear interpolation: ``(..., n_grid)``.

    A score between nodes ``j`` and ``j + 1`` gives them the shares ``1 - u`` and ``u`` of its
    value (``u`` its relative position), so smoothing the result with a kernel sampled on the grid
    approximates the kernel sum over the scores to second order in the grid spacing.
    """
    position = jnp.clip(scores, 0.0, 1.0) * (n_grid - 1)
    lower = jnp.clip(jnp.floor(position), 0, n_grid - 2).astype(jnp.int32)
    upper_share = position - lower
    out = jnp.zeros((*values.shape[:-1], n_grid), values.dtype)
    out = out.at[..., lower].add(values * (1.0 - upper_share))
    return out.at[..., lower + 1].add(values * upper_share)


def _periodic_gaussian(bandwidth: Array, n_grid: int, dtype) -> Array:
    """The Gaussian density of scale ``bandwidth`` wrapped with period 2, sampled at the offsets
    ``j h`` (``h = 1 / (n_grid - 1)``, ``j < 2 (n_grid - 1)``): images within 4 of the origin,
    enough for every bandwidth up to 1."""
    offsets = jnp.arange(2 * (n_grid - 1), dtype=dtype) / (n_grid - 1)
    images = offsets[None, :] + jnp.array([-4.0, -2.0, 0.0, 2.0], dtype)[:, None]
    z = images / bandwidth
    return jnp.sum(jnp.exp(-0.5 * z * z), axis=0) / (jnp.sqrt(2.0 * jnp.pi) * bandwidth)


def _reflected_smooth(grid_values: Array, bandwidth: Array) -> Array:
    """``sum_b v_b K(t_a, t_b)`` for node values ``v (..., n_grid)``, by FFT.

    ``K`` is the reflected Gaussian kernel, the density at ``t_a`` of ``t_b + sigma Z`` folded
    back into ``[0, 1]`` at both ends: ``sum_k phi((t_a - t_b + 2k) / sigma) + phi((t_a + t_b
    + 2k) / sigma)`` over ``sigma``. Folding is periodic with period 2, so the sum is one circular
    convolution of the mirrored values with :func:`_periodic_gaussian`; a value at an end node
    counts twice, since its mirror image coincides with it. Float32 FFT errors are about
    ``1e-7`` of the largest output: harmless in integrals, see :func:`_reflected_kernel_matrix`
    where small values matter.
    """
    n_grid = grid_values.shape[-1]
    ends = jnp.ones(n_grid, grid_values.dtype).at[jnp.array([0, n_grid - 1])].set(2.0)
    v = grid_values * ends
    mirrored = jnp.concatenate([v, v[..., -2:0:-1]], axis=-1)
    kernel = _periodic_gaussian(bandwidth, n_grid, grid_values.dtype)
    out = jnp.fft.irfft(jnp.fft.rfft(mirrored) * jnp.fft.rfft(kernel), n=mirrored.shape[-1])
    return out[..., :n_grid]


def _reflected_kernel_matrix(bandwidth: Array, n_grid: int, dtype) -> Array:
    """The matrix of :func:`_reflected_smooth`, ``K[b, a] = g(a - b) + g(a + b)`` (``g`` the
    periodic Gaussian), for exact products where the smoothed values are tiny (sparse tails)."""
    g = _periodic_gaussian(bandwidth, n_grid, dtype)
    idx = jnp.arange(n_grid)
    period = 2 * (n_grid - 1)
    return g[(idx[None, :] - idx[:, None]) % period] + g[(idx[None, :] + idx[:, None]) % period]


def _trapezoid_sum(x: Array) -> Array:
    """Trapezoid-rule sum over the last (grid) axis, in units of the grid spacing."""
    return jnp.sum(x, axis=-1) - 0.5 * (x[..., 0] + x[..., -1])


def _smooth_ece_at(binned: Array, bandwidth: Array) -> Array:
    """``smECE_sigma`` from the binned weighted residuals and weights, ``binned (2, n_grid)``."""
    weighted_residual, weight = _reflected_smooth(binned, bandwidth)
    return _trapezoid_sum(jnp.abs(weighted_residual)) / _trapezoid_sum(weight)


def _fixed_point_bandwidth(ece_at: Callable[[Array], Array], n_bisection: int, dtype) -> Array:
    """The bandwidth ``sigma*`` with ``smECE_sigma* = sigma*``, by bisection on ``[0, 1]``.

    ``smECE_sigma`` decreases in ``sigma`` (Blasiok & Nakkiran 2023), so ``sigma - smECE_sigma``
    has one root. Like relplot, the result is the upper end of the last bracket (a bandwidth at
    least its own error), and bandwidths below ``_MIN_BANDWIDTH`` count as too small. The upper
    end 1 is never too small, since ``smECE_sigma <= 1``.
    """

    def halve(_, bracket):
        lower, upper = bracket
        middle = 0.5 * (lower + upper)
        too_small = (middle < _MIN_BANDWIDTH) | (middle < ece_at(middle))
        return jnp.where(too_small, middle, lower), jnp.where(too_small, upper, middle)

    start = (jnp.zeros((), dtype), jnp.ones((), dtype))
    return jax.lax.fori_loop(0, n_bisection, halve, start)[1]


def smooth_inputs(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None
) -> tuple[Array, Array, Array, Array]:
    """Scores, labels and weights as floats, and whether any entry is invalid (under jit)."""
    s = as_float(scores)
    y = as_labels(labels, s)
    w = as_weights(sample_weight, s)
    invalid = jnp.any(jnp.isnan(s) | (s < 0) | (s > 1) | jnp.isnan(y) | jnp.isnan(w))
    clean = ~(jnp.isnan(s) | jnp.isnan(y) | jnp.isnan(w))
    s, y, w = jnp.where(clean, s, 0.0), jnp.where(clean, y, 0.0), jnp.where(clean, w, 0.0)
    return s, y, w, invalid


def smooth_ece_of(
    s: Array, y: Array, w: Array, bandwidth: ArrayLike | None, n_grid: int, n_bisection: int
) -> SmoothECE:
    """:func:`smooth_ece` of clean inputs (also used, vmapped over betas, by
    :func:`calibration_across_betas`)."""
    binned = _linear_binning(s, jnp.stack([w * (y - s), w]), n_grid)
    ece_at = functools.partial(_smooth_ece_at, binned)
    if bandwidth is None:
        sigma = _fixed_point_bandwidth(ece_at, n_bisection, s.dtype)
    else:
        sigma = jnp.asarray(bandwidth, s.dtype)
        sigma = jnp.where(sigma > 0, sigma, jnp.nan)
    return SmoothECE(ece_at(sigma), sigma)


def smooth_ece(
    scores: ArrayLike,
    labels: ArrayLike,
    bandwidth: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
    *,
    n_grid: int = SMOOTH_GRID,
    n_bisection: int = SMOOTH_BISECTION,
) -> SmoothECE:
    """The smooth calibration error of Blasiok & Nakkiran (2023), with no bins.

    "Smooth ECE: Principled Reliability Diagrams via Kernel Smoothing" (ICLR 2024,
    arXiv:2309.12236). The residuals ``r_i = y_i - a_i`` are smoothed by the Nadaraya-Watson
    estimator with the reflected Gaussian kernel ``K_sigma`` (a Gaussian folded back into
    ``[0, 1]`` at both ends), ``r_hat(t) = sum_i w_i r_i K(t, a_i) / sum_i w_i K(t, a_i)``, and
    weighted by the kernel density of the scores ``delta_hat(t)``::

        smECE_sigma = integral over [0, 1] of |r_hat(t)| delta_hat(t) dt.

    Without a ``bandwidth``, ``sigma`` is the fixed point ``smECE_sigma = sigma`` (the paper's
    choice), found by ``n_bisection`` halvings of ``[0, 1]``. Kernel sums are taken on
    ``n_grid`` nodes and the integral by the trapezoid rule, so bandwidths much below
    ``1 / (n_grid - 1)`` are resolved poorly. Jittable and vmappable.

    Args:
      scores: positive-class scores in ``[0, 1]``, shape ``(n,)``.
      labels: labels in ``{0, 1}``, shape ``(n,)``.
      bandwidth: a fixed kernel bandwidth ``sigma > 0``, or ``None`` for the fixed point.
      n_grid: grid nodes on ``[0, 1]``.
      n_bisection: halvings in the bandwidth search.

    Returns:
      :class:`SmoothECE` ``(ece, bandwidth)``, scalars.

    Raises:
      ValueError: on concrete bad input; under jit, a NaN or out-of-range score, a bad label, a
        negative weight or a non-positive bandwidth makes both outputs NaN.
    """
    check_smooth_options(bandwidth, n_grid, n_bisection)
    check_binary(scores, labels, sample_weight)
    return _smooth_ece(scores, labels, bandwidth, sample_weight, n_grid, n_bisection)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _smooth_ece(scores, labels, bandwidth, sample_weight, n_grid, n_bisection) -> SmoothECE:
    s, y, w, invalid = smooth_inputs(scores, labels, sample_weight)
    result = smooth_ece_of(s, y, w, bandwidth, n_grid, n_bisection)
    return jax.tree.map(lambda x: jnp.where(invalid, jnp.nan, x), result)


def smooth_calibration_curve(
    scores: ArrayLike,
    labels: ArrayLike,
    bandwidth: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
    *,
    n_grid: int = SMOOTH_GRID,
    n_bisection: int = SMOOTH_BISECTION,
    n_bootstrap: int = 0,
    key: Array | None = None,
    confidence: float = 0.95,
) -> SmoothCalibrationCurve:
    """The smooth reliability diagram of Blasiok & Nakkiran (2023): no bins, no empty bins.

    The curve is the kernel regression of the labels on the scores,
    ``t -> sum_i w_i y_i K(t, a_i) / sum_i w_i K(t, a_i)`` with the reflected Gaussian kernel of
    :func:`smooth_ece` at its bandwidth, with the scores' kernel density. The optional band is
    the percentile interval of the curve over bootstrap resamples of the observations, the
    bandwidth held fixed (as the authors' ``relplot`` draws it).

    Args:
      scores, labels, bandwidth, n_bisection: as :func:`smooth_ece`.
      n_grid: grid nodes on ``[0, 1]`` (the curve's points).
      n_bootstrap: bootstrap replicates for the band (0 for none).

    Returns:
      A :class:`SmoothCalibrationCurve` on the ``n_grid`` nodes.

    Raises:
      ValueError: on concrete bad input; under jit, bad entries make every output NaN.
    """
    check_smooth_options(bandwidth, n_grid, n_bisection)
    check_binary(scores, labels, sample_weight)
    check_bootstrap(n_bootstrap, key, confidence)
    return _smooth_calibration_curve(
        scores, labels, bandwidth, sample_weight, key, n_grid, n_bisection, n_bootstrap, confidence
    )


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8))
def _smooth_calibration_curve(
    scores, labels, bandwidth, sample_weight, key, n_grid, n_bisection, n_bootstrap, confidence
) -> SmoothCalibrationCurve:
    s, y, w, invalid = smooth_inputs(scores, labels, sample_weight)
    ece, sigma = smooth_ece_of(s, y, w, bandwidth, n_grid, n_bisection)
    kernel = _reflected_kernel_matrix(sigma, n_grid, s.dtype)

    def rate_and_weight(weights: Array) -> tuple[Array, Array]:
        binned = _linear_binning(s, jnp.stack([weights * y, weights], axis=-2), n_grid)
        smoothed = jnp.matmul(binned, kernel, precision=jax.lax.Precision.HIGHEST)
        positives, weight = smoothed[..., 0, :], smoothed[..., 1, :]
        return jnp.clip(safe_div(positives, weight), 0.0, 1.0), weight

    event_rate, weight = rate_and_weight(w)
    density = weight / jnp.sum(w)
    grid = jnp.linspace(0.0, 1.0, n_grid, dtype=s.dtype)
    curve = SmoothCalibrationCurve(grid, event_rate, density, sigma, ece)
    if n_bootstrap > 0:
        counts = bootstrap_counts(key, s.shape[0], n_bootstrap)
        band = percentile_interval(rate_and_weight(w * counts)[0], confidence)
        curve = curve._replace(event_rate_interval=band)
    nan = functools.partial(jnp.where, invalid, jnp.nan)
    return curve._replace(
        **{k: nan(v) for k, v in curve._asdict().items() if k != "grid" and v is not None}
    )
