"""What the machine learns: revealed experiments and tests of learning models across losses.

The paper separates *what* a model learned, its statistical experiment (signals and Bayesian
posteriors), from *how* it reports, the optimal scoring rule ``c^L`` (eq. ``choice``). This module
recovers the experiments of ``K`` models trained under losses ``L_1, ..., L_K`` on the same
labelled observations and tests two economic models of learning on them, after Caplin & Dean
(2015, *Revealed preference, rational inattention, and costly information acquisition*, AER) and
Caplin, Martin & Marx (2025, *Modeling machine learning: a cognitive economic approach*, JET):

* **Revealed experiment** (:func:`revealed_experiments`): model ``k``'s scores, binned, give the
  probability ``P_k(s)`` of each signal (bin) ``s`` and its posterior
  ``gamma_{k,s} = P_k(y = 1 | s)``; all models share the prior ``pi = P(y = 1)``.
* **Minimised expected loss** ``l*_k(gamma) = min_a [gamma L_k(a, 1) + (1 - gamma) L_k(a, 0)]``
  (:meth:`iml.LossSpec.minimised_expected_loss`; ``Z h(c^beta(gamma))`` for the beta-weighted log
  loss of eq. ``b-loss-bin``, with the paper's weights ``beta`` and ``1 - beta``).
* **Value matrix** (:func:`value_matrix`): ``G[k, j] = -sum_s P_j(s) l*_k(gamma_{j,s})``, the value
  in decision problem ``k`` of the experiment learned under loss ``j``, re-scored optimally for
  ``k``.
* **Mutual information** (:func:`mutual_information`) ``I_k`` in nats.
* **NIAS** (no improving action switches): each model reports optimally given its revealed
  posteriors. That is loss calibration (Definition 2): :func:`nias_test` compares each bin's
  positives with those its loss-corrected scores expect, by exact binomial tails, with Holm's
  familywise control over every model and bin.
* **NIS** (no improving switches, :func:`nis_check`): capacity-constrained learning, one feasible
  set of experiments for every loss, implies ``G[k, k] >= G[k, j]`` for all ``j, k``.
* **NIAC** (no improving attention cycles, :func:`niac_check`): costly learning, any cost of
  experiments, implies ``sum_i G[k_i, k_i] >= sum_i G[k_i, k_{i+1}]`` on every cycle: the identity
  solves ``max_sigma sum_k G[k, sigma(k)]`` (cyclical monotonicity), equivalently the graph with
  edge weights ``w(j -> k) = G[k, k] - G[k, j]`` has no negative cycle.
* **Revealed cost bounds** (:func:`revealed_cost_bounds`): costly learning implies
  ``C_k - C_j <= G[k, k] - G[k, j]``; with ``C_ref = 0`` shortest paths bound each ``C_k``.
* **Shannon cost** (:func:`shannon_lambda_interval`): ``C_k = lambda I_k`` requires
  ``lambda (I_k - I_j) <= G[k, k] - G[k, j]``, an interval for ``lambda``.
* **Shannon agent** (:func:`shannon_agent`): the learner with that cost, which concavifies
  ``N(gamma) = -l*(gamma) + lambda H(gamma)`` at the prior.

:func:`reveal` runs everything with a paired bootstrap: each replicate is one vector of
resampling counts (:func:`paired_bootstrap_weights`), used as observation weights for every model
at once (the same resample for every ``k``, so that differences between models are resampled
jointly, and without gathering the data). NIS and NIAC are declared violated only when a one-sided
bootstrap lower confidence bound of their margin is above zero; the critical value comes from the
recentred bootstrap at the least-favourable null (every inequality binding), which holds the size
however many inequalities are compared (see :func:`reveal`).

Conventions: arrays follow ``[..., K, S]`` for ``K`` models and ``S`` signals; leading axes are
batches (bootstrap replicates, data sets). Every function here is pure JAX and works under
``jax.jit`` and ``jax.vmap`` except the host-side checks :func:`niac_assignment_check` and
:func:`niac_brute_force`. Concrete bad input raises ``ValueError`` naming the argument; under a
transformation the affected outputs are NaN.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc, ndtr, xlogy
from scipy.optimize import linear_sum_assignment

from iml import _validation as V
from iml.calibration import (
    _bootstrap_counts,
    _check_binary,
    _check_bootstrap,
    _check_n_bins,
    _labels,
    _weights,
    assign_bins,
    bin_edges,
)
from iml.spec import LossLike, LossSpec, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "CostBounds",
    "LambdaInterval",
    "MarginTest",
    "NIACCheck",
    "NIASTest",
    "NISCheck",
    "RevealedExperiments",
    "RevealedReport",
    "experiments_from_posteriors",
    "experiments_from_signals",
    "mutual_information",
    "niac_assignment_check",
    "niac_brute_force",
    "niac_check",
    "nias_test",
    "nis_check",
    "paired_bootstrap_weights",
    "reveal",
    "revealed_cost_bounds",
    "revealed_experiments",
    "shannon_agent",
    "shannon_lambda_interval",
    "simulate_gaussian_agents",
    "simulate_observations",
    "value_matrix",
]

# The bins of a model's scores: the calibration module's, and quantile bins merged until each
# holds enough expected positives and negatives (see revealed_experiments).
STRATEGIES = ("quantile", "uniform", "adaptive")
# The least expected positives and negatives an adaptive bin holds.
MIN_COUNT = 10

# Replicates per chunk of the paired bootstrap: about this many resampling weights at a time.
_CHUNK_ELEMENTS = 2**21
_HIGHEST = jax.lax.Precision.HIGHEST


# ----------------------------------------------------------------------------------------------
# Revealed experiments
# ----------------------------------------------------------------------------------------------


class RevealedExperiments(NamedTuple):
    """The statistical experiments of ``K`` models (a pytree; leading axes are batches).

    Attributes:
      probability: ``P_k(s)``, the probability of signal ``s`` of model ``k``, ``[..., K, S]``.
      posterior: ``gamma_{k,s} = P_k(y = 1 | s)``, ``[..., K, S]``; the prior where
        ``P_k(s) = 0`` (a value that changes nothing below).
      prior: ``pi = sum_s P_k(s) gamma_{k,s}``, ``[..., K]`` (Bayes plausibility; one value for
        experiments revealed from common labels).
    """

    probability: Array
    posterior: Array
    prior: Array


def _float(x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    return x.astype(jnp.result_type(x.dtype, jnp.float32))


def _check_signals(signals: ArrayLike, n_signals: int) -> None:
    _check_n_bins(n_signals)
    shape = np.shape(signals)
    if len(shape) != 2 or 0 in shape:
        raise ValueError(f"signals must be a non-empty [K, N] array; got shape {shape}")
    s = V.concrete_value(signals)
    if s is None:
        return
    if not np.issubdtype(s.dtype, np.integer):
        raise ValueError(f"signals must be integers (signal indices); got dtype {s.dtype}")
    if (s < 0).any() or (s >= n_signals).any():
        raise ValueError(
            f"signals must lie in [0, n_signals={n_signals}); got min {s.min()}, max {s.max()}"
        )


def _check_weight(weight: ArrayLike | None, n: int) -> None:
    """Observation weights ``[..., N]``: leading axes are batches (bootstrap replicates)."""
    if weight is None:
        return
    shape = np.shape(weight)
    if not shape or shape[-1] != n:
        raise ValueError(f"weight must have shape [..., {n}]; got {shape}")
    w = V.concrete_value(weight)
    if w is None:
        return
    V.check_weights("weight", w)


def experiments_from_signals(
    signals: ArrayLike,
    labels: ArrayLike,
    n_signals: int,
    weight: ArrayLike | None = None,
) -> RevealedExperiments:
    """Revealed experiments from discrete signals: ``P_k(s)`` and ``gamma_{k,s}`` by counting.

    ``P_k(s) = sum_i w_i 1[s_ki = s] / sum_i w_i`` and
    ``gamma_{k,s} = sum_i w_i y_i 1[s_ki = s] / sum_i w_i 1[s_ki = s]``. The sums are one matrix
    product with the signals' indicator matrix, so a batch of weight vectors (for instance the
    resampling counts of bootstrap replicates, :func:`paired_bootstrap_weights`) costs one
    product and resamples every model with the same observations.

    Args:
      signals: integer signals ``[K, N]`` in ``[0, n_signals)``, one row per model.
      labels: ``{0, 1}`` labels ``[N]``.
      n_signals: the number of signals ``S``.
      weight: non-negative observation weights ``[..., N]``; leading axes are batches.

    Returns:
      :class:`RevealedExperiments` with ``probability`` and ``posterior`` ``[..., K, S]``.
    """
    _check_signals(signals, n_signals)
    n = np.shape(signals)[1]
    y = V.concrete_value(labels)
    if y is not None and (y.shape != (n,) or not np.isin(y, (0, 1)).all()):
        raise ValueError(f"labels must be a [{n}] array of 0s and 1s; got shape {y.shape}")
    _check_weight(weight, n)
    return _experiments_from_signals(signals, labels, weight, n_signals)


@functools.partial(jax.jit, static_argnums=(3,))
def _experiments_from_signals(
    signals: ArrayLike, labels: ArrayLike, weight: ArrayLike | None, n_signals: int
) -> RevealedExperiments:
    indicator = _indicator(signals, n_signals)
    y = _labels(labels, indicator)
    w = _weights(weight, y) if weight is not None else jnp.ones_like(y)
    return _experiments_from_sums(*_signal_sums(w, y, indicator, n_signals))


def _indicator(signals: ArrayLike, n_signals: int) -> Array:
    """``M[i, (k, s)] = 1[s_ki = s]``, ``[N, K * S]``: the signals' indicator matrix."""
    s = jnp.asarray(signals)
    onehot = jax.nn.one_hot(s.T, n_signals, dtype=jnp.float32)  # [N, K, S]
    return onehot.reshape(s.shape[1], -1)


