"""`iml sweep` with no tuning flags against scikit-learn's default logistic regression, on the same
folds.

For each data set, the sweep's unweighted member (beta = 1/2 for a binary target, ``ones`` for
the multiclass losses) is fitted by ``iml sweep``'s defaults (the exact solver, the ridge chosen
per rotation on the validation folds, features standardised on the training folds), and
scikit-learn's ``LogisticRegression()`` at its defaults (C = 1, lbfgs) in a pipeline after
``StandardScaler()`` is fitted on the same training rows of every rotation (7 of 10 folds; the
validation folds are left out of both fits) and scores the same test rows. Reported per data set:
out-of-fold accuracy and log loss of both, and the difference of each (ours - scikit-learn's)
with a 95% paired bootstrap interval over observations.

The multiclass sweeps' losses are the class-weighted softmax cross-entropy (multinomial logistic
regression, scikit-learn's default for several classes) and the B-weighted log loss (one
sigmoid per class, against ``OneVsRestClassifier(LogisticRegression())``).

Run from the repository root (``DATA`` is ``../shared/data``; digits and the binary CSV, made
from scikit-learn's breast-cancer data, need no files)::

    python -m experiments.studies.compare_sklearn --adult DATA/uci-adult --letter DATA/uci-letter \\
        --out docs/results/sklearn_defaults/2026-12-03_least_penalty.json

The last stdout line is the JSON record.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments.sync_docs import Table


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--adult", help="folder of the UCI Adult files (skipped without)")
    p.add_argument("--letter", help="folder of the UCI Letter file (skipped without)")
    p.add_argument("--only", nargs="+", help="the cases to run (default all)")
    p.add_argument("--replicates", type=int, default=2000, help="bootstrap replicates")
    p.add_argument(
        "--l2-choice",
        default="least_penalty",
        help="how the sweep's ridge is chosen (config.train.l2_choice; the record of 2026-11-28 "
        "ran at 'lowest_loss', the default then)",
    )
    p.add_argument(
        "--near-lowest",
        type=float,
        default=None,
        help="a trial of the rule's threshold: iml.training.tabular.NEAR_LOWEST (standard errors) "
        "set for this process",
    )
    p.add_argument("--out", help="where to write the JSON record")
    return p.parse_args(argv)


def _sweep_scores(overrides: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, list, str]:
    """The out-of-fold scores of the sweep's first loss, its labels, rotations and loss name."""
    from iml import config as config_lib
    from iml.pipeline.defaults import sweep_config
    from iml.pipeline.run_config import check_config
    from iml.pipeline.sweep import prepare_sweep, sweep_experiment, sweep_result
    from iml.pipeline.train_plan import run

    config = sweep_config()
    for key, value in overrides.items():
        config_lib.override(config, key, value)
    plan, _ = prepare_sweep(check_config(config))
    trained = run(sweep_experiment(plan), None, progress=False)
    result = sweep_result(plan, [b.entry for b in trained])
    return plan.features, result.scores[0], result.labels, plan.splits


def _sklearn_scores(x: np.ndarray, y: np.ndarray, splits: list, one_vs_rest: bool) -> np.ndarray:
    """scikit-learn's default logistic regression after a scaler, fitted per rotation."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    classes = np.unique(y)
    out = np.full((len(y), len(classes)), np.nan)
    for split in splits:
        model = OneVsRestClassifier(LogisticRegression()) if one_vs_rest else LogisticRegression()
        pipe = make_pipeline(StandardScaler(), model).fit(x[split.train], y[split.train])
        proba = pipe.predict_proba(x[split.test])
        if one_vs_rest:  # each sigmoid as it is, not renormalised
            proba = np.column_stack([e.predict_proba(pipe[0].transform(x[split.test]))[:, 1]
                                     for e in pipe[-1].estimators_])  # fmt: skip
        out[split.test] = proba
    return out[:, 1] if len(classes) == 2 else out


def _per_row(scores: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's correctness and log loss: the top class (or the 1/2 threshold), and ``-log``
    the true class's score, clipped to ``[1e-7, 1 - 1e-7]`` as the sweep's metrics are."""
    s = np.clip(scores, 1e-7, 1 - 1e-7)
    if s.ndim == 1:
        return (s > 0.5) == (y == 1), -np.where(y == 1, np.log(s), np.log1p(-s))
    return np.argmax(s, axis=1) == y, -np.log(s[np.arange(len(y)), y])


def compare(
    overrides: dict[str, Any], one_vs_rest: bool = False, replicates: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """The sweep of ``overrides`` (config keys) against scikit-learn's defaults."""
    start = time.perf_counter()
    x, ours, y, splits = _sweep_scores(overrides)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    theirs = _sklearn_scores(x, y, splits, one_vs_rest)
    theirs_s = time.perf_counter() - start
    (right, loss), (their_right, their_loss) = _per_row(ours, y), _per_row(theirs, y)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(y), size=(replicates, len(y)))
    accuracy_diff = right[draws].mean(axis=1) - their_right[draws].mean(axis=1)
    loss_ratio = loss[draws].mean(axis=1) / their_loss[draws].mean(axis=1)

    def interval(values: np.ndarray) -> list[float]:
        return [float(v) for v in np.quantile(values, [0.025, 0.975])]

    return {
        "rows": len(y),
        "classes": len(np.unique(y)),
        "accuracy": {"ours": float(right.mean()), "sklearn": float(their_right.mean())},
        "accuracy_diff": float(right.mean() - their_right.mean()),
        "accuracy_diff_95ci": interval(accuracy_diff),
        "log_loss": {"ours": float(loss.mean()), "sklearn": float(their_loss.mean())},
        "log_loss_ratio": float(loss.mean() / their_loss.mean()),
        "log_loss_ratio_95ci": interval(loss_ratio),
        "seconds": {"ours": round(ours_s, 2), "sklearn": round(theirs_s, 2)},
    }


