"""Results tables as Markdown, two views of the one table of every run
(:func:`iml.calibration.table_by_loss`), each written as the run's ``table.md``: one row per
loss (:func:`markdown_by_loss`: a sweep's and a multiclass report's), or one section per beta
with a row per method (:func:`markdown_by_method`: a binary report's, with the recalibration
baselines and the loss-calibration test)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from iml.calibration import METRICS, MULTICLASS_METRICS, RENORMALISED, loss_calibration_summary

__all__ = ["markdown_by_loss", "markdown_by_method"]


def _fixed(x: float, sign: str = "") -> str:
    """``x`` to four decimals; a value that rounds to zero reads as zero, never ``-0.0000``."""
    return f"{round(x, 4) + 0.0:{sign}.4f}"


def _interval_text(interval: Sequence[float]) -> str:
    return f"[{_fixed(interval[0])}, {_fixed(interval[1])}]"


#: The column of a method's ECE minus the raw scores' of its loss, with its paired interval.
MINUS_RAW = "ece − raw [paired 95% CI]"


def _minus_raw_text(metrics: Mapping, metric: str = "ece") -> str:
    """A method's ``{metric}_minus_raw`` and its paired interval, in one cell ("" for none)."""
    if f"{metric}_minus_raw_interval" not in metrics:
        return ""
    interval = _interval_text(metrics[f"{metric}_minus_raw_interval"])
    difference = metrics[f"{metric}_minus_raw"]
    return f"{'nan' if math.isnan(difference) else _fixed(difference, '+')} {interval}"


def _test_text(test: Mapping) -> str:
    """A loss-calibration record's verdict and effect size, in one sentence."""
    if "calibration_error" not in test:
        return test["verdict"] + "."
    low, high = test["calibration_error_interval"]
    return (
        f"{test['verdict']}, Holm over {test['family']} tests; calibration error of the corrected "
        f"scores {test['calibration_error']:.4f} [{low:.4f}, {high:.4f}], against "
        f"{test['null_calibration_error']:.4f} expected of calibrated scores on these bins."
    )


def _test_cell(test: Mapping | None) -> str:
    """A loss-calibration record in a table cell: its verdict, then its effect size."""
    if test is None or "verdict" not in test:
        return ""
    if "classes" in test:  # a multiclass loss: its top label's, and the rejected classes
        rejected = [str(j) for j, r in enumerate(test["classes"]) if r["rejected"]]
        classes = f"; rejected for class {', '.join(rejected)}" if rejected else ""
        return f"top label {_test_cell(test['top_label'])}{classes}"
    if "calibration_error" not in test:
        return test["verdict"]
    error, null = test["calibration_error"], test["null_calibration_error"]
    return f"{test['verdict']}; miss {error:.4f} ({null:.4f} if calibrated)"


