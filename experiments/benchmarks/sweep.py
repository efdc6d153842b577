"""Benchmark: ``iml.calibration.beta_sweep`` against a scikit-learn + NumPy loop.

The paper's scale: 112,120 scores (ChestX-ray14), 1,000 candidate class weights, 200 bootstrap
replicates. For every beta: the loss-corrected scores' decile calibration curve, ECE and the
loss-calibration gap, with percentile bootstrap intervals. The baseline does the same work the way
a user would today: a Python loop over betas and replicates calling scikit-learn's
``calibration_curve`` on each resample, with NumPy for counts, ECE and gap. The baseline loop takes
about half an hour at full scale, so a slice of betas is timed and scaled linearly (stated in the
JSON). The data are simulated (so the benchmark runs anywhere): posteriors with the ChestX-ray14
pneumonia prevalence (about 1.3%), scores optimal for beta = 0.99, labels drawn from the posteriors.

Run::

    python -m experiments.benchmarks.sweep            # full scale
    python -m experiments.benchmarks.sweep --quick    # small, for a smoke test

The last stdout line is one JSON object; ``ratio`` is baseline time / ours (higher is better).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import threading
import time
from pathlib import Path
from typing import ClassVar

import jax
import numpy as np
from sklearn.calibration import calibration_curve as sk_calibration_curve

from iml.calibration import beta_sweep
from iml.scoring import optimal_score


class PeakRSS:
    """Samples this process's resident set size in a thread; ``peak`` in bytes."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(self.interval)

    def __enter__(self) -> PeakRSS:
        self.peak = self._rss()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


class _Meter:
    """Counts what ``jax.monitoring`` reports while the context is open. Each subclass listens
    once (``jax.monitoring`` cannot drop a listener) and hears for every open meter of its kind."""

    _open: ClassVar[list[_Meter]]
    _listening: ClassVar[bool]
    _listen: ClassVar[str]  # the jax.monitoring function that registers the listener

    def __enter__(self) -> _Meter:
        kind = type(self)
        if not kind._listening:
            getattr(jax.monitoring, kind._listen)(kind._hear)
            kind._listening = True
        kind._open.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        type(self)._open.remove(self)


class CompileSeconds(_Meter):
    """Seconds JAX spends making programs (tracing, lowering to MLIR, XLA's compile) while the
    context is open, as ``jax.monitoring`` reports them; ``seconds`` after exit."""

    EVENTS = (
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    )
    _open: ClassVar[list[CompileSeconds]] = []
    _listening: ClassVar[bool] = False
    _listen = "register_event_duration_secs_listener"

    def __init__(self) -> None:
        self.seconds = 0.0

    @classmethod
    def _hear(cls, event: str, duration: float, *args: object, **kwargs: object) -> None:
        if event in cls.EVENTS:
            for meter in cls._open:
                meter.seconds += duration


class CacheHits(_Meter):
    """Persistent compilation cache hits and misses while the context is open
    (``jax.monitoring``'s events)."""

    _open: ClassVar[list[CacheHits]] = []
    _listening: ClassVar[bool] = False
    _listen = "register_event_listener"

    def __init__(self) -> None:
        self.hits = self.misses = 0

    @classmethod
    def _hear(cls, event: str, **kwargs: object) -> None:
        for meter in cls._open:
            if event == "/jax/compilation_cache/cache_hits":
                meter.hits += 1
            elif event == "/jax/compilation_cache/cache_misses":
                meter.misses += 1


