"""Benchmark: revealed experiments with paired bootstrap inference, against a NumPy/SciPy loop.

Work: ``iml.revealed.reveal`` (NIAS included) on the scores of K = 64 simulated models (Bayesian
agents with Gaussian signals, one per beta on a logit-spaced grid from 0.5 to 0.99, reporting
``c^beta`` of their posteriors) on N = 112,120 observations (the size of ChestX-ray14), 10
quantile bins per model and 1,000 paired bootstrap replicates; each replicate computes the value
matrix ``G`` (64 x 64), every ``I_k``, the NIS margin and the NIAC margin (minimum cycle mean by
Karp's algorithm), and ``reveal`` adds the cost bounds (Floyd-Warshall), the Shannon lambda
interval, every percentile interval, and NIAS: each model's
:func:`iml.calibration.loss_calibration_test` (deciles of its loss-corrected scores merged to 10
expected positives and negatives, a chi-square statistic) with Holm's adjustment over the models.

Baseline: the loop a researcher would write. Per replicate: resample indices with NumPy, one
``np.bincount`` of (bin, label) per model, ``G`` as one vectorised NumPy expression, ``I_k``, the
NIS margin, and ``scipy.optimize.linear_sum_assignment`` for NIAC (the gain of the best
permutation over the identity). A slice of replicates (``--baseline-replicates``) is timed and
scaled to the full count (stated in the JSON); NIAS, done once a run, is added unscaled: per
model, the loss-corrected scores, ``np.quantile`` deciles merged in a loop, ``np.bincount`` of
the observed and expected positives and their variance, ``scipy.stats.chi2.sf``, then Holm.

Both sides run in ``--runs`` interleaved runs (:mod:`experiments.benchmarks._harness`), after a
cold call of each (``cold_s``); ``compile_s`` is the part of ours' cold call spent making
programs, ``warm_compile_s`` that of each warm run.

Agreement is checked on a slice of replicates with identical weights (the library's paired
bootstrap weights fed to both): ``G``, ``I_k`` and the NIS margin to float32 rounding, and the
NIAC verdicts (a positive minimum-cycle-mean margin exactly where the assignment gains); and
NIAS's statistics and bins, model by model, between the library and the baseline.

Run from the repository root::

    python -m experiments.benchmarks.reveal
    python -m experiments.benchmarks.reveal --quick

The record is written to ``--out`` (default ``runs/benchmarks/reveal.json``), and the last
stdout line is the same JSON object; ``ratio`` is the median over the runs of the baseline's
time for all replicates over ours (higher is better), ``ratio_range`` their range, with
``peak_rss_gb`` the process's peak resident memory (``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import numpy as np

from experiments.benchmarks._harness import (
    CompileSeconds,
    add_runs_argument,
    check_runs,
    headline,
    interleaved,
)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="16 models, 20,000 rows, 100 replicates")
    p.add_argument("--models", type=int, default=None, help="K (default 64; 16 with --quick)")
    p.add_argument("--rows", type=int, default=None, help="N (default 112,120; 20,000 quick)")
    p.add_argument("--bins", type=int, default=10, help="quantile bins per model (default 10)")
    p.add_argument("--replicates", type=int, default=None, help="default 1,000 (100 quick)")
    p.add_argument("--baseline-replicates", type=int, default=None, help="default 20 (5 quick)")
    add_runs_argument(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("runs/benchmarks/reveal.json"))
    args = p.parse_args(argv)
    check_runs(p, args.runs)
    return args


def simulate(n_models: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Betas, scores ``[K, N]`` and labels of Gaussian agents whose precision falls with beta."""
    import jax

    from iml.revealed import simulate_gaussian_agents

    betas = 1.0 / (1.0 + np.exp(-np.linspace(0.0, np.log(99.0), n_models)))
    precision = np.linspace(2.5, 1.0, n_models)
    scores, labels = simulate_gaussian_agents(
        jax.random.key(seed), betas.astype(np.float32), precision, 0.1, n
    )
    return betas.astype(np.float32), np.asarray(scores), np.asarray(labels)


