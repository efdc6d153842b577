"""How many ensemble members fit on a device: XLA's memory analysis of the trainer's programs.

:func:`estimate_member_memory` measures the trainer's programs (:func:`program_bytes`) for two
and three members: a :class:`MemoryEstimate` of the bytes every member adds (three members' less
two's) and of the bytes that do not grow with the members. Not one and two: one member's
programs are no guide to the growth (under ``'map'``, for one, a single member needs no loop).

:func:`memory_budget` says how many bytes a batch may take: a budget given, or a margin of the
device's free memory (``bytes_limit - bytes_in_use`` of ``device.memory_stats()``; a CPU reports
none: no limit), and :meth:`MemoryEstimate.members_within` the most members that fit it.

The estimate is of one device holding every member of a batch; a mesh of several devices shares
them out, so that each device needs less.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from iml.spec import LossLike, loss_spec
from iml.training.programs import ensemble_programs
from iml.training.sharding import make_mesh
from iml.training.train_config import TrainConfig, resolve_member_batching

__all__ = [
    "FREE_MEMORY_MARGIN",
    "MemoryEstimate",
    "estimate_member_memory",
    "free_device_memory",
    "memory_budget",
    "program_bytes",
]

#: The share of a device's free memory that :func:`memory_budget` gives a batch of members: the
#: rest is left to what the analysis does not see (the allocator's fragmentation, workspace).
FREE_MEMORY_MARGIN = 0.9


class MemoryEstimate(NamedTuple):
    """Device bytes of ``K`` members' programs, ``fixed_bytes + K * member_bytes``.

    Attributes:
      member_bytes: the bytes each member adds (those of three members less two's).
      fixed_bytes: the bytes that do not grow with the members (two members' less twice
        ``member_bytes``).
      program_bytes: the bytes of the larger program (training step or validation pass) at
        each measured number of members, ``{2: ..., 3: ...}``.
    """

    member_bytes: int
    fixed_bytes: int
    program_bytes: dict[int, int]

    def bytes_for(self, members: int) -> int:
        """The estimated device bytes of ``members`` members trained in one program."""
        return self.fixed_bytes + members * self.member_bytes

    def members_within(self, budget: int) -> int:
        """The most members whose programs fit ``budget`` bytes; 0 where not even one does."""
        room = budget - self.fixed_bytes
        if room < self.member_bytes:
            return 0
        return room // self.member_bytes if self.member_bytes > 0 else np.iinfo(np.int64).max

    def record(self) -> dict[str, Any]:
        """The estimate as JSON types, for a run's manifest."""
        return {"member_bytes": self.member_bytes, "fixed_bytes": self.fixed_bytes,
                "program_bytes": {str(k): v for k, v in self.program_bytes.items()}}  # fmt: skip


def free_device_memory(device: Any = None) -> int | None:
    """``bytes_limit - bytes_in_use`` of ``device`` (default: this process's first); None where the
    backend reports no memory statistics (the CPU)."""
    device = jax.local_devices()[0] if device is None else device
    stats = device.memory_stats()
    if not stats or "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def memory_budget(budget_bytes: int = 0, device: Any = None) -> int | None:
    """The bytes a batch of members may take on ``device``: ``budget_bytes`` where positive, else
    :data:`FREE_MEMORY_MARGIN` of its free memory (:func:`free_device_memory`); None where neither
    is known (no limit)."""
    if budget_bytes > 0:
        return int(budget_bytes)
    free = free_device_memory(device)
    return None if free is None else int(FREE_MEMORY_MARGIN * free)


def _analysed_bytes(compiled: Any) -> int:
    stats = compiled.memory_analysis()
    if stats is None:
        raise ValueError(f"the {jax.default_backend()} backend gives no memory analysis")
    return int(
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        - stats.alias_size_in_bytes
    )


def program_bytes(
    model: nn.Module,
    loss: LossLike,
    image_shape: Sequence[int],
    config: TrainConfig,
    members: int,
    *,
    image_dtype: Any = np.float32,
    label_dtype: Any = np.float32,
) -> int:
    """The device bytes of the larger of the trainer's training step and validation pass for
    ``members`` members of ``model`` on this process's first device, by XLA's memory analysis of the
    programs compiled (not run): arguments, outputs and temporaries, less the outputs that reuse
    donated arguments.

    Args:
      model: the members' Flax module.
      loss: one member's loss (anything :func:`iml.loss_spec` reads, e.g. its beta); every
        member takes it.
      image_shape: one image's ``(H, W, C)``.
      config: the trainer's configuration (batch sizes, member batching; ``'loop'``, which
        steps one member at a time, is measured as ``'map'``, which does too).
      members: how many members the programs take.
      image_dtype, label_dtype: the dtypes of the images and labels the trainer is fed.

    Raises:
      ValueError: where the backend gives no memory analysis.
    """
    batching = resolve_member_batching(config)
    config = dataclasses.replace(config, member_batching="map" if batching == "loop" else batching)
    k, shape = int(members), tuple(int(s) for s in image_shape)
    mesh = make_mesh(k, 1, ensemble_size=1, devices=jax.local_devices()[:1])
    programs = ensemble_programs(model, config.member_batching, mesh, config)
    keys = jax.eval_shape(lambda: jax.random.split(jax.random.key(0), k))
    lrs = jax.ShapeDtypeStruct((k,), jnp.float32)
    sample = jax.ShapeDtypeStruct((1, *shape), jnp.float32)
    state = jax.eval_shape(programs["init"], keys, None, lrs, sample)
    losses = jax.tree.map(lambda x: np.stack([np.asarray(x)] * k), loss_spec(loss))

    def batch(n: int) -> tuple[jax.ShapeDtypeStruct, ...]:
        return (jax.ShapeDtypeStruct((k, n, *shape), image_dtype),
                jax.ShapeDtypeStruct((k, n), label_dtype))  # fmt: skip

    flips = jax.ShapeDtypeStruct((k, config.batch_size), jnp.bool_)
    active = jax.ShapeDtypeStruct((k,), jnp.bool_)
    weights = jax.ShapeDtypeStruct((k, config.eval_batch_size), jnp.float32)
    acc = (jax.ShapeDtypeStruct((k,), jnp.float32),) * 2
    lowered = (
        programs["train"].lower(state, *batch(config.batch_size), flips, active, losses),
        programs["eval"].lower(state, *batch(config.eval_batch_size), weights, losses, acc),
    )
    return max(_analysed_bytes(p.compile()) for p in lowered)


def estimate_member_memory(
    model: nn.Module,
    loss: LossLike,
    image_shape: Sequence[int],
    config: TrainConfig,
    **dtypes: Any,
) -> MemoryEstimate:
    """The device memory of ``K`` members of ``model`` trained together: :func:`program_bytes`
    (which takes the same arguments, and ``image_dtype``, ``label_dtype``) at two and at three
    members, the difference being each member's.

    Raises:
      ValueError: where the backend gives no memory analysis.
    """
    measured = {k: program_bytes(model, loss, image_shape, config, k, **dtypes) for k in (2, 3)}
    member = max(measured[3] - measured[2], 0)
    return MemoryEstimate(member, measured[2] - 2 * member, measured)
