"""The Markdown table of a grid of losses (``iml.pipeline.markdown``): close betas keep their own
rows, in the table and in the figure."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from iml.calibration import METRICS, loss_calibration_summary, loss_calibration_verdicts
from iml.pipeline import sweep as S
from iml.pipeline.markdown import markdown_by_loss, markdown_by_method
from iml.plots import figure_calibration_by_loss
from iml.training import TrainConfig
from iml.training.tabular import TABULAR_DEFAULTS


def table_config(**fields) -> TrainConfig:
    """The sweeps' configuration of the trainer with ``fields`` changed."""
    return dataclasses.replace(TABULAR_DEFAULTS, **fields)


@pytest.mark.slow
def test_close_betas_keep_their_own_rows_from_a_dataframe():
    import pandas as pd

    from iml.data.encoding import encode_table

    rng = np.random.default_rng(2)
    n = 80
    frame = pd.DataFrame({"x": rng.normal(size=n), "kind": rng.choice(["a", "b"], n)})
    frame["y"] = np.where(rng.random(n) < 0.3 + 0.3 * (frame["kind"] == "a"), "yes", "no")
    table = encode_table(frame, "y", positive="yes")
    assert table.feature_names == ("x", "kind=a", "kind=b")
    betas = [0.9999991, 0.9999992]
    result = S.run_sweep(
        table.features, table.labels, None, betas, seeds=1, n_folds=4, progress=False,
        train=table_config(max_epochs=2),
    )  # fmt: skip
    assert list(result.table) == ["0.9999991", "0.9999992"]
    rows = markdown_by_loss(result.table).split("\n\n")[0].splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == ["| 0.9999991", "| 0.9999992"]
    line = next(
        ln
        for ln in figure_calibration_by_loss(result.table).axes[0].lines
        if ln.get_gid() == "ece-raw"
    )
    assert len(set(line.get_xdata())) == 2


def test_markdown_table_lists_every_method_and_metric():
    metrics = dict.fromkeys(METRICS, 0.25)
    test = {"p_value": 0.5, "n_bins": 6, "power": 0.9, "calibration_error": 0.01,
            "calibration_error_interval": [0.0, 0.02], "null_calibration_error": 0.012}  # fmt: skip
    raw = {**metrics, "loss_calibration": test}
    table = {"0.9": {"raw": raw, "platt": metrics}}
    loss_calibration_verdicts(table)
    text = markdown_by_method(table)
    assert "## beta = 0.9" in text
    assert "| raw | 0.2500 | 0.2500 | 0.2500 | 0.2500 | 0.2500 |" in text
    assert "| platt |" in text
    assert (
        "Loss calibration of the raw scores (Definition 2): not rejected (p = 0.5, 6 bins; "
        "power 0.90 against odds x2), Holm over 1 tests; calibration error of the corrected "
        "scores 0.0100 [0.0000, 0.0200], against 0.0120 expected of calibrated scores on these "
        "bins." in text
    )
    assert "is not rejected for any of 1 tests" in text  # the run's summary, at the end
    assert json.loads(json.dumps(raw)) == raw


