"""Benchmark: the logistic-regression beta sweep against a loop of scikit-learn fits.

Work: ``iml.pipeline.sweep.run_sweep`` on UCI Adult (48,842 rows, 108 encoded features): 64
betas (the default logit-spaced grid from 0.01 to 0.99) x 8 seeds x 10 rotations of the nested
cross-validation = 5,120 models, with a ridge penalty ``l2 = 1e-4`` and the default solver
(exact full-batch fits of the convex model; seeds then coincide), scored and tabulated as
``iml sweep`` does.

Baseline: what a researcher writes today, one ``sklearn.linear_model.LogisticRegression`` fit
per model (``class_weight={0: 1 - beta, 1: beta}``, lbfgs with its default tolerance, the same
ridge penalty, on the same training rows of the same rotations), run over all cores with
joblib. The full loop would take minutes, so a slice of models (``--baseline-models``, spread
over the grid) is timed and scaled to 5,120 (stated in the JSON).

Equal quality is checked on the slice: each sliced model's fitted objective (the mean
beta-weighted log loss on its training rows plus the ridge) against ours (relative difference),
and at each sliced beta the loss-corrected ECE of the baseline's out-of-fold scores (all ten
rotations, first seed) against the sweep's. The baseline's default tolerance stops lbfgs short of
the optimum where the weighted loss is flat, so the sliced models are also refitted, untimed, by
scikit-learn's Newton-Cholesky solver at a tolerance of 1e-10: against that reference optimum, our
objectives and our fitted log-likelihoods (the weighted log loss alone) are compared too.

Run from the repository root, with ``adult.data``, ``adult.test`` and ``adult.names`` from the
UCI Machine Learning Repository (https://archive.ics.uci.edu/dataset/2/adult) in ``ADULT_DIR``::

    python -m experiments.benchmarks.sweep_train --data-dir ADULT_DIR
    python -m experiments.benchmarks.sweep_train --data-dir ADULT_DIR --quick

The last stdout line is one JSON object; ``ratio`` is the baseline's time for all models over
ours (higher is better), with ``peak_rss_gb`` the process's peak resident memory and
``ours_compile_s`` the part of our time that JAX spent making its programs (tracing, lowering
and compiling).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

# The gradient tolerance of the exact reference fits of the quality check (scikit-learn's own
# default is 1e-4).
REFERENCE_TOL = 1e-10


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data-dir", required=True, help="folder with adult.data/.test/.names")
    p.add_argument("--quick", action="store_true", help="8 betas x 2 seeds on 8,000 rows")
    p.add_argument("--n-betas", type=int, default=None, help="default 64 (8 with --quick)")
    p.add_argument("--seeds", type=int, default=None, help="default 8 (2 with --quick)")
    p.add_argument("--rows", type=int, default=None, help="rows used (default all)")
    p.add_argument("--baseline-models", type=int, default=None, help="default 40 (10 quick)")
    p.add_argument("--jobs", type=int, default=-1, help="joblib workers (default all cores)")
    p.add_argument(
        "--l2",
        type=float,
        default=1e-4,
        help="ridge penalty of both (default 1e-4: Adult's rare one-hot categories make the "
        "unpenalised optimum lie at infinity, where no two solvers agree)",
    )
    p.add_argument("--out", default="runs/benchmarks/sweep_train.json", help="the JSON record")
    return p.parse_args(argv)


def _baseline_fit(x, y, train, beta, l2, exact=False):
    """One researcher's fit; returns (coef, intercept, seconds).

    scikit-learn minimises ``C sum_i w_i l_i + ||w||^2 / 2``; over ``C n`` that is the sweep's
    mean weighted loss plus ``l2 / 2 ||w||^2`` with ``C = 1 / (l2 n)``. ``exact`` asks for
    scikit-learn's Newton-Cholesky solver at a tolerance of 1e-10 instead of lbfgs at its
    default: the reference optimum of the quality check, not timed.
    """
    from sklearn.linear_model import LogisticRegression

    start = time.perf_counter()
    C = 1.0 / (l2 * len(train)) if l2 > 0 else np.inf
    solver = {"solver": "newton-cholesky", "tol": REFERENCE_TOL} if exact else {}
    clf = LogisticRegression(C=C, class_weight={0: 1.0 - beta, 1: beta}, max_iter=10_000, **solver)
    clf.fit(x[train], y[train])
    return clf.coef_[0], float(clf.intercept_[0]), time.perf_counter() - start


def _objective(x, y, train, beta, coef, intercept, l2):
    """Mean beta-weighted log loss over the training rows plus the ridge: the sweep's objective.

    With ``l2 = 0``, the fitted (weighted, negative, per row) log-likelihood alone.
    """
    coef = np.asarray(coef, np.float64)
    z = x[train].astype(np.float64) @ coef + float(intercept)
    t = y[train]
    weight = np.where(t == 1, beta, 1.0 - beta)
    return float(np.mean(weight * (np.logaddexp(0.0, z) - t * z)) + 0.5 * l2 * coef @ coef)


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    from joblib import Parallel, delayed

    from experiments.benchmarks.sweep import CompileSeconds, PeakRSS
    from iml import beta_grid
    from iml.calibration import beta_key, score_metrics
    from iml.data.folds import nested_cv_splits
    from iml.data.tabular import read_adult
    from iml.pipeline import atomic_write_bytes
    from iml.pipeline.sweep import plan_sweep, run_sweep
    from iml.scoring import loss_corrected_score
    from iml.training import TABULAR_DEFAULTS

    n_betas = args.n_betas or (8 if args.quick else 64)
    n_seeds = args.seeds or (2 if args.quick else 8)
    n_baseline = args.baseline_models or (10 if args.quick else 40)
    rows = args.rows or (8000 if args.quick else None)

    table, _ = read_adult(args.data_dir)  # both files, encoded as `iml sweep --dataset adult`
    x = np.asarray(table.features, np.float32)
    y = np.asarray(table.labels, np.int32)
    if rows is not None and rows < len(y):
        keep = np.random.default_rng(0).permutation(len(y))[:rows]
        x, y = x[keep], y[keep]
    betas = beta_grid(n_betas)
    train = dataclasses.replace(TABULAR_DEFAULTS, l2=args.l2, standardize=False)

    with PeakRSS() as peak, CompileSeconds() as compiling:
        start = time.perf_counter()
        result = run_sweep(x, y, None, betas, seeds=n_seeds, train=train, progress=False)
        ours = time.perf_counter() - start
    n_models = n_betas * n_seeds * 10

    # The same rotations and training rows as the sweep (its plan trains nothing).
    plan = plan_sweep(x, y, None, betas, seeds=n_seeds, train=train)
    splits = nested_cv_splits(plan.fold_ids)
    # A slice of models spread over the grid: whole betas (all rotations, for an ECE) first.
    picked = np.unique(np.linspace(0, n_betas - 1, max(1, n_baseline // len(splits))).astype(int))
    jobs = [(b, r) for b in picked for r in range(len(splits))][:n_baseline]
    start = time.perf_counter()
    fits = Parallel(n_jobs=args.jobs)(
        delayed(_baseline_fit)(x, y, splits[r].train, float(betas[b]), args.l2) for b, r in jobs
    )
    baseline_slice = time.perf_counter() - start
    baseline = baseline_slice * n_models / len(jobs)

    # Equal quality: objectives of the sliced models, and the corrected ECE at sliced betas.
    from iml.training import train_tabular

    # The members the sweep trained (deterministic: the same optimum).
    ours_fit = train_tabular(
        plan.model, x, y, splits, betas[picked], [0], plan.config, progress=False
    )
    # The reference optimum of each sliced model: scikit-learn's exact solver (not timed).
    exact = Parallel(n_jobs=args.jobs)(
        delayed(_baseline_fit)(x, y, splits[r].train, float(betas[b]), args.l2, exact=True)
        for b, r in jobs
    )
    rel, rel_exact, rel_loglik = [], [], []
    oof = {b: np.full(len(y), np.nan) for b in picked}
    for (b, r), (coef, intercept, _), (ref_coef, ref_intercept, _) in zip(
        jobs, fits, exact, strict=True
    ):
        k = int(np.flatnonzero(picked == b)[0])
        beta = float(betas[b])
        rows = splits[r].train
        mine_fit = (ours_fit.params["w"][0, k, r], ours_fit.params["b"][0, k, r])
        theirs = _objective(x, y, rows, beta, coef, intercept, args.l2)
        mine = _objective(x, y, rows, beta, *mine_fit, args.l2)
        reference = _objective(x, y, rows, beta, ref_coef, ref_intercept, args.l2)
        rel.append((mine - theirs) / theirs)
        rel_exact.append((mine - reference) / reference)
        mine_loglik = _objective(x, y, rows, beta, *mine_fit, 0.0)
        reference_loglik = _objective(x, y, rows, beta, ref_coef, ref_intercept, 0.0)
        rel_loglik.append((mine_loglik - reference_loglik) / reference_loglik)
        test = splits[r].test
        oof[b][test] = 1.0 / (1.0 + np.exp(-(x[test] @ coef + intercept)))
    ece_diff = {}
    for b in picked:
        if np.isnan(oof[b]).any():
            continue  # not every rotation of this beta is in the slice
        beta = float(betas[b])
        theirs = score_metrics(np.asarray(loss_corrected_score(oof[b], beta)), y)["ece"]
        ece_diff[beta_key(beta)] = result.table[beta_key(beta)]["loss_corrected"]["ece"] - theirs

    report = {
        "benchmark": "sweep_train",
        "work": f"logistic beta sweep (l2 = {args.l2:g}) on UCI Adult: {n_betas} betas x "
        f"{n_seeds} seeds x 10 rotations = {n_models} models, {len(y)} rows x {x.shape[1]} "
        "features",
        "ours_s": round(ours, 2),
        "ours_compile_s": round(compiling.seconds, 2),  # of ours_s: JAX making its programs
        "baseline_s": round(baseline, 2),
        "baseline_measured": f"{len(jobs)} scikit-learn fits in {baseline_slice:.2f} s on "
        f"{os.cpu_count()} cores (joblib), scaled to {n_models}",
        "ratio": round(baseline / ours, 3),
        "objective_rel_diff_max": float(np.max(np.abs(rel))),
        "objective_ours_lower_or_equal": bool(np.all(np.asarray(rel) <= 1e-6)),
        "objective_rel_diff_vs_exact_max": float(np.max(np.abs(rel_exact))),
        "loglik_rel_diff_vs_exact_max": float(np.max(np.abs(rel_loglik))),
        "corrected_ece_diff": ece_diff,
        "corrected_ece_diff_max": float(max(abs(v) for v in ece_diff.values()))
        if ece_diff
        else None,
        "peak_rss_gb": round(peak.peak / 2**30, 2),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, json.dumps(report, indent=2).encode())
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
