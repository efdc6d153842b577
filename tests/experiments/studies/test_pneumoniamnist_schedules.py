"""experiments.studies.pneumoniamnist_schedules: its stored record, and the table that states it."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from experiments.studies import pneumoniamnist_schedules as S

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "docs" / "results" / "pneumoniamnist_schedules"


def test_the_stored_point_estimates_are_what_the_experiment_computes():
    stored = {r["schedule"]: r for r in json.loads((FOLDER / "ratios.json").read_text())}
    assert list(stored) == list(S.SCHEDULES)
    for name in ("6 epochs", "floor 1e-4, 4 seeds, mean logit"):
        fresh = S.schedule_record(name, S.RESULTS, n_bootstrap=20, seed=0)
        for field in ("ece_0.99_corrected", "ece_0.5", "difference", "ratio"):
            assert fresh[field] == pytest.approx(stored[name][field], abs=1e-4), (name, field)


def test_the_readme_table_states_the_record():
    stored = json.loads((FOLDER / "ratios.json").read_text())
    rows = [line for line in (FOLDER / "README.md").read_text().splitlines()
            if line.startswith("| ") and "[" in line]  # fmt: skip
    assert len(rows) == len(stored)
    for line, record in zip(rows, stored, strict=True):
        numbers = [float(x.replace("−", "-")) for x in re.findall(r"[−+-]?\d+\.\d+", line)]
        expected = [
            record["ece_0.99_corrected"], *record["ece_0.99_interval"],
            record["ece_0.5"], *record["ece_0.5_interval"],
            record["difference"], *record["difference_interval"],
            record["ratio"], *record["ratio_interval"],
        ]  # fmt: skip
        # ECEs and differences to 3 decimals, ratios to 1.
        np.testing.assert_allclose(numbers[-12:-3], expected[:9], atol=0.0006, err_msg=line)
        np.testing.assert_allclose(numbers[-3:], expected[9:], atol=0.051, err_msg=line)


def test_a_missing_results_folder_is_named(tmp_path, capsys):
    assert S.main(["--results", str(tmp_path), "--schedules", "6 epochs"]) == 2
    assert "pneumoniamnist_schedules: error:" in capsys.readouterr().err
