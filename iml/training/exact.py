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
  gradient falls by less than half in a step). Chord steps converge linearly, so while a member
  keeps the factor of its last step each step is corrected by Anderson's acceleration of depth
  one: the chord step plus ``gamma`` times (the last move less the chord step's change over it),
  with ``gamma`` minimising ``|chord - gamma change|``; the plain chord step where the corrected
  one is not finite or no descent direction. Each step is taken along its direction to where the
  directional derivative has about vanished (a secant search on it, which needs a sigmoid per row
  but no logarithm), and a member stops when its gradient's largest entry is at most ``tol``.
* **Work for the few members that need it.** In a batch of at least 128 members, what only some
  members need is done for them alone: a line search's further trials for the members whose
  first was not accepted and the third product that tells a rounding-level slope from a real
  one, an eighth of the batch at a time, and the Cholesky factors of the members whose Hessians
  were renewed (all members are factored again only in a call's first step, in the first
  ``renew_first`` steps, where every active member's Hessian is renewed, or after a damping
  changed). A smaller batch does these for all its members, which compiles faster.
* **Hessians from products of feature pairs.** The nonzero products ``x_ij x_il`` of each row are
  made once where it takes at most 2 GiB (a table of ``N`` rows; pairs of one-hot levels of one
  category, never both 1, are left out), so a batch of members' Hessians is one matrix product
  with that table. The pairs of levels of two one-hot categories are summed instead by adding
  each row's weight into the cell of its two levels: one pass over the rows for all of them, in
  place of a column of the table for each.
* **A path of class weights.** Along a grid of betas (``path = logit(beta)``) the optimum moves
  smoothly: in a well-specified model only the intercept moves, by the difference of the logits. The
  path is cut into segments of about 16 betas; in each, every 4th beta from the middle one is an
  anchor (and so are the segment's ends). The middles are solved first (by Newton's method from the
  optimum of an intercept alone), and the anchors outwards from them, each from its inner
  neighbour's optimum (intercept moved) with a fresh Hessian, the segments side by side; every other
  beta then starts from the interpolation of its two anchors' optima and borrows the nearer anchor's
  Hessian, so that most members need no Hessian of their own. Each stage (the middles, each level of
  anchors, the rest) is solved in batches of as many betas as there are segments, its last batch
  filled up with repeats, so that one compiled Newton program serves every batch of the path
  (batches of 128 members or more, on long grids, may split off their stragglers).
* **A path of penalties.** A grid of ridge coefficients is solved from the largest down, each
  level starting from the level above it with that level's Hessians (the penalty is part of the
  factor, so only the data's curvature lags).
* **Stragglers apart.** A batch's step costs the same however few of its members are still
  active, so once at most an eighth of a large batch is, those members go on in a batch of
  their own, from where they are with their Hessians.

Separable data has no minimiser without a penalty: the weights grow until the gradient of the
vanishing loss falls below ``tol``. A singular Hessian (a feature no weighted row uses, one-hot
columns that sum to the intercept's, the softmax's shift of all classes) is factored with its
diagonal raised by ``1e-6`` of the data's largest curvature (the penalty's left out: a feature
that no training row uses carries a large penalty where the ridge is that of standardised
features, and a floor measured against it would damp every other direction), which leaves the
step finite where the gradient has no component.
"""

from __future__ import annotations

import functools
import logging
import os
import threading

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from iml import _validation as V
from iml._device import ELEMENTAL_EMITTERS, to_device
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
    data_hessians,
    dot,
    factor,
    ridge_multipliers,
    solve,
)

Array = jax.Array

__all__ = [
    "beta_weighted_sample_weights",
    "compile_ahead",
    "fit_weighted_logistic",
    "path_batch",
]


# Floats in one [members, rows] array of a batch: members are split into batches below it.
_BATCH_FLOATS = 2**26
# A path is cut into segments of about this many steps, each solved outwards from its middle
# step; anchors are every _STRIDE-th step of a segment from its middle, and its two ends.
_SEGMENT, _STRIDE = 16, 4
# Steps in which every member of a path's anchors gets a new Hessian (after them, only the
# slow ones do).
_ANCHOR_RENEWALS = 1
_LEVEL_RENEWALS = 0
# At most one in this many members of a batch gets a new Hessian in a step (the slowest).
_RENEW_SHARE = 10
# The largest weight of the last move in an accelerated chord step.
_ANDERSON_CLIP = 10.0
# Once no more than one in _STRAGGLERS members of a batch of at least _STRAGGLERS * _FEWEST is
# still active, those go on in a batch of their own (see Members._steps).
_STRAGGLERS, _FEWEST = 8, 16
# A batch of at least this many members takes its line searches' further trials and their third
# products an eighth of the batch at a time, and factors its renewed members alone (see _newton).
_LARGE = _STRAGGLERS * _FEWEST


# ----------------------------------------------------------------------------------------------
# Batched Newton steps of binary members
# ----------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames="objective", compiler_options=ELEMENTAL_EMITTERS)
def _newton(
    design: Design,
    y: Array,
    S: Array,
    P: Array,
    theta: Array,
    H: Array,
    tol: Array,
    max_iter: Array,
    renew_first: Array,
    until: Array,
    objective: bool = True,
) -> Solved:
    """Members ``S [K, N]`` (weights), ``P [K, d1]`` (ridge coefficients) from ``theta [K, d1]``
    with data Hessians ``H [K, d1, d1]``: every active member gets a new Hessian in each of the
    first ``renew_first`` steps, then only the slowest (see the module). The steps stop after
    ``max_iter``, or once at most ``until`` members are still active. The members' objectives
    are summed over their rows only with ``objective`` (else the result's are None)."""
    X = design.X
    X_abs = design.X_abs
    K = S.shape[0]
    renew_k = max(1, -(-K // _RENEW_SHARE))
    # A large batch takes its line searches' further trials and third products `chunk` members
    # at a time, and factors its renew_k renewed members alone; a small batch does these for all
    # its members (its program compiles faster).
    large = K >= _LARGE
    chunk = K // _STRAGGLERS if large else K

    def residual(z: Array) -> Array:
        return S * (jax.nn.sigmoid(z) - y)

    def gradient(r: Array, theta: Array) -> Array:
        return dot(r, X) + P * theta

    def curvature(z: Array, S: Array) -> Array:
        p = jax.nn.sigmoid(z)
        return S * p * (1.0 - p)

    def renew_all(z, H, active):
        new = data_hessians(design, curvature(z, S))
        return jnp.where(active[:, None, None], new, H), active, jnp.zeros(renew_k, jnp.int32)

    def renew_slow(z, H, active, ratio):
        priority = jnp.where(active & (ratio > SLOW), ratio, -1.0)
        chosen, idx = jax.lax.top_k(priority, renew_k)
        take = chosen > 0
        new = data_hessians(design, curvature(z[idx], S[idx]))
        H = H.at[idx].set(jnp.where(take[:, None, None], new, H[idx]))
        return H, jnp.zeros(K, bool).at[idx].set(take), idx

    # A large batch factors renew_k members at a time: the slowest alone where only their
    # Hessians are new, else all of them (members repeated to fill the last group).
    groups = -(-K // renew_k)
    every_row = (jnp.arange(groups * renew_k) % K).reshape(groups, renew_k)

    def refactor(H, F, damping, rows, n):
        def one(i, F):
            k = rows[i]
            return F.at[k].set(factor(H[k], P[k], damping[k]))

        return jax.lax.fori_loop(0, n, one, F)

    def cond(c):
        return (c["it"] < max_iter) & (jnp.sum(c["active"]) > until)

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

        H, fresh, idx = jax.lax.cond(
            everyone | slow,
            renewed,
            lambda _: (H, jnp.zeros(K, bool), jnp.zeros(renew_k, jnp.int32)),
            None,
        )
        damping = c["damping"]
        redo = jnp.any(c["redo"])
        if large:
            renew_every = everyone | redo
            rows = jnp.where(renew_every, every_row, jnp.broadcast_to(idx, every_row.shape))
            groups_now = jnp.where(renew_every, groups, jnp.where(slow, 1, 0))
            F = refactor(H, F, damping, rows, groups_now)
        else:
            F = jax.lax.cond(everyone | slow | redo, lambda: factor(H, P, damping), lambda: F)
        count = count + fresh
        chord = solve(F, g)
        chord = jnp.where(active[:, None] & jnp.isfinite(chord), chord, 0.0)
        # Anderson's acceleration (depth 1) of the fixed point theta -> theta - chord(theta), for
        # a member whose last step was taken with the factor it has now: the step is chord +
        # gamma (last move - change of chord), gamma minimising |chord - gamma change of chord|;
        # the chord step itself where that is not finite or no descent direction.
        same = c["same"] & active & ~fresh & ~c["redo"]
        change, moved = chord - c["chord"], theta - c["before"]
        size = jnp.sum(change * change, axis=1)
        gamma = jnp.sum(chord * change, axis=1) / jnp.where(size > 0, size, 1.0)
        gamma = jnp.where(same & (size > 0), jnp.clip(gamma, -_ANDERSON_CLIP, _ANDERSON_CLIP), 0.0)
        faster = chord + gamma[:, None] * (moved - change)
        use = same & jnp.all(jnp.isfinite(faster), axis=1) & (jnp.sum(g * faster, axis=1) > 0)
        step = jnp.where(use[:, None], faster, chord)
        # The logits move by X step: formed from the step itself, not as the difference of two
        # logit vectors, whose rounding would swamp a step near the optimum.
        dz = dot(step, X.T)
        descent = jnp.sum(g * step, axis=1)  # -phi'(0) along -step

        useful = jnp.isfinite(descent) & (descent > 0)  # float32 may spoil a near-singular solve

        def trial(k, h):
            """The gradient of members ``k`` (every member where None) at step lengths ``h``,
            whether to accept it (past the line's minimum by at most a quarter of the descent,
            phi'(h) = -g(h) . step, or level with it to float32 rounding: near the optimum every
            slope is rounding), and phi'(h)."""
            pick = _rows(k)
            step_k, act, P_k = pick(step), pick(active), pick(P)
            moved = pick(theta) - h[:, None] * step_k
            r = pick(S) * (jax.nn.sigmoid(pick(z) - h[:, None] * pick(dz)) - y)
            g = dot(r, X) + P_k * moved
            slope = -jnp.sum(g * step_k, axis=1)
            past = slope <= 0.25 * pick(descent)
            # the sum of the slope's terms' sizes, a third product: made only for the active
            # members whose step is not accepted without it
            need = act & jnp.isfinite(slope) & ~past

            def size(j):
                at = _rows(j)
                terms = dot(jnp.abs(at(r)), X_abs) + jnp.abs(at(P_k) * at(moved))
                return jnp.sum(terms * jnp.abs(at(step_k)), axis=1)

            scale = _in_chunks(need, size, chunk if k is None else need.shape[0])
            flat = jnp.abs(slope) <= ROUNDING * scale
            ok = ~act | (jnp.isfinite(slope) & (past | flat))
            return g, ok, slope

        def line(lc):
            # a secant step back for the members not yet accepted (in a large batch, at most
            # `chunk` of them at a time)
            h, g, ok, slope, tries = lc
            want = ~ok & useful & (tries < LINE_TRIALS)
            k = None if chunk >= K else _chosen(want, chunk)
            at = _rows(k)
            put = (lambda a, v: v) if k is None else (lambda a, v: a.at[k].set(v))
            take = at(want)
            shrink = jnp.clip(at(descent) / (at(descent) + at(slope)), 0.1, 0.9)  # secant's root
            h_k = jnp.where(take, at(h) * jnp.where(jnp.isfinite(shrink), shrink, 0.1), at(h))
            g_k, ok_k, slope_k = trial(k, h_k)
            g_k, slope_k = jnp.where(take[:, None], g_k, at(g)), jnp.where(take, slope_k, at(slope))
            return (put(h, h_k), put(g, g_k), put(ok, at(ok) | (take & ok_k)), put(slope, slope_k),
                    put(tries, at(tries) + take))  # fmt: skip

        h = jnp.ones(K, X.dtype)
        h, g_new, ok, _, _ = jax.lax.while_loop(
            lambda lc: jnp.any(~lc[2] & useful & (lc[4] < LINE_TRIALS)),
            line,
            (h, *trial(None, h), jnp.zeros(K, jnp.int32)),
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
            "chord": chord,
            "before": c["theta"],
            "same": active & ok,
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
        # Every member is factored in the first step (redo): factored before the loop, the
        # Cholesky would run beside the first products, and on a CPU each slows the other.
        "F": jnp.zeros_like(H),
        "active": jnp.max(jnp.abs(g), axis=1) > tol,
        "damping": jnp.full(K, FLOOR, X.dtype),
        "redo": jnp.ones(K, bool),
        "count": jnp.zeros(K, jnp.int32),
        "chord": jnp.zeros_like(theta),
        "before": theta,
        "same": jnp.zeros(K, bool),
        "ratio": jnp.zeros(K, X.dtype),
        "iters": jnp.zeros(K, jnp.int32),
        "it": jnp.int32(0),
    }
    c = jax.lax.while_loop(cond, body, carry)
    z = c["z"]  # the gradient the members stopped on is the one they report
    value = None
    if objective:
        value = jnp.sum(S * (jnp.logaddexp(0.0, z) - y * z), axis=1)
        value += 0.5 * jnp.sum(P * c["theta"] ** 2, axis=1)
    return Solved(c["theta"], c["g"], c["H"], value, c["iters"], c["count"])


def _rows(k: Array | None):
    """A function taking an array's rows ``k`` (all of them where ``k`` is None)."""
    return (lambda a: a) if k is None else (lambda a: a[k])


def _chosen(want: Array, m: int) -> Array:
    """``m`` indices of members, those where ``want`` first (in order), then others."""
    if m >= want.shape[0]:
        return jnp.arange(want.shape[0])
    return jax.lax.top_k(want.astype(jnp.float32), m)[1]


def _in_chunks(want: Array, f, m: int) -> Array:
    """``f(k)`` of the members ``k`` where ``want`` (0 elsewhere), made ``m`` members at a time
    and only while some are left: ``f`` maps ``[m]`` indices to ``[m]`` values, or ``None`` to
    the values of all members where ``m`` covers them all."""
    n = want.shape[0]
    if m >= n:
        return jax.lax.cond(jnp.any(want), lambda: jnp.where(want, f(None), 0.0),
                            lambda: jnp.zeros(n, jnp.float32))  # fmt: skip

    def body(c):
        left, out = c
        k = _chosen(left, m)
        take = left[k]
        return left.at[k].set(False), out.at[k].set(jnp.where(take, f(k), out[k]))

    return jax.lax.while_loop(lambda c: jnp.any(c[0]), body, (want, jnp.zeros(n, jnp.float32)))[1]


# Newton programs being compiled in threads (compile_ahead), joined before the next Newton call
# so that no program is compiled twice, and the batches asked for already in this process (a
# forked child starts with neither: its parent's threads do not run in it).
_AHEAD: list[threading.Thread] = []
_ASKED: set[tuple] = set()
_AHEAD_LOCK = threading.Lock()
_log = logging.getLogger(__name__)


def _forget_ahead() -> None:
    global _AHEAD_LOCK
    _AHEAD_LOCK = threading.Lock()
    _AHEAD.clear()
    _ASKED.clear()


os.register_at_fork(after_in_child=_forget_ahead)


def compile_ahead(design: Design, members: int, objective: bool = True) -> None:
    """Start compiling, in a thread, the binary Newton program for batches of ``members`` on a
    design of the shapes ``design`` (a :class:`Design` of ``jax.ShapeDtypeStruct``, as
    ``Design.of(x, shapes_known=...)`` gives them; ``members``: :func:`path_batch` for a path),
    for fits that sum their objectives or not (``objective``, as :func:`fit_weighted_logistic`).

    A first fit spends its start on the host (the design's layout and table, the sample
    weights, mostly one core), and XLA compiles the Newton program on the other meanwhile. The
    next Newton call waits for the thread, so the program is compiled once, and runs the
    program the thread made. Once per process and shape; where the thread's compile fails, it
    is logged (``logging``, this module's logger) and the fit compiles the program itself (and
    raises there). The thread is not a daemon: a process that ends while it compiles waits for
    it, where ending under a running XLA compile aborted the interpreter.

    Raises:
      ValueError: for ``members`` that is not a positive integer."""
    V.check_count("members", members)
    N, d1 = design.X.shape

    def floats(*shape: int) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, np.float32)

    scalar = jax.ShapeDtypeStruct((), np.int32)
    args = (design, floats(N), floats(members, N), floats(members, d1), floats(members, d1),
            floats(members, d1, d1), floats(), scalar, scalar, scalar)  # fmt: skip
    leaves, tree = jax.tree.flatten(args)
    key = (str(tree), objective, *((a.shape, str(a.dtype)) for a in leaves))
    with _AHEAD_LOCK:
        if key in _ASKED:
            return
        _ASKED.add(key)
        thread = threading.Thread(target=_compiled_or_logged, args=(objective, *args),
                                  name="iml-compile-ahead")  # fmt: skip
        thread.start()
        _AHEAD.append(thread)


def _compiled_or_logged(objective: bool, *args: object) -> None:
    try:
        _newton.lower(*args, objective=objective).compile()
    except Exception:  # the fit's own call compiles the program, and raises there
        _log.warning("compiling the Newton program ahead failed; the fit compiles it itself",
                     exc_info=True)  # fmt: skip


def _join_ahead() -> None:
    """Wait for the Newton programs being compiled ahead (:func:`compile_ahead`)."""
    with _AHEAD_LOCK:
        threads = list(_AHEAD)
        _AHEAD.clear()
    for thread in threads:
        thread.join()


def intercept_optima(s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The optimum of an intercept alone for each member of ``s [K, N]`` (weights; ``y [N]``
    labels in ``{0, 1}``): ``logit`` of its weighted share of positives, 0 where a member has
    weight on one class only; ``[K]``, on the host. Each member's sums are NumPy's pairwise sums
    of its own row, so that its start does not depend on the members beside it; they are taken
    a few members at a time (the products are as large as the rows)."""
    positives = np.asarray(y) == 1
    negatives = (~positives).astype(s.dtype)
    positives = positives.astype(s.dtype)
    positive, negative = np.empty(len(s)), np.empty(len(s))
    for lo in range(0, len(s), 32):
        part = s[lo : lo + 32]
        positive[lo : lo + 32] = np.sum(part * positives, axis=-1)
        negative[lo : lo + 32] = np.sum(part * negatives, axis=-1)
    ok = (positive > 0) & (negative > 0)
    return np.where(ok, np.log(np.where(ok, positive, 1.0) / np.where(ok, negative, 1.0)), 0.0)


class Members:
    """Solves batches of members on one design: their weights ``S [K, N]`` on the device, the
    rest (penalties ``[K, d1]``, starts, Hessians and results) small enough to keep on the host.
    A batch is split so that no ``[members, rows]`` array exceeds ``limit`` floats; its members'
    objectives are summed only with ``objective``."""

    def __init__(
        self,
        design: Design,
        y: ArrayLike,
        tol: float,
        max_iter: int,
        limit: int,
        objective: bool = True,
    ):
        self.design, self.tol, self.max_iter = design, np.float32(tol), max_iter
        self.y, self.labels = to_device(y, np.float32), np.asarray(y)
        self.size = max(1, limit // design.X.shape[0])
        self.objective = objective

    def cold_start(self, s: np.ndarray) -> np.ndarray:
        """Starts ``[K, d1]`` of members of weights ``s [K, N]`` (on the host): no coefficients,
        and the optimum of an intercept alone (:func:`intercept_optima`)."""
        theta = np.zeros((len(s), self.design.X.shape[1]), np.float32)
        theta[:, -1] = intercept_optima(s, self.labels)
        return theta

    def solve_cold(self, S: Array, P: np.ndarray, s: np.ndarray) -> Solved:
        """Members ``S`` (their weights ``s`` on the host) by Newton's method (a new Hessian
        every step) from the optimum of an intercept alone."""
        return self.solve(S, P, self.cold_start(s), None, self.max_iter)

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
            solved = self._steps(S[part] if K > self.size else S, P[part], theta[part], H[part],
                                 self.max_iter, renew_first)  # fmt: skip
            parts.append(solved)
        return parts[0] if len(parts) == 1 else jax.tree.map(lambda *a: np.concatenate(a), *parts)

    def _steps(
        self,
        S: Array,
        P: np.ndarray,
        theta: np.ndarray,
        H: np.ndarray,
        max_iter: int,
        renew_first: int,
    ) -> Solved:
        """One batch's Newton steps. A batch's steps cost the same whether few or all of its
        members are still active, so once no more than one in :data:`_STRAGGLERS` is, those
        go on in a batch of their own (of a power of two, so that few sizes are compiled),
        from where they are with their Hessians, until done."""
        K = theta.shape[0]
        until = K // _STRAGGLERS if K >= _STRAGGLERS * _FEWEST else 0
        _join_ahead()
        solved = _newton(self.design, self.y, S, to_device(P, np.float32),
                         to_device(theta, np.float32), to_device(H, np.float32), self.tol,
                         np.int32(max_iter), np.int32(renew_first), np.int32(until),
                         objective=self.objective)  # fmt: skip
        solved = jax.tree.map(np.asarray, solved)
        done = int(solved.iterations.max())
        # The members active at the last step: above tol, stepped every time (a stalled member
        # stops stepping), with steps left.
        norm = np.max(np.abs(solved.grad), axis=1)
        left = np.flatnonzero(
            (norm > float(self.tol)) & (solved.iterations == done) & (done < max_iter)
        )
        if until == 0 or len(left) == 0:
            return solved
        size = max(_FEWEST, 1 << (len(left) - 1).bit_length())
        idx = np.resize(left, size)  # padded with repeats, whose results are dropped
        rest = self._steps(
            _members_of(S, to_device(idx, np.int32)),
            P[idx],
            solved.theta[idx],
            solved.hessian[idx],
            max_iter - done,
            max(0, renew_first - done),
        )
        rest = jax.tree.map(lambda a: a[: len(left)], rest)
        out = {k: None if v is None else v.copy() for k, v in solved._asdict().items()}
        for k in ("theta", "grad", "hessian", "objective"):
            if out[k] is not None:
                out[k][left] = getattr(rest, k)
        out["iterations"][left] += rest.iterations
        out["hessians"][left] += rest.hessians
        return Solved(**out)


# ----------------------------------------------------------------------------------------------
# A path of class weights
# ----------------------------------------------------------------------------------------------


@jax.jit
def _members_of(S: Array, rows: Array) -> Array:
    """The weights ``S [K, N]`` of the members ``rows``: ``[len(rows), N]``."""
    return S[rows]


def _segments(n_steps: int) -> int:
    """How many segments a path of ``n_steps`` steps is cut into (see the module)."""
    return max(1, n_steps // _SEGMENT)


def path_batch(n_steps: int, n_members: int, n_rows: int) -> int:
    """The members of a path's first batch of Newton steps (:func:`fit_weighted_logistic` with
    ``path``, ``chunk`` left to its default): as many steps as the path has segments, each of
    ``n_members`` members, up to the most that a batch of ``[members, n_rows]`` arrays holds.
    For :func:`compile_ahead`.

    Raises:
      ValueError: for a count that is not a positive integer."""
    for name, count in (("n_steps", n_steps), ("n_members", n_members), ("n_rows", n_rows)):
        V.check_count(name, count)
    return min(_segments(n_steps) * n_members, max(1, _BATCH_FLOATS // n_rows))


def _solve_path(members: Members, s: np.ndarray, P: np.ndarray, offsets: np.ndarray) -> Solved:
    """Steps of a path, ``M`` members each: their weights ``s [Q M, N]`` (on the host, step by
    step; each batch's rows are copied to the device) and ``P [Q, M, d1]``, by anchors (see the
    module); results on axes ``[Q, M]``."""
    Q, M = P.shape[:2]
    order = np.argsort(offsets, kind="stable")  # position -> step
    at = offsets[order]
    solved: dict[int, Solved] = {}

    # Segments of the path, each solved from its middle step outwards: the middles from cold
    # starts, then their anchors a stride at a time in both directions, the segments side by
    # side in each batch.
    segments = np.array_split(np.arange(Q), _segments(Q))
    middles = [int(seg[len(seg) // 2]) for seg in segments]
    group = len(middles)

    def solve(positions: list[int], starts: list[np.ndarray] | None, hessians, renew_first: int):
        # In batches of as many steps as there are middles, the last one filled up with repeats
        # of its last step (their results dropped): every batch of the path has one shape, so
        # one Newton program serves them all.
        for lo in range(0, len(positions), group):
            part = list(range(lo, min(lo + group, len(positions))))
            take = part + [part[-1]] * (group - len(part))
            steps = order[[positions[i] for i in take]]
            rows = (steps[:, None] * M + np.arange(M)).ravel()
            rows_s = s[rows]
            weights = to_device(rows_s)
            penalties = P[steps].reshape(-1, P.shape[-1])
            if starts is None:
                result = members.solve_cold(weights, penalties, rows_s)
            else:
                H = None if hessians is None else np.concatenate([hessians[i] for i in take])
                first = np.concatenate([starts[i] for i in take])
                result = members.solve(weights, penalties, first, H, renew_first)
            for j, i in enumerate(part):
                solved[positions[i]] = jax.tree.map(lambda a, j=j: a[j * M : (j + 1) * M], result)

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
    start: tuple[ArrayLike, ...] | None = None,
    keep_curvature: bool = False,
    objective: bool = True,
) -> LogisticFit:
    """Minimise every member's weighted log loss plus its ridge exactly (see the module).

    Member ``k`` minimises ``sum_i s_ki l(y_i, x_i . w + b) + (l2 / 2) sum_j c_kj w_j^2`` with
    ``s`` its ``sample_weights`` and ``c`` its ``penalty_scale`` (per-feature multipliers: e.g.
    a training fold's variances, which makes the penalty that of standardised features, or each
    member's total weight). A member stops when the largest entry of its gradient is at most
    ``tol``, or after ``max_iter`` Newton steps.

    Members start from the optimum of an intercept alone (the logit of the weighted share of
    positives), unless ``path`` makes the first axis of ``sample_weights`` a solution path solved
    from anchors (see the module; for a grid of betas, ``path = logit(beta)``), or ``start``
    gives each member's starting point (e.g. its fit at a looser ``tol``), with that fit's
    ``curvature`` where it was kept: then the steps start from it, and renew it only where a
    member converges slowly, in place of a new Hessian for every member. Neither changes what a
    member solves, only where it starts and how many Hessians it needs.

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
      start: ``(coef [..., d], intercept [...])``, finite, on the weights' leading axes: where
        each member starts (with an ``l2`` grid, at its largest level); not with ``path``. A
        third entry, ``curvature [..., d + 1, d + 1]`` (finite), is the data's curvature
        there, as an earlier fit's :attr:`LogisticFit.curvature` (its factor symmetrises it,
        ``(C + C^T) / 2``, as every Hessian's).
      keep_curvature: keep each member's last data curvature in the fit's ``curvature``
        (``[..., d + 1, d + 1]`` floats a member and level), to start a later fit from.
      objective: sum each member's objective over its rows (the fit's ``objective``; without
        it, that is None and the fit saves a pass of transcendentals over every member's rows).

    Returns:
      A :class:`LogisticFit` whose arrays lead with the grid's axis (if ``l2`` is a grid) and the
      weights' leading axes.
    """
    x, y, s, levels = checked_inputs(features, labels, sample_weights, l2, max_iter, tol)
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    if chunk is not None:
        V.check_count("chunk", chunk)
    offsets = None
    if path is not None:
        if s.ndim < 2:
            raise ValueError(f"sample_weights must be [P, ..., N] with a path; got shape {s.shape}")
        offsets = np.asarray(path, np.float64)
        V.check_shape("path", offsets, (s.shape[0],))
        V.check_finite("path", offsets)
    lead, n = s.shape[:-1], s.shape[-1]
    theta = curvature = None
    if start is not None:
        if path is not None:
            raise ValueError("start and path both say where members start; give one")
        if len(start) not in (2, 3):
            raise ValueError(
                f"start must be (coef, intercept) or (coef, intercept, curvature); got {len(start)}"
                " entries"
            )
        coef, intercept = (np.asarray(a, np.float32) for a in start[:2])
        V.check_shape("start coef", coef, (*lead, x.shape[1]))
        V.check_shape("start intercept", intercept, lead)
        theta = np.concatenate([coef, intercept[..., None]], axis=-1)
        V.check_finite("start", theta)
        theta = theta.reshape(-1, x.shape[1] + 1)
        if len(start) == 3:
            curvature = _checked_curvature(start[2], lead, x.shape[1] + 1)
    scale = ridge_multipliers(penalty_scale, lead, x.shape[1]).astype(np.float32)
    design = Design.of(x) if design is None else check_design(design, x)
    limit = _BATCH_FLOATS if chunk is None else chunk * n
    members = Members(design, y, tol, max_iter, limit, objective)
    flat = s.reshape(-1, n)
    fits = _fit_levels(members, flat, lead, scale, levels, offsets, theta, curvature)
    # The last renewals' curvatures are copied into one array where asked, each level's own
    # released as it is copied.
    kept = np.empty((len(fits), *fits[0].hessian.shape), np.float32) if keep_curvature else None
    for g, fit in enumerate(fits):
        if kept is not None:
            kept[g] = fit.hessian
        fits[g] = fit._replace(hessian=None)
    stacked = jax.tree.map(lambda *a: np.stack(a), *fits)
    return LogisticFit.of(stacked._replace(hessian=kept), tol, l2)


def _checked_curvature(curvature: ArrayLike, lead: tuple[int, ...], d1: int) -> np.ndarray:
    """A start's ``curvature [*lead, d1, d1]`` (finite), as ``[K, d1, d1]`` float32."""
    c = np.asarray(curvature, np.float32)
    V.check_shape("start curvature", c, (*lead, d1, d1))
    V.check_finite("start curvature", c)
    return c.reshape(-1, d1, d1)


def _fit_levels(
    members: Members,
    s: np.ndarray,
    lead: tuple[int, ...],
    scale: np.ndarray,
    levels: np.ndarray,
    offsets: np.ndarray | None,
    start: np.ndarray | None = None,
    curvature: np.ndarray | None = None,
) -> list[Solved]:
    """Every level of the penalty grid (in the grid's order), solved from the largest down (the
    largest from ``start [K, d1]`` where given, with the data's ``curvature [K, d1, d1]`` there
    where given, else from the optima of intercepts alone), for the weights
    ``s [K, N]`` (on the host) of members on the axes ``lead``; the results keep those axes. A
    path's first level copies each batch's weights to the device, the others copy all at once."""
    d1 = scale.shape[-1]
    flat_scale = scale.reshape(-1, d1)
    S = None
    fits: dict[int, Solved] = {}
    previous = None
    for g in np.argsort(-levels, kind="stable"):
        level = np.float32(levels[g])
        if S is None and (previous is not None or offsets is None):
            S = to_device(s)
        if previous is None and offsets is not None:
            penalties = level * scale.reshape(lead[0], -1, d1)
            solved = _solve_path(members, s, penalties, offsets)
            solved = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), solved)
        elif previous is None:
            # from a given start, near its optimum: one Hessian and then its chord steps, or
            # the chord steps of the curvature given
            first, renew = (
                (members.cold_start(s), members.max_iter) if start is None else (start, 1)
            )
            if curvature is not None:
                renew = _LEVEL_RENEWALS
            solved = members.solve(S, level * flat_scale, first, curvature, renew)
        else:
            solved = members.solve(
                S, level * flat_scale, previous.theta, previous.hessian, _LEVEL_RENEWALS
            )
        previous = solved
        fits[int(g)] = solved
    return [
        jax.tree.map(lambda a: a.reshape(*lead, *a.shape[1:]), fits[g]) for g in range(len(levels))
    ]
