"""Benchmark: loss-corrected scores over a grid of weights, against a write of the same bytes.

The paper's scale: 1,000 betas x 112,120 scores (every ChestX-ray14 image) in float32, i.e. a
448 MB result. Producing it reads next to nothing (the scores and the betas) and writes the
result, so its physical limit is a write of the same bytes into a reused buffer (``fill``,
``ndarray.fill``), which reads nothing either: like with like. The headline ``ratio`` is that
write's time over ours (:func:`iml.scoring.loss_corrected_score_into`), i.e. the fraction of the
write bandwidth ours reaches (goal: at least 0.5).

Timed in the same interleaved runs (:mod:`experiments.benchmarks._harness`), one call of each
a run, after a cold call of each (``cold_s``; ``compile_s`` is the part of ``into``'s spent
making its program):
  * ``into``: ours, writing into a donated, reused buffer;
  * ``fill``: the write of the grid's bytes (the limit, the baseline);
  * ``copy``: ``np.copyto(dst, src)`` of the grid's bytes, which reads as many bytes as it
    writes: its bandwidth is stated for the bytes it moves (twice the grid's), and no ratio is
    taken against it;
  * ``jit``: ``jax.jit(loss_corrected_score)`` allocating a fresh result per call;
  * ``numpy``: the same formula in NumPy, written as a user would (``ratio_numpy``: its time over
    ours, the median over the runs).

Run: ``python -m experiments.benchmarks.scoring [--quick] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks._harness import (
    CompileSeconds,
    add_runs_argument,
    check_runs,
    headline,
    interleaved,
    per_run_ratios,
    summarise,
)
from iml.scoring import loss_corrected_score, loss_corrected_score_into

#: Bytes each side moves per call, in units of the grid's bytes (what its bandwidth counts).
TRAFFIC = {"into": 1, "fill": 1, "copy": 2, "jit": 1, "numpy": 1}


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


def run(n_betas: int, n_scores: int, runs: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    scores = rng.uniform(size=n_scores).astype(np.float32)
    scores[:2] = (0.0, 1.0)
    betas = np.linspace(1e-6, 1 - 1e-6, n_betas).astype(np.float32)
    nbytes = n_betas * n_scores * 4

    # The limit: write the grid's bytes into a reused buffer; and a copy between two.
    held = {
        "target": np.empty((n_betas, n_scores), np.float32),
        "src": np.ones((n_betas, n_scores), np.float32),
        "dst": np.empty((n_betas, n_scores), np.float32),
    }

    def fill() -> None:
        held["target"].fill(0.5)

    def copy() -> None:
        np.copyto(held["dst"], held["src"])

    # The same formula in NumPy, as a user would write it (temporaries included).
    def numpy_formula():
        a, b = scores[None, :], betas[:, None]
        num = (1 - b) * a
        return num / (num + b * (1 - a))

    a_dev, b_dev = jnp.asarray(scores)[None, :], jnp.asarray(betas)[:, None]
    fresh = jax.jit(loss_corrected_score)  # a fresh 448 MB result (and its page faults) per call

    def jit() -> None:
        fresh(a_dev, b_dev).block_until_ready()

    # Ours: into a donated, reused buffer.
    state = {"out": jnp.zeros((n_betas, n_scores), jnp.float32), "compile_s": []}

    def into() -> None:
        with CompileSeconds() as compiling:
            state["out"] = loss_corrected_score_into(state["out"], a_dev, b_dev)
            state["out"].block_until_ready()
        state["compile_s"].append(compiling.seconds)

    sides = {"into": into, "fill": fill, "copy": copy, "jit": jit, "numpy": numpy_formula}
    timing = interleaved(sides, runs, ours="into", baseline="fill")
    held.clear()  # the buffers' memory, before NumPy's reference result
    reference = numpy_formula()

    # Accuracy of what was timed, against float64 on a sample of rows.
    rows = np.linspace(0, n_betas - 1, min(n_betas, 16)).astype(int)
    a64, b64 = scores.astype(np.float64)[None, :], betas.astype(np.float64)[rows, None]
    exact = (1 - b64) * a64 / ((1 - b64) * a64 + b64 * (1 - a64))
    ours = np.asarray(state["out"])[rows]
    rel = np.abs(ours - exact) / np.maximum(np.abs(exact), np.finfo(np.float32).tiny)
    numpy_rel = np.abs(reference[rows] - exact) / np.maximum(exact, np.finfo(np.float32).tiny)

    warm = timing["warm_s"]
    results = {
        name: {
            "median_s": statistics.median(times),
            "bytes_moved": TRAFFIC[name] * nbytes,
            "gbytes_per_second": TRAFFIC[name] * nbytes / statistics.median(times) / 1e9,
        }
        for name, times in warm.items()
    }
    numpy_vs_ours = summarise(per_run_ratios(warm["numpy"], warm["into"]))
    return {
        "benchmark": "scoring",
        "grid": [n_betas, n_scores],
        "dtype": "float32",
        "result_bytes": nbytes,
        "results": results,
        "ratio_numpy": numpy_vs_ours["ratio"],
        "ratio_numpy_range": numpy_vs_ours["ratio_range"],
        "max_relative_error_float32": float(rel.max()),
        "max_relative_error_numpy_float32": float(numpy_rel.max()),
        "warm_compile_s": state["compile_s"][1:],
        "peak_rss_gib": _peak_rss_gib(),
        "backend": jax.default_backend(),
        "jax_version": jax.__version__,
        "numpy_version": np.__version__,
        "goal": "into at >= 0.5 of the write bandwidth (fill)",
        **headline(timing, compile_s=state["compile_s"][0]),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 betas and 3 runs")
    parser.add_argument("--betas", type=int, default=1000)
    parser.add_argument("--scores", type=int, default=112_120)
    add_runs_argument(parser, default=9)
    parser.add_argument("--out", type=Path, default=Path("runs/benchmarks/scoring.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.betas, args.runs = min(args.betas, 100), 3
    check_runs(parser, args.runs)
    if args.betas < 1 or args.scores < 2:
        parser.error("--betas and --scores must be positive (scores at least 2)")
    report = run(args.betas, args.scores, args.runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=2))
    tmp.replace(args.out)
    for name, entry in report["results"].items():
        print(
            f"{name:>6}: {entry['median_s'] * 1e3:8.1f} ms  {entry['gbytes_per_second']:6.2f} GB/s "
            f"of {TRAFFIC[name]}x the grid's bytes"
        )
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
