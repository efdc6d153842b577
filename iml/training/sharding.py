"""Device mesh with an ensemble axis and a data axis, and the shardings of states and batches.

Members are spread over the ``'ensemble'`` axis and each member's batch over the ``'data'`` axis;
every jitted step takes and returns arrays with these ``NamedSharding``s, so the same program runs
on one CPU, on several (simulated) host devices, on one or many accelerators, and on several hosts
after ``jax.distributed.initialize`` (where ``jax.devices()`` lists the devices of all processes).

Several hosts, for example two processes on one machine over loopback::

    jax.config.update("jax_cpu_collectives_implementation", "gloo")   # CPU only
    jax.distributed.initialize(coordinator_address="127.0.0.1:PORT", num_processes=2,
                               process_id=i)
    mesh = make_mesh(num_members=K, batch_size=16)    # over the devices of both processes
    states, history = train_ensemble(model, members, data, config, mesh=mesh)

Every process runs the same script with the same members and data source; each one reads only
the images of the batch shards that live on its own devices (:func:`global_batch`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = [
    "DATA_AXIS",
    "ENSEMBLE_AXIS",
    "batch_sharding",
    "global_batch",
    "make_mesh",
    "replicated",
    "state_sharding",
]

ENSEMBLE_AXIS = "ensemble"
DATA_AXIS = "data"


def make_mesh(
    num_members: int,
    batch_size: int,
    devices: Sequence[jax.Device] | None = None,
    *,
    ensemble_size: int | None = None,
) -> Mesh:
    """A ``('ensemble', 'data')`` mesh for ``num_members`` members with batches of ``batch_size``.

    By default the ensemble axis takes as many devices as divide the number of members, and the
    data axis as many of the remaining ones as divide the batch; devices that fit neither stay
    unused (their count is the product of the two axes).

    Args:
      num_members: ``K``, the number of ensemble members.
      batch_size: the per-member batch size (the data axis must divide it).
      devices: the devices to use (default ``jax.devices()``: all devices of all processes).
      ensemble_size: the size of the ensemble axis, overriding the default.

    Returns:
      A ``jax.sharding.Mesh`` with axes ``('ensemble', 'data')``.

    Raises:
      ValueError: when ``ensemble_size`` does not divide ``num_members`` or exceeds the devices.
    """
    devices = list(jax.devices() if devices is None else devices)
    if num_members < 1 or batch_size < 1:
        raise ValueError(
            f"num_members and batch_size must be >= 1, got {num_members}, {batch_size}"
        )
    n = len(devices)
    if ensemble_size is None:
        ensemble_size = math.gcd(num_members, n)
    elif num_members % ensemble_size or ensemble_size > n or ensemble_size < 1:
        raise ValueError(
            f"ensemble_size must divide num_members={num_members} and be at most the {n} devices, "
            f"got {ensemble_size}"
        )
    data_size = math.gcd(n // ensemble_size, batch_size)
    grid = np.asarray(devices[: ensemble_size * data_size], dtype=object)
    return Mesh(grid.reshape(ensemble_size, data_size), (ENSEMBLE_AXIS, DATA_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    """The sharding of an array held whole on every device (readable on every process)."""
    return NamedSharding(mesh, PartitionSpec())


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Arrays ``[K, n, ...]``: members along ``'ensemble'``, examples along ``'data'``."""
    return NamedSharding(mesh, PartitionSpec(ENSEMBLE_AXIS, DATA_AXIS))


def state_sharding(mesh: Mesh, state: Any) -> Any:
    """The sharding of a member-stacked pytree: every leaf split along its leading member axis."""
    member = NamedSharding(mesh, PartitionSpec(ENSEMBLE_AXIS))
    return jax.tree.map(lambda _: member, state)


def global_batch(
    mesh: Mesh,
    indices: np.ndarray,
    fetch: Callable[[np.ndarray], np.ndarray],
    row_shape: tuple[int, ...] = (),
) -> jax.Array:
    """A ``[K, n, ...]`` array sharded over ``mesh``, each device filled with its own rows only.

    Args:
      mesh: the ``('ensemble', 'data')`` mesh.
      indices: ``[K, n]`` integer indices into the data source, the same on every process.
      fetch: maps a flat index array to the rows ``[len(indices), *row_shape]`` (images or
        labels).
      row_shape: the shape of one row: ``(H, W, C)`` for images, ``()`` for labels.

    Returns:
      The global array; a process calls ``fetch`` only for the shards on its own devices.
    """
    indices = np.asarray(indices)
    row_shape = tuple(row_shape)

    def shard(index: tuple[slice, ...]) -> np.ndarray:
        rows = indices[index[:2]]
        out = np.asarray(fetch(rows.reshape(-1)))
        return out.reshape(rows.shape + row_shape)

    return jax.make_array_from_callback(indices.shape + row_shape, batch_sharding(mesh), shard)
