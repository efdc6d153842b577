"""Smoke tests of experiments.reveal_size_power at tiny sizes (its measurements are its runs)."""

import json

import numpy as np
import pytest

from experiments import reveal_size_power

FIELDS = {
    "models",
    "n",
    "prior",
    "bootstrap",
    "datasets",
    "seed",
    "scenario",
    "delta",
    "precision",
    "nis_margin",
    "niac_margin",
    "nis_rejection",
    "nis_se",
    "niac_rejection",
    "niac_se",
    "seconds",
}


def test_one_json_line_per_scenario_and_strong_effects_are_rejected(tmp_path, capsys):
    out = tmp_path / "size_power.jsonl"
    argv = ["--models", "4", "--n", "10000", "--bootstrap", "100", "--datasets", "12"]
    records = reveal_size_power.main([*argv, "--deltas", "0", "-0.3", "0.3", "--out", str(out)])
    printed = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert printed == written == records
    assert [r["scenario"] for r in records] == ["capacity", "falling", "rising"]
    for record in records:
        assert set(record) == FIELDS
        assert (record["models"], record["n"], record["datasets"]) == (4, 10_000, 12)
        for test in ("nis", "niac"):
            assert 0.0 <= record[f"{test}_rejection"] <= 1.0
            assert 0.0 <= record[f"{test}_se"] <= 0.5
    capacity, falling, rising = records
    # The population margins say which learning model fails: none with equal precision, NIS
    # (clearly) with precision falling with beta, NIAC and NIS with precision rising with it.
    assert capacity["nis_margin"] == capacity["niac_margin"] == 0.0
    assert falling["nis_margin"] > 20 * falling["niac_margin"] > 0
    assert rising["niac_margin"] > 0 and rising["nis_margin"] > 0
    assert falling["precision"] == pytest.approx([1.65, 1.35])
    # A precision difference of 0.3 across the betas is found nearly every time at N = 10,000.
    assert falling["nis_rejection"] >= 0.75
    assert falling["niac_rejection"] <= 0.25
    assert rising["niac_rejection"] >= 0.75


def test_population_margins_vanish_for_equal_experiments_and_betas_are_ordered():
    betas = reveal_size_power.betas_for(64)
    assert betas[0] == pytest.approx(0.5) and betas[-1] == pytest.approx(0.99)
    assert np.all(np.diff(betas) > 0)
    nis, niac = reveal_size_power.population_margins(betas[:8], np.full(8, 1.5), 0.1)
    assert nis == 0.0 and niac <= 0.0


@pytest.mark.parametrize("bad", [["--prior", "1.5"], ["--models", "1"], ["--datasets", "0"]])
def test_bad_arguments_exit_with_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit):
        reveal_size_power.main(bad)
    assert bad[0] in capsys.readouterr().err