def _signal_sums(
    w: Array, y: Array, indicator: Array, n_signals: int, positive_rows: int | None = None
) -> tuple[Array, Array]:
    """Weighted counts and positives per model and signal, ``[..., K, S]`` each.

    ``positive_rows``: every positive observation is among the first ``positive_rows`` (the
    observations sorted by label), so the positives' product needs only those rows.
    """
    if positive_rows is None or positive_rows >= y.shape[-1]:
        lhs = jnp.stack([w, w * y], axis=-2)  # [..., 2, N]: one product for both sums
        sums = jnp.matmul(lhs, indicator, precision=_HIGHEST)
        count, positives = sums[..., 0, :], sums[..., 1, :]
    else:
        count = jnp.matmul(w, indicator, precision=_HIGHEST)
        head = (w * y)[..., :positive_rows]
        positives = jnp.matmul(head, indicator[:positive_rows], precision=_HIGHEST)
    shape = (*count.shape[:-1], -1, n_signals)
    return count.reshape(shape), positives.reshape(shape)


def _experiments_from_sums(count: Array, positives: Array) -> RevealedExperiments:
    total = jnp.sum(count, axis=-1)  # [..., K], equal for every model
    prior = jnp.sum(positives, axis=-1) / total
    filled = count > 0
    posterior = jnp.where(filled, positives / jnp.where(filled, count, 1.0), prior[..., None])
    return RevealedExperiments(count / total[..., None], posterior, prior)


def revealed_experiments(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    weight: ArrayLike | None = None,
    *,
    losses: LossLike | Sequence[LossLike] | None = None,
    min_count: int | None = None,
) -> RevealedExperiments:
    """The revealed experiment of each model from its scores: its bins are its signals.

    Each model's scores are binned as :func:`iml.calibration.calibration_curve` bins them (by
    default at the deciles of that model's own scores); bin ``s`` of model ``k`` is its signal,
    with probability ``P_k(s)`` and posterior ``gamma_{k,s} = P_k(y = 1 | s)``. Because optimal
    scoring rules are increasing, the bins of raw and of loss-corrected scores coincide, so the
    experiment does not depend on which loss the scores were reported under.

    Args:
      scores: ``[K, N]`` positive-class scores in ``[0, 1]`` of ``K`` models on the same ``N``
        observations.
      labels: ``{0, 1}`` labels ``[N]``.
      n_bins: signals per model.
      strategy: ``"quantile"`` (per model), ``"uniform"``, or ``"adaptive"``: the ``n_bins``
        quantile bins merged, in score order, until each holds at least ``min_count`` expected
        positives and ``min_count`` expected negatives for every model, expected under each
        model's own loss-corrected scores ``(c^{L_k})^{-1}(a)`` (so the bins depend on the
        scores alone, as the bootstrap and the tests, which hold the bins fixed, assume). The
        same quantile ranges are merged for every model, so that no model's experiment is
        garbled more than another's. Merged bins leave
        signals with ``P_k(s) = 0``, which change nothing downstream. Needs ``losses``.
      weight: non-negative observation weights ``[..., N]`` (leading axes are batches, e.g.
        bootstrap replicates); the bins are computed from the unweighted scores and stay fixed.
      losses: the ``K`` models' binary losses (for ``"adaptive"``).
      min_count: the least expected positives and negatives of an adaptive bin
        (default :data:`MIN_COUNT`).

    Returns:
      :class:`RevealedExperiments` ``[..., K, n_bins]``.
    """
    _check_scores(scores, labels, n_bins, strategy)
    _check_weight(weight, np.shape(scores)[1])
    specs = None if losses is None else _as_losses(losses, np.shape(scores)[0])
    signals = _signals(scores, n_bins, strategy, specs, _min_count(min_count))
    return _experiments_from_signals(signals, labels, weight, n_bins)


def _check_scores(scores: ArrayLike, labels: ArrayLike, n_bins: int, strategy: str) -> None:
    _check_n_bins(n_bins)
    V.check_choice("strategy", strategy, STRATEGIES)
    shape = np.shape(scores)
    if len(shape) != 2 or 0 in shape:
        raise ValueError(
            f"scores must be a non-empty [K, N] array (one row per model); got {shape}"
        )
    if V.is_concrete(scores):
        s = np.asarray(scores)
        for k in range(shape[0]):
            _check_binary(s[k], labels, None, n_bins, scores_name=f"scores[{k}]")
    else:
        _check_binary(np.zeros(shape[1]), labels)


def _min_count(min_count: int | None) -> int:
    if min_count is None:
        return MIN_COUNT
    V.check_count("min_count", min_count)
    return int(min_count)


def _signals(
    scores: ArrayLike,
    n_bins: int,
    strategy: str,
    losses: LossSpec | list[LossSpec] | None = None,
    min_count: int = MIN_COUNT,
) -> Array:
    """Each model's bins ``[K, N]``, with the edges of :func:`iml.calibration.bin_edges`, or
    adaptive bins (``losses`` required).

    Concrete scores are sorted on the host (NumPy's sort of a ``[64, 112120]`` array is over ten
    times faster than XLA's on CPU); traced ones in XLA.
    """
    if strategy == "adaptive":
        if losses is None:
            raise ValueError("strategy 'adaptive' needs the models' losses (losses=...)")
        quantile = _signals(scores, n_bins, "quantile")
        return _merged_signals(scores, quantile, losses, n_bins, min_count)
    if strategy == "quantile" and V.is_concrete(scores):
        s = _float(scores)
        ordered = np.sort(np.asarray(s), axis=1)
        return _assign_signals(s, jnp.asarray(_interpolated_edges(ordered, n_bins, np)))
    return _bin_signals(scores, n_bins, strategy)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _merged_signals(
    scores: ArrayLike, signals: Array, losses: LossSpec | list[LossSpec], n_bins: int, m: int
) -> Array:
    """Quantile bins merged in score order until each holds at least ``m`` expected positives
    and ``m`` expected negatives under every model's own loss-corrected scores; a short last run
    joins the bin below it. The merges are common to all models (a model's bins are the same
    quantile ranges as every other's): merges that differed between models would garble their
    experiments differently, and a finer experiment is more informative, which NIS would read
    as a violation. Bins keep the indices ``0..`` of the merged groups."""
    g = _loss_corrected(losses, scores)
    positives = _per_signal(g, signals, n_bins)  # [K, S]
    negatives = _per_signal(1.0 - g, signals, n_bins)

    def step(carry, x):
        group, p, q = carry
        p, q = p + x[0], q + x[1]
        close = jnp.all(p >= m) & jnp.all(q >= m)
        keep = jnp.where(close, 0.0, 1.0)
        return (group + close, p * keep, q * keep), group

    start = (jnp.int32(0), jnp.zeros(g.shape[0]), jnp.zeros(g.shape[0]))
    (last, _, _), group = jax.lax.scan(step, start, (positives.T, negatives.T))
    group = jnp.where((group == last) & (last > 0), last - 1, group)  # [S]
    merged = jnp.broadcast_to(group, positives.shape)
    return jnp.take_along_axis(merged, signals, axis=1)


@jax.jit
def _assign_signals(scores: Array, edges: Array) -> Array:
    return jax.vmap(assign_bins)(scores, edges)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _bin_signals(scores: ArrayLike, n_bins: int, strategy: str) -> Array:
    s = _float(scores)
    if strategy == "uniform":
        edges = jax.vmap(bin_edges, in_axes=(0, None, None))(s, n_bins, strategy)
    else:
        # Sorted by their ordered integer keys: XLA's CPU sort of integers is several times
        # faster than its sort of floats. A row with a NaN gets NaN edges, as in jnp.quantile.
        ordered = _from_ordered_keys(jax.lax.sort(_ordered_keys(s), dimension=1, is_stable=False))
        edges = _interpolated_edges(ordered, n_bins, jnp)
        edges = jnp.where(jnp.any(jnp.isnan(s), axis=1, keepdims=True), jnp.nan, edges)
    return jax.vmap(assign_bins)(s, edges)


def _interpolated_edges(ordered, n_bins: int, xp):
    """``bin_edges(row, n_bins, "quantile")`` of sorted rows ``[K, N] -> [K, n_bins + 1]``: the
    linear interpolation between order statistics of ``jnp.quantile``, in NumPy or JAX."""
    n = ordered.shape[1]
    with jax.ensure_compile_time_eval():  # the fractions of bin_edges, to the last bit
        fractions = np.asarray(jnp.linspace(0.0, 1.0, n_bins + 1, dtype=jnp.float32))
    q = xp.asarray(fractions) * xp.float32(n - 1)
    low, high = xp.floor(q), xp.ceil(q)
    high_weight = q - low
    low_value = ordered[:, low.astype(np.int32)]
    high_value = ordered[:, high.astype(np.int32)]
    return low_value * (xp.float32(1.0) - high_weight) + high_value * high_weight


