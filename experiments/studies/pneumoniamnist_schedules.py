"""PneumoniaMNIST: the loss-corrected ECE at beta = 0.99 against beta = 0.5, under each schedule.

Each stored PneumoniaMNIST run (``docs/results/pneumoniamnist*``) scores the same 5,856 X-rays
through the same folds, so the ensembles at two class weights are paired observation by
observation. For each training schedule this prints, as one JSON object, the ECE (10 quantile
bins) of the loss-corrected ensemble scores at beta = 0.99 and at beta = 0.5, each with its 95%
bootstrap interval, and their difference and ratio with paired intervals
(:func:`iml.calibration.compare_ece`: the same resampled rows for both).

The schedules:

* ``6 epochs``: the paper's schedule, at most 6 epochs (``pneumoniamnist``);
* ``patience 2`` and ``patience 6``: to early stopping (``pneumoniamnist_early_stopping``,
  ``pneumoniamnist_patience``);
* ``floor 1e-4``: the learning rate kept at or above 1e-4, seed 0 (``pneumoniamnist_lr_floor``
  at 0.99, ``pneumoniamnist_lr_floor_other_betas`` at 0.5);
* ``floor 1e-4, 4 seeds, mean score`` and ``... mean logit``: beta = 0.99 pooled over the
  floor runs' 4 seeds (``pneumoniamnist_lr_floor`` and ``pneumoniamnist_lr_floor_seeds``), by
  the paper's mean score or by the mean logit; beta = 0.5 has seed 0 only.

The bootstrap resamples the X-rays with the trained networks fixed: it covers the evaluation
data's noise, not training's. Two recipes were trained with 4 seeds at beta = 0.99 (patience 2
without the floor, ``pneumoniamnist_seeds``; the floor with patience 6, ``pneumoniamnist_lr_floor``
and ``pneumoniamnist_lr_floor_seeds``): ``--seeds`` prints each seed's corrected ECE instead,
and the difference of the two recipes' means with the seeds as the unit (Welch's t interval),
which covers training's noise between seeds. Run from the repository root::

    python -m experiments.studies.pneumoniamnist_schedules \
        > docs/results/pneumoniamnist_schedules/ratios.json
    python -m experiments.studies.pneumoniamnist_schedules --seeds \
        > docs/results/pneumoniamnist_schedules/seeds.json

Its README's tables are rendered from those records (:data:`TABLES`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np
from scipy import stats

from experiments.sync_docs import Table
from iml.calibration import compare_ece, expected_calibration_error
from iml.pipeline.reveal_input import run_members
from iml.pipeline.store import aggregate_members
from iml.spec import loss_spec

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
# name: (runs of beta = 0.99, runs of beta = 0.5, how members pool)
SCHEDULES = {
    "6 epochs": (["pneumoniamnist"], ["pneumoniamnist"], "score"),
    "patience 2": (["pneumoniamnist_early_stopping"], ["pneumoniamnist_early_stopping"], "score"),
    "patience 6": (["pneumoniamnist_patience"], ["pneumoniamnist_patience"], "score"),
    "floor 1e-4": (["pneumoniamnist_lr_floor"], ["pneumoniamnist_lr_floor_other_betas"], "score"),
    "floor 1e-4, 4 seeds, mean score": (
        ["pneumoniamnist_lr_floor", "pneumoniamnist_lr_floor_seeds"],
        ["pneumoniamnist_lr_floor_other_betas"],
        "score",
    ),
    "floor 1e-4, 4 seeds, mean logit": (
        ["pneumoniamnist_lr_floor", "pneumoniamnist_lr_floor_seeds"],
        ["pneumoniamnist_lr_floor_other_betas"],
        "logit",
    ),
}


def ensemble(runs: Sequence[Path], beta: float, average: str) -> tuple[np.ndarray, np.ndarray]:
    """The scores of the ensemble of every member at ``beta`` in ``runs`` and the labels."""
    labels, members = None, []
    for run in runs:
        with np.load(run / "data" / "folds.npz") as folds:
            run_labels = folds["labels"]
        if labels is not None and not np.array_equal(labels, run_labels):
            raise ValueError(f"{run} holds other observations than {runs[0]}")
        labels = run_labels
        found = run_members(run)
        if found is None:
            raise ValueError(f"{run} holds no member batches")
        members += [(b, idx, a) for b, _, idx, a in found if b == beta]
    if not members:
        raise ValueError(f"no member at beta {beta} in {[str(r) for r in runs]}")
    pooled = aggregate_members(members, [beta], len(labels), average)
    if (pooled.sizes[0] == 0).any():
        raise ValueError(f"some observations have no member at beta {beta}")
    return pooled.scores[0], labels


def schedule_record(name: str, root: Path, n_bootstrap: int, seed: int) -> dict[str, object]:
    high_runs, low_runs, average = SCHEDULES[name]
    high, labels = ensemble([root / r for r in high_runs], 0.99, average)
    low, low_labels = ensemble([root / r for r in low_runs], 0.5, average)
    if not np.array_equal(labels, low_labels):
        raise ValueError(f"{name}: the two class weights' runs hold other observations")
    corrected = np.asarray(loss_spec(0.99).loss_corrected_score(high))
    c = compare_ece(
        corrected, np.asarray(low), labels, n_bootstrap=n_bootstrap, key=jax.random.key(seed)
    )

    def r(x):
        return np.round(np.asarray(x, np.float64), 4).tolist()

    return {
        "schedule": name,
        "runs_0.99": high_runs,
        "runs_0.5": low_runs,
        "average": average,
        "n": int(labels.size),
        "ece_0.99_corrected": r(c.ece[0]),
        "ece_0.99_interval": r(c.ece_interval[:, 0]),
        "ece_0.5": r(c.ece[1]),
        "ece_0.5_interval": r(c.ece_interval[:, 1]),
        "difference": r(c.difference),
        "difference_interval": r(c.difference_interval),
        "ratio": r(c.ratio),
        "ratio_interval": r(c.ratio_interval),
        "bootstrap": n_bootstrap,
    }


# name: the runs whose members at beta = 0.99 hold its seeds
SEED_RECIPES = {
    "no floor, patience 2": ["pneumoniamnist_seeds"],
    "floor 1e-4, patience 6": ["pneumoniamnist_lr_floor", "pneumoniamnist_lr_floor_seeds"],
}


def seed_eces(runs: Sequence[Path], beta: float = 0.99) -> dict[int, float]:
    """The ECE (10 quantile bins) of each seed's loss-corrected ensemble at ``beta``."""
    labels, members = None, []
    for run in runs:
        with np.load(run / "data" / "folds.npz") as folds:
            run_labels = folds["labels"]
        if labels is not None and not np.array_equal(labels, run_labels):
            raise ValueError(f"{run} holds other observations than {runs[0]}")
        labels = run_labels
        members += [m for m in run_members(run) or [] if m[0] == beta]
    out = {}
    for seed in sorted({m[1] for m in members}):
        mine = [(b, idx, a) for b, s, idx, a in members if s == seed]
        pooled = aggregate_members(mine, [beta], len(labels), "score")
        corrected = np.asarray(loss_spec(beta).loss_corrected_score(pooled.scores[0]))
        out[seed] = round(float(expected_calibration_error(corrected, labels)), 4)
    return out


