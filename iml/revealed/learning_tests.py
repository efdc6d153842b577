"""The tests of models of learning (Caplin & Dean 2015): NIS (capacity-constrained learning)
and NIAC (costly learning), inequalities on the value matrix, with NIAC's minimum cycle mean,
Floyd-Warshall's verdict and two host-side checks, and the revealed cost bounds that costly
learning implies, ``C_k - C_j <= G[k, k] - G[k, j]``, difference constraints that bound each
``C_k``, relative to a reference model, by shortest paths; and NIAS, each model's
loss-calibration test (:func:`iml.calibration.loss_calibration_test`) with Holm's familywise
control; for models of ``n`` classes, one multinomial test of each model's cells with the same
control."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import linear_sum_assignment

from iml import _validation as V
from iml.calibration._checks import as_float
from iml.calibration.loss_calibration import (
    MIN_COUNT,
    POWER_ODDS,
    LossCalibrationTest,
    calibration_test_in_parts,
    chi2_sf,
    holm_adjusted,
)
from iml.revealed.bins import (
    as_min_count,
    cell_signals,
    check_class_scores,
    check_scores,
    per_signal,
    signals_from_scores,
)
from iml.revealed.experiments import check_weight
from iml.revealed.losses import as_losses, loss_corrected
from iml.spec import LossLike

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "CostBounds",
    "NIACCheck",
    "NIASTest",
    "NISCheck",
    "multinomial_calibration_test",
    "niac_assignment_check",
    "niac_brute_force",
    "niac_check",
    "nias_test",
    "nis_check",
    "revealed_cost_bounds",
]


def check_value_matrix(G: ArrayLike, name: str = "G") -> None:
    shape = np.shape(G)
    if len(shape) < 2 or shape[-1] != shape[-2] or shape[-1] < 2:
        raise ValueError(
            f"{name} must be a square [..., K, K] value matrix with K >= 2; got {shape}"
        )
    V.check_finite(name, G)


class NISCheck(NamedTuple):
    """No improving switches (capacity-constrained learning).

    Attributes:
      margin: ``max_{k != j} (G[k, j] - G[k, k])``, ``[...]``: positive when some model's own
        decision problem is better served by another model's experiment.
      violations: ``G[k, j] > G[k, k]``, ``[..., K, K]`` (row: decision problem ``k``).
    """

    margin: Array
    violations: Array


def nis_check(G: ArrayLike) -> NISCheck:
    """NIS: capacity-constrained learning implies ``G[k, k] >= G[k, j]`` for all ``j, k``.

    A learner that picks the best experiment from one fixed feasible set, whatever its loss, never
    leaves an experiment it could have learned (another model's) that is better for its own loss.
    """
    check_value_matrix(G)
    return nis_check_of(G)


@jax.jit
def nis_check_of(G: ArrayLike) -> NISCheck:
    switch = switch_gains(as_float(G))
    off = ~jnp.eye(switch.shape[-1], dtype=bool)
    margin = jnp.max(jnp.where(off, switch, -jnp.inf), axis=(-2, -1))
    return NISCheck(margin, (switch > 0) & off)


def switch_gains(G: Array) -> Array:
    """``D[k, j] = G[k, j] - G[k, k]``: the gain in problem ``k`` from experiment ``j``."""
    return G - jnp.diagonal(G, axis1=-2, axis2=-1)[..., :, None]


def edge_weights(G: Array) -> Array:
    """``E[j, k] = w(j -> k) = G[k, k] - G[k, j]``: the NIAC graph's edge weights."""
    return -jnp.swapaxes(switch_gains(G), -2, -1)


class NIACCheck(NamedTuple):
    """No improving attention cycles (costly learning).

    Attributes:
      margin: minus the minimum cycle mean of the edge weights ``w(j -> k) = G[k, k] - G[k, j]``
        over cycles of at least two models, ``[...]``: the largest average gain per step of
        passing experiments around a cycle, ``max_cycles (1/m) sum_i (G[k_i, k_{i+1}] -
        G[k_i, k_i])``. Positive exactly when NIAC fails.
      cycle: a cycle attaining the margin, ``[..., K]``: models ``k_1, ..., k_m`` such that giving
        each ``k_i`` the experiment of ``k_{i+1}`` (and ``k_m`` that of ``k_1``) changes the total
        value by ``m * margin``; padded with ``-1``.
      cycle_length: ``m``, ``[...]``.
      negative_cycle: whether Floyd-Warshall finds a negative cycle, ``[...]`` (the same verdict
        as ``margin > 0``, found independently).
    """

    margin: Array
    cycle: Array
    cycle_length: Array
    negative_cycle: Array


def niac_check(G: ArrayLike) -> NIACCheck:
    """NIAC: costly learning implies ``sum_i G[k_i, k_i] >= sum_i G[k_i, k_{i+1}]`` on cycles.

    A learner paying any cost ``C`` for its experiment chooses, for each loss ``k``, an experiment
    maximising ``G_k(experiment) - C(experiment)``; summing those optimality conditions around a
    cycle cancels the costs (Caplin & Dean 2015; cyclical monotonicity). Equivalently the graph
    with edge weights ``w(j -> k) = G[k, k] - G[k, j]`` has no negative cycle.

    The margin is the minimum cycle mean (Karp's algorithm, ``O(K^3)``), exact with negative
    cycles present and independent of a cycle's length; the cycle is read off Karp's minimising
    walk, and the verdict is Floyd-Warshall's (a negative diagonal entry of the shortest paths).

    Args:
      G: the value matrix ``[..., K, K]`` (:func:`value_matrix`).

    Returns:
      A :class:`NIACCheck`, vectorised over the leading axes.
    """
    check_value_matrix(G)
    return niac_check_of(G)


@jax.jit
def niac_check_of(G: ArrayLike) -> NIACCheck:
    E = edge_weights(as_float(G))
    mean, cycle, length = min_cycle_mean(E, with_cycle=True)
    distance = floyd_warshall(E)
    negative = jnp.any(jnp.diagonal(distance, axis1=-2, axis2=-1) < 0, axis=-1)
    return NIACCheck(-mean, cycle, length, negative)


def min_cycle_mean(E: Array, with_cycle: bool = False):
    """Karp's minimum cycle mean of the complete graph without self-loops, ``E [..., K, K]``.

    ``D_t(v)`` is the least weight of a walk of ``t`` edges ending at ``v`` (from anywhere);
    ``mu* = min_v max_{t < K} (D_K(v) - D_t(v)) / (K - t)``. Any cycle on the minimising ``K``-edge
    walk to the minimising ``v`` has mean ``mu*`` (Karp 1978), which recovers the cycle.
    """
    K = E.shape[-1]
    E = jnp.where(jnp.eye(K, dtype=bool), jnp.inf, E)

    def step(d: Array, _) -> tuple[Array, tuple[Array, Array | None]]:
        candidates = d[..., :, None] + E  # [..., u, v]
        best = jnp.min(candidates, axis=-2)
        pred = jnp.argmin(candidates, axis=-2).astype(jnp.int32) if with_cycle else None
        return best, (best, pred)

    d0 = jnp.zeros(E.shape[:-1], E.dtype)
    _, (walks, preds) = jax.lax.scan(step, d0, None, length=K)  # D_1 .. D_K, [K, ..., K]
    earlier = jnp.concatenate([d0[None], walks[:-1]])  # D_0 .. D_{K-1}
    steps = (K - jnp.arange(K, dtype=E.dtype)).reshape((K,) + (1,) * d0.ndim)
    per_vertex = jnp.max((walks[-1][None] - earlier) / steps, axis=0)  # [..., K]
    mean = jnp.min(per_vertex, axis=-1)
    if not with_cycle:
        return mean
    end = jnp.argmin(per_vertex, axis=-1).astype(jnp.int32)

    def back(v: Array, pred: Array) -> tuple[Array, Array]:
        u = jnp.take_along_axis(pred, v[..., None], axis=-1)[..., 0]
        return u, u

    # Walk x_0 -> x_1 -> ... -> x_K = end, recovered backwards from the predecessors.
    _, before = jax.lax.scan(back, end, preds, reverse=True)  # x_0 .. x_{K-1}
    walk = jnp.moveaxis(jnp.concatenate([before, end[None]]), 0, -1)  # [..., K + 1]
    t = jnp.arange(K + 1)
    same = (walk[..., :, None] == walk[..., None, :]) & (t[:, None] < t[None, :])
    # The first repeat closes a simple cycle x_i -> ... -> x_j = x_i.
    j = jnp.argmax(jnp.any(same, axis=-2), axis=-1)
    i = jnp.argmax(jnp.take_along_axis(same, j[..., None, None], axis=-1)[..., 0], axis=-1)
    length = (j - i).astype(jnp.int32)
    # Graph edge u -> v weighs G[v, v] - G[v, u], so the NIAC order is the walk reversed.
    p = jnp.arange(K)
    index = jnp.clip(j[..., None] - p, 0, K)
    cycle = jnp.where(p < length[..., None], jnp.take_along_axis(walk, index, axis=-1), -1)
    return mean, cycle.astype(jnp.int32), length


def floyd_warshall(E: Array) -> Array:
    """All-pairs shortest walk weights, ``[..., K, K]`` (``0`` on the diagonal to start with).

    A negative diagonal entry afterwards marks a negative cycle, where the other entries stop
    meaning shortest paths.
    """
    K = E.shape[-1]
    d0 = jnp.where(jnp.eye(K, dtype=bool), jnp.zeros_like(E), E)

    def relax(m: int, d: Array) -> Array:
        to_m = jax.lax.dynamic_index_in_dim(d, m, axis=-1, keepdims=True)  # [..., K, 1]
        from_m = jax.lax.dynamic_index_in_dim(d, m, axis=-2, keepdims=True)  # [..., 1, K]
        return jnp.minimum(d, to_m + from_m)

    return jax.lax.fori_loop(0, K, relax, d0)


class CostBounds(NamedTuple):
    """Revealed bounds on the cost of each model's experiment, relative to a reference model.

    Attributes:
      lower, upper: ``[..., K]`` bounds on ``C_k - C_ref`` (NaN where infeasible).
      feasible: whether the difference constraints admit a solution (NIAC holds), ``[...]``.
    """

    lower: Array
    upper: Array
    feasible: Array


def revealed_cost_bounds(G: ArrayLike, reference: int = 0) -> CostBounds:
    """Costly learning implies ``C_k - C_j <= G[k, k] - G[k, j] = w(j -> k)``: bounds on ``C_k``.

    These difference constraints are feasible exactly when NIAC holds (no negative cycle). With
    ``C_ref = 0``, shortest paths ``d`` give the sharpest interval for each model:
    ``-d(k -> ref) <= C_k <= d(ref -> k)`` (Floyd-Warshall).

    Args:
      reference: the model whose cost is set to 0.
    """
    check_value_matrix(G)
    K = np.shape(G)[-1]
    if not isinstance(reference, int | np.integer) or not 0 <= reference < K:
        raise ValueError(f"reference must be a model index in [0, {K}); got {reference!r}")
    return revealed_cost_bounds_of(G, int(reference))


@functools.partial(jax.jit, static_argnums=(1,))
def revealed_cost_bounds_of(G: ArrayLike, reference: int) -> CostBounds:
    d = floyd_warshall(edge_weights(as_float(G)))
    feasible = jnp.all(jnp.diagonal(d, axis1=-2, axis2=-1) >= 0, axis=-1)
    lower = V.nan_unless(feasible[..., None], -d[..., :, reference])
    upper = V.nan_unless(feasible[..., None], d[..., reference, :])
    return CostBounds(lower, upper, feasible)


def niac_assignment_check(G: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """NIAC as an assignment problem, on the host: ``max_sigma sum_k G[k, sigma(k)]``.

    Cyclical monotonicity holds exactly when the identity is an optimal assignment of experiments
    to decision problems; a better permutation decomposes into improving cycles. Solved with
    ``scipy.optimize.linear_sum_assignment`` (an independent check of :func:`niac_check`; it is
    not jittable).

    Returns:
      ``(gain, sigma)``: ``max_sigma sum_k G[k, sigma(k)] - sum_k G[k, k] >= 0`` ``[...]``
      (positive exactly when NIAC fails) and an optimal ``sigma`` ``[..., K]``.
    """
    check_value_matrix(G)
    g = np.asarray(G, np.float64)
    flat = g.reshape(-1, *g.shape[-2:])
    gains, sigmas = [], []
    for matrix in flat:
        rows, cols = linear_sum_assignment(matrix, maximize=True)
        gains.append(matrix[rows, cols].sum() - np.trace(matrix))
        sigmas.append(cols)
    return np.reshape(gains, g.shape[:-2]), np.reshape(sigmas, g.shape[:-1])


def _simple_cycles(n_models: int) -> list[tuple[int, ...]]:
    """Every simple directed cycle of at least two of ``n_models`` nodes, each listed once."""
    cycles = []
    for m in range(2, n_models + 1):
        for subset in itertools.combinations(range(n_models), m):
            first, rest = subset[0], subset[1:]
            cycles.extend((first, *order) for order in itertools.permutations(rest))
    return cycles


def niac_brute_force(G: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """NIAC by enumerating every cycle (``K <= 6``: at most 409 cycles), on the host.

    Returns:
      ``(margin, total)``: the largest mean gain ``(1/m) sum_i (G[k_i, k_{i+1}] - G[k_i, k_i])``
      over cycles (the margin of :func:`niac_check`) and the largest total gain ``m * mean``, each
      ``[...]``.
    """
    check_value_matrix(G)
    g = np.asarray(G, np.float64)
    K = g.shape[-1]
    if K > 6:
        raise ValueError(f"G must have K <= 6 models for enumeration; got K = {K}")
    gain = g - np.diagonal(g, axis1=-2, axis2=-1)[..., :, None]
    means, totals = [], []
    for cycle in _simple_cycles(K):
        k = np.asarray(cycle)
        total = gain[..., k, np.roll(k, -1)].sum(axis=-1)
        totals.append(total)
        means.append(total / len(cycle))
    return np.max(means, axis=0), np.max(totals, axis=0)


class NIASTest(NamedTuple):
    """No improving action switches: each model's loss calibration, one familywise verdict.

    Attributes:
      test: each model's :func:`iml.calibration.loss_calibration_test` (fields ``[K, ...]``):
        its statistic, unadjusted p-value, number of bins, power and effect size.
      calibration_error: the effect size, ``test.calibration_error``, ``[K]``.
      p_value: each model's Holm-adjusted p-value over the ``K`` models, ``[K]`` (NaN for a
        model that is not testable, which is left out of the family).
      violated: NIAS rejected for model ``k`` (``p_value <= 1 - confidence``), ``[K]``; the
        chance of flagging any model for which NIAS holds is at most ``1 - confidence``.
    """

    test: LossCalibrationTest
    calibration_error: Array
    p_value: Array
    violated: Array


def nias_test(
    scores: ArrayLike,
    labels: ArrayLike,
    losses: LossLike | Sequence[LossLike],
    n_bins: int = 10,
    weight: ArrayLike | None = None,
    *,
    min_count: float = MIN_COUNT,
    confidence: float = 0.95,
) -> NIASTest:
    """NIAS for ``K`` models at once: each reports optimally for its revealed posteriors.

    Class scores ``[K, N, n]`` (losses of ``n`` classes) are tested on the cells of the
    revealed experiments (:func:`iml.revealed.bins.cell_signals`, ``n_bins`` confidence
    quantiles per class, merged to ``min_count``) by :func:`multinomial_calibration_test`, one
    multinomial chi-square per model over its cells, with Holm's control over the models as
    below (level ``1 - confidence``).

    Binary scores: NIAS is loss calibration (Definition 2), so each model is judged by the one
    test of it,
    :func:`iml.calibration.loss_calibration_test` on its own scores and loss (its deciles
    merged to ``min_count`` expected positives and negatives; the same verdict the run's table
    gives that loss), and Holm's step-down procedure over the testable models (valid whatever
    their dependence: the models share labels) controls the familywise level, so the test can
    reject at ``K = 64`` as at ``K = 1``.

    Args:
      scores: ``[K, N]`` positive-class scores or ``[K, N, n]`` class scores.
      labels: ``{0, 1}`` labels or class indices ``[N]``.
      losses: the ``K`` models' losses (binary, or of ``n`` class scores).
      weight: non-negative observation weights ``[N]``, or ``None``.
      confidence: the test is at level ``1 - confidence``.

    Raises:
      ValueError: naming the argument.
    """
    if np.ndim(scores) == 3:
        check_class_scores(scores, labels, n_bins, "adaptive")
        n_models, n, n_classes = np.shape(scores)
        if weight is not None:
            V.check_shape("weight", weight, (n,))
        check_weight(weight, n)
        V.check_interval("confidence", confidence, 0.0, 1.0, open_low=True, open_high=True)
        specs = as_losses(losses, n_models, n_classes)
        posteriors = loss_corrected(specs, jnp.asarray(scores, jnp.float32))
        cells = cell_signals(posteriors, n_bins, "adaptive", as_min_count(int(min_count)))
        return nias_of_cells(
            posteriors, cells, labels, weight, n_classes * n_bins, confidence, float(min_count)
        )
    check_scores(scores, labels, n_bins, "quantile")
    n_models, n = np.shape(scores)
    if weight is not None:
        V.check_shape("weight", weight, (n,))
    check_weight(weight, n)
    V.check_interval("confidence", confidence, 0.0, 1.0, open_low=True, open_high=True)
    specs = as_losses(losses, n_models)
    return nias_of(scores, labels, specs, weight, int(n_bins), min_count, float(confidence))


def nias_of(scores, labels, specs, weight, n_bins, min_count, confidence) -> NIASTest:
    """:func:`nias_test` of checked input: the loss-corrected scores, their deciles (sorted with
    NumPy where the scores are concrete: XLA's CPU sort of ``[64, 112120]`` is several times
    slower), then every model's test at once, the tests from their sums one program whatever
    ``N`` (:func:`iml.calibration.loss_calibration.calibration_test_in_parts`)."""
    g = loss_corrected(specs, jnp.asarray(scores, jnp.float32))
    deciles = signals_from_scores(g, n_bins, "quantile")
    level = 1.0 - confidence
    test = calibration_test_in_parts(
        g, labels, weight, jax.random.key(0), min_count, level, n_bins, 0, deciles=deciles
    )
    p_value = holm_adjusted(test.p_value)
    return NIASTest(test, test.calibration_error, p_value, p_value <= level)


# ----------------------------------------------------------------------------------------------
# NIAS for models of n classes: one multinomial test per model over its cells
# ----------------------------------------------------------------------------------------------


def multinomial_calibration_test(
    posteriors: ArrayLike,
    cells: ArrayLike,
    labels: ArrayLike,
    n_cells: int,
    weight: ArrayLike | None = None,
    *,
    level: float = 0.05,
    min_count: float = MIN_COUNT,
) -> LossCalibrationTest:
    """Loss calibration (Definition 2) of ``K`` models of ``n`` classes on given cells.

    By Proposition 4, a model that is loss-calibrated has labels ``y ~ Categorical(g)`` given
    its scores, ``g`` the loss-corrected class posteriors (rows renormalised to the simplex).
    Within cell ``s`` the observed class counts ``O_s = sum_{i in s} w_i e_{y_i}`` then have
    mean ``E_s = sum_{i in s} w_i g_i`` and covariance
    ``Sigma_s = sum_{i in s} w_i^2 (diag g_i - g_i g_i^T)`` (rank ``n - 1``: the counts sum to
    the cell's weight), and the statistic

        T = sum_s (O_s - E_s)^T Sigma_s^+ (O_s - E_s)

    is approximately chi-square with ``sum_s rank Sigma_s`` degrees of freedom (``S (n - 1)``
    for ``S`` cells in the interior of the simplex): a Hosmer-Lemeshow statistic with the
    multinomial covariance, whose two-class case is the binary test's
    ``sum_s (O_s - E_s)^2 / V_s`` on the same bins. As the binary test merges bins until each
    holds ``min_count`` expected positives and negatives, so that the chi-square holds, a cell's
    classes expected fewer than ``min_count`` times are pooled into one category, and that
    category into the cell's most expected class when it is still short of ``min_count``
    (pooling depends on the scores alone); ``O``, ``E`` and ``Sigma`` are summed over each
    category. The pseudo-inverse keeps the eigenvalues above ``1e-5`` times a cell's largest
    and above ``1e-6`` times its summed squared weights (a cell pooled into one category has
    none);
    a category the null gives no chance in a cell but that occurs there makes ``T`` infinite.

    ``power`` is that of the test against the alternative that, in every observation, the
    odds of its top class are ``POWER_ODDS`` times (or ``1 / POWER_ODDS`` times, the smaller
    power of the two) those of ``g``, the other classes rescaled in proportion: the
    noncentral chi-square of noncentrality ``sum_s delta_s^T Sigma_s^+ delta_s`` (``delta`` the
    shift of ``E``), by the Wilson-Hilferty approximation of it and of the critical value.

    Args:
      posteriors: loss-corrected class posteriors ``[K, N, n]``.
      cells: each observation's cell under each model ``[K, N]`` in ``[0, n_cells)``.
      labels: class indices ``[N]``.
      n_cells: ``S``.
      weight: non-negative observation weights ``[N]``.
      level: the level of ``power``.
      min_count: the least expected count of a category tested on its own.

    Returns:
      A :class:`iml.calibration.LossCalibrationTest` with fields ``[K, ...]``: ``n_bins`` the
      degrees of freedom, ``testable`` whether they are at least 2, ``observed``,
      ``expected`` and ``variance`` (the diagonal of ``Sigma``) ``[K, S, n]``, ``count``
      ``[K, S]``, ``bins`` the cells ``[K, N]``; ``calibration_error``
      ``sum_{s,c} |O_sc - E_sc| / (2 sum_i w_i)`` (the binary one for ``n = 2``) and its null
      level; no interval (NaN).

    Raises:
      ValueError: naming ``posteriors``, ``cells``, ``labels`` or ``weight``.
    """
    shape = np.shape(posteriors)
    if len(shape) != 3 or shape[2] < 2:
        raise ValueError(f"posteriors must be [K, N, n] with n >= 2; got {shape}")
    if np.shape(cells) != shape[:2]:
        raise ValueError(f"cells must have shape {shape[:2]}; got {np.shape(cells)}")
    c = V.concrete_value(cells)
    if c is not None and ((c < 0).any() or (c >= n_cells).any()):
        raise ValueError(f"cells must lie in [0, n_cells={n_cells})")
    if np.shape(labels) != shape[1:2]:
        raise ValueError(f"labels must have shape [{shape[1]}]; got {np.shape(labels)}")
    if weight is not None:
        V.check_shape("weight", weight, shape[1:2])
        V.check_weights("weight", weight)
    V.check_interval("level", level, 0.0, 1.0, open_low=True, open_high=True)
    V.check_interval("min_count", min_count, 0.0, np.inf, open_low=False, open_high=True)
    w = jnp.ones(shape[1], jnp.float32) if weight is None else as_float(weight)
    return _multinomial_test(as_float(posteriors), jnp.asarray(cells), labels, w, int(n_cells),
                             float(level), min_count)  # fmt: skip


def nias_of_cells(
    posteriors, cells, labels, weight, n_cells, confidence, min_count=MIN_COUNT
) -> NIASTest:
    """NIAS of models of ``n`` classes: :func:`multinomial_calibration_test` of each model,
    Holm over the testable models, violated where the adjusted p-value is at most
    ``1 - confidence``."""
    n = np.shape(posteriors)[1]
    w = jnp.ones(n, jnp.float32) if weight is None else as_float(weight)
    level = 1.0 - float(confidence)
    test = _multinomial_test(posteriors, cells, labels, w, int(n_cells), level, min_count)
    p_value = holm_adjusted(test.p_value)
    return NIASTest(test, test.calibration_error, p_value, p_value <= level)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _multinomial_test(g, cells, labels, w, n_cells, level, min_count) -> LossCalibrationTest:
    n = g.shape[-1]
    total = jnp.sum(g, axis=-1, keepdims=True)
    g = jnp.where(total > 0, g / jnp.where(total > 0, total, 1.0), 1.0 / n)
    y = jnp.asarray(labels)
    onehot = jnp.where(((y >= 0) & (y < n))[:, None], jax.nn.one_hot(y, n, dtype=g.dtype), jnp.nan)

    def alternative(r: float) -> Array:
        top = jax.nn.one_hot(jnp.argmax(g, axis=-1), n, dtype=g.dtype)
        t = jnp.sum(g * top, axis=-1, keepdims=True)
        tilted = r * t / (1.0 + (r - 1.0) * t)
        rest = jnp.where(t < 1.0, (1.0 - tilted) / jnp.where(t < 1.0, 1.0 - t, 1.0), 0.0)
        return top * tilted + (1.0 - top) * g * rest

    segment = functools.partial(per_signal, n_signals=n_cells)
    count = segment(jnp.broadcast_to(w, cells.shape), cells)  # [K, S]
    observed = segment(jnp.broadcast_to(w[:, None] * onehot, g.shape), cells)  # [K, S, n]
    expected = segment(w[None, :, None] * g, cells)
    eye = jnp.eye(n, dtype=g.dtype)
    spread = (w * w)[None, :, None, None] * (g[..., None] * eye - g[..., :, None] * g[..., None, :])
    # Categories: classes expected fewer than min_count times pool into one (the first of
    # them), and that into the most expected class while it is short too.
    big = expected >= min_count
    classes = jnp.arange(n)
    first_small = jnp.argmin(jnp.where(big, n, classes), axis=-1)
    pool_ok = jnp.sum(jnp.where(big, 0.0, expected), axis=-1) >= min_count
    most = jnp.argmax(expected, axis=-1)
    target = jnp.where(big, classes, jnp.where(pool_ok, first_small, most)[..., None])  # [K, S, n]
    pooling = jax.nn.one_hot(target, n, dtype=g.dtype)  # [K, S, class, category]
    covariance = jnp.einsum(
        "ksca,kscd,ksdb->ksab", pooling, segment(spread, cells), pooling,
        precision=jax.lax.Precision.HIGHEST,
    )  # fmt: skip
    values, vectors = jnp.linalg.eigh(covariance)
    # Eigenvalues kept above 1e-5 of a cell's largest and above float rounding of its
    # variances (1e-6 of its summed squared weights): a cell pooled into one category has a
    # covariance that is rounding alone.
    squares = segment(jnp.broadcast_to(w * w, cells.shape), cells)[..., None]  # [K, S, 1]
    keep = (values > 1e-5 * jnp.max(values, axis=-1, keepdims=True)) & (values > 1e-6 * squares)
    inverse = jnp.where(keep, 1.0 / jnp.where(keep, values, 1.0), 0.0)
    rank = jnp.sum(keep, axis=-1)  # [K, S]

    def quadratic(d: Array) -> Array:
        d = jnp.einsum("ksca,ksc->ksa", pooling, d, precision=jax.lax.Precision.HIGHEST)
        z = jnp.einsum("ksab,ksa->ksb", vectors, d, precision=jax.lax.Precision.HIGHEST)
        return jnp.sum(inverse * z * z, axis=-1)  # [K, S]

    gap = observed - expected
    pooled_gap = jnp.einsum("ksca,ksc->ksa", pooling, gap, precision=jax.lax.Precision.HIGHEST)
    # A category the null gives no chance (expected 0) but that occurs. A category pooling
    # every class of a cell has zero variance too, but its count is the cell's by construction:
    # its gap is float rounding, not a miss.
    pooled_expected = jnp.einsum(
        "ksca,ksc->ksa", pooling, expected, precision=jax.lax.Precision.HIGHEST
    )
    scale = 1e-6 * jnp.maximum(count, 1.0)[..., None]
    miss = (pooled_expected <= scale) & (pooled_gap > scale)
    variance = segment(jnp.broadcast_to((w * w)[None, :, None], g.shape) * g * (1.0 - g), cells)
    statistic = jnp.sum(quadratic(gap), axis=-1)
    statistic = jnp.where(jnp.any(miss, axis=(-2, -1)), jnp.inf, statistic)
    df = jnp.sum(rank, axis=-1).astype(jnp.int32)  # [K]
    testable = df >= 2
    max_df = n_cells * (n - 1)
    sf = jax.vmap(chi2_sf, in_axes=(0, 0, None))(statistic, jnp.maximum(df, 1), max_df)
    p_value = jnp.where(testable, sf, jnp.nan)

    # Power against the tilted top-class odds: noncentral chi-square, Wilson-Hilferty.
    z_level = jax.scipy.special.ndtri(1.0 - level)
    k = jnp.maximum(df, 1).astype(g.dtype)
    critical = k * (1.0 - 2.0 / (9.0 * k) + z_level * jnp.sqrt(2.0 / (9.0 * k))) ** 3

    def power_against(r: float) -> Array:
        shift = segment(w[None, :, None] * (alternative(r) - g), cells)
        lam = jnp.sum(quadratic(shift), axis=-1)
        scale = (k + 2.0 * lam) / (k + lam)
        nu = (k + lam) ** 2 / (k + 2.0 * lam)
        x = (critical / (scale * nu)) ** (1.0 / 3.0)
        mean, sd = 1.0 - 2.0 / (9.0 * nu), jnp.sqrt(2.0 / (9.0 * nu))
        return jax.scipy.special.ndtr((mean - x) / sd)

    power = jnp.minimum(power_against(POWER_ODDS), power_against(1.0 / POWER_ODDS))
    power = jnp.where(testable, power, jnp.nan)
    weight_total = jnp.sum(count, axis=-1)
    error = jnp.sum(jnp.abs(gap), axis=(-2, -1)) / (2.0 * weight_total)
    null_error = (
        jnp.sqrt(2.0 / jnp.pi) * jnp.sum(jnp.sqrt(variance), axis=(-2, -1)) / (2.0 * weight_total)
    )
    return LossCalibrationTest(
        statistic, p_value, df, testable, power, error, null_error,
        jnp.full((g.shape[0], 2), jnp.nan, g.dtype), observed, expected, variance, count, cells,
    )  # fmt: skip
