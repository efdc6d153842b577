"""Checks of a loss and its rule before trusting its loss correction, by automatic
differentiation; meant to be called directly, they validate eagerly.

* :func:`check_first_order_conditions`: that a rule minimises the expected loss of eq.
  ``choice`` (first- and second-order conditions, as in the proofs of Propositions 2 and 3).
* :func:`check_invertibility`: that a binary loss's rule is single-valued and invertible on a
  grid of scores, the premise of Propositions 4 and 5, closed by a round trip through the rule.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp

from iml import _validation as V
from iml.scoring._autodiff import (
    binary_inverse,
    derivatives,
    per_class_losses,
    solve_binary_rule_jit,
)
from iml.scoring._common import Array, ArrayLike, BinaryLossFn, as_float, logit

__all__ = [
    "FirstOrderConditionReport",
    "InvertibilityReport",
    "check_first_order_conditions",
    "check_invertibility",
]


# ----------------------------------------------------------------------------------------------
# First-order conditions, verified by automatic differentiation
# ----------------------------------------------------------------------------------------------


class FirstOrderConditionReport(NamedTuple):
    """How well a scoring rule satisfies the optimality conditions of eq. ``choice``.

    ``residual`` is the headline: the worst relative gradient of the expected loss at the rule's
    score, ``|grad E| / sum_y gamma_y |grad L(., y)|``, which is 0 at a stationary point and of
    order 1 far from it. ``min_curvature`` is the smallest relative curvature of the expected
    loss in a feasible direction: positive at a strict minimum.
    """

    residual: Array
    min_curvature: Array
    worst_index: Array
    relative_gradient: Array  # per posterior
    curvature: Array  # per posterior

    def passed(self, tol: float = 1e-3) -> bool:
        """True when every posterior's score is stationary within ``tol`` and a strict minimum."""
        return bool(self.residual <= tol) and bool(self.min_curvature > 0)


