"""The generated tables of the documents that belong to no study, each rendered from its record.

Each :class:`~experiments.sync_docs.Table` names a block of a Markdown document (between
``<!-- generated: NAME (python -m experiments.sync_docs) -->`` and ``<!-- /generated -->``) and
the function that renders it from a stored record under ``docs/results`` (a run's ``table.json``,
its stored scores, or a benchmark's JSON record). :mod:`experiments.sync_docs` writes them and,
with ``--check``, fails where a document's table differs from what its record gives. A study's
own tables live in its module (``experiments/studies/<study>.py``).
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import iml
from experiments.sync_docs import Table
from iml.calibration import (
    calibration_curve,
    clopper_pearson_interval,
    expected_calibration_error,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


# ----------------------------------------------------------------------------------------------
# Reading records, writing cells


@functools.cache
def record(path: str) -> Any:
    """A JSON record under docs/results."""
    return json.loads((RESULTS / path).read_text())


def f(value: Any, spec: str) -> str:
    """``value`` in the format ``spec`` of Python's ``format()``, with ``es`` for an exponent
    written short (``.0es``: ``1e-4``) and ``d`` for an integer."""
    value = value.item() if hasattr(value, "item") else value
    if spec.endswith("es"):
        mantissa, _, exponent = format(float(value), spec[:-1]).partition("e")
        return f"{mantissa}e{int(exponent)}"
    if spec.endswith("d"):
        if value != int(value):
            raise ValueError(f"{value!r} is not an integer")
        return format(int(value), spec)
    return format(float(value), spec)


def markdown_table(header: list[str], rows: list[list[str]], spaced_rule: bool = False) -> str:
    """A Markdown table of ``header`` and ``rows`` of cells, its rule ``|---|`` (or ``| --- |``)."""

    def line(cells: list[str]) -> str:
        return "|" + "".join(f" {cell} |" if cell else " |" for cell in cells)

    rule = line(["---"] * len(header)) if spaced_rule else "|" + "---|" * len(header)
    return "\n".join([line(header), rule, *map(line, rows)])


def with_interval(value: float, interval: Sequence[float], spec: str) -> str:
    """``0.071 [0.062, 0.081]``."""
    return f"{f(value, spec)} [{f(interval[0], spec)}, {f(interval[1], spec)}]"


# The loss-calibration test of the tables (iml.calibration.loss_calibration_test) replaced the
# loss gap of a wholesale switch per decile with a bootstrap p-value, and NIAS's per-bin binomial
# tests with Holm (docs/results/loss_calibration_tests). A record written before holds the former
# test's numbers: its cells say so, so that no column mixes the two tests unlabelled.
FORMER_GAP = "former gap test"
FORMER_NIAS = "former binomial test"


def loss_calibration_cell(test: dict) -> str:
    """One loss-calibration record as a cell: the current test's ``verdict``, or, in a record of
    the former loss-gap test (a ``p_value`` and no verdict), ``former gap test: p = 0.002``."""
    if "verdict" in test:
        return test["verdict"]
    return f"{FORMER_GAP}: p = {f(test['p_value'], '.3f')}"


def loss_calibration_cells(tests: Sequence[dict]) -> str:
    """Several loss-calibration records in one cell, ``a / b``: the label of the former test
    written once where every record is the former test's."""
    if tests and all("verdict" not in test for test in tests):
        return f"{FORMER_GAP}: p = " + " / ".join(f(t["p_value"], ".3f") for t in tests)
    return " / ".join(map(loss_calibration_cell, tests))


def table_loss_calibration(cells: dict) -> str:
    """The loss-calibration cell of a run's ``table.json`` entry for one method (``raw``): its
    ``loss_calibration`` record, or the former test's ``loss_calibration_p_value``."""
    if "loss_calibration" in cells:
        return loss_calibration_cell(cells["loss_calibration"])
    return loss_calibration_cell({"p_value": cells["loss_calibration_p_value"]})


def former_nias(r: dict) -> bool:
    """Whether a ``revealed.json`` holds the former NIAS (per-bin binomial tests, Holm), which
    records no bins per model."""
    return "n_bins" not in r["nias"]


def nias_column(
    header: str, former_header: str, cells: Sequence[Sequence[tuple[str, dict]]]
) -> tuple[str, list[str]]:
    """A column of NIAS cells, each the `` / ``-joined texts of one or more ``revealed.json``
    records ``(text, record)``. Where every record holds the former NIAS the column's header is
    ``former_header``; otherwise each former record's text is labelled in its cell."""
    if all(former_nias(r) for cell in cells for _, r in cell):
        return former_header, [" / ".join(text for text, _ in cell) for cell in cells]
    return header, [
        " / ".join(f"{FORMER_NIAS}: {text}" if former_nias(r) else text for text, r in cell)
        for cell in cells
    ]


# ----------------------------------------------------------------------------------------------
# docs/results/reproduce_digits: the default `iml reproduce`

DIGITS_RUN = "docs/results/reproduce_digits/README.md"


def digits_results() -> str:
    """Per beta, the ECE of the raw, loss-corrected and Platt-recalibrated scores, AUROC and the
    loss-calibration test of the raw scores (``table.json``)."""
    header = "β | raw ECE | loss-corrected ECE | cross-fitted Platt ECE | AUROC"
    rows = [
        [
            beta,
            *(f(cells[method]["ece"], ".4f") for method in ("raw", "loss_corrected", "platt")),
            f(cells["raw"]["auroc"], ".4f"),
            table_loss_calibration(cells["raw"]),
        ]
        for beta, cells in record("reproduce_digits/table.json").items()
    ]
    return markdown_table([*header.split(" | "), "loss calibration (Holm over the βs)"], rows)


def digits_corrected_deciles() -> str:
    """Per beta, the deciles (10 quantile bins) of the loss-corrected ensemble scores
    (``ensemble_scores.npz``): how many deciles' mean score lies outside the 95% Clopper-Pearson
    interval of their rate of eights, and the top decile's mean score against its rate."""
    with np.load(RESULTS / "reproduce_digits" / "ensemble_scores.npz") as z:
        betas, scores, labels = z["betas"], z["scores"], z["labels"]
    rows = []
    for beta, raw in zip(betas, scores, strict=True):
        corrected = np.asarray(iml.loss_corrected_score(raw, float(beta)))
        curve = calibration_curve(corrected, labels)
        mean, rate = np.asarray(curve.mean_score), np.asarray(curve.event_rate)
        count = np.asarray(curve.count)
        low, high = np.asarray(clopper_pearson_interval(np.round(rate * count), count))
        outside = (mean < low) | (mean > high)
        top = int(np.argmax(mean))
        eights = int(np.round(rate[top] * count[top]))
        rows.append(
            [
                f"{float(beta):g}",
                f"{int(outside.sum())} of {len(mean)}",
                f"{int(count[top])} images, {eights} eights "
                f"({f(eights / labels.sum(), '.0%')} of all)",
                f(mean[top], ".3f"),
                with_interval(rate[top], [low[top], high[top]], ".3f"),
            ]
        )
    header = ["β", "deciles whose mean score is outside the rate's 95% interval", "top decile",
              "its mean corrected score", "its rate of eights [95% CP]"]  # fmt: skip
    return markdown_table(header, rows)


# ----------------------------------------------------------------------------------------------
# docs/results/pneumoniamnist*: the PneumoniaMNIST runs

PNEUMONIA_RUN = "docs/results/pneumoniamnist/README.md"
PMN_STOPPED = "docs/results/pneumoniamnist_early_stopping/README.md"
PMN_PATIENCE = "docs/results/pneumoniamnist_patience/README.md"
PMN_SEEDS = "docs/results/pneumoniamnist_seeds/README.md"
PMN_FLOOR = "docs/results/pneumoniamnist_lr_floor/README.md"
PMN_FLOOR_BETAS = "docs/results/pneumoniamnist_lr_floor_other_betas/README.md"
PMN_FLOOR_SEEDS = "docs/results/pneumoniamnist_lr_floor_seeds/README.md"