def experiments_from_posteriors(
    probability: ArrayLike, posterior: ArrayLike
) -> RevealedExperiments:
    """Experiments given directly by their signal probabilities and posteriors.

    Args:
      probability: ``P_k(s)`` ``[..., K, S]``, non-negative, summing to one over ``s``.
      posterior: ``gamma_{k,s}`` ``[..., K, S]`` in ``[0, 1]``.

    Returns:
      :class:`RevealedExperiments` with ``prior = sum_s P_k(s) gamma_{k,s}``.
    """
    if np.shape(probability) != np.shape(posterior) or np.ndim(probability) < 2:
        raise ValueError(
            "probability and posterior must have the same shape [..., K, S]; got "
            f"{np.shape(probability)} and {np.shape(posterior)}"
        )
    V.check_simplex("probability", probability)
    V.check_unit("posterior", posterior)
    p, g = _float(probability), _float(posterior)
    valid = jnp.all(p >= 0, axis=-1) & jnp.all((g >= 0) & (g <= 1), axis=-1)
    prior = V.nan_unless(valid, jnp.sum(p * g, axis=-1))
    return RevealedExperiments(p, g, prior)


def _check_experiments(experiments: RevealedExperiments) -> int:
    if not isinstance(experiments, RevealedExperiments):
        raise ValueError(
            f"experiments must be RevealedExperiments; got {type(experiments).__name__}"
        )
    shape = np.shape(experiments.probability)
    if len(shape) < 2 or np.shape(experiments.posterior) != shape:
        raise ValueError(
            "experiments must have probability and posterior of one shape [..., K, S]; got "
            f"{shape} and {np.shape(experiments.posterior)}"
        )
    return shape[-2]


# ----------------------------------------------------------------------------------------------
# Losses, the value matrix and mutual information
# ----------------------------------------------------------------------------------------------


def _as_losses(losses: LossLike | Sequence[LossLike], n_models: int) -> LossSpec | list[LossSpec]:
    """``K`` binary losses: one batched :class:`LossSpec` where they stack, else a list."""
    if _is_one_loss(losses):
        specs = loss_spec(losses)
        if specs.multiclass:
            raise ValueError(f"losses must be binary losses; got the {specs.describe()}")
        if specs.batch_shape != (n_models,):
            raise ValueError(
                f"losses must give one loss per model (batch shape ({n_models},)); got batch "
                f"shape {specs.batch_shape}"
            )
        return specs
    if isinstance(losses, np.ndarray | jax.Array):
        return _as_losses(loss_spec(losses), n_models)
    specs = [loss_spec(loss) for loss in losses]
    if len(specs) != n_models:
        raise ValueError(f"losses must give one loss per model ({n_models}); got {len(specs)}")
    for k, spec in enumerate(specs):
        if spec.multiclass or spec.batch_shape:
            raise ValueError(f"losses[{k}] must be one binary loss; got the {spec.describe()}")
    structures = {jax.tree.structure(spec) for spec in specs}
    if len(structures) == 1:
        return jax.tree.map(lambda *x: jnp.stack([jnp.asarray(v) for v in x]), *specs)
    return specs


def _is_one_loss(losses: object) -> bool:
    """Whether ``losses`` is one :func:`iml.loss_spec` argument rather than a sequence of them."""
    return isinstance(losses, LossSpec | str | Mapping) or not isinstance(
        losses, Sequence | np.ndarray | jax.Array
    )


def _loss_count(losses: object) -> int | None:
    """How many losses ``losses`` gives, or ``None`` for one unbatched loss."""
    if isinstance(losses, np.ndarray | jax.Array):
        return np.shape(losses)[0] if np.ndim(losses) == 1 else None
    if not _is_one_loss(losses):
        return len(losses)
    shape = loss_spec(losses).batch_shape
    return shape[0] if len(shape) == 1 else None


def _minimised_losses(losses: LossSpec | list[LossSpec], gamma: Array) -> Array:
    """``l*_k(gamma)`` for every loss ``k``, on a new last axis: ``[*gamma.shape, K]``."""
    if isinstance(losses, LossSpec):
        return jax.vmap(LossSpec.minimised_expected_loss, in_axes=(0, None), out_axes=-1)(
            losses, gamma
        )
    return jnp.stack([spec.minimised_expected_loss(gamma) for spec in losses], axis=-1)


def value_matrix(experiments: RevealedExperiments, losses: LossLike | Sequence[LossLike]) -> Array:
    """The value matrix ``G[k, j] = -sum_s P_j(s) l*_k(gamma_{j,s})``.

    ``G[k, j]`` is the value, in decision problem ``k`` (loss ``L_k``), of the experiment learned
    under loss ``j`` when its posteriors are re-scored optimally for ``k``; ``l*_k`` is
    :meth:`iml.LossSpec.minimised_expected_loss`, which keeps the paper's normalisation of the
    weights (``beta`` and ``1 - beta``), so that values compare across losses.
    ``G[k, k] - G[k, j] < 0`` says that training under ``j`` and correcting afterwards does better
    on ``k``'s own loss than training under ``k``.

    Args:
      experiments: :class:`RevealedExperiments` ``[..., K, S]``.
      losses: ``K`` binary losses, one per model: a batched :class:`iml.LossSpec` (batch shape
        ``(K,)``), an array of betas, or a sequence of anything :func:`iml.loss_spec` reads.

    Returns:
      ``G`` ``[..., K, K]`` (row: decision problem; column: experiment).
    """
    n_models = _check_experiments(experiments)
    return _value_matrix(experiments, _as_losses(losses, n_models))


@jax.jit
def _value_matrix(experiments: RevealedExperiments, losses: LossSpec | list[LossSpec]) -> Array:
    table = _minimised_losses(losses, experiments.posterior)  # [..., K_exp, S, K_loss]
    # A contraction rather than a sum of products: XLA's CPU fusion of the latter with the
    # table is an order of magnitude slower.
    return -jnp.einsum("...js,...jsk->...kj", experiments.probability, table, precision=_HIGHEST)


def mutual_information(experiments: RevealedExperiments) -> Array:
    """``I_k = sum_{s,y} P_k(s, y) log[P_k(s, y) / (P_k(s) P(y))]`` in nats, ``0 log 0 = 0``.

    Computed as ``sum_s P_k(s) KL(gamma_{k,s} || pi)``. Optimal scoring rules are monotone, so
    rank bins of raw and of loss-corrected scores give the same ``I_k``.

    Returns:
      ``I`` ``[..., K]``.
    """
    _check_experiments(experiments)
    return _mutual_information(experiments)


@jax.jit
def _mutual_information(experiments: RevealedExperiments) -> Array:
    g = experiments.posterior
    pi = experiments.prior[..., None]
    kl = xlogy(g, g) - xlogy(g, pi) + xlogy(1.0 - g, 1.0 - g) - xlogy(1.0 - g, 1.0 - pi)
    p = experiments.probability
    return jnp.sum(jnp.where(p > 0, p * kl, 0.0), axis=-1)


# ----------------------------------------------------------------------------------------------
# NIS, NIAC, cost bounds and the Shannon lambda
# ----------------------------------------------------------------------------------------------


def _check_value_matrix(G: ArrayLike, name: str = "G") -> None:
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

    Args:
      G: value matrix ``[..., K, K]`` (:func:`value_matrix`).
    """
    _check_value_matrix(G)
    return _nis_check(G)


@jax.jit
def _nis_check(G: ArrayLike) -> NISCheck:
    switch = _switch_gains(_float(G))
    off = ~jnp.eye(switch.shape[-1], dtype=bool)
    margin = jnp.max(jnp.where(off, switch, -jnp.inf), axis=(-2, -1))
    return NISCheck(margin, (switch > 0) & off)


def _switch_gains(G: Array) -> Array:
    """``D[k, j] = G[k, j] - G[k, k]``: the gain in problem ``k`` from experiment ``j``."""
    return G - jnp.diagonal(G, axis1=-2, axis2=-1)[..., :, None]


def _edge_weights(G: Array) -> Array:
    """``E[j, k] = w(j -> k) = G[k, k] - G[k, j]``: the NIAC graph's edge weights."""
    return -jnp.swapaxes(_switch_gains(G), -2, -1)


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

    The margin is the minimum cycle mean (Karp's algorithm: ``K`` rounds of min-plus products,
    ``O(K^3)``), chosen over the most negative cycle *sum* because it is computable exactly in
    polynomial time with negative cycles present and does not grow with the cycle's length. The
    reported cycle is read off Karp's minimising walk; the independent verdict is Floyd-Warshall's
    (a negative diagonal entry of the shortest-path matrix). Both vectorise over leading axes.

    Args:
      G: value matrix ``[..., K, K]`` (:func:`value_matrix`).
    """
    _check_value_matrix(G)
    return _niac_check(G)


@jax.jit
def _niac_check(G: ArrayLike) -> NIACCheck:
    E = _edge_weights(_float(G))
    mean, cycle, length = _min_cycle_mean(E, with_cycle=True)
    distance = _floyd_warshall(E)
    negative = jnp.any(jnp.diagonal(distance, axis1=-2, axis2=-1) < 0, axis=-1)
    return NIACCheck(-mean, cycle, length, negative)


def _min_cycle_mean(E: Array, with_cycle: bool = False):
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


def _floyd_warshall(E: Array) -> Array:
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


def niac_assignment_check(G: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """NIAC as an assignment problem, on the host: ``max_sigma sum_k G[k, sigma(k)]``.

    Cyclical monotonicity holds exactly when the identity is an optimal assignment of experiments
    to decision problems; a better permutation decomposes into improving cycles. Solved with
    ``scipy.optimize.linear_sum_assignment`` (an independent check of :func:`niac_check`; it is
    not jittable).

    Args:
      G: value matrix ``[..., K, K]``.

    Returns:
      ``(gain, sigma)``: ``max_sigma sum_k G[k, sigma(k)] - sum_k G[k, k] >= 0`` ``[...]``
      (positive exactly when NIAC fails) and an optimal ``sigma`` ``[..., K]``.
    """
    _check_value_matrix(G)
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
    _check_value_matrix(G)
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
      G: value matrix ``[..., K, K]``.
      reference: the model whose cost is set to 0.
    """
    _check_value_matrix(G)
    K = np.shape(G)[-1]
    if not isinstance(reference, int | np.integer) or not 0 <= reference < K:
        raise ValueError(f"reference must be a model index in [0, {K}); got {reference!r}")
    return _revealed_cost_bounds(G, int(reference))


