"""Derivatives of a loss by automatic differentiation, shared by the generic rules
(:mod:`iml.scoring.generic`) and the checks (:mod:`iml.scoring.checks`).

* :func:`derivatives`: a binary loss's first and second derivatives in the score.
* :data:`solve_binary_rule_jit`: the optimal score of a binary loss, eq. ``choice``, from its
  first-order condition, with gradients by the implicit function theorem.
* :func:`binary_inverse`: the posterior for which a score is optimal (Proposition 4), from the
  first-order condition, which is linear in the posterior, and whether it is a strict minimum.
* :func:`per_class_losses`: a multiclass loss at every label, the columns of eq. ``choice``.

The names here are public so that the modules can share them; the package re-exports none.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iml.scoring._common import Array, BinaryLossFn, MulticlassLossFn


def derivatives(loss: BinaryLossFn, a: Array, y: float, params: tuple) -> tuple[Array, Array]:
    """Elementwise ``dL(a, y)/da`` and ``d^2L(a, y)/da^2`` of an elementwise loss."""

    def first(x):
        return jax.jvp(lambda u: loss(u, y, *params), (x,), (jnp.ones_like(x),))[1]

    d1, d2 = jax.jvp(first, (a,), (jnp.ones_like(a),))
    return d1, d2


def _foc(loss: BinaryLossFn, a: Array, gamma: Array, params: tuple) -> Array:
    """Derivative of the expected loss ``gamma L(a, 1) + (1 - gamma) L(a, 0)`` in ``a``."""
    ones = jnp.ones_like(a)
    d_pos = jax.jvp(lambda u: loss(u, 1.0, *params), (a,), (ones,))[1]
    d_neg = jax.jvp(lambda u: loss(u, 0.0, *params), (a,), (ones,))[1]
    return gamma * d_pos + (1.0 - gamma) * d_neg


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _solve_binary_rule(loss: BinaryLossFn, gamma: Array, params: tuple) -> Array:
    dtype = gamma.dtype
    finfo = jnp.finfo(dtype)
    z_max = float(np.log(1.0 / finfo.eps))
    num_iters = int(finfo.nmant) + 3
    num_coarse = 65
    grid = jnp.linspace(-z_max, z_max, num_coarse, dtype=dtype)

    def sign_at(z):
        return _foc(loss, jax.nn.sigmoid(z), gamma, params)

    def expected(z):
        a = jax.nn.sigmoid(z)
        value = gamma * loss(a, 1.0, *params) + (1.0 - gamma) * loss(a, 0.0, *params)
        return jnp.where(jnp.isnan(value), jnp.inf, value)

    # A coarse scan brackets every minimum: a step of the first-order condition from negative
    # to non-negative. Where several do, the one whose grid points have the lowest expected loss
    # is kept, so that a loss with several local minima is not bisected into the wrong one. The
    # signs, not the values, find the bracket: an expected loss flat to float precision near its
    # minimum (the spherical score's, within 1e-8 of -1) still has a derivative of clear sign.
    def scan(k, state):
        prev_slope, prev_value, best_value, best, found = state
        z = jnp.full_like(gamma, grid[k])
        slope, value = sign_at(z), expected(z)
        step = (prev_slope < 0) & (slope >= 0)
        here = jnp.minimum(prev_value, value)
        better = step & ((here < best_value) | ~found)
        return (slope, value, jnp.where(better, here, best_value), jnp.where(better, k, best),
                found | step)  # fmt: skip

    z0 = jnp.full_like(gamma, grid[0])
    first_slope, first_value = sign_at(z0), expected(z0)
    start = (first_slope, first_value, jnp.full_like(gamma, jnp.inf),
             jnp.ones(gamma.shape, jnp.int32), jnp.zeros(gamma.shape, bool))  # fmt: skip
    last_slope, last_value, best_value, best, found = jax.lax.fori_loop(1, num_coarse, scan, start)
    lo, hi = grid[best - 1], grid[best]

    def body(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        rising = sign_at(mid) > 0  # expected loss increasing: the minimum lies below mid
        return jnp.where(rising, lo, mid), jnp.where(rising, mid, hi)

    lo, hi = jax.lax.fori_loop(0, num_iters, body, (lo, hi))
    a = jax.nn.sigmoid(0.5 * (lo + hi))
    # Minima beyond the float-representable range are the boundary scores themselves: where the
    # expected loss still falls at the top of the scan (rises at its bottom) and no interior
    # minimum is lower.
    top = (last_slope < 0) & (~found | (last_value < best_value))
    bottom = (
        (first_slope > 0)
        & (~found | (first_value < best_value))
        & ~(top & (last_value <= first_value))
    )
    a = jnp.where(bottom, 0.0, jnp.where(top, 1.0, a))
    return a.astype(dtype)


@_solve_binary_rule.defjvp
def _solve_binary_rule_jvp(loss, primals, tangents):
    # Implicit function theorem on the first-order condition h(a, gamma, params) = 0.
    gamma, params = primals
    a = _solve_binary_rule(loss, gamma, params)
    h_a = jax.jvp(lambda u: _foc(loss, u, gamma, params), (a,), (jnp.ones_like(a),))[1]
    h_dot = jax.jvp(lambda g, p: _foc(loss, a, g, p), primals, tangents)[1]
    return a, -h_dot / h_a


# Compiled once per loss function (and shapes): a loss passed by name is reused across calls.
solve_binary_rule_jit = jax.jit(_solve_binary_rule, static_argnums=0)


def binary_inverse(loss: BinaryLossFn, a: Array, params: tuple) -> tuple[Array, Array]:
    d_pos, dd_pos = derivatives(loss, a, 1.0, params)
    d_neg, dd_neg = derivatives(loss, a, 0.0, params)
    # gamma d_pos + (1 - gamma) d_neg = 0  =>  gamma = d_neg / (d_neg - d_pos), written so that an
    # infinite derivative at a score of exactly 0 or 1 gives the limit rather than inf/inf.
    neg_larger = jnp.abs(d_neg) >= jnp.abs(d_pos)
    ratio = jnp.where(neg_larger, d_pos / d_neg, d_neg / d_pos)
    gamma = jnp.where(neg_larger, 1.0 / (1.0 - ratio), -ratio / (1.0 - ratio))
    opposite = (d_neg >= 0) & (d_pos <= 0) & ((d_neg > 0) | (d_pos < 0))
    curvature = gamma * dd_pos + (1.0 - gamma) * dd_neg
    at_boundary = (a == 0) | (a == 1)
    valid = opposite & ((curvature > 0) | at_boundary)
    return gamma, valid


def per_class_losses(loss: MulticlassLossFn, a: Array, params: tuple) -> Array:
    """``[L(a, 0), ..., L(a, n-1)]`` for one score vector ``a [n]``."""
    labels = jnp.arange(a.shape[-1])
    return jax.vmap(lambda y: loss(a, y, *params))(labels)
