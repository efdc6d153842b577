"""Exact fits of convex members on one table: weighted logistic and multinomial regressions by
Newton's method, every member at once.

A member ``k`` of a logistic sweep minimises

    f_k(w, b) = sum_i s_ki l(y_i, x_i . w + b) + (1/2) sum_j p_kj w_j^2,

with ``l`` the log loss on logits, ``s_ki >= 0`` its sample weights (for the beta-weighted
cross-entropy of eq. ``b-loss-bin``: ``beta`` on a positive training row, ``1 - beta`` on a
negative one, over the count of training rows) and ``p_kj >= 0`` its ridge coefficients (the
intercept is not penalised). The members share the design ``x``; what differs is their weights
and penalties. A multinomial member minimises the same with the softmax cross-entropy and a ridge
on each feature's coefficients over all classes.

How the members are solved, and why it is fast:

* **Batched Newton steps with lagged Hessians.** All members step together: their logits,
  residuals and gradients are two matrix products with the shared design per step. A member's
  Hessian ``X^T diag(v) X`` is the expensive part (about ``N d^2`` operations, against ``N d``
  for a gradient), so it is not formed at every step: a member keeps the Cholesky factor of its
  last Hessian (the chord method) and gets a new one only while it converges slowly (its
  gradient falls by less than half in a step). Each step is taken along the Newton direction to
  where the directional derivative has about vanished (a secant search on it, which needs a
  sigmoid per row but no logarithm), and a member stops when its gradient's largest entry is at
  most ``tol``.
* **Hessians from products of feature pairs.** The nonzero products ``x_ij x_il`` of each row are
  made once where it takes at most 2 GiB (a table of ``N`` rows; pairs of one-hot levels of one
  category, never both 1, are left out), so a batch of members' Hessians is one matrix product
  with that table.
* **A path of class weights.** Along a grid of betas (``path = logit(beta)``) the optimum moves
  smoothly: in a well-specified model only the intercept moves, by the difference of the logits.
  The path is cut into segments of about 16 betas; in each, every 4th beta from the middle one
  is an anchor (and so are the segment's ends). The middles are solved first, on an eighth of
  the rows and then on all, and the anchors outwards from them, each from its inner neighbour's
  optimum (intercept moved) with a fresh Hessian, all segments at once; every other beta then
  starts from the interpolation of its two anchors' optima and borrows the nearer anchor's
  Hessian, so that most members need no Hessian of their own.
* **A path of penalties.** A grid of ridge coefficients is solved from the largest down, each
  level starting from the level above it with that level's Hessians (the penalty is part of the
  factor, so only the data's curvature lags).

Separable data has no minimiser without a penalty: the weights grow until the gradient of the
vanishing loss falls below ``tol``. A singular Hessian (a feature no weighted row uses, one-hot
columns that sum to the intercept's, the softmax's shift of all classes) is factored with its
diagonal raised by ``1e-6`` of its largest entry, which leaves the step finite where the gradient
has no component.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from iml import _validation as V

Array = jax.Array

__all__ = [
    "Design",
    "LogisticFit",
    "beta_weighted_sample_weights",
    "fit_weighted_logistic",
    "fit_weighted_softmax",
]

_HIGHEST = jax.lax.Precision.HIGHEST


def _dot(a: Array, b: Array) -> Array:
    """A product in full float32 precision (accelerators otherwise may round inputs to TF32)."""
    return jnp.dot(a, b, precision=_HIGHEST)


class LogisticFit(NamedTuple):
    """Fitted members (arrays with the members' leading axes).

    Attributes:
      coef: ``[..., d]`` weights (``[..., d, n]`` for a multinomial fit of ``n`` classes).
      intercept: ``[...]`` biases (``[..., n]``).
      objective: ``[...]`` the minimised ``f_k``.
      grad_norm: ``[...]`` the largest absolute entry of the gradient at the fit.
      iterations: ``[...]`` Newton steps taken.
      converged: ``[...]`` whether ``grad_norm <= tol``.
      hessians: ``[...]`` Hessians formed for the member (a member that borrows an anchor's
        Hessian, or keeps one across steps, forms fewer than it takes steps).
    """

    coef: Array
    intercept: Array
    objective: Array
    grad_norm: Array
    iterations: Array
    converged: Array
    hessians: Array


# ----------------------------------------------------------------------------------------------
# The shared design and its Hessians
# ----------------------------------------------------------------------------------------------

# The nonzero products of feature pairs take N floats each; above this many bytes the Hessians
# are formed from the design itself instead (more arithmetic, no extra memory).
_PAIR_BYTES = 2**31
# Floats in one [members, rows] array of a batch: members are split into batches below it.
_BATCH_FLOATS = 2**26
# A path is cut into segments of about this many steps, each solved outwards from its middle
# step; anchors are every _STRIDE-th step of a segment from its middle, and its two ends.
_SEGMENT, _STRIDE = 16, 4
# Steps in which every member of a path's anchors gets a new Hessian (after them, only the
# slow ones do).
_ANCHOR_RENEWALS = 1
_LEVEL_RENEWALS = 0
# Members of a table with at least this many rows are solved first on an eighth of them.
_PRESOLVE_ROWS = 16_384
# A member whose gradient's largest entry falls by less than this factor in a step gets a new
# Hessian (at most a tenth of a batch's members a step, the slowest first).
_SLOW = 0.5
# Diagonal floor of a factored Hessian, relative to its largest diagonal entry: raised (as
# Levenberg-Marquardt's damping) for a member whose Newton direction float32 made useless, where
# the data's curvature is nearly singular; a member that fails at the highest, a short gradient
# step, stalls.
_FLOOR, _MAX_DAMPING = 1e-6, 1e2


class Design(NamedTuple):
    """The features with a last column of ones, and the table of their nonzero pair products
    (None where it would take more than ``_PAIR_BYTES``): what every member of a table shares."""

    X: Array
    pairs: tuple[Array, Array, Array] | None

    @classmethod
    def of(cls, x: ArrayLike) -> Design:
        """The design of features ``x [N, d]`` (made once, and shared by every fit on them:
        pass it as ``design=`` to :func:`fit_weighted_logistic` and
        :func:`fit_weighted_softmax`)."""
        x = np.asarray(x, np.float32)
        design = jnp.asarray(np.concatenate([x, np.ones((x.shape[0], 1), np.float32)], axis=1))
        rows, cols = _nonzero_pairs(x)
        pairs = None
        if design.shape[0] * len(rows) * 4 <= _PAIR_BYTES:
            rows, cols = jnp.asarray(rows), jnp.asarray(cols)
            pairs = (rows, cols, _pair_products(design.T, rows, cols))
        return cls(design, pairs)


@jax.jit
def _pair_products(Xt: Array, rows: Array, cols: Array) -> Array:
    """``Z [p, N]``: column ``i`` holds the listed entries of ``x_i x_i^T``'s upper triangle, so
    a member's Hessian is one row-vector times ``Z^T`` and a batch's is one matrix product.
    (Pairs on the first axis: gathering whole rows of ``X^T`` fills the table fastest, and the
    products with it run faster too. Made in its own program: built inside the solver's, it took
    several times longer to fill on the CPU.)"""
    return Xt[rows] * Xt[cols]


def _times_pairs(V: Array, Z: Array) -> Array:
    """``V Z^T``: ``[K, N]`` weights against the ``[p, N]`` table."""
    return jax.lax.dot_general(V, Z, (((1,), (1,)), ((), ())), precision=_HIGHEST)


def _nonzero_pairs(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The upper-triangle pairs ``(j, k)`` of the design (the features and a last column of
    ones) whose product ``x_ij x_ik`` is nonzero in some row.

    Two one-hot columns of one category are never both 1, so their pair's products are all zero
    and need no column in the table (about a third of UCI Adult's pairs).
    """
    used = np.concatenate([features != 0, np.ones((features.shape[0], 1), bool)], axis=1)
    used = used.astype(np.float32)
    rows, cols = np.triu_indices(used.shape[1])
    keep = (used.T @ used)[rows, cols] > 0
    return rows[keep], cols[keep]


def _data_hessians(design: Design, V: Array) -> Array:
    """``X^T diag(v_k) X`` for each row ``v_k`` of ``V [K, N]``: ``[K, d1, d1]``."""
    X = design.X
    d1 = X.shape[1]
    if design.pairs is None:
        return jax.lax.map(lambda v: _dot((X * v[:, None]).T, X), V)
    rows, cols, Z = design.pairs
    products = _times_pairs(V, Z)
    upper = jnp.zeros((V.shape[0], d1, d1), X.dtype).at[:, rows, cols].set(products)
    return upper + jnp.swapaxes(upper, 1, 2) - upper * jnp.eye(d1, dtype=X.dtype)


def _factor(H: Array, penalty: Array, damping: Array) -> Array:
    """Cholesky factors of ``H + diag(penalty)`` (batched), the diagonal raised by ``damping``
    times its largest entry; a factor that float32 rounding leaves non-finite is made again with
    the diagonal raised ten times more, up to six times."""
    n = H.shape[-1]
    eye = jnp.eye(n, dtype=H.dtype)
    A = H + penalty[..., None, :] * eye
    floor = damping * jnp.max(jnp.diagonal(A, axis1=-2, axis2=-1), axis=-1)

    def factor(floor: Array) -> Array:
        return jnp.linalg.cholesky(A + floor[..., None, None] * eye)

    def bad(F: Array) -> Array:
        return ~jnp.all(jnp.isfinite(F), axis=(-2, -1))

    def body(carry):
        F, floor, tries = carry
        floor = jnp.where(bad(F), 10.0 * floor, floor)
        return jnp.where(bad(F)[..., None, None], factor(floor), F), floor, tries + 1

    F, _, _ = jax.lax.while_loop(
        lambda c: jnp.any(bad(c[0])) & (c[2] < 6), body, (factor(floor), floor, 0)
    )
    return F


def _damped(damping: Array, ok: Array, full: Array) -> Array:
    """The next damping of members whose step was acceptable (``ok``; ``full``: at its whole
    length) or not: a failed step multiplies it by 100 (towards a short gradient step), a whole
    one divides it by 10 (back towards Newton's step), down to ``_FLOOR``."""
    return jnp.where(ok, jnp.where(full, jnp.maximum(damping / 10.0, _FLOOR), damping),
                     jnp.minimum(100.0 * damping, _MAX_DAMPING))  # fmt: skip


def _solve(F: Array, g: Array) -> Array:
    """``(L L^T)^{-1} g`` for batched Cholesky factors ``L`` and vectors ``g``."""
    return jax.scipy.linalg.cho_solve((F, True), g[..., None])[..., 0]


# ----------------------------------------------------------------------------------------------
# Batched Newton steps of binary members
# ----------------------------------------------------------------------------------------------


class _Solved(NamedTuple):
    theta: Array  # [K, d1]
    grad: Array  # [K, d1]
    hessian: Array  # [K, d1, d1]: the data's curvature at the last renewal
    objective: Array  # [K]
    iterations: Array  # [K]
    hessians: Array  # [K]


# Secant trials of one step's line search.
_LINE_TRIALS = 8
# A slope within this fraction of the sum of its terms' sizes is zero to float32 rounding.
_ROUNDING = 1e-5


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
) -> _Solved:
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
        return _dot(r, X) + P * theta

    def curvature(z: Array, S: Array) -> Array:
        p = jax.nn.sigmoid(z)
        return S * p * (1.0 - p)

    def renew_all(z, H, active):
        new = _data_hessians(design, curvature(z, S))
        return jnp.where(active[:, None, None], new, H), active

    def renew_slow(z, H, active, ratio):
        priority = jnp.where(active & (ratio > _SLOW), ratio, -1.0)
        chosen, idx = jax.lax.top_k(priority, renew_k)
        take = chosen > 0
        new = _data_hessians(design, curvature(z[idx], S[idx]))
        H = H.at[idx].set(jnp.where(take[:, None, None], new, H[idx]))
        return H, jnp.zeros(K, bool).at[idx].set(take)

    def cond(c):
        return (c["it"] < max_iter) & jnp.any(c["active"])

    def body(c):
        theta, z, g, H, F = c["theta"], c["z"], c["g"], c["H"], c["F"]
        active, count, ratio = c["active"], c["count"], c["ratio"]
        everyone = c["it"] < renew_first
        slow = jnp.any(active & (ratio > _SLOW))

        def renewed(_):
            return jax.lax.cond(
                everyone,
                lambda: renew_all(z, H, active),
                lambda: renew_slow(z, H, active, ratio),
            )

        H, fresh = jax.lax.cond(everyone | slow, renewed, lambda _: (H, jnp.zeros(K, bool)), None)
        damping = c["damping"]
        F = jax.lax.cond(
            everyone | slow | jnp.any(c["redo"]), lambda: _factor(H, P, damping), lambda: F
        )
        count = count + fresh
        step = _solve(F, g)
        step = jnp.where(active[:, None] & jnp.isfinite(step), step, 0.0)
        # The logits move by X step: formed from the step itself, not as the difference of two
        # logit vectors, whose rounding would swamp a step near the optimum.
        dz = _dot(step, X.T)
        descent = jnp.sum(g * step, axis=1)  # -phi'(0) along -step

        def trial(h: Array) -> tuple[Array, Array, Array]:
            """The gradient at step length ``h``, whether to accept it (past the line's minimum
            by at most a quarter of the descent, phi'(h) = -g(h) . step, or level with it to
            float32 rounding: near the optimum every slope is rounding), and phi'(h)."""
            moved = theta - h[:, None] * step
            r = residual(z - h[:, None] * dz)
            g = gradient(r, moved)
            slope = -jnp.sum(g * step, axis=1)
            size = jnp.sum((_dot(jnp.abs(r), X_abs) + jnp.abs(P * moved)) * jnp.abs(step), axis=1)
            flat = jnp.abs(slope) <= _ROUNDING * size
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
            lambda lc: jnp.any(~lc[2] & useful) & (lc[4] < _LINE_TRIALS), line, (h, *trial(h), 0)
        )
        ok = ok & (useful | ~active)
        # No step length found: the member stays where it is, with more damping and a new
        # Hessian next; failing at the most damping, it stalls.
        stalled = active & ~ok & (damping >= _MAX_DAMPING)
        new_damping = _damped(damping, ok, h == 1.0)
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
    z = _dot(theta, X.T)
    g = gradient(residual(z), theta)
    carry = {
        "theta": theta,
        "z": z,
        "g": g,
        "H": H,
        "F": _factor(H, P, jnp.full(K, _FLOOR, X.dtype)),
        "active": jnp.max(jnp.abs(g), axis=1) > tol,
        "damping": jnp.full(K, _FLOOR, X.dtype),
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
    return _Solved(c["theta"], c["g"], c["H"], objective, c["iters"], c["count"])


@jax.jit
def _cold_start(S: Array, y: Array) -> Array:
    """The optimum of an intercept alone: ``logit`` of each member's weighted share of
    positives (0 where a member has weight on one class only)."""
    positive = _dot(S, y)
    negative = jnp.sum(S, axis=-1) - positive
    ok = (positive > 0) & (negative > 0)
    return jnp.where(ok, jnp.log(jnp.where(ok, positive / negative, 1.0)), 0.0)


@jax.jit
def _rescaled_rows(S: Array, rows: Array) -> Array:
    """The members' weights on ``rows``, scaled to their totals on all rows."""
    part = S[:, rows]
    total, kept = jnp.sum(S, axis=1, keepdims=True), jnp.sum(part, axis=1, keepdims=True)
    return part * jnp.where(kept > 0, total / jnp.where(kept > 0, kept, 1.0), 0.0)


class _Members:
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

    def solve_cold(self, S: Array, P: np.ndarray) -> _Solved:
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
    def _sub(self) -> tuple[Array, _Members]:
        n = self.y.shape[0]
        rows = np.sort(np.random.default_rng(0).choice(n, n // 8, replace=False))
        x = np.asarray(self.design.X)[rows, :-1]
        sub = _Members(Design.of(x), np.asarray(self.y)[rows], 10 * float(self.tol),
                       self.max_iter, self.size * n)  # fmt: skip
        return jnp.asarray(rows), sub

    def solve(
        self, S: Array, P: np.ndarray, theta: np.ndarray, H: np.ndarray | None, renew_first: int
    ) -> _Solved:
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


@functools.partial(jax.jit, static_argnums=2)
def _members_of(S: Array, steps: Array, shape: tuple[int, int]) -> Array:
    """The weights of the path's ``steps`` (``S [Q, M, N]``), as ``[len(steps) M, N]``."""
    return S[steps].reshape(shape)


def _solve_path(members: _Members, S: Array, P: np.ndarray, offsets: np.ndarray) -> _Solved:
    """Steps ``S [Q, M, N]`` (on the device) of a path, ``P [Q, M, d1]``, by anchors (see the
    module); results on axes ``[Q, M]``."""
    Q, M, N = S.shape
    order = np.argsort(offsets, kind="stable")  # position -> step
    at = offsets[order]
    solved: dict[int, _Solved] = {}

    def solve(positions: list[int], starts: list[np.ndarray] | None, hessians, renew_first: int):
        steps = order[positions]
        weights = _members_of(S, jnp.asarray(steps), (len(steps) * M, N))
        penalties = P[steps].reshape(-1, P.shape[-1])
        if starts is None:
            result = members.solve_cold(weights, penalties)
        else:
            H = None if hessians is None else np.concatenate(hessians)
            result = members.solve(weights, penalties, np.concatenate(starts), H, renew_first)
        for i, pos in enumerate(positions):
            solved[pos] = jax.tree.map(lambda a, i=i: a[i * M : (i + 1) * M], result)

    # Segments of the path, each solved from its middle step outwards: the middles from cold
    # starts, then their anchors a stride at a time in both directions, all segments together
    # (so that each batch of Hessians is large enough to use the machine).
    segments = np.array_split(np.arange(Q), max(1, Q // _SEGMENT))
    middles = [int(seg[len(seg) // 2]) for seg in segments]
    solve(middles, None, None, 0)
    chains = []  # each: positions outwards from a middle, the middle first
    for seg, middle in zip(segments, middles, strict=True):
        lo, hi = int(seg[0]), int(seg[-1])
        left = sorted({lo, middle} | set(range(middle, lo - 1, -_STRIDE)), reverse=True)
        right = sorted({hi, middle} | set(range(middle, hi + 1, _STRIDE)))
        chains += [left, right]
    for j in range(1, max(len(chain) for chain in chains)):
        links = [(chain[j], chain[j - 1]) for chain in chains if j < len(chain)]
        starts = []
        for pos, inner in links:
            start = solved[inner].theta.copy()
            start[:, -1] += at[pos] - at[inner]  # the intercept moved along the path
            starts.append(start)
        solve([pos for pos, _ in links], starts, None, _ANCHOR_RENEWALS)
    # Every other step from the interpolation of its two anchors, with the nearer one's Hessian.
    done = np.asarray(sorted(solved))
    rest = [pos for pos in range(Q) if pos not in solved]
    if rest:
        starts, hessians = [], []
        for pos in rest:
            k = int(np.searchsorted(done, pos))
            lo, hi = int(done[k - 1]), int(done[k])
            span = at[hi] - at[lo]
            t = (at[pos] - at[lo]) / span if span > 0 else 0.5
            starts.append(((1 - t) * solved[lo].theta + t * solved[hi].theta).astype(np.float32))
            hessians.append(solved[lo if t <= 0.5 else hi].hessian)
        solve(rest, starts, hessians, 0)
    back = np.empty(Q, np.int64)
    back[order] = np.arange(Q)
    return jax.tree.map(lambda *a: np.stack(a), *[solved[int(pos)] for pos in back])


# ----------------------------------------------------------------------------------------------
# Weighted logistic regressions: the public entry point
# ----------------------------------------------------------------------------------------------


def beta_weighted_sample_weights(
    labels: ArrayLike, betas: ArrayLike, train_mask: ArrayLike
) -> np.ndarray:
    """Sample weights ``[B, R, N]`` of the beta-weighted mean cross-entropy per member.

    Args:
      labels: ``[N]`` labels in ``{0, 1}``.
      betas: ``[B]`` class weights in ``(0, 1)``.
      train_mask: ``[R, N]`` 1 on each rotation's training rows, 0 elsewhere.

    Returns:
      ``beta`` (positives) or ``1 - beta`` (negatives) on training rows, over the rotation's
      number of training rows.
    """
    y = np.asarray(labels, np.float64)
    b = V.check_betas("betas", betas, distinct=False)
    mask = np.asarray(train_mask, np.float64)
    if mask.ndim != 2 or mask.shape[1] != y.shape[0]:
        raise ValueError(f"train_mask must be [R, {y.shape[0]}]; got shape {mask.shape}")
    count = mask.sum(axis=1)
    if (count == 0).any():
        raise ValueError(f"rotations {np.flatnonzero(count == 0).tolist()} have no training rows")
    per_class = np.where(y[None, :] == 1, b[:, None], 1.0 - b[:, None]).astype(np.float32)
    share = (mask / count[:, None]).astype(np.float32)  # [R, N]
    return per_class[:, None, :] * share[None, :, :]  # [B, R, N], made in float32


def _inputs(
    features: ArrayLike, labels: ArrayLike, sample_weights: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features ``[N, d]`` (finite), labels ``[N]`` and sample weights ``[..., N]`` (finite,
    non-negative), checked and as arrays."""
    x = np.asarray(features, np.float32)
    y = np.asarray(labels)
    s = np.asarray(sample_weights, np.float32)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"features must be [N, d] and labels [N]; got {x.shape} and {y.shape}")
    if s.ndim < 1 or s.shape[-1] != x.shape[0]:
        raise ValueError(f"sample_weights must be [..., {x.shape[0]}]; got shape {s.shape}")
    V.check_finite("features", x)
    V.check_interval("sample_weights", s, 0.0, np.inf, open_low=False, open_high=True)
    return x, y, s


def _grid(name: str, l2: ArrayLike) -> np.ndarray:
    values = np.asarray(l2, np.float64)
    if values.ndim > 1:
        raise ValueError(
            f"{name} must be a number or a 1-D grid of numbers, got shape {values.shape}"
        )
    V.check_interval(name, values, 0.0, np.inf, open_low=False, open_high=True)
    return np.atleast_1d(values)


def _penalties(scale: ArrayLike | None, lead: tuple[int, ...], d: int) -> np.ndarray:
    """Per-member ridge multipliers ``[*lead, d + 1]`` (0 for the intercept)."""
    if scale is None:
        base = np.ones((*lead, d), np.float64)
    else:
        base = np.asarray(scale, np.float64)
        V.check_interval("penalty_scale", base, 0.0, np.inf, open_low=False, open_high=True)
        try:
            base = np.broadcast_to(base, (*lead, d))
        except ValueError:
            raise ValueError(
                f"penalty_scale must broadcast to the members' shape {(*lead, d)}; got shape "
                f"{base.shape}"
            ) from None
    return np.concatenate([base, np.zeros((*lead, 1))], axis=-1)


def fit_weighted_logistic(
    features: ArrayLike,
    labels: ArrayLike,
    sample_weights: ArrayLike,
    *,
    l2: ArrayLike = 0.0,
    penalty_scale: ArrayLike | None = None,
    tol: float = 1e-6,
    max_iter: int = 50,
    chunk: int | None = None,
    path: ArrayLike | None = None,
    design: Design | None = None,
) -> LogisticFit:
    """Minimise every member's weighted log loss plus its ridge exactly (see the module).

    Member ``k`` minimises ``sum_i s_ki l(y_i, x_i . w + b) + (l2 / 2) sum_j c_kj w_j^2`` with
    ``s`` its ``sample_weights`` and ``c`` its ``penalty_scale`` (per-feature multipliers: e.g.
    a training fold's variances, which makes the penalty that of standardised features, or each
    member's total weight). A member stops when the largest entry of its gradient is at most
    ``tol``, or after ``max_iter`` Newton steps.

    Members start from the optimum of an intercept alone (the logit of the weighted share of
    positives), unless ``path`` makes the first axis of ``sample_weights`` a solution path (as a
    regularisation path is fitted with warm starts): every fourth step of the path, in the order
    of the ``path`` values, is then an anchor solved outwards from the middle one, each starting
    from its inner neighbour's optimum with the intercept moved by the difference of their
    ``path`` values, and the steps between start from their anchors' interpolation with the
    nearer anchor's Hessians. For a grid of betas, ``path = logit(beta)`` is that move's exact
    size where the model is well specified (the weighted optimum's logit is the posterior's plus
    ``logit(beta)``). The path changes where a member starts and how many Hessians it needs, not
    what it solves.

    Args:
      features: ``[N, d]`` design shared by all members.
      labels: ``[N]`` labels in ``{0, 1}``.
      sample_weights: ``[K, N]`` non-negative weights per member (or ``[..., N]``: the leading
        axes are flattened and restored); ``[P, ..., N]`` with ``path``.
      l2: the ridge coefficient, or a 1-D grid of them: the results then lead with the grid's
        axis, its levels solved from the largest down, each from the level above.
      penalty_scale: ``[..., d]`` multipliers of ``l2`` per member and feature, broadcast against
        the leading axes of ``sample_weights`` (default 1).
      tol: gradient tolerance (largest absolute entry).
      max_iter: most Newton steps of a member.
      chunk: the most members solved at once (default: as many as keep a ``[members, N]``
        array under 2^26 floats).
      path: optional ``[P]`` finite values along the first axis of ``sample_weights``.
      design: :meth:`Design.of` these features, made once where several fits share them.

    Returns:
      A :class:`LogisticFit` whose arrays lead with the grid's axis (if ``l2`` is a grid) and the
      weights' leading axes.
    """
    x, y, s = _inputs(features, labels, sample_weights)
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    levels = _grid("l2", l2)
    V.check_count("max_iter", max_iter)
    if chunk is not None:
        V.check_count("chunk", chunk)
    V.check_positive("tol", tol)
    offsets = None
    if path is not None:
        if s.ndim < 2:
            raise ValueError(f"sample_weights must be [P, ..., N] with a path; got shape {s.shape}")
        offsets = np.asarray(path, np.float64)
        V.check_shape("path", offsets, (s.shape[0],))
        V.check_finite("path", offsets)
    lead, n = s.shape[:-1], s.shape[-1]
    scale = _penalties(penalty_scale, lead, x.shape[1]).astype(np.float32)
    design = Design.of(x) if design is None else _check_design(design, x)
    limit = _BATCH_FLOATS if chunk is None else chunk * n
    members = _Members(design, y, tol, max_iter, limit)
    fits = _fit_levels(members, jnp.asarray(s), scale, levels, offsets)
    out = [
        LogisticFit(
            coef=f.theta[..., :-1],
            intercept=f.theta[..., -1],
            objective=f.objective,
            grad_norm=np.max(np.abs(f.grad), axis=-1),
            iterations=f.iterations,
            converged=np.max(np.abs(f.grad), axis=-1) <= tol,
            hessians=f.hessians,
        )
        for f in fits
    ]
    fit = jax.tree.map(lambda *a: np.stack(a), *out)
    if np.ndim(l2) == 0:
        fit = jax.tree.map(lambda a: a[0], fit)
    return fit


def _check_design(design: Design, x: np.ndarray) -> Design:
    if not isinstance(design, Design) or design.X.shape != (x.shape[0], x.shape[1] + 1):
        raise ValueError(
            f"design must be the Design.of these [{x.shape[0]}, {x.shape[1]}] features, got "
            f"{getattr(getattr(design, 'X', None), 'shape', type(design).__name__)}"
        )
    return design


def _fit_levels(
    members: _Members,
    s: Array,
    scale: np.ndarray,
    levels: np.ndarray,
    offsets: np.ndarray | None,
) -> list[_Solved]:
    """Every level of the penalty grid (in the grid's order), solved from the largest down; the
    results keep the weights' leading axes."""
    lead, n = s.shape[:-1], s.shape[-1]
    d1 = scale.shape[-1]
    flat_s, flat_scale = s.reshape(-1, n), scale.reshape(-1, d1)
    fits: dict[int, _Solved] = {}
    previous = None
    for g in np.argsort(-levels, kind="stable"):
        level = np.float32(levels[g])
        if previous is None and offsets is not None:
            steps = s.reshape(s.shape[0], -1, n)
            solved = _solve_path(members, steps, level * scale.reshape(s.shape[0], -1, d1), offsets)
            solved = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), solved)
        elif previous is None:
            start = members.cold_start(flat_s)
            solved = members.solve(flat_s, level * flat_scale, start, None, members.max_iter)
        else:
            solved = members.solve(
                flat_s, level * flat_scale, previous.theta, previous.hessian, _LEVEL_RENEWALS
            )
        previous = solved
        fits[int(g)] = solved
    return [
        jax.tree.map(lambda a: a.reshape(*lead, *a.shape[1:]), fits[g]) for g in range(len(levels))
    ]


# ----------------------------------------------------------------------------------------------
# Multinomial logistic regressions (the class-weighted softmax cross-entropy)
# ----------------------------------------------------------------------------------------------


def _softmax_hessian(design: Design, s: Array, p: Array) -> Array:
    """``sum_i s_i (x_i x_i^T) kron (diag p_i - p_i p_i^T)``: ``[k n, k n]``.

    With the table of pair products ``Z``, block ``(c, c')`` of feature pair ``(j, l)`` is row
    ``(c, c')`` of ``W Z``, ``W`` the ``n(n+1)/2`` weight vectors ``s (p_c 1{c = c'} - p_c
    p_c')``: one matrix product of ``n(n+1)/2`` rows instead of one of ``k n`` columns.
    Without the table, it is formed from two ``[N, k n]`` matrices."""
    X = design.X
    N, k = X.shape
    n = p.shape[-1]
    if design.pairs is not None:
        rows, cols, Z = design.pairs
        c1, c2 = np.triu_indices(n)
        W = s[None, :] * (jnp.where((c1 == c2)[:, None], p.T[c1], 0.0) - p.T[c1] * p.T[c2])
        values = _times_pairs(W, Z)  # [blocks, pairs]
        j, l = rows[None, :], cols[None, :]
        a, b = jnp.asarray(c1)[:, None], jnp.asarray(c2)[:, None]
        H = jnp.zeros((k * n, k * n), X.dtype)
        for u, v in (((j, a), (l, b)), ((l, b), (j, a)), ((j, b), (l, a)), ((l, a), (j, b))):
            H = H.at[u[0] * n + u[1], v[0] * n + v[1]].set(values)
        return H
    weighted = (X[:, :, None] * (s[:, None] * p)[:, None, :]).reshape(N, k * n)
    plain = (X[:, :, None] * p[:, None, :]).reshape(N, k * n)
    diagonal = _dot(weighted.T, X).reshape(k, n, k)  # sum_i s_i p_ic x_ij x_il
    blocks = diagonal[:, :, :, None] * jnp.eye(n, dtype=X.dtype)[None, :, None, :]
    return blocks.reshape(k * n, k * n) - _dot(weighted.T, plain)


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
) -> _Solved:
    """One multinomial member by Newton steps with lagged Hessians (the binary rules of
    :func:`_newton`; here a member's own condition decides, since members are solved one after
    another)."""
    X = design.X
    X_abs = jnp.abs(X)
    k, n = theta.shape
    ridge = jnp.repeat(pen, n)  # theta.ravel() is row-major: feature j's classes together

    def residual(z: Array) -> Array:
        return s[:, None] * (jax.nn.softmax(z, axis=-1) - onehot)

    def gradient(R: Array, theta: Array) -> Array:
        return _dot(X.T, R) + pen[:, None] * theta

    def cond(c):
        return (c["it"] < max_iter) & c["active"]

    def body(c):
        theta, z, g = c["theta"], c["z"], c["g"]
        renew = (c["ratio"] > _SLOW) | ~c["has"]
        H = jax.lax.cond(
            renew,
            lambda: _softmax_hessian(design, s, jax.nn.softmax(z, axis=-1)),
            lambda: c["H"],
        )
        damping = c["damping"]
        F = jax.lax.cond(renew | c["redo"], lambda: _factor(H, ridge, damping), lambda: c["F"])
        step = _solve(F, g.ravel()).reshape(k, n)
        step = jnp.where(jnp.isfinite(step), step, 0.0)
        dz = _dot(X, step)
        descent = jnp.sum(g * step)
        useful = jnp.isfinite(descent) & (descent > 0)

        def trial(h: Array):
            moved = theta - h * step
            R = residual(z - h * dz)
            g = gradient(R, moved)
            slope = -jnp.sum(g * step)
            size = jnp.sum(
                (_dot(X_abs.T, jnp.abs(R)) + jnp.abs(pen[:, None] * moved)) * jnp.abs(step)
            )
            flat = jnp.abs(slope) <= _ROUNDING * size
            return g, jnp.isfinite(slope) & ((slope <= 0.25 * descent) | flat), slope

        def line(lc):
            h, _, _, slope, tries = lc
            shrink = jnp.clip(descent / (descent + slope), 0.1, 0.9)
            h = h * jnp.where(jnp.isfinite(shrink), shrink, 0.1)
            return (h, *trial(h), tries + 1)

        h, g_new, ok, _, _ = jax.lax.while_loop(
            lambda lc: ~lc[2] & useful & (lc[4] < _LINE_TRIALS),
            line,
            (jnp.float32(1.0), *trial(1.0), 0),
        )
        ok = ok & useful
        stalled = ~ok & (damping >= _MAX_DAMPING)
        new_damping = _damped(damping, ok, h == 1.0)
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

    z = _dot(X, theta)
    g = gradient(residual(z), theta)
    floor = jnp.float32(_FLOOR)
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
    carry["F"] = jax.lax.cond(has_hessian, lambda: _factor(H, ridge, floor), lambda: carry["F"])
    c = jax.lax.while_loop(cond, body, carry)
    z = c["z"]
    objective = jnp.sum(s * (jax.nn.logsumexp(z, axis=-1) - jnp.sum(onehot * z, axis=-1)))
    objective += 0.5 * jnp.sum(pen[:, None] * c["theta"] ** 2)
    return _Solved(c["theta"], c["g"], c["H"], objective, c["it"], c["count"])


@functools.partial(jax.jit, static_argnames=("max_iter",))
def _softmax_members(
    design: Design, onehot: Array, S: Array, P: Array, tol: Array, *, max_iter: int
) -> _Solved:
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
      n_classes: the number of classes.
      l2: the ridge coefficient, or a 1-D grid of them (the results then lead with its axis).
      penalty_scale: ``[..., d]`` multipliers of ``l2`` per member and feature (default 1).
      tol: gradient tolerance (largest absolute entry).
      max_iter: most Newton steps of a member and level.
      design: :meth:`Design.of` these features, made once where several fits share them.

    Returns:
      A :class:`LogisticFit` with ``coef [..., d, n]`` and ``intercept [..., n]``.
    """
    x, y, s = _inputs(features, labels, sample_weights)
    V.check_count("n_classes", n_classes, 2)
    if y.size and (y.min() < 0 or y.max() >= n_classes or not np.array_equal(y, np.round(y))):
        raise ValueError(f"labels must be class indices in [0, {n_classes})")
    levels = _grid("l2", l2)
    V.check_count("max_iter", max_iter)
    V.check_positive("tol", tol)
    lead, n = s.shape[:-1], s.shape[-1]
    scale = _penalties(penalty_scale, lead, x.shape[1]).reshape(-1, x.shape[1] + 1)
    order = np.argsort(-levels, kind="stable")  # solved from the largest down
    P = (levels[order][None, :, None] * scale[:, None, :]).astype(np.float32)
    design = Design.of(x) if design is None else _check_design(design, x)
    onehot = jax.nn.one_hot(jnp.asarray(y, jnp.int32), n_classes, dtype=jnp.float32)
    out = _softmax_members(
        design, onehot, jnp.asarray(s.reshape(-1, n)), jnp.asarray(P), jnp.float32(tol),
        max_iter=max_iter,
    )  # fmt: skip
    out = jax.tree.map(lambda a: np.asarray(a)[:, np.argsort(order)], out)  # the grid's order
    norm = np.max(np.abs(out.grad), axis=(-2, -1))
    fit = LogisticFit(
        coef=out.theta[..., :-1, :],
        intercept=out.theta[..., -1, :],
        objective=out.objective,
        grad_norm=norm,
        iterations=out.iterations,
        converged=norm <= tol,
        hessians=out.hessians,
    )
    fit = jax.tree.map(
        lambda a: np.moveaxis(a, 1, 0).reshape(len(levels), *lead, *a.shape[2:]), fit
    )
    if np.ndim(l2) == 0:
        fit = jax.tree.map(lambda a: a[0], fit)
    return fit