@functools.partial(jax.jit, static_argnums=(1,))
def _revealed_cost_bounds(G: ArrayLike, reference: int) -> CostBounds:
    d = _floyd_warshall(_edge_weights(_float(G)))
    feasible = jnp.all(jnp.diagonal(d, axis1=-2, axis2=-1) >= 0, axis=-1)
    lower = V.nan_unless(feasible[..., None], -d[..., :, reference])
    upper = V.nan_unless(feasible[..., None], d[..., reference, :])
    return CostBounds(lower, upper, feasible)


class LambdaInterval(NamedTuple):
    """The values of ``lambda`` for which Shannon cost ``C_k = lambda I_k`` fits the data.

    Attributes:
      lower, upper: the interval's ends (``lambda >= 0``; ``upper = inf`` when unbounded),
        ``[...]``.
      rejected: whether no ``lambda`` fits (the interval is empty), ``[...]``.
    """

    lower: Array
    upper: Array
    rejected: Array


def shannon_lambda_interval(
    G: ArrayLike, information: ArrayLike, atol: float = 1e-6
) -> LambdaInterval:
    """Shannon cost with one ``lambda`` requires ``lambda (I_k - I_j) <= G[k, k] - G[k, j]``.

    Pairs with ``I_k > I_j`` bound ``lambda`` above, pairs with ``I_k < I_j`` below; pairs of equal
    information (within ``atol`` nats) need ``G[k, k] >= G[k, j] - atol`` whatever ``lambda``. The
    interval is intersected with ``lambda >= 0``.

    Args:
      G: value matrix ``[..., K, K]``.
      information: ``I`` ``[..., K]`` (:func:`mutual_information`).
      atol: the information difference below which two experiments count as equally informative.
    """
    _check_value_matrix(G)
    if np.shape(information) != np.shape(G)[:-1]:
        raise ValueError(
            f"information must have shape {np.shape(G)[:-1]} (one per model); got "
            f"{np.shape(information)}"
        )
    return _shannon_lambda_interval(G, information, atol)


@jax.jit
def _shannon_lambda_interval(G: ArrayLike, information: ArrayLike, atol: float) -> LambdaInterval:
    slack = -_switch_gains(_float(G))  # [k, j]: G[k, k] - G[k, j]
    I = _float(information)
    dI = I[..., :, None] - I[..., None, :]  # I_k - I_j
    ratio = slack / jnp.where(jnp.abs(dI) > atol, dI, 1.0)
    upper = jnp.min(jnp.where(dI > atol, ratio, jnp.inf), axis=(-2, -1))
    lower = jnp.maximum(jnp.max(jnp.where(dI < -atol, ratio, -jnp.inf), axis=(-2, -1)), 0.0)
    equal_fails = jnp.any((jnp.abs(dI) <= atol) & (slack < -atol), axis=(-2, -1))
    return LambdaInterval(lower, upper, (lower > upper) | equal_fails)


# ----------------------------------------------------------------------------------------------
# The Shannon agent
# ----------------------------------------------------------------------------------------------


def _binary_entropy(g: Array) -> Array:
    return -xlogy(g, g) - xlogy(1.0 - g, 1.0 - g)


def shannon_agent(
    loss: LossLike,
    prior: ArrayLike,
    lam: ArrayLike,
    n_grid: int = 513,
    n_refine: int = 12,
) -> RevealedExperiments:
    """The experiment of a learner with Shannon cost: the concave envelope of ``N`` at the prior.

    The learner chooses posteriors to maximise ``E[-l*(gamma) + lambda H(gamma)]`` subject to
    ``E[gamma] = pi`` (value minus ``lambda`` times the mutual information, up to the constant
    ``lambda H(pi)``): the concave envelope of ``N(gamma) = -l*(gamma) + lambda H(gamma)`` at
    ``pi``. In one dimension two posteriors ``g_1 <= pi <= g_2`` suffice, so the envelope is the
    best chord ``max [(g_2 - pi) N(g_1) + (pi - g_1) N(g_2)] / (g_2 - g_1)``: found on a grid of
    pairs, refined by zooming ``n_refine`` times (each a fourth of the previous spacing), and an
    interior posterior is then placed exactly by bisection on the tangency condition
    ``N'(g)(g_2 - g_1) = N(g_2) - N(g_1)``. Under the beta-weighted log loss
    ``gamma (1 - gamma) N''(gamma) = beta (1 - beta) / Z(gamma) - lambda``, so ``N`` is convex
    then concave (``lambda < beta (1 - beta) / Z``, small ``gamma`` first, where ``beta > 1/2``)
    and the agent uses at most two posteriors.

    Args:
      loss: a binary loss (anything :func:`iml.loss_spec` reads), or a batched specification
        (e.g. an array of betas ``[K]``): one agent per loss.
      prior: ``pi`` in ``(0, 1)``.
      lam: ``lambda >= 0``, the cost of a nat of mutual information.
      n_grid: grid points per posterior for the first search.
      n_refine: zoom rounds.

    Returns:
      :class:`RevealedExperiments` ``[K, 2]`` (``K = 1`` for one loss): the posteriors
      ``g_1 <= g_2`` and their probabilities. Without learning both posteriors are ``pi``.
    """
    spec = loss_spec(loss)
    if spec.multiclass:
        raise ValueError(f"loss must be a binary loss; got the {spec.describe()}")
    V.check_interval("prior", prior, 0.0, 1.0, open_low=True, open_high=True)
    V.check_interval("lam", lam, 0.0, np.inf, open_low=False, open_high=True)
    if np.ndim(prior) or np.ndim(lam):
        raise ValueError("prior and lam must be scalars; map over them with jax.vmap")
    V.check_count("n_grid", n_grid, 2)
    V.check_count("n_refine", n_refine, 0)
    agent = functools.partial(
        _shannon_agent, prior=prior, lam=lam, n_grid=n_grid, n_refine=n_refine
    )
    if not spec.batch_shape:  # one model: K = 1
        spec = jax.tree.map(lambda x: jnp.asarray(x)[None], spec)
    for _ in spec.batch_shape:
        agent = jax.vmap(agent)
    return agent(spec)


@functools.partial(jax.jit, static_argnames=("n_grid", "n_refine"))
def _shannon_agent(
    spec: LossSpec, prior: ArrayLike, lam: ArrayLike, n_grid: int, n_refine: int
) -> RevealedExperiments:
    pi = jnp.asarray(prior, jnp.float32)
    lam = jnp.asarray(lam, jnp.float32)

    def concavified(g: Array) -> Array:
        return -spec.minimised_expected_loss(g) + lam * _binary_entropy(g)

    def best_chord(g1: Array, g2: Array) -> tuple[Array, Array, Array]:
        n1, n2 = concavified(g1), concavified(g2)
        gap = g2[None, :] - g1[:, None]
        t = jnp.clip((pi - g1[:, None]) / jnp.where(gap > 0, gap, 1.0), 0.0, 1.0)
        value = jnp.where(gap > 0, (1.0 - t) * n1[:, None] + t * n2[None, :], n1[:, None])
        flat = jnp.argmax(value)
        i, j = flat // g2.shape[0], flat % g2.shape[0]
        return g1[i], g2[j], value.reshape(-1)[flat]

    u = jnp.linspace(0.0, 1.0, n_grid, dtype=jnp.float32)
    g1, g2, _ = best_chord(pi * u, 1.0 - (1.0 - pi) * (1.0 - u))
    step1, step2 = pi / (n_grid - 1), (1.0 - pi) / (n_grid - 1)
    zoom = jnp.linspace(-2.0, 2.0, 17, dtype=jnp.float32)

    def refine(_, carry):
        g1, g2, step1, step2 = carry
        lo1, hi1 = jnp.maximum(g1 - 2 * step1, 0.0), jnp.minimum(g1 + 2 * step1, pi)
        lo2, hi2 = jnp.maximum(g2 - 2 * step2, pi), jnp.minimum(g2 + 2 * step2, 1.0)
        w = (zoom + 2.0) / 4.0
        grid1 = jnp.concatenate([lo1 + (hi1 - lo1) * w, g1[None]])
        grid2 = jnp.concatenate([lo2 + (hi2 - lo2) * w, g2[None]])
        g1, g2, _ = best_chord(grid1, grid2)
        return g1, g2, step1 / 4.0, step2 / 4.0

    g1, g2, _, _ = jax.lax.fori_loop(0, n_refine, refine, (g1, g2, step1, step2))

    # The chord's value is flat at its maximum, so float32 values place an interior posterior
    # only to about 1e-4; its first-order condition N'(g)(g2 - g1) = N(g2) - N(g1) (tangency)
    # places it to float32 resolution. N' by the envelope theorem: l*'(g) = L(c(g), 1) - L(c(g), 0).
    def slope(g: Array) -> Array:
        a = spec.optimal_score(g)
        loss_slope = spec.loss(a, jnp.ones_like(a)) - spec.loss(a, jnp.zeros_like(a))
        return -loss_slope + lam * (jnp.log1p(-g) - jnp.log(g))

    def tangency(g: Array, lo: Array, hi: Array, other: Array, sign: float) -> Array:
        def condition(x: Array) -> Array:
            return sign * (slope(x) * (x - other) - (concavified(x) - concavified(other)))

        a = jnp.maximum(g - 0.02, 0.5 * (g + lo))
        b = jnp.minimum(g + 0.02, 0.5 * (g + hi))
        brackets = (g > lo) & (g < hi) & (condition(a) > 0) & (condition(b) < 0)

        def halve(_, ab):
            a, b = ab
            m = 0.5 * (a + b)
            up = condition(m) > 0
            return jnp.where(up, m, a), jnp.where(up, b, m)

        a, b = jax.lax.fori_loop(0, 40, halve, (a, b))
        return jnp.where(brackets, 0.5 * (a + b), g)

    for _ in range(2):
        g2 = tangency(g2, pi, 1.0, g1, 1.0)
        g1 = tangency(g1, 0.0, pi, g2, -1.0)
    gap = g2 - g1
    learns = (pi - g1 > 1e-6) & (g2 - pi > 1e-6)  # else one posterior, the prior
    p2 = jnp.where(learns, (pi - g1) / jnp.where(learns, gap, 1.0), 0.0)
    posterior = jnp.where(learns, jnp.stack([g1, g2]), jnp.stack([pi, pi]))
    return RevealedExperiments(jnp.stack([1.0 - p2, p2]), posterior, pi)


