"""Benchmark: ``iml.calibration.calibration_across_betas`` against a scikit-learn + NumPy loop.

The paper's scale: 112,120 scores (ChestX-ray14), 1,000 candidate class weights, 200 bootstrap
replicates. For every beta: the loss-corrected scores' decile calibration curve, ECE and the
loss-calibration gap, with percentile bootstrap intervals. The baseline does the same work the way
a user would today: a Python loop over betas and replicates calling scikit-learn's
``calibration_curve`` on each resample, with NumPy for counts, ECE and gap. The baseline loop takes
about half an hour at full scale, so a slice of betas is timed and scaled linearly (stated in the
JSON). The data are simulated (so the benchmark runs anywhere): posteriors with the ChestX-ray14
pneumonia prevalence (about 1.3%), scores optimal for beta = 0.99, labels drawn from the posteriors.

Timed in ``--runs`` interleaved runs (:mod:`experiments.benchmarks._harness`): each run one call
of ours (compiled beforehand, ``compile_s`` apart) and one of the baseline's slice, after a cold
call of each (``cold_s``).

Run::

    python -m experiments.benchmarks.across_betas             # full scale
    python -m experiments.benchmarks.across_betas --quick     # small, for a smoke test

The last stdout line is one JSON object; ``ratio`` is the median over the runs of the baseline's
time (scaled to all betas) over ours (higher is better), ``ratio_range`` their range.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import jax
import numpy as np
from sklearn.calibration import calibration_curve as sk_calibration_curve

from experiments.benchmarks._harness import (
    PeakRSS,
    add_runs_argument,
    check_runs,
    headline,
    interleaved,
)
from iml.calibration import calibration_across_betas
from iml.scoring import optimal_score


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


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; write the JSON file, print it as the last line, and return it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--n", type=int, default=112_120)
    parser.add_argument("--betas", type=int, default=1000)
    parser.add_argument("--bootstrap", type=int, default=200)
    add_runs_argument(parser)
    parser.add_argument("--baseline-betas", type=int, default=3, help="betas in the timed slice")
    parser.add_argument("--out", type=Path, default=Path("runs/benchmarks/across_betas.json"))
    args = parser.parse_args(argv)
    check_runs(parser, args.runs)
    if args.quick:
        args.n, args.betas, args.bootstrap, args.baseline_betas = 20_000, 100, 50, 2
    n_bins = 10
    scores, labels = simulate(args.n)
    betas = np.linspace(0.5, 0.999, args.betas).astype(np.float32)
    key = jax.random.key(0)

    # Baseline: a slice of betas spread over the grid, each with 1 + B calls; scaled to all betas.
    rng = np.random.default_rng(1)
    resamples = [None] + [rng.integers(0, args.n, args.n) for _ in range(args.bootstrap)]
    slice_idx = np.linspace(0, args.betas - 1, args.baseline_betas).astype(int)
    across = jax.jit(
        lambda s, y, b, k: calibration_across_betas(s, y, b, n_bins, args.bootstrap, k)
    )
    done: dict = {}

    def ours() -> None:
        done["ours"] = jax.block_until_ready(compiled(scores, labels, betas, key))

    def baseline() -> None:
        done["baseline"] = [
            baseline_one_beta(scores, labels, float(betas[i]), n_bins, resamples) for i in slice_idx
        ]

    with PeakRSS() as rss:
        t0 = time.perf_counter()
        compiled = across.lower(scores, labels, betas, key).compile()
        compile_s = time.perf_counter() - t0
        timing = interleaved(
            {"ours": ours, "baseline": baseline},
            args.runs,
            scale={"baseline": args.betas / len(slice_idx)},
        )
    result, base = done["ours"], done["baseline"]

    ece_diff = max(abs(float(result.ece[i]) - b[0]) for i, b in zip(slice_idx, base, strict=True))
    gap_diff = max(
        abs(float(result.loss_calibration_gap[i]) - b[1])
        for i, b in zip(slice_idx, base, strict=True)
    )
    record = {
        "benchmark": "across_betas",
        "n": args.n,
        "n_betas": args.betas,
        "n_bootstrap": args.bootstrap,
        "n_bins": n_bins,
        "quick": args.quick,
        "peak_rss_gib": rss.peak / 2**30,  # both sides, interleaved
        "process_max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "baseline_scaled": len(slice_idx) < args.betas,
        "baseline_slice_betas": len(slice_idx),
        "baseline_note": (
            f"scikit-learn calibration_curve + NumPy, timed on {len(slice_idx)} of {args.betas} "
            "betas (each with 1 + n_bootstrap calls) and scaled linearly; the baseline re-derives "
            "quantile bins on each resample, calibration_across_betas keeps the sample's bins fixed"
        ),
        "check_max_abs_diff_ece": ece_diff,
        "check_max_abs_diff_gap": gap_diff,
        "backend": jax.default_backend(),
        **headline(timing, compile_s=compile_s),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))
    print(json.dumps(record))
    return record


if __name__ == "__main__":
    main()
