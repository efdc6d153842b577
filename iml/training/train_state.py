"""The per-member train state of a beta ensemble, and its pure epoch-end bookkeeping.

One :class:`MemberState` holds everything one ensemble member needs to train, be checkpointed and
be stopped: its parameters and BatchNorm statistics, its Adam moments, its own learning rate
(divided by ``lr_factor`` on each validation plateau), the best parameters seen so far with their
validation loss (early stopping keeps them), counters of epochs without improvement, and flags
for stopping. An ensemble is the same pytree with a leading member axis of size ``K`` on every
leaf, so it can be vmapped, sharded along a mesh axis and saved as one checkpoint.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

Array = jax.Array
PyTree = Any

__all__ = ["MemberState", "end_of_epoch", "init_member_state", "tree_where"]


@struct.dataclass
class MemberState:
    """Train state of one ensemble member (or of ``K`` members, stacked on a leading axis).

    Attributes:
      params: model parameters being trained.
      batch_stats: BatchNorm running statistics that go with ``params``.
      opt_state: Adam's state (``optax.scale_by_adam``: count, first and second moments).
      lr: the member's current learning rate.
      best_params: parameters at the epoch of lowest validation loss (returned by early stopping).
      best_batch_stats: BatchNorm statistics at that epoch.
      best_val_loss: the lowest validation loss so far (``inf`` before the first epoch).
      best_epoch: the epoch (1-based) of ``best_val_loss``; 0 before the first improvement.
      bad_epochs: epochs since the validation loss last improved (early stopping counter).
      plateau_epochs: the same counter, reset when the learning rate is decayed.
      stopped: the member no longer changes (early-stopped or diverged).
      diverged: the member was stopped because its loss or gradients were not finite.
      stop_epoch: the epoch in which the member stopped, ``-1`` while it trains.
      step: optimiser steps taken.
      loss_sum: sum of the training losses of the current epoch's steps.
      loss_count: number of steps summed in ``loss_sum``.
    """

    params: PyTree
    batch_stats: PyTree
    opt_state: PyTree
    lr: Array
    best_params: PyTree
    best_batch_stats: PyTree
    best_val_loss: Array
    best_epoch: Array
    bad_epochs: Array
    plateau_epochs: Array
    stopped: Array
    diverged: Array
    stop_epoch: Array
    step: Array
    loss_sum: Array
    loss_count: Array


def tree_where(cond: Array, x: PyTree, y: PyTree) -> PyTree:
    """``jnp.where(cond, x, y)`` on every leaf of two pytrees of the same structure."""
    return jax.tree.map(lambda a, b: jnp.where(cond, a, b), x, y)


def init_member_state(
    variables: PyTree, optimizer: optax.GradientTransformation, lr: float
) -> MemberState:
    """The state of one member before its first step.

    Args:
      variables: the model's variables, a mapping with ``'params'`` and (optionally)
        ``'batch_stats'``, as returned by ``model.init``.
      optimizer: the gradient transformation whose state is kept (Adam without the learning rate).
      lr: the member's initial learning rate.

    Returns:
      A :class:`MemberState` with its best parameters equal to the initial ones.
    """
    params = variables["params"]
    batch_stats = variables.get("batch_stats", {})
    return MemberState(
        params=params,
        batch_stats=batch_stats,
        opt_state=optimizer.init(params),
        lr=jnp.asarray(lr, jnp.float32),
        best_params=params,
        best_batch_stats=batch_stats,
        best_val_loss=jnp.asarray(jnp.inf, jnp.float32),
        best_epoch=jnp.asarray(0, jnp.int32),
        bad_epochs=jnp.asarray(0, jnp.int32),
        plateau_epochs=jnp.asarray(0, jnp.int32),
        stopped=jnp.asarray(False),
        diverged=jnp.asarray(False),
        stop_epoch=jnp.asarray(-1, jnp.int32),
        step=jnp.asarray(0, jnp.int32),
        loss_sum=jnp.asarray(0.0, jnp.float32),
        loss_count=jnp.asarray(0, jnp.int32),
    )


def end_of_epoch(
    state: MemberState,
    val_loss: Array,
    epoch: Array,
    *,
    patience: int,
    plateau_patience: int,
    lr_factor: float,
    min_delta: float = 0.0,
    min_rel_delta: float = 0.0,
) -> MemberState:
    """Early stopping and learning-rate decay of one member after an epoch's validation.

    The validation loss improves when it falls below ``best_val_loss - min_delta -
    min_rel_delta * |best_val_loss|`` (any finite loss improves on the first epoch); the member
    then keeps its current parameters as its best. After ``plateau_patience`` epochs without
    improvement its learning rate is multiplied by ``lr_factor`` (0.1 in the paper: "decayed by a
    factor of 10 each time the validation loss plateaus"); after ``patience`` epochs without
    improvement it stops. A non-finite validation loss stops it as diverged. A stopped member is
    returned unchanged.

    Args:
      state: the member's state after the epoch's training steps.
      val_loss: its mean validation loss (scalar).
      epoch: the index of the epoch just finished (scalar int).
      patience: epochs without improvement before early stopping.
      plateau_patience: epochs without improvement before the learning rate is decayed.
      lr_factor: multiplier of the learning rate on a plateau.
      min_delta: the least decrease that counts as an improvement.
      min_rel_delta: the least decrease, as a fraction of the best loss, that counts as one.

    Returns:
      The updated state, with the epoch's training-loss accumulators reset.
    """
    val_loss = jnp.asarray(val_loss, jnp.float32)
    live = ~state.stopped
    finite = jnp.isfinite(val_loss)
    best = state.best_val_loss
    threshold = jnp.where(
        jnp.isfinite(best), best - min_delta - min_rel_delta * jnp.abs(best), jnp.inf
    )
    improved = live & finite & (val_loss < threshold)
    bad = jnp.where(improved, 0, state.bad_epochs + 1)
    plateau = jnp.where(improved, 0, state.plateau_epochs + 1)
    decay = plateau >= plateau_patience
    diverged = state.diverged | (live & ~finite)
    stopped = state.stopped | diverged | (live & (bad >= patience))
    updated = state.replace(
        best_params=tree_where(improved, state.params, state.best_params),
        best_batch_stats=tree_where(improved, state.batch_stats, state.best_batch_stats),
        best_val_loss=jnp.where(improved, val_loss, state.best_val_loss),
        best_epoch=jnp.where(improved, jnp.asarray(epoch, jnp.int32) + 1, state.best_epoch),
        bad_epochs=bad,
        plateau_epochs=jnp.where(decay, 0, plateau),
        lr=jnp.where(decay, state.lr * lr_factor, state.lr),
        diverged=diverged,
        stopped=stopped,
    )
    updated = tree_where(live, updated, state)
    # A member stopped during the epoch's steps (diverged) is dated here too.
    newly_stopped = updated.stopped & (state.stop_epoch < 0)
    return updated.replace(
        stop_epoch=jnp.where(newly_stopped, jnp.asarray(epoch, jnp.int32), state.stop_epoch),
        loss_sum=jnp.zeros_like(state.loss_sum),
        loss_count=jnp.zeros_like(state.loss_count),
    )