def quantile_bins(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Per-model decile bins as a researcher computes them (right-closed, as the library)."""
    bins = np.empty(scores.shape, np.int32)
    for k, row in enumerate(scores):
        edges = np.quantile(row, np.linspace(0.0, 1.0, n_bins + 1))
        bins[k] = np.searchsorted(edges[1:-1], row, side="left")
    return bins


def minimised_loss(beta: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """``l*_beta(gamma) = Z h(c^beta(gamma))`` in NumPy (float64), ``0 log 0 = 0``."""
    pos, neg = beta * gamma, (1.0 - beta) * (1.0 - gamma)
    z = pos + neg
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(pos > 0, -pos * np.log(pos / z), 0.0)
        out += np.where(neg > 0, -neg * np.log(neg / z), 0.0)
    return out


def baseline_replicate(bins, labels, betas, n_bins, weight=None, rng=None):
    """One bootstrap replicate, as a loop over models; ``weight`` replaces the resampling."""
    from scipy.optimize import linear_sum_assignment

    n_models, n = bins.shape
    if weight is None:
        idx = rng.integers(0, n, n)
        y = labels[idx]
        cells = [np.bincount(bins[k][idx] * 2 + y, minlength=2 * n_bins) for k in range(n_models)]
    else:
        cells = [
            np.bincount(bins[k] * 2 + labels, weights=weight, minlength=2 * n_bins)
            for k in range(n_models)
        ]
    cells = np.stack(cells)
    cells = cells.reshape(n_models, n_bins, 2).astype(np.float64)
    count, positives = cells.sum(-1), cells[..., 1]
    total = count.sum(-1, keepdims=True)
    prior = positives.sum(-1, keepdims=True) / total
    prob = count / total
    gamma = np.where(count > 0, positives / np.maximum(count, 1e-300), prior)
    G = -(prob[None] * minimised_loss(betas[:, None, None], gamma[None])).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(gamma > 0, gamma * np.log(gamma / prior), 0.0)
        kl += np.where(gamma < 1, (1 - gamma) * np.log((1 - gamma) / (1 - prior)), 0.0)
    info = (prob * kl).sum(-1)
    switch = G - np.diag(G)[:, None]
    np.fill_diagonal(switch, -np.inf)
    rows, cols = linear_sum_assignment(G, maximize=True)
    return G, info, switch.max(), G[rows, cols].sum() - np.trace(G)


def baseline_nias(scores, labels, betas, n_bins, min_count=10.0):
    """NIAS as a loop over models in NumPy/SciPy: each model's statistic, bins and p-value, and
    the Holm-adjusted p-values."""
    from scipy.stats import chi2

    from experiments.studies.loss_calibration_tests import adaptive_bins

    statistics, n_used, p_values = [], [], []
    for a, beta in zip(scores.astype(np.float64), betas.astype(np.float64), strict=True):
        g = ((1 - beta) * a / (beta + (1 - 2 * beta) * a)).astype(np.float32)
        edges = np.quantile(g, np.linspace(0.0, 1.0, n_bins + 1))
        deciles = np.searchsorted(edges[1:-1], g, side="left")
        g = g.astype(np.float64)
        merged = adaptive_bins(g, deciles, n_bins, min_count)
        O, E = np.bincount(merged, labels), np.bincount(merged, g)
        V = np.bincount(merged, g * (1 - g))
        T = float(np.sum((O - E) ** 2 / V))
        S = len(O)
        statistics.append(T)
        n_used.append(S)
        p_values.append(float(chi2.sf(T, S)) if S >= 2 else np.nan)
    p = np.asarray(p_values)
    order = np.argsort(np.where(np.isnan(p), np.inf, p))
    m = int(np.sum(~np.isnan(p)))
    adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(p.size)) * p[order]))
    holm = np.empty_like(p)
    holm[order] = adjusted
    return np.asarray(statistics), np.asarray(n_used), holm


def agreement(bins, labels, betas, n_bins, n_check, seed):
    """Ours and the baseline on identical paired weights: the largest differences."""
    import jax

    from iml import revealed as R

    weights = R.paired_bootstrap_weights(jax.random.key(seed + 1), labels.shape[0], n_check)
    experiments = R.experiments_from_signals(bins.astype(np.int32), labels, n_bins, weights)
    G = np.asarray(R.value_matrix(experiments, betas))
    info = np.asarray(R.mutual_information(experiments))
    nis = np.asarray(R.nis_check(G).margin)
    niac = R.niac_check(G)
    diffs = {"G": 0.0, "I": 0.0, "nis": 0.0}
    verdicts = 0
    for b, w in enumerate(np.asarray(weights)):
        G0, info0, nis0, gain0 = baseline_replicate(
            bins, labels, betas.astype(np.float64), n_bins, weight=w
        )
        diffs["G"] = max(diffs["G"], float(np.abs(G[b] - G0).max()))
        diffs["I"] = max(diffs["I"], float(np.abs(info[b] - info0).max()))
        diffs["nis"] = max(diffs["nis"], float(abs(nis[b] - nis0)))
        verdicts += bool(niac.margin[b] > 0) == bool(gain0 > 1e-7)
    return diffs, verdicts, n_check


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    import jax

    from iml.revealed import reveal

    n_models = args.models or (16 if args.quick else 64)
    n = args.rows or (20_000 if args.quick else 112_120)
    n_boot = args.replicates or (100 if args.quick else 1000)
    n_base = args.baseline_replicates or (5 if args.quick else 20)

    betas, scores, labels = simulate(n_models, n, args.seed)
    labels = labels.astype(np.int32)

    bins = quantile_bins(scores, args.bins)
    rng = np.random.default_rng(args.seed)
    done: dict = {"compile_s": []}

    done["baseline_nias_s"] = []

    def ours() -> float:
        start = time.perf_counter()
        with CompileSeconds() as compiling:
            report = reveal(
                scores,
                labels,
                betas,
                args.bins,
                "quantile",  # the baseline's deciles: equal work
                n_bootstrap=n_boot,
                key=jax.random.key(args.seed),
                nias=True,
            )
            done["report"] = jax.block_until_ready(report)
        done["compile_s"].append(compiling.seconds)
        return time.perf_counter() - start

    def baseline() -> float:
        """The replicates' loop, timed on a slice and scaled to all; NIAS once, as it is."""
        start = time.perf_counter()
        for _ in range(n_base):
            baseline_replicate(bins, labels, betas.astype(np.float64), args.bins, rng=rng)
        replicates = (time.perf_counter() - start) * n_boot / n_base
        start = time.perf_counter()
        done["baseline_nias"] = baseline_nias(scores, labels, betas, args.bins)
        done["baseline_nias_s"].append(time.perf_counter() - start)
        return replicates + done["baseline_nias_s"][-1]

    timing = interleaved({"ours": ours, "baseline": baseline}, args.runs, timer=lambda call: call())
    report = done["report"]

    diffs, agree, checked = agreement(bins, labels, betas, args.bins, n_base, args.seed)
    assert diffs["G"] < 1e-5 and diffs["I"] < 1e-5 and diffs["nis"] < 1e-5, diffs
    assert agree == checked, f"NIAC verdicts differ on {checked - agree} of {checked} replicates"
    statistic, n_used, holm = done["baseline_nias"]
    nias = report.nias
    np.testing.assert_array_equal(np.asarray(nias.test.n_bins), n_used)
    nias_diff = float(np.max(np.abs(np.asarray(nias.test.statistic) - statistic) / (1 + statistic)))
    assert nias_diff < 1e-3, nias_diff
    assert np.array_equal(np.nan_to_num(holm, nan=1.0) <= 0.05, np.asarray(nias.violated))

    result = {
        "benchmark": "reveal",
        "work": f"reveal(): {n_models} models x {n} observations, {args.bins} bins, {n_boot} "
        "paired bootstrap replicates (value matrix, I_k, NIS and NIAC margins, cost bounds, "
        "lambda interval, intervals) and NIAS (each model's loss-calibration test, Holm)",
        "baseline_measured": f"{n_base} replicates a run, scaled to {n_boot}; NIAS once a run, "
        "unscaled",
        "baseline_nias_s": done["baseline_nias_s"],
        "nias_statistic_max_rel_diff": float(f"{nias_diff:.3g}"),
        "nias_models_rejected": int(np.sum(np.asarray(nias.violated))),
        "warm_compile_s": done["compile_s"][1:],
        "agreement_max_abs_diff": {k: float(f"{v:.3g}") for k, v in diffs.items()},
        "niac_verdicts_agree": f"{agree}/{checked}",
        "nis_violated": bool(report.nis_test.violated),
        "niac_violated": bool(report.niac_test.violated),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        **headline(timing, compile_s=done["compile_s"][0]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
