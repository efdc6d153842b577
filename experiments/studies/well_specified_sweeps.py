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
from scipy import stats
from scipy.optimize import brentq
from scipy.special import expit, logit

from experiments.benchmarks._harness import machine
from experiments.sync_docs import Table
from iml.calibration import clopper_pearson_interval
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
    x: np.ndarray,
    y: np.ndarray,
    truth: np.ndarray,
    betas: np.ndarray,
    l2_scale: str = "paper",
    redraws: int = 10,
    l2: float | str = "auto",
    seed: int = 0,
    l2_choice: str = "least_penalty",
) -> dict:
    """One default sweep: the losses it rejects, its smallest familywise p-value, its bins, and
    what the simulation knows and the test does not: per loss how far the loss-corrected scores
    miss the true probabilities (the mean absolute difference of their logits, and the slope of
    the true logits on theirs), and, the fitted scores held fixed, how often the warning fires
    on ``redraws`` label sets drawn from the truth (the chance of a warning that these fitted
    scores carry) and on label sets drawn from each loss's own corrected scores (where every
    loss is calibrated by construction: the warning's size at this N, prior and number of
    losses)."""
    import dataclasses

    from iml.pipeline.sweep import run_sweep
    from iml.training.tabular import TABULAR_DEFAULTS

    train = dataclasses.replace(TABULAR_DEFAULTS, l2_scale=l2_scale, l2=l2, l2_choice=l2_choice)
    result = run_sweep(x, y, None, betas, seeds=1, train=train, progress=False)
    tests = table_tests(result.table)
    rejected = [key for key, _, record in tests if record["rejected"]]
    p = [record["p_value_familywise"] for _, _, record in tests]
    bins = [record["n_bins"] for _, _, record in tests]
    g = np.clip(np.asarray(result.corrected, np.float64), 1e-7, 1 - 1e-7)
    miss = np.mean(np.abs(logit(g) - logit(truth)[None]), axis=1)
    rng = np.random.default_rng(seed)
    return {
        "rejected": rejected,
        "min_p_familywise": float(np.nanmin(p)),
        "bins": [int(min(bins)), int(max(bins))],
        "logit_miss": dict(zip(result.table, np.round(miss, 4).tolist(), strict=True)),
        "logit_slope": dict(
            zip(result.table, np.round(logit_slope(g, truth), 4).tolist(), strict=True)
        ),
        "redrawn_warned": {
            "truth": redrawn_warnings(g, lambda: rng.random(g.shape[1]) < truth, redraws),
            "corrected": redrawn_warnings(g, lambda: rng.random(g.shape) < g, redraws),
        },
    }


def logit_slope(g: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per loss, the least-squares slope of the true logits on the corrected scores' logits
    ``[L]``: 1 where the corrected scores spread as the truth does, below 1 where they are
    over-confident, above 1 where they are under-confident."""
    a, b = logit(g), logit(truth)[None]
    a = a - a.mean(axis=1, keepdims=True)
    return np.sum(a * (b - b.mean()), axis=1) / np.sum(a * a, axis=1)


def redrawn_warnings(g: np.ndarray, draw, redraws: int) -> float:
    """The fraction of ``redraws`` label sets from ``draw()`` on which the run's warning (the
    loss-calibration test of each loss's corrected scores ``g [L, N]``, Holm over the ``L``
    losses) fires, the fitted scores held fixed. ``draw()`` returns labels ``[N]`` shared by the
    losses, or ``[L, N]``, one set per loss."""
    from iml.calibration import calibration_test, holm_adjusted

    fired = 0
    for _ in range(redraws):
        y = np.broadcast_to(draw(), g.shape).astype(np.int32)
        p = [
            float(calibration_test(g_l, y_l, n_bootstrap=0).p_value)
            for g_l, y_l in zip(g, y, strict=True)
        ]
        fired += bool(np.nanmin(np.asarray(holm_adjusted(np.asarray(p)))) <= 0.05)
    return fired / redraws


RECORDS = Path(__file__).resolve().parents[2] / "docs" / "results" / "well_specified_sweeps"
DOCUMENT = "docs/results/well_specified_sweeps/README.md"
# The stored records, by the ridge their sweeps used.
DEFAULT = "2026-12-03_least_penalty.json"
RIDGES = {
    "chosen on the validation folds: the least penalty near the lowest loss (default)": DEFAULT,
    "chosen on the validation folds: the lowest loss (`--l2-choice lowest_loss`)":
        "2026-12-02.json",
    "the lowest loss, `--l2-scale per_weight`": "2026-12-02_per_weight.json",
    "fixed at 1e-6": "2026-12-02_l2_1e-6.json",
    "a trial: the least penalty within one standard error (`--near-lowest 1`)":
        "2026-12-03_near_lowest_1_trial.json",
}  # fmt: skip


def _record(name: str) -> dict:
    return json.loads((RECORDS / name).read_text())


def _warned(record: dict) -> np.ndarray:
    return np.array([bool(row["rejected"]) for row in record["rows"]])


def paired_difference(a: np.ndarray, b: np.ndarray, draws: int = 10_000) -> tuple[float, list]:
    """The difference of two warning rates on the same data sets, ``mean(a) - mean(b)``, with its
    95% percentile interval over ``draws`` resamplings of the data sets (paired; fixed seed)."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, a.size, (draws, a.size))
    diffs = a[idx].mean(axis=1) - b[idx].mean(axis=1)
    return float(a.mean() - b.mean()), np.percentile(diffs, [2.5, 97.5]).tolist()