def seed_record(root: Path = RESULTS) -> dict[str, object]:
    """Each recipe's per-seed corrected ECE at beta = 0.99, and the difference of the recipes'
    means (floor minus no floor) with its 95% Welch t interval, the seeds as the unit."""
    eces = {name: seed_eces([root / r for r in runs]) for name, runs in SEED_RECIPES.items()}
    without, floor = (np.array(list(e.values())) for e in eces.values())
    welch = stats.ttest_ind(floor, without, equal_var=False)
    interval = welch.confidence_interval(0.95)
    return {
        "recipes": {
            name: {
                "runs": SEED_RECIPES[name],
                "seeds": {str(k): v for k, v in e.items()},
                "mean": round(float(np.mean(list(e.values()))), 4),
                "sd": round(float(np.std(list(e.values()), ddof=1)), 4),
            }
            for name, e in eces.items()
        },
        "difference": round(float(floor.mean() - without.mean()), 4),
        "difference_interval": [round(float(interval.low), 4), round(float(interval.high), 4)],
        "p_value": round(float(welch.pvalue), 4),
        "method": (
            "corrected ECE (10 quantile bins) of each seed's ensemble at beta = 0.99; the "
            "difference of the recipes' means, floor minus no floor, with Welch's t interval "
            "over the seeds (95%)"
        ),
    }


