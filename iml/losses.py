"""Weighted proper losses as pure JAX functions.

Notation follows Caplin, Martin & Marx, *Calibrating for Class Weights by Modeling Machine
Learning* (the paper). A binary loss is a function ``L(a, y)`` of the positive-class score
``a`` in ``(0, 1)`` and the label ``y`` in ``{0, 1}``; it is *differentiable and strictly proper*
(Definition 4, eq. ``proper``) when

    dL(a, 1)/da = w(a) (a - 1),     dL(a, 0)/da = w(a) a,     w(a) > 0.

Every loss here is elementwise and broadcasts over leading axes, works under ``jax.jit``,
``jax.vmap`` and ``jax.grad``, and takes probabilities; where training uses logits a numerically
stable logit form is given next to it (``*_logits``).

Multiclass losses take scores ``a`` with classes on the last axis and integer labels ``y`` (one
fewer axis). They do no validation: they are the inner loop of training.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array
ArrayLike = jax.typing.ArrayLike
BinaryLoss = Callable[[ArrayLike, ArrayLike], Array]
WeightFunction = Callable[[Array], Array]

__all__ = [
    "BinaryLoss",
    "beta_weighted_loss",
    "beta_weighted_sigmoid_cross_entropy",
    "class_weighted_cross_entropy",
    "class_weighted_softmax_cross_entropy",
    "focal_loss",
    "focal_loss_multiclass",
    "log_loss",
    "log_loss_logits",
    "log_loss_weight",
    "matrix_weighted_loss",
    "proper_loss",
    "sigmoid_focal_loss",
    "softmax_focal_loss",
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

    Args:
      a: positive-class scores in ``[0, 1]``.
      y: labels in ``{0, 1}`` (broadcast against ``a``).

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


# ----------------------------------------------------------------------------------------------
# Class-weighted losses (eqs. b-loss-bin and b-loss-multi)
# ----------------------------------------------------------------------------------------------


def beta_weighted_loss(
    a: ArrayLike, y: ArrayLike, beta: ArrayLike, base: BinaryLoss = log_loss
) -> Array:
    """The beta-weighted binary loss, eq. ``b-loss-bin``.

    ``L^beta(a, y) = beta y L(a, y) + (1 - beta)(1 - y) L(a, y)``: the positive class weighs
    ``beta`` and the negative class ``1 - beta``; ``beta = 1/2`` is half the base loss.

    Args:
      a: positive-class scores in ``[0, 1]``.
      y: labels in ``{0, 1}``.
      beta: weight of the positive class, in ``(0, 1)``; broadcasts against ``a`` and ``y``.
      base: a strictly proper binary loss ``L(a, y)`` (default :func:`log_loss`).

    Returns:
      The elementwise weighted loss.
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


def matrix_weighted_loss(
    a: ArrayLike, y: ArrayLike, B: ArrayLike, base: BinaryLoss = log_loss
) -> Array:
    """The B-weighted multiclass loss, eq. ``b-loss-multi``.

    ``L^B(a, y) = sum_{y'} B[y, y'] L(a_{y'}, 1{y = y'})``: a one-vs-rest sum of binary losses in
    which row ``y`` of ``B`` weighs the score of every class when the true class is ``y``.

    Args:
      a: scores of shape ``[..., n]``, each in ``[0, 1]`` (they need not sum to one).
      y: integer labels of shape ``[...]`` in ``{0, ..., n - 1}``.
      B: positive weight matrix ``[n, n]`` (rows: true class, columns: scored class).
      base: a strictly proper binary loss.

    Returns:
      The loss, of shape ``[...]``.
    """
    a = jnp.asarray(a)
    B = jnp.asarray(B, a.dtype)
    n = a.shape[-1]
    onehot = jax.nn.one_hot(jnp.asarray(y), n, dtype=a.dtype)
    return jnp.sum(B[jnp.asarray(y)] * base(a, onehot), axis=-1)


