"""The Markdown table of a grid of losses (``iml.pipeline.markdown``): close betas keep their own
rows, in the table and in the figure."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from iml.calibration import METRICS
from iml.pipeline import sweep as S
from iml.pipeline.markdown import markdown_by_loss, markdown_by_method
from iml.plots import figure_calibration_by_loss
from iml.training import TrainConfig
from iml.training.tabular import TABULAR_DEFAULTS


def table_config(**fields) -> TrainConfig:
    """The sweeps' configuration of the trainer with ``fields`` changed."""
    return dataclasses.replace(TABULAR_DEFAULTS, **fields)


def test_close_betas_keep_their_own_rows_from_a_dataframe():
    import pandas as pd

    from iml.data.tabular import encode_table

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
    rows = markdown_by_loss(result.table).splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == ["| 0.9999991", "| 0.9999992"]
    line = next(
        ln
        for ln in figure_calibration_by_loss(result.table).axes[0].lines
        if ln.get_gid() == "ece-raw"
    )
    assert len(set(line.get_xdata())) == 2


def test_markdown_table_lists_every_method_and_metric():
    metrics = dict.fromkeys(METRICS, 0.25)
    raw = {**metrics, "loss_calibration_gap": 0.01, "loss_calibration_p_value": 0.5}
    text = markdown_by_method({"0.9": {"raw": raw, "platt": metrics}})
    assert "## beta = 0.9" in text
    assert "| raw | 0.2500 | 0.2500 | 0.2500 | 0.2500 | 0.2500 |" in text
    assert "| platt |" in text and "p-value 0.5000" in text
    assert json.loads(json.dumps(raw)) == raw
