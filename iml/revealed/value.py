"""What an experiment is worth: the value matrix ``G[k, j] = -sum_s P_j(s) l*_k(gamma_{j,s})``,
the value in decision problem ``k`` of the experiment learned under loss ``j``, and the mutual
information ``I_k`` of each experiment."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax.scipy.special import xlogy

from iml.revealed.experiments import RevealedExperiments, check_experiments
from iml.revealed.losses import as_losses, minimised_losses
from iml.spec import LossLike, LossSpec

Array = jax.Array

__all__ = ["mutual_information", "value_matrix"]

_HIGHEST = jax.lax.Precision.HIGHEST


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
    n_models = check_experiments(experiments)
    return value_matrix_of(experiments, as_losses(losses, n_models))


@jax.jit
def value_matrix_of(experiments: RevealedExperiments, losses: LossSpec | list[LossSpec]) -> Array:
    table = minimised_losses(losses, experiments.posterior)  # [..., K_exp, S, K_loss]
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
    check_experiments(experiments)
    return mutual_information_of(experiments)


@jax.jit
def mutual_information_of(experiments: RevealedExperiments) -> Array:
    g = experiments.posterior
    pi = experiments.prior[..., None]
    kl = xlogy(g, g) - xlogy(g, pi) + xlogy(1.0 - g, 1.0 - g) - xlogy(1.0 - g, 1.0 - pi)
    p = experiments.probability
    return jnp.sum(jnp.where(p > 0, p * kl, 0.0), axis=-1)