def class_weighted_cross_entropy(a: ArrayLike, y: ArrayLike, class_weights: ArrayLike) -> Array:
    """Class-weighted cross-entropy on the simplex: ``-w_y log a_y``.

    Not one of the paper's losses (its multiclass loss is the one-vs-rest eq. ``b-loss-multi``);
    the weights depend only on the true class, so the optimal scores are ``a_y ∝ gamma_y w_y``
    (:func:`iml.scoring.optimal_score_class_weighted`), by the argument of Proposition 3.

    Args:
      a: probabilities ``[..., n]`` summing to one (a softmax output).
      y: integer labels ``[...]``.
      class_weights: positive weights ``[n]``, one per true class.
    """
    a = jnp.asarray(a)
    y = jnp.asarray(y)
    w = jnp.asarray(class_weights, a.dtype)
    a_y = jnp.take_along_axis(a, y[..., None], axis=-1)[..., 0]
    return -w[y] * jnp.log(a_y)


def _log_softmax_and_complement(z: Array, y: Array) -> tuple[Array, Array]:
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
    """:func:`class_weighted_cross_entropy` of ``softmax(logits)``, computed stably (not in the
    paper; the usual weighted softmax cross-entropy of deep learning libraries)."""
    z = jnp.asarray(logits)
    y = jnp.asarray(y)
    w = jnp.asarray(class_weights, z.dtype)
    log_p, _ = _log_softmax_and_complement(z, y)
    return -w[y] * log_p


# ----------------------------------------------------------------------------------------------
# Focal loss (Lin et al. 2017): not proper for gamma > 0
# ----------------------------------------------------------------------------------------------


def focal_loss(a: ArrayLike, y: ArrayLike, gamma: ArrayLike = 2.0, alpha: ArrayLike = 0.5) -> Array:
    """Binary focal loss on probabilities (Lin et al. 2017).

    ``-2 alpha y (1 - a)^gamma log a - 2 (1 - alpha)(1 - y) a^gamma log(1 - a)``. With
    ``gamma = 0`` it is the beta-weighted log loss with ``beta = alpha`` (up to the factor 2, which
    makes ``alpha = 1/2`` the unweighted loss); for ``gamma > 0`` it is not proper, so even
    unweighted its optimal scores differ from the posterior.

    Args:
      a: positive-class scores in ``[0, 1]``.
      y: labels in ``{0, 1}``.
      gamma: focusing parameter ``>= 0``.
      alpha: weight of the positive class in ``(0, 1)``, as ``beta`` in eq. ``b-loss-bin``.
    """
    a = jnp.asarray(a)
    gamma = jnp.asarray(gamma, a.dtype)
    alpha = jnp.asarray(alpha, a.dtype)
    pos = -2.0 * alpha * (1.0 - a) ** gamma * jnp.log(a)
    neg = -2.0 * (1.0 - alpha) * a**gamma * jnp.log1p(-a)
    return jnp.where(_is_positive(y), pos, neg)


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
    return jnp.where(_is_positive(y), pos, neg)


def focal_loss_multiclass(
    a: ArrayLike, y: ArrayLike, gamma: ArrayLike = 2.0, class_weights: ArrayLike | None = None
) -> Array:
    """Multiclass focal loss on the simplex (Lin et al. 2017): ``-w_y (1 - a_y)^gamma log a_y``.

    Not in the paper; its optimal scores come from the generic rule of eq. ``choice``
    (:func:`iml.scoring.optimal_score_multiclass_for_loss`).

    Args:
      a: probabilities ``[..., n]`` summing to one.
      y: integer labels ``[...]``.
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
    log_p, log_q = _log_softmax_and_complement(z, y)
    w = 1.0 if class_weights is None else jnp.asarray(class_weights, z.dtype)[y]
    return -w * jnp.exp(jnp.asarray(gamma, z.dtype) * log_q) * log_p