def check_first_order_conditions(
    loss: Callable[..., Array],
    rule: Callable[..., Array],
    posteriors: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    domain: Literal["binary", "box", "simplex"] = "binary",
) -> FirstOrderConditionReport:
    """Verify with ``jax.grad`` and second derivatives that ``rule`` minimises the expected loss.

    For each posterior ``gamma`` the expected loss ``E(a) = sum_y gamma_y L(a, y)`` must be
    stationary at ``a = rule(gamma)`` (first-order condition, as in the proofs of Propositions 2
    and 3) and curve upwards there (second-order condition). This is how to check a new loss or
    a hand-derived rule before trusting its loss correction.

    Args:
      loss: binary domain: ``loss(a, y)`` elementwise with ``y`` in {0., 1.}; box and simplex
        domains: ``loss(a, y)`` for one score vector ``a [n]`` and an integer label.
        With ``weights`` given, it is called as ``loss(a, y, weights)``.
      rule: ``rule(gamma)`` (or ``rule(gamma, weights)``): scores for posteriors. Binary: takes
        and returns ``[m]``; box/simplex: ``[m, n]``.
      posteriors: interior posteriors to check: ``[m]`` in ``(0, 1)`` for binary, ``[m, n]``
        with positive entries summing to one otherwise.
      weights: optional weights passed to both ``loss`` and ``rule`` (e.g. ``beta`` or ``B``).
      domain: ``"binary"``; ``"box"`` for independent scores in ``(0, 1)^n``; ``"simplex"`` for
        scores constrained to sum to one (gradients and curvature on the simplex's tangent space).
    """
    extra = () if weights is None else (weights,)
    if domain == "binary":
        V.check_interval("posteriors", posteriors, 0.0, 1.0, open_low=True, open_high=True)
        (gamma,) = as_float(posteriors)
        if gamma.ndim != 1:
            raise ValueError(f"binary posteriors must be a 1-D array; got shape {gamma.shape}")
        a = jnp.asarray(rule(gamma, *extra), gamma.dtype)
        if a.shape != gamma.shape:
            raise ValueError(f"rule returned shape {a.shape} for posteriors {gamma.shape}")

        def per_point(g, x):
            d_pos, dd_pos = derivatives(loss, x, 1.0, extra)
            d_neg, dd_neg = derivatives(loss, x, 0.0, extra)
            grad = g * d_pos + (1.0 - g) * d_neg
            scale = g * jnp.abs(d_pos) + (1.0 - g) * jnp.abs(d_neg)
            curv = g * dd_pos + (1.0 - g) * dd_neg
            curv_scale = g * jnp.abs(dd_pos) + (1.0 - g) * jnp.abs(dd_neg)
            return _relative(jnp.abs(grad), scale), _relative(curv, curv_scale)

        rel_grad, curvature = jax.vmap(per_point)(gamma, a)
    elif domain in ("box", "simplex"):
        V.check_simplex("posteriors", posteriors)
        (gamma,) = as_float(posteriors)
        if gamma.ndim != 2 or gamma.shape[-1] < 2:
            raise ValueError(f"posteriors must have shape [m, n] with n >= 2; got {gamma.shape}")
        if not V.is_concrete(gamma) or bool(jnp.any(gamma <= 0)):
            raise ValueError("posteriors must be strictly positive (interior of the simplex)")
        a = jnp.asarray(rule(gamma, *extra), gamma.dtype)
        if a.shape != gamma.shape:
            raise ValueError(f"rule returned shape {a.shape} for posteriors {gamma.shape}")
        n = gamma.shape[-1]
        if domain == "simplex":
            # Orthonormal basis of the tangent space {v : sum(v) = 0}.
            basis = jnp.linalg.qr(jnp.eye(n, dtype=gamma.dtype) - 1.0 / n)[0][:, : n - 1]
        else:
            basis = jnp.eye(n, dtype=gamma.dtype)

        def per_point(g, x):
            def losses(u):
                return per_class_losses(loss, u, extra)

            grads = jax.jacrev(losses)(x) @ basis  # [n_labels, dims]
            hessians = jnp.einsum("ij,yjk,kl->yil", basis.T, jax.hessian(losses)(x), basis)
            grad = g @ grads
            scale = g @ jnp.linalg.norm(grads, axis=-1)
            hess = jnp.einsum("y,yij->ij", g, hessians)
            curv = jnp.linalg.eigvalsh(hess)[0]
            curv_scale = g @ jnp.linalg.norm(hessians, ord=2, axis=(-2, -1))
            return _relative(jnp.linalg.norm(grad), scale), _relative(curv, curv_scale)

        rel_grad, curvature = jax.vmap(per_point)(gamma, a)
    else:
        raise ValueError(f"domain must be 'binary', 'box' or 'simplex'; got {domain!r}")

    rel_grad = jnp.where(jnp.isnan(rel_grad), jnp.inf, rel_grad)
    curvature = jnp.where(jnp.isnan(curvature), -jnp.inf, curvature)
    worst = jnp.argmax(rel_grad)
    return FirstOrderConditionReport(
        residual=rel_grad[worst],
        min_curvature=jnp.min(curvature),
        worst_index=worst,
        relative_gradient=rel_grad,
        curvature=curvature,
    )


def _relative(value: Array, scale: Array) -> Array:
    """``value / scale`` with a zero scale giving 0 for a zero value and +-inf otherwise."""
    tiny = jnp.finfo(jnp.result_type(value, jnp.float32)).tiny
    return jnp.where(scale > tiny, value / jnp.maximum(scale, tiny), jnp.sign(value) * jnp.inf)


# ----------------------------------------------------------------------------------------------
# Invertibility of a binary loss's rule (Propositions 4 and 5)
# ----------------------------------------------------------------------------------------------


class InvertibilityReport(NamedTuple):
    """Whether a binary loss's optimal scoring rule is single-valued and invertible on a grid:
    the premise of Propositions 4 and 5."""

    invertible: Array  # all checks below pass
    posterior: Array  # gamma(a) on the grid (NaN where not invertible pointwise)
    pointwise: Array  # derivatives of opposite sign and a strict minimum, per grid point
    increasing: Array  # gamma(a) strictly increasing along the grid
    round_trip: Array  # the optimal score of gamma(a) is a again, per grid point


