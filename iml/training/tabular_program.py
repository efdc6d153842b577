"""The vectorized program of the tabular trainer (:func:`iml.training.tabular.train_tabular`):
the members of ``model`` on axes ``[seed, loss, rotation]``, trained by Adam on one table held on
the device, one jitted epoch at a time (:func:`epoch_fn`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from iml.spec import LossSpec
from iml.training.member import (
    MemberState,
    adam,
    init_member_state,
    member_eval_step,
    member_train_step,
)
from iml.training.train_config import TrainConfig

Array = jax.Array


# Member axes are [seed, loss, rotation] (along the loss axis, the losses of a batched LossSpec).
# Minibatch rows are shared by the members of a seed; rows and labels are shared across losses
# and rotations, training masks differ per rotation. The functions vmapped are the trainer's own
# one-member steps (iml.training.member), with every argument but the state and the loss shared
# where the members share it.
# Each (loss, rotation) has its own ridge coefficient, each rotation its features' centre and
# scale (standardisation on its training rows).
def _vmap_train(f: Callable) -> Callable:
    f = jax.vmap(f, in_axes=(0, None, None, 0, None, 0, 0, 0))  # rotation
    f = jax.vmap(f, in_axes=(0, None, None, None, 0, 0, None, None))  # loss
    return jax.vmap(f, in_axes=(0, 0, 0, 0, None, None, None, None))  # seed


# Validation and test rows are gathered per rotation and shared across seeds and losses.
def _vmap_eval(f: Callable) -> Callable:
    f = jax.vmap(f, in_axes=(0, 0, 0, 0, None))  # rotation
    f = jax.vmap(f, in_axes=(0, None, None, None, 0))  # loss
    return jax.vmap(f, in_axes=(0, None, None, None, None))  # seed


class Data(NamedTuple):
    x: Array  # [N, d] float32
    y: Array  # [N] float32 (binary) or int32 class indices
    train_mask: Array  # [R, N] float32
    val_idx: Array  # [R, n_blocks, block] int32
    val_weight: Array  # [R, n_blocks, block] float32 (0 for padding)
    losses: LossSpec  # batched: batch_shape [nb]
    seeds: Array  # [S] uint32
    l2: Array  # [nb, R] each member's ridge coefficient
    center: Array  # [R, d] the features' centre and scale on each rotation's training rows
    scale: Array  # [R, d]


def standardized_rows(center: Array, scale: Array, rows: Array) -> Array:
    """Rows ``[R, ..., d]`` gathered per rotation, standardised with that rotation's centre and
    scale ``[R, d]``."""
    shape = (center.shape[0],) + (1,) * (rows.ndim - 2) + (center.shape[1],)
    return (rows - center.reshape(shape)) / scale.reshape(shape)


def init_state(model: nn.Module, config: TrainConfig, data: Data) -> MemberState:
    """Every member's :class:`~iml.training.member.MemberState`, on axes ``[S, nb, R]``."""
    n_seeds, n_rot = data.seeds.shape[0], data.train_mask.shape[0]
    (n_losses,) = data.losses.batch_shape
    optimizer = adam(config.b1, config.b2, config.eps)

    def per_seed(seed: Array) -> MemberState:
        # The key of train_ensemble's member of this seed: the same initial parameters.
        variables = model.init(jax.random.key(seed), data.x[:1], train=False)
        return init_member_state(variables, optimizer, config.learning_rate)

    # Common random numbers: all losses and rotations of a seed start from the same point.
    states = jax.vmap(per_seed)(data.seeds)
    return jax.tree.map(
        lambda a: jnp.broadcast_to(a[:, None, None], (n_seeds, n_losses, n_rot, *a.shape[1:])),
        states,
    )


def _validation_losses(model: nn.Module, state: MemberState, data: Data) -> Array:
    """Every member's mean loss on its rotation's validation rows: ``[S, nb, R]``."""
    evaluate = _vmap_eval(functools.partial(member_eval_step, model, normalize="none"))

    def body(total: tuple[Array, Array], block: tuple[Array, Array]):
        i, w = block  # [R, block]
        loss_sum, weight_sum = evaluate(
            state, standardized_rows(data.center, data.scale, data.x[i]), data.y[i], w, data.losses
        )
        return (total[0] + loss_sum, total[1] + weight_sum), None

    zeros = jnp.zeros(state.lr.shape)
    blocks = (jnp.swapaxes(data.val_idx, 0, 1), jnp.swapaxes(data.val_weight, 0, 1))
    (loss_sum, weight_sum), _ = jax.lax.scan(body, (zeros, zeros), blocks)
    return loss_sum / jnp.maximum(weight_sum, 1.0)


