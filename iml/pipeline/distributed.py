"""A run as several processes on JAX's multi-controller runtime (``config.distributed``).

Every process runs the same command (``iml reproduce`` or ``iml sweep``, with
``--config.distributed.enabled=true``): it joins the runtime before any JAX computation
(:func:`initialize`: ``jax.distributed.initialize``, its settings detected under Slurm, Open MPI and
Cloud TPU or given as ``config.distributed.coordinator_address``, ``num_processes`` and
``process_id``), and before any work checks with the others that all run the same experiment
(:func:`check_same_run`) and write to the same folder (:func:`check_shared_folder`). Each process
then plans the whole run and trains its share of the plan's member batches (:meth:`Processes.owns`:
batch ``i`` on process ``i % count``) on its own devices (``jax.local_devices()``), storing each
batch as one atomic entry of the shared run folder, as a run of one process does
(:func:`iml.pipeline.train_plan.train_plan`). Once every process has stored its share
(:func:`barrier`), process 0 alone writes the manifest's record, the tables, figures and report; the
others wait for it to finish (:func:`finish`) and write nothing else. A run killed on any process
and started again on all of them skips the stored batches and ends with the same table.

The processes meet through the runtime's coordination service (its key-value store and
barriers), not through device collectives: no member spans two processes, so the devices of one
process never wait for another's.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
from jax._src import distributed as _runtime  # the runtime's record: its client and processes

from iml import config as config_lib

__all__ = [
    "TOKEN",
    "WAIT_S",
    "Processes",
    "allgather",
    "barrier",
    "check_distributed",
    "check_same_run",
    "check_shared_folder",
    "finish",
    "initialize",
    "processes",
]

#: How long a process waits for the others to finish their share of the training, or process 0
#: to finish the report (seconds; below 2**31 ms). A process that dies is noticed sooner, by the
#: runtime's heartbeats.
WAIT_S = 20 * 24 * 3600
#: The file of the output folder through which the processes check that they share it.
TOKEN = ".processes-token"


class Processes(NamedTuple):
    """This process's ``index`` among ``count`` processes of one run."""

    index: int
    count: int

    @property
    def main(self) -> bool:
        """Whether this is process 0, which writes the run's record and results."""
        return self.index == 0

    def owns(self, batch_index: int) -> bool:
        """Whether this process trains the plan's batch ``batch_index`` (``index % count``)."""
        return batch_index % self.count == self.index


def processes() -> Processes:
    """This process's place in the run: ``(0, 1)`` where the runtime was not joined. Read from
    the runtime's record, so that asking starts no JAX backend."""
    if not jax.distributed.is_initialized():
        return Processes(0, 1)
    return Processes(_runtime.global_state.process_id, _runtime.global_state.num_processes)


def check_distributed(config: Mapping[str, Any]) -> None:
    """Check ``config.distributed``.

    Raises:
      ValueError: naming the key: a negative count or timeout, a ``process_id`` outside
        ``num_processes``, or an address without a port.
    """
    d = config_lib.lookup(config, "distributed")
    n, pid, address = int(d["num_processes"]), int(d["process_id"]), str(d["coordinator_address"])
    if n < 0:
        raise ValueError(f"config.distributed.num_processes must be 0 (detected) or more, got {n}")
    if pid < -1 or (n and pid >= n):
        raise ValueError(
            f"config.distributed.process_id must be -1 (detected) or in 0..num_processes - 1, "
            f"got {pid} of {n or 'detected'} processes"
        )
    if int(d["initialization_timeout"]) < 1:
        raise ValueError(
            "config.distributed.initialization_timeout must be at least 1 s, got "
            f"{d['initialization_timeout']}"
        )
    if address and not address.rpartition(":")[2].isdigit():
        raise ValueError(
            f"config.distributed.coordinator_address must be HOST:PORT, got {address!r}"
        )


def initialize(config: Mapping[str, Any]) -> Processes:
    """Join JAX's multi-controller runtime where ``config.distributed.enabled``; call it before
    any JAX computation. Each setting left at its default is detected (Slurm, Open MPI, Cloud TPU;
    ``JAX_COORDINATOR_ADDRESS``).

    Returns:
      This process's place (:func:`processes`).

    Raises:
      ValueError: for a bad ``config.distributed`` (:func:`check_distributed`), or a coordinator
        that not every process reached within ``config.distributed.initialization_timeout``,
        naming its address and the settings.
    """
    check_distributed(config)
    if not bool(config_lib.lookup(config, "distributed.enabled")):
        return Processes(0, 1)
    if jax.distributed.is_initialized():
        return processes()
    d = config_lib.lookup(config, "distributed")
    settings = {
        "coordinator_address": str(d["coordinator_address"]) or None,
        "num_processes": int(d["num_processes"]) or None,
        "process_id": None if int(d["process_id"]) < 0 else int(d["process_id"]),
        "initialization_timeout": int(d["initialization_timeout"]),
    }
    address, n = settings["coordinator_address"], settings["num_processes"]
    timeout = settings["initialization_timeout"]
    if address and settings["process_id"] not in (None, 0):  # process 0 starts the coordinator
        _reach(address, timeout)
    # JAX ends a process that waits longer than this for the others with a fatal log of its own
    print(f"iml: joining {n or 'the detected'} processes at {address or 'the detected coordinator'}"
          f", waiting up to {timeout} s (config.distributed.initialization_timeout)",
          file=sys.stderr, flush=True)  # fmt: skip
    try:
        jax.distributed.initialize(**settings)
    except Exception as err:  # the runtime's own errors: XlaRuntimeError, RuntimeError, ...
        address = _runtime.global_state.coordinator_address or address
        what = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
        if not address:
            raise ValueError(
                f"config.distributed: no cluster detected (Slurm, Open MPI, Cloud TPU; {what}); "
                "elsewhere set config.distributed.coordinator_address (HOST:PORT of process 0), "
                "num_processes and process_id"
            ) from None
        raise ValueError(
            f"config.distributed: could not join the coordinator at {address} "
            f"within config.distributed.initialization_timeout="
            f"{settings['initialization_timeout']} s ({what}); every process must reach "
            "config.distributed.coordinator_address (HOST:PORT of process 0), and all "
            "config.distributed.num_processes of them must start"
        ) from None
    return processes()


