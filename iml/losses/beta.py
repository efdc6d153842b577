"""Beta-weighted proper losses (eq. ``b-loss-bin``): the paper's binary losses.

A binary loss is a function ``L(a, y)`` of the positive-class score ``a`` in ``(0, 1)`` and the
label ``y`` in ``{0, 1}``; it is *differentiable and strictly proper* (Definition 4, eq.
``proper``) when

    dL(a, 1)/da = w(a) (a - 1),     dL(a, 0)/da = w(a) a,     w(a) > 0.

This module holds the strictly proper base losses (log, squared, and :func:`proper_loss` of any
weight function), their beta-weighted forms, and the registry's records ``"log"`` and
``"squared"``: for any strictly proper base the optimal score is the beta-tilted posterior
(Proposition 2) and the loss correction its inverse (Corollary 1, eq. ``transformation``).

Every loss is elementwise, broadcasts over leading axes, works under ``jax.jit``, ``jax.vmap``
and ``jax.grad``, and takes probabilities; the logit forms (``*_logits``, ``*_cross_entropy``)
are what training minimises. The losses do no validation: they are the inner loop of training.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml import scoring as S
from iml.losses._registry import LossRecord, as_parameter, entropy_term, register

Array = jax.Array
ArrayLike = jax.typing.ArrayLike
BinaryLoss = Callable[[ArrayLike, ArrayLike], Array]
WeightFunction = Callable[[Array], Array]

__all__ = [
    "BinaryLoss",
    "WeightFunction",
    "beta_weighted_loss",
    "beta_weighted_sigmoid_cross_entropy",
    "log_loss",
    "log_loss_logits",
    "log_loss_weight",
    "proper_loss",
    "squared_loss",
    "squared_loss_weight",
]


def _is_positive(y: ArrayLike) -> Array:
    return jnp.asarray(y) == 1


# ----------------------------------------------------------------------------------------------
# Strictly proper base losses (Definition 4)
# ----------------------------------------------------------------------------------------------


def log_loss(a: ArrayLike, y: ArrayLike) -> Array:
    """Cross-entropy ``-y log a - (1 - y) log(1 - a)``: strictly proper (Definition 4, eq.
    ``proper``) with ``w(a) = 1/(a(1-a))``.

    Returns:
      The elementwise loss; ``inf`` where the score is 0 or 1 and the label disagrees.
    """
    a = jnp.asarray(a)
    return jnp.where(_is_positive(y), -jnp.log(a), -jnp.log1p(-a))


def log_loss_weight(a: ArrayLike) -> Array:
    """The weight function of :func:`log_loss` in eq. ``proper``: ``w(a) = 1 / (a (1 - a))``."""
    a = jnp.asarray(a)
    return 1.0 / (a * (1.0 - a))


def log_loss_logits(logits: ArrayLike, y: ArrayLike) -> Array:
    """:func:`log_loss` (Definition 4) of ``a = sigmoid(logits)``, computed stably from logits."""
    z = jnp.asarray(logits)
    return jnp.where(_is_positive(y), -jax.nn.log_sigmoid(z), -jax.nn.log_sigmoid(-z))


def squared_loss(a: ArrayLike, y: ArrayLike) -> Array:
    """Squared (Brier) loss ``(a - y)^2``: strictly proper (Definition 4) with ``w(a) = 2``."""
    a = jnp.asarray(a)
    return jnp.square(a - jnp.asarray(y, a.dtype))


def squared_loss_weight(a: ArrayLike) -> Array:
    """The weight function of :func:`squared_loss` in eq. ``proper``: ``w(a) = 2``."""
    return jnp.full_like(jnp.asarray(a), 2.0)


# Gauss-Legendre nodes on [0, 1] for the quadrature in proper_loss (computed once, in float64).
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(64)
_GL_NODES = (_GL_NODES + 1.0) / 2.0
_GL_WEIGHTS = _GL_WEIGHTS / 2.0


def proper_loss(weight: WeightFunction) -> BinaryLoss:
    """The strictly proper binary loss of a positive weight function ``w`` (Definition 4).

    Integrating eq. ``proper`` from the anchor ``a = 1/2`` gives

        L(a, 1) = ∫_a^{1/2} w(t) (1 - t) dt,     L(a, 0) = ∫_{1/2}^a w(t) t dt,

    which equals any loss with weight ``w`` up to a constant per label (constants change neither
    the optimal scores nor the loss corrections). The values come from 64-point Gauss-Legendre
    quadrature in the logit ``z = log(t / (1 - t))``, where integrands such as log loss's are
    smooth; the derivative is exact: a custom JVP returns ``w(a)(a - y)`` itself, so first-order
    conditions checked by autodiff see the weight function the researcher wrote.

    Args:
      weight: ``w``, a positive function on ``(0, 1)``, elementwise and written in ``jax.numpy``.

    Returns:
      ``L(a, y)``, elementwise in broadcast ``a`` and ``y``.

    Example:
      >>> L = proper_loss(lambda a: 1.0 / (a * (1.0 - a)))   # log loss, up to constants
    """

    @jax.custom_jvp
    def loss(a: Array, y: Array) -> Array:
        a, y = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(y, jnp.asarray(a).dtype))
        dtype = jnp.result_type(a.dtype, jnp.float32)
        a = a.astype(dtype)
        nodes = jnp.asarray(_GL_NODES, dtype)
        weights = jnp.asarray(_GL_WEIGHTS, dtype)
        za = jnp.log(a) - jnp.log1p(-a)  # logit(a); the anchor 1/2 has logit 0
        z = za[..., None] * nodes  # quadrature points between 0 and za
        t = jax.nn.sigmoid(z)
        one_minus_t = jax.nn.sigmoid(-z)
        dt_dz = t * one_minus_t
        w = weight(t)
        # d/dz of L(a, y) along the path: w(t) (t - y) dt/dz, integrated from 0 to za.
        integrand = jnp.where(_is_positive(y)[..., None], -w * one_minus_t, w * t) * dt_dz
        return za * jnp.sum(integrand * weights, axis=-1)

    @loss.defjvp
    def _loss_jvp(primals, tangents):
        a, y = primals
        a_dot, _ = tangents
        value = loss(a, y)
        a = jnp.asarray(a, value.dtype)
        slope = weight(a) * (a - jnp.asarray(y, value.dtype))
        return value, slope * jnp.asarray(a_dot, value.dtype)

    return loss


def beta_weighted_loss(
    a: ArrayLike, y: ArrayLike, beta: ArrayLike, base: BinaryLoss = log_loss
) -> Array:
    """The beta-weighted binary loss, eq. ``b-loss-bin``.

    ``L^beta(a, y) = beta y L(a, y) + (1 - beta)(1 - y) L(a, y)``: the positive class weighs
    ``beta`` and the negative class ``1 - beta``; ``beta = 1/2`` is half the base loss.

    Args:
      beta: weight of the positive class, in ``(0, 1)``; broadcasts against ``a`` and ``y``.
      base: a strictly proper binary loss ``L(a, y)`` (default :func:`log_loss`).
    """
    beta = jnp.asarray(beta)
    return jnp.where(_is_positive(y), beta, 1.0 - beta) * base(a, y)


def beta_weighted_sigmoid_cross_entropy(logits: ArrayLike, y: ArrayLike, beta: ArrayLike) -> Array:
    """The beta-weighted log loss (eq. ``b-loss-bin``) from logits: the loss the paper trains with.

    ``-beta y log sigmoid(z) - (1 - beta)(1 - y) log sigmoid(-z)``, stable for any logit.
    ``y`` may also be a soft label in ``[0, 1]``.
    """
    z = jnp.asarray(logits)
    y = jnp.asarray(y, z.dtype)
    beta = jnp.asarray(beta, z.dtype)
    return -(beta * y * jax.nn.log_sigmoid(z) + (1.0 - beta) * (1.0 - y) * jax.nn.log_sigmoid(-z))


# ----------------------------------------------------------------------------------------------
# The registry's records: "log" and "squared", each a function of its class weight beta
# ----------------------------------------------------------------------------------------------


def _make(beta: ArrayLike = 0.5) -> tuple[dict[str, Array], int]:
    V.check_beta("beta", beta)
    return {"beta": as_parameter("beta", beta)}, 2


def _squared_logits(logits: ArrayLike, y: ArrayLike, beta: ArrayLike) -> Array:
    """The beta-weighted squared loss of ``sigmoid(logits)``; ``y`` may be a soft label."""
    z = jnp.asarray(logits)
    beta = jnp.asarray(beta, z.dtype)
    y = jnp.asarray(y, z.dtype)
    a = jax.nn.sigmoid(z)
    return beta * y * jnp.square(1.0 - a) + (1.0 - beta) * (1.0 - y) * jnp.square(a)


def _weights(gamma: ArrayLike, beta: ArrayLike) -> tuple[Array, Array, Array]:
    """The posterior's weighted masses ``beta gamma`` and ``(1 - beta)(1 - gamma)``, and where
    both the posterior and beta are valid."""
    V.check_unit("gamma", gamma)
    g = jnp.asarray(gamma)
    g = g.astype(jnp.result_type(g.dtype, jnp.float32))
    beta = jnp.asarray(beta, g.dtype)
    valid = (beta > 0) & (beta < 1) & (g >= 0) & (g <= 1)
    return beta * g, (1.0 - beta) * (1.0 - g), valid


def _log_entropy(gamma: ArrayLike, beta: ArrayLike) -> Array:
    """``l*`` of the beta-weighted log loss: ``Z h(c^beta(gamma))``, ``Z = beta gamma + (1 -
    beta)(1 - gamma)``, ``h`` the binary entropy in nats, each term as ``p log1p(q / p)``."""
    pos, neg, valid = _weights(gamma, beta)
    return V.nan_unless(valid, entropy_term(pos, neg) + entropy_term(neg, pos))


def _squared_entropy(gamma: ArrayLike, beta: ArrayLike) -> Array:
    """``l*`` of the beta-weighted squared loss: ``Z c (1 - c)``, the weighted Brier entropy."""
    pos, neg, valid = _weights(gamma, beta)
    return V.nan_unless(valid, pos * neg / (pos + neg))


def _row_weight(y: np.ndarray, beta: np.ndarray) -> np.ndarray:
    return np.where(np.asarray(y) == 1, beta, 1.0 - np.asarray(beta))


_LOG = register(
    LossRecord(
        name="log",
        title="beta-weighted log loss",
        make=_make,
        loss=lambda a, y, beta: beta_weighted_loss(a, y, beta, base=log_loss),
        event_ndims={"beta": 0},
        logits_loss=beta_weighted_sigmoid_cross_entropy,
        optimal_score=S.optimal_score,
        inverse=S.loss_corrected_score,
        minimised_expected_loss=_log_entropy,
        class_weight="beta",
        row_weight=_row_weight,
        exact="logistic",
        prior_shift=True,
    )
)
register(
    dataclasses.replace(
        _LOG,
        name="squared",
        title="beta-weighted squared loss",
        loss=lambda a, y, beta: beta_weighted_loss(a, y, beta, base=squared_loss),
        logits_loss=_squared_logits,
        minimised_expected_loss=_squared_entropy,
        exact=None,
        prior_shift=False,
    )
)
