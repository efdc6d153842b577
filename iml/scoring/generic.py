"""The optimal scoring rule of any differentiable loss, eq. ``choice``, and its inverse
(Proposition 4), found by automatic differentiation: for losses without the closed forms of
Propositions 2 and 3.

* :func:`optimal_score_for_loss`, :func:`loss_corrected_score_for_loss`: binary losses; the rule
  from its first-order condition, the inverse in closed form (the condition is linear in the
  posterior).
* :func:`optimal_score_multiclass_for_loss`, :func:`loss_corrected_score_multiclass_for_loss`:
  multiclass losses, scores on the simplex (softmax) or in the box (one-vs-rest sigmoids); the
  inverse is the simplex least squares of the loss's gradients.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp

from iml import _validation as V
from iml.scoring._autodiff import binary_inverse, per_class_losses, solve_binary_rule_jit
from iml.scoring._common import Array, ArrayLike, BinaryLossFn, MulticlassLossFn, as_float, logit

Domain = Literal["simplex", "box"]

__all__ = [
    "loss_corrected_score_for_loss",
    "loss_corrected_score_multiclass_for_loss",
    "optimal_score_for_loss",
    "optimal_score_multiclass_for_loss",
]


# ----------------------------------------------------------------------------------------------
# Generic binary rules for any differentiable loss
# ----------------------------------------------------------------------------------------------


def optimal_score_for_loss(loss: BinaryLossFn, gamma: ArrayLike, *params: ArrayLike) -> Array:
    """Optimal score of any differentiable binary loss, eq. ``choice``, by autodiff.

    A scan over the logits of every normal float score in ``(0, 1)`` (-87 to 16.64 in float32)
    brackets each minimum by the sign of the first-order condition
    ``gamma dL(a,1)/da + (1 - gamma) dL(a,0)/da``, and bisection on it, in the logit and then in
    the score, locates the minimum to float precision; of several minima the lower of the two
    best brackets is kept. Where the expected loss still falls at the top of the scan (rises at
    its bottom) the score is 1 (0). Gradients of the result come from the implicit function
    theorem. Minima narrower than the scan's spacing can be missed: :func:`check_invertibility`
    and :func:`check_first_order_conditions` test a new loss.

    Args:
      loss: ``loss(a, y, *params)``, elementwise in ``a`` and the broadcast ``params``, with
        ``y`` a label 0.0 or 1.0. E.g. ``iml.losses.focal_loss`` or a user's own function.
      gamma: posteriors in ``[0, 1]``.
      *params: extra arguments of ``loss`` (e.g. ``beta``), broadcast against ``gamma``.

    Returns:
      Optimal scores, the broadcast shape of ``gamma`` and ``params``.
    """
    V.check_unit("gamma", gamma)
    shape = V.check_broadcastable(gamma=gamma, **{f"params[{i}]": p for i, p in enumerate(params)})
    (gamma,) = as_float(gamma)
    gamma = V.nan_unless((gamma >= 0) & (gamma <= 1), jnp.broadcast_to(gamma, shape))
    params = tuple(jnp.broadcast_to(jnp.asarray(p), shape) for p in params)
    return solve_binary_rule_jit(loss, gamma, params)


_binary_inverse_jit = jax.jit(binary_inverse, static_argnums=0)


def loss_corrected_score_for_loss(loss: BinaryLossFn, a: ArrayLike, *params: ArrayLike) -> Array:
    """Loss-corrected score of any differentiable binary loss (Proposition 4), in closed form.

    The first-order condition of eq. ``choice`` is linear in the posterior, so the posterior for
    which ``a`` is optimal is

        gamma(a) = L'(a, 0) / (L'(a, 0) - L'(a, 1)),     L' = dL/da by autodiff.

    Where no posterior makes ``a`` optimal (the derivatives have the same sign, one is
    infinite, or the expected loss has no strict minimum there) the rule is not invertible at
    ``a`` and the result is NaN; :func:`check_invertibility` tests a whole grid. A score of
    exactly 0 or 1 maps to the posterior 0 or 1 where the inverse holds at the nearest scores
    inside, ``eps/2`` and ``1 - eps/2``, and to NaN otherwise.

    Args:
      loss: ``loss(a, y, *params)``, elementwise, ``y`` a label 0.0 or 1.0.
      a: scores in ``[0, 1]``.
      *params: extra arguments of ``loss``, broadcast against ``a``.

    Returns:
      Posteriors, NaN where the rule does not invert.
    """
    V.check_unit("a", a)
    shape = V.check_broadcastable(a=a, **{f"params[{i}]": p for i, p in enumerate(params)})
    (a,) = as_float(a)
    a = V.nan_unless((a >= 0) & (a <= 1), jnp.broadcast_to(a, shape))
    params = tuple(jnp.broadcast_to(jnp.asarray(p), shape) for p in params)
    gamma, valid = _binary_inverse_jit(loss, a, params)
    return V.nan_unless(valid, gamma)


# ----------------------------------------------------------------------------------------------
# Generic multiclass rules: scores on the simplex (softmax) or in the box (one-vs-rest sigmoids)
# ----------------------------------------------------------------------------------------------


def _link(domain: Domain) -> Callable[[Array], Array]:
    if domain == "simplex":
        return jax.nn.softmax
    if domain == "box":
        return jax.nn.sigmoid
    raise ValueError(f"domain must be 'simplex' or 'box'; got {domain!r}")


def optimal_score_multiclass_for_loss(
    loss: MulticlassLossFn,
    gamma: ArrayLike,
    *params: ArrayLike,
    domain: Domain = "simplex",
    num_iters: int = 40,
) -> Array:
    """Optimal scores of any differentiable multiclass loss, eq. ``choice``, by autodiff.

    Minimises ``sum_y gamma_y L(a, y)`` by damped Newton steps with a line search in the
    unconstrained parameter ``z``: ``a = softmax(z)`` for scores on the simplex (softmax
    classifiers), ``a = sigmoid(z)`` for independent one-vs-rest scores in the box ``(0, 1)^n``.

    Args:
      loss: ``loss(a, y, *params)`` for one score vector ``a [n]`` and an integer label ``y``,
        returning a scalar, e.g. ``iml.losses.class_weighted_cross_entropy``.
      *params: extra arguments of ``loss``, shared by every posterior (e.g. class weights).
      domain: ``"simplex"`` or ``"box"``.
      num_iters: Newton iterations.
    """
    _link(domain)
    V.check_simplex("gamma", gamma)
    (gamma,) = as_float(gamma)
    if gamma.ndim < 1 or gamma.shape[-1] < 2:
        raise ValueError(f"gamma must have at least 2 classes on its last axis; got {gamma.shape}")
    n = gamma.shape[-1]
    params = tuple(jnp.asarray(p) for p in params)
    flat = _minimise_expected_loss(loss, domain, gamma.reshape(-1, n), params, num_iters)
    return flat.reshape(gamma.shape)


@functools.partial(jax.jit, static_argnums=(0, 1, 4))
def _minimise_expected_loss(
    loss: MulticlassLossFn, domain: Domain, gamma: Array, params: tuple, num_iters: int
) -> Array:
    """Damped Newton with a line search on ``sum_y gamma_y L(link(z), y)``, per row of gamma."""
    link = _link(domain)
    n = gamma.shape[-1]
    eps = jnp.finfo(gamma.dtype).eps
    steps = 2.0 ** -jnp.arange(12, dtype=gamma.dtype)
    steps = jnp.concatenate([steps, jnp.zeros((1,), gamma.dtype)])

    def solve_one(g):
        def expected(z):
            return jnp.dot(g, per_class_losses(loss, link(z), params))

        start = jnp.clip(g, 1e-6, 1.0 - 1e-6)
        z0 = jnp.log(start) if domain == "simplex" else logit(start)

        def newton(_, z):
            grad = jax.grad(expected)(z)
            hess = jax.hessian(expected)(z)
            damping = 1e-6 * (jnp.trace(jnp.abs(hess)) / n) + eps
            direction = jnp.linalg.solve(hess + damping * jnp.eye(n, dtype=z.dtype), grad)
            # Fall back to steepest descent where Newton's direction does not descend.
            direction = jnp.where(jnp.dot(direction, grad) > 0, direction, grad)
            candidates = z[None, :] - steps[:, None] * direction[None, :]
            values = jax.vmap(expected)(candidates)
            values = jnp.where(jnp.isnan(values), jnp.inf, values)
            return candidates[jnp.argmin(values)]

        return link(jax.lax.fori_loop(0, num_iters, newton, z0))

    return jax.vmap(solve_one)(gamma)


def loss_corrected_score_multiclass_for_loss(
    loss: MulticlassLossFn,
    a: ArrayLike,
    *params: ArrayLike,
    domain: Domain = "simplex",
    return_residual: bool = False,
    num_iters: int = 500,
) -> Array | tuple[Array, Array]:
    """Loss-corrected posteriors of any differentiable multiclass loss (Proposition 4).

    The first-order condition of eq. ``choice`` in the parameter ``z`` of the scores,
    ``sum_y gamma_y dL(a, y)/dz = 0``, is linear in ``gamma``: ``J(a) gamma = 0`` with column
    ``y`` of ``J`` the gradient of ``L(a, y)``. The result is the posterior on the simplex that
    minimises ``||J(a) gamma||^2`` -- exact when ``a`` is in the image of the rule.

    Args:
      loss: ``loss(a, y, *params)`` for one score vector and an integer label, scalar.
      a: scores ``[..., n]``: on the simplex for ``domain="simplex"``, in ``(0, 1)^n`` for
        ``"box"``.
      *params: extra arguments of ``loss``.
      domain: ``"simplex"`` (``a = softmax(z)``) or ``"box"`` (``a = sigmoid(z)``).
      return_residual: also return the relative first-order residual
        ``||J gamma|| / sum_y gamma_y ||J_y||`` (0 when ``a`` is exactly optimal).
      num_iters: projected-gradient iterations of the simplex least squares.
    """
    _link(domain)
    V.check_unit("a", a)
    if domain == "simplex":
        V.check_simplex("a", a)
    (a,) = as_float(a)
    n = a.shape[-1]
    z = jnp.log(a) if domain == "simplex" else logit(a)
    params = tuple(jnp.asarray(p) for p in params)
    J = _loss_gradient_matrix(loss, domain, z.reshape(-1, n), params)
    gamma = _simplex_least_squares(J, num_iters)
    gamma = gamma.reshape(a.shape)
    if not return_residual:
        return gamma
    Jg = jnp.einsum("bij,bj->bi", J, gamma.reshape(-1, n))
    scale = jnp.einsum("bj,bj->b", gamma.reshape(-1, n), jnp.linalg.norm(J, axis=1))
    residual = jnp.linalg.norm(Jg, axis=-1) / jnp.maximum(scale, jnp.finfo(a.dtype).tiny)
    return gamma, residual.reshape(a.shape[:-1])


@functools.partial(jax.jit, static_argnums=(0, 1))
def _loss_gradient_matrix(loss: MulticlassLossFn, domain: Domain, z: Array, params: tuple) -> Array:
    """Per row of ``z``: the matrix whose column ``y`` is ``d L(link(z), y) / dz``."""
    link = _link(domain)

    def jacobian(z1):
        return jax.jacrev(lambda u: per_class_losses(loss, link(u), params))(z1).T

    return jax.vmap(jacobian)(z)


# ----------------------------------------------------------------------------------------------
# The simplex least squares: the generic multiclass inverse
# ----------------------------------------------------------------------------------------------

# Up to this many classes the simplex projection compares all pairs of entries instead of
# sorting: n^2 comparisons a row, but several times faster on the CPU than a sort at tens of
# classes, and the projection is most of the time of the generic multiclass correction's
# iterations (:func:`loss_corrected_score_multiclass_for_loss`).
_PAIRWISE_PROJECTION_MAX = 64


def _project_to_simplex(v: Array) -> Array:
    """Euclidean projection of each row of ``v`` onto the probability simplex.

    The projection is ``max(v - theta, 0)`` with the threshold ``theta = max_k (S_k - 1) / C_k``
    over the prefixes of ``v`` sorted in decreasing order, ``S_k`` the sum and ``C_k`` the count
    of the entries at least ``v_k``. Up to :data:`_PAIRWISE_PROJECTION_MAX` classes those come
    from comparing all pairs; above, from a sort.
    """
    n = v.shape[-1]
    if n <= _PAIRWISE_PROJECTION_MAX:
        at_least = (v[..., None, :] >= v[..., :, None]).astype(v.dtype)  # [..., k, j]: v_j >= v_k
        total = jnp.einsum("...kj,...j->...k", at_least, v, precision=jax.lax.Precision.HIGHEST)
        theta = jnp.max((total - 1.0) / jnp.sum(at_least, axis=-1), axis=-1, keepdims=True)
        return jnp.maximum(v - theta, 0.0)
    u = jnp.flip(jnp.sort(v, axis=-1), axis=-1)
    cumulative = jnp.cumsum(u, axis=-1) - 1.0
    k = jnp.arange(1, n + 1, dtype=v.dtype)
    support = jnp.sum(u - cumulative / k > 0, axis=-1, keepdims=True)
    theta = jnp.take_along_axis(cumulative, support - 1, axis=-1) / support
    return jnp.maximum(v - theta, 0.0)


@functools.partial(jax.jit, static_argnums=1)
def _simplex_least_squares(M: Array, num_iters: int = 500) -> Array:
    """``argmin_{gamma in simplex} ||M gamma||^2`` for a batch of matrices ``M [..., m, n]``.

    Starts from the right singular vector of the smallest singular value normalised to sum one
    (the exact answer when ``M`` has a null vector inside the simplex) and refines it by
    accelerated projected gradient (FISTA), which leaves an exact start where it is. The inverse
    of any differentiable multiclass loss (:func:`loss_corrected_score_multiclass_for_loss`),
    whose first-order conditions are linear in ``gamma``.
    """
    n = M.shape[-1]
    _, s, vh = jnp.linalg.svd(M, full_matrices=False)
    v = vh[..., -1, :]
    total = jnp.sum(v, axis=-1, keepdims=True)
    uniform = jnp.full_like(v, 1.0 / n)
    safe = jnp.abs(total) > 1e-6 * jnp.max(jnp.abs(v), axis=-1, keepdims=True)
    start = _project_to_simplex(jnp.where(safe, v / jnp.where(safe, total, 1.0), uniform))
    gram = jnp.swapaxes(M, -1, -2) @ M
    step = 1.0 / (2.0 * jnp.maximum(s[..., :1] ** 2, jnp.finfo(M.dtype).tiny))

    def body(_, carry):
        x, y, t = carry
        grad = 2.0 * jnp.einsum("...ij,...j->...i", gram, y)
        x_new = _project_to_simplex(y - step * grad)
        t_new = (1.0 + jnp.sqrt(1.0 + 4.0 * t * t)) / 2.0
        y_new = x_new + ((t - 1.0) / t_new) * (x_new - x)
        return x_new, y_new, t_new

    t0 = jnp.ones((*M.shape[:-2], 1), M.dtype)
    x, _, _ = jax.lax.fori_loop(0, num_iters, body, (start, start, t0))
    return x
