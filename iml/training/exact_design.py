"""What every exact fit of one table shares: the features with a column of ones and the table
of their nonzero pair products (:class:`Design`), the data's Hessians ``X^T diag(v) X`` made from
them, their damped Cholesky factors and solves, the rules of a step's line search and of a
Hessian's renewal, the solved members (:class:`Solved`), and the checks of a fit's arguments and
the fitted members (:class:`LogisticFit`) of the binary (:mod:`iml.training.exact`) and
multinomial (:mod:`iml.training.exact_multinomial`) solvers.

The Hessians of the weighted log loss of eq. ``b-loss-bin`` (and of the class-weighted softmax
cross-entropy) are sums over rows of ``v_i x_i x_i^T``: with the nonzero products ``x_ij x_il`` of
each row made once (where they fit in ``_PAIR_BYTES``; pairs of one-hot levels of one category,
never both 1, are left out), a batch of members' Hessians is one matrix product with that table.
Where two one-hot categories (columns that are 0 or one value each, never two of a category in
one row) have many pairs of levels, those pairs' sums are cells instead: each row's weight is
added into the cell of its two levels, once for all the pairs (:class:`Pairs`). A
singular Hessian is factored with its diagonal raised by ``FLOOR`` of its largest entry, raised
further (as Levenberg-Marquardt's damping) for a member whose step float32 made useless.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from iml import _validation as V
from iml._device import to_device, usable_cores

Array = jax.Array

__all__ = [
    "FLOOR",
    "LINE_TRIALS",
    "MAX_DAMPING",
    "ROUNDING",
    "SLOW",
    "Design",
    "LogisticFit",
    "Pairs",
    "Solved",
    "check_design",
    "checked_inputs",
    "damped",
    "data_hessians",
    "dot",
    "factor",
    "pair_sums",
    "ridge_multipliers",
    "solve",
    "times_pairs",
]

_HIGHEST = jax.lax.Precision.HIGHEST


def dot(a: Array, b: Array) -> Array:
    """A product in full float32 precision (accelerators otherwise may round inputs to TF32)."""
    return jnp.dot(a, b, precision=_HIGHEST)


# ----------------------------------------------------------------------------------------------
# The shared design and its Hessians
# ----------------------------------------------------------------------------------------------

# The nonzero products of feature pairs take N floats each; above this many bytes the Hessians
# are formed from the design itself instead (more arithmetic, no extra memory).
_PAIR_BYTES = 2**31
# A pair of one-hot categories whose levels make at least this many nonzero feature pairs is
# summed by cells (one scatter of the rows' weights) instead of by the table's columns: one
# scatter costs as much as several of the product's columns (docs/results/sweep_train, "Pairs
# of categories summed by cells").
_CELLS = 32
# A member whose gradient's largest entry falls by less than this factor in a step gets a new
# Hessian (at most a tenth of a batch's members a step, the slowest first).
SLOW = 0.5
# Diagonal floor of a factored Hessian, relative to its largest diagonal entry: raised (as
# Levenberg-Marquardt's damping) for a member whose Newton direction float32 made useless, where
# the data's curvature is nearly singular; a member that fails at the highest, a short gradient
# step, stalls.
FLOOR, MAX_DAMPING = 1e-6, 1e2


class Pairs(NamedTuple):
    """The feature pairs ``(rows[t], cols[t])`` (upper triangle, nonzero in some row) whose sums
    ``sum_i w_i x_ij x_il`` make a Hessian, and what makes them: the first ``q`` from the table
    ``products [q, N]`` of their products, the other ``m`` by cells of one-hot categories (a
    level's column is 0 or one value of its own). ``cells [c, N]`` holds, for each of ``c``
    pairs of categories, the position among those ``m`` of the pair of levels row ``i`` has
    (``m`` where it lacks a level of either), and ``values [m]`` the product of the pair's
    two values."""

    rows: Array
    cols: Array
    products: Array
    cells: Array
    values: Array


class Design(NamedTuple):
    """The features with a last column of ones ``X [N, d1]``, and their feature pairs
    (:class:`Pairs`; None where the table of products would take more than ``_PAIR_BYTES``):
    what every member of a table shares. ``X_abs``: ``|X|`` entrywise, which the line searches'
    bounds on a slope's rounding multiply."""

    X: Array
    pairs: Pairs | None
    X_abs: Array

    @classmethod
    def of(cls, x: ArrayLike, shapes_known: Callable[[Design], None] | None = None) -> Design:
        """The design of features ``x [N, d]`` (made once, and shared by every fit on them:
        pass it as ``design=`` to :func:`fit_weighted_logistic` and
        :func:`fit_weighted_softmax`).

        ``shapes_known``: called with the design's shapes (a :class:`Design` of
        ``jax.ShapeDtypeStruct``) as soon as they are known, before the table of pair products
        is made: to start compiling a program on them meanwhile
        (:func:`iml.training.exact.compile_ahead`)."""
        x = np.asarray(x, np.float32)
        full = np.concatenate([x, np.ones((x.shape[0], 1), np.float32)], axis=1)
        design = to_device(full)
        rows, cols, q, cells, values = _pair_layout(x)
        table = design.shape[0] * q * 4 <= _PAIR_BYTES
        if shapes_known is not None:

            def shape(a: np.ndarray | Array, dtype: DTypeLike) -> jax.ShapeDtypeStruct:
                return jax.ShapeDtypeStruct(np.shape(a), dtype)

            layout = Pairs(shape(rows, np.int32), shape(cols, np.int32),
                           jax.ShapeDtypeStruct((q, design.shape[0]), np.float32),
                           shape(cells, np.int32), shape(values, np.float32))  # fmt: skip
            X = shape(design, np.float32)
            shapes_known(cls(X, layout if table else None, X))
        pairs = None
        if table:
            products = to_device(_pair_products(full, rows[:q], cols[:q]))
            rows, cols = to_device(rows, np.int32), to_device(cols, np.int32)
            pairs = Pairs(rows, cols, products, to_device(cells), to_device(values))
        return cls(design, pairs, to_device(np.abs(full)))


def _pair_products(X: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``Z [q, N]`` of the design ``X [N, d1]``: column ``i`` holds the listed entries of ``x_i
    x_i^T``'s upper triangle, so a member's sums over them are one row-vector times ``Z^T`` and a
    batch's one matrix product. Made on the host, each row of ``Z`` the product of two rows of
    ``X^T`` (exact in float32), the rows shared among threads, one a usable core (NumPy releases
    the interpreter while it multiplies); :meth:`Design.of` puts it on the device, which on the
    CPU reads the host's array in place, and on an accelerator holds a copy."""
    n, q = X.shape[0], len(rows)
    Xt = np.empty(X.shape[::-1], X.dtype)
    Z = np.empty((q, n), X.dtype)
    threads = max(1, min(usable_cores(), q))

    def spans(size: int) -> list[tuple[int, int]]:
        edges = np.linspace(0, size, threads + 1).astype(int)
        return list(itertools.pairwise(edges.tolist()))

    def transpose(span: tuple[int, int]) -> None:
        Xt[:, span[0] : span[1]] = X[span[0] : span[1]].T

    def products(span: tuple[int, int]) -> None:
        for t in range(*span):
            np.multiply(Xt[rows[t]], Xt[cols[t]], out=Z[t])

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(transpose, spans(n)))
        list(pool.map(products, spans(q)))
    return Z


def times_pairs(V: Array, Z: Array) -> Array:
    """``V Z^T``: ``[K, N]`` weights against the ``[q, N]`` table."""
    return jax.lax.dot_general(V, Z, (((1,), (1,)), ((), ())), precision=_HIGHEST)


def pair_sums(pairs: Pairs, W: Array) -> Array:
    """``sum_i w_ki x_ij x_il`` for every pair ``(j, l)`` of ``pairs``: ``[K, p]`` from weights
    ``W [K, N]``. The table's pairs are one matrix product; each pair of categories adds every
    row's weights into the cell of its two levels (one pass over the rows for all the pairs of
    levels, where the table would take a column each)."""
    sums = times_pairs(W, pairs.products)
    c = pairs.cells.shape[0]
    if c == 0:
        return sums
    m = pairs.rows.shape[0] - pairs.products.shape[0]
    Wt = W.T

    def add(i: int, cells: Array) -> Array:
        return cells.at[pairs.cells[i]].add(Wt)

    cells = jax.lax.fori_loop(0, c, add, jnp.zeros((m + 1, W.shape[0]), W.dtype))
    return jnp.concatenate([sums, cells[:m].T * pairs.values], axis=1)


def _nonzero_pairs(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The upper-triangle pairs ``(j, k)`` of the design (the features and a last column of
    ones) whose product ``x_ij x_ik`` is nonzero in some row.

    Two one-hot columns of one category are never both 1, so their pair's products are all zero
    and need no column in the table (about a third of UCI Adult's pairs).
    """
    return _upper_nonzero(_together(np.asarray(features) != 0))


def _upper_nonzero(together: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The upper-triangle pairs whose count of rows ``together`` is nonzero."""
    rows, cols = np.triu_indices(together.shape[0])
    keep = together[rows, cols] > 0
    return rows[keep], cols[keep]


def _together(nonzero: np.ndarray) -> np.ndarray:
    """``[d1, d1]``: in how many rows both columns of the design are nonzero, from the features'
    ``nonzero [N, d]`` indicator (bool or 0/1 floats; the design's last column, of ones, is
    nonzero in every row)."""
    used = nonzero.astype(np.float32, copy=False)
    inner = used.T @ used
    counts = used.sum(axis=0)
    return np.block([[inner, counts[:, None]], [counts[None, :], np.float32(len(used))]])


def _categories(
    features: np.ndarray, nonzero: np.ndarray, together: np.ndarray
) -> tuple[list[list[int]], np.ndarray]:
    """Columns whose nonzero entries all have one value (a one-hot level's, scaled or not),
    grouped (greedily, in column order) so that no row is nonzero in two columns of a group: a
    one-hot category's levels, or several categories'; and each column's largest nonzero entry
    ``[d]`` (a grouped column's one value; ``-inf`` for a column of zeros)."""
    high = np.max(np.where(nonzero, features, -np.inf), axis=0)
    low = np.min(np.where(nonzero, features, np.inf), axis=0)
    groups: list[list[int]] = []
    for j in np.flatnonzero((high == low) | ~nonzero.any(axis=0)):
        for group in groups:
            if not together[j, group].any():
                group.append(int(j))
                break
        else:
            groups.append([int(j)])
    return groups, high


def _pair_layout(
    features: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
    """The nonzero pairs (:func:`_nonzero_pairs`) in the order of :class:`Pairs`, how many of
    them the table holds, and the ``cells [c, N]`` and ``values`` of the ``c`` pairs of
    categories with at least ``_CELLS`` nonzero pairs of levels each (c may be 0)."""
    nonzero = features != 0
    used = nonzero.astype(np.float32)
    together = _together(used)
    rows, cols = _upper_nonzero(together)
    groups, value = _categories(features, nonzero, together)
    n = features.shape[0]
    # Each row's level in each group (len(group) where it has none). No row is nonzero in two
    # columns of a group, so one product of the indicator with each column's place in its group
    # (counted from 1) finds every group's level at once (small integers: exact in float32).
    place = np.zeros((features.shape[1], len(groups)), np.float32)
    for g, group in enumerate(groups):
        place[group, g] = np.arange(1, len(group) + 1)
    found = (used @ place).astype(np.int64) - 1
    levels = [np.where(found[:, g] < 0, len(group), found[:, g]) for g, group in enumerate(groups)]
    scattered: list[tuple[int, int]] = []
    lookups = []
    for a in range(len(groups)):
        for b in range(a + 1, len(groups)):
            ga, gb = np.asarray(groups[a]), np.asarray(groups[b])
            ia, ib = np.nonzero(together[np.ix_(ga, gb)])
            if len(ia) < _CELLS:
                continue
            lookup = np.full((len(ga) + 1, len(gb) + 1), -1, np.int64)
            lookup[ia, ib] = len(scattered) + np.arange(len(ia))
            scattered += [(min(j, k), max(j, k)) for j, k in zip(ga[ia], gb[ib], strict=True)]
            lookups.append(lookup[levels[a], levels[b]])
    if not scattered:
        return rows, cols, len(rows), np.zeros((0, n), np.int32), np.zeros(0, np.float32)
    done = set(scattered)
    table = [
        (j, k) for j, k in zip(rows.tolist(), cols.tolist(), strict=True) if (j, k) not in done
    ]
    order = np.asarray(table + scattered, np.int64).reshape(-1, 2)
    cells = np.stack(lookups)
    cells = np.where(cells < 0, len(scattered), cells).astype(np.int32)
    pair = np.asarray(scattered, np.int64)
    values = (value[pair[:, 0]] * value[pair[:, 1]]).astype(np.float32)
    return order[:, 0], order[:, 1], len(table), cells, values


def data_hessians(design: Design, V: Array) -> Array:
    """``X^T diag(v_k) X`` for each row ``v_k`` of ``V [K, N]``: ``[K, d1, d1]``."""
    X = design.X
    d1 = X.shape[1]
    if design.pairs is None:
        return jax.lax.map(lambda v: dot((X * v[:, None]).T, X), V)
    pairs = design.pairs
    upper = (
        jnp.zeros((V.shape[0], d1, d1), X.dtype)
        .at[:, pairs.rows, pairs.cols]
        .set(pair_sums(pairs, V))
    )
    return upper + jnp.swapaxes(upper, 1, 2) - upper * jnp.eye(d1, dtype=X.dtype)


def factor(H: Array, penalty: Array, damping: Array) -> Array:
    """Cholesky factors of ``H + diag(penalty)`` (batched), the diagonal raised by ``damping``
    times the largest diagonal entry of ``H`` (of ``H + diag(penalty)`` where ``H`` has none); a
    factor that float32 rounding leaves non-finite is made again with the diagonal raised ten
    times more, up to six times."""
    n = H.shape[-1]
    eye = jnp.eye(n, dtype=H.dtype)
    A = H + penalty[..., None, :] * eye
    # Relative to the data's largest curvature, not the penalty's: a feature no training row
    # uses can carry a huge penalty (its scale on all rows is tiny), which would otherwise
    # raise the floor above the data's own curvature and slow every other direction.
    largest = jnp.max(jnp.diagonal(H, axis1=-2, axis2=-1), axis=-1)
    largest = jnp.where(largest > 0, largest, jnp.max(jnp.diagonal(A, axis1=-2, axis2=-1), axis=-1))
    floor = damping * largest

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


def damped(damping: Array, ok: Array, full: Array) -> Array:
    """The next damping of members whose step was acceptable (``ok``; ``full``: at its whole
    length) or not: a failed step multiplies it by 100 (towards a short gradient step), a whole
    one divides it by 10 (back towards Newton's step), down to ``FLOOR``."""
    return jnp.where(ok, jnp.where(full, jnp.maximum(damping / 10.0, FLOOR), damping),
                     jnp.minimum(100.0 * damping, MAX_DAMPING))  # fmt: skip


def solve(F: Array, g: Array) -> Array:
    """``(L L^T)^{-1} g`` for batched Cholesky factors ``L`` and vectors ``g``."""
    return jax.scipy.linalg.cho_solve((F, True), g[..., None])[..., 0]


def check_design(design: Design, x: np.ndarray) -> Design:
    if not isinstance(design, Design) or design.X.shape != (x.shape[0], x.shape[1] + 1):
        raise ValueError(
            f"design must be the Design.of these [{x.shape[0]}, {x.shape[1]}] features, got "
            f"{getattr(getattr(design, 'X', None), 'shape', type(design).__name__)}"
        )
    return design


# ----------------------------------------------------------------------------------------------
# What the binary and the multinomial Newton steps share
# ----------------------------------------------------------------------------------------------


class Solved(NamedTuple):
    theta: Array  # [K, d1]
    grad: Array  # [K, d1]
    hessian: Array  # [K, d1, d1]: the data's curvature at the last renewal
    objective: Array | None  # [K]; None where not summed
    iterations: Array  # [K]
    hessians: Array  # [K]


# Secant trials of one step's line search.
LINE_TRIALS = 8
# A slope within this fraction of the sum of its terms' sizes is zero to float32 rounding.
ROUNDING = 1e-5


# ----------------------------------------------------------------------------------------------
# What an exact fit takes and returns
# ----------------------------------------------------------------------------------------------


class LogisticFit(NamedTuple):
    """Fitted members (arrays with the members' leading axes).

    Attributes:
      coef: ``[..., d]`` weights (``[..., d, n]`` for a multinomial fit of ``n`` classes).
      intercept: ``[...]`` biases (``[..., n]``).
      objective: ``[...]`` the minimised ``f_k`` (None where the fit was asked not to sum it).
      grad_norm: ``[...]`` the largest absolute entry of the gradient at the fit.
      iterations: ``[...]`` Newton steps taken.
      converged: ``[...]`` whether ``grad_norm <= tol``.
      hessians: ``[...]`` Hessians formed for the member (a member that borrows an anchor's
        Hessian, or keeps one across steps, forms fewer than it takes steps).
      curvature: ``[..., d + 1, d + 1]`` the data's part of each member's last Hessian,
        ``X^T diag(v) X`` with the intercept's column last (the ridge left out), where the fit
        was asked to keep it; else None. It was formed at the member's last renewal: a member
        that formed none at a level keeps the curvature it started that level with.
    """

    coef: Array
    intercept: Array
    objective: Array | None
    grad_norm: Array
    iterations: Array
    converged: Array
    hessians: Array
    curvature: Array | None = None

    @classmethod
    def of(cls, solved: Solved, tol: float, l2: ArrayLike, classes: bool = False) -> LogisticFit:
        """The members ``solved`` (``theta [G, ..., d1]`` on the axis of the ``l2`` grid, or
        ``[G, ..., d1, n]`` with ``classes``), that axis dropped where ``l2`` is a number; their
        ``hessian`` is the fit's ``curvature`` (None where it was not kept)."""
        axis = -2 if classes else -1  # the features' (the intercept's last)
        theta = np.moveaxis(solved.theta, axis, 0)
        norm = np.max(np.abs(solved.grad), axis=(-2, -1) if classes else -1)
        fit = cls(
            coef=np.moveaxis(theta[:-1], 0, axis),
            intercept=theta[-1],
            objective=solved.objective,
            grad_norm=norm,
            iterations=solved.iterations,
            converged=norm <= tol,
            hessians=solved.hessians,
            curvature=solved.hessian,
        )
        return jax.tree.map(lambda a: a[0], fit) if np.ndim(l2) == 0 else fit


def checked_inputs(
    features: ArrayLike,
    labels: ArrayLike,
    sample_weights: ArrayLike,
    l2: ArrayLike,
    max_iter: int,
    tol: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Features ``[N, d]`` (finite), labels ``[N]``, sample weights ``[..., N]`` (finite,
    non-negative) and the ``l2`` grid (1-D), checked and as arrays; ``max_iter`` and ``tol``
    checked."""
    x = np.asarray(features, np.float32)
    y = np.asarray(labels)
    s = np.asarray(sample_weights, np.float32)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"features must be [N, d] and labels [N]; got {x.shape} and {y.shape}")
    if s.ndim < 1 or s.shape[-1] != x.shape[0]:
        raise ValueError(f"sample_weights must be [..., {x.shape[0]}]; got shape {s.shape}")
    V.check_finite("features", x)
    V.check_interval("sample_weights", s, 0.0, np.inf, open_low=False, open_high=True)
    levels = np.asarray(l2, np.float64)
    if levels.ndim > 1:
        raise ValueError(f"l2 must be a number or a 1-D grid of numbers, got shape {levels.shape}")
    V.check_interval("l2", levels, 0.0, np.inf, open_low=False, open_high=True)
    V.check_count("max_iter", max_iter)
    V.check_positive("tol", tol)
    return x, y, s, np.atleast_1d(levels)


def ridge_multipliers(scale: ArrayLike | None, lead: tuple[int, ...], d: int) -> np.ndarray:
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