# ----------------------------------------------------------------------------------------------
# Simulation
# ----------------------------------------------------------------------------------------------


def simulate_observations(
    key: Array, experiments: RevealedExperiments, n: int
) -> tuple[Array, Array]:
    """Draw ``n`` observations ``(signals, label)`` from experiments that share their prior.

    The label is ``y ~ Bernoulli(pi)``; given ``y`` each model's signal is drawn independently
    from ``P_k(s | y) = P_k(s) P_k(y | s) / P(y)``, so each model's revealed experiment is the
    given one (the joint law across models is conditionally independent given the label).

    Args:
      key: ``jax.random`` key.
      experiments: :class:`RevealedExperiments` ``[K, S]`` (prior taken from the first model).
      n: observations.

    Returns:
      ``(signals [K, n] int32, labels [n] int32)``.
    """
    _check_experiments(experiments)
    if np.ndim(experiments.probability) != 2:
        raise ValueError(
            "experiments must be unbatched [K, S]; map over batches with jax.vmap; got shape "
            f"{np.shape(experiments.probability)}"
        )
    prior = V.concrete_value(experiments.prior)
    if prior is not None and np.ptp(prior) > 1e-4:
        raise ValueError(
            f"experiments must share one prior; got priors from {prior.min():.6g} "
            f"to {prior.max():.6g}"
        )
    V.check_count("n", n)
    return _simulate_observations(key, experiments, int(n))


@functools.partial(jax.jit, static_argnums=(2,))
def _simulate_observations(
    key: Array, experiments: RevealedExperiments, n: int
) -> tuple[Array, Array]:
    key_y, key_s = jax.random.split(key)
    p, g = experiments.probability, experiments.posterior
    pi = experiments.prior[0]
    y = jax.random.uniform(key_y, (n,)) < pi
    given_y = jnp.stack([p * (1.0 - g) / (1.0 - pi), p * g / pi], axis=1)  # [K, 2, S]
    cdf = jnp.cumsum(given_y, axis=-1)[..., :-1]  # [K, 2, S - 1]
    u = jax.random.uniform(key_s, (p.shape[0], n))
    rows = cdf[:, y.astype(jnp.int32)]  # [K, n, S - 1]
    signals = jnp.sum(u[..., None] >= rows, axis=-1).astype(jnp.int32)
    return signals, y.astype(jnp.int32)


def simulate_gaussian_agents(
    key: Array,
    losses: LossLike | Sequence[LossLike],
    precision: ArrayLike,
    prior: ArrayLike,
    n: int,
) -> tuple[Array, Array]:
    """Scores of Bayesian agents with Gaussian signals, each reporting optimally for its loss.

    ``y ~ Bernoulli(pi)``; agent ``k`` observes its own signal ``x_k ~ N(d_k y, 1)`` (independent
    across agents given ``y``), forms the posterior
    ``gamma_k = sigmoid(logit(pi) + d_k x_k - d_k^2 / 2)`` and reports ``c^{L_k}(gamma_k)``
    (eq. ``choice``). Equal precisions ``d_k`` are capacity-constrained agents (one feasible
    experiment for every loss); precisions chosen per loss are costly-learning agents.

    Args:
      key: ``jax.random`` key.
      losses: ``K`` binary losses (as :func:`value_matrix` reads them).
      precision: ``d`` ``[K]`` (or a scalar for all), the separation of the signal's means in
        standard deviations.
      prior: ``pi`` in ``(0, 1)``.
      n: observations.

    Returns:
      ``(scores [K, n], labels [n] int32)``.
    """
    n_models = _loss_count(losses)
    if n_models is None:  # one loss for every agent
        n_models = np.shape(precision)[0] if np.ndim(precision) == 1 else 1
        losses = [losses] * n_models
    if np.shape(precision) not in ((), (n_models,)):
        raise ValueError(
            f"precision must be a scalar or one per loss ({n_models}); got shape "
            f"{np.shape(precision)}"
        )
    specs = _as_losses(losses, n_models)
    V.check_interval("precision", precision, 0.0, np.inf, open_low=False, open_high=True)
    V.check_interval("prior", prior, 0.0, 1.0, open_low=True, open_high=True)
    V.check_count("n", n)
    precision = jnp.broadcast_to(_float(precision), (n_models,))
    return _simulate_gaussian_agents(key, specs, precision, prior, int(n))


@functools.partial(jax.jit, static_argnums=(4,))
def _simulate_gaussian_agents(
    key: Array, losses: LossSpec | list[LossSpec], precision: Array, prior: ArrayLike, n: int
) -> tuple[Array, Array]:
    key_y, key_x = jax.random.split(key)
    pi = jnp.asarray(prior, jnp.float32)
    y = (jax.random.uniform(key_y, (n,)) < pi).astype(jnp.float32)
    d = precision[:, None]
    x = d * y + jax.random.normal(key_x, (precision.shape[0], n))
    posterior = jax.nn.sigmoid(jnp.log(pi) - jnp.log1p(-pi) + d * x - 0.5 * d * d)
    if isinstance(losses, LossSpec):
        scores = jax.vmap(LossSpec.optimal_score)(losses, posterior)
    else:
        scores = jnp.stack(
            [spec.optimal_score(g) for spec, g in zip(losses, posterior, strict=True)]
        )
    return scores, y.astype(jnp.int32)


# ----------------------------------------------------------------------------------------------
# NIAS: loss calibration per model
# ----------------------------------------------------------------------------------------------


class NIASTest(NamedTuple):
    """No improving action switches: one test across the ``K`` models and their bins.

    Attributes:
      calibration_error: ``sum_s |O_{k,s} - E_{k,s}| / N``, the binned calibration error of each
        model's loss-corrected scores (the size of the departure), ``[K]``.
      bin_p_value: each bin's two-sided p-value, ``[K, S]`` (1 for an empty bin).
      p_value: each model's familywise p-value: the smallest Holm-adjusted p-value of its bins
        over all ``K x S`` bins, ``[K]``.
      violated: NIAS rejected for model ``k`` (``p_value <= 1 - confidence``), ``[K]``; the
        chance of flagging any model for which NIAS holds is at most ``1 - confidence``.
    """

    calibration_error: Array
    bin_p_value: Array
    p_value: Array
    violated: Array


def nias_test(
    scores: ArrayLike,
    labels: ArrayLike,
    losses: LossLike | Sequence[LossLike],
    n_bins: int = 10,
    strategy: str = "adaptive",
    weight: ArrayLike | None = None,
    *,
    min_count: int | None = None,
    confidence: float = 0.95,
) -> NIASTest:
    """NIAS for ``K`` models at once: each reports optimally for its revealed posteriors.

    NIAS is loss calibration (Definition 2): by Proposition 4 a loss-calibrated model's labels
    are ``y ~ Bernoulli(g)`` given its scores, with ``g = (c^{L_k})^{-1}(a)`` the loss-corrected
    score. In each bin ``s`` of model ``k`` (the bins of :func:`revealed_experiments`, which
    depend on the scores alone) the positives ``O_{k,s}`` then have mean
    ``E_{k,s} = sum_{i in s} g_i``, and the two-sided p-value of ``O_{k,s}`` is exact: the count
    is a sum of independent Bernoullis, whose tails beyond its mean are bounded by those of the
    binomial with the same mean (Hoeffding 1956), so the binomial ``(n_s, E_{k,s} / n_s)``
    gives a valid p-value with no resampling and no floor. With observation weights the
    p-value is the normal approximation of ``(O - E) / sqrt(sum w^2 g (1 - g))``. Holm's
    step-down procedure over the ``K x S`` non-empty bins (valid whatever their dependence:
    the models share labels) controls the familywise level, so the test can reject at
    ``K = 64`` as at ``K = 1``.

    Args:
      scores, labels, n_bins, strategy, min_count: as :func:`revealed_experiments`.
      losses: ``K`` binary losses, one per model.
      weight: non-negative observation weights ``[N]``, or ``None`` (exact binomial p-values).
      confidence: the test is at level ``1 - confidence``.
    """
    _check_scores(scores, labels, n_bins, strategy)
    n_models, n = np.shape(scores)
    if weight is not None:
        V.check_shape("weight", weight, (n,))
    _check_weight(weight, n)
    V.check_interval("confidence", confidence, 0.0, 1.0, open_low=True, open_high=True)
    specs = _as_losses(losses, n_models)
    signals = _signals(scores, n_bins, strategy, specs, _min_count(min_count))
    return _nias_test(scores, signals, labels, specs, weight, int(n_bins), float(confidence))


