"""Batched Newton steps of binary members: weighted logistic regressions of one table, every
member of a batch at once, each from its own start (the paths and levels that choose the starts,
and the public entry point, are :mod:`iml.training.exact`'s).

A member ``k`` minimises

    f_k(w, b) = sum_i s_ki l(y_i, x_i . w + b) + (1/2) sum_j p_kj w_j^2,

with ``l`` the log loss on logits and ``s_ki >= 0`` its sample weights (for the beta-weighted
cross-entropy of eq. ``b-loss-bin``: ``beta`` on a positive training row, ``1 - beta`` on a
negative one, over the count of training rows; for the B-weighted log loss of eq.
``b-loss-multi``, one such regression per class).

All members step together: their logits, residuals and gradients are two matrix products with the
shared design per step. A member's Hessian ``X^T diag(v) X`` is the expensive part, so it is not
formed at every step: a member keeps the Cholesky factor of its last Hessian (the chord method) and
gets a new one only while it converges slowly (its gradient falls by less than the factor ``SLOW``
in a step; a tenth of a batch's members a step at most, the slowest first). Each step is taken along
the Newton direction to where the directional derivative has about vanished (a secant search on it),
and a member stops when its gradient's largest entry is at most ``tol``. Members of a large table
start from their optimum on a fixed eighth of its rows (:class:`Members`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from iml.training.exact_design import (
    FLOOR,
    LINE_TRIALS,
    MAX_DAMPING,
    ROUNDING,
    SLOW,
    Design,
    Solved,
    damped,
    data_hessians,
    dot,
    factor,
    solve,
)

Array = jax.Array

__all__ = ["Members"]

# Members of a table with at least this many rows are solved first on an eighth of them.
_PRESOLVE_ROWS = 16_384


@functools.partial(jax.jit, static_argnames=("max_iter", "renew_first"))
def _newton(
    design: Design,
    y: Array,
    S: Array,
    P: Array,
    theta: Array,
    H: Array,
    tol: Array,
    *,
    max_iter: int,
    renew_first: int,
) -> Solved:
    """Members ``S [K, N]`` (weights), ``P [K, d1]`` (ridge coefficients) from ``theta [K, d1]``
    with data Hessians ``H [K, d1, d1]``: every active member gets a new Hessian in each of the
    first ``renew_first`` steps, then only the slowest (see the module)."""
    X = design.X
    X_abs = jnp.abs(X)
    K = S.shape[0]
    renew_k = max(1, -(-K // 10))

    def residual(z: Array) -> Array:
        return S * (jax.nn.sigmoid(z) - y)

    def gradient(r: Array, theta: Array) -> Array:
        return dot(r, X) + P * theta

    def curvature(z: Array, S: Array) -> Array:
        p = jax.nn.sigmoid(z)
        return S * p * (1.0 - p)

    def renew_all(z, H, active):
        new = data_hessians(design, curvature(z, S))
        return jnp.where(active[:, None, None], new, H), active

    def renew_slow(z, H, active, ratio):
        priority = jnp.where(active & (ratio > SLOW), ratio, -1.0)
        chosen, idx = jax.lax.top_k(priority, renew_k)
        take = chosen > 0
        new = data_hessians(design, curvature(z[idx], S[idx]))
        H = H.at[idx].set(jnp.where(take[:, None, None], new, H[idx]))
        return H, jnp.zeros(K, bool).at[idx].set(take)

    def cond(c):
        return (c["it"] < max_iter) & jnp.any(c["active"])

    def body(c):
        theta, z, g, H, F = c["theta"], c["z"], c["g"], c["H"], c["F"]
        active, count, ratio = c["active"], c["count"], c["ratio"]
        everyone = c["it"] < renew_first
        slow = jnp.any(active & (ratio > SLOW))

        def renewed(_):
            return jax.lax.cond(
                everyone,
                lambda: renew_all(z, H, active),
                lambda: renew_slow(z, H, active, ratio),
            )

        H, fresh = jax.lax.cond(everyone | slow, renewed, lambda _: (H, jnp.zeros(K, bool)), None)
        damping = c["damping"]
        F = jax.lax.cond(
            everyone | slow | jnp.any(c["redo"]), lambda: factor(H, P, damping), lambda: F
        )
        count = count + fresh
        step = solve(F, g)
        step = jnp.where(active[:, None] & jnp.isfinite(step), step, 0.0)
        # The logits move by X step: formed from the step itself, not as the difference of two
        # logit vectors, whose rounding would swamp a step near the optimum.
        dz = dot(step, X.T)
        descent = jnp.sum(g * step, axis=1)  # -phi'(0) along -step

        def trial(h: Array) -> tuple[Array, Array, Array]:
            """The gradient at step length ``h``, whether to accept it (past the line's minimum
            by at most a quarter of the descent, phi'(h) = -g(h) . step, or level with it to
            float32 rounding: near the optimum every slope is rounding), and phi'(h)."""
            moved = theta - h[:, None] * step
            r = residual(z - h[:, None] * dz)
            g = gradient(r, moved)
            slope = -jnp.sum(g * step, axis=1)
            size = jnp.sum((dot(jnp.abs(r), X_abs) + jnp.abs(P * moved)) * jnp.abs(step), axis=1)
            flat = jnp.abs(slope) <= ROUNDING * size
            ok = ~active | (jnp.isfinite(slope) & ((slope <= 0.25 * descent) | flat))
            return g, ok, slope

        def line(lc):
            h, g, ok, slope, tries = lc
            shrink = jnp.clip(descent / (descent + slope), 0.1, 0.9)  # the secant's root of phi'
            h = jnp.where(ok, h, h * jnp.where(jnp.isfinite(shrink), shrink, 0.1))
            g2, ok2, slope2 = trial(h)
            return (h, jnp.where(ok[:, None], g, g2), ok | ok2, jnp.where(ok, slope, slope2),
                    tries + 1)  # fmt: skip

        h = jnp.ones(K, X.dtype)
        useful = jnp.isfinite(descent) & (descent > 0)  # float32 may spoil a near-singular solve
        h, g_new, ok, _, _ = jax.lax.while_loop(
            lambda lc: jnp.any(~lc[2] & useful) & (lc[4] < LINE_TRIALS), line, (h, *trial(h), 0)
        )
        ok = ok & (useful | ~active)
        # No step length found: the member stays where it is, with more damping and a new
        # Hessian next; failing at the most damping, it stalls.
        stalled = active & ~ok & (damping >= MAX_DAMPING)
        new_damping = damped(damping, ok, h == 1.0)
        h = jnp.where(ok, h, 0.0)
        theta = theta - h[:, None] * step
        z = z - h[:, None] * dz
        norm, new_norm = jnp.max(jnp.abs(g), axis=1), jnp.max(jnp.abs(g_new), axis=1)
        new_norm = jnp.where(ok, new_norm, norm)
        return {
            "theta": theta,
            "z": z,
            "g": jnp.where((active & ok)[:, None], g_new, g),
            "H": H,
            "F": F,
            "active": active & (new_norm > tol) & ~stalled,
            "damping": new_damping,
            "redo": new_damping != damping,
            "count": count,
            "ratio": jnp.where(active, jnp.where(ok, new_norm / jnp.maximum(norm, 1e-30), 2.0), 0),
            "iters": c["iters"] + active,
            "it": c["it"] + 1,
        }

    theta = jnp.asarray(theta, X.dtype)
    z = dot(theta, X.T)
    g = gradient(residual(z), theta)
    carry = {
        "theta": theta,
        "z": z,
        "g": g,
        "H": H,
        "F": factor(H, P, jnp.full(K, FLOOR, X.dtype)),
        "active": jnp.max(jnp.abs(g), axis=1) > tol,
        "damping": jnp.full(K, FLOOR, X.dtype),
        "redo": jnp.zeros(K, bool),
        "count": jnp.zeros(K, jnp.int32),
        "ratio": jnp.zeros(K, X.dtype),
        "iters": jnp.zeros(K, jnp.int32),
        "it": jnp.int32(0),
    }
    c = jax.lax.while_loop(cond, body, carry)
    z = c["z"]  # the gradient the members stopped on is the one they report
    objective = jnp.sum(S * (jnp.logaddexp(0.0, z) - y * z), axis=1)
    objective += 0.5 * jnp.sum(P * c["theta"] ** 2, axis=1)
    return Solved(c["theta"], c["g"], c["H"], objective, c["iters"], c["count"])