def markdown_by_loss(table: dict[str, dict[str, dict[str, float]]], key_name: str = "beta") -> str:
    """The table as Markdown: one row per loss (its exact key), raw and loss-corrected metrics,
    the renormalised corrected ones (``renorm.``) where the table has them, the corrected ECE
    minus the raw one with its paired interval where every row has it, the median of a
    sweep's members' ridge coefficients where its rows hold them (``row["l2"]``), and each
    loss's loss-calibration verdict with the size of the miss."""
    metrics = METRICS if "auroc" in next(iter(table.values()))["raw"] else MULTICLASS_METRICS
    methods = {"raw": "raw", "loss_corrected": "corr."}
    if any(RENORMALISED in row for row in table.values()):
        methods[RENORMALISED] = "renorm."
    header = [key_name] + [f"{label} {k}" for k in metrics for label in methods.values()]
    ridge = all("l2" in row for row in table.values())  # a sweep's members' ridge coefficients
    if ridge:
        header.append("l2 (median)")
    tested = all("loss_calibration" in row["raw"] for row in table.values())
    if tested:
        header.append("loss calibration (Def. 2)")
    # each ECE's interval, after the ECE columns, where every row has it
    with_ci = [k for k in metrics if all(f"{k}_interval" in row["raw"] for row in table.values())]
    for metric in reversed(with_ci):
        at = header.index(f"{list(methods.values())[-1]} {metric}") + 1
        header[at:at] = [f"{label} {metric} 95% CI" for label in methods.values()]
    # the correction's ECE minus the raw scores', paired, where every row has it
    minus_raw = [k for k in with_ci if all(f"{k}_minus_raw_interval" in row["loss_corrected"]
                                           for row in table.values())]  # fmt: skip
    for metric in minus_raw:
        at = header.index(f"{list(methods.values())[-1]} {metric} 95% CI") + 1
        header.insert(at, f"corr. {MINUS_RAW.replace('ece', metric, 1)}")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, row in table.items():
        cells = [key]  # the exact key (beta_key): close betas stay apart
        for metric in metrics:
            cells += [f"{row[m][metric]:.4f}" if m in row else "" for m in methods]
            if metric in with_ci:
                cells += [_interval_text(row[m][f"{metric}_interval"]) if m in row else ""
                          for m in methods]  # fmt: skip
            if metric in minus_raw:
                cells.append(_minus_raw_text(row["loss_corrected"], metric))
        if ridge:
            cells.append(f"{float(np.median(row['l2'])):.3g}")
        if tested:
            cells.append(_test_cell(row["raw"]["loss_calibration"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n" + _summary_section(table, key_name)


def _summary_section(table: Mapping, key_name: str) -> str:
    summary = loss_calibration_summary(table, key_name)
    return f"\n## Loss calibration\n\n{summary}\n" if summary else ""


def markdown_by_method(
    table: Mapping[str, Mapping[str, Mapping[str, float]]], key_name: str = "beta"
) -> str:
    """A binary grid's table as Markdown (``table.md``): one section per class weight, methods
    (the raw and loss-corrected scores and the recalibration baselines) as rows, metrics as
    columns, each ECE's interval where every method has one, the median of the members' ridge
    coefficients where the row holds them (``row["l2"]``), and the raw scores' loss-calibration
    verdict with the size of the miss. Where every method has it, each method's ECE minus the
    raw scores' of its loss, with its paired interval (:data:`MINUS_RAW`)."""

    def fmt(x: float) -> str:
        return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"

    lines = ["# Summary", ""]
    for beta, row in table.items():
        methods = {name: metrics for name, metrics in row.items() if isinstance(metrics, Mapping)}
        lines += [f"## {key_name} = {beta}", ""]
        ci = all("ece_interval" in metrics for metrics in methods.values())
        minus_raw = all("ece_minus_raw_interval" in metrics
                        for name, metrics in methods.items() if name != "raw")  # fmt: skip
        minus_raw = minus_raw and ci and len(methods) > 1
        extra = (["ece 95% CI"] if ci else []) + ([MINUS_RAW] if minus_raw else [])
        columns = [*METRICS[:1], *extra, *METRICS[1:]]
        lines.append("| method | " + " | ".join(columns) + " |")
        lines.append("|---" * (len(columns) + 1) + "|")
        for method, metrics in methods.items():
            cells = [fmt(metrics[m]) for m in METRICS]
            if ci:
                low, high = metrics["ece_interval"]
                cells[1:1] = [f"[{fmt(low)}, {fmt(high)}]"]
            if minus_raw:
                cells[2:2] = [_minus_raw_text(metrics)]
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        if "l2" in row:
            lines += ["", f"Median ridge of the members: {np.nanmedian(row['l2']):.3g}"]
        test = methods["raw"].get("loss_calibration")
        if test is not None and "verdict" in test:
            lines += [
                "",
                f"Loss calibration of the raw scores (Definition 2): {_test_text(test)}",
                "",
            ]
        else:
            lines.append("")
    return "\n".join(lines) + _summary_section(table, key_name)