def _loss_corrected(losses: LossSpec | list[LossSpec], scores: Array) -> Array:
    """``(c^{L_k})^{-1}(a_k)`` for every model ``[K, N]``; the score itself where not invertible."""
    a = _float(scores)
    if isinstance(losses, LossSpec):
        g = jax.vmap(LossSpec.loss_corrected_score)(losses, a)
    else:
        g = jnp.stack([spec.loss_corrected_score(x) for spec, x in zip(losses, a, strict=True)])
    return jnp.clip(jnp.where(jnp.isnan(g), a, g), 0.0, 1.0)


def _per_signal(values: Array, signals: Array, n_signals: int) -> Array:
    """``sum_{i: s_ki = s} values[..., k, i]`` ``[..., K, S]`` by one segment sum per model."""

    def one(v: Array, s: Array) -> Array:
        return jax.ops.segment_sum(v, s, n_signals)

    return jax.vmap(one)(values, signals)


@functools.partial(jax.jit, static_argnums=(5, 6))
def _nias_test(scores, signals, labels, specs, weight, n_bins, confidence):
    g = _loss_corrected(specs, scores)
    y = _labels(labels, g)
    w = jnp.ones_like(y) if weight is None else _weights(weight, y)
    K = g.shape[0]
    count = _per_signal(jnp.broadcast_to(w, g.shape), signals, n_bins)
    observed = _per_signal(jnp.broadcast_to(w * y, g.shape), signals, n_bins)
    expected = _per_signal(w * g, signals, n_bins)
    filled = count > 0
    if weight is None:
        p = _binomial_two_sided(observed, count, expected)
    else:
        variance = _per_signal(w * w * g * (1.0 - g), signals, n_bins)
        z = (observed - expected) / jnp.sqrt(jnp.maximum(variance, jnp.finfo(g.dtype).tiny))
        mismatch = jnp.abs(observed - expected) > 1e-6 * count
        p = jnp.where(variance > 0, 2.0 * ndtr(-jnp.abs(z)), jnp.where(mismatch, 0.0, 1.0))
    p = jnp.where(filled, p, 1.0)
    adjusted = _holm_adjusted(p.reshape(-1), jnp.sum(filled)).reshape(K, -1)
    p_model = jnp.min(adjusted, axis=-1)
    error = jnp.sum(jnp.abs(observed - expected), axis=-1) / jnp.sum(w)
    return NIASTest(error, p, p_model, p_model <= 1.0 - confidence)


def _binomial_two_sided(observed: Array, n: Array, expected: Array) -> Array:
    """``min(1, 2 min(P(X <= O), P(X >= O)))`` for ``X ~ Binomial(n, E / n)`` (counts as floats)."""
    safe_n = jnp.maximum(n, 1.0)
    q = jnp.clip(expected / safe_n, 0.0, 1.0)
    o = jnp.clip(jnp.round(observed), 0.0, n)
    # P(X <= o) = I_{1-q}(n - o, o + 1); P(X >= o) = I_q(o, n - o + 1).
    lower = jnp.where(o >= n, 1.0, betainc(jnp.maximum(n - o, 1.0), o + 1.0, 1.0 - q))
    upper = jnp.where(o <= 0, 1.0, betainc(jnp.maximum(o, 1.0), n - o + 1.0, q))
    return jnp.minimum(1.0, 2.0 * jnp.minimum(lower, upper))


def _holm_adjusted(p_value: Array, m: Array) -> Array:
    """Holm's adjusted p-values over the first axis, ``m`` tests counted (the rest are 1s):
    ``max_{j <= i} min(1, (m - j + 1) p_(j))`` in sorted order."""
    order = jnp.argsort(p_value)
    ranked = jnp.take(p_value, order)
    factor = jnp.maximum(m - jnp.arange(p_value.shape[0]), 1).astype(ranked.dtype)
    adjusted = jax.lax.cummax(jnp.minimum(1.0, factor * ranked))
    return jnp.zeros_like(p_value).at[order].set(adjusted)


# ----------------------------------------------------------------------------------------------
# Everything, with paired bootstrap inference
# ----------------------------------------------------------------------------------------------


RESAMPLINGS = ("poisson", "multinomial")

# Poisson(1) multiplicities quantised to multiples of 1/256, four per 32 random bits:
# P(0..5) = (94, 95, 46, 16, 4, 1) / 256 keeps the mean and the variance at exactly 1 (what the
# bootstrap's validity rests on) and lies within 0.6% of Poisson(1) in total variation.
_POISSON_COUNTS = np.repeat(np.arange(6), [94, 95, 46, 16, 4, 1]).astype(np.float32)


def _poisson_counts(key: Array, n: int, n_bootstrap: int) -> Array:
    """Independent Poisson(1)-like multiplicities ``[n_bootstrap, n]`` (see above)."""
    words = jax.random.bits(key, (n_bootstrap, (n + 3) // 4), jnp.uint32)
    parts = [(words >> shift) & 0xFF for shift in (0, 8, 16, 24)]
    u = jnp.concatenate(parts, axis=-1)[:, :n]
    return jnp.take(jnp.asarray(_POISSON_COUNTS), u.astype(jnp.int32))


def _resampling_counts(key: Array, n: int, n_bootstrap: int, resampling: str) -> Array:
    if resampling == "poisson":
        return _poisson_counts(key, n, n_bootstrap)
    return _bootstrap_counts(key, n, n_bootstrap)


def _check_resampling(resampling: str) -> None:
    V.check_choice("resampling", resampling, RESAMPLINGS)


def paired_bootstrap_weights(
    key: Array, n: int, n_bootstrap: int, resampling: str = "poisson"
) -> Array:
    """Resampling multiplicities ``[n_bootstrap, n]``: one paired bootstrap replicate per row.

    Used as observation weights for every model at once (:func:`experiments_from_signals`), a row
    resamples the same observations for every ``k``, without gathering the data.

    Args:
      key: ``jax.random`` key.
      n: observations.
      n_bootstrap: replicates.
      resampling: ``"multinomial"``, the classical bootstrap's counts (each row sums to ``n``), or
        ``"poisson"``, independent Poisson(1) counts (the Poisson bootstrap, the multinomial's
        large-``n`` limit; rows sum to ``n`` on average), quantised to probabilities in
        multiples of 1/256 with mean and variance exactly 1. Both are exchangeable weights of
        mean 1 and variance 1 (to ``O(1/n)``), which is what the bootstrap's validity rests on
        (Praestgaard & Wellner 1993); the Poisson counts take a quarter of a random word each
        and no scatter, so they are several times faster on CPU.
    """
    V.check_count("n", n)
    V.check_count("n_bootstrap", n_bootstrap)
    _check_resampling(resampling)
    return jax.jit(_resampling_counts, static_argnums=(1, 2, 3))(
        key, int(n), int(n_bootstrap), resampling
    )


def _ordered_keys(x: Array) -> Array:
    """float32 -> int32 keys in the same order (sign-magnitude to two's complement)."""
    bits = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)
    return jnp.where(bits >= 0, bits, bits ^ jnp.int32(0x7FFFFFFF))


def _from_ordered_keys(keys: Array) -> Array:
    """The inverse of :func:`_ordered_keys`."""
    bits = jnp.where(keys >= 0, keys, keys ^ jnp.int32(0x7FFFFFFF))
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def _bootstrap_interval(samples: Array, confidence: float) -> Array:
    """Percentile interval over axis 0 by order statistics, NaN ignored: ``[2, ...]``.

    The ends are the order statistics of ranks ``floor(a (n - 1))`` and
    ``ceil((1 - a) (n - 1))`` (``a = (1 - confidence) / 2``, ``n`` the non-NaN replicates),
    rounded outward. Each is found by bisection on the floats' ordered integer keys (32 rounds
    of counting): XLA's CPU sort of a ``[B, K, K]`` stack is several times slower.
    """
    valid = ~jnp.isnan(samples)
    n = jnp.sum(valid, axis=0)
    tail = (1.0 - confidence) / 2.0
    ranks = jnp.stack([jnp.floor(tail * (n - 1)), jnp.ceil((1.0 - tail) * (n - 1))])
    ranks = ranks.astype(jnp.int32)
    keys = _ordered_keys(samples)
    big = jnp.iinfo(jnp.int32).max
    # Invariant: fewer than rank + 1 keys <= lo, at least rank + 1 keys <= hi.
    hi = jnp.broadcast_to(jnp.max(jnp.where(valid, keys, -big), axis=0), ranks.shape)
    lo = jnp.broadcast_to(jnp.min(jnp.where(valid, keys, big), axis=0) - 1, ranks.shape)

    def halve(bounds: tuple[Array, Array]) -> tuple[Array, Array]:
        lo, hi = bounds
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)  # no int32 overflow
        below = jnp.sum(valid[None] & (keys[None] <= mid[:, None]), axis=1)
        enough = below >= ranks + 1
        return jnp.where(enough, lo, mid), jnp.where(enough, mid, hi)

    _, hi = jax.lax.while_loop(lambda b: jnp.any(b[1] - b[0] > 1), halve, (lo, hi))
    return jnp.where(n > 0, _from_ordered_keys(hi), jnp.nan)