def schedules_table(records: Sequence[dict]) -> str:
    """The corrected ECE at 0.99 against the ECE at 0.5 per schedule, and their difference."""

    def iv(value: float, interval: Sequence[float], sign: str = "") -> str:
        return f"{value:{sign}.3f} [{interval[0]:{sign}.3f}, {interval[1]:{sign}.3f}]"

    lines = [
        "| schedule | β = 0.99, corrected | β = 0.5 | difference [95% paired interval] |",
        "|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['schedule']} (`{'`, `'.join(dict.fromkeys(r['runs_0.99'] + r['runs_0.5']))}`) "
            f"| {iv(r['ece_0.99_corrected'], r['ece_0.99_interval'])} "
            f"| {iv(r['ece_0.5'], r['ece_0.5_interval'])} "
            f"| {iv(r['difference'], r['difference_interval'], '+')} |"
        )
    return "\n".join(lines)


def seeds_table(record: dict) -> str:
    """Each recipe's seeds at beta = 0.99, and the difference of their means."""
    lines = [
        "| recipe (runs) | corrected ECE of each seed | mean (sd) over the seeds |",
        "|---|---|---|",
    ]
    for name, r in record["recipes"].items():
        seeds = ", ".join(f"{v:.3f}" for v in r["seeds"].values())
        runs = "`, `".join(r["runs"])
        lines.append(f"| {name} (`{runs}`) | {seeds} | {r['mean']:.3f} ({r['sd']:.3f}) |")
    lo, hi = record["difference_interval"]
    lines.append(
        f"| floor minus no floor, the seeds as the unit | | {record['difference']:+.3f} "
        f"[{lo:+.3f}, {hi:+.3f}] (Welch, p = {record['p_value']:.3f}) |"
    )
    return "\n".join(lines)


FOLDER = RESULTS / "pneumoniamnist_schedules"
README = "docs/results/pneumoniamnist_schedules/README.md"
#: The generated tables of the folder's README (:mod:`experiments.sync_docs`).
TABLES = [
    Table(
        "pneumoniamnist_schedules differences",
        README,
        lambda: schedules_table(json.loads((FOLDER / "ratios.json").read_text())),
    ),
    Table(
        "pneumoniamnist_schedules seeds",
        README,
        lambda: seeds_table(json.loads((FOLDER / "seeds.json").read_text())),
    ),
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the docs/results folder")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--schedules", nargs="+", default=list(SCHEDULES), choices=SCHEDULES)
    parser.add_argument(
        "--seeds", action="store_true", help="print the per-seed record (seeds.json) instead"
    )
    args = parser.parse_args(argv)
    if args.seeds:
        print(json.dumps(seed_record(args.results), indent=1))
        return 0
    if args.n_bootstrap < 2:
        parser.error("--n-bootstrap must be at least 2")
    try:
        records = [
            schedule_record(name, args.results, args.n_bootstrap, args.seed)
            for name in args.schedules
        ]
    except (ValueError, FileNotFoundError) as err:
        print(f"pneumoniamnist_schedules: error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
