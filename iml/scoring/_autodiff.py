"""Derivatives of a loss by automatic differentiation, shared by the generic rules
(:mod:`iml.scoring.generic`) and the checks (:mod:`iml.scoring.checks`).

* :func:`derivatives`: a binary loss's first and second derivatives in the score.
* :func:`scaled_derivatives`: the same, rescaled by a power of two where they would underflow.
* :func:`foc_sign`: the sign of the first-order condition of eq. ``choice``, with its
  derivatives kept clear of underflow.
* :data:`solve_binary_rule_jit`: the optimal score of a binary loss, eq. ``choice``, by a search
  over the logit of the score, with gradients by the implicit function theorem.
* :func:`inverse_parts`, :func:`binary_inverse`: the posterior for which a score is optimal
  (Proposition 4), from the first-order condition, which is linear in the posterior, and whether
  it is a strict minimum.
* :func:`per_class_losses`: a multiclass loss at every label, the columns of eq. ``choice``.

The names here are public so that the modules can share them; the package re-exports none.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iml.scoring._common import Array, BinaryLossFn, MulticlassLossFn, expit


def derivatives(loss: BinaryLossFn, a: Array, y: float, params: tuple) -> tuple[Array, Array]:
    """Elementwise ``dL(a, y)/da`` and ``d^2L(a, y)/da^2`` of an elementwise loss."""

    def first(x):
        return jax.jvp(lambda u: loss(u, y, *params), (x,), (jnp.ones_like(x),))[1]

    d1, d2 = jax.jvp(first, (a,), (jnp.ones_like(a),))
    return d1, d2


# ----------------------------------------------------------------------------------------------
# Derivatives kept clear of underflow, and the sign of the first-order condition
# ----------------------------------------------------------------------------------------------


def _rescale_bits(dtype: jnp.dtype) -> int:
    """``K`` of :func:`scaled_derivatives`: 64, or half the exponent range where that is
    narrower (float16), so that a tangent of ``2^K`` is finite."""
    return min(64, int(jnp.finfo(dtype).maxexp) // 2)


def _jvps(loss: BinaryLossFn, a: Array, y: float, params: tuple, scale: float, order: int):
    def first(x):
        return jax.jvp(lambda u: loss(u, y, *params), (x,), (jnp.full_like(x, scale),))[1]

    if order == 1:
        return (first(a),)
    return jax.jvp(first, (a,), (jnp.ones_like(a),))


def scaled_derivatives(
    loss: BinaryLossFn, a: Array, y: float, params: tuple, order: int = 2
) -> tuple[tuple[Array, ...], Array]:
    """``dL(a, y)/da`` (and ``d^2L(a, y)/da^2`` for ``order=2``), each times ``2^k``, and ``k``.

    ``k`` is 0, or ``K = 64`` (float32, float64) where ``|dL/da| < 2^-K``: there the derivatives
    are computed again with a tangent of ``2^K``, so that a weight a loss multiplies in last
    (``beta`` of eq. ``b-loss-bin``) does not take a derivative of order ``1e-37`` below
    float32's smallest normal number, where XLA on the CPU flushes it to zero. The first-order
    condition and the inverse only use ratios of derivatives with a common ``k`` or exact
    rescalings by ``2^k``. A rescaled derivative that is not finite is not used.
    """
    bits = _rescale_bits(a.dtype)
    unit = _jvps(loss, a, y, params, 1.0, order)
    small = jnp.abs(unit[0]) < 2.0**-bits

    def rescued():
        big = _jvps(loss, a, y, params, 2.0**bits, order)
        rescue = small & jnp.isfinite(big[0])
        for extra in big[1:]:
            rescue &= jnp.isfinite(extra)
        values = tuple(jnp.where(rescue, b, u) for u, b in zip(unit, big, strict=True))
        return values, jnp.where(rescue, bits, 0).astype(jnp.int32)

    # The second pass runs only where some score needs it (under vmap, always).
    return jax.lax.cond(jnp.any(small), rescued, lambda: (unit, jnp.zeros(a.shape, jnp.int32)))


def foc_sign(loss: BinaryLossFn, a: Array, gamma: Array, params: tuple) -> Array:
    """The sign of ``gamma dL(a,1)/da + (1 - gamma) dL(a,0)/da``, the derivative of the expected
    loss of eq. ``choice``: +1, -1, 0, or NaN where it is undefined (opposite infinite terms).

    The derivatives are those of :func:`scaled_derivatives`, brought to the larger of their two
    scales, so each is 0 or at least about ``2^-64`` in magnitude: the term of the larger weight
    (at least 1/2) does not underflow, and the other underflows only where it is negligible
    against it. A term that overflows is the larger one. A term of zero weight counts for
    nothing, even against an infinite or undefined derivative.
    """
    (d_pos,), k_pos = scaled_derivatives(loss, a, 1.0, params, order=1)
    (d_neg,), k_neg = scaled_derivatives(loss, a, 0.0, params, order=1)
    up = 2.0 ** _rescale_bits(a.dtype)
    d_pos = jnp.where(k_pos < k_neg, d_pos * up, d_pos)
    d_neg = jnp.where(k_neg < k_pos, d_neg * up, d_neg)
    pos = jnp.where(gamma > 0, gamma * d_pos, 0.0)
    neg = jnp.where(gamma < 1, (1.0 - gamma) * d_neg, 0.0)
    return jnp.sign(pos + neg)


def _foc(loss: BinaryLossFn, a: Array, gamma: Array, params: tuple) -> Array:
    """Derivative of the expected loss ``gamma L(a, 1) + (1 - gamma) L(a, 0)`` in ``a``."""
    ones = jnp.ones_like(a)
    d_pos = jax.jvp(lambda u: loss(u, 1.0, *params), (a,), (ones,))[1]
    d_neg = jax.jvp(lambda u: loss(u, 0.0, *params), (a,), (ones,))[1]
    return gamma * d_pos + (1.0 - gamma) * d_neg


# ----------------------------------------------------------------------------------------------
# The optimal score, eq. ``choice``, by a search over the logit of the score
# ----------------------------------------------------------------------------------------------

#: Spacing, in logit units, of the coarse scan that brackets each minimum of the expected loss,
#: over the logits whose scores float resolves at both ends (``|z| <= log(2/eps - 1)``).
_COARSE_STEP = 0.5

#: The same below them, over the scores between the smallest normal float and ``eps/2``.
_FAR_STEP = 1.0

#: Bisection steps on the score after those on its logit: the logit's float spacing near the
#: smallest normal scores is at most ``2^10`` times the score's relative spacing.
_SCORE_ITERS = 12


def logit_range(dtype: jnp.dtype) -> tuple[float, float]:
    """The logits of the smallest and largest scores in ``(0, 1)`` the generic rule returns:
    ``ceil(log(tiny))``, just above the smallest normal float (-87 in float32), and
    ``log(2/eps - 1)``, the logit of ``1 - eps/2``, the largest float below 1 (16.64 in float32).
    """
    finfo = jnp.finfo(dtype)
    return float(np.ceil(np.log(float(finfo.tiny)))), float(np.log(2.0 / float(finfo.eps) - 1.0))


def _coarse_logits(dtype: jnp.dtype) -> np.ndarray:
    """The scan's logits: :data:`_FAR_STEP` apart from the bottom of :func:`logit_range` to
    ``-top``, then :data:`_COARSE_STEP` apart to ``top`` (139 in float32)."""
    bottom, top = logit_range(dtype)
    near = np.linspace(-top, top, int(np.ceil(2.0 * top / _COARSE_STEP)) + 1)
    far = np.linspace(bottom, -top, int(np.ceil((-top - bottom) / _FAR_STEP)) + 1)
    return np.concatenate([far[:-1], near])


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _solve_binary_rule(loss: BinaryLossFn, gamma: Array, params: tuple) -> Array:
    dtype = gamma.dtype
    # enough halvings of the widest bracket to reach the float spacing of the logit
    num_iters = int(jnp.finfo(dtype).nmant) + 3 + int(np.log2(_FAR_STEP / _COARSE_STEP))
    logits = _coarse_logits(dtype)
    num_coarse = logits.size
    grid = jnp.asarray(logits, dtype)

    def expected_at(a, g, p):
        value = g * loss(a, 1.0, *p) + (1.0 - g) * loss(a, 0.0, *p)
        return jnp.where(jnp.isnan(value), jnp.inf, value)

    # A coarse scan brackets every minimum: a step of the first-order condition from negative
    # to non-negative. The signs, not the values, find the brackets: an expected loss flat to
    # float precision near its minimum (the spherical score's, within 1e-8 of -1) still has a
    # derivative of clear sign. The two brackets whose grid points have the lowest expected loss
    # are kept, so that a loss with several local minima is not bisected into the wrong one.
    def scan(k, state):
        prev_slope, prev_value, v1, k1, v2, k2, found, found2 = state
        z = jnp.full_like(gamma, grid[k])
        a = expit(z)
        slope, value = foc_sign(loss, a, gamma, params), expected_at(a, gamma, params)
        step = (prev_slope < 0) & (slope >= 0)
        here = jnp.minimum(prev_value, value)
        first = step & ((here < v1) | ~found)
        second = step & ~first & ((here < v2) | ~found2)
        v2 = jnp.where(first, v1, jnp.where(second, here, v2))
        k2 = jnp.where(first, k1, jnp.where(second, k, k2))
        found2 = found2 | second | (first & found)
        return (slope, value, jnp.where(first, here, v1), jnp.where(first, k, k1), v2, k2,
                found | step, found2)  # fmt: skip

    a0 = expit(jnp.full_like(gamma, grid[0]))
    first_slope, first_value = foc_sign(loss, a0, gamma, params), expected_at(a0, gamma, params)
    inf, ones = jnp.full_like(gamma, jnp.inf), jnp.ones(gamma.shape, jnp.int32)
    no = jnp.zeros(gamma.shape, bool)
    start = (first_slope, first_value, inf, ones, inf, ones, no, no)
    state = jax.lax.fori_loop(1, num_coarse, scan, start)
    last_slope, last_value, _, k1, _, k2, found, found2 = state

    def locate(k):
        """The minima in the brackets ending at grid points ``k [m, ...]``, and their expected
        losses: bisection on the logit, then on the score."""
        g = jnp.broadcast_to(gamma, k.shape)
        p = tuple(jnp.broadcast_to(x, k.shape) for x in params)

        def body(_, bracket):
            lo, hi = bracket
            mid = 0.5 * (lo + hi)
            rising = foc_sign(loss, expit(mid), g, p) > 0  # the minimum lies below mid
            return jnp.where(rising, lo, mid), jnp.where(rising, mid, hi)

        lo, hi = jax.lax.fori_loop(0, num_iters, body, (grid[k - 1], grid[k]))

        # The logit's float spacing grows with |z| (7.6e-6 near z = -80 in float32, a relative
        # error of the score as large), while small scores are floats to full relative
        # precision: a last bisection runs on the score itself, from the scores of the bracket.
        def refine(_, bracket):
            lo, hi = bracket
            mid = 0.5 * (lo + hi)
            rising = foc_sign(loss, mid, g, p) > 0
            return jnp.where(rising, lo, mid), jnp.where(rising, mid, hi)

        lo, hi = jax.lax.fori_loop(0, _SCORE_ITERS, refine, (expit(lo), expit(hi)))
        a = 0.5 * (lo + hi)
        return a, expected_at(a, g, p)

    def lower_of_two():
        a, values = locate(jnp.stack([k1, k2]))
        second = found2 & (values[1] < values[0])
        return jnp.where(second, a[1], a[0]), jnp.where(second, values[1], values[0])

    def only_one():
        a, values = locate(k1[None])
        return a[0], values[0]

    # The second bracket costs a second bisection only where some posterior has one.
    a, best_value = jax.lax.cond(jnp.any(found2), lower_of_two, only_one)
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


# ----------------------------------------------------------------------------------------------
# The inverse of the rule (Proposition 4)
# ----------------------------------------------------------------------------------------------


def inverse_parts(loss: BinaryLossFn, a: Array, params: tuple) -> tuple[Array, Array, Array]:
    """The posterior for which each score in ``(0, 1)`` is optimal, its log-odds, and whether it
    is: ``(gamma, log_odds, valid)``, each of ``a``'s shape.

    The first-order condition ``gamma L'(a, 1) + (1 - gamma) L'(a, 0) = 0`` gives
    ``gamma = L'(a, 0) / (L'(a, 0) - L'(a, 1))``, computed from the ratio of the smaller derivative
    to the larger, so that ``gamma`` and ``1 - gamma`` each keep their precision near 0 and 1;
    the log-odds are ``log L'(a, 0) - log(-L'(a, 1))``. ``valid`` needs
    ``L'(a, 1) <= 0 <= L'(a, 0)``, not both 0 (one derivative of 0, exactly or rounded, gives a
    posterior of 0 or 1), both finite, and a strict minimum: the curvature
    ``gamma L''(a, 1) + (1 - gamma) L''(a, 0) > 0``, with ``1 - gamma`` from the ratio rather
    than rounded from ``gamma`` (near a posterior of 1 the two terms are of opposite sign and
    similar size: the boosting loss's, or a flat loss's).
    """
    (d_pos, dd_pos), k_pos = scaled_derivatives(loss, a, 1.0, params)
    (d_neg, dd_neg), k_neg = scaled_derivatives(loss, a, 0.0, params)
    # The derivatives are d * 2^-k: compare and divide them with exact powers of two. With r the
    # smaller derivative's magnitude relative to the larger, r / (1 + r) is the posterior of the
    # label whose derivative is the larger; 1 - r / (1 + r) rounds to the nearest float below 1.
    neg_larger = jnp.ldexp(jnp.abs(d_neg), k_pos - k_neg) >= jnp.abs(d_pos)
    r = -jnp.where(
        neg_larger,
        jnp.ldexp(d_pos / d_neg, k_neg - k_pos),
        jnp.ldexp(d_neg / d_pos, k_pos - k_neg),
    )
    share = r / (1.0 + r)
    gamma = jnp.where(neg_larger, 1.0 - share, share)
    complement = jnp.where(neg_larger, share, 1.0 - share)
    log_odds = jnp.log(d_neg) - jnp.log(-d_pos) + (k_pos - k_neg).astype(a.dtype) * np.log(2.0)
    # The curvature at the larger of the two scales (a term that overflows is the larger one);
    # a term of zero weight counts for nothing.
    up = 2.0 ** _rescale_bits(a.dtype)
    dd_pos = jnp.where(k_pos < k_neg, dd_pos * up, dd_pos)
    dd_neg = jnp.where(k_neg < k_pos, dd_neg * up, dd_neg)
    curvature = jnp.where(gamma > 0, gamma * dd_pos, 0.0) + jnp.where(
        complement > 0, complement * dd_neg, 0.0
    )
    finite = jnp.isfinite(d_pos) & jnp.isfinite(d_neg)
    opposite = (d_pos <= 0) & (d_neg >= 0) & ((d_pos < 0) | (d_neg > 0))
    return gamma, log_odds, opposite & finite & (curvature > 0)


def binary_inverse(loss: BinaryLossFn, a: Array, params: tuple) -> tuple[Array, Array]:
    """``(gamma, valid)`` of :func:`inverse_parts` for scores in ``[0, 1]``.

    A score of exactly 0 or 1 maps to the posterior 0 or 1 where the inverse is valid at the
    nearest scores inside, ``eps/2`` and ``1 - eps/2`` (``2^-24`` and ``1 - 2^-24`` in float32):
    the rule is then increasing up to them, and under Proposition 4's premise that it is
    invertible, the rule maps the posteriors 0 and 1 to the scores 0 and 1, the limits of the
    inverse. The derivatives at 0 and 1 themselves are often infinite or undefined.
    """
    half_eps = float(jnp.finfo(a.dtype).eps) / 2.0
    at_zero, at_one = a == 0, a == 1
    inside = jnp.where(at_zero, half_eps, jnp.where(at_one, 1.0 - half_eps, a)).astype(a.dtype)
    gamma, _, valid = inverse_parts(loss, inside, params)
    gamma = jnp.where(at_zero, 0.0, jnp.where(at_one, 1.0, gamma)).astype(a.dtype)
    return gamma, valid


def per_class_losses(loss: MulticlassLossFn, a: Array, params: tuple) -> Array:
    """``[L(a, 0), ..., L(a, n-1)]`` for one score vector ``a [n]``."""
    labels = jnp.arange(a.shape[-1])
    return jax.vmap(lambda y: loss(a, y, *params))(labels)
