"""Benchmark: loss-corrected scores over a grid of weights, against NumPy and a plain memory copy.

The paper's scale: 1,000 betas x 112,120 scores (every ChestX-ray14 image) in float32, i.e. a
448 MB result. The physical limit is a plain copy of the same bytes (``np.copyto`` into a reused
buffer); the headline ``ratio`` is copy time over our time for producing the whole grid, i.e. the
fraction of the copy's bandwidth we reach (goal: at least 0.5).

Measured side by side in one run, median of repeats, compile time apart:
  * ``copy``: ``np.copyto(dst, src)`` of the grid's bytes (the limit);
  * ``numpy``: the same formula in NumPy, written as a user would;
  * ``jit``: ``jax.jit(loss_corrected_score)`` allocating a fresh result per call;
  * ``into``: :func:`iml.scoring.loss_corrected_score_into`, writing into a donated, reused buffer.

Run: ``python -m experiments.benchmarks.scoring [--quick] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from iml.scoring import loss_corrected_score, loss_corrected_score_into


def _median_seconds(fn: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


def run(n_betas: int, n_scores: int, repeats: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    scores = rng.uniform(size=n_scores).astype(np.float32)
    scores[:2] = (0.0, 1.0)
    betas = np.linspace(1e-6, 1 - 1e-6, n_betas).astype(np.float32)
    nbytes = n_betas * n_scores * 4
    results: dict[str, dict] = {}

    # The limit: copy the same number of bytes between two reused buffers.
    src = np.ones((n_betas, n_scores), np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    median, times = _median_seconds(functools.partial(np.copyto, dst, src), repeats)
    results["copy"] = {"seconds": median, "all_seconds": times}

    # The same formula in NumPy, as a user would write it (temporaries included).
    def numpy_formula():
        a, b = scores[None, :], betas[:, None]
        num = (1 - b) * a
        return num / (num + b * (1 - a))

    median, times = _median_seconds(numpy_formula, max(1, repeats // 3))
    results["numpy"] = {"seconds": median, "all_seconds": times}
    reference = numpy_formula()

    a_dev, b_dev = jnp.asarray(scores)[None, :], jnp.asarray(betas)[:, None]

    # Plain jit: a fresh 448 MB result (and its page faults) per call.
    fresh = jax.jit(loss_corrected_score)
    start = time.perf_counter()
    out = fresh(a_dev, b_dev).block_until_ready()
    compile_fresh = time.perf_counter() - start
    median, times = _median_seconds(lambda: fresh(a_dev, b_dev).block_until_ready(), repeats)
    results["jit"] = {"seconds": median, "all_seconds": times, "compile_seconds": compile_fresh}
    del out, src, dst

    # Into a donated, reused buffer.
    state = {"out": jnp.zeros((n_betas, n_scores), jnp.float32)}

    def into():
        state["out"] = loss_corrected_score_into(state["out"], a_dev, b_dev)
        state["out"].block_until_ready()

    start = time.perf_counter()
    into()
    compile_into = time.perf_counter() - start
    median, times = _median_seconds(into, repeats)
    results["into"] = {"seconds": median, "all_seconds": times, "compile_seconds": compile_into}

    # Accuracy of what was timed, against float64 on a sample of rows.
    rows = np.linspace(0, n_betas - 1, min(n_betas, 16)).astype(int)
    a64, b64 = scores.astype(np.float64)[None, :], betas.astype(np.float64)[rows, None]
    exact = (1 - b64) * a64 / ((1 - b64) * a64 + b64 * (1 - a64))
    ours = np.asarray(state["out"])[rows]
    rel = np.abs(ours - exact) / np.maximum(np.abs(exact), np.finfo(np.float32).tiny)
    numpy_rel = np.abs(reference[rows] - exact) / np.maximum(exact, np.finfo(np.float32).tiny)

    for entry in results.values():
        entry["gbytes_per_second"] = nbytes / entry["seconds"] / 1e9
    copy_seconds = results["copy"]["seconds"]
    for entry in results.values():
        entry["fraction_of_copy_bandwidth"] = copy_seconds / entry["seconds"]

    return {
        "benchmark": "scoring",
        "grid": [n_betas, n_scores],
        "dtype": "float32",
        "result_bytes": nbytes,
        "repeats": repeats,
        "results": results,
        "max_relative_error_float32": float(rel.max()),
        "max_relative_error_numpy_float32": float(numpy_rel.max()),
        "peak_rss_gib": _peak_rss_gib(),
        "device": str(jax.devices()[0]),
        "machine": platform.processor() or platform.machine(),
        "jax_version": jax.__version__,
        "numpy_version": np.__version__,
        "goal": "into at >= 0.5 of the copy's bandwidth",
        "ratio": results["into"]["fraction_of_copy_bandwidth"],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 betas and 3 repeats")
    parser.add_argument("--betas", type=int, default=1000)
    parser.add_argument("--scores", type=int, default=112_120)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--out", type=Path, default=Path("runs/benchmarks/scoring.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.betas, args.repeats = min(args.betas, 100), 3
    if args.betas < 1 or args.scores < 2 or args.repeats < 1:
        parser.error("--betas, --scores and --repeats must be positive (scores at least 2)")
    report = run(args.betas, args.scores, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=2))
    tmp.replace(args.out)
    for name, entry in report["results"].items():
        print(
            f"{name:>6}: {entry['seconds'] * 1e3:8.1f} ms  {entry['gbytes_per_second']:6.2f} GB/s  "
            f"{entry['fraction_of_copy_bandwidth']:.2f} of copy"
        )
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
