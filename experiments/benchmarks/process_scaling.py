"""Benchmark: one experiment's training as P processes on JAX's multi-controller runtime, against
one process.

    python -m experiments.benchmarks.process_scaling            # P = 1 and 2, meetings up to 8
    python -m experiments.benchmarks.process_scaling --quick    # a smaller plan, meetings up to 4

**Work.** One ``iml reproduce --train-only`` plan, run from the command line as a user runs it:
``densenet_tiny`` on the built-in digits (1,797 images at 16 px), one member per batch,
``--batches`` batches of equal work (betas x 4 rotations, one seed).
- **baseline**: one process on one core;
- **ours**: ``P = 2`` processes joined over loopback (gloo, ``--distributed``), each on a core
  of its own, training its share of the batches (batch ``i`` on process ``i % P``).

Every process runs with one XLA thread, pinned to its core, and without the persistent
compilation cache, so that each side compiles what it runs. A first, untimed run builds the data
set's cache, which both sides then read. Neither side saves per-epoch checkpoints: one process
saves them through orbax and each of several processes its own as one ``.npz`` file, whose costs
differ (for this tiny model orbax's save costs more than an epoch), and that difference is not
what is measured here. The tables, figures and report that process 0 writes
after training are the same work for any ``P`` and are left out (``--train-only``).

**Components.** From the times at which the batches are stored (their files' modification
times), each run splits into ``start`` (launch to the first batch stored: starting Python, joining
the runtime, loading the data, compiling), ``batch`` (the median interval between one process's
consecutive batches) and ``end`` (the last batch stored to the last exit: the barrier and the
run's record). ``coordination`` is what two processes take in ``start + end`` beyond one.

**Meetings.** The processes meet only through the runtime's coordination service: joining it,
one all-gather per check before any work (the config, the output folder), and barriers once the
batches are stored and once process 0 has written the report. ``meetings`` times one all-gather
and one barrier, repeated, for ``P`` in ``--meeting-processes`` (with more processes than cores,
they wait on the service more than they compute).

``ratio`` is the measured speedup of two processes over one: the median over ``--runs``
interleaved pairs of runs (:mod:`experiments.benchmarks._harness`) of one process's wall time
over two's (at most 2), with their range; ``efficiency`` is it over 2. Every run starts new
processes, which compile what they run, so no run is warm: ``start`` holds each run's cold part.
``experiments.benchmarks._projection.coordination_seconds`` extrapolates the coordination cost to
more processes for ``experiments.benchmarks.paper_scale``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments.benchmarks._harness import add_runs_argument, check_runs, headline, interleaved

ROOT = Path(__file__).resolve().parents[2]

#: One thread per process: the per-process work equals one core's on either side.
ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
#: The meetings of one run of P processes after joining: an all-gather per check (the config,
#: the output folder) and the two barriers (batches stored, report written).
MEETINGS_PER_RUN = 4


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(XLA_FLAGS=ONE_THREAD, IML_JAX_CACHE="off", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _pinned(core: int, command: list[str]) -> list[str]:
    """``command`` run on ``core`` alone (by ``taskset``, so that no Python code runs in a child
    forked from this process, whose JAX threads could leave it deadlocked)."""
    taskset = shutil.which("taskset")
    if taskset is None:
        raise SystemExit("the benchmark pins each process to a core with taskset (util-linux)")
    return [taskset, "--cpu-list", str(core), *command]


def _cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def plan_args(batches: int, epochs: int) -> list[str]:
    """``iml reproduce --train-only`` arguments for ``batches`` one-member batches of equal work
    (``batches / 4`` betas x 4 rotations x one seed)."""
    if batches % 4:
        raise ValueError(f"--batches must be a multiple of 4 (the plan's rotations), got {batches}")
    betas = np.linspace(0.5, 0.9, batches // 4)
    return [
        "reproduce", "--no-progress", "--train-only", "--config.model.name=densenet_tiny",
        "--config.data.n_folds=4", f"--config.train.max_epochs={epochs}",
        "--betas", *[f"{b:.4g}" for b in betas],
        "--config.data.image_size=16", "--seeds", "1", "--config.data.n_val_folds=1",
        "--config.train.batch_size=8", "--config.plan.members_per_batch=1",
        "--config.plan.checkpoint=false",
    ]  # fmt: skip


def run_processes(args: list[str], out: Path, count: int, timeout_s: float) -> float:
    """Wall seconds of ``iml`` with ``args`` as ``count`` processes (one per core, round robin),
    from the first start to the last exit.

    Raises:
      RuntimeError: a process that failed or ran past ``timeout_s``, with the end of its log.
    """
    cores, port, procs = _cores(), _free_port(), []
    t0 = time.perf_counter()
    for i in range(count):
        command = [sys.executable, "-m", "iml.cli", *args, "--out", str(out)]
        if count > 1:
            command += [
                "--config.distributed.enabled=true",
                f"--config.distributed.coordinator_address=127.0.0.1:{port}",
                f"--config.distributed.num_processes={count}",
                f"--config.distributed.process_id={i}",
            ]
        log = open(out.parent / f"{out.name}-process{i}.log", "w")
        process = subprocess.Popen(
            _pinned(cores[i % len(cores)], command),
            cwd=ROOT,
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append((process, log))
    try:
        for p, _ in procs:
            p.wait(timeout=max(1.0, timeout_s - (time.perf_counter() - t0)))
    except subprocess.TimeoutExpired:
        pass
    wall = time.perf_counter() - t0
    failed = []
    for i, (p, log) in enumerate(procs):
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()
        if p.returncode != 0:
            failed.append(
                f"process {i} (exit {p.returncode}):\n{Path(log.name).read_text()[-2000:]}"
            )
    if failed:
        raise RuntimeError(f"{count}-process run of {out.name} failed:\n" + "\n".join(failed))
    return wall


def _child_meetings(address: str, count: int, index: int, repeats: int) -> None:
    """One process of the meetings' measurement: prints its seconds per all-gather + barrier."""
    from iml.pipeline import distributed

    settings = {"enabled": True, "coordinator_address": address, "num_processes": count,
                "process_id": index, "initialization_timeout": 60}  # fmt: skip
    t0 = time.perf_counter()
    distributed.initialize({"distributed": settings})
    distributed.barrier("joined", 60)
    joined = time.perf_counter() - t0
    t0 = time.perf_counter()
    for r in range(repeats):
        distributed.allgather(f"gather-{r}", f"process {index}", 60)
        distributed.barrier(f"barrier-{r}", 60)
    print(json.dumps({"join_s": joined, "meeting_s": (time.perf_counter() - t0) / repeats}))


