"""Temperature scaling: ``sigmoid(z / T)`` or ``softmax(z / T)`` with the one temperature ``T``
that minimises the negative log-likelihood, found by bisection (Guo, Pleiss, Sun & Weinberger
2017): :func:`temperature_fit`, :func:`temperature_transform` and
:class:`TemperatureScaling`, binary or multiclass.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.recalibration._common import (
    EPS,
    as_float,
    as_weights,
    check_labels,
    check_scores,
    check_weights,
    logit,
)
from iml.recalibration.interface import Recalibrator

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "TemperatureScaling",
    "temperature_fit",
    "temperature_transform",
]


def _temperature_nll(inverse_t: Array, logits: Array, labels: Array, w: Array) -> Array:
    z = inverse_t * logits
    if logits.ndim == 1:
        y = labels.astype(z.dtype)
        nll = -(y * jax.nn.log_sigmoid(z) + (1.0 - y) * jax.nn.log_sigmoid(-z))
    else:
        log_p = jax.nn.log_softmax(z, axis=-1)
        nll = -jnp.take_along_axis(log_p, labels[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return jnp.sum(w * nll) / jnp.sum(w)


def temperature_fit(
    logits: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None = None,
    *,
    n_iter: int = 64,
) -> Array:
    """Temperature scaling: the ``T > 0`` that minimises the NLL of ``softmax(logits / T)``.

    The NLL is convex in the inverse temperature ``1/T``, so its derivative is monotone and
    bisection on ``log(1/T)`` over ``[-12, 12]`` finds the minimiser with a fixed number of steps
    (jit- and vmap-friendly, no tolerance to tune).

    Args:
      logits: binary logits ``[N]`` (labels in ``{0, 1}``) or multiclass logits ``[N, n]``.
      labels: ``[N]`` integer labels.
      sample_weight: optional non-negative weights ``[N]``.
      n_iter: bisection steps (static).

    Returns:
      The temperature ``T`` (a scalar).

    References:
      Guo, Pleiss, Sun & Weinberger (2017), On calibration of modern neural networks.
    """
    if V.is_concrete(logits, labels, sample_weight):
        check_scores(logits, "logits", probabilities=False)
        z = np.asarray(logits)
        if z.ndim not in (1, 2):
            raise ValueError(f"logits must have shape [N] or [N, n], got {z.shape}")
        if not np.isfinite(z).all():
            raise ValueError("logits contains infinite values")
        check_labels(labels, z.shape[0], 2 if z.ndim == 1 else z.shape[1])
        check_weights(sample_weight, z.shape[0])
    z = as_float(logits)
    return _temperature_kernel(z, jnp.asarray(labels), as_weights(sample_weight, z), n_iter)


@functools.partial(jax.jit, static_argnums=(3,))
def _temperature_kernel(z: Array, y: Array, w: Array, n_iter: int) -> Array:
    slope = jax.grad(_temperature_nll)

    def bisect(_: int, bounds: tuple[Array, Array]) -> tuple[Array, Array]:
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        rising = slope(jnp.exp(mid), z, y, w) > 0
        return jnp.where(rising, lo, mid), jnp.where(rising, mid, hi)

    lo, hi = jax.lax.fori_loop(
        0, n_iter, bisect, (jnp.asarray(-12.0, z.dtype), jnp.asarray(12.0, z.dtype))
    )
    return jnp.exp(-0.5 * (lo + hi))


def temperature_transform(temperature: ArrayLike, logits: ArrayLike) -> Array:
    """Apply a temperature ``T``: ``sigmoid(z / T)`` (binary) or ``softmax(z / T)`` (multiclass)."""
    z = as_float(logits) / jnp.asarray(temperature)
    return jax.nn.sigmoid(z) if z.ndim == 1 else jax.nn.softmax(z, axis=-1)


class TemperatureScaling(Recalibrator):
    """Temperature scaling (:func:`temperature_fit`), binary or multiclass.

    Args:
      inputs: ``"probabilities"`` (binary ``[N]`` scores are mapped to logits, multiclass
        ``[N, n]`` probabilities to log-probabilities, which softmax turns back) or
        ``"logits"``. The output is always probabilities.
    """

    def __init__(self, inputs: str = "probabilities") -> None:
        if inputs not in ("probabilities", "logits"):
            raise ValueError(f"inputs must be 'probabilities' or 'logits', got {inputs!r}")
        self.inputs = inputs

    def _logits(self, scores: ArrayLike) -> Array:
        x = as_float(scores)
        if self.inputs == "logits":
            return x
        return logit(x) if x.ndim == 1 else jnp.log(jnp.clip(x, EPS, 1.0))

    def _check_transform_input(self, scores: ArrayLike) -> None:
        check_scores(scores, probabilities=self.inputs == "probabilities")

    def _fit(self, scores, labels, sample_weight) -> Array:
        self._check_transform_input(scores)
        return temperature_fit(self._logits(scores), labels, sample_weight)

    def _transform(self, params, scores) -> Array:
        return temperature_transform(params, self._logits(scores))