def _train(run: str) -> dict:
    return record(f"{run}/manifest.json")["config"]["train"]


def pneumonia_results() -> str:
    """Per beta of the 6-epoch run: raw and corrected ECE (debiased in brackets), Platt's and the
    loss-calibration test of the raw scores."""

    def ece(cells: dict) -> str:
        return f"{f(cells['ece'], '.3f')} ({f(cells['ece_debiased'], '.3f')})"

    rows = [
        [
            beta,
            ece(cells["raw"]),
            ece(cells["loss_corrected"]),
            f(cells["platt"]["ece"], ".3f"),
            table_loss_calibration(cells["raw"]),
        ]
        for beta, cells in record("pneumoniamnist/table.json").items()
    ]
    header = "β | raw | loss-corrected | Platt (cross-fitted) | loss calibration (Holm over the βs)"
    return markdown_table(header.split(" | "), rows)


def _pmn_eces(run: str, beta: str, bold: bool = False) -> list[str]:
    """A PneumoniaMNIST run's ECE at ``beta``: raw, loss-corrected (in bold) and Platt."""
    cells = record(f"{run}/table.json")[beta]
    raw, corrected, platt = (f(cells[m]["ece"], ".3f") for m in ("raw", "loss_corrected", "platt"))
    return [raw, f"**{corrected}**" if bold else corrected, platt]


def _pneumonia_against(run: str, other: str, other_header: str) -> str:
    """A PneumoniaMNIST run's ECEs per beta, with the corrected ECE of ``other`` at each beta."""
    header = ["β", "raw", "loss-corrected", other_header, "Platt (cross-fitted)"]
    rows = [
        [
            beta,
            f(cells["raw"]["ece"], ".3f"),
            f(cells["loss_corrected"]["ece"], ".3f"),
            f(record(f"{other}/table.json")[beta]["loss_corrected"]["ece"], ".3f"),
            f(cells["platt"]["ece"], ".3f"),
            table_loss_calibration(cells["raw"]),
        ]
        for beta, cells in record(f"{run}/table.json").items()
    ]
    return markdown_table([*header, "loss calibration (Holm over the βs)"], rows)


def pneumonia_early_stopping_results() -> str:
    return _pneumonia_against(
        "pneumoniamnist_early_stopping",
        "pneumoniamnist",
        "corrected, 6-epoch cap (`../pneumoniamnist/`)",
    )


def pneumonia_patience_results() -> str:
    return _pneumonia_against(
        "pneumoniamnist_patience", "pneumoniamnist_early_stopping", "corrected, patience 2"
    )


def _pmn_decile(run: str, k: int) -> tuple[float, float, float]:
    """Mean corrected score, rate and mean raw score of the k-th decile (1-based) of the corrected
    scores of a PneumoniaMNIST run's beta = 0.99 ensemble."""
    with np.load(RESULTS / run / "ensemble_scores.npz") as z:
        i = list(z["betas"]).index(0.99)
        raw, labels = z["scores"][i], z["labels"]
    q = np.asarray(iml.loss_corrected_score(raw, 0.99))
    edges = np.quantile(q, np.linspace(0, 1, 11))
    bins = np.clip(np.searchsorted(edges, q, side="right") - 1, 0, 9)
    m = bins == k - 1
    return q[m].mean(), labels[m].mean(), raw[m].mean()


def pneumonia_early_stopping_deciles() -> str:
    header = ["decile", "mean loss-corrected score", "observed rate", "mean raw score"]
    rows = [
        [
            f"{k}th",
            *(
                f(x, spec)
                for x, spec in zip(
                    _pmn_decile("pneumoniamnist_early_stopping", k),
                    (".3f", ".3f", ".4f"),
                    strict=True,
                )
            ),
        ]
        for k in (4, 7)
    ]
    return markdown_table(header, rows)


def pneumonia_lr_floor_results() -> str:
    """The beta = 0.99 ensembles with and without the floor, and the unweighted ones."""
    run, patience = "pneumoniamnist_lr_floor", "pneumoniamnist_patience"
    stopped, betas = "pneumoniamnist_early_stopping", "pneumoniamnist_lr_floor_other_betas"
    floor = f"floor {f(_train(run)['min_lr'], '.0es')}"
    rows = [
        [f"this run: {floor}, patience {_train(run)['patience']}", *_pmn_eces(run, "0.99", True)],
        [
            f"no floor, patience {_train(patience)['patience']} (`../{patience}/`)",
            *_pmn_eces(patience, "0.99"),
        ],
        [
            f"no floor, patience {_train(stopped)['patience']} (`../{stopped}/`)",
            *_pmn_eces(stopped, "0.99"),
        ],
        [
            f"β = 0.5, {floor}, patience {_train(betas)['patience']} (`../{betas}/`)",
            *_pmn_eces(betas, "0.5"),
        ],
        [
            f"β = 0.5, no floor, patience {_train(patience)['patience']}",
            *_pmn_eces(patience, "0.5"),
        ],
    ]
    return markdown_table(["run", "raw", "loss-corrected", "Platt (cross-fitted)"], rows)


def pneumonia_lr_floor_other_betas_results() -> str:
    """Each beta's ensemble with the floor, and without it."""
    run, floor_run = "pneumoniamnist_lr_floor_other_betas", "pneumoniamnist_lr_floor"
    patience, stopped = "pneumoniamnist_patience", "pneumoniamnist_early_stopping"

    def floor(name: str) -> str:
        lr, patience_ = _train(name)["min_lr"], _train(name)["patience"]
        return f"floor {f(lr, '.0es')}, patience {patience_}"

    def without(name: str) -> str:
        return f"no floor, patience {_train(name)['patience']} (`../{name}/`)"

    rows = [
        ["0.5", f"this run: {floor(run)}", *_pmn_eces(run, "0.5", True)],
        ["0.5", without(patience), *_pmn_eces(patience, "0.5")],
        ["0.9", f"this run: {floor(run)}", *_pmn_eces(run, "0.9", True)],
        ["0.9", without(stopped), *_pmn_eces(stopped, "0.9")],
        ["0.99", f"{floor(floor_run)} (`../{floor_run}/`)", *_pmn_eces(floor_run, "0.99", True)],
    ]
    header = ["β", "run", "raw", "loss-corrected", "Platt (cross-fitted)"]
    return markdown_table(header, rows)


def pmn_seed_scores(run: str) -> tuple[np.ndarray, np.ndarray]:
    """``[seeds, N]`` raw test scores of a PneumoniaMNIST run's members, one row per seed (each
    observation is in one rotation's test fold), and the ``[N]`` labels."""
    labels = np.load(RESULTS / run / "data" / "folds.npz")["labels"]
    rows: dict[int, np.ndarray] = {}
    for path in sorted((RESULTS / run / "batches").glob("*.npz")):
        with np.load(path) as b:
            for j, seed in enumerate(b["seed"]):
                lo, hi = b["test_offsets"][j], b["test_offsets"][j + 1]
                row = rows.setdefault(int(seed), np.full(len(labels), np.nan))
                row[b["test_idx"][lo:hi]] = b["test_scores"][lo:hi]
    scores = np.clip(np.stack([rows[s] for s in sorted(rows)]), 1e-7, 1 - 1e-7)
    assert not np.isnan(scores).any()
    return scores, labels