def test_the_corrected_minus_raw_ece_has_its_column_where_every_row_has_it():
    """Both views show each method's ECE minus the raw scores' with its paired interval, where
    every row (or method) has one, and leave the column out of a table without it (a stored
    table of an earlier report)."""
    metrics = {**dict.fromkeys(METRICS, 0.25), "ece_interval": [0.2, 0.3]}
    corrected = {**metrics, "ece": 0.05, "ece_minus_raw": -0.2,
                 "ece_minus_raw_interval": [-0.26, -0.14]}  # fmt: skip
    table = {"0.9": {"raw": metrics, "loss_corrected": corrected}}
    by_method, by_loss = markdown_by_method(table), markdown_by_loss(table)
    assert "| method | ece | ece 95% CI | ece − raw [paired 95% CI] | ece_debiased |" in by_method
    assert "| raw | 0.2500 | [0.2000, 0.3000] |  | 0.2500 |" in by_method
    assert (
        "| loss_corrected | 0.0500 | [0.2000, 0.3000] | -0.2000 [-0.2600, -0.1400] |" in by_method
    )
    assert "| corr. ece 95% CI | corr. ece − raw [paired 95% CI] |" in by_loss
    assert "| [0.2000, 0.3000] | -0.2000 [-0.2600, -0.1400] |" in by_loss
    older = {"0.9": {"raw": metrics, "loss_corrected": metrics}}
    assert "paired" not in markdown_by_method(older) + markdown_by_loss(older)
    # a difference that rounds to zero (an identity correction, at float32 round-off) reads 0
    same = {**metrics, "ece_minus_raw": -3e-9, "ece_minus_raw_interval": [-2e-8, 0.0]}
    text = markdown_by_method({"0.5": {"raw": metrics, "loss_corrected": same}})
    assert "| +0.0000 [0.0000, 0.0000] |" in text and "-0.0000" not in text


def test_the_summary_names_rejected_losses_by_the_size_of_their_miss():
    metrics = dict.fromkeys(METRICS, 0.25)

    def row(p, error):
        test = {"p_value": p, "n_bins": 5, "power": 1.0, "calibration_error": error,
                "calibration_error_interval": [error / 2, error * 2],
                "null_calibration_error": 0.01}  # fmt: skip
        return {"raw": {**metrics, "loss_calibration": test}, "loss_corrected": metrics}

    table = {"0.5": row(0.3, 0.01), "0.9": row(1e-6, 0.05), "0.99": row(1e-9, 0.2)}
    untested = {"p_value": float("nan"), "n_bins": 1}
    table["0.7"] = {"raw": {**metrics, "loss_calibration": untested}, "loss_corrected": metrics}
    loss_calibration_verdicts(table)
    assert table["0.9"]["raw"]["loss_calibration"]["rejected"]
    assert not table["0.5"]["raw"]["loss_calibration"]["rejected"]
    assert table["0.7"]["raw"]["loss_calibration"]["verdict"] == "not testable (1 bin)"
    summary = loss_calibration_summary(table)
    assert summary.index("beta = 0.99:") < summary.index("beta = 0.9:")  # the larger miss first
    assert "rejected for 2 of 4 tests (Holm over 3" in summary
    assert "cannot be trusted" in summary and "Not testable" in summary and "beta = 0.7" in summary
    # the test not rejected is said too, with its verdict (p, bins and power)
    kept = table["0.5"]["raw"]["loss_calibration"]["verdict"]
    assert kept.startswith("not rejected (") and "5 bins; power 1.00" in kept
    assert f"Not rejected: beta = 0.5, {kept}." in summary
    text = markdown_by_loss(table)
    assert "| loss calibration (Def. 2) |" in text.splitlines()[0]
    assert "rejected (p = 3e-09, 5 bins); miss 0.2000 (0.0100 if calibrated)" in text


def test_the_summary_names_each_weighted_class_verdict():
    def record(p):
        error = {"calibration_error": 0.01, "calibration_error_interval": [0.0, 0.02]}
        return {"p_value": p, "n_bins": 4, "power": 0.9, **error, "null_calibration_error": 0.01}

    def row(p8):
        classes = [record(0.5) for _ in range(10)]
        classes[8] = record(p8)
        return {"raw": {"loss_calibration": {"classes": classes, "top_label": record(0.4)}}}

    table = {"ones": row(0.5), "w[8]=10": row(1e-9), "B[3,8]=10": row(0.5)}
    loss_calibration_verdicts(table)
    summary = loss_calibration_summary(table, "loss")
    assert "The weighted class 8 at w[8]=10: rejected (p = 3.3e-08, 4 bins)." in summary
    assert "at ones" not in summary and "B[3,8]=10:" not in summary  # no class is weighted there
