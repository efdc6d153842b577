"""Exact fits of convex members: weighted logistic regression by Newton's method, all at once.

Early-stopped minibatch Adam stops where the validation loss stops falling, and when the weighted
loss is nearly flat (a small ``beta`` on a rare class) that can be far from the optimum: the
scores are then not loss-calibrated (Definition 2) and no correction can make them calibrated.
For a convex model the optimum is reachable: this module runs Newton's method on the full batch,
for every member at once, until the gradient's largest entry is below a tolerance.

Member ``k`` minimises

    f_k(w, b) = sum_i s_ki l(y_i, x_i . w + b) + (l2 / 2) ||w||^2,

with ``l`` the log loss on logits and ``s_ki >= 0`` its sample weights: for the beta-weighted
cross-entropy of eq. ``b-loss-bin`` over a member's training rows, ``s_ki = beta_k`` for a
positive and ``1 - beta_k`` for a negative training row, ``0`` elsewhere, divided by the number
of training rows (:func:`beta_weighted_sample_weights`). Members share the design ``x``, and
with it the table of products of feature pairs (``N x (d+1)(d+2)/2`` floats, made once where it
takes at most 2 GiB): the ``[d+1, d+1]`` Hessians of a chunk of members are then one matrix
product with that table, and without it are formed from the design (memory ``chunk x N x d``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.recalibration import logistic_newton

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["LogisticFit", "beta_weighted_sample_weights", "fit_weighted_logistic"]


class LogisticFit(NamedTuple):
    """Fitted members (a pytree of arrays with a leading member axis ``K``).

    Attributes:
      coef: ``[K, d]`` weights.
      intercept: ``[K]`` biases.
      objective: ``[K]`` the minimised ``f_k``.
      grad_norm: ``[K]`` the largest absolute entry of the gradient at the fit.
      iterations: ``[K]`` Newton steps taken.
      converged: ``[K]`` whether ``grad_norm <= tol``.
    """

    coef: Array
    intercept: Array
    objective: Array
    grad_norm: Array
    iterations: Array
    converged: Array


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
    per_class = np.where(y[None, :] == 1, b[:, None], 1.0 - b[:, None])  # [B, N]
    return (per_class[:, None, :] * mask[None, :, :] / count[None, :, None]).astype(np.float32)


def fit_weighted_logistic(
    features: ArrayLike,
    labels: ArrayLike,
    sample_weights: ArrayLike,
    *,
    l2: float = 0.0,
    tol: float = 1e-6,
    max_iter: int = 50,
    chunk: int = 16,
) -> LogisticFit:
    """Minimise every member's weighted log loss exactly, by Newton's method (see the module).

    Each step is the minimum-norm solution of the Newton system (eigenvalues below ``1e-6`` of the
    largest dropped, so a feature no training row uses, or one-hot columns that sum to the
    intercept's, leave the step finite) and backtracks, halving, until the objective does not
    increase. A member stops when the largest entry of its gradient is at most
    ``tol`` or after ``max_iter`` steps. Without ``l2``, separable data has no minimiser: the
    weights grow until the gradient of the vanishing loss falls below ``tol``, which is reported
    as converged; give ``l2 > 0`` where classes may separate.

    Args:
      features: ``[N, d]`` design shared by all members.
      labels: ``[N]`` labels in ``{0, 1}``.
      sample_weights: ``[K, N]`` non-negative weights per member (or ``[..., N]``: the leading
        axes are flattened and restored).
      l2: ridge penalty on the weights (not the intercept).
      tol: gradient tolerance (largest absolute entry).
      max_iter: most Newton steps.
      chunk: members whose Hessians are formed at once (memory ``chunk x N x d``).

    Returns:
      A :class:`LogisticFit` whose arrays lead with the weights' leading axes.
    """
    x = np.asarray(features, np.float32)
    y = np.asarray(labels)
    s = np.asarray(sample_weights, np.float32)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"features must be [N, d] and labels [N]; got {x.shape} and {y.shape}")
    if s.ndim < 1 or s.shape[-1] != x.shape[0]:
        raise ValueError(f"sample_weights must be [..., {x.shape[0]}]; got shape {s.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"features must be finite; {int((~np.isfinite(x)).sum())} entries are not")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    if not np.isfinite(s).all() or (s < 0).any():
        raise ValueError("sample_weights must be finite and non-negative")
    if not (np.isfinite(l2) and l2 >= 0):
        raise ValueError(f"l2 must be non-negative, got {l2!r}")
    for name, value in (("max_iter", max_iter), ("chunk", chunk)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    lead = s.shape[:-1]
    flat = s.reshape(-1, x.shape[0])
    design = np.concatenate([x, np.ones((x.shape[0], 1), np.float32)], axis=1)
    fit = _fit_members(
        jnp.asarray(design),
        jnp.asarray(y, jnp.float32),
        jnp.asarray(flat),
        jnp.float32(l2),
        jnp.float32(tol),
        max_iter,
        min(chunk, flat.shape[0]),
        design.shape[0] * design.shape[1] * (design.shape[1] + 1) // 2 * 4 <= _PAIR_BYTES,
    )
    return jax.tree.map(lambda a: a.reshape(lead + a.shape[1:]), fit)


# Products of feature pairs take N * d(d+1)/2 floats; above this many bytes the Hessians are
# formed from the design itself instead (more arithmetic, no extra memory).
_PAIR_BYTES = 2**31


@functools.partial(jax.jit, static_argnums=(5, 6, 7))
def _fit_members(
    X: Array,
    y: Array,
    S: Array,
    l2: Array,
    tol: Array,
    max_iter: int,
    chunk: int,
    use_pairs: bool,
) -> LogisticFit:
    d1 = X.shape[1]
    penalty = l2 * jnp.ones(d1, X.dtype).at[-1].set(0.0)  # the intercept is not penalised
    rows, cols = np.triu_indices(d1)
    # Z[i] holds x_i x_i^T's upper triangle: each member's Hessian is then one row-vector times
    # Z, and a chunk of members is one matrix product.
    Z = X[:, rows] * X[:, cols] if use_pairs else None

    def hessian(v: Array) -> Array:
        products = jnp.dot(v, Z, precision=jax.lax.Precision.HIGHEST)
        upper = jnp.zeros((d1, d1), X.dtype).at[rows, cols].set(products)
        return upper + upper.T - jnp.diag(jnp.diagonal(upper))

    def solve_one(s: Array) -> LogisticFit:
        fit = logistic_newton(
            X, y, s, jnp.zeros(d1, X.dtype), max_iter=max_iter, tol=tol, penalty=penalty,
            hessian=hessian if use_pairs else None,
        )  # fmt: skip
        norm = jnp.max(jnp.abs(fit.grad))
        return LogisticFit(
            coef=fit.theta[:-1],
            intercept=fit.theta[-1],
            objective=fit.objective,
            grad_norm=norm,
            iterations=fit.iterations,
            converged=norm <= tol,
        )

    return jax.lax.map(solve_one, S, batch_size=chunk)