def pmn_averages(raw: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Corrected ECEs at beta = 0.99 of ``[seeds, N]`` raw scores: each seed alone, the mean raw
    score (the paper's ensemble), the mean of corrected scores and the mean logit."""

    def corrected(r: np.ndarray) -> np.ndarray:
        return np.asarray(iml.loss_corrected_score(r, 0.99))

    def ece(q: np.ndarray) -> float:
        return float(expected_calibration_error(q, labels))

    z = np.mean(np.log(raw) - np.log1p(-raw), axis=0)
    return {
        "seeds": [ece(corrected(r)) for r in raw],
        "mean_raw": ece(corrected(raw.mean(axis=0))),
        "mean_corrected": ece(np.mean([corrected(r) for r in raw], axis=0)),
        "mean_logit": ece(corrected(1 / (1 + np.exp(-z)))),
    }


_PMN_AVERAGES = (  # the rows of the seeds' tables: (label, key of pmn_averages)
    ("one seed (each seed's members alone)", "seeds"),
    ("the paper's ensemble: the mean raw score, corrected", "mean_raw"),
    ("the mean of the members' corrected scores", "mean_corrected"),
    ("the mean raw logit, corrected", "mean_logit"),
)


def _pmn_average(averages: dict[str, Any], key: str) -> str:
    """One cell of the seeds' tables: the seeds' range and mean, or one average's ECE."""
    if key == "seeds":
        seeds = averages["seeds"]
        low, high = min(seeds), max(seeds)
        return f"{f(low, '.3f')} to {f(high, '.3f')}, mean {f(np.mean(seeds), '.3f')}"
    return f(averages[key], ".3f")


@functools.cache
def pmn_floor_seed_averages() -> dict[str, Any]:
    """:func:`pmn_averages` of the 4 seeds trained with the learning-rate floor."""
    first, labels = pmn_seed_scores("pneumoniamnist_lr_floor")
    rest, other = pmn_seed_scores("pneumoniamnist_lr_floor_seeds")
    assert np.array_equal(labels, other)
    return pmn_averages(np.concatenate([first, rest]), labels)


@functools.cache
def pmn_seed_averages() -> dict[str, Any]:
    """:func:`pmn_averages` of the 4 seeds trained without the floor (patience 2)."""
    return pmn_averages(*pmn_seed_scores("pneumoniamnist_seeds"))


def pneumonia_lr_floor_seeds_averages() -> str:
    """Each way of averaging the four seeds, with the floor and without it."""
    rows = [
        [label, *(_pmn_average(a, key) for a in (pmn_floor_seed_averages(), pmn_seed_averages()))]
        for label, key in _PMN_AVERAGES
    ]
    rows[-1][1] = f"**{rows[-1][1]}**"
    floor_lr = f(_train("pneumoniamnist_lr_floor")["min_lr"], ".0es")
    return markdown_table(["scores", f"floor {floor_lr}", "no floor"], rows)


def pneumonia_seeds_averages() -> str:
    """Each way of averaging the seeds, and Platt's recalibration of the ensemble."""
    table = record("pneumoniamnist_seeds/table.json")["0.99"]
    averages = pmn_seed_averages()
    corrected = table["loss_corrected"]["ece"]
    if not math.isclose(corrected, averages["mean_raw"], abs_tol=1e-4):
        raise ValueError(f"table.md's corrected ECE {corrected} is not the mean raw score's")
    rows = [[label, _pmn_average(averages, key)] for label, key in _PMN_AVERAGES]
    rows[1][0] += " (`table.md`)"
    rows.append(
        ["Platt, cross-fitted on the ensemble (uses labels)", f(table["platt"]["ece"], ".3f")]
    )
    return markdown_table(["scores", "ECE"], rows)


# ----------------------------------------------------------------------------------------------
# docs/results/reproduce_digits_multiclass

MULTICLASS_RUN = "docs/results/reproduce_digits_multiclass/README.md"
_MC = "reproduce_digits_multiclass"


@functools.cache
def mc_scores() -> dict[str, np.ndarray]:
    """The multiclass reproduction's ensemble scores (raw and corrected) and labels."""
    with np.load(RESULTS / _MC / "ensemble_scores.npz") as z:
        return {name: z[name] for name in z.files}


def class_ece(scores: np.ndarray, j: int) -> float:
    """ECE (10 quantile bins) of class ``j``'s scores against ``1{y = j}``."""
    y = mc_scores()["labels"]
    a = np.clip(scores[:, j], 1e-7, 1 - 1e-7).astype(np.float32)
    return float(expected_calibration_error(a, (y == j).astype(np.int32), 10, "quantile"))


def mc_series() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The unweighted raw, weighted raw and weighted corrected class scores."""
    z = mc_scores()
    return z["scores"][0], z["scores"][1], z["corrected"][1]


def multiclass_results() -> str:
    """The multiclass run's metrics: the unweighted ensemble, the weighted one raw and corrected."""
    y = mc_scores()["labels"]
    series = mc_series()
    t = record(f"{_MC}/table.json")

    def metric(name: str) -> list[float]:
        return [
            t["ones"]["raw"][name],
            t["w[8]=10"]["raw"][name],
            t["w[8]=10"]["loss_corrected"][name],
        ]

    def row(label: str, values: list[float], bold: int | None = None) -> list[str]:
        cells = [f(v, ".4f") for v in values]
        if bold is not None:
            cells[bold] = f"**{cells[bold]}**"
        return [label, *cells]

    others = [np.mean([class_ece(a, j) for j in range(10) if j != 8]) for a in series]
    rows = [
        row("ECE of class 8's scores", [class_ece(a, 8) for a in series], bold=2),
        row(
            f"mean class-8 score (frequency {f(np.mean(y == 8), '.4f')})",
            [a[:, 8].mean() for a in series],
        ),
        row("class-wise ECE", metric("classwise_ece")),
        row("mean ECE of the nine other classes", others),
        row("top-label ECE", metric("top_label_ece")),
        row("Brier score", metric("brier")),
        row("log loss", metric("log_loss")),
        row("accuracy", metric("accuracy")),
    ]
    return markdown_table(["", "unweighted", "weighted, raw", "weighted, corrected"], rows)


# ----------------------------------------------------------------------------------------------
# docs/results/sweep_adult, sweep_letter, sweep_any_loss: the sweeps

ADULT_RUN = "docs/results/sweep_adult/README.md"
LETTER_RUN = "docs/results/sweep_letter/README.md"
ANY_LOSS_README = "docs/results/sweep_any_loss/README.md"


@functools.cache
def sweep(run: str) -> dict[float, dict]:
    """A sweep's ``table.json``, keyed by beta."""
    return {float(beta): cells for beta, cells in record(f"{run}/table.json").items()}


def _ece_with_interval(cells: dict) -> str:
    """An ECE of a sweep's table with its 95% bootstrap interval: ``0.021 [0.018, 0.024]``."""
    return with_interval(cells["ece"], cells["ece_interval"], ".3f")


def _ece_by_beta(run: str, rows: list[tuple], key_name: str = "beta") -> str:
    """A sweep's raw and loss-corrected ECE, each with its 95% bootstrap interval, at the grid's
    betas (a focal sweep's alphas: ``key_name``) nearest those of ``rows``: ``(beta, the format
    of its label[, what follows the label])``."""
    lines = []
    for beta, spec, *note in rows:
        nearest = min(sweep(run), key=lambda b: abs(b - beta))
        cells = sweep(run)[nearest]
        label = f(nearest, spec) + "".join(note)
        lines.append(
            [label, _ece_with_interval(cells["raw"]), _ece_with_interval(cells["loss_corrected"])]
        )
    return markdown_table([key_name, "raw ECE [95% CI]", "loss-corrected ECE [95% CI]"], lines)


def adult_ece_by_beta() -> str:
    betas = [(0.01, ".2f"), (0.094, ".3f"), (0.518, ".3f"), (0.906, ".3f"), (0.99, ".2f")]
    return _ece_by_beta("sweep_adult", betas)


def adult_summary() -> str:
    """The metrics over all betas: raw, and loss-corrected."""

    def values(method: str, metric: str) -> list[float]:
        return [cells[method][metric] for _, cells in sorted(sweep("sweep_adult").items())]

    def median(method: str, metric: str, spec: str = ".3f") -> str:
        return f"median {f(statistics.median(values(method, metric)), spec)}"

    def up_to(metric: str) -> str:
        return f"up to {f(max(values('raw', metric)), '.2f')}"

    def span(method: str, metric: str) -> str:
        v = values(method, metric)
        return f"{f(min(v), '.3f')} to {f(max(v), '.3f')}"

    corrected = "loss_corrected"
    auroc, same = span("raw", "auroc"), span(corrected, "auroc")
    if auroc != same:
        raise ValueError(f"AUROC {auroc} raw, {same} corrected: not 'the same'")
    rows = [
        [
            "ECE",
            f"{up_to('ece')}, {median('raw', 'ece', '.2f')}",
            f"{span(corrected, 'ece')}, {median(corrected, 'ece')}",
        ],
        [
            "debiased ECE",
            f"{up_to('ece_debiased')}, {median('raw', 'ece_debiased', '.2f')}",
            (
                f"{median(corrected, 'ece_debiased')}, "
                f"at most {f(max(values(corrected, 'ece_debiased')), '.3f')}"
            ),
        ],
        ["Brier score", up_to("brier"), span(corrected, "brier")],
        ["log loss", up_to("log_loss"), span(corrected, "log_loss")],
        ["AUROC", auroc, "the same"],
    ]
    return markdown_table(["metric", "raw scores", "loss-corrected scores"], rows)


def letter_ece_by_beta() -> str:
    betas = [
        (0.01, ".2f"),
        (0.094, ".3f"),
        (0.518, ".3f"),
        (0.800, ".3f"),
        (0.906, ".3f"),
        (0.964, ".3f", " (about 1 - prevalence)"),
        (0.99, ".2f"),
    ]
    return _ece_by_beta("sweep_letter", betas)


def any_loss(run: str, name: str) -> Any:
    return record(f"sweep_any_loss/{run}/{name}")


ANY_LOSS_MULTICLASS = {  # the Adam runs of sweep_any_loss, as its tables name them
    "digits_matrix": "digits, matrix",
    "digits_softmax": "digits, softmax",
    "letter_matrix": "Letter, matrix",
    "letter_softmax": "Letter, softmax",
}


def _raw_to_corrected(cells: dict, metric: str, spec: str) -> str:
    """A metric raw → loss-corrected, each ECE with its 95% interval where the table has one."""
    out = []
    for method in ("raw", "loss_corrected"):
        value, interval = cells[method][metric], cells[method].get(f"{metric}_interval")
        out.append(with_interval(value, interval, spec) if interval else f(value, spec))
    return " → ".join(out)


def any_loss_multiclass() -> str:
    """sweep_any_loss's Adam runs over all classes: top-label and class-wise ECE (with their
    intervals), Brier score and accuracy, raw → loss-corrected."""
    rows = []
    for run, label in ANY_LOSS_MULTICLASS.items():
        for loss, cells in any_loss(run, "table.json").items():
            rows.append(
                [
                    label,
                    loss,
                    _raw_to_corrected(cells, "top_label_ece", ".3f"),
                    _raw_to_corrected(cells, "classwise_ece", ".4f"),
                    _raw_to_corrected(cells, "brier", ".3f"),
                    _raw_to_corrected(cells, "accuracy", ".3f"),
                ]
            )
    header = [
        "run",
        "loss",
        "top-label ECE [95% CI] raw → corrected",
        "class-wise ECE [95% CI] raw → corrected",
        "Brier raw → corrected",
        "accuracy raw → corrected",
    ]
    return markdown_table(header, rows)


def any_loss_weighted_class() -> str:
    """The weighted class of each multiclass Adam run (``weighted_class.json``): its binary ECE
    raw → corrected with their intervals, the corrected ECE's difference from the unweighted
    model's with its paired interval, its mean score, and the loss-calibration tests at the
    trained beta and at 1/2 (:func:`loss_calibration_cells`)."""
    rows = []
    for run, label in ANY_LOSS_MULTICLASS.items():
        for loss, w in any_loss(run, "weighted_class.json").items():
            ece = " → ".join(
                with_interval(w[f"ece_{m}"], w[f"ece_{m}_interval"], ".3f")
                for m in ("raw", "corrected")
            )
            difference = w.get("ece_corrected_minus_unweighted")
            entry = re.fullmatch(r"B\[(\d+),(\d+)\]=.*", loss)
            # an off-diagonal weight leaves the class no binary beta rule to test
            tested = entry is None or entry[1] == entry[2]
            p = (
                loss_calibration_cells(
                    [w["loss_calibration_trained"], w["loss_calibration_unweighted"]]
                )
                if tested
                else "—"
            )
            rows.append(
                [
                    label,
                    loss,
                    ece,
                    (
                        with_interval(difference["estimate"], difference["interval"], "+.3f")
                        if difference
                        else "—"
                    ),
                    (
                        f"{f(w['mean_raw'], '.3f')} → {f(w['mean_corrected'], '.3f')} "
                        f"({f(w['rate'], '.3f')})"
                    ),
                    p,
                ]
            )
    header = [
        "run",
        "loss",
        "class ECE [95% CI] raw → corrected",
        "corrected − unweighted [95% CI]",
        "mean score raw → corrected (rate)",
        "loss calibration at beta = 10/11 / at 1/2",
    ]
    return markdown_table(header, rows)


def any_loss_focal_by_alpha() -> str:
    alphas = [(0.01, ".2f"), (0.031, ".3f"), (0.151, ".3f"), (0.5, ".1f"), (0.849, ".3f"),
              (0.969, ".3f"), (0.99, ".2f")]  # fmt: skip
    return _ece_by_beta("sweep_any_loss/adult_focal", alphas, key_name="alpha")


def _adam_against_exact(rows: list[tuple[str, str, str]]) -> str:
    """The weighted class of ``(data, family, loss)`` fitted by Adam and exactly: its ECE raw →
    corrected with their intervals, the corrected ECE's difference from the unweighted model's
    with its paired interval, the corrected top-label ECE with its interval, and the
    loss-calibration test at the trained beta (:func:`loss_calibration_cells`)."""

    def weighted(run: str, loss: str) -> dict:
        return any_loss(run, "weighted_class.json")[loss]

    def ece(run: str, loss: str) -> str:
        w = weighted(run, loss)
        return " → ".join(
            with_interval(w[f"ece_{m}"], w[f"ece_{m}_interval"], ".3f")
            for m in ("raw", "corrected")
        )

    def difference(run: str, loss: str) -> str:
        d = weighted(run, loss).get("ece_corrected_minus_unweighted")
        return with_interval(d["estimate"], d["interval"], "+.3f") if d else "—"

    def top(run: str, loss: str) -> str:
        cells = any_loss(run, "table.json")[loss]["loss_corrected"]
        return with_interval(cells["top_label_ece"], cells["top_label_ece_interval"], ".3f")

    def test(run: str, loss: str) -> dict:
        return weighted(run, loss)["loss_calibration_trained"]

    out = []
    for data, family, loss in rows:
        adam, exact = f"{data}_{family}", f"{data}_{family}_exact"
        out.append(
            [
                "digits" if data == "digits" else "Letter",
                loss,
                ece(adam, loss),
                ece(exact, loss),
                f"{difference(adam, loss)} / {difference(exact, loss)}",
                f"{top(adam, loss)} / {top(exact, loss)}",
                loss_calibration_cells([test(adam, loss), test(exact, loss)]),
            ]
        )
    header = [
        "run",
        "loss",
        "weighted class ECE [95% CI] raw → corrected, Adam",
        "the same, exact",
        "corrected − unweighted [95% CI], Adam / exact",
        "top-label ECE corrected [95% CI], Adam / exact",
        "loss calibration at beta = 10/11, Adam / exact",
    ]
    return markdown_table(header, out)


def any_loss_matrix_exact() -> str:
    """The B-weighted runs at their exact optimum, against the Adam runs of the same losses."""
    rows = [("digits", "matrix", "B[8,8]=10"), ("letter", "matrix", "ones"),
            ("letter", "matrix", "B[14,14]=10")]  # fmt: skip
    return _adam_against_exact(rows)


def any_loss_softmax_exact() -> str:
    """The class-weighted softmax runs at their exact optimum, against the Adam runs."""
    return _adam_against_exact(
        [("digits", "softmax", "w[8]=10"), ("letter", "softmax", "w[14]=10")]
    )


SWEEP_DEFAULTS = "docs/results/sweep_defaults/README.md"
DEFAULTS_WEIGHTED = (  # (folder, label, loss, weight of the weighted class)
    ("digits_matrix", "digits, matrix", "B[8,8]=10", 10),
    ("digits_matrix", "digits, matrix", "B[8,8]=100", 100),
    ("digits_softmax", "digits, softmax", "w[8]=10", 10),
    ("digits_softmax", "digits, softmax", "w[8]=100", 100),
    ("letter_matrix", "Letter O, matrix", "B[14,14]=10", 10),
    ("letter_matrix", "Letter O, matrix", "B[14,14]=100", 100),
    ("letter_softmax", "Letter O, softmax", "w[14]=10", 10),
    ("letter_softmax", "Letter O, softmax", "w[14]=100", 100),
)
GOAL = 0.005  # the defaults' goal: a corrected ECE within this of the unweighted model's


def _goal(interval: Sequence[float]) -> str:
    """Whether the interval of (corrected - unweighted) shows the excess below the goal, above
    it, or neither."""
    if interval[1] < GOAL:
        return "within 0.005: shown"
    if interval[0] > GOAL:
        return "above 0.005: shown"
    return "not resolved (the interval holds 0.005)"


def sweep_defaults_weighted_class() -> str:
    """The weighted class of the default multiclass sweeps (``weighted_class_W.json``, W its
    weight): ECE raw, corrected and unweighted, the difference with its paired interval, the
    goal's verdict, and the loss-calibration test at the loss it was trained with: the current
    test's verdict, or the former gap test's p-value, labelled (:func:`loss_calibration_cell`)."""
    rows = []
    for run, label, loss, weight in DEFAULTS_WEIGHTED:
        w = record(f"sweep_defaults/{run}/weighted_class_{weight}.json")
        d = w[loss]["ece_corrected_minus_unweighted"]
        rows.append(
            [
                f"{label}, {loss}",
                f(w[loss]["ece_raw"], ".4f"),
                f(w[loss]["ece_corrected"], ".4f"),
                f(w["ones"]["ece_raw"], ".4f"),
                with_interval(d["estimate"], d["interval"], "+.4f"),
                _goal(d["interval"]),
                f(w[loss]["ece_corrected"] / w[loss]["ece_raw"], ".2f"),
                loss_calibration_cell(w[loss]["loss_calibration_trained"]),
            ]
        )
    header = ["run, loss", "raw", "corrected", "unweighted", "corrected - unweighted [95% CI]",
              "goal: within 0.005", "corrected / raw",
              "loss calibration at the trained weight"]  # fmt: skip
    return markdown_table(header, rows)


RIDGE_RUNS = (  # (label, the folders under the paper's units and per unit of weight)
    ("Adult, chosen", "adult_paper", "adult_per_weight"),
    ("Letter, chosen", "letter_paper", "letter_per_weight"),
    ("Adult, l2 = 1e-2", "adult_fixed_paper", "adult_fixed_per_weight"),
    ("Letter, l2 = 1e-2", "letter_fixed_paper", "letter_fixed_per_weight"),
)


def sweep_defaults_ridge_verdicts() -> str:
    """``iml reveal``'s verdicts on the eight ridge sweeps (``*/revealed/revealed.json``): NIS
    and NIAC, a non-rejection with its simulated power, and the models NIAS rejects at the
    adaptive bins and at 5, 10 and 20 quantile bins."""

    def verdict(r: dict, test: str) -> str:
        if r[test]["violated"]:
            return f"rejected ({_p(r[test]['p_value'])})"
        power = f(r["simulated"]["power"][test]["rate"], ".2f")
        return f"not rejected ({_p(r[test]['p_value'])}; power {power})"

    def nias(r: dict) -> str:
        counts = [r["bins"][b]["nias"]["models_rejected"] for b in r["bins"]]
        return f"{counts[0]} ({', '.join(map(str, counts[1:]))})"

    rows, nias_cells = [], []
    for label, *runs in RIDGE_RUNS:
        rs = [record(f"sweep_defaults/{run}/revealed/revealed.json") for run in runs]
        rows.append(
            [
                label,
                " / ".join(verdict(r, "nis") for r in rs),
                " / ".join(verdict(r, "niac") for r in rs),
            ]
        )
        nias_cells.append([(nias(r), r) for r in rs])
    what = "models rejected of 64, adaptive (5, 10, 20 quantile bins)"
    nias_header, nias_texts = nias_column(
        f"NIAS: {what}", f"NIAS ({FORMER_NIAS}): {what}", nias_cells
    )
    header = ["data, ridge", "NIS (paper / per_weight)", "NIAC (paper / per_weight)", nias_header]
    rows = [[*row, text] for row, text in zip(rows, nias_texts, strict=True)]
    return markdown_table(header, rows)


# ----------------------------------------------------------------------------------------------
# docs/results/revealed: `iml reveal` on the stored runs

REVEALED = "docs/results/revealed/README.md"
REVEALED_RUNS = {  # the folder of each run's revealed.json, and its name in the tables
    "reproduce_digits": "digits",
    "pneumoniamnist": "PneumoniaMNIST",
    "adult64": "Adult",
    "letter64": "Letter",
}


def _revealed(run: str) -> dict:
    return record(f"revealed/{run}/revealed.json")


def _p(p: float) -> str:
    """A p-value as the tables write it: ``p = 0.004``, ``p = 4e-05``, ``p < 1e-12``."""
    if p < 1e-12:
        return "p < 1e-12"
    return f"p = {f(p, '.2g') if p < 0.001 else f(p, '.3f')}"


def _margin_verdict(test: dict, power: dict | None) -> str:
    """A NIS or NIAC verdict: rejected with its lower bound, or not rejected with its power
    (a record simulates none for a test that rejected)."""
    margin = f"margin {f(test['margin'], '.2g')}, lower bound {f(test['lower_bound'], '.2g')}"
    if test["violated"]:
        return f"**rejected** ({_p(test['p_value'])}; {margin})"
    return (
        f"not rejected ({_p(test['p_value'])}; {margin}); power {f(power['rate'], '.2f')} "
        f"against {power['against']}"
    )


def _nias_verdict(r: dict) -> str:
    violated, betas = r["nias"]["violated"], r["betas"]
    count = sum(violated)
    if not count:
        power = r["simulated"]["power"]["nias"]
        rate = f(power["rate"], ".2f")
        return f"not rejected for any model; power {rate} against {power['against']}"
    smallest = min(p for p, v in zip(r["nias"]["p_value"], violated, strict=True) if v)
    at = ", ".join(f"{b:g}" for b, v in zip(betas, violated, strict=True) if v)
    where = f"at beta = {at}" if len(betas) <= 3 else f"for {count} of {len(betas)} models"
    return f"**rejected** {where} (smallest {_p(smallest)}, Holm-adjusted)"


def revealed_verdicts() -> str:
    """Per run: its size, the signals (bins) each model keeps, ``I_k`` at its smallest and
    largest, and the verdicts of NIS, NIAC and NIAS, a non-rejection with its simulated power
    (a record of the former NIAS labelled so, :func:`nias_column`)."""
    rows, nias_cells = [], []
    for run, name in REVEALED_RUNS.items():
        r = _revealed(run)
        info, (low, high) = r["information"]["estimate"], r["information"]["interval"]
        signals = sorted({sum(p > 0 for p in row) for row in r["experiments"]["probability"]})
        k_min, k_max = int(np.argmin(info)), int(np.argmax(info))

        def at(k: int, info: list = info, low: list = low, high: list = high, r: dict = r) -> str:
            return f"{with_interval(info[k], [low[k], high[k]], '.3f')} at {r['betas'][k]:.3g}"

        power = r["simulated"]["power"]
        rows.append(
            [
                name,
                f(r["K"], "d"),
                f(r["n"], ",d"),
                " to ".join(map(str, signals)),
                f"{at(k_min)}; {at(k_max)}",
                _margin_verdict(r["nis"], power.get("nis")),
                _margin_verdict(r["niac"], power.get("niac")),
            ]
        )
        nias_cells.append([(_nias_verdict(r), r)])
    nias_header, nias_texts = nias_column("NIAS", f"NIAS ({FORMER_NIAS})", nias_cells)
    header = ["run", "K", "N", "signals per model", "`I_k` (nats): smallest; largest", "NIS",
              "NIAC", nias_header]  # fmt: skip
    rows = [[*row, text] for row, text in zip(rows, nias_texts, strict=True)]
    return markdown_table(header, rows)


def revealed_bins() -> str:
    """Per run and binning: whether NIS, NIAC and NIAS reject, and how many models NIAS rejects
    (a record of the former NIAS labelled so, :func:`nias_column`)."""
    rows, nias_cells = [], []
    for run, name in REVEALED_RUNS.items():
        r = _revealed(run)
        for bins, v in r["bins"].items():
            label = "adaptive" if bins == "adaptive" else f"{bins.split('_')[1]} quantile bins"

            def word(rejected: bool) -> str:
                return "rejected" if rejected else "not rejected"

            rows.append(
                [
                    name,
                    label,
                    word(v["nis"]["rejected"]),
                    word(v["niac"]["rejected"]),
                ]
            )
            nias = f"{word(v['nias']['rejected'])}: {v['nias']['models_rejected']} of {r['K']}"
            nias_cells.append([(nias, r)])
    what = "models rejected"
    nias_header, nias_texts = nias_column(
        f"NIAS: {what}", f"NIAS ({FORMER_NIAS}): {what}", nias_cells
    )
    rows = [[*row, text] for row, text in zip(rows, nias_texts, strict=True)]
    return markdown_table(["run", "bins", "NIS", "NIAC", nias_header], rows)


def revealed_nis_pairs() -> str:
    """The pairs whose NIS inequality is violated significantly (simultaneous lower bound above
    zero): model k would have done better on its own loss with model j's experiment."""
    rows = []
    for run, name in REVEALED_RUNS.items():
        r = _revealed(run)
        betas, pairs = r["betas"], r["nis"]["pairs"]
        if not pairs:
            rows.append([name, f"0 of {r['K'] * (r['K'] - 1)}", "—", "—", "—"])
            continue
        gainers = sorted({betas[k] for k, _ in pairs})
        sources = sorted({betas[j] for _, j in pairs})
        lower = sum(betas[k] < betas[j] for k, j in pairs)

        def span(values: list[float]) -> str:
            if len(values) == 1:
                return f"{values[0]:.3g}"
            return f"{len(values)}: {values[0]:.3g} to {values[-1]:.3g}"

        rows.append(
            [
                name,
                f"{f(len(pairs), ',d')} of {f(r['K'] * (r['K'] - 1), ',d')}",
                span(gainers),
                span(sources),
                f"{f(lower, ',d')} of {f(len(pairs), ',d')}",
            ]
        )
    header = ["run", "significant pairs (k, j)", "models k that gain: how many, betas",
              "experiments j they gain from: how many, betas",
              "pairs in which k has the smaller beta"]  # fmt: skip
    return markdown_table(header, rows)


def _simulated_power(simulated: dict, test: str) -> str:
    """A test's simulated power, or why there is none (a record simulates none for a test that
    rejected: a rejection states no power)."""
    power = simulated["power"].get(test)
    return "not simulated (rejected)" if power is None else f(power["rate"], ".2f")


def revealed_sizes() -> str:
    """Each run's simulated size at 5% and power (``simulated``), and the precision d of its
    simulated Gaussian agents, fitted to the models' median ``I_k`` (NIAS's of a record of the
    former NIAS labelled so, :func:`nias_column`)."""
    rows, sizes, powers = [], [], []
    for run, name in REVEALED_RUNS.items():
        r = _revealed(run)
        sim = r["simulated"]
        rows.append([name, f(sim["precision"], ".2f"), f(sim["datasets"], "d")])
        rows[-1] += [f(sim["size"][t]["rate"], ".2f") for t in ("nis", "niac")]
        sizes.append([(f(sim["size"]["nias"]["rate"], ".2f"), r)])
        powers.append([(_simulated_power(sim, "nias"), r)])
        rows[-1] += [_simulated_power(sim, t) for t in ("nis", "niac")]
    size_header, size_cells = nias_column("size NIAS", f"size NIAS ({FORMER_NIAS})", sizes)
    power_header, power_cells = nias_column(
        "power NIAS (odds x2)", f"power NIAS (odds x2; {FORMER_NIAS})", powers
    )
    rows = [
        [*row[:5], size, *row[5:], power]
        for row, size, power in zip(rows, size_cells, power_cells, strict=True)
    ]
    header = ["run", "fitted d", "data sets", "size NIS", "size NIAC", size_header,
              "power NIS (falling by 0.3)", "power NIAC (rising by 0.3)",
              power_header]  # fmt: skip
    return markdown_table(header, rows)


# ----------------------------------------------------------------------------------------------
# The benchmarks' records: docs/results/gpu_*, cpu_*, paper_scale, process_scaling

GPU_GUIDE = "docs/howto/gpus_and_clusters.md"  # the site's guide to GPUs and clusters
GPU = "docs/results/gpu_h200/README.md"
H100 = "docs/results/gpu_h100/README.md"
CPU_ENSEMBLE = "docs/results/cpu_ensemble/README.md"
CPU_STEP = "docs/results/cpu_train_step/README.md"
PAPER_SCALE = "docs/results/paper_scale/README.md"
PROCESS_SCALING = "docs/results/process_scaling/README.md"

GPU5 = "gpu_h200/2026-11-27"  # run 5: the current trainer, and DenseNet-121 at 224 px
H100_RUN = "gpu_h100/2026-11-27"
PROJECTION = "paper_scale/2026-11-29_h200_projection.json"
SCALING = "process_scaling/2026-11-29_cpu_2core.json"
SCALING_3 = "process_scaling/2026-12-02_cpu_2core.json"  # three interleaved pairs
PAPER_EPOCHS = 10  # the epochs per member of the projections of the paper's experiment


def _paper_members() -> int:
    """The members of the paper's experiment (``project_paper_experiment``'s default)."""
    from experiments.benchmarks._projection import project_paper_experiment

    return inspect.signature(project_paper_experiment).parameters["members"].default


def _paper_steps(paper: dict, k: dict) -> str:
    """A paper_scale record's steps: PyTorch's, one member's and ``k``'s members' in one step."""
    batch, torch = paper["batch_per_member"], paper["torch"]
    one, torch_rate = paper["ours_one_member"], torch["train_member_images_per_s"]

    def row(label: str, step_s: float, members: int, rate: float, ratio: str) -> list[str]:
        step = f"{f(step_s * 1e3, '.1f')} ms for {members * batch} images"
        return [label, step, f(rate, ".0f"), ratio]

    rows = [
        row("PyTorch, one model", torch["train_step_s"], 1, torch_rate, "1"),
        row(
            f"ours, K = {one['members']}",
            one["step_s"],
            one["members"],
            one["member_images_per_s"],
            f"**{f(paper['ratio_one_member'], '.2f')}**",
        ),
        row(
            f"ours, K = {k['members']} in one step",
            k["step_s"],
            k["members"],
            k["member_images_per_s"],
            f"**{f(k['member_images_per_s'] / torch_rate, '.2f')}**",
        ),
    ]
    return markdown_table(["", "step", "member-images/s", "against PyTorch"], rows, True)


def _paper_projection(paper: dict, k: dict) -> str:
    """The paper's experiment projected from a paper_scale record (``project_paper_experiment``):
    PyTorch's loop, one member at a time, and ``k``'s members per step."""
    from experiments.benchmarks._projection import project_paper_experiment

    validation = paper["torch"]["eval_member_images_per_s"]

    def hours(rate: float) -> dict[str, float]:
        return project_paper_experiment(rate, validation, epochs=PAPER_EPOCHS)

    torch = hours(paper["torch"]["train_member_images_per_s"])
    one = hours(paper["ours_one_member"]["member_images_per_s"])
    ours = hours(k["member_images_per_s"])

    def cells(h: dict[str, float]) -> list[str]:
        days = f"{f(h['hours'], ',.0f')} h ({f(h['hours'] / 24, '.1f')} days)"
        return [f"{f(h['hours_per_epoch'], '.1f')} h", days]

    last = cells(ours)
    last[1] = f"**{last[1]}**, {f(torch['hours'] / ours['hours'], '.2f')}x less"
    rows = [
        ["PyTorch loop, one model at a time", *cells(torch)],
        ["ours, one member at a time", *cells(one)],
        [f"ours, {k['members']} members per step", *last],
    ]
    header = ["", f"per epoch of all {f(_paper_members(), ',d')} members", f"{PAPER_EPOCHS} epochs"]
    return markdown_table(header, rows, True)


def gpu_h100_steps() -> str:
    k1 = record(f"{H100_RUN}/paper_scale_k1.json")
    return _paper_steps(k1, record(f"{H100_RUN}/paper_scale_k16.json")["train"])


def gpu_h100_projection() -> str:
    k1 = record(f"{H100_RUN}/paper_scale_k1.json")
    return _paper_projection(k1, record(f"{H100_RUN}/paper_scale_k16.json")["train"])


def gpu_h200_steps() -> str:
    return _paper_steps(record(f"{GPU5}/paper_scale.json"), record(f"{GPU5}/paper_scale_k32.json"))


def gpu_h200_projection() -> str:
    paper, k32 = record(f"{GPU5}/paper_scale.json"), record(f"{GPU5}/paper_scale_k32.json")
    return _paper_projection(paper, k32)


CPU_ENSEMBLE_FIRST = "ensemble.json"  # the first full run of 2026-11-26
CPU_ENSEMBLE_KEEP = "ensemble_2026-11-26_keep_memory.json"
CPU_ENSEMBLE_SYSTEM = "ensemble_2026-11-26_system.json"


def _ensemble_ratios(run: str) -> dict[str, float]:
    """A CPU ensemble record's ratio per strategy; ``default`` is the one on the trainer's mesh."""
    r = record(f"cpu_ensemble/{run}")
    ratios = {k: v["ratio"] for k, v in r["details"].items() if k != "baseline"}
    default = ratios.pop(r["default_strategy"])
    return {**{k: v for k, v in ratios.items() if not k.startswith("mesh")}, "default": default}


def _ensemble_speed(run: str, strategy: str) -> float:
    """Member-images/s of one strategy of an ensemble record (``baseline``: the single steps)."""
    r = record(f"cpu_ensemble/{run}")
    if strategy == "default":
        return r["member_images_per_second"]
    return r["details"][strategy]["member_images_per_second"]


def cpu_ensemble_strategies() -> str:
    """The first run's speed and ratio per strategy, fastest first."""
    first, speed, ratios = CPU_ENSEMBLE_FIRST, _ensemble_speed, _ensemble_ratios
    one = ["map/mixed", "loop/mixed", "loop/xla"]  # the strategies named "one device"
    rest = ["vmap/mixed", "map/matmul", "loop/matmul", "vmap/matmul", "vmap/xla", "map/xla"]
    default = "**default: `map/mixed` on the trainer's mesh, one CPU device per core**"
    bold = [
        f"**{f(speed(first, 'default'), '.1f')}**",
        f"**{f(ratios(first)['default'], '.2f')}**",
    ]
    rows = [[default, *bold]]
    for strategy in one + rest:
        name = f"`{strategy}`, one device" if strategy in one else f"`{strategy}`"
        rows.append([name, f(speed(first, strategy), ".1f"), f(ratios(first)[strategy], ".2f")])
    return markdown_table(["strategy", "member-images/s", "ratio"], rows)


def cpu_ensemble_host_memory() -> str:
    """The runs with and without ``keep_step_memory``."""
    keep, system, speed = CPU_ENSEMBLE_KEEP, CPU_ENSEMBLE_SYSTEM, _ensemble_speed
    header = ["command", "baseline (8 single steps)", "default (`map/mixed` on the mesh)"]
    keep_, system_ = (record(f"cpu_ensemble/{run}") for run in (keep, system))
    rows = [
        [
            f"`--repeats {f(keep_['repeats'], 'd')}` (`{keep}`)",
            f"{f(speed(keep, 'baseline'), '.1f')} member-images/s",
            f(speed(keep, "default"), ".1f"),
            f"**{f(_ensemble_ratios(keep)['default'], '.2f')}**",
        ],
        [
            (
                f"`--repeats {f(system_['repeats'], 'd')} --host-memory system --strategies "
                f"map/mixed,vmap/mixed`, straight afterwards (`{system}`)"
            ),
            f(speed(system, "baseline"), ".1f"),
            f(speed(system, "default"), ".1f"),
            f(_ensemble_ratios(system)["default"], ".2f"),
        ],
    ]
    return markdown_table([*header, "ratio"], rows)


def _step_row(result: dict, label: str, bold: bool = True) -> list[str]:
    """One size of a train_step record: its speeds (three significant digits) and ratio."""
    ratio = f(result["ratio"], ".2f")
    return [
        label,
        f"{f(result['flax']['images_per_s'], '#.3g')} img/s",
        f"{f(result['torch']['images_per_s'], '#.3g')} img/s",
        f"**{ratio}**" if bold else ratio,
    ]


def _step_table(record_name: str, flax: str = "Flax (`mixed`)", torch: str = "torch") -> str:
    """A train_step record's two sizes (224 px, then 64 px)."""
    results = record(f"cpu_train_step/{record_name}")["results"]
    rows = [_step_row(r, f"batch {r['batch']} at {r['size']}x{r['size']}") for r in results]
    return markdown_table(["size", flax, torch, "ratio"], rows)


def cpu_step_mixed() -> str:
    return _step_table(
        "train_step_mixed.json", 'Flax (`conv_impl="mixed"`)', "torchvision + `torch.optim.Adam`"
    )


def cpu_step_host_memory() -> str:
    """The runs with and without ``keep_step_memory`` (only the first in bold)."""
    rows = []
    for name, memory in (("keep_memory", "keep"), ("system", "system")):
        for result in record(f"cpu_train_step/train_step_2026-11-26_{name}.json")["results"]:
            label = f"batch {result['batch']} at {result['size']} px, `{memory}`"
            rows.append(_step_row(result, label, bold=memory == "keep"))
    return markdown_table(["size", "Flax", "torch", "ratio"], rows)


def _hours(hours: float) -> str:
    if hours >= 48:
        return f"{f(hours, ',.0f')} h ({f(hours / 24, '.1f')} days)"
    return f"{f(hours, '.1f')} h"


def paper_scale_projection() -> str:
    """The paper's experiment per card count, from the stored projection."""
    rows = [
        [
            f(row["cards"], "d"),
            _hours(row["ours_hours"]),
            _hours(row["torch_hours"]),
            (
                f"**{f(row['ratio'], '.2f')}** [{f(row['interval_95']['ratio'][0], '.2f')}, "
                f"{f(row['interval_95']['ratio'][1], '.2f')}]"
            ),
            f"{f(row['coordination_s'], '.1f')} s",
        ]
        for row in record(PROJECTION)["projection"]["cards"]
    ]
    header = [
        "cards",
        "ours, 32 members per batch",
        "PyTorch loop",
        "PyTorch over ours [95% interval]",
        "of ours, the runtime's coordination",
    ]
    return markdown_table(header, rows, True)


def paper_scale_terms() -> str:
    p = record(PROJECTION)["projection"]
    epochs = p["epochs_drawn"]
    rows = [
        ["a member's epoch (training and validation passes)",
         f"{f(p['ours_member_epoch_s'], '.1f')} s at K = {p['members_per_batch']}",
         f"{f(p['torch_member_epoch_s'], '.1f')} s"],
        [(f"epochs to early stopping (30 members: "
          f"{f(min(epochs), 'd')} to {f(max(epochs), 'd')})"),
         f"{f(p['batch_epochs'], '.1f')}: a batch runs until its last member stops",
         f"{f(p['mean_epochs'], '.1f')}: each model its own"],
        ["the plan", f"{f(p['batches'], 'd')} batches of {p['members_per_batch']} members",
         (f"{f(p['members'], ',d')} models of "
          f"{_hours(p['torch_member_epoch_s'] * p['mean_epochs'] / 3600)} each")],
        ["compiling the step, once per process", f"{f(p['compile_s'], '.0f')} s", ""],
    ]  # fmt: skip
    return markdown_table(["", "ours", "PyTorch"], rows, True)


def process_scaling_runs() -> str:
    scaling = record(SCALING)
    median = scaling["median"]
    rows = [
        [label, *(f"{f(median[name][key], '.2f')} s" for key in
                  ("start_s", "batch_s", "end_s", "wall_s"))]
        for label, name in (("one process", "one"), ("two processes", "two"))
    ]  # fmt: skip
    rows.append(["two over one", "", f"{f(scaling['batch_slowdown'], '.2f')}x", "",
                 f"speedup **{f(scaling['ratio'], '.2f')}**"])  # fmt: skip
    header = ["", "start (to the first batch stored)", "a batch", "end (after the last batch)",
              "the run"]  # fmt: skip
    return markdown_table(header, rows, True)


def process_scaling_pairs() -> str:
    """The record of three or more interleaved pairs: each pair's walls and ratio, the headline
    (the median of the pairs' ratios) and their range, and the CPU the record names."""
    scaling = record(SCALING_3)
    rows = [
        [f(k + 1, "d"), f"{f(two, '.1f')} s", f"{f(one, '.1f')} s", f"{f(ratio, '.2f')}"]
        for k, (two, one, ratio) in enumerate(
            zip(scaling["warm_s"]["two"], scaling["warm_s"]["one"], scaling["ratios"], strict=True)
        )
    ]
    low, high = scaling["ratio_range"]
    headline = f"**{f(scaling['ratio'], '.2f')}** [{f(low, '.2f')}, {f(high, '.2f')}]"
    rows.append(["median [range]", "", "", headline])
    header = ["pair", "two processes", "one process", "one over two (speedup)"]
    cpu = scaling["cpu"]
    note = f"\n\nCPU: {cpu['model']}, {f(cpu['usable_cores'], 'd')} usable cores."
    return markdown_table(header, rows, True) + note


def process_scaling_meetings() -> str:
    rows = [
        [f(m["processes"], "d"), f"{f(m['join_s'] * 1e3, '.1f')} ms",
         f"{f(m['meeting_s'] * 1e3, '.3f')} ms"]
        for m in record(SCALING)["meetings"]
    ]  # fmt: skip
    return markdown_table(["processes", "joining", "one all-gather and one barrier"], rows, True)


def process_scaling_coordination() -> str:
    return f"  {f(record(SCALING)['coordination_s'], '.2f')} s."


# ----------------------------------------------------------------------------------------------
# Every table

TABLES: list[Table] = [
    Table("reproduce_digits results", DIGITS_RUN, digits_results),
    Table("reproduce_digits corrected deciles", DIGITS_RUN, digits_corrected_deciles),
    Table("pneumoniamnist results", PNEUMONIA_RUN, pneumonia_results),
    Table("pneumoniamnist_early_stopping results", PMN_STOPPED, pneumonia_early_stopping_results),
    Table("pneumoniamnist_early_stopping deciles", PMN_STOPPED, pneumonia_early_stopping_deciles),
    Table("pneumoniamnist_patience results", PMN_PATIENCE, pneumonia_patience_results),
    Table("pneumoniamnist_seeds averages", PMN_SEEDS, pneumonia_seeds_averages),
    Table("pneumoniamnist_lr_floor results", PMN_FLOOR, pneumonia_lr_floor_results),
    Table(
        "pneumoniamnist_lr_floor_other_betas results",
        PMN_FLOOR_BETAS,
        pneumonia_lr_floor_other_betas_results,
    ),
    Table(
        "pneumoniamnist_lr_floor_seeds averages",
        PMN_FLOOR_SEEDS,
        pneumonia_lr_floor_seeds_averages,
    ),
    Table("reproduce_digits_multiclass results", MULTICLASS_RUN, multiclass_results),
    Table("sweep_adult ECE by beta", ADULT_RUN, adult_ece_by_beta),
    Table("sweep_adult summary", ADULT_RUN, adult_summary),
    Table("sweep_letter ECE by beta", LETTER_RUN, letter_ece_by_beta),
    Table("sweep_any_loss multiclass", ANY_LOSS_README, any_loss_multiclass),
    Table("sweep_any_loss weighted class", ANY_LOSS_README, any_loss_weighted_class),
    Table("sweep_any_loss focal by alpha", ANY_LOSS_README, any_loss_focal_by_alpha),
    Table("sweep_any_loss matrix exact", ANY_LOSS_README, any_loss_matrix_exact),
    Table("sweep_any_loss softmax exact", ANY_LOSS_README, any_loss_softmax_exact),
    Table("sweep_defaults weighted class", SWEEP_DEFAULTS, sweep_defaults_weighted_class),
    Table("sweep_defaults ridge verdicts", SWEEP_DEFAULTS, sweep_defaults_ridge_verdicts),
    Table("revealed verdicts", REVEALED, revealed_verdicts),
    Table("revealed sizes", REVEALED, revealed_sizes),
    Table("revealed nis pairs", REVEALED, revealed_nis_pairs),
    Table("revealed bins", REVEALED, revealed_bins),
    Table("gpu_h100 steps", H100, gpu_h100_steps),
    Table("gpu_h100 projection", H100, gpu_h100_projection),
    Table("gpu_h200 paper_scale steps", GPU, gpu_h200_steps),
    Table("gpu_h200 projection", GPU, gpu_h200_projection),
    Table("cpu_ensemble strategies", CPU_ENSEMBLE, cpu_ensemble_strategies),
    Table("cpu_ensemble host memory", CPU_ENSEMBLE, cpu_ensemble_host_memory),
    Table("cpu_train_step mixed", CPU_STEP, cpu_step_mixed),
    Table(
        "cpu_train_step pool_taps",
        CPU_STEP,
        lambda: _step_table("train_step_2026-11-26_pool_taps.json"),
    ),
    Table(
        "cpu_train_step moments",
        CPU_STEP,
        lambda: _step_table("train_step_2026-11-26_moments.json"),
    ),
    Table("cpu_train_step stem", CPU_STEP, lambda: _step_table("train_step_2026-11-26_stem.json")),
    Table("cpu_train_step host memory", CPU_STEP, cpu_step_host_memory),
    Table("paper_scale projection", PAPER_SCALE, paper_scale_projection),
    Table("paper_scale terms", PAPER_SCALE, paper_scale_terms),
    Table("paper_scale projection", GPU_GUIDE, paper_scale_projection),
    Table("process_scaling runs", PROCESS_SCALING, process_scaling_runs),
    Table("process_scaling pairs", PROCESS_SCALING, process_scaling_pairs),
    Table("process_scaling meetings", PROCESS_SCALING, process_scaling_meetings),
    Table("process_scaling coordination", PROCESS_SCALING, process_scaling_coordination),
]