def meetings(count: int, repeats: int, timeout_s: float = 120) -> dict[str, float]:
    """Seconds to join and per meeting (one all-gather and one barrier) among ``count`` local
    processes: the slowest process's."""
    cores, port = _cores(), _free_port()
    child = [sys.executable, "-m", "experiments.benchmarks.process_scaling", "--meeting-child",
             f"127.0.0.1:{port}", str(count)]  # fmt: skip
    procs = [
        subprocess.Popen(
            _pinned(cores[i % len(cores)], [*child, str(i), str(repeats)]),
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    results = []
    try:
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=timeout_s)
            if p.returncode != 0:
                raise RuntimeError(f"meeting process {i} of {count} failed:\n{err[-2000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:  # a process that failed or hung leaves none of the others behind
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return {
        "processes": count,
        "join_s": max(r["join_s"] for r in results),
        "meeting_s": max(r["meeting_s"] for r in results),
    }


def components(stored: list[float], wall_s: float, count: int) -> dict[str, float]:
    """A run's ``start``, ``batch`` and ``end`` seconds (see the module's docstring) from the
    times its batches were stored, in batch order, relative to the launch, and its wall time.

    Raises:
      ValueError: where a process stored fewer than two batches (no interval to time).
    """
    if len(stored) < 2 * count:
        raise ValueError(
            f"{len(stored)} batches on {count} process(es) leave a process fewer than two: "
            "give more --batches"
        )
    intervals = [
        later - earlier
        for i in range(count)
        for earlier, later in zip(stored[i::count][:-1], stored[i + count :: count], strict=True)
    ]
    return {
        "start_s": min(stored),
        "batch_s": float(np.median(intervals)),
        "end_s": wall_s - max(stored),
        "wall_s": wall_s,
    }


def _stored_times(out: Path, t0_wall: float) -> list[float]:
    """Seconds from the launch to each batch's store, in batch order."""
    files = sorted((out / "batches").glob("batch-*.npz"))
    return [f.stat().st_mtime - t0_wall for f in files]


def _timed_run(plan: list[str], out: Path, count: int, timeout_s: float) -> dict[str, float]:
    t0_wall = time.time()
    wall = run_processes(plan, out, count, timeout_s)
    return components(_stored_times(out, t0_wall), wall, count)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="8 batches of 2 epochs")
    p.add_argument("--batches", type=int, default=16, help="one-member batches (a multiple of 4)")
    p.add_argument("--epochs", type=int, default=8)
    add_runs_argument(p, what=": pairs of runs, two processes then one")
    p.add_argument("--meeting-processes", type=int, nargs="+", default=None)
    p.add_argument("--meeting-repeats", type=int, default=50)
    p.add_argument("--timeout", type=float, default=1800, help="seconds allowed per run")
    p.add_argument("--work", default="runs/benchmarks/process_scaling", help="the runs' folder")
    p.add_argument("--out", default="runs/benchmarks/process_scaling.json")
    args = p.parse_args(argv)
    if args.quick:
        args.batches, args.epochs = 8, 2
    if args.meeting_processes is None:
        args.meeting_processes = [1, 2, 4] if args.quick else [1, 2, 4, 8]
    check_runs(p, args.runs)
    if args.batches < 4 or args.epochs < 1:
        p.error("--batches must be at least 4, --epochs at least 1")
    if any(n < 1 for n in args.meeting_processes):
        p.error("--meeting-processes must be at least 1")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the benchmark, writes the JSON file and prints the summary as the last line."""
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--meeting-child":
        address, count, index, repeats = sys.argv[2:6]
        _child_meetings(address, int(count), int(index), int(repeats))
        return {}
    args = _parse(argv)
    cores = _cores()
    if len(cores) < 2:
        raise SystemExit(f"two processes need two cores; this process may run on {len(cores)}")
    work, out_path = Path(args.work), Path(args.out)
    if work.exists() and any(work.iterdir()):
        raise SystemExit(f"{work} is not empty: remove it or give another --work")
    work.mkdir(parents=True, exist_ok=True)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "benchmark": "process_scaling",
        "plan": {"batches": args.batches, "members_per_batch": 1, "epochs": args.epochs,
                 "model": "densenet_tiny", "data": "digits", "image_size": 16},
        "cores": len(cores),
        "threads_per_process": 1,
    }  # fmt: skip
    plan = plan_args(args.batches, args.epochs)
    print("process_scaling: building the data set's cache (untimed)", file=sys.stderr, flush=True)
    run_processes(plan_args(4, 1), work / "warm-up", 1, args.timeout)
    runs: dict[str, list[dict[str, float]]] = {"two": [], "one": []}

    def side(name: str, count: int):
        def run() -> float:
            r = len(runs[name])
            print(f"process_scaling: {name}, run {r + 1}", file=sys.stderr, flush=True)
            runs[name].append(_timed_run(plan, work / f"{name}-{r}", count, args.timeout))
            return runs[name][-1]["wall_s"]

        return run

    # Interleaved, so that a slow spell meets both sides. Every run starts new processes, which
    # compile what they run: no run is warm, and each one's start (launch to its first batch
    # stored, compiling included) is apart from its batches in `components` and `median`.
    timing = interleaved(
        {"two": side("two", 2), "one": side("one", 1)},
        args.runs,
        ours="two",
        baseline="one",
        cold=False,
        timer=lambda run: run(),
    )
    summary["components"] = runs  # each run's, in order
    median = {
        name: {key: float(np.median([run[key] for run in done])) for key in done[0]}
        for name, done in runs.items()
    }
    summary["median"] = median
    summary["coordination_s"] = (median["two"]["start_s"] + median["two"]["end_s"]) - (
        median["one"]["start_s"] + median["one"]["end_s"]
    )
    summary["batch_slowdown"] = median["two"]["batch_s"] / median["one"]["batch_s"]
    summary["meetings"] = [meetings(n, args.meeting_repeats) for n in args.meeting_processes]
    summary.update(headline(timing, gpu=False))
    summary["efficiency"] = summary["ratio"] / 2
    out_path.write_text(json.dumps(summary, indent=2))
    skip = ("components", "median", "meetings", "plan")
    line = {key: value for key, value in summary.items() if key not in skip}
    line["median_wall_s"] = {name: m["wall_s"] for name, m in median.items()}
    print(json.dumps(line))
    return summary


if __name__ == "__main__":
    main()