def simulate(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scores of a loss-calibrated model trained with beta = 0.99, at ChestX-ray14 prevalence."""
    rng = np.random.default_rng(seed)
    posterior = rng.beta(0.45, 34.0, n)  # mean ~ 1.3%
    scores = np.asarray(optimal_score(posterior.astype(np.float32), 0.99))
    labels = (rng.random(n) < posterior).astype(np.int32)
    return scores, labels


def baseline_one_beta(
    scores: np.ndarray,
    labels: np.ndarray,
    beta: float,
    n_bins: int,
    resamples: list[np.ndarray | None],
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """ECE and gap (point, and 95% percentile intervals) for one beta, the user's way."""
    a = scores.astype(np.float64)
    corrected = (1 - beta) * a / ((1 - beta) * a + beta * (1 - a))
    eces, gaps = [], []
    for idx in resamples:
        c, y, raw = (corrected, labels, a) if idx is None else (corrected[idx], labels[idx], a[idx])
        prob_true, prob_pred = sk_calibration_curve(y, c, n_bins=n_bins, strategy="quantile")
        edges = np.percentile(c, np.linspace(0, 100, n_bins + 1))
        binids = np.searchsorted(edges[1:-1], c)
        counts = np.bincount(binids, minlength=n_bins)
        share = counts[counts > 0] / len(c)
        eces.append(np.sum(share * np.abs(prob_pred - prob_true)))
        # Loss-calibration gap under the beta-weighted log loss, best switch a' = c^beta(rate).
        with np.errstate(divide="ignore", invalid="ignore"):
            l_pos, l_neg = -beta * np.log(raw), -(1 - beta) * np.log1p(-raw)
            own = np.bincount(binids, np.where(y == 1, l_pos, l_neg), minlength=n_bins)
            pos = np.bincount(binids, y, minlength=n_bins)
            rate = np.where(counts > 0, pos / np.maximum(counts, 1), 0.5)
            best = beta * rate / (beta * rate + (1 - beta) * (1 - rate))
            alt = np.where(pos > 0, -pos * beta * np.log(best), 0.0) + np.where(
                counts - pos > 0, -(counts - pos) * (1 - beta) * np.log1p(-best), 0.0
            )
        gaps.append(np.sum(np.where(counts > 0, own - alt, 0.0)) / len(c))
    eces, gaps = np.array(eces), np.array(gaps)
    return (
        eces[0],
        gaps[0],
        np.percentile(eces[1:], [2.5, 97.5]),
        np.percentile(gaps[1:], [2.5, 97.5]),
    )


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; write the JSON file, print it as the last line, and return it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--n", type=int, default=112_120)
    parser.add_argument("--betas", type=int, default=1000)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-betas", type=int, default=3, help="betas in the timed slice")
    parser.add_argument("--out", type=Path, default=Path("runs/benchmarks/sweep.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.betas, args.bootstrap, args.repeats, args.baseline_betas = (
            20_000,
            100,
            50,
            2,
            2,
        )
    n_bins = 10
    scores, labels = simulate(args.n)
    betas = np.linspace(0.5, 0.999, args.betas).astype(np.float32)
    key = jax.random.key(0)

    sweep = jax.jit(lambda s, y, b, k: beta_sweep(s, y, b, n_bins, args.bootstrap, k))
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        compiled = sweep.lower(scores, labels, betas, key).compile()
        compile_s = time.perf_counter() - t0
        runs = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            result = jax.block_until_ready(compiled(scores, labels, betas, key))
            runs.append(time.perf_counter() - t0)
    ours_s = statistics.median(runs)

    # Baseline: a slice of betas spread over the grid, each with 1 + B calls; scaled to all betas.
    rng = np.random.default_rng(1)
    resamples = [None] + [rng.integers(0, args.n, args.n) for _ in range(args.bootstrap)]
    slice_idx = np.linspace(0, args.betas - 1, args.baseline_betas).astype(int)
    t0 = time.perf_counter()
    base = [
        baseline_one_beta(scores, labels, float(betas[i]), n_bins, resamples) for i in slice_idx
    ]
    slice_s = time.perf_counter() - t0
    baseline_s = slice_s * args.betas / len(slice_idx)

    ece_diff = max(abs(float(result.ece[i]) - b[0]) for i, b in zip(slice_idx, base, strict=True))
    gap_diff = max(
        abs(float(result.loss_calibration_gap[i]) - b[1])
        for i, b in zip(slice_idx, base, strict=True)
    )
    record = {
        "benchmark": "sweep",
        "n": args.n,
        "n_betas": args.betas,
        "n_bootstrap": args.bootstrap,
        "n_bins": n_bins,
        "quick": args.quick,
        "ours_s_median": ours_s,
        "ours_runs_s": runs,
        "ours_compile_s": compile_s,
        "ours_peak_rss_gib": rss.peak / 2**30,
        "process_max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "baseline_s": baseline_s,
        "baseline_scaled": len(slice_idx) < args.betas,
        "baseline_slice_betas": len(slice_idx),
        "baseline_slice_s": slice_s,
        "baseline_note": (
            f"scikit-learn calibration_curve + NumPy, timed on {len(slice_idx)} of {args.betas} "
            "betas (each with 1 + n_bootstrap calls) and scaled linearly; the baseline re-derives "
            "quantile bins on each resample, beta_sweep keeps the sample's bins fixed"
        ),
        "check_max_abs_diff_ece": ece_diff,
        "check_max_abs_diff_gap": gap_diff,
        "device": f"{jax.devices()[0].platform} ({os.cpu_count()} cores, {cpu_name()})",
        "ratio": baseline_s / ours_s,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))
    print(json.dumps(record))
    return record


if __name__ == "__main__":
    main()
