"""Revealed experiments: the statistical experiment of each of ``K`` models on common labels,
the probability ``P_k(s)`` of each signal and its posterior ``gamma_{k,s} = P_k(y = 1 | s)``,
counted from discrete signals (a batch of observation weights is one matrix product), read off
each model's binned scores (:mod:`iml.revealed.bins`), or given directly; and what they are
worth: the value matrix ``G[k, j] = -sum_s P_j(s) l*_k(gamma_{j,s})``, the value in decision
problem ``k`` of the experiment learned under loss ``j``, and the mutual information ``I_k`` of
each experiment."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlogy

from iml import _validation as V
from iml.calibration._checks import as_float, as_labels, as_weights, check_n_bins
from iml.revealed.bins import as_min_count, check_scores, signals_from_scores
from iml.revealed.losses import as_losses, minimised_losses
from iml.spec import LossLike, LossSpec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "RevealedExperiments",
    "experiments_from_posteriors",
    "experiments_from_signals",
    "mutual_information",
    "revealed_experiments",
    "value_matrix",
]

_HIGHEST = jax.lax.Precision.HIGHEST


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


def check_weight(weight: ArrayLike | None, n: int) -> None:
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
    check_n_bins(n_signals)
    shape = np.shape(signals)
    if len(shape) != 2 or 0 in shape:
        raise ValueError(f"signals must be a non-empty [K, N] array; got shape {shape}")
    s = V.concrete_value(signals)
    if s is not None and not np.issubdtype(s.dtype, np.integer):
        raise ValueError(f"signals must be integers (signal indices); got dtype {s.dtype}")
    if s is not None and ((s < 0).any() or (s >= n_signals).any()):
        raise ValueError(
            f"signals must lie in [0, n_signals={n_signals}); got min {s.min()}, max {s.max()}"
        )
    n = shape[1]
    y = V.concrete_value(labels)
    if y is not None and (y.shape != (n,) or not np.isin(y, (0, 1)).all()):
        raise ValueError(f"labels must be a [{n}] array of 0s and 1s; got shape {y.shape}")
    check_weight(weight, n)
    return _experiments_from_signals(signals, labels, weight, n_signals)


@functools.partial(jax.jit, static_argnums=(3,))
def _experiments_from_signals(signals, labels, weight, n_signals) -> RevealedExperiments:
    indicator = signal_indicator(signals, n_signals)
    y = as_labels(labels, indicator)
    w = as_weights(weight, y) if weight is not None else jnp.ones_like(y)
    return experiments_from_sums(*signal_sums(w, y, indicator, n_signals))


def signal_indicator(signals: ArrayLike, n_signals: int) -> Array:
    """``M[i, (k, s)] = 1[s_ki = s]``, ``[N, K * S]``: the signals' indicator matrix."""
    s = jnp.asarray(signals)
    onehot = jax.nn.one_hot(s.T, n_signals, dtype=jnp.float32)  # [N, K, S]
    return onehot.reshape(s.shape[1], -1)


def signal_sums(
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


def experiments_from_sums(count: Array, positives: Array) -> RevealedExperiments:
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
    with probability ``P_k(s)`` and posterior ``gamma_{k,s} = P_k(y = 1 | s)``. Optimal scoring
    rules are increasing, so raw and loss-corrected scores give the same experiment.

    Args:
      scores: ``[K, N]``, one row per model.
      labels: ``[N]`` labels in ``{0, 1}``, common to the models.
      n_bins: signals per model.
      strategy: ``"quantile"`` (per model), ``"uniform"``, or ``"adaptive"``: the ``n_bins``
        quantile bins merged, in score order and alike for every model, until each holds at
        least ``min_count`` expected positives and negatives under each model's own
        loss-corrected scores ``(c^{L_k})^{-1}(a)``; merged bins leave signals with
        ``P_k(s) = 0``. Needs ``losses``.
      weight: non-negative observation weights ``[..., N]`` (leading axes are batches, e.g.
        bootstrap replicates); the bins are computed from the unweighted scores and stay fixed.
      losses: for ``"adaptive"``.
      min_count: the least expected positives and negatives of an adaptive bin
        (default :data:`MIN_COUNT`).

    Returns:
      :class:`RevealedExperiments` ``[..., K, n_bins]``.
    """
    check_scores(scores, labels, n_bins, strategy)
    check_weight(weight, np.shape(scores)[1])
    specs = None if losses is None else as_losses(losses, np.shape(scores)[0])
    signals = signals_from_scores(scores, n_bins, strategy, specs, as_min_count(min_count))
    return _experiments_from_signals(signals, labels, weight, n_bins)


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
    p, g = as_float(probability), as_float(posterior)
    valid = jnp.all(p >= 0, axis=-1) & jnp.all((g >= 0) & (g <= 1), axis=-1)
    prior = V.nan_unless(valid, jnp.sum(p * g, axis=-1))
    return RevealedExperiments(p, g, prior)


def check_experiments(experiments: RevealedExperiments) -> int:
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
      losses: the ``K`` binary losses, one per decision problem (a sequence, or one batched
        :class:`~iml.LossSpec` of batch shape ``(K,)``).

    Returns:
      ``G`` ``[..., K, K]`` (row: decision problem; column: experiment).
    """
    n_models = check_experiments(experiments)
    return value_matrix_of(experiments, as_losses(losses, n_models))


@jax.jit
def value_matrix_of(experiments: RevealedExperiments, losses: LossSpec | list[LossSpec]) -> Array:
    table = minimised_losses(losses, experiments.posterior)  # [..., K_exp, S, K_loss]
    # A contraction rather than a sum of products: XLA's CPU fusion of the latter with the
    # table is much slower.
    return -jnp.einsum("...js,...jsk->...kj", experiments.probability, table, precision=_HIGHEST)


def mutual_information(experiments: RevealedExperiments) -> Array:
    """``I_k = sum_{s,y} P_k(s, y) log[P_k(s, y) / (P_k(s) P(y))]`` in nats, ``0 log 0 = 0``.

    Computed as ``sum_s P_k(s) KL(gamma_{k,s} || pi)``. Optimal scoring rules are monotone, so
    rank bins of raw and of loss-corrected scores give the same ``I_k``.

    Returns:
      ``I`` ``[..., K]``.
    """
    check_experiments(experiments)
    return mutual_information_of(experiments)


@jax.jit
def mutual_information_of(experiments: RevealedExperiments) -> Array:
    g = experiments.posterior
    pi = experiments.prior[..., None]
    kl = xlogy(g, g) - xlogy(g, pi) + xlogy(1.0 - g, 1.0 - g) - xlogy(1.0 - g, 1.0 - pi)
    p = experiments.probability
    return jnp.sum(jnp.where(p > 0, p * kl, 0.0), axis=-1)
