"""The revealed experiments of a run (``iml.pipeline.reveal``): which verdicts change with the
bins, what the record's intervals cover, and what ``iml reveal`` prints and draws from a stored
record."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from iml.grids import loss_family
from iml.pipeline.reveal import (
    fragile,
    intervals_cover,
    revealed_figures,
    revealed_summary,
    verdicts_title,
)
from iml.pipeline.reveal_input import reveal_input

RECORD = (
    Path(__file__).resolve().parents[2]
    / "docs/results/sweep_defaults/adult_paper/revealed/revealed.json"
)


def test_a_verdict_that_changes_with_the_bins_is_fragile():
    sensitivity = {
        "adaptive": {"nis": {"rejected": True}, "niac": {"rejected": False}},
        "quantile_5": {"nis": {"rejected": True}, "niac": {"rejected": True}},
        "quantile_10": {"nis": {"rejected": True}, "niac": {"rejected": False}},
    }
    assert fragile(sensitivity) == {"nis": False, "niac": True}


def test_the_intervals_cover_the_seeds_only_where_a_model_has_several():
    rng = np.random.default_rng(0)
    scores, labels = rng.random((2, 50)), (rng.random(50) < 0.3).astype(int)
    one = reveal_input([0.3, 0.7], scores, labels, loss_family("log"))
    assert "not the noise of training" in intervals_cover(one)
    stack = np.stack([scores, scores[::-1]])  # two seeds, each model trained with both
    two = reveal_input([0.3, 0.7], scores, labels, loss_family("log"), seed_scores=stack,
                       seeds=[0, 1])  # fmt: skip
    assert "over its training seeds (2 a model)" in intervals_cover(two)


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


@pytest.mark.slow
def test_one_signal_is_not_testable_never_not_rejected(tmp_path):
    """Near-separable data whose adaptive bins merge into one signal (too few positives for two
    bins of 10): every experiment is uninformative, so NIS and NIAC read "not testable (1
    signal)", and so does each model's loss-calibration test (NIAS), never "not rejected"."""
    from iml.pipeline.reveal import reveal_run

    rng = np.random.default_rng(3)
    labels = (np.arange(300) < 12).astype(np.int32)  # 12 positives: one bin of 10 of each
    scores = np.clip(np.where(labels == 1, 0.95, 0.02) + 0.01 * rng.random((2, 300)), 0, 1)
    inputs = reveal_input([0.5, 0.7], scores, labels, loss_family("log"))
    record = reveal_run(inputs, tmp_path, n_bootstrap=20, formats=(), power_datasets=0)
    assert record["signals"] == 1
    assert verdicts_title(record) == "NIS not testable (1 signal), NIAC not testable (1 signal)"
    summary = revealed_summary(record)
    assert "NIS (capacity-constrained learning) not testable (1 signal)" in summary
    assert "NIAC (costly learning) not testable (1 signal)" in summary
    assert "Shannon cost with one lambda: not testable (1 signal)" in summary
    assert record["nias"]["n_bins"] == [1, 1]
    assert "NIAS (each model's loss-calibration test, Holm over the models) not testable" in summary
    assert "not rejected" not in summary
