"""Optimal scoring rules and their inverses: the loss-corrected confidence score.

The paper models a trained classifier as a Bayesian decision-maker that reports the score
minimising its expected loss under its posterior (eq. ``choice``):

    c^L(gamma) = argmin_a  sum_y gamma_y L(a, y).

For class-weighted proper losses the rule has closed forms (Propositions 2 and 3) and inverting
it recovers probabilities from miscalibrated scores (Proposition 4, Corollary 1). For any other
differentiable loss the rule is found here from its first-order condition by automatic
differentiation, and its inverse comes from the loss's gradients (the first-order condition is
linear in the posterior).

Conventions
-----------
* Binary functions take the positive-class score or posterior and broadcast with NumPy rules, so
  a grid of weights against a vector of scores is one call:
  ``loss_corrected_score(scores[None, :], betas[:, None])`` has shape ``[n_beta, n_scores]``.
* Multiclass functions put classes on the last axis; weight matrices are ``B[y, y']`` with rows
  the true class ``y`` and columns the scored class ``y'`` (eq. ``b-loss-multi``).
* Every rule and correction is pure and works under ``jax.jit``, ``jax.vmap`` and ``jax.grad``
  (the checkers, :func:`check_first_order_conditions` and :func:`check_invertibility`, are meant
  to be called directly and validate eagerly). Called on concrete arrays, bad input raises
  ``ValueError`` naming the argument; under a transformation, outputs that depend on an invalid
  entry are NaN (never a plausible wrong number).
* Equation labels are the paper's (``choice``, ``b-loss-bin``, ...); in the compiled paper they
  are numbered (5) choice, (6) proper, (7) b-loss-bin, (8) choice-b1, (9) b-loss-multi,
  (10) Proposition 3, (11) invert, (12) loss-c-bin, (13) correct-prior.
* Binary closed forms are accurate to a few ulps in float32 over ``beta`` in ``[1e-6, 1 - 1e-6]``
  and all scores in ``[0, 1]`` (no cancellation: both terms of every denominator are positive).
  The logit forms are exact shifts and keep full precision for scores near 0 and 1.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V

Array = jax.Array
ArrayLike = jax.typing.ArrayLike
Domain = Literal["simplex", "box"]

__all__ = [
    "FirstOrderConditionReport",
    "InvertibilityReport",
    "check_first_order_conditions",
    "check_invertibility",
    "loss_corrected_logit",
    "loss_corrected_score",
    "loss_corrected_score_class_weighted",
    "loss_corrected_score_for_loss",
    "loss_corrected_score_into",
    "loss_corrected_score_multiclass",
    "loss_corrected_score_multiclass_for_loss",
    "optimal_logit",
    "optimal_score",
    "optimal_score_class_weighted",
    "optimal_score_for_loss",
    "optimal_score_multiclass",
    "optimal_score_multiclass_for_loss",
]


def _float(*xs: ArrayLike) -> list[Array]:
    """The arguments as arrays of one floating dtype: theirs if floating, else float32."""
    arrays = [jnp.asarray(x) for x in xs]
    dtype = jnp.result_type(*arrays)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.promote_types(dtype, jnp.float32)
    return [x.astype(dtype) for x in arrays]


def _logit(p: Array) -> Array:
    return jnp.log(p) - jnp.log1p(-p)


# ----------------------------------------------------------------------------------------------
# Binary closed forms (Proposition 2, Corollary 1)
# ----------------------------------------------------------------------------------------------


def _tilt(p: Array, w: Array, w_complement: Array) -> Array:
    """``w p / (w p + (1 - w)(1 - p))`` given ``w`` and ``1 - w`` each to full precision.

    Both terms of the denominator are >= 0, so there is no cancellation; passing ``1 - w``
    separately avoids recomputing ``beta`` as ``1 - (1 - beta)``, which would lose all relative
    precision for small weights.
    """
    num = w * p
    return num / (num + w_complement * (1.0 - p))


def optimal_score(gamma: ArrayLike, beta: ArrayLike) -> Array:
    """Optimal posterior score under the beta-weighted loss, Proposition 2 (eq. ``choice-b1``).

    ``c^beta(gamma) = beta gamma / (1 - beta - gamma + 2 beta gamma)``: the score that minimises
    the expected beta-weighted loss (eq. ``b-loss-bin``) of any differentiable strictly proper
    base loss, given posterior ``gamma``. Symmetric in ``(beta, gamma)``, increasing in
    ``gamma``, the identity at ``beta = 1/2``, and ``c^beta(1/2) = beta``.

    Args:
      gamma: posterior probability of the positive class, in ``[0, 1]``.
      beta: weight of the positive class, in ``(0, 1)``; broadcasts against ``gamma``.

    Returns:
      Optimal scores, of the broadcast shape.
    """
    V.check_unit("gamma", gamma)
    V.check_beta("beta", beta)
    V.check_broadcastable(gamma=gamma, beta=beta)
    gamma, beta = _float(gamma, beta)
    gamma = V.nan_unless((gamma >= 0) & (gamma <= 1), gamma)
    beta = V.nan_unless((beta > 0) & (beta < 1), beta)
    return _tilt(gamma, beta, 1.0 - beta)


def loss_corrected_score(a: ArrayLike, beta: ArrayLike) -> Array:
    """The loss-corrected confidence score for the beta-weighted loss, Corollary 1.

    Inverts :func:`optimal_score` (eq. ``loss-c-bin``, also eq. ``transformation``):

        (c^beta)^{-1}(a) = (1 - beta) a / (beta + (1 - 2 beta) a).

    Equal to the undersampling correction ``d a / (1 + (d - 1) a)`` with
    ``d = (1 - beta) / beta`` (eq. ``correct-prior``; Dal Pozzolo et al. 2015). Under loss
    calibration the result is the probability of the positive class given the score
    (Proposition 4).

    Args:
      a: positive-class scores of a model trained with weight ``beta``, in ``[0, 1]``.
      beta: weight of the positive class in training, in ``(0, 1)``; broadcasts against ``a``.

    Returns:
      Corrected scores (probabilities), of the broadcast shape.
    """
    V.check_unit("a", a)
    V.check_beta("beta", beta)
    V.check_broadcastable(a=a, beta=beta)
    a, beta = _float(a, beta)
    a = V.nan_unless((a >= 0) & (a <= 1), a)
    beta = V.nan_unless((beta > 0) & (beta < 1), beta)
    # The inverse of tilting by beta is tilting by 1 - beta: odds are multiplied by the inverse.
    return _tilt(a, 1.0 - beta, beta)


@functools.partial(jax.jit, donate_argnums=0)
def _write_loss_corrected(out: Array, a: Array, beta: Array) -> Array:
    a = V.nan_unless((a >= 0) & (a <= 1), a)
    beta = V.nan_unless((beta > 0) & (beta < 1), beta)
    return out.at[...].set(_tilt(a, 1.0 - beta, beta).astype(out.dtype))


def loss_corrected_score_into(out: Array, a: ArrayLike, beta: ArrayLike) -> Array:
    """:func:`loss_corrected_score` written into a reused buffer, for large sweeps.

    ``out`` is donated: its memory receives the result and the returned array aliases it, so a
    loop over score sets reuses one ``[n_beta, n_scores]`` buffer instead of allocating (and
    page-faulting) a fresh one per call -- at the paper's scale (1,000 betas x 112,120 scores)
    this runs at the speed of a plain memory copy. ``out`` must not be used after the call; use
    the return value.

    Args:
      out: a floating array with the broadcast shape of ``a`` and ``beta``.
      a: scores in ``[0, 1]``, e.g. ``scores[None, :]``.
      beta: weights in ``(0, 1)``, e.g. ``betas[:, None]``.

    Returns:
      The corrected scores, in ``out``'s memory and dtype.
    """
    V.check_unit("a", a)
    V.check_beta("beta", beta)
    shape = V.check_broadcastable(a=a, beta=beta)
    if tuple(out.shape) != shape or not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(
            f"out must be a floating array of the broadcast shape {shape}; "
            f"got {out.dtype} {tuple(out.shape)}"
        )
    a, beta = _float(a, beta)
    return _write_loss_corrected(out, a, beta)


def optimal_logit(gamma_logit: ArrayLike, beta: ArrayLike) -> Array:
    """Proposition 2 (eq. ``choice-b1``) in logits: ``logit c = logit gamma + logit beta``.

    The odds of the optimal score are the posterior odds times ``beta / (1 - beta)``.
    """
    V.check_beta("beta", beta)
    V.check_broadcastable(gamma_logit=gamma_logit, beta=beta)
    z, beta = _float(gamma_logit, beta)
    beta = V.nan_unless((beta > 0) & (beta < 1), beta)
    return z + _logit(beta)


def loss_corrected_logit(logits: ArrayLike, beta: ArrayLike) -> Array:
    """Corollary 1 (eq. ``loss-c-bin``) in logits: ``logit g^beta(a) = logit a - logit beta``.

    An exact shift, so it keeps full precision where scores are within float precision of 0 or
    1; apply ``jax.nn.sigmoid`` for the corrected probability.
    """
    V.check_beta("beta", beta)
    V.check_broadcastable(logits=logits, beta=beta)
    z, beta = _float(logits, beta)
    beta = V.nan_unless((beta > 0) & (beta < 1), beta)
    return z - _logit(beta)


# ----------------------------------------------------------------------------------------------
# Multiclass: Proposition 3's rule and its per-output inverse; the simplex least squares
# ----------------------------------------------------------------------------------------------


def _check_multiclass(name: str, x: ArrayLike, B: ArrayLike) -> None:
    V.check_weight_matrix("B", B)
    n = np.shape(B)[0]
    if np.ndim(x) < 1 or np.shape(x)[-1] != n:
        raise ValueError(
            f"{name} must have the {n} classes of B on its last axis; got shape {np.shape(x)}"
        )


def optimal_score_multiclass(gamma: ArrayLike, B: ArrayLike) -> Array:
    """Optimal posterior scores under the B-weighted loss, Proposition 3.

    ``c_y^B(gamma) = gamma_y B[y, y] / sum_{y'} gamma_{y'} B[y', y]`` for the one-vs-rest
    weighted loss of eq. ``b-loss-multi`` with any smooth strictly proper base loss. The scores
    need not sum to one.

    Args:
      gamma: posteriors ``[..., n]`` on the simplex.
      B: positive weight matrix ``[n, n]``, rows the true class.

    Returns:
      Scores ``[..., n]`` in ``(0, 1)``.
    """
    _check_multiclass("gamma", gamma, B)
    V.check_simplex("gamma", gamma)
    gamma, B = _float(gamma, B)
    ok = jnp.all(gamma >= 0, axis=-1, keepdims=True)
    ok &= jnp.abs(jnp.sum(gamma, axis=-1, keepdims=True) - 1.0) <= 1e-4
    gamma = V.nan_unless(ok, gamma)
    B = V.nan_unless(jnp.all(B > 0), B)
    return gamma * jnp.diagonal(B) / (gamma @ B)


# Up to this many classes the simplex projection compares all pairs of entries instead of
# sorting: n^2 comparisons a row, but several times faster on the CPU than a sort at tens of
# classes, and the projection is most of the time of the generic multiclass correction's
# iterations (:func:`loss_corrected_score_multiclass_for_loss`).
_PAIRWISE_PROJECTION_MAX = 64


def _project_to_simplex(v: Array) -> Array:
    """Euclidean projection of each row of ``v`` onto the probability simplex.

    The projection is ``max(v - theta, 0)`` with the threshold ``theta = max_k (S_k - 1) / C_k``
    over the prefixes of ``v`` sorted in decreasing order, ``S_k`` the sum and ``C_k`` the count
    of the entries at least ``v_k``. Up to :data:`_PAIRWISE_PROJECTION_MAX` classes those come
    from comparing all pairs; above, from a sort.
    """
    n = v.shape[-1]
    if n <= _PAIRWISE_PROJECTION_MAX:
        at_least = (v[..., None, :] >= v[..., :, None]).astype(v.dtype)  # [..., k, j]: v_j >= v_k
        total = jnp.einsum("...kj,...j->...k", at_least, v, precision=jax.lax.Precision.HIGHEST)
        theta = jnp.max((total - 1.0) / jnp.sum(at_least, axis=-1), axis=-1, keepdims=True)
        return jnp.maximum(v - theta, 0.0)
    u = jnp.flip(jnp.sort(v, axis=-1), axis=-1)
    cumulative = jnp.cumsum(u, axis=-1) - 1.0
    k = jnp.arange(1, n + 1, dtype=v.dtype)
    support = jnp.sum(u - cumulative / k > 0, axis=-1, keepdims=True)
    theta = jnp.take_along_axis(cumulative, support - 1, axis=-1) / support
    return jnp.maximum(v - theta, 0.0)


@functools.partial(jax.jit, static_argnums=1)
def _simplex_least_squares(M: Array, num_iters: int = 500) -> Array:
    """``argmin_{gamma in simplex} ||M gamma||^2`` for a batch of matrices ``M [..., m, n]``.

    Starts from the right singular vector of the smallest singular value normalised to sum one
    (the exact answer when ``M`` has a null vector inside the simplex) and refines it by
    accelerated projected gradient (FISTA), which leaves an exact start where it is. The inverse
    of any differentiable multiclass loss (:func:`loss_corrected_score_multiclass_for_loss`),
    whose first-order conditions are linear in ``gamma``.
    """
    n = M.shape[-1]
    _, s, vh = jnp.linalg.svd(M, full_matrices=False)
    v = vh[..., -1, :]
    total = jnp.sum(v, axis=-1, keepdims=True)
    uniform = jnp.full_like(v, 1.0 / n)
    safe = jnp.abs(total) > 1e-6 * jnp.max(jnp.abs(v), axis=-1, keepdims=True)
    start = _project_to_simplex(jnp.where(safe, v / jnp.where(safe, total, 1.0), uniform))
    gram = jnp.swapaxes(M, -1, -2) @ M
    step = 1.0 / (2.0 * jnp.maximum(s[..., :1] ** 2, jnp.finfo(M.dtype).tiny))

    def body(_, carry):
        x, y, t = carry
        grad = 2.0 * jnp.einsum("...ij,...j->...i", gram, y)
        x_new = _project_to_simplex(y - step * grad)
        t_new = (1.0 + jnp.sqrt(1.0 + 4.0 * t * t)) / 2.0
        y_new = x_new + ((t - 1.0) / t_new) * (x_new - x)
        return x_new, y_new, t_new

    t0 = jnp.ones((*M.shape[:-2], 1), M.dtype)
    x, _, _ = jax.lax.fori_loop(0, num_iters, body, (start, start, t0))
    return x


def _column_weights(B: Array) -> tuple[Array, Array, Array, Array]:
    """Per column ``y'`` of ``B``: the diagonal ``B[y', y']``, the off-diagonal entries (the
    diagonal zeroed), whether those are all equal, and the weight to start from: that common
    entry where they are equal (exactly, not an average that may round), else their mean."""
    n = B.shape[-1]
    eye = jnp.eye(n, dtype=bool)
    diagonal = jnp.diagonal(B)
    off = jnp.where(eye, 0.0, B)
    some = B[(jnp.arange(n) + 1) % n, jnp.arange(n)]  # one off-diagonal entry of each column
    equal = jnp.all(eye | (B == some), axis=0)
    start = jnp.where(equal, some, jnp.sum(off, axis=0) / (n - 1))
    return diagonal, off, equal, start


def _negative_weight(gamma: Array, off: Array, equal: Array, start: Array) -> Array:
    """``b_eff(y') = sum_{y != y'} q_y B[y, y']`` with ``q_y = gamma_y / sum_{z != y'} gamma_z``:
    the weight of output ``y'``'s negatives given the other classes' posteriors, each sum over
    non-negative terms (no cancellation). Columns with equal off-diagonal entries give that entry
    whatever ``gamma``; where every other posterior is 0, ``q`` is undefined and the start is
    kept."""
    n = off.shape[-1]
    others = 1.0 - jnp.eye(n, dtype=gamma.dtype)
    highest = jax.lax.Precision.HIGHEST  # no reduced-precision float32 products on accelerators
    num = jnp.einsum("y,yj->j", gamma, off, precision=highest)
    den = jnp.einsum("y,yj->j", gamma, others, precision=highest)
    positive = den > 0
    weight = num / jnp.where(positive, den, 1.0)
    return jnp.where(equal, start, jnp.where(positive, weight, start))


def _inverse_at_weights(a: Array, negative: Array, positive: Array) -> Array:
    """Corollary 1 at ``beta' = positive / (positive + negative)``:
    ``a negative / (a negative + (1 - a) positive)``, both terms non-negative. Equal weights
    make the rule the identity, returned exactly."""
    return jnp.where(negative == positive, a, _tilt(a, negative, positive))


def _rule_at_weights(gamma: Array, negative: Array, positive: Array) -> Array:
    """Proposition 2 at the same ``beta'``: ``gamma positive / (gamma positive + (1 - gamma)
    negative)``; the identity, exactly, for equal weights."""
    return jnp.where(negative == positive, gamma, _tilt(gamma, positive, negative))


def _one_vs_rest_map(gamma: Array, a: Array, B: Array) -> Array:
    """One step of the fixed point: every output's binary inverse at the negatives' weight that
    ``gamma`` implies."""
    diagonal, off, equal, start = _column_weights(B)
    return _inverse_at_weights(a, _negative_weight(gamma, off, equal, start), diagonal)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _one_vs_rest_inverse(a: Array, B: Array, num_iters: int, tol: float) -> Array:
    """The fixed point ``gamma = T(gamma)`` of :func:`_one_vs_rest_map` for one row ``a [n]``.

    Starts from every output's inverse at its column's mean off-diagonal weight (the exact
    answer for columns whose off-diagonal entries are equal) and iterates until no output's
    negative weight moves by more than ``tol`` relative, or ``num_iters`` steps.
    """
    diagonal, off, equal, start = _column_weights(B)
    gamma0 = _inverse_at_weights(a, start, diagonal)

    def cond(carry):
        k, _, moving = carry
        return (k < num_iters) & moving

    def body(carry):
        k, gamma, _ = carry
        weight = _negative_weight(gamma, off, equal, start)
        new = _inverse_at_weights(a, weight, diagonal)
        previous = _negative_weight(new, off, equal, start)
        # NaN input compares False: it stops the loop instead of running it to num_iters.
        moving = jnp.any(jnp.abs(previous - weight) > tol * weight)
        return k + 1, new, moving

    _, gamma, _ = jax.lax.while_loop(cond, body, (0, gamma0, jnp.array(True)))
    return gamma


@_one_vs_rest_inverse.defjvp
def _one_vs_rest_inverse_jvp(num_iters, tol, primals, tangents):
    # Implicit function theorem on gamma = T(gamma, a, B): (I - dT/dgamma) dgamma = dT/d(a, B).
    a, B = primals
    gamma = _one_vs_rest_inverse(a, B, num_iters, tol)
    _, explicit = jax.jvp(lambda u, M: _one_vs_rest_map(gamma, u, M), primals, tangents)
    through = jax.jacfwd(lambda g: _one_vs_rest_map(g, a, B))(gamma)
    n = gamma.shape[-1]
    return gamma, jnp.linalg.solve(jnp.eye(n, dtype=gamma.dtype) - through, explicit)


def loss_corrected_score_multiclass(
    a: ArrayLike,
    B: ArrayLike,
    *,
    return_residual: bool = False,
    renormalise: bool = False,
    num_iters: int = 500,
    tol: float | None = None,
) -> Array | tuple[Array, Array]:
    """Loss-corrected posteriors for the B-weighted one-vs-rest loss: Proposition 4 (eq.
    ``invert``) applied to each output of the rule of Proposition 3.

    A model trained with eq. ``b-loss-multi`` has one sigmoid output per class, and output
    ``y'`` solves its own binary problem: positives (class ``y'``) weighted ``B[y', y']``,
    negatives of class ``y`` weighted ``B[y, y']``. Given the other classes' posteriors
    normalised among themselves, ``q_y = gamma_y / sum_{z != y'} gamma_z``, its negatives weigh
    ``b_eff(y') = sum_{y != y'} q_y B[y, y']`` and the output follows the binary rule of
    Proposition 2 at ``beta' = B[y', y'] / (B[y', y'] + b_eff)`` -- on the simplex, exactly
    Proposition 3's ``c_{y'}(gamma) = gamma_{y'} B[y', y'] / sum_y gamma_y B[y, y']``. Each
    output is inverted by Corollary 1 at its ``beta'``:

        gamma_{y'} = a_{y'} b_eff / (a_{y'} b_eff + (1 - a_{y'}) B[y', y']).

    Where column ``y'`` has equal off-diagonal entries, ``b_eff`` is that entry whatever ``q``
    and the coordinate is exact in closed form (for ``B`` all ones every rule is the identity
    and ``a`` comes back unchanged). Otherwise the outputs are coupled through ``q`` and the
    result is the fixed point of ``gamma -> q -> b_eff -> gamma``, iterated from each column's
    mean off-diagonal weight. A posterior on the simplex is a fixed point, so scores in the
    image of Proposition 3's rule give back their posterior.

    The result is one posterior per class, the probability of class ``y'`` that output ``y'``
    reports, and rows need not sum to one: a real model's independent sigmoids are rarely
    consistent with any single posterior, and forcing them onto the simplex moves even the
    scores whose rule is the identity. ``renormalise=True`` divides each row by its sum: a
    separate step, with its own effect on calibration.

    Args:
      a: scores ``[..., n]`` in ``[0, 1]`` of a model trained with the B-weighted loss.
      B: positive weight matrix ``[n, n]``, rows the true class.
      return_residual: also return each row's ``max_{y'} |a_{y'} - rule_{y'}(gamma_hat)|``,
        with ``rule_{y'}`` the per-output rule above at the ``q`` of the returned
        ``gamma_hat``: in score units, 0 up to rounding when the iteration has converged (and,
        with ``renormalise``, how far the renormalised posterior is from explaining ``a``).
      renormalise: divide each row of the result by its sum (NaN for a row of zeros).
      num_iters: most fixed-point steps (only columns with unequal off-diagonal entries need
        any).
      tol: stop once no output's negative weight ``b_eff`` changes by more than ``tol``
        relative in a step; default 8 ulps of the dtype.

    Returns:
      ``gamma_hat [..., n]``, and the residual ``[...]`` if asked.
    """
    _check_multiclass("a", a, B)
    V.check_unit("a", a)
    num_iters = V.check_count("num_iters", num_iters)
    a, B = _float(a, B)
    tol = 8.0 * float(jnp.finfo(a.dtype).eps) if tol is None else V.check_positive("tol", tol)
    a = V.nan_unless(jnp.all((a >= 0) & (a <= 1), axis=-1, keepdims=True), a)
    B = V.nan_unless(jnp.all(B > 0), B)
    gamma, residual = _one_vs_rest_rows(a.reshape(-1, a.shape[-1]), B, num_iters, tol, renormalise)
    if not return_residual:
        return gamma.reshape(a.shape)
    return gamma.reshape(a.shape), residual.reshape(a.shape[:-1])


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _one_vs_rest_rows(
    a: Array, B: Array, num_iters: int, tol: float, renormalise: bool
) -> tuple[Array, Array]:
    """:func:`loss_corrected_score_multiclass` of rows ``a [m, n]``, and each row's residual."""
    gamma = jax.vmap(lambda row: _one_vs_rest_inverse(row, B, num_iters, tol))(a)
    if renormalise:
        gamma = gamma / jnp.sum(gamma, axis=-1, keepdims=True)
    diagonal, off, equal, start = _column_weights(B)
    weight = jax.vmap(lambda g: _negative_weight(g, off, equal, start))(gamma)
    residual = jnp.max(jnp.abs(a - _rule_at_weights(gamma, weight, diagonal)), axis=-1)
    return gamma, residual


def optimal_score_class_weighted(gamma: ArrayLike, class_weights: ArrayLike) -> Array:
    """Optimal scores under class-weighted cross-entropy on the simplex (softmax outputs).

    Minimising ``sum_y gamma_y w_y (-log a_y)`` over the simplex gives ``a_y ∝ gamma_y w_y``: the
    multiclass analogue of Proposition 2 for weights that depend only on the true class.

    Args:
      gamma: posteriors ``[..., n]`` on the simplex.
      class_weights: positive weights ``[n]``.
    """
    V.check_simplex("gamma", gamma)
    _check_class_weights(gamma, class_weights)
    gamma, w = _float(gamma, class_weights)
    weighted = gamma * V.nan_unless(jnp.all(w > 0), w)
    return weighted / jnp.sum(weighted, axis=-1, keepdims=True)


def loss_corrected_score_class_weighted(a: ArrayLike, class_weights: ArrayLike) -> Array:
    """Inverse of :func:`optimal_score_class_weighted`: ``gamma_y ∝ a_y / w_y`` (Proposition 4)."""
    V.check_unit("a", a)
    _check_class_weights(a, class_weights)
    a, w = _float(a, class_weights)
    a = V.nan_unless(jnp.all((a >= 0) & (a <= 1), axis=-1, keepdims=True), a)
    unweighted = a / V.nan_unless(jnp.all(w > 0), w)
    return unweighted / jnp.sum(unweighted, axis=-1, keepdims=True)


def _check_class_weights(x: ArrayLike, w: ArrayLike) -> None:
    if np.ndim(w) != 1 or np.ndim(x) < 1 or np.shape(x)[-1] != np.shape(w)[0]:
        raise ValueError(
            f"class_weights must be a vector with one weight per class (last axis); got "
            f"class_weights {np.shape(w)} for scores {np.shape(x)}"
        )
    V.check_interval("class_weights", w, 0.0, np.inf, open_low=True, open_high=True)


# ----------------------------------------------------------------------------------------------
# Generic binary rules for any differentiable loss
# ----------------------------------------------------------------------------------------------

BinaryLossFn = Callable[..., Array]


def _derivatives(loss: BinaryLossFn, a: Array, y: float, params: tuple) -> tuple[Array, Array]:
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
_solve_binary_rule_jit = jax.jit(_solve_binary_rule, static_argnums=0)


def optimal_score_for_loss(loss: BinaryLossFn, gamma: ArrayLike, *params: ArrayLike) -> Array:
    """Optimal score of any differentiable binary loss, eq. ``choice``, by autodiff.

    A coarse scan over the logit of ``a`` (65 points spanning the whole float-representable
    range, so scores within float precision of 0 and 1 are reached) brackets each minimum by the
    sign of the first-order condition ``gamma dL(a,1)/da + (1 - gamma) dL(a,0)/da``, keeping the
    bracket of lowest expected loss where there are several; bisection on the condition then
    locates the minimum to float precision, even where the expected loss is flat to float
    precision around it.
    Derivatives come from ``jax.jvp``; gradients of the result (with respect to ``gamma`` and
    ``params``) come from the implicit function theorem, not from differentiating the loop.
    Minima narrower than the scan's spacing (half a unit of logit in float32) can be missed:
    :func:`check_invertibility` and :func:`check_first_order_conditions` test a new loss.

    Args:
      loss: ``loss(a, y, *params)``, elementwise in ``a`` and the broadcast ``params``, with
        ``y`` a label 0.0 or 1.0. E.g. ``iml.losses.focal_loss`` or a user's own function.
      gamma: posteriors in ``[0, 1]``.
      *params: extra arguments of ``loss`` (e.g. ``beta``), broadcast against ``gamma``.

    Returns:
      Optimal scores, of the broadcast shape of ``gamma`` and ``params``.
    """
    V.check_unit("gamma", gamma)
    shape = V.check_broadcastable(gamma=gamma, **{f"params[{i}]": p for i, p in enumerate(params)})
    (gamma,) = _float(gamma)
    gamma = V.nan_unless((gamma >= 0) & (gamma <= 1), jnp.broadcast_to(gamma, shape))
    params = tuple(jnp.broadcast_to(jnp.asarray(p), shape) for p in params)
    return _solve_binary_rule_jit(loss, gamma, params)


def _binary_inverse(loss: BinaryLossFn, a: Array, params: tuple) -> tuple[Array, Array]:
    d_pos, dd_pos = _derivatives(loss, a, 1.0, params)
    d_neg, dd_neg = _derivatives(loss, a, 0.0, params)
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


_binary_inverse_jit = jax.jit(_binary_inverse, static_argnums=0)


def loss_corrected_score_for_loss(loss: BinaryLossFn, a: ArrayLike, *params: ArrayLike) -> Array:
    """Loss-corrected score of any differentiable binary loss (Proposition 4), in closed form.

    The first-order condition of eq. ``choice`` is linear in the posterior, so the posterior for
    which ``a`` is optimal is

        gamma(a) = L'(a, 0) / (L'(a, 0) - L'(a, 1)),     L' = dL/da by autodiff.

    Where no posterior makes ``a`` optimal -- the derivatives have the same sign, or the
    expected loss has a maximum rather than a minimum there -- the rule is not invertible at
    ``a`` and the result is NaN. :func:`check_invertibility` tests a whole grid.

    Args:
      loss: ``loss(a, y, *params)``, elementwise, ``y`` a label 0.0 or 1.0.
      a: scores in ``[0, 1]``.
      *params: extra arguments of ``loss``, broadcast against ``a``.

    Returns:
      Posteriors, NaN where the rule does not invert.
    """
    V.check_unit("a", a)
    shape = V.check_broadcastable(a=a, **{f"params[{i}]": p for i, p in enumerate(params)})
    (a,) = _float(a)
    a = V.nan_unless((a >= 0) & (a <= 1), jnp.broadcast_to(a, shape))
    params = tuple(jnp.broadcast_to(jnp.asarray(p), shape) for p in params)
    gamma, valid = _binary_inverse_jit(loss, a, params)
    return V.nan_unless(valid, gamma)


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
    gamma, valid = _binary_inverse(loss, grid, params)
    # Monotonicity in the posterior log-odds log(L'(a,0) / -L'(a,1)), which, unlike gamma itself,
    # does not round to 1 in float32 where the rule is steep.
    d_pos = _derivatives(loss, grid, 1.0, params)[0]
    d_neg = _derivatives(loss, grid, 0.0, params)[0]
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
    (grid,) = _float(grid)
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
    below = _solve_binary_rule_jit(loss, jnp.nextafter(gamma, jnp.zeros_like(gamma)), params)
    above = _solve_binary_rule_jit(loss, jnp.nextafter(gamma, jnp.ones_like(gamma)), params)
    z = _logit(grid)
    tol = _ROUND_TRIP_LOGIT * jnp.maximum(1.0, jnp.abs(z))
    return valid & (_logit(below) - tol <= z) & (z <= _logit(above) + tol)


# ----------------------------------------------------------------------------------------------
# Generic multiclass rules: scores on the simplex (softmax) or in the box (one-vs-rest sigmoids)
# ----------------------------------------------------------------------------------------------

MulticlassLossFn = Callable[..., Array]


def _link(domain: Domain) -> Callable[[Array], Array]:
    if domain == "simplex":
        return jax.nn.softmax
    if domain == "box":
        return jax.nn.sigmoid
    raise ValueError(f"domain must be 'simplex' or 'box'; got {domain!r}")


def _per_class_losses(loss: MulticlassLossFn, a: Array, params: tuple) -> Array:
    """``[L(a, 0), ..., L(a, n-1)]`` for one score vector ``a [n]``."""
    labels = jnp.arange(a.shape[-1])
    return jax.vmap(lambda y: loss(a, y, *params))(labels)


def optimal_score_multiclass_for_loss(
    loss: MulticlassLossFn,
    gamma: ArrayLike,
    *params: ArrayLike,
    domain: Domain = "simplex",
    num_iters: int = 40,
) -> Array:
    """Optimal scores of any differentiable multiclass loss, eq. ``choice``, by autodiff.

    Minimises ``sum_y gamma_y L(a, y)`` by damped Newton steps with a line search in the
    unconstrained parameter ``z``: ``a = softmax(z)`` for scores on the simplex (softmax
    classifiers), ``a = sigmoid(z)`` for independent one-vs-rest scores in the box ``(0, 1)^n``.

    Args:
      loss: ``loss(a, y, *params)`` for one score vector ``a [n]`` and an integer label ``y``,
        returning a scalar, e.g. ``iml.losses.class_weighted_cross_entropy``.
      gamma: posteriors ``[..., n]`` on the simplex.
      *params: extra arguments of ``loss``, shared by every posterior (e.g. class weights).
      domain: ``"simplex"`` or ``"box"``.
      num_iters: Newton iterations.

    Returns:
      Scores ``[..., n]``.
    """
    _link(domain)
    V.check_simplex("gamma", gamma)
    (gamma,) = _float(gamma)
    if gamma.ndim < 1 or gamma.shape[-1] < 2:
        raise ValueError(f"gamma must have at least 2 classes on its last axis; got {gamma.shape}")
    n = gamma.shape[-1]
    params = tuple(jnp.asarray(p) for p in params)
    flat = _minimise_expected_loss(loss, domain, gamma.reshape(-1, n), params, num_iters)
    return flat.reshape(gamma.shape)


@functools.partial(jax.jit, static_argnums=(0, 1, 4))
def _minimise_expected_loss(
    loss: MulticlassLossFn, domain: Domain, gamma: Array, params: tuple, num_iters: int
) -> Array:
    """Damped Newton with a line search on ``sum_y gamma_y L(link(z), y)``, per row of gamma."""
    link = _link(domain)
    n = gamma.shape[-1]
    eps = jnp.finfo(gamma.dtype).eps
    steps = 2.0 ** -jnp.arange(12, dtype=gamma.dtype)
    steps = jnp.concatenate([steps, jnp.zeros((1,), gamma.dtype)])

    def solve_one(g):
        def expected(z):
            return jnp.dot(g, _per_class_losses(loss, link(z), params))

        start = jnp.clip(g, 1e-6, 1.0 - 1e-6)
        z0 = jnp.log(start) if domain == "simplex" else _logit(start)

        def newton(_, z):
            grad = jax.grad(expected)(z)
            hess = jax.hessian(expected)(z)
            damping = 1e-6 * (jnp.trace(jnp.abs(hess)) / n) + eps
            direction = jnp.linalg.solve(hess + damping * jnp.eye(n, dtype=z.dtype), grad)
            # Fall back to steepest descent where Newton's direction does not descend.
            direction = jnp.where(jnp.dot(direction, grad) > 0, direction, grad)
            candidates = z[None, :] - steps[:, None] * direction[None, :]
            values = jax.vmap(expected)(candidates)
            values = jnp.where(jnp.isnan(values), jnp.inf, values)
            return candidates[jnp.argmin(values)]

        return link(jax.lax.fori_loop(0, num_iters, newton, z0))

    return jax.vmap(solve_one)(gamma)


def loss_corrected_score_multiclass_for_loss(
    loss: MulticlassLossFn,
    a: ArrayLike,
    *params: ArrayLike,
    domain: Domain = "simplex",
    return_residual: bool = False,
    num_iters: int = 500,
) -> Array | tuple[Array, Array]:
    """Loss-corrected posteriors of any differentiable multiclass loss (Proposition 4).

    The first-order condition of eq. ``choice`` in the parameter ``z`` of the scores,
    ``sum_y gamma_y dL(a, y)/dz = 0``, is linear in ``gamma``: ``J(a) gamma = 0`` with column
    ``y`` of ``J`` the gradient of ``L(a, y)``. The result is the posterior on the simplex that
    minimises ``||J(a) gamma||^2`` -- exact when ``a`` is in the image of the rule.

    Args:
      loss: ``loss(a, y, *params)`` for one score vector and an integer label, scalar.
      a: scores ``[..., n]``: on the simplex for ``domain="simplex"``, in ``(0, 1)^n`` for
        ``"box"``.
      *params: extra arguments of ``loss``.
      domain: ``"simplex"`` (``a = softmax(z)``) or ``"box"`` (``a = sigmoid(z)``).
      return_residual: also return the relative first-order residual
        ``||J gamma|| / sum_y gamma_y ||J_y||`` (0 when ``a`` is exactly optimal).
      num_iters: projected-gradient iterations of the simplex least squares.
    """
    _link(domain)
    V.check_unit("a", a)
    if domain == "simplex":
        V.check_simplex("a", a)
    (a,) = _float(a)
    n = a.shape[-1]
    z = jnp.log(a) if domain == "simplex" else _logit(a)
    params = tuple(jnp.asarray(p) for p in params)
    J = _loss_gradient_matrix(loss, domain, z.reshape(-1, n), params)
    gamma = _simplex_least_squares(J, num_iters)
    gamma = gamma.reshape(a.shape)
    if not return_residual:
        return gamma
    Jg = jnp.einsum("bij,bj->bi", J, gamma.reshape(-1, n))
    scale = jnp.einsum("bj,bj->b", gamma.reshape(-1, n), jnp.linalg.norm(J, axis=1))
    residual = jnp.linalg.norm(Jg, axis=-1) / jnp.maximum(scale, jnp.finfo(a.dtype).tiny)
    return gamma, residual.reshape(a.shape[:-1])


@functools.partial(jax.jit, static_argnums=(0, 1))
def _loss_gradient_matrix(loss: MulticlassLossFn, domain: Domain, z: Array, params: tuple) -> Array:
    """Per row of ``z``: the matrix whose column ``y`` is ``d L(link(z), y) / dz``."""
    link = _link(domain)

    def jacobian(z1):
        return jax.jacrev(lambda u: _per_class_losses(loss, link(u), params))(z1).T

    return jax.vmap(jacobian)(z)


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

    Returns:
      A :class:`FirstOrderConditionReport`; ``report.residual`` is the worst residual.
    """
    extra = () if weights is None else (weights,)
    if domain == "binary":
        V.check_interval("posteriors", posteriors, 0.0, 1.0, open_low=True, open_high=True)
        (gamma,) = _float(posteriors)
        if gamma.ndim != 1:
            raise ValueError(f"binary posteriors must be a 1-D array; got shape {gamma.shape}")
        a = jnp.asarray(rule(gamma, *extra), gamma.dtype)
        if a.shape != gamma.shape:
            raise ValueError(f"rule returned shape {a.shape} for posteriors {gamma.shape}")

        def per_point(g, x):
            d_pos, dd_pos = _derivatives(loss, x, 1.0, extra)
            d_neg, dd_neg = _derivatives(loss, x, 0.0, extra)
            grad = g * d_pos + (1.0 - g) * d_neg
            scale = g * jnp.abs(d_pos) + (1.0 - g) * jnp.abs(d_neg)
            curv = g * dd_pos + (1.0 - g) * dd_neg
            curv_scale = g * jnp.abs(dd_pos) + (1.0 - g) * jnp.abs(dd_neg)
            return _relative(jnp.abs(grad), scale), _relative(curv, curv_scale)

        rel_grad, curvature = jax.vmap(per_point)(gamma, a)
    elif domain in ("box", "simplex"):
        V.check_simplex("posteriors", posteriors)
        (gamma,) = _float(posteriors)
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
                return _per_class_losses(loss, u, extra)

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