@functools.partial(jax.jit, static_argnums=0)
def _invertibility(loss: BinaryLossFn, grid: Array, params: tuple) -> tuple[Array, Array, Array]:
    gamma, valid = binary_inverse(loss, grid, params)
    # Monotonicity in the posterior log-odds log(L'(a,0) / -L'(a,1)), which, unlike gamma itself,
    # does not round to 1 in float32 where the rule is steep.
    d_pos = derivatives(loss, grid, 1.0, params)[0]
    d_neg = derivatives(loss, grid, 0.0, params)[0]
    log_odds = jnp.log(d_neg) - jnp.log(-d_pos)
    return gamma, valid, jnp.all(jnp.diff(log_odds) > 0)


def check_invertibility(
    loss: BinaryLossFn, *params: ArrayLike, grid: ArrayLike | None = None
) -> InvertibilityReport:
    """Check that the optimal scoring rule of ``loss`` is invertible (Proposition 4's premise).

    On a grid of scores, the posterior ``gamma(a)`` of :func:`loss_corrected_score_for_loss` must
    exist (derivatives of opposite sign, positive curvature of the expected loss) and increase
    strictly with ``a``; then each posterior has exactly one optimal score and the loss
    correction is well defined. The round trip closes the check: the generic rule
    (:func:`optimal_score_for_loss`) must map ``gamma(a)`` back to ``a``, to within the scores
    of the posteriors one float32 step either side (and 1e-3 in the logit, relative beyond a
    logit of 1), so that a rule the solver misses fails here too.

    Args:
      loss: ``loss(a, y, *params)``, elementwise.
      *params: scalar extra arguments of ``loss``.
      grid: strictly increasing scores in ``(0, 1)``; default 1,801 points uniform in the logit
        over ``[-9, 9]`` (scores from 1.2e-4 to 1 - 1.2e-4, distinct in float32).
    """
    if grid is None:
        grid = jax.nn.sigmoid(jnp.linspace(-9.0, 9.0, 1801))
    (grid,) = as_float(grid)
    if grid.ndim != 1 or grid.shape[0] < 2:
        raise ValueError(f"grid must be a 1-D array of at least 2 scores; got {grid.shape}")
    if V.is_concrete(grid) and not bool(jnp.all(jnp.diff(grid) > 0)):
        raise ValueError("grid must be strictly increasing")
    V.check_interval("grid", grid, 0.0, 1.0, open_low=True, open_high=True)
    params = tuple(jnp.broadcast_to(jnp.asarray(p), grid.shape) for p in params)
    gamma, valid, increasing = _invertibility(loss, grid, params)
    round_trip = _round_trip(loss, grid, gamma, valid, params)
    return InvertibilityReport(
        invertible=jnp.all(valid) & increasing & jnp.all(round_trip),
        posterior=V.nan_unless(valid, gamma),
        pointwise=valid,
        increasing=increasing,
        round_trip=round_trip,
    )


#: How far, in logit units (relative beyond a logit of 1), the optimal scores of the posteriors
#: around ``gamma(a)`` may lie from ``a`` in :func:`check_invertibility`'s round trip: float32
#: bisection lands within about 1e-6.
_ROUND_TRIP_LOGIT = 1e-3


def _round_trip(
    loss: BinaryLossFn, grid: Array, gamma: Array, valid: Array, params: tuple
) -> Array:
    """Whether the generic rule maps ``gamma(a)`` back to ``a``, per grid point: ``a`` must lie
    between the optimal scores of the float32 neighbours of ``gamma(a)``, since where the rule
    is steep one posterior in float32 stands for a range of scores (the focal loss's, near 1)."""
    gamma = jnp.where(valid, gamma, 0.5)
    below = solve_binary_rule_jit(loss, jnp.nextafter(gamma, jnp.zeros_like(gamma)), params)
    above = solve_binary_rule_jit(loss, jnp.nextafter(gamma, jnp.ones_like(gamma)), params)
    z = logit(grid)
    tol = _ROUND_TRIP_LOGIT * jnp.maximum(1.0, jnp.abs(z))
    return valid & (logit(below) - tol <= z) & (z <= logit(above) + tol)