def _reach(address: str, timeout_s: float) -> None:
    """Wait until the coordinator at ``address`` accepts a connection (process 0 may start
    later than the others).

    Raises:
      ValueError: naming the address and the settings where it does not within ``timeout_s``.
    """
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=2):
                return
        except OSError as err:
            if time.monotonic() >= deadline:
                raise ValueError(
                    f"config.distributed.coordinator_address: no coordinator answered at "
                    f"{address} within config.distributed.initialization_timeout={timeout_s} s "
                    f"({err.strerror or err}); start process 0 there, or give every process its "
                    "HOST:PORT"
                ) from None
        time.sleep(0.5)


_rounds: dict[str, int] = {}


def _unique(name: str) -> str:
    """``name`` made unique within this process, alike on every process that calls the same
    functions in the same order."""
    _rounds[name] = _rounds.get(name, 0) + 1
    return f"iml/{name}/{_rounds[name]}"


def allgather(name: str, text: str, timeout_s: float) -> list[str]:
    """Every process's ``text``, in process order (``[text]`` where the runtime was not joined).

    Raises:
      ValueError: naming the first process that did not answer within ``timeout_s`` (it ended,
        e.g. refusing its input, or runs another command).
    """
    here = processes()
    if here.count == 1:
        return [text]
    client, key = _runtime.global_state.client, _unique(name)
    client.key_value_set(f"{key}/{here.index}", text)
    out = []
    for i in range(here.count):
        try:
            out.append(client.blocking_key_value_get(f"{key}/{i}", int(timeout_s * 1000)))
        except Exception:
            raise ValueError(
                f"config.distributed: process {i} of {here.count} did not reach the check "
                f"{name!r} within config.distributed.initialization_timeout={timeout_s:.0f} s (it "
                "ended, e.g. refusing its input, or runs another command)"
            ) from None
    return out


def barrier(name: str, timeout_s: float = WAIT_S) -> None:
    """Wait until every process has reached ``barrier(name)`` (nothing where there is one)."""
    if processes().count > 1:
        _runtime.global_state.client.wait_at_barrier(_unique(name), int(timeout_s * 1000))


def finish() -> None:
    """Every process's last step: wait until process 0 has written the results, so that no
    process leaves the runtime while another still works."""
    barrier("finish")


def _timeout(config: Mapping[str, Any]) -> float:
    return float(config_lib.lookup(config, "distributed.initialization_timeout"))


def _named(indices: list[int]) -> str:
    """``process 1`` or ``processes 1, 3``."""
    return f"process{'es' * (len(indices) > 1)} {', '.join(map(str, indices))}"


def check_same_run(config: Mapping[str, Any], record: Any, what: str) -> None:
    """Refuse to start unless every process runs the same experiment: the same ``record`` (a
    JSON-able description of the run: the command and its config without
    ``config.distributed``), compared by its hash.

    Raises:
      ValueError: naming the processes whose ``what`` differs from process 0's.
    """
    digest = hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()
    hashes = allgather("run", digest, _timeout(config))
    differ = [i for i, h in enumerate(hashes) if h != hashes[0]]
    if differ:
        raise ValueError(
            f"config.distributed: {_named(differ)} of {len(hashes)} "
            f"run{'s' * (len(differ) == 1)} another {what} than process 0; every process must "
            "run the same command with the same config (only config.distributed may differ)"
        )


def check_shared_folder(config: Mapping[str, Any], out: str | Path) -> None:
    """Refuse to start unless every process reaches the output folder ``out`` of process 0:
    process 0 writes a fresh token into ``out`` (:data:`TOKEN`) and each process reads it back.

    Raises:
      ValueError: naming the processes that read another token or none.
    """
    here = processes()
    if here.count == 1:
        return
    path = Path(out) / TOKEN
    token = ""
    if here.main:
        token = secrets.token_hex(16)
        Path(out).mkdir(parents=True, exist_ok=True)
        path.write_text(token)
    token, written = json.loads(allgather("token", json.dumps([token, str(path)]),
                                          _timeout(config))[0])  # fmt: skip
    try:
        seen = path.read_text()
    except OSError:
        seen = ""
    verdicts = allgather("folder", "1" if seen == token else "0", _timeout(config))
    if here.main:
        path.unlink(missing_ok=True)
    missing = [i for i, v in enumerate(verdicts) if v != "1"]
    if missing:
        raise ValueError(
            f"--out: {_named(missing)} of {here.count} cannot read "
            f"the token process 0 wrote to {written}: every process must write to the same folder "
            "(one file system shared by the hosts, at the same path)"
        )
