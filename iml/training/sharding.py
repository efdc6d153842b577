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

from iml import _validation as V
from iml._device import usable_cores

__all__ = [
    "DATA_AXIS",
    "ENSEMBLE_AXIS",
    "global_batch",
    "make_mesh",
    "per_device_member_loop",
    "per_device_members",
    "replicated",
    "state_sharding",
    "use_cpu_cores_as_devices",
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

    Raises:
      ValueError: when ``ensemble_size`` does not divide ``num_members`` or exceeds the devices.
    """
    devices = list(jax.devices() if devices is None else devices)
    V.check_count("num_members", num_members)
    V.check_count("batch_size", batch_size)
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
    """A ``[K, n, ...]`` array sharded over ``mesh`` (members along ``'ensemble'``, rows along
    ``'data'``), each device filled with its own rows only.

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

    sharding = NamedSharding(mesh, PartitionSpec(ENSEMBLE_AXIS, DATA_AXIS))
    return jax.make_array_from_callback(indices.shape + row_shape, sharding, shard)


def per_device_members(fn: Callable[..., Any], mesh: Mesh) -> Callable[..., Any]:
    """``fn`` of member-stacked arguments, run by each device on its own members only.

    ``fn`` maps member-stacked arrays (leading axis ``K``) to member-stacked outputs, treating
    members independently (e.g. :func:`iml.training.batch_members` with ``'map'``). Wrapped in
    ``jax.shard_map`` over the ensemble axis of ``mesh`` (whose data axis must be 1), every device
    applies ``fn`` to its ``K / devices`` members, all devices in one program and at the same time,
    without communication. With ``'map'`` this is the CPU's fastest ensemble step: each device
    (one per core) steps its members one after another inside one program.
    """
    if mesh.shape[DATA_AXIS] != 1:
        raise ValueError(
            f"per_device_members needs whole members on each device (data axis 1), "
            f"got mesh {dict(mesh.shape)}"
        )
    spec = PartitionSpec(ENSEMBLE_AXIS)
    return jax.shard_map(fn, mesh=mesh, in_specs=spec, out_specs=spec)


def per_device_member_loop(step_i: Callable[..., Any]) -> Callable[..., Any]:
    """Runs ``step_i(carry, *args, i)`` for every member, each device on its own members.

    ``carry`` and ``args`` are member-stacked pytrees sharded along the ensemble axis of a mesh
    whose data axis is 1, so that each device holds whole members. Each device's shards are
    stepped by a one-device program (the carry donated), one member after another, the devices
    in turn, so that asynchronous dispatch keeps them all busy; the new shards are assembled into
    global arrays with the carry's sharding. On several processes each one steps the members on
    its own devices. ``live`` (host booleans, one per member) skips members that would not change
    (stopped, or out of batches); it must be the same on every process.
    """
    program = jax.jit(step_i, donate_argnums=0)

    def run(carry: Any, *args: Any, live: np.ndarray | None = None) -> Any:
        carry_leaves, carry_def = jax.tree.flatten(carry)
        arg_leaves, arg_def = jax.tree.flatten(args)
        first = sorted(carry_leaves[0].addressable_shards, key=lambda sh: sh.device.id)
        devices = [sh.device for sh in first]
        start = {sh.device: sh.index[0].start or 0 for sh in first}
        count = first[0].data.shape[0]

        def local(leaves: list[jax.Array]) -> dict[Any, list[jax.Array]]:
            out: dict[Any, list[jax.Array]] = {d: [] for d in devices}
            for leaf in leaves:
                for sh in leaf.addressable_shards:
                    out[sh.device].append(sh.data)
            return out

        carries = {d: jax.tree.unflatten(carry_def, v) for d, v in local(carry_leaves).items()}
        local_args = {d: jax.tree.unflatten(arg_def, v) for d, v in local(arg_leaves).items()}
        for i in range(count):
            for d in devices:
                if live is None or live[start[d] + i]:
                    carries[d] = program(carries[d], *local_args[d], i)
        new = [jax.tree.leaves(carries[d]) for d in devices]
        return jax.tree.unflatten(
            carry_def,
            [
                jax.make_array_from_single_device_arrays(
                    g.shape, g.sharding, [new[j][n] for j in range(len(devices))]
                )
                for n, g in enumerate(carry_leaves)
            ],
        )

    return run


def use_cpu_cores_as_devices() -> int:
    """Asks JAX for one CPU device per core this process may use, and returns their number.

    On the CPU, XLA runs much of a small model's step on one thread; members spread over several
    CPU devices (:func:`per_device_members`, :func:`per_device_member_loop`) keep the other cores
    busy. Only the CPU backend is affected (a GPU or TPU stays the default device). Call it
    before the first JAX computation; later it changes nothing.
    """
    cores = usable_cores()
    try:
        jax.config.update("jax_num_cpu_devices", cores)
    except RuntimeError:  # the CPU backend has started already
        return len(jax.devices("cpu"))
    return cores
