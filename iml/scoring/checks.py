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
import numpy as np

from iml import _validation as V
from iml.scoring._autodiff import (
    derivatives,
    inverse_parts,
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
    """Whether a binary loss's optimal scoring rule is single-valued and invertible on a grid of
    scores: the premise of Propositions 4 and 5.

    ``invertible`` is the headline; :meth:`passed` gives it as a ``bool`` and
    :meth:`failing_range` names the scores where it fails, so that a caller can refuse a loss
    before training with "not invertible for scores in [low, high]".
    """

    invertible: Array  # no grid point fails
    posterior: Array  # gamma(a) on the grid (NaN where not invertible pointwise)
    pointwise: Array  # derivatives of opposite sign and a strict minimum, per grid point
    increasing: Array  # gamma(a) strictly increasing along the grid
    round_trip: Array  # the optimal score of gamma(a) is a again, per grid point
    scores: Array  # the grid of scores checked
    failing: Array  # per grid point: not pointwise, not increasing to a neighbour, or no round trip

    def passed(self) -> bool:
        """True when the rule is invertible at every score of the grid (``invertible``)."""
        return bool(self.invertible)

    def failing_range(self) -> tuple[float, float] | None:
        """``(low, high)``: the smallest and largest scores of the grid where the check fails, as
        floats, or ``None`` when it passes. The scores between need not all fail: ``failing``
        marks each, and ``scores`` holds the grid."""
        failing = np.asarray(self.failing)
        if not failing.any():
            return None
        scores = np.asarray(self.scores)[failing]
        return float(scores.min()), float(scores.max())


#: The logit of the largest float32 score below 1, ``1 - 2^-24``: ``log(2^24 - 1)``.
_FLOAT32_MAX_LOGIT = float(np.log(2.0**24 - 1.0))


def _default_grid() -> np.ndarray:
    """:func:`check_invertibility`'s default grid: the distinct float32 scores of 3,329 logits
    uniform over ``[-16.64, 16.64]`` (:data:`_FLOAT32_MAX_LOGIT`), ascending."""
    z = np.linspace(-_FLOAT32_MAX_LOGIT, _FLOAT32_MAX_LOGIT, 3329)
    return np.unique((1.0 / (1.0 + np.exp(-z))).astype(np.float32))


@functools.partial(jax.jit, static_argnums=0)
def _invertibility(loss: BinaryLossFn, grid: Array, params: tuple) -> tuple[Array, Array, Array]:
    gamma, log_odds, valid = inverse_parts(loss, grid, params)
    # Monotonicity in the posterior log-odds, which, unlike gamma itself, does not round to 1 in
    # float32 where the rule is steep. A point fails with a step down on either side.
    up = jnp.diff(log_odds) > 0
    ones = jnp.ones((1,), bool)
    return gamma, valid, jnp.concatenate([up, ones]) & jnp.concatenate([ones, up])


def check_invertibility(
    loss: BinaryLossFn, *params: ArrayLike, grid: ArrayLike | None = None
) -> InvertibilityReport:
    """Check that the optimal scoring rule of ``loss`` is invertible (Proposition 4's premise).

    On a grid of scores, the posterior ``gamma(a)`` of :func:`loss_corrected_score_for_loss` must
    exist (derivatives of opposite sign, the expected loss at a strict minimum) and increase
    strictly with ``a``; then each posterior has exactly one optimal score and the loss
    correction is well defined. The round trip closes the check: the generic rule
    (:func:`optimal_score_for_loss`) must map ``gamma(a)`` back to ``a``, to within the scores
    of the posteriors one float step either side (the smallest normal float above 0, since
    smaller posteriors flush to 0) and 1e-3 in the logit, relative beyond a logit of 1, so that
    a rule the solver misses fails here too.

    Args:
      loss: ``loss(a, y, *params)``, elementwise.
      *params: scalar extra arguments of ``loss``.
      grid: strictly increasing scores in ``(0, 1)``. Default: the float32 scores of 3,329
        logits uniform over ``[-16.64, 16.64]``, each once (logits 0.01 apart round to one score
        above a logit of about 12), from ``2^-24`` to ``1 - 2^-24``. Why these bounds: near 1,
        float32 scores are ``1 - k 2^-24``, so ``1 - 2^-24`` is the largest score below 1 and
        its logit ``log(2^24 - 1) = 16.64`` the largest a float32 score carries; a model whose
        logit is larger reports exactly 1, which :func:`loss_corrected_score_for_loss` maps to
        the posterior 1 when the inverse holds at ``1 - 2^-24``. The grid is symmetric. Scores
        below ``2^-24`` are representable (down to 1e-38) but not checked by default, since
        many losses' derivatives underflow there in float32 (the focal loss's ``dL(a, 0)/da``
        is of order ``a^2``); pass a grid to check them.

    Returns:
      An :class:`InvertibilityReport`: ``report.passed()`` is a ``bool``, and
      ``report.failing_range()`` the ``(low, high)`` scores of the grid points that fail
      (``None`` when it passes).
    """
    if grid is None:
        grid = _default_grid()
    (grid,) = as_float(grid)
    if grid.ndim != 1 or grid.shape[0] < 2:
        raise ValueError(f"grid must be a 1-D array of at least 2 scores; got {grid.shape}")
    if V.is_concrete(grid) and not bool(jnp.all(jnp.diff(grid) > 0)):
        raise ValueError("grid must be strictly increasing")
    V.check_interval("grid", grid, 0.0, 1.0, open_low=True, open_high=True)
    params = tuple(jnp.broadcast_to(jnp.asarray(p), grid.shape) for p in params)
    gamma, valid, rising = _invertibility(loss, grid, params)
    round_trip = _round_trip(loss, grid, gamma, valid, params)
    failing = ~valid | ~rising | ~round_trip
    return InvertibilityReport(
        invertible=~jnp.any(failing),
        posterior=V.nan_unless(valid, gamma),
        pointwise=valid,
        increasing=jnp.all(rising),
        round_trip=round_trip,
        scores=grid,
        failing=failing,
    )


#: How far, in logit units (relative beyond a logit of 1), the optimal scores of the posteriors
#: around ``gamma(a)`` may lie from ``a`` in :func:`check_invertibility`'s round trip: float32
#: bisection lands within about 1e-6.
_ROUND_TRIP_LOGIT = 1e-3


def _round_trip(
    loss: BinaryLossFn, grid: Array, gamma: Array, valid: Array, params: tuple
) -> Array:
    """Whether the generic rule maps ``gamma(a)`` back to ``a``, per grid point: ``a`` must lie
    between the optimal scores of the float neighbours of ``gamma(a)``, since where the rule
    is steep one posterior in float stands for a range of scores (the focal loss's, near 1).
    The neighbour above 0 is the smallest normal float: smaller posteriors flush to 0."""
    gamma = jnp.where(valid, gamma, 0.5)
    tiny = jnp.finfo(gamma.dtype).tiny
    below = solve_binary_rule_jit(loss, jnp.nextafter(gamma, jnp.zeros_like(gamma)), params)
    above = jnp.maximum(jnp.nextafter(gamma, jnp.ones_like(gamma)), tiny)
    above = solve_binary_rule_jit(loss, above, params)
    z = logit(grid)
    tol = _ROUND_TRIP_LOGIT * jnp.maximum(1.0, jnp.abs(z))
    return valid & (logit(below) - tol <= z) & (z <= logit(above) + tol)
