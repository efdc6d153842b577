"""The beta-weighted boosting loss, registered in ``iml`` as ``"boosting"`` when imported.

The boosting (exponential) loss of a score ``a`` in ``(0, 1)`` is

    L(a, 1) = sqrt((1 - a) / a),     L(a, 0) = sqrt(a / (1 - a)),

``exp(-z/2)`` and ``exp(z/2)`` of the logit ``z = logit(a)``. It is strictly proper
(Definition 4, eq. ``proper``) with the weight ``w(a) = (a (1 - a))^(-3/2) / 2``, so its
beta-weighted form (eq. ``b-loss-bin``), ``beta L(a, 1)`` for a positive and
``(1 - beta) L(a, 0)`` for a negative, is minimised by the beta-tilted posterior
(Proposition 2), and its loss correction is Corollary 1's inverse, as for the built-in
beta-weighted log and squared losses. At that minimum the expected loss is
``l*(gamma) = 2 sqrt(beta gamma (1 - beta) (1 - gamma))``.

With the loss registered, ``iml.loss_spec("boosting", beta=0.9)`` builds it and
``iml sweep --loss boosting`` sweeps its class weight.
"""

import jax
import jax.numpy as jnp
import numpy as np

import iml
from iml import losses

__all__ = ["boosting_loss", "boosting_loss_logits", "minimised_expected_loss"]


def boosting_loss(a, y, beta):
    """The beta-weighted boosting loss of scores ``a`` and labels ``y`` in ``{0, 1}``:
    ``beta sqrt((1 - a) / a)`` for a positive, ``(1 - beta) sqrt(a / (1 - a))`` for a negative;
    elementwise, broadcasting ``a``, ``y`` and ``beta``."""
    a = jnp.asarray(a)
    positive = jnp.asarray(y) == 1
    return jnp.where(positive, beta * jnp.sqrt((1 - a) / a), (1 - beta) * jnp.sqrt(a / (1 - a)))


def boosting_loss_logits(z, y, beta):
    """:func:`boosting_loss` of ``a = sigmoid(z)`` from the logits ``z``:
    ``beta y exp(-z/2) + (1 - beta)(1 - y) exp(z/2)``; ``y`` may be a soft label."""
    z = jnp.asarray(z)
    y = jnp.asarray(y, z.dtype)
    return beta * y * jnp.exp(-z / 2) + (1 - beta) * (1 - y) * jnp.exp(z / 2)


def minimised_expected_loss(gamma, beta):
    """``l*(gamma)``: the expected :func:`boosting_loss` at the optimal score under the
    posterior ``gamma``, ``2 sqrt(beta gamma (1 - beta) (1 - gamma))``."""
    gamma = jnp.asarray(gamma)
    return 2 * jnp.sqrt(beta * gamma * (1 - beta) * (1 - gamma))


def _make(beta=0.5):
    """The loss's parameters: ``beta`` in ``(0, 1)``, checked where it is concrete.

    Raises:
      ValueError: naming ``beta``, for a value outside ``(0, 1)``.
    """
    if not isinstance(beta, jax.core.Tracer):
        values = np.asarray(beta, dtype=np.float64)
        if values.size and not (0 < values.min() and values.max() < 1):
            raise ValueError(f"beta must lie in (0, 1), got {beta}")
    return {"beta": losses.as_parameter("beta", beta)}, 2


losses.register(
    losses.LossRecord(
        name="boosting",
        title="beta-weighted boosting loss",
        make=_make,
        loss=boosting_loss,
        event_ndims={"beta": 0},
        logits_loss=boosting_loss_logits,
        optimal_score=iml.optimal_score,
        inverse=iml.loss_corrected_score,
        minimised_expected_loss=minimised_expected_loss,
        class_weight="beta",
        row_weight=lambda y, beta: np.where(np.asarray(y) == 1, beta, 1 - beta),
    )
)
