"""The compiled programs of ensemble training (:func:`ensemble_programs`: initialisation, the
training step, validation, the end of an epoch and prediction, for one model, member batching,
mesh and configuration, compiled once), and how such a program fails on a device
(:func:`is_out_of_memory`, :func:`is_gpu_kernel_failure`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from iml.training.member import (
    adam,
    batch_members,
    init_member_state,
    member_eval_step,
    member_in_place,
    member_predict,
    member_train_step,
    skip_idle_members,
)
from iml.training.sharding import (
    DATA_AXIS,
    ENSEMBLE_AXIS,
    per_device_member_loop,
    per_device_members,
    replicated,
)
from iml.training.train_config import TrainConfig

__all__ = ["ensemble_programs", "is_gpu_kernel_failure", "is_out_of_memory"]


def is_out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` says a device ran out of memory (XLA's ``RESOURCE_EXHAUSTED``, or an
    allocator's "out of memory")."""
    text = str(err)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def is_gpu_kernel_failure(err: BaseException) -> bool:
    """Whether ``err`` says a GPU program failed other than for memory, in one of two ways: XLA's
    autotuner found no working kernel configuration for some instructions while compiling
    ("Failed to get configs for ...", after a CUDA illegal address while timing grouped
    convolutions), or a kernel of the compiled program made an illegal memory access
    (``CUDA_ERROR_ILLEGAL_ADDRESS``). A process whose CUDA context has seen an illegal address
    cannot go on.

    ``docs/results/gpu_h200/`` records the trainer's DenseNet-121 step at 224 px failing both
    ways on one H200 when the ensemble is large.
    """
    text = str(err)
    return (
        "Failed to get configs for" in text
        or "autotuning failed" in text.lower()
        or "CUDA_ERROR_ILLEGAL_ADDRESS" in text
    )


@functools.lru_cache(maxsize=32)
def _programs(
    model: nn.Module, batching: str, mesh: Mesh, config: TrainConfig
) -> dict[str, Callable[..., Any]]:
    """The jitted programs of one (model, batching, mesh, config); cached so reruns reuse them."""
    if config.l2 == "auto":
        raise ValueError(
            "TrainConfig.l2='auto' chooses the ridge of a table's small models "
            "(iml.training.train_tabular); give image ensembles a number"
        )
    optimizer = adam(config.b1, config.b2, config.eps)
    members = NamedSharding(mesh, PartitionSpec(ENSEMBLE_AXIS))
    whole = replicated(mesh)

    one_step = functools.partial(
        member_train_step, model, optimizer, normalize=config.normalize, l2=config.l2
    )
    # 'loop' steps members one by one (see member_in_place); evaluation, forward only, is vmapped.
    batched = "vmap" if batching == "loop" else batching
    # One after another, a stopped or idle member's step is skipped (under vmap it would not be).
    train = batch_members(skip_idle_members(one_step) if batched == "map" else one_step, batched)
    one_eval = functools.partial(member_eval_step, model, normalize=config.normalize)
    evaluate = batch_members(one_eval, batched)
    predict = batch_members(
        functools.partial(member_predict, model, normalize=config.normalize), batched
    )
    if batched == "map" and mesh.shape[DATA_AXIS] == 1 and mesh.shape[ENSEMBLE_AXIS] > 1:
        # Whole members on each device: each one maps over its own members, all side by side.
        train, evaluate, predict = (per_device_members(f, mesh) for f in (train, evaluate, predict))
    epoch_end = jax.vmap(config.epoch_end_rule(), in_axes=(0, 0, None))

    def eval_fn(state, images, labels, weights, losses, acc):
        loss_sum, weight_sum = evaluate(state, images, labels, weights, losses)
        return acc[0] + loss_sum, acc[1] + weight_sum

    def epoch_end_fn(state, acc, epoch):
        val_loss = acc[0] / jnp.maximum(acc[1], 1e-12)
        train_loss = state.loss_sum / jnp.maximum(state.loss_count, 1)
        train_loss = jnp.where(state.loss_count > 0, train_loss, jnp.nan)
        new = epoch_end(state, val_loss, epoch)
        summary = {
            "train_loss": train_loss,
            "val_loss": val_loss,
            "lr": state.lr,
            "stopped": new.stopped,
            "diverged": new.diverged,
            "stop_epoch": new.stop_epoch,
            "best_val_loss": new.best_val_loss,
        }
        return new, summary

    def init_fn(keys, variables, lrs, sample):
        def one(key, lr):
            v = variables if variables is not None else model.init(key, sample, train=False)
            return init_member_state(v, optimizer, lr)

        return jax.vmap(one)(keys, lrs)

    train_jit = jax.jit(train, out_shardings=members, donate_argnums=0)
    eval_jit = jax.jit(eval_fn, out_shardings=(whole, whole))
    if batching == "loop" and mesh.shape[DATA_AXIS] == 1:
        # Every device steps its own members one by one, the devices side by side.
        train_jit = per_device_member_loop(member_in_place(one_step))

        def eval_one(acc, *batch):  # a member's validation sums added to its entry of ``acc``
            loss_sum, weight_sum = one_eval(*batch)
            return acc[0] + loss_sum, acc[1] + weight_sum

        eval_loop = per_device_member_loop(member_in_place(eval_one))

        def eval_jit(state, images, labels, weights, losses, acc):
            return eval_loop(acc, state, images, labels, weights, losses)

    elif batching == "loop":  # a member's batch is split over devices: one global program each
        member_jit = jax.jit(member_in_place(one_step), out_shardings=members, donate_argnums=0)

        def train_jit(state, *batch, live=None):
            for i in range(int(batch[-1].shape[0])):
                if live is None or live[i]:
                    state = member_jit(state, *batch, i)
            return state

    return {
        "train": train_jit,
        "eval": eval_jit,
        "epoch_end": jax.jit(epoch_end_fn, out_shardings=(members, whole), donate_argnums=0),
        "predict": jax.jit(predict, out_shardings=whole),
        "init": jax.jit(init_fn, out_shardings=members, static_argnums=()),
    }


# Fields of TrainConfig that the compiled programs do not depend on (they enter as array shapes,
# arguments, or only on the host); resetting them lets runs that differ only there share programs.
_HOST_FIELDS = (
    "learning_rate",
    "batch_size",
    "eval_batch_size",
    "max_epochs",
    "flip",
    "member_batching",
    "checkpoint_every_steps",
    "solver",
    "tol",
    "max_newton_steps",
)


def ensemble_programs(
    model: nn.Module, batching: str, mesh: Mesh, config: TrainConfig
) -> dict[str, Callable[..., Any]]:
    """The jitted programs that :func:`train_ensemble` runs for ``model`` under ``batching`` on
    ``mesh`` (``'train'``, ``'evaluate'``, ``'predict'``, ...), compiled once per setting of the
    fields that change them, so that benchmarks time what the trainer runs. A ``normalize``
    left at ``None`` is that of images (:meth:`TrainConfig.for_inputs`); :func:`train_ensemble`
    passes feature rows' own."""
    config = config.for_inputs(images=True)
    defaults = TrainConfig()
    key = dataclasses.replace(config, **{f: getattr(defaults, f) for f in _HOST_FIELDS})
    return _programs(model, batching, mesh, key)
