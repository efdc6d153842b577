"""Class-weighted softmax cross-entropy: ``-w_y log a_y`` on the simplex.

Not one of the paper's losses (its multiclass loss is the one-vs-rest eq. ``b-loss-multi``, in
:mod:`iml.losses.matrix`), but the weighted cross-entropy of deep-learning libraries. The
weights depend only on the true class, so by the argument of Proposition 3 the optimal scores
are ``a_y ∝ gamma_y w_y`` and the loss correction divides by the weights and renormalises
(:func:`iml.scoring.optimal_score_class_weighted`). The record ``"class_weighted_softmax"``
grids over entries of ``w`` (``"w[8]=10"``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml import scoring as S
from iml.losses._registry import GridWeight, LossRecord, as_parameter, entropy_term, register
from iml.losses.matrix import entries_key

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "check_class_weights",
    "class_weighted_cross_entropy",
    "class_weighted_softmax_cross_entropy",
    "log_softmax_and_complement",
]


def class_weighted_cross_entropy(a: ArrayLike, y: ArrayLike, class_weights: ArrayLike) -> Array:
    """Class-weighted cross-entropy on the simplex, ``-w_y log a_y`` (not a loss of the paper).

    Args:
      class_weights: positive weights ``[n]``, one per true class.
    """
    a = jnp.asarray(a)
    y = jnp.asarray(y)
    w = jnp.asarray(class_weights, a.dtype)
    a_y = jnp.take_along_axis(a, y[..., None], axis=-1)[..., 0]
    return -w[y] * jnp.log(a_y)


def log_softmax_and_complement(z: Array, y: Array) -> tuple[Array, Array]:
    """``log p_y`` and ``log(1 - p_y)`` for ``p = softmax(z)``, both to full relative precision.

    ``log_softmax`` loses relative precision when ``p_y`` is near one (a difference of two large
    numbers); there ``log p_y = log1p(-(1 - p_y))`` with ``1 - p_y`` from a logsumexp over the
    other classes is exact to rounding.
    """
    log_p = jnp.take_along_axis(jax.nn.log_softmax(z, axis=-1), y[..., None], axis=-1)[..., 0]
    others = jnp.where(jax.nn.one_hot(y, z.shape[-1], dtype=bool), -jnp.inf, z)
    log_q = jax.nn.logsumexp(others, axis=-1) - jax.nn.logsumexp(z, axis=-1)
    near_one = log_q < -np.log(2.0)
    # The inner where keeps the unused branch finite so that gradients stay finite too.
    complement = jnp.log1p(-jnp.exp(jnp.where(near_one, log_q, -1.0)))
    return jnp.where(near_one, complement, log_p), log_q


def class_weighted_softmax_cross_entropy(
    logits: ArrayLike, y: ArrayLike, class_weights: ArrayLike
) -> Array:
    """:func:`class_weighted_cross_entropy` of ``softmax(logits)``, computed stably."""
    z = jnp.asarray(logits)
    y = jnp.asarray(y)
    w = jnp.asarray(class_weights, z.dtype)
    log_p, _ = log_softmax_and_complement(z, y)
    return -w[y] * log_p


def check_class_weights(class_weights: ArrayLike) -> int:
    """The class count of positive weights ``[..., n]``, ``n >= 2``.

    Raises:
      ValueError: naming ``class_weights``, for another shape or a weight that is not positive.
    """
    shape = np.shape(class_weights)
    if len(shape) < 1 or shape[-1] < 2:
        raise ValueError(f"class_weights must be a vector [n] with n >= 2; got shape {shape}")
    if V.is_concrete(class_weights):
        V.check_interval("class_weights", class_weights, 0.0, np.inf, open_low=True, open_high=True)
    return shape[-1]


# ----------------------------------------------------------------------------------------------
# The registry's record: "class_weighted_softmax"
# ----------------------------------------------------------------------------------------------


def _make(class_weights: ArrayLike) -> tuple[dict[str, Array], int]:
    n = check_class_weights(class_weights)
    return {"class_weights": as_parameter("class_weights", class_weights)}, n


def _entropy(gamma: ArrayLike, class_weights: ArrayLike) -> Array:
    """``l* = -sum_y xlogy(gamma_y w_y, gamma_y w_y / Z)``, ``Z = sum_y gamma_y w_y``."""
    V.check_simplex("gamma", gamma)
    g = jnp.asarray(gamma)
    g = g.astype(jnp.result_type(g.dtype, jnp.float32))
    w = jnp.asarray(class_weights, g.dtype)
    valid = jnp.all(w > 0, axis=-1) & jnp.all(g >= 0, axis=-1)
    weighted = g * w
    others = weighted @ (1.0 - jnp.eye(weighted.shape[-1], dtype=g.dtype))
    return V.nan_unless(valid, jnp.sum(entropy_term(weighted, others), axis=-1))


register(
    LossRecord(
        name="class_weighted_softmax",
        title="class-weighted softmax cross-entropy",
        make=_make,
        loss=class_weighted_cross_entropy,
        event_ndims={"class_weights": 1},
        multiclass=True,
        link="softmax",
        logits_loss=class_weighted_softmax_cross_entropy,
        optimal_score=S.optimal_score_class_weighted,
        inverse=S.loss_corrected_score_class_weighted,
        minimised_expected_loss=_entropy,
        grid_weight=GridWeight("w", 1, "class_weights"),
        row_weight=lambda y, class_weights: np.asarray(class_weights)[np.asarray(y)],
        exact="softmax",
        key=lambda params: entries_key("w", params["class_weights"]),
    )
)
