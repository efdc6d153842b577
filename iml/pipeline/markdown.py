"""Results tables as Markdown, two views of the one table of every run
(:func:`iml.calibration.table_by_loss`), each written as the run's ``table.md``: one row per
loss (:func:`markdown_by_loss`: a sweep's and a multiclass report's), or one section per beta
with a row per method (:func:`markdown_by_method`: a binary report's, with the recalibration
baselines and the loss-calibration test)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from iml.calibration import METRICS, MULTICLASS_METRICS, RENORMALISED, beta_key

__all__ = ["markdown_by_loss", "markdown_by_method"]


def _interval_text(interval: Sequence[float]) -> str:
    return f"[{interval[0]:.4f}, {interval[1]:.4f}]"


def markdown_by_loss(table: dict[str, dict[str, dict[str, float]]], key_name: str = "beta") -> str:
    """The table as Markdown: one row per loss (its exact key), raw and loss-corrected metrics,
    the renormalised corrected ones (``renorm.``) where the table has them, and the median of a
    sweep's members' ridge coefficients where its rows hold them (``row["l2"]``)."""
    metrics = METRICS if "auroc" in next(iter(table.values()))["raw"] else MULTICLASS_METRICS
    methods = {"raw": "raw", "loss_corrected": "corr."}
    if any(RENORMALISED in row for row in table.values()):
        methods[RENORMALISED] = "renorm."
    header = [key_name] + [f"{label} {k}" for k in metrics for label in methods.values()]
    ridge = all("l2" in row for row in table.values())  # a sweep's members' ridge coefficients
    if ridge:
        header.append("l2 (median)")
    # each ECE's interval, after the ECE columns, where every row has it
    with_ci = [k for k in metrics if all(f"{k}_interval" in row["raw"] for row in table.values())]
    for metric in reversed(with_ci):
        at = header.index(f"{list(methods.values())[-1]} {metric}") + 1
        header[at:at] = [f"{label} {metric} 95% CI" for label in methods.values()]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, row in table.items():
        cells = [key]  # the exact key (beta_key): close betas stay apart
        for metric in metrics:
            cells += [f"{row[m][metric]:.4f}" if m in row else "" for m in methods]
            if metric in with_ci:
                cells += [_interval_text(row[m][f"{metric}_interval"]) if m in row else ""
                          for m in methods]  # fmt: skip
        if ridge:
            cells.append(f"{float(np.median(row['l2'])):.3g}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_by_method(table: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """A report's table as Markdown (``table.md``): one section per beta, methods (the raw and
    loss-corrected scores and the recalibration baselines) as rows, metrics as columns, each
    ECE's interval where every method has one, and the raw scores' loss-calibration test with
    its power."""

    def fmt(x: float) -> str:
        return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"

    lines = ["# Summary", ""]
    for beta, methods in table.items():
        lines += [f"## beta = {beta}", ""]
        ci = all("ece_interval" in metrics for metrics in methods.values())
        columns = [*METRICS[:1], *(["ece 95% CI"] if ci else []), *METRICS[1:]]
        lines.append("| method | " + " | ".join(columns) + " |")
        lines.append("|---" * (len(columns) + 1) + "|")
        for method, metrics in methods.items():
            cells = [fmt(metrics[m]) for m in METRICS]
            if ci:
                low, high = metrics["ece_interval"]
                cells.insert(1, f"[{fmt(low)}, {fmt(high)}]")
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        raw = methods["raw"]
        power = ""
        if "loss_calibration_power" in raw:
            p = raw["loss_calibration_power"]
            power = (
                f" Its power against scores calibrated for beta = {beta_key(p['against'])}: "
                f"{p['rate']:.2f} ({p['simulations']} simulated label sets)."
            )
        lines += [
            "",
            f"Loss-calibration test of the raw scores (Definition 2): gap "
            f"{fmt(raw['loss_calibration_gap'])}, p-value "
            f"{fmt(raw['loss_calibration_p_value'])}.{power}",
            "",
        ]
    return "\n".join(lines)
