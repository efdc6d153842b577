"""How often a default sweep warns that loss calibration is rejected when the model is right.

Each data set is drawn from a well-specified logistic model: ``p`` standard normal features,
``y ~ Bernoulli(sigmoid(x . theta + b))`` with ``theta`` of norm ``--signal`` and the intercept
``b`` set for the prior ``--prior``. Each is swept as ``iml sweep`` does by default
(:func:`iml.pipeline.sweep.run_sweep`: the exact solver, the ridge chosen on each rotation's
validation folds, ten folds rotated 7-2-1, one seed) over ``--betas`` class weights evenly
spaced in logit from 0.01 to 0.99; the run's table carries each loss's loss-calibration test and
its verdicts, adjusted over the losses by Holm's procedure
(:func:`iml.calibration.loss_calibration_verdicts`). A data set *warns* when any loss is
rejected: the run would end with the warning. The model being well specified, the fitted
ensembles are loss-calibrated up to the fit's own noise, so the warning rate should stay near
or below the level 0.05.

Run from the repository root::

    python -m experiments.studies.well_specified_sweeps --datasets 100 \\
        --out docs/results/well_specified_sweeps/2026-12-02.json
    python -m experiments.studies.well_specified_sweeps --quick

Prints one JSON object: the settings, the number of data sets that warned, the rate with its
Monte Carlo standard error, and per data set the rejected losses, the smallest familywise
p-value, and per loss the mean absolute logit error of the corrected scores against the true
probabilities (``logit_miss``): whether a rejected loss's corrected scores do miss the truth
more than the others'.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, logit

from experiments.benchmarks._harness import machine
from iml.calibration.tables import table_tests
from iml.grids import beta_grid


def simulate(n: int, p: int, prior: float, signal: float, seed: int):
    """Features ``[n, p]``, labels and the true probabilities of a well-specified logistic model
    at prior ``prior``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, p)).astype(np.float32)
    theta = rng.normal(size=p)
    theta *= signal / np.linalg.norm(theta)
    z = rng.normal(size=200_000) * signal  # x . theta ~ N(0, signal^2)
    b = brentq(lambda c: expit(z + c).mean() - prior, -30.0, 30.0)
    truth = expit(x @ theta + b)
    y = (rng.random(n) < truth).astype(np.int32)
    return x, y, truth


def one(
    x: np.ndarray, y: np.ndarray, truth: np.ndarray, betas: np.ndarray, l2_scale: str = "paper"
) -> dict:
    """One default sweep: the losses it rejects, its smallest familywise p-value, its bins, and
    per loss how far the loss-corrected scores miss the true probabilities (the mean absolute
    difference of their logits), which the simulation knows and the test does not."""
    import dataclasses

    from iml.pipeline.sweep import run_sweep
    from iml.training.tabular import TABULAR_DEFAULTS

    train = dataclasses.replace(TABULAR_DEFAULTS, l2_scale=l2_scale)
    result = run_sweep(x, y, None, betas, seeds=1, train=train, progress=False)
    tests = table_tests(result.table)
    rejected = [key for key, _, record in tests if record["rejected"]]
    p = [record["p_value_familywise"] for _, _, record in tests]
    bins = [record["n_bins"] for _, _, record in tests]
    g = np.clip(np.asarray(result.corrected, np.float64), 1e-7, 1 - 1e-7)
    miss = np.mean(np.abs(logit(g) - logit(truth)[None]), axis=1)
    return {
        "rejected": rejected,
        "min_p_familywise": float(np.nanmin(p)),
        "bins": [int(min(bins)), int(max(bins))],
        "logit_miss": dict(zip(result.table, np.round(miss, 4).tolist(), strict=True)),
    }


def render(record: dict) -> str:
    """Per class weight: how many data sets rejected it, and the mean logit miss of the
    corrected scores against the truth where rejected and where not (Markdown)."""
    lines = ["| beta | data sets rejecting it | logit miss, rejected | logit miss, not rejected |",
             "|---|---|---|---|"]  # fmt: skip
    keys = list(record["rows"][0]["logit_miss"])
    for key in keys:
        hit = [row["logit_miss"][key] for row in record["rows"] if key in row["rejected"]]
        miss = [row["logit_miss"][key] for row in record["rows"] if key not in row["rejected"]]
        shown = f"{np.mean(hit):.3f}" if hit else ""
        lines.append(f"| {float(key):.4g} | {len(hit)} | {shown} | {np.mean(miss):.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", type=int, default=100)
    parser.add_argument("--n", type=int, default=5000, help="observations per data set")
    parser.add_argument("--features", type=int, default=5)
    parser.add_argument("--prior", type=float, default=0.2)
    parser.add_argument("--signal", type=float, default=2.0, help="norm of theta")
    parser.add_argument("--betas", type=int, default=16, help="class weights per sweep")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--l2-scale", default="paper", help="the ridge's scale (TrainConfig)")
    parser.add_argument("--quick", action="store_true", help="3 data sets of 2,000, 4 betas")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--render", type=Path, default=None, help="print a record's table")
    args = parser.parse_args(argv)
    if args.render is not None:
        print(render(json.loads(args.render.read_text())))
        return 0
    if args.quick:
        args.datasets, args.n, args.betas = 3, 2000, 4
    betas = beta_grid(args.betas)
    start = time.perf_counter()
    rows = []
    for i in range(args.datasets):
        x, y, truth = simulate(args.n, args.features, args.prior, args.signal, args.seed + i)
        rows.append(one(x, y, truth, betas, args.l2_scale))
    warned = sum(bool(r["rejected"]) for r in rows)
    rate = warned / args.datasets
    record = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "quick")},
        "datasets": args.datasets,
        "warned": warned,
        "rate": rate,
        "se": float(np.sqrt(rate * (1 - rate) / args.datasets)),
        "level": 0.05,
        "rows": rows,
        "seconds": round(time.perf_counter() - start, 1),
        **machine(),
    }
    text = json.dumps(record)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
