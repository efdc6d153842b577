"""Multinomial logistic regressions under the class-weighted softmax cross-entropy, by Newton's
method with lagged Hessians (:func:`fit_weighted_softmax`).

A multinomial member minimises the weighted softmax cross-entropy plus a ridge on each feature's
coefficients over all classes: the class-weighted cross-entropy weighs row ``i`` by ``w[y_i]``
(the multiclass counterpart of the beta-weighted cross-entropy of eq. ``b-loss-bin``). Its
Hessian ``sum_i s_i (x_i x_i^T) kron (diag p_i - p_i p_i^T)`` is a large matrix product of its
own, so members are solved one after another, each with the binary solver's line search and
rule of renewal (:mod:`iml.training.exact`; its chord steps are not accelerated); a grid of
ridge coefficients is solved from the largest down, each level from the level above with its
Hessian. The softmax's shift of all classes leaves the Hessian singular, which the damped factor
of :mod:`iml.training.exact_design` handles.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from iml import _validation as V
from iml._device import to_device
from iml.training.exact_design import (
    FLOOR,
    LINE_TRIALS,
    MAX_DAMPING,
    ROUNDING,
    SLOW,
    Design,
    LogisticFit,
    Solved,
    check_design,
    checked_inputs,
    damped,
    dot,
    factor,
    pair_sums,
    ridge_multipliers,
    solve,
)

Array = jax.Array

__all__ = ["fit_weighted_softmax"]


def _softmax_hessian(design: Design, s: Array, p: Array) -> Array:
    """``sum_i s_i (x_i x_i^T) kron (diag p_i - p_i p_i^T)``: ``[k n, k n]``.

    With the design's feature pairs, block ``(c, c')`` of feature pair ``(j, l)`` is row ``(c,
    c')`` of the pairs' sums of ``W`` (:func:`~iml.training.exact_design.pair_sums`), ``W`` the
    ``n(n+1)/2`` weight vectors ``s (p_c 1{c = c'} - p_c p_c')``: ``n(n+1)/2`` rows instead of
    ``k n`` columns. Without the pairs, it is formed from two ``[N, k n]`` matrices."""
    X = design.X
    N, k = X.shape
    n = p.shape[-1]
    if design.pairs is not None:
        rows, cols = design.pairs.rows, design.pairs.cols
        c1, c2 = np.triu_indices(n)
        W = s[None, :] * (jnp.where((c1 == c2)[:, None], p.T[c1], 0.0) - p.T[c1] * p.T[c2])
        values = pair_sums(design.pairs, W)  # [blocks, pairs]
        j, l = rows[None, :], cols[None, :]
        a, b = jnp.asarray(c1)[:, None], jnp.asarray(c2)[:, None]
        H = jnp.zeros((k * n, k * n), X.dtype)
        for u, v in (((j, a), (l, b)), ((l, b), (j, a)), ((j, b), (l, a)), ((l, a), (j, b))):
            H = H.at[u[0] * n + u[1], v[0] * n + v[1]].set(values)
        return H
    weighted = (X[:, :, None] * (s[:, None] * p)[:, None, :]).reshape(N, k * n)
    plain = (X[:, :, None] * p[:, None, :]).reshape(N, k * n)
    diagonal = dot(weighted.T, X).reshape(k, n, k)  # sum_i s_i p_ic x_ij x_il
    blocks = diagonal[:, :, :, None] * jnp.eye(n, dtype=X.dtype)[None, :, None, :]
    return blocks.reshape(k * n, k * n) - dot(weighted.T, plain)


def _softmax_newton(
    design: Design,
    onehot: Array,
    s: Array,
    pen: Array,
    theta: Array,
    H: Array,
    has_hessian: Array,
    tol: Array,
    max_iter: int,
) -> Solved:
    """One multinomial member by Newton steps with lagged Hessians (the binary rules of
    :func:`iml.training.exact._newton`; here a member's own condition decides, since
    members are solved one after another)."""
    X = design.X
    X_abs = design.X_abs
    k, n = theta.shape
    ridge = jnp.repeat(pen, n)  # theta.ravel() is row-major: feature j's classes together

    def residual(z: Array) -> Array:
        return s[:, None] * (jax.nn.softmax(z, axis=-1) - onehot)

    def gradient(R: Array, theta: Array) -> Array:
        return dot(X.T, R) + pen[:, None] * theta

    def cond(c):
        return (c["it"] < max_iter) & c["active"]

    def body(c):
        theta, z, g = c["theta"], c["z"], c["g"]
        renew = (c["ratio"] > SLOW) | ~c["has"]
        H = jax.lax.cond(
            renew,
            lambda: _softmax_hessian(design, s, jax.nn.softmax(z, axis=-1)),
            lambda: c["H"],
        )
        damping = c["damping"]
        F = jax.lax.cond(renew | c["redo"], lambda: factor(H, ridge, damping), lambda: c["F"])
        step = solve(F, g.ravel()).reshape(k, n)
        step = jnp.where(jnp.isfinite(step), step, 0.0)
        dz = dot(X, step)
        descent = jnp.sum(g * step)
        useful = jnp.isfinite(descent) & (descent > 0)

        def trial(h: Array):
            moved = theta - h * step
            R = residual(z - h * dz)
            g = gradient(R, moved)
            slope = -jnp.sum(g * step)
            size = jnp.sum(
                (dot(X_abs.T, jnp.abs(R)) + jnp.abs(pen[:, None] * moved)) * jnp.abs(step)
            )
            flat = jnp.abs(slope) <= ROUNDING * size
            return g, jnp.isfinite(slope) & ((slope <= 0.25 * descent) | flat), slope

        def line(lc):
            h, _, _, slope, tries = lc
            shrink = jnp.clip(descent / (descent + slope), 0.1, 0.9)
            h = h * jnp.where(jnp.isfinite(shrink), shrink, 0.1)
            return (h, *trial(h), tries + 1)

        h, g_new, ok, _, _ = jax.lax.while_loop(
            lambda lc: ~lc[2] & useful & (lc[4] < LINE_TRIALS),
            line,
            (jnp.float32(1.0), *trial(1.0), 0),
        )
        ok = ok & useful
        stalled = ~ok & (damping >= MAX_DAMPING)
        new_damping = damped(damping, ok, h == 1.0)
        h = jnp.where(ok, h, 0.0)
        norm = jnp.max(jnp.abs(g))
        new_norm = jnp.where(ok, jnp.max(jnp.abs(g_new)), norm)
        return {
            "theta": theta - h * step,
            "z": z - h * dz,
            "g": jnp.where(ok, g_new, g),
            "H": H,
            "F": F,
            "has": jnp.bool_(True),
            "active": (new_norm > tol) & ~stalled,
            "damping": new_damping,
            "redo": new_damping != damping,
            "ratio": jnp.where(ok, new_norm / jnp.maximum(norm, 1e-30), 2.0),
            "count": c["count"] + renew,
            "it": c["it"] + 1,
        }

    z = dot(X, theta)
    g = gradient(residual(z), theta)
    floor = jnp.float32(FLOOR)
    carry = {
        "theta": theta,
        "z": z,
        "g": g,
        "H": H,
        "F": jnp.zeros_like(H),
        "has": has_hessian,
        "active": jnp.max(jnp.abs(g)) > tol,
        "damping": floor,
        "redo": jnp.bool_(False),
        "ratio": jnp.float32(0.0),
        "count": jnp.int32(0),
        "it": jnp.int32(0),
    }
    # A member that arrives with a Hessian (the level above's) factors it with its own penalty.
    carry["F"] = jax.lax.cond(has_hessian, lambda: factor(H, ridge, floor), lambda: carry["F"])
    c = jax.lax.while_loop(cond, body, carry)
    z = c["z"]
    objective = jnp.sum(s * (jax.nn.logsumexp(z, axis=-1) - jnp.sum(onehot * z, axis=-1)))
    objective += 0.5 * jnp.sum(pen[:, None] * c["theta"] ** 2)
    return Solved(c["theta"], c["g"], c["H"], objective, c["it"], c["count"])


@functools.partial(jax.jit, static_argnames=("max_iter",))
def _softmax_members(
    design: Design, onehot: Array, S: Array, P: Array, tol: Array, *, max_iter: int
) -> Solved:
    """Members ``S [K, N]`` with penalty levels ``P [K, G, d1]`` (in the order solved), one
    member after another (each one's Hessian is already a large matrix product); results on axes
    ``[K, G]``."""
    X = design.X
    k, n = X.shape[1], onehot.shape[1]

    def member(args):
        s, pens = args
        share = s @ onehot / jnp.sum(s)
        theta = jnp.zeros((k, n), X.dtype).at[-1].set(jnp.log(jnp.maximum(share, 1e-12)))

        def level(carry, pen):
            theta, H, has = carry
            out = _softmax_newton(design, onehot, s, pen, theta, H, has, tol, max_iter)
            return (out.theta, out.hessian, jnp.bool_(True)), out

        start = (theta, jnp.zeros((k * n, k * n), X.dtype), jnp.bool_(False))
        return jax.lax.scan(level, start, pens)[1]

    return jax.lax.map(member, (S, P))


def fit_weighted_softmax(
    features: ArrayLike,
    labels: ArrayLike,
    sample_weights: ArrayLike,
    n_classes: int,
    *,
    l2: ArrayLike = 0.0,
    penalty_scale: ArrayLike | None = None,
    tol: float = 1e-6,
    max_iter: int = 50,
    design: Design | None = None,
) -> LogisticFit:
    """Multinomial logistic regressions at the optimum of each member's weighted softmax
    cross-entropy plus its ridge: member ``k`` minimises ``sum_i s_ki (logsumexp(z_i) - z_iy_i)
    + (l2 / 2) sum_j c_kj ||W_j||^2`` over ``z_i = x_i W + b`` (the ridge on each feature's
    coefficients over all classes, so that adding one vector to every class's coefficients, which
    leaves the softmax unchanged, is penalised as a whole).

    Each member starts from the optimum of the intercepts alone (the log of each class's
    weighted share); a grid of ``l2`` is solved from the largest down, each level from the level
    above with its Hessian.

    Args:
      features: ``[N, d]`` design shared by all members.
      labels: ``[N]`` class indices in ``[0, n_classes)``.
      sample_weights: ``[..., N]`` non-negative weights per member.
      n_classes: at least 2.
      l2: the ridge coefficient, or a 1-D grid of them (the results then lead with its axis).
      penalty_scale: ``[..., d]`` multipliers of ``l2`` per member and feature (default 1).
      tol: gradient tolerance (largest absolute entry).
      max_iter: most Newton steps of a member and level.
      design: :meth:`Design.of` these features, made once where several fits share them.

    Returns:
      A :class:`LogisticFit` with ``coef [..., d, n]`` and ``intercept [..., n]``.
    """
    x, y, s, levels = checked_inputs(features, labels, sample_weights, l2, max_iter, tol)
    V.check_count("n_classes", n_classes, 2)
    if y.size and (y.min() < 0 or y.max() >= n_classes or not np.array_equal(y, np.round(y))):
        raise ValueError(f"labels must be class indices in [0, {n_classes})")
    lead, n = s.shape[:-1], s.shape[-1]
    scale = ridge_multipliers(penalty_scale, lead, x.shape[1]).reshape(-1, x.shape[1] + 1)
    order = np.argsort(-levels, kind="stable")  # solved from the largest down
    P = (levels[order][None, :, None] * scale[:, None, :]).astype(np.float32)
    design = Design.of(x) if design is None else check_design(design, x)
    onehot = to_device(np.eye(n_classes, dtype=np.float32)[np.asarray(y)])
    out = _softmax_members(
        design, onehot, to_device(s.reshape(-1, n), np.float32), to_device(P), np.float32(tol),
        max_iter=max_iter,
    )  # fmt: skip
    back = np.argsort(order)  # the grid's order, its axis first
    out = jax.tree.map(
        lambda a: np.asarray(a)[:, back].swapaxes(0, 1).reshape(len(levels), *lead, *a.shape[2:]),
        out._replace(hessian=None),  # the last renewals' Hessians are not kept
    )
    return LogisticFit.of(out, tol, l2, classes=True)
