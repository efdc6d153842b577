"""Focal losses (Lin et al. 2017): binary on sigmoid scores, multiclass on the simplex.

Not proper for a focusing parameter ``gamma > 0``: even unweighted, their optimal scores differ
from the posterior, and no closed form gives them. Their records leave the rule, its inverse and
``l*`` to the generic rules of :mod:`iml.scoring`, found by automatic differentiation. The binary
record ``"focal"`` is a function of its class weight ``alpha`` (as ``beta`` in eq.
``b-loss-bin``); the multiclass ``"softmax_focal"`` grids over entries of its class weights
``w`` (``"w[8]=10"``).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.losses._registry import GridWeight, LossRecord, as_parameter, register
from iml.losses.matrix import entries_key
from iml.losses.softmax import check_class_weights, log_softmax_and_complement

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["focal_loss", "focal_loss_multiclass", "sigmoid_focal_loss", "softmax_focal_loss"]


def focal_loss(a: ArrayLike, y: ArrayLike, gamma: ArrayLike = 2.0, alpha: ArrayLike = 0.5) -> Array:
    """Binary focal loss on probabilities (Lin et al. 2017).

    ``-2 alpha y (1 - a)^gamma log a - 2 (1 - alpha)(1 - y) a^gamma log(1 - a)``. With
    ``gamma = 0`` it is the beta-weighted log loss with ``beta = alpha`` (up to the factor 2, which
    makes ``alpha = 1/2`` the unweighted loss); for ``gamma > 0`` it is not proper, so even
    unweighted its optimal scores differ from the posterior.

    Args:
      gamma: focusing parameter ``>= 0``.
      alpha: weight of the positive class in ``(0, 1)``, as ``beta`` in eq. ``b-loss-bin``.
    """
    a = jnp.asarray(a)
    gamma = jnp.asarray(gamma, a.dtype)
    alpha = jnp.asarray(alpha, a.dtype)
    pos = -2.0 * alpha * (1.0 - a) ** gamma * jnp.log(a)
    neg = -2.0 * (1.0 - alpha) * a**gamma * jnp.log1p(-a)
    return jnp.where(jnp.asarray(y) == 1, pos, neg)


def sigmoid_focal_loss(
    logits: ArrayLike, y: ArrayLike, gamma: ArrayLike = 2.0, alpha: ArrayLike = 0.5
) -> Array:
    """:func:`focal_loss` of ``a = sigmoid(logits)``, with logs and powers taken stably."""
    z = jnp.asarray(logits)
    gamma = jnp.asarray(gamma, z.dtype)
    alpha = jnp.asarray(alpha, z.dtype)
    log_p, log_q = jax.nn.log_sigmoid(z), jax.nn.log_sigmoid(-z)
    pos = -2.0 * alpha * jnp.exp(gamma * log_q) * log_p
    neg = -2.0 * (1.0 - alpha) * jnp.exp(gamma * log_p) * log_q
    return jnp.where(jnp.asarray(y) == 1, pos, neg)


def focal_loss_multiclass(
    a: ArrayLike, y: ArrayLike, gamma: ArrayLike = 2.0, class_weights: ArrayLike | None = None
) -> Array:
    """Multiclass focal loss on the simplex (Lin et al. 2017): ``-w_y (1 - a_y)^gamma log a_y``.

    Not in the paper; its optimal scores come from the generic rule of eq. ``choice``
    (:func:`iml.scoring.optimal_score_multiclass_for_loss`).

    Args:
      gamma: focusing parameter ``>= 0``.
      class_weights: optional positive weights ``[n]`` per true class (default all ones).
    """
    a = jnp.asarray(a)
    y = jnp.asarray(y)
    a_y = jnp.take_along_axis(a, y[..., None], axis=-1)[..., 0]
    w = 1.0 if class_weights is None else jnp.asarray(class_weights, a.dtype)[y]
    return -w * (1.0 - a_y) ** jnp.asarray(gamma, a.dtype) * jnp.log(a_y)


def softmax_focal_loss(
    logits: ArrayLike, y: ArrayLike, gamma: ArrayLike = 2.0, class_weights: ArrayLike | None = None
) -> Array:
    """:func:`focal_loss_multiclass` (Lin et al. 2017) of ``softmax(logits)``, computed stably."""
    z = jnp.asarray(logits)
    y = jnp.asarray(y)
    log_p, log_q = log_softmax_and_complement(z, y)
    w = 1.0 if class_weights is None else jnp.asarray(class_weights, z.dtype)[y]
    return -w * jnp.exp(jnp.asarray(gamma, z.dtype) * log_q) * log_p


# ----------------------------------------------------------------------------------------------
# The registry's records: "focal" and "softmax_focal"
# ----------------------------------------------------------------------------------------------


def _check_focusing(gamma: ArrayLike) -> None:
    V.check_interval("gamma", gamma, 0.0, np.inf, open_low=False, open_high=True)


def _make_focal(gamma: ArrayLike = 2.0, alpha: ArrayLike = 0.5) -> tuple[dict[str, Array], int]:
    """Focusing ``gamma >= 0`` and class weight ``alpha`` in ``(0, 1)``, broadcast together."""
    _check_focusing(gamma)
    V.check_beta("alpha", alpha)
    shape = V.check_broadcastable(gamma=gamma, alpha=alpha)
    params = {
        "gamma": jnp.broadcast_to(as_parameter("gamma", gamma), shape),
        "alpha": jnp.broadcast_to(as_parameter("alpha", alpha), shape),
    }
    return params, 2


def _make_softmax_focal(
    gamma: ArrayLike = 2.0, *, class_weights: ArrayLike
) -> tuple[dict[str, Array], int]:
    """Focusing ``gamma >= 0`` and class weights ``[..., n]``, with one batch shape for both so
    that a batched specification maps over every leaf."""
    _check_focusing(gamma)
    n = check_class_weights(class_weights)
    lead = V.check_broadcastable(gamma=gamma, class_weights=np.zeros(np.shape(class_weights)[:-1]))
    params = {
        "gamma": jnp.broadcast_to(as_parameter("gamma", gamma), lead),
        "class_weights": jnp.broadcast_to(as_parameter("class_weights", class_weights), (*lead, n)),
    }
    return params, n


def _softmax_focal_key(params: Mapping[str, np.ndarray]) -> str | None:
    entries = entries_key("w", params["class_weights"])
    return None if entries is None else f"gamma={float(params['gamma']):g},{entries}"


register(
    LossRecord(
        name="focal",
        title="focal loss",
        make=_make_focal,
        loss=focal_loss,
        event_ndims={"gamma": 0, "alpha": 0},
        logits_loss=sigmoid_focal_loss,
        class_weight="alpha",
        row_weight=lambda y, gamma, alpha: np.where(np.asarray(y) == 1, alpha, 1.0 - alpha),
        key=lambda p: f"gamma={float(p['gamma']):g},alpha={float(p['alpha'])!r}",
    )
)
register(
    LossRecord(
        name="softmax_focal",
        title="softmax focal loss",
        make=_make_softmax_focal,
        loss=focal_loss_multiclass,
        event_ndims={"gamma": 0, "class_weights": 1},
        multiclass=True,
        link="softmax",
        logits_loss=softmax_focal_loss,
        grid_weight=GridWeight("w", 1, "class_weights"),
        row_weight=lambda y, gamma, class_weights: np.asarray(class_weights)[np.asarray(y)],
        key=_softmax_focal_key,
    )
)
