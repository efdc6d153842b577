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
data's noise, not training's. Run from the repository root::

    python -m experiments.studies.pneumoniamnist_schedules \
        > docs/results/pneumoniamnist_schedules/ratios.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from iml.calibration import compare_ece
from iml.pipeline.reveal import run_members
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the docs/results folder")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--schedules", nargs="+", default=list(SCHEDULES), choices=SCHEDULES)
    args = parser.parse_args(argv)
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


TABLES: list = []  # the generated tables of docs/results/pneumoniamnist_schedules/README.md