class MarginTest(NamedTuple):
    """A one-sided bootstrap test that a margin (NIS or NIAC) is above zero.

    Attributes:
      margin: the estimate.
      lower_bound: its lower confidence bound at ``confidence``.
      critical_value: the least-favourable-null critical value of the statistic.
      p_value: the bootstrap p-value ``(1 + #{T* >= T}) / (1 + n)`` over the ``n`` null draws.
      violated: ``lower_bound > 0``: the learning model is rejected.
    """

    margin: Array
    lower_bound: Array
    critical_value: Array
    p_value: Array
    violated: Array


class RevealedReport(NamedTuple):
    """Everything :func:`reveal` finds (a pytree of arrays; intervals are ``[2, ...]``).

    Attributes:
      experiments: the revealed experiments ``[K, S]``.
      value_matrix, value_matrix_interval: ``G [K, K]`` and its percentile interval.
      information, information_interval: ``I_k`` in nats ``[K]`` and its interval.
      nis: the point check (margin, violating pairs).
      nis_test: the bootstrap test of its margin (studentized pairs).
      nis_pairs: pairs ``(k, j)`` whose own lower bound of ``G[k, j] - G[k, k]`` is above zero at
        the simultaneous level, ``[K, K]``.
      niac: the point check (margin = minus the minimum cycle mean, the cycle).
      niac_test: the bootstrap test of its margin.
      cost_bounds: revealed bounds on ``C_k - C_ref``.
      cost_lower_interval, cost_upper_interval: percentile intervals of each bound over the
        replicates in which the bounds are feasible, ``[2, K]``.
      cost_feasible_fraction: the fraction of replicates in which NIAC holds exactly.
      shannon: the ``lambda`` interval.
      lambda_lower_interval, lambda_upper_interval: percentile intervals of its ends, ``[2]``.
      nias: NIAS across the models (:func:`nias_test`), or ``None`` when not run.
    """

    experiments: RevealedExperiments
    value_matrix: Array
    value_matrix_interval: Array
    information: Array
    information_interval: Array
    nis: NISCheck
    nis_test: MarginTest
    nis_pairs: Array
    niac: NIACCheck
    niac_test: MarginTest
    cost_bounds: CostBounds
    cost_lower_interval: Array
    cost_upper_interval: Array
    cost_feasible_fraction: Array
    shannon: LambdaInterval
    lambda_lower_interval: Array
    lambda_upper_interval: Array
    nias: NIASTest | None