def _breast_cancer_csv(folder: Path) -> Path:
    """scikit-learn's breast-cancer data as a CSV file with a yes/no target."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    path = folder / "breast_cancer.csv"
    names = [n.replace(" ", "_") for n in data.feature_names]
    lines = [",".join([*names, "malignant"])]
    for row, target in zip(data.data, data.target, strict=True):
        lines.append(",".join([*map(repr, row.tolist()), "yes" if target == 0 else "no"]))
    path.write_text("\n".join(lines) + "\n")
    return path


def cases(args: argparse.Namespace, folder: Path) -> dict[str, tuple[dict[str, Any], bool]]:
    """The comparisons: config overrides, and whether scikit-learn's side is one-vs-rest."""
    binary = {"loss.betas": (0.5,)}
    out = {
        "digits (10 classes), class_weighted_softmax": (
            {
                "data.name": "digits",
                "data.classes": "all",
                "loss.name": "class_weighted_softmax",
                "loss.weights": "ones",
            },
            False,
        ),
        "digits (10 classes), matrix": (
            {
                "data.name": "digits",
                "data.classes": "all",
                "loss.name": "matrix",
                "loss.weights": "ones",
            },
            True,
        ),
        "breast-cancer CSV (binary)": (
            {
                "data.csv": str(_breast_cancer_csv(folder)),
                "data.target": "malignant",
                "data.positive": "yes",
                **binary,
            },
            False,
        ),
    }
    if args.letter:
        for loss, ovr in (("class_weighted_softmax", False), ("matrix", True)):
            out[f"letter (26 classes), {loss}"] = (
                {"data.name": "letter", "data.data_dir": args.letter, "data.classes": "all",
                 "loss.name": loss, "loss.weights": "ones"}, ovr)  # fmt: skip
    if args.adult:
        out["adult (binary)"] = ({"data.name": "adult", "data.data_dir": args.adult, **binary},
                                 False)  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = _parse(argv)
    from iml.cli import keep_compiled_programs

    keep_compiled_programs()
    if args.near_lowest is not None:
        from iml.training import tabular

        tabular.NEAR_LOWEST = args.near_lowest  # read when the choice is first traced
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "l2_choice": args.l2_choice,
                              "near_lowest": args.near_lowest, "results": {}}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name, (overrides, ovr) in cases(args, Path(tmp)).items():
            if args.only and not any(part in name for part in args.only):
                continue
            overrides = {**overrides, "train.l2_choice": args.l2_choice}
            result = compare(overrides, ovr, args.replicates)
            report["results"][name] = result
            print(f"{name}: accuracy {result['accuracy']}, log loss {result['log_loss']}")
    if args.out:
        from iml.pipeline import atomic_write_bytes

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(Path(args.out), json.dumps(report, indent=2).encode())
    print(json.dumps(report))
    return report


RECORDS = Path(__file__).resolve().parents[2] / "docs" / "results" / "sklearn_defaults"
DOCUMENT = "docs/results/sklearn_defaults/README.md"


def render(record: dict[str, Any]) -> str:
    """A record's comparison per data set and loss: accuracy and log loss of both, with the
    difference of accuracies and the ratio of log losses and their intervals (Markdown)."""
    lines = ["| data, loss | rows | accuracy (iml) | accuracy (sklearn) | difference [95% CI] | "
             "log loss (iml) | log loss (sklearn) | ratio [95% CI] |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, r in record["results"].items():
        (a_low, a_high), (l_low, l_high) = r["accuracy_diff_95ci"], r["log_loss_ratio_95ci"]
        lines.append(
            f"| {name} | {r['rows']:,} | {r['accuracy']['ours']:.4f} | "
            f"{r['accuracy']['sklearn']:.4f} | {r['accuracy_diff']:+.4f} [{a_low:+.4f}, "
            f"{a_high:+.4f}] | {r['log_loss']['ours']:.4f} | {r['log_loss']['sklearn']:.4f} | "
            f"{r['log_loss_ratio']:.3f} [{l_low:.3f}, {l_high:.3f}] |"
        )
    return "\n".join(lines)


def _table(name: str) -> str:
    return render(json.loads((RECORDS / name).read_text()))


TABLES = [
    Table("sklearn_defaults least_penalty", DOCUMENT,
          lambda: _table("2026-12-03_least_penalty.json")),
    Table("sklearn_defaults lowest_loss", DOCUMENT, lambda: _table("2026-11-28_cpu_2core.json")),
    Table("sklearn_defaults near_lowest_1 trial", DOCUMENT,
          lambda: _table("2026-12-03_near_lowest_1_trial.json")),
]  # fmt: skip


if __name__ == "__main__":
    main()
