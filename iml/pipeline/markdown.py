"""Results tables as Markdown: the table of a grid of losses, one row per loss, with each ECE's
bootstrap interval where the table holds one (what ``iml sweep`` writes as ``sweep_table.md``
and a multiclass report as ``table.md``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from iml.calibration import METRICS, MULTICLASS_METRICS, RENORMALISED

__all__ = ["markdown_by_loss"]


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