def ridge_table() -> str:
    """Per stored record (the ridge its sweeps used): how many of the 100 data sets warned, the
    difference from the default's rate on the same data sets with its paired interval, and, where
    the record has them, the warning rates on label sets redrawn from the truth and from the
    corrected scores, and the mean logit slope at the two ends of the grid (Markdown)."""
    keys = list(_record(DEFAULT)["rows"][0]["logit_slope"])
    ends = (keys[0], keys[len(keys) // 2], keys[-1])
    lines = ["| ridge | data sets warned (95% interval of the rate) | "
             "minus the default's (paired 95% interval) | "
             "warned, labels from the truth | warned, labels from the corrected scores | "
             "mean logit slope at beta = " + " / ".join(f"{float(k):.4g}" for k in ends) + " |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    default = _warned(_record(DEFAULT))
    for ridge, name in RIDGES.items():
        record = _record(name)
        warned = _warned(record)
        low, high = map(float, clopper_pearson_interval(int(warned.sum()), warned.size))
        cells = [ridge, f"{int(warned.sum())} of {warned.size} ({low:.3f}, {high:.3f})"]
        if name == DEFAULT:
            cells.append("")
        else:
            diff, (low, high) = paired_difference(warned, default)
            cells.append(f"{diff:+.2f} [{low:+.2f}, {high:+.2f}]")
        rows = record["rows"]
        if "redrawn_warned" in rows[0]:
            for source in ("truth", "corrected"):
                rates = np.array([row["redrawn_warned"][source] for row in rows])
                se = rates.std(ddof=1) / np.sqrt(rates.size)
                cells.append(f"{rates.mean():.3f} (SE {se:.3f})")
            slopes = [np.mean([row["logit_slope"][k] for row in rows]) for k in ends]
            cells.append(" / ".join(f"{v:.3f}" for v in slopes))
        else:
            cells += ["not recorded"] * 3
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The default's records: the same 100 data sets as the other rules', 200 more (seeds 100 to
#: 299) and 700 more (seeds 300 to 999).
DEFAULT_RECORDS = (
    DEFAULT,
    "2026-12-03_least_penalty_more.json",
    "2026-12-04_least_penalty_700.json",
)


def pooled_table() -> str:
    """The default rule's warnings over all its records' data sets, each record and pooled: the
    rate with its exact 95% interval; the rate on label sets redrawn from each loss's corrected
    scores (calibrated by construction: the warning's size here), the mean over the data sets
    with its standard error; and the difference of the two on the same data sets with its normal
    95% interval (Markdown)."""
    lines = ["| record | data sets (seeds) | warned | rate [95% interval] | label sets redrawn "
             "per data set | warned, labels from the corrected scores | rate minus that size "
             "[95% interval] |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    total, count, warned_all, redrawn = 0, 0, [], []
    for name in DEFAULT_RECORDS:
        record = _record(name)
        warned, n = _warned(record), record["datasets"]
        first = record["settings"]["seed"]
        total, count = total + int(warned.sum()), count + n
        rates = np.array([row["redrawn_warned"]["corrected"] for row in record["rows"]])
        warned_all.append(warned)
        redrawn.append(rates)
        lines.append(f"| `{name}` | {n} ({first} to {first + n - 1}) | {int(warned.sum())} | "
                     f"{_rate(int(warned.sum()), n)} | {record['settings']['redraws']} | "
                     f"{_mean_se(rates)} | {_excess(warned, rates)} |")  # fmt: skip
    warned, rates = np.concatenate(warned_all), np.concatenate(redrawn)  # data sets alike
    lines.append(f"| pooled | {count} | {total} | {_rate(total, count)} | | {_mean_se(rates)} "
                 f"| {_excess(warned, rates)} |")  # fmt: skip
    return "\n".join(lines)


def _mean_se(rates: np.ndarray) -> str:
    return f"{rates.mean():.3f} (SE {rates.std(ddof=1) / np.sqrt(rates.size):.3f})"


def _excess(warned: np.ndarray, rates: np.ndarray) -> str:
    diff = warned.astype(float) - rates
    mean, se = diff.mean(), diff.std(ddof=1) / np.sqrt(diff.size)
    return f"{mean:+.3f} [{mean - 1.96 * se:+.3f}, {mean + 1.96 * se:+.3f}]"


def _rate(k: int, n: int) -> str:
    low, high = map(float, clopper_pearson_interval(k, n))
    return f"{k / n:.3f} [{low:.3f}, {high:.3f}]"


def _difference(first: list[float], second: list[float]) -> str:
    """``mean(first) - mean(second)`` with its 95% Welch t interval (the two groups are
    different data sets); empty where a group holds fewer than two."""
    if len(first) < 2 or len(second) < 2:
        return ""
    d = float(np.mean(first) - np.mean(second))
    low, high = stats.ttest_ind(first, second, equal_var=False).confidence_interval(0.95)
    return f"{d:+.3f} [{low:+.3f}, {high:+.3f}]"


def render(record: dict) -> str:
    """Per class weight: the share of data sets that rejected it (Clopper-Pearson 95%
    interval), and the mean logit miss of the corrected scores against the truth where rejected
    and where not, with their difference (Markdown)."""
    lines = ["| beta | data sets rejecting it | logit miss, rejected | logit miss, not rejected "
             "| difference [95% interval] |",
             "|---|---|---|---|---|"]  # fmt: skip
    keys = list(record["rows"][0]["logit_miss"])
    n = len(record["rows"])
    for key in keys:
        hit = [row["logit_miss"][key] for row in record["rows"] if key in row["rejected"]]
        miss = [row["logit_miss"][key] for row in record["rows"] if key not in row["rejected"]]
        shown = f"{np.mean(hit):.3f}" if hit else ""
        lines.append(f"| {float(key):.4g} | {len(hit)} of {n}: {_rate(len(hit), n)} | {shown} "
                     f"| {np.mean(miss):.3f} | {_difference(hit, miss)} |")  # fmt: skip
    return "\n".join(lines)


TABLES = [
    Table("well_specified_sweeps by ridge", DOCUMENT, ridge_table),
    Table("well_specified_sweeps by weight", DOCUMENT, lambda: render(_record(DEFAULT))),
    Table("well_specified_sweeps default pooled", DOCUMENT, pooled_table),
]


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
    parser.add_argument(
        "--l2",
        type=lambda v: v if v == "auto" else float(v),
        default="auto",
        help="the ridge: 'auto' (the default, chosen on the validation folds) or a fixed value",
    )
    parser.add_argument(
        "--l2-choice",
        default="least_penalty",
        help="how 'auto' chooses the ridge (TrainConfig.l2_choice; the records of 2026-12-02 "
        "ran at 'lowest_loss')",
    )
    parser.add_argument(
        "--near-lowest",
        type=float,
        default=None,
        help="a trial of the rule's threshold: iml.training.tabular.NEAR_LOWEST (standard errors) "
        "set for this process",
    )
    parser.add_argument(
        "--redraws", type=int, default=10, help="label sets redrawn per data set (see one())"
    )
    parser.add_argument("--quick", action="store_true", help="3 data sets of 2,000, 4 betas")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--render", type=Path, default=None, help="print a record's table")
    args = parser.parse_args(argv)
    if args.render is not None:
        print(render(json.loads(args.render.read_text())))
        return 0
    if args.quick:
        args.datasets, args.n, args.betas = 3, 2000, 4
    if args.near_lowest is not None:
        from iml.training import tabular

        tabular.NEAR_LOWEST = args.near_lowest  # read when the choice is first traced
    betas = beta_grid(args.betas)
    start = time.perf_counter()
    rows = []
    for i in range(args.datasets):
        x, y, truth = simulate(args.n, args.features, args.prior, args.signal, args.seed + i)
        rows.append(
            one(
                x,
                y,
                truth,
                betas,
                args.l2_scale,
                args.redraws,
                l2=args.l2,
                seed=args.seed + i,
                l2_choice=args.l2_choice,
            )
        )
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