@functools.lru_cache(maxsize=16)
def epoch_fn(
    model: nn.Module, config: TrainConfig, n_rows: int
) -> Callable[[MemberState, Data, Array], MemberState]:
    """The jitted epoch: a scan over minibatch steps of the trainer's
    :func:`~iml.training.member.member_train_step`, every member's validation by its
    :func:`~iml.training.member.member_eval_step`, then its
    :func:`~iml.training.member.end_of_epoch` (early stopping and plateau decay)."""
    optimizer = adam(config.b1, config.b2, config.eps)
    steps = -(-n_rows // config.batch_size)
    padded = steps * config.batch_size

    def one_step(state: MemberState, x: Array, y: Array, weights: Array, loss: LossSpec,
                 l2: Array, center: Array, scale: Array):  # fmt: skip
        # A minibatch holding none of the member's training rows is no step for it.
        active = jnp.sum(weights) > 0
        return member_train_step(
            model, optimizer, state, (x - center) / scale, y, None, active, loss, weights,
            normalize="none", l2=l2,
        )  # fmt: skip

    train = _vmap_train(one_step)
    finish = config.epoch_end_rule()
    for _ in range(3):  # member axes [seed, loss, rotation]; the epoch is shared
        finish = jax.vmap(finish, in_axes=(0, 0, None))

    def step(state: MemberState, batch: tuple[Array, Array], data: Data):
        idx, valid = batch  # [S, B]
        # weights[s, r, b]: row idx[s, b] is a (real) training row of rotation r.
        weights = jnp.swapaxes(data.train_mask[:, idx], 0, 1) * valid[:, None, :]
        rows = (data.x[idx], data.y[idx], weights, data.losses, data.l2, data.center, data.scale)
        return train(state, *rows), None

    @jax.jit
    def epoch(state: MemberState, data: Data, epoch_index: Array) -> MemberState:
        def order(seed: Array) -> Array:
            key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), 1), epoch_index)
            return jax.random.permutation(key, n_rows)

        perm = jax.vmap(order)(data.seeds)  # [S, N]
        perm = jnp.pad(perm, ((0, 0), (0, padded - n_rows)))
        valid = jnp.broadcast_to(jnp.arange(padded) < n_rows, perm.shape).astype(jnp.float32)
        batches = (
            jnp.swapaxes(perm.reshape(-1, steps, config.batch_size), 0, 1),
            jnp.swapaxes(valid.reshape(-1, steps, config.batch_size), 0, 1),
        )
        state, _ = jax.lax.scan(functools.partial(step, data=data), state, batches)
        return finish(state, _validation_losses(model, state, data), epoch_index)

    return epoch


def member_logits(model: nn.Module) -> Callable[[Any, Array], Array]:
    """Logits of every member (``variables`` stacked on ``[S, nb, R]``) on its rotation's rows
    ``[R, n, d]``: ``[S, nb, R, n(, classes)]``."""

    def one(v: Any, rows: Array) -> Array:
        return model.apply(v, rows, train=False)

    return jax.vmap(jax.vmap(jax.vmap(one), in_axes=(0, None)), in_axes=(0, None))


@functools.partial(jax.jit, static_argnums=0)
def member_test_logits(
    model: nn.Module, variables: Any, x: Array, idx: Array, center: Array, scale: Array
) -> Array:
    """Logits of every member (``variables`` stacked on ``[S, nb, R]``) on its rotation's
    (padded) test rows, standardised with its rotation's ``center`` and ``scale`` ``[R, d]``:
    ``[S, nb, R, T(, n)]``."""
    logits = member_logits(model)

    def body(carry: None, i: Array) -> tuple[None, Array]:
        return None, logits(variables, standardized_rows(center, scale, x[i]))  # [S, nb, R, block]

    _, out = jax.lax.scan(body, None, jnp.swapaxes(idx, 0, 1))
    return jnp.moveaxis(out, 0, 3).reshape(*out.shape[1:4], -1, *out.shape[5:])


def blocked(indices: Sequence[np.ndarray], block: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-rotation index lists padded to a multiple of ``block``: ``[R, n_blocks, block]``."""
    longest = max(len(i) for i in indices)
    # A power of two at least as long as the longest list (up to ``block``), so that nearby
    # fold sizes share one compiled program.
    block = max(1, min(block, 1 << max(0, longest - 1).bit_length()))
    n_blocks = max(1, -(-longest // block))
    idx = np.zeros((len(indices), n_blocks * block), np.int32)
    weight = np.zeros(idx.shape, np.float32)
    for r, i in enumerate(indices):
        idx[r, : len(i)] = i
        weight[r, : len(i)] = 1.0
    return idx.reshape(len(indices), n_blocks, block), weight.reshape(len(indices), n_blocks, block)
