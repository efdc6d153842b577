"""Closed-form multiclass rules and their inverses; classes on the last axis, weight matrices
``B[y, y']`` with rows the true class ``y`` (eq. ``b-loss-multi``).

* :func:`optimal_score_multiclass`: Proposition 3, the rule of the B-weighted one-vs-rest loss.
* :func:`loss_corrected_score_multiclass`: its inverse, Proposition 4 (eq. ``invert``) applied to
  each output at the binary weight it implies (Corollary 1), a fixed point where the outputs are
  coupled.
* :func:`optimal_score_class_weighted`, :func:`loss_corrected_score_class_weighted`: the rule of
  class-weighted softmax cross-entropy, ``a_y ∝ gamma_y w_y``, and its inverse.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.scoring._common import Array, ArrayLike, as_float, tilt

__all__ = [
    "loss_corrected_score_class_weighted",
    "loss_corrected_score_multiclass",
    "optimal_score_class_weighted",
    "optimal_score_multiclass",
]


def _check_multiclass(name: str, x: ArrayLike, B: ArrayLike) -> None:
    V.check_weight_matrix("B", B)
    n = np.shape(B)[0]
    if np.ndim(x) < 1 or np.shape(x)[-1] != n:
        raise ValueError(
            f"{name} must have the {n} classes of B on its last axis; got shape {np.shape(x)}"
        )


def optimal_score_multiclass(gamma: ArrayLike, B: ArrayLike) -> Array:
    """Optimal posterior scores under the B-weighted loss (``B`` positive), Proposition 3.

    ``c_y^B(gamma) = gamma_y B[y, y] / sum_{y'} gamma_{y'} B[y', y]`` for the one-vs-rest
    weighted loss of eq. ``b-loss-multi`` with any smooth strictly proper base loss. The scores
    need not sum to one.

    Returns:
      Scores ``[..., n]`` in ``(0, 1)``.
    """
    _check_multiclass("gamma", gamma, B)
    V.check_simplex("gamma", gamma)
    return _optimal_scores(*as_float(gamma, B))


@jax.jit
def _optimal_scores(gamma: Array, B: Array) -> Array:
    """Proposition 3's scores, NaN for a ``gamma`` off the simplex or a ``B`` not positive; one
    compiled program per shape."""
    ok = jnp.all(gamma >= 0, axis=-1, keepdims=True)
    ok &= jnp.abs(jnp.sum(gamma, axis=-1, keepdims=True) - 1.0) <= 1e-4
    gamma = V.nan_unless(ok, gamma)
    B = V.nan_unless(jnp.all(B > 0), B)
    return gamma * jnp.diagonal(B) / (gamma @ B)


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
    return jnp.where(negative == positive, a, tilt(a, negative, positive))


def _rule_at_weights(gamma: Array, negative: Array, positive: Array) -> Array:
    """Proposition 2 at the same ``beta'``: ``gamma positive / (gamma positive + (1 - gamma)
    negative)``; the identity, exactly, for equal weights."""
    return jnp.where(negative == positive, gamma, tilt(gamma, positive, negative))


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
    reports; rows need not sum to one (independent sigmoids are rarely consistent with one
    posterior) unless ``renormalise``.

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
    a, B = as_float(a, B)
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
    """
    V.check_simplex("gamma", gamma)
    _check_class_weights(gamma, class_weights)
    return _class_weighted(*as_float(gamma, class_weights), inverse=False)


def loss_corrected_score_class_weighted(a: ArrayLike, class_weights: ArrayLike) -> Array:
    """Inverse of :func:`optimal_score_class_weighted`: ``gamma_y ∝ a_y / w_y`` (Proposition 4)."""
    V.check_unit("a", a)
    _check_class_weights(a, class_weights)
    return _class_weighted(*as_float(a, class_weights), inverse=True)


@functools.partial(jax.jit, static_argnames="inverse")
def _class_weighted(x: Array, w: Array, inverse: bool) -> Array:
    """``x_y w_y`` renormalised over the classes (the optimal scores), or ``x_y / w_y`` where
    ``inverse`` (with scores outside ``[0, 1]`` NaN); NaN throughout for a weight that is not
    positive. One compiled program per shape."""
    w = V.nan_unless(jnp.all(w > 0), w)
    if inverse:
        x = V.nan_unless(jnp.all((x >= 0) & (x <= 1), axis=-1, keepdims=True), x)
    weighted = x / w if inverse else x * w
    return weighted / jnp.sum(weighted, axis=-1, keepdims=True)


def _check_class_weights(x: ArrayLike, w: ArrayLike) -> None:
    if np.ndim(w) != 1 or np.ndim(x) < 1 or np.shape(x)[-1] != np.shape(w)[0]:
        raise ValueError(
            f"class_weights must be a vector with one weight per class (last axis); got "
            f"class_weights {np.shape(w)} for scores {np.shape(x)}"
        )
    V.check_interval("class_weights", w, 0.0, np.inf, open_low=True, open_high=True)