@jax.jit
def _cold_start(S: Array, y: Array) -> Array:
    """The optimum of an intercept alone: ``logit`` of each member's weighted share of
    positives (0 where a member has weight on one class only)."""
    positive = dot(S, y)
    negative = jnp.sum(S, axis=-1) - positive
    ok = (positive > 0) & (negative > 0)
    return jnp.where(ok, jnp.log(jnp.where(ok, positive / negative, 1.0)), 0.0)


@jax.jit
def _rescaled_rows(S: Array, rows: Array) -> Array:
    """The members' weights on ``rows``, scaled to their totals on all rows."""
    part = S[:, rows]
    total, kept = jnp.sum(S, axis=1, keepdims=True), jnp.sum(part, axis=1, keepdims=True)
    return part * jnp.where(kept > 0, total / jnp.where(kept > 0, kept, 1.0), 0.0)


class Members:
    """Solves batches of members on one design: their weights ``S [K, N]`` on the device, the
    rest (penalties ``[K, d1]``, starts, Hessians and results) small enough to keep on the host.
    A batch is split so that no ``[members, rows]`` array exceeds ``limit`` floats."""

    def __init__(self, design: Design, y: ArrayLike, tol: float, max_iter: int, limit: int):
        self.design, self.tol, self.max_iter = design, jnp.float32(tol), max_iter
        self.y = jnp.asarray(y, jnp.float32)
        self.size = max(1, limit // design.X.shape[0])

    def cold_start(self, S: Array) -> np.ndarray:
        theta = np.zeros((S.shape[0], self.design.X.shape[1]), np.float32)
        theta[:, -1] = np.asarray(_cold_start(S, self.y))
        return theta

    def solve_cold(self, S: Array, P: np.ndarray) -> Solved:
        """Members from the optimum of an intercept alone. On a large table they are first
        solved on a fixed eighth of the rows (their weights scaled to the same totals), whose
        Hessians cost an eighth, and then on all rows from there."""
        start = self.cold_start(S)
        if S.shape[-1] >= _PRESOLVE_ROWS:
            rows, sub = self._sub
            start = sub.solve(_rescaled_rows(S, rows), P, start, None, self.max_iter).theta
            return self.solve(S, P, start, None, 2)
        return self.solve(S, P, start, None, self.max_iter)

    @functools.cached_property
    def _sub(self) -> tuple[Array, Members]:
        n = self.y.shape[0]
        rows = np.sort(np.random.default_rng(0).choice(n, n // 8, replace=False))
        x = np.asarray(self.design.X)[rows, :-1]
        sub = Members(Design.of(x), np.asarray(self.y)[rows], 10 * float(self.tol),
                       self.max_iter, self.size * n)  # fmt: skip
        return jnp.asarray(rows), sub

    def solve(
        self, S: Array, P: np.ndarray, theta: np.ndarray, H: np.ndarray | None, renew_first: int
    ) -> Solved:
        K, d1 = theta.shape
        if H is None:
            H = np.zeros((K, d1, d1), np.float32)
            renew_first = max(renew_first, 1)
        parts = []
        for i in range(0, K, self.size):
            part = slice(i, min(i + self.size, K))
            solved = _newton(
                self.design,
                self.y,
                S[part] if K > self.size else S,
                jnp.asarray(P[part], jnp.float32),
                jnp.asarray(theta[part], jnp.float32),
                jnp.asarray(H[part], jnp.float32),
                self.tol,
                max_iter=self.max_iter,
                renew_first=renew_first,
            )
            parts.append(jax.tree.map(np.asarray, solved))
        return parts[0] if len(parts) == 1 else jax.tree.map(lambda *a: np.concatenate(a), *parts)
