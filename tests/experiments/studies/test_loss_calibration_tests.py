"""The study comparing candidate tests of loss calibration
(experiments/studies/loss_calibration_tests.py): a small row, its record and its tables."""

import json

import pytest

from experiments.studies import loss_calibration_tests as study


@pytest.mark.slow
def test_a_small_row_records_every_candidate_and_agrees_with_the_library():
    regime = {"label": "small", "n": 800, "prior": 0.3, "precision": 1.5}
    row = study.row(regime, datasets=40, n_null=60, beta=0.9, seed=3)
    assert row["library_agrees"]  # the study's HL statistic is the shipped test's
    assert set(row["rates"]) == set(study.SCENARIOS)
    for rates in row["rates"].values():
        assert set(rates) == set(study.CANDIDATES)
        assert all(0.0 <= r["rate"] <= 1.0 for r in rates.values())
    # At N = 800 with 3 bins or more, odds x2 is caught far more often than calibrated labels.
    assert row["adaptive_bins"] >= 3
    hl = {name: rates["hosmer_lemeshow"]["rate"] for name, rates in row["rates"].items()}
    assert hl["odds x2"] >= 0.8 > 0.2 >= hl["null"]
    text = study.render([json.loads(json.dumps(row))])
    assert "| odds x2 |" in text and "HL, m = 10" in text and "N = 800" in text