def reveal(
    scores: ArrayLike,
    labels: ArrayLike,
    losses: LossLike | Sequence[LossLike],
    n_bins: int = 10,
    strategy: str = "adaptive",
    weight: ArrayLike | None = None,
    *,
    n_bootstrap: int = 1000,
    key: Array | None = None,
    confidence: float = 0.95,
    reference: int = 0,
    resampling: str = "poisson",
    nias: bool = True,
    min_count: int | None = None,
    seed_scores: ArrayLike | None = None,
    seed_average: str = "score",
) -> RevealedReport:
    """Revealed experiments of ``K`` models and tests of learning models, with paired bootstrap.

    From the scores of models trained under ``losses`` on common labels: the revealed experiments
    (:func:`revealed_experiments`), the value matrix ``G`` (:func:`value_matrix`), mutual
    information ``I_k``, NIS, NIAC, the revealed cost bounds, the Shannon ``lambda`` interval and,
    optionally, NIAS per model (:func:`nias_test`).

    Inference. Each bootstrap replicate reweights the observations by one vector of resampling
    counts shared by every model (paired; :func:`paired_bootstrap_weights`), with every model's
    bins held fixed. ``G``, ``I``, the cost bounds and the ends of the ``lambda`` interval get
    percentile intervals (order statistics, rounded outward). NIS and NIAC are tested at the
    least-favourable null, where every inequality binds, by the recentred bootstrap: a margin is
    a maximum over many noisy inequalities, biased upward, so its critical value ``c`` is a
    ``confidence`` quantile of the maximum of the *recentred* replicate statistics, which holds
    the size however many pairs or cycles are compared (``K = 4`` or ``64``):

    * NIS (studentized maximum over pairs): ``D = G[k, j] - G[k, k]``, ``se`` its bootstrap
      standard deviation over the first half of the replicates, ``T* = max_{k != j} (D* - D) /
      se`` over the second half (so that the statistic ``max D / se`` and its null share the same
      noisy ``se``; with one set of replicates for both the test over-rejects at a few hundred
      replicates). The bounds ``D - c se`` hold for every pair at once, and the margin's lower
      bound is ``max (D - c se)``; ``nis_pairs`` marks the pairs whose own bound is positive.
    * NIAC (minimum cycle mean, :func:`niac_check`): ``T* = -mu*(w* - w)`` over the replicates'
      edge weights ``w*``, and the margin's lower bound is ``margin - c``. Cycles cannot be
      studentized one by one (there are too many), and rescaling the edges would change which
      cycles are negative; the mean keeps the units of ``G``.

    A learning model is rejected only when the lower bound is above zero; where its inequalities
    are slack the test is conservative. The bootstrap approximates the bins' posteriors well
    when each bin holds enough positives and negatives; deciles of precise models at rare labels
    do not (digits' lowest deciles hold 0 positives), and there NIS's size at 5% was 10.4%
    (``experiments.reveal_size_power``, digits' regime). The default ``"adaptive"`` bins merge
    deciles until each holds :data:`MIN_COUNT` expected positives and negatives, which brought
    every simulated regime of the stored runs back to its level (``docs/results/revealed``).

    Args:
      scores: ``[K, N]`` scores of ``K`` models in ``[0, 1]``.
      labels: ``{0, 1}`` labels ``[N]``.
      losses: the ``K`` binary losses the models were trained with (a batched
        :class:`iml.LossSpec`, an array of betas, or a sequence of losses).
      n_bins, strategy: the bins (signals) of each model (:func:`revealed_experiments`);
        ``"adaptive"`` by default (see above).
      weight: non-negative observation weights ``[N]``.
      n_bootstrap: paired bootstrap replicates (at least 2; hundreds for the tests' levels).
      key: ``jax.random`` key (required).
      confidence: the level of intervals and lower bounds (tests at ``1 - confidence``).
      reference: the model whose cost is 0 in the cost bounds.
      resampling: ``"poisson"`` or ``"multinomial"`` counts (:func:`paired_bootstrap_weights`).
      nias: whether to run NIAS (:func:`nias_test`, on the same bins).
      min_count: the least expected positives and negatives of an ``"adaptive"`` bin.
      seed_scores: ``[M, K, N]`` the scores of each model's training seeds (each seed's own
        ensemble), NaN rows for the seeds a model lacks; ``scores`` is then their average. Each
        replicate also resamples, per model, its seeds with replacement, averages the drawn
        seeds' scores and bins them anew, so that the intervals and tests cover the noise of
        training between seeds as well as that of the evaluation rows.
      seed_average: how drawn seeds pool: ``"score"`` (their mean score) or ``"logit"`` (the
        score of their mean logit), as the run's ensembles pool members.

    Returns:
      A :class:`RevealedReport`.
    """
    _check_scores(scores, labels, n_bins, strategy)
    n_models, n = np.shape(scores)
    if n_models < 2:
        raise ValueError(f"scores must hold at least 2 models to compare; got K = {n_models}")
    if weight is not None:
        V.check_shape("weight", weight, (n,))
    _check_weight(weight, n)
    V.check_count("n_bootstrap", n_bootstrap, 2)
    _check_bootstrap(n_bootstrap, key, confidence)
    if not isinstance(reference, int | np.integer) or not 0 <= reference < n_models:
        raise ValueError(f"reference must be a model index in [0, {n_models}); got {reference!r}")
    _check_resampling(resampling)
    specs = _as_losses(losses, n_models)
    key_boot = jax.random.split(key)[0]  # the bootstrap draws from the first half of the key
    V.check_choice("seed_average", seed_average, ("score", "logit"))
    seeds = None if seed_scores is None else _check_seed_scores(seed_scores, n_models, n)
    signals = _signals(scores, n_bins, strategy, specs, _min_count(min_count))
    # Unit weights rather than None: weighted and unweighted calls share one compiled program.
    weights = np.ones(n, np.float32) if weight is None else weight
    # With concrete labels, positives go first (the bins do not depend on the order), and the
    # positives' sums need only a leading block of rows, rounded up to a sixteenth of N so that
    # data sets of similar prevalence share one compiled program.
    positive_rows, ordered = n, (signals, labels, weights)
    y = V.concrete_value(labels)
    if y is not None and V.is_concrete(signals, weights):
        order = np.argsort(y != 1, kind="stable")
        step = -(-n // 16)
        positive_rows = min(n, max(1, -(-int(np.sum(y == 1)) // step)) * step)
        ordered = (
            signals[:, order],
            y[order],
            np.asarray(weights)[order],
        )
        if seeds is not None:
            seeds = seeds[:, :, order]
    bins = (strategy, _min_count(min_count), seed_average)
    report = _reveal(
        *ordered,
        specs,
        key_boot,
        int(n_bins),
        int(n_bootstrap),
        float(confidence),
        int(reference),
        resampling,
        positive_rows,
        seeds,
        bins,
    )
    if nias:
        result = _nias_test(scores, signals, labels, specs, weight, int(n_bins), float(confidence))
        report = report._replace(nias=result)
    return report


def _margin_test(
    margin: Array, statistic: Array, null: Array, confidence: float
) -> tuple[MarginTest, Array]:
    """Reject when ``statistic`` exceeds the critical value ``c`` of its bootstrap ``null``.

    ``c`` is the order statistic of rank ``ceil(confidence (n + 1))`` of the ``n`` null draws
    (``inf`` when there are too few), so that, were the statistic exchangeable with the draws,
    ``P(statistic > c) <= 1 - confidence`` exactly; the p-value is
    ``(1 + #{null >= statistic}) / (1 + n)``. The lower bound is ``margin - c``.
    """
    n = null.shape[0]
    rank = int(np.ceil(confidence * (n + 1)))
    c = jnp.sort(null)[rank - 1] if rank <= n else jnp.asarray(jnp.inf, null.dtype)
    p_value = (1.0 + jnp.sum(null >= statistic)) / (1.0 + n)
    return MarginTest(margin, margin - c, c, p_value, statistic > c), c


def _bootstrap_chunks(n_bootstrap: int, n: int) -> tuple[int, int]:
    """``(chunks, replicates per chunk)``: about ``_CHUNK_ELEMENTS`` weights at a time."""
    target = max(1, min(n_bootstrap, _CHUNK_ELEMENTS // n))
    chunks = -(-n_bootstrap // target)
    return chunks, -(-n_bootstrap // chunks)


def _check_seed_scores(seed_scores: ArrayLike, n_models: int, n: int) -> np.ndarray:
    """``[M, K, N]`` float32 seed scores: each seed's row of a model complete or all NaN, and
    every model with at least one seed."""
    s = np.asarray(seed_scores, np.float32)
    if s.ndim != 3 or s.shape[1:] != (n_models, n):
        raise ValueError(
            f"seed_scores must have shape [M, {n_models}, {n}] (seeds, models, observations); "
            f"got {s.shape}"
        )
    finite = np.isfinite(s)
    complete, empty = finite.all(axis=2), (~finite).all(axis=2)
    if not (complete | empty).all():
        m, k = np.argwhere(~(complete | empty))[0]
        raise ValueError(
            f"seed_scores[{m}, {k}] scores some observations but not all; keep the observations "
            "every seed scored"
        )
    if not complete.any(axis=0).all():
        k = int(np.flatnonzero(~complete.any(axis=0))[0])
        raise ValueError(f"seed_scores holds no seed of model {k}")
    if ((s < 0) | (s > 1))[finite].any():
        raise ValueError("seed_scores must lie in [0, 1]")
    return s


def _resampled_seeds(key: Array, seed_scores: Array, average: str) -> Array:
    """One draw of each model's seeds with replacement (as many as it has), pooled: ``[K, N]``."""
    valid = jnp.all(jnp.isfinite(seed_scores), axis=2)  # [M, K]
    M = seed_scores.shape[0]
    logits = jnp.where(valid, 0.0, -jnp.inf).T  # [K, M]
    draws = jax.random.categorical(key, logits, shape=(M, logits.shape[0]))  # [M draws, K]
    used = jnp.arange(M)[:, None] < jnp.sum(valid, axis=0)[None, :]  # the first M_k draws
    counts = jnp.sum(jax.nn.one_hot(draws, M) * used[..., None], axis=0).T  # [M, K]
    x = jnp.nan_to_num(seed_scores)
    if average == "logit":
        a = jnp.clip(x, _INSIDE[0], _INSIDE[1])
        x = jnp.log(a) - jnp.log1p(-a)
    pooled = jnp.einsum("mk,mkn->kn", counts, x) / jnp.sum(counts, axis=0)[:, None]
    return jax.nn.sigmoid(pooled) if average == "logit" else pooled


_INSIDE = (
    float(np.nextafter(np.float32(0), np.float32(1))),
    float(1 - np.finfo(np.float32).epsneg),
)


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8, 9, 10, 12))
def _reveal(
    signals: Array,
    labels: ArrayLike,
    weight: ArrayLike,
    losses: LossSpec | list[LossSpec],
    key: Array,
    n_signals: int,
    n_bootstrap: int,
    confidence: float,
    reference: int,
    resampling: str,
    positive_rows: int,
    seed_scores: Array | None = None,
    bins: tuple[str, int, str] = ("quantile", MIN_COUNT, "score"),
) -> RevealedReport:
    indicator = _indicator(signals, n_signals)
    y = _labels(labels, indicator)
    w = _weights(weight, y)

    def statistics(weights: Array):
        sums = _signal_sums(weights, y, indicator, n_signals, positive_rows)
        experiments = _experiments_from_sums(*sums)
        G = _value_matrix(experiments, losses)
        return experiments, G, _mutual_information(experiments)

    experiments, G, info = statistics(w)
    E = _edge_weights(G)
    switch = _switch_gains(G)
    chunks, size = _bootstrap_chunks(n_bootstrap, y.shape[0])

    def seed_replicate(args: tuple[Array, Array]) -> tuple[Array, Array]:
        key_seed, counts = args
        scores = _resampled_seeds(key_seed, seed_scores, bins[2])
        strategy, m = bins[0], bins[1]
        signals_b = _bin_signals(
            scores, n_signals, "uniform" if strategy == "uniform" else "quantile"
        )
        if strategy == "adaptive":
            signals_b = _merged_signals(scores, signals_b, losses, n_signals, m)
        ind = _indicator(signals_b, n_signals)
        sums = _signal_sums(w * counts, y, ind, n_signals, positive_rows)
        experiments_b = _experiments_from_sums(*sums)
        return _value_matrix(experiments_b, losses), _mutual_information(experiments_b)

    def replicate_chunk(key_chunk: Array):
        counts = _resampling_counts(key_chunk, y.shape[0], size, resampling)
        if seed_scores is None:
            _, G_b, info_b = statistics(w * counts)
        else:
            keys = jax.random.split(jax.random.fold_in(key_chunk, 1), size)
            G_b, info_b = jax.lax.map(seed_replicate, (keys, counts))
        niac_star = -_min_cycle_mean(_edge_weights(G_b) - E)  # recentred
        bounds = _revealed_cost_bounds(G_b, reference)
        shannon = _shannon_lambda_interval(G_b, info_b, 1e-6)
        return G_b, info_b, niac_star, bounds, shannon

    out = jax.lax.map(replicate_chunk, jax.random.split(key, chunks))
    G_b, info_b, niac_star, bounds, shannon = jax.tree.map(
        lambda x: x.reshape(-1, *x.shape[2:])[:n_bootstrap], out
    )
    interval = functools.partial(_bootstrap_interval, confidence=confidence)

    # NIS: studentized maximum over pairs, recentred at the estimate. The standard errors come
    # from the first half of the replicates and the null distribution from the second, so that
    # the statistic and its null share one (noisy) scaling.
    off = ~jnp.eye(G.shape[-1], dtype=bool)
    switch_b = _switch_gains(G_b)
    half = n_bootstrap // 2
    se = jnp.std(switch_b[:half], axis=0)
    se = jnp.maximum(se, 1e-6 * jnp.max(se) + jnp.finfo(se.dtype).tiny)
    t_star = (switch_b[half:] - switch) / se
    nis_star = jnp.max(jnp.where(off, t_star, -jnp.inf), axis=(-2, -1))
    nis_stat = jnp.max(jnp.where(off, switch / se, -jnp.inf))
    nis = _nis_check(G)
    nis_test, c_nis = _margin_test(nis.margin, nis_stat, nis_star, confidence)
    lower = jnp.where(off, switch - c_nis * se, -jnp.inf)
    nis_test = nis_test._replace(lower_bound=jnp.max(lower))

    # NIAC: minimum cycle mean, recentred at the estimate.
    niac = _niac_check(G)
    niac_test, _ = _margin_test(niac.margin, niac.margin, niac_star, confidence)

    # Every percentile interval from one stack of replicate statistics [B, ...].
    K = G.shape[-1]
    lam_lower = jnp.where(shannon.rejected, jnp.nan, shannon.lower)
    lam_upper = jnp.where(shannon.rejected, jnp.nan, shannon.upper)
    stacked = [
        G_b.reshape(-1, K * K),
        info_b,
        bounds.lower,
        bounds.upper,
        lam_lower[:, None],
        lam_upper[:, None],
    ]
    sizes = np.cumsum([x.shape[1] for x in stacked])[:-1]
    parts = jnp.split(interval(jnp.concatenate(stacked, axis=1)), sizes, axis=1)
    G_iv, info_iv, lower_iv, upper_iv, lam_lower_iv, lam_upper_iv = parts

    return RevealedReport(
        experiments=experiments,
        value_matrix=G,
        value_matrix_interval=G_iv.reshape(2, K, K),
        information=info,
        information_interval=info_iv,
        nis=nis,
        nis_test=nis_test,
        nis_pairs=lower > 0,
        niac=niac,
        niac_test=niac_test,
        cost_bounds=_revealed_cost_bounds(G, reference),
        cost_lower_interval=lower_iv,
        cost_upper_interval=upper_iv,
        cost_feasible_fraction=jnp.mean(bounds.feasible.astype(jnp.float32)),
        shannon=_shannon_lambda_interval(G, info, 1e-6),
        lambda_lower_interval=lam_lower_iv[:, 0],
        lambda_upper_interval=lam_upper_iv[:, 0],
        nias=None,
    )
