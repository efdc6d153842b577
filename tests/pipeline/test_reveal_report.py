"""What ``iml reveal`` prints and draws from its record (``iml.pipeline.reveal_report``), read
from a stored record."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from iml.pipeline.reveal_report import revealed_figures, revealed_summary, verdicts_title

RECORD = (
    Path(__file__).resolve().parents[2]
    / "docs/results/sweep_defaults/adult_paper/revealed/revealed.json"
)


def test_the_title_and_summary_say_each_verdict_and_its_power():
    record = json.loads(RECORD.read_text())
    assert verdicts_title(record) == "NIS rejected, NIAC not rejected"
    summary = revealed_summary(record)
    assert "rejected" in summary and "holds" not in summary and "accept" not in summary
    power = record["simulated"]["power"]["niac"]
    assert f"power {power['rate']:.2f}" in summary  # a non-rejection carries its power
    fragile = copy.deepcopy(record)
    fragile["fragile"]["niac"] = True
    assert verdicts_title(fragile) == "NIS rejected, NIAC not rejected (fragile)"
    assert "FRAGILE (" in revealed_summary(fragile)


def test_the_three_figures_are_drawn_from_the_record():
    figures = revealed_figures(json.loads(RECORD.read_text()))
    assert sorted(figures) == ["revealed_cost_bounds", "revealed_information",
                               "revealed_value_matrix"]  # fmt: skip
    assert all(fig.axes for fig in figures.values())
