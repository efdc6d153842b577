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

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from iml import _validation as V
from iml.training.exact_binary import Members
from iml.training.exact_design import Design, Solved, check_design
from iml.training.exact_inputs import LogisticFit, checked_grid, checked_inputs, ridge_multipliers
from iml.training.exact_multinomial import fit_weighted_softmax

Array = jax.Array

__all__ = [
    "Design",
    "LogisticFit",
    "beta_weighted_sample_weights",
    "fit_weighted_logistic",
    "fit_weighted_softmax",
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


# ----------------------------------------------------------------------------------------------
# A path of class weights
# ----------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnums=2)
def _members_of(S: Array, steps: Array, shape: tuple[int, int]) -> Array:
    """The weights of the path's ``steps`` (``S [Q, M, N]``), as ``[len(steps) M, N]``."""
    return S[steps].reshape(shape)


def _solve_path(members: Members, S: Array, P: np.ndarray, offsets: np.ndarray) -> Solved:
    """Steps ``S [Q, M, N]`` (on the device) of a path, ``P [Q, M, d1]``, by anchors (see the
    module); results on axes ``[Q, M]``."""
    Q, M, N = S.shape
    order = np.argsort(offsets, kind="stable")  # position -> step
    at = offsets[order]
    solved: dict[int, Solved] = {}

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
    x, y, s = checked_inputs(features, labels, sample_weights)
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    levels = checked_grid("l2", l2)
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
    scale = ridge_multipliers(penalty_scale, lead, x.shape[1]).astype(np.float32)
    design = Design.of(x) if design is None else check_design(design, x)
    limit = _BATCH_FLOATS if chunk is None else chunk * n
    members = Members(design, y, tol, max_iter, limit)
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


def _fit_levels(
    members: Members,
    s: Array,
    scale: np.ndarray,
    levels: np.ndarray,
    offsets: np.ndarray | None,
) -> list[Solved]:
    """Every level of the penalty grid (in the grid's order), solved from the largest down; the
    results keep the weights' leading axes."""
    lead, n = s.shape[:-1], s.shape[-1]
    d1 = scale.shape[-1]
    flat_s, flat_scale = s.reshape(-1, n), scale.reshape(-1, d1)
    fits: dict[int, Solved] = {}
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
