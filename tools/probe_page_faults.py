"""Where the exact sweep's wall time goes beyond its arithmetic: the process's CPU seconds in
user space and in the kernel, and its minor page faults, per run of the fixed-ridge fits.

    python -m tools.probe_page_faults --data-dir ADULT_DIR             # 5 runs, 64 betas
    python -m tools.probe_page_faults --data-dir ADULT_DIR --host-memory keep --default
    GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python -m tools.probe_page_faults --data-dir ADULT_DIR

The work is what ``python -m experiments.benchmarks.sweep_train`` times as ours (the 640 fits of
UCI Adult at a ridge of 1e-4, with their out-of-fold logits; with ``--default``, every penalty of
the ridge's grid on standardised features, each member's chosen on its validation folds, as
``iml sweep`` fits by default), run ``--runs`` times in one process; the first run makes or loads
the programs. ``--host-memory keep`` runs them under
:func:`iml.training.host.keep_step_memory`, as ``iml sweep`` does. Each run prints its wall
seconds, its user and system CPU seconds, its minor page faults (each a fresh page of memory the
kernel hands out) and the peak resident memory so far; the last line is a JSON summary. The
environment (an allocator preloaded, glibc's tunables) is the experiment: the probe reports what
it was run under (``GLIBC_TUNABLES``, ``LD_PRELOAD``, ``MALLOC_*``).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

from experiments.benchmarks._harness import memory_environment, process_account


def account(work: Callable[[], object], runs: int) -> list[dict[str, float]]:
    """Calls ``work`` ``runs`` times; per call, its wall seconds, this process's user and system
    CPU seconds and minor page faults (:func:`experiments.benchmarks._harness.process_account`),
    and the peak resident memory so far (GB)."""
    rows = []
    for _ in range(runs):
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        work()
        wall = time.perf_counter() - start
        peak_gb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
        rows.append({"wall_s": round(wall, 3), **process_account(before), "peak_rss_gb": peak_gb})
    return rows


def summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    """Medians over the runs after the first (which makes or loads the programs)."""
    warm = rows[1:] or rows
    return {
        key: statistics.median(row[key] for row in warm)
        for key in ("wall_s", "user_s", "sys_s", "minor_faults")
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="the folder of UCI Adult's files")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rows", type=int, default=None, help="a random subset of Adult's rows")
    parser.add_argument("--n-betas", type=int, default=None)
    parser.add_argument("--default", action="store_true", help="the default sweep's fits")
    parser.add_argument("--host-memory", choices=("keep", "system"), default="system")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")

    import dataclasses

    import numpy as np

    from experiments.benchmarks.sweep_train import _setup
    from iml.training import TABULAR_DEFAULTS, train_tabular
    from iml.training.host import host_memory_record, keep_step_memory

    if args.host_memory == "keep":  # before JAX's first computation, as `iml sweep`
        keep_step_memory(shared_heap=True)

    setup = argparse.Namespace(data_dir=args.data_dir, n_betas=args.n_betas, rows=args.rows,
                               baseline_models=None, quick=False, seeds=1)  # fmt: skip
    train = TABULAR_DEFAULTS
    if not args.default:
        train = dataclasses.replace(train, l2=1e-4, standardize=False)
    x, y, _, betas, plan, *_ = _setup(setup, train)

    def work() -> None:
        fit = train_tabular(plan.model, x, y, plan.splits, plan.losses, plan.seeds, plan.config)
        np.asarray(fit.test_logits)

    rows = account(work, args.runs)
    for i, row in enumerate(rows):
        print(f"run {i}: " + ", ".join(f"{key} {value}" for key, value in row.items()))
    record = {
        "probe": "page_faults",
        "work": f"{len(betas)} betas x {len(plan.splits)} rotations, {len(y)} rows",
        "default": args.default,
        "host_memory": host_memory_record(),
        "environment": memory_environment(),
        "runs": rows,
        "median_after_first": summary(rows),
    }
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
