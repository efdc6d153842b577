"""Smoke tests of experiments.studies.reveal_size_power at tiny sizes (its measurements are its
runs)."""

import json

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import ndtr

from experiments.studies import reveal_size_power
from iml import power as P
from iml import revealed as R

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
    "strategy",
    "n_bins",
    "min_count",
    "misreport",
    "nis_margin",
    "niac_margin",
    "min_bin_positives",
    "min_bin_negatives",
    "nis_rejection",
    "nis_se",
    "niac_rejection",
    "niac_se",
    "nias_rejection",
    "nias_se",
    "information_truth",
    "information_estimate",
    "coverage_percentile",
    "coverage_basic",
    "seconds",
}


@pytest.mark.slow
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
    # Each agent's I_k interval against its population decile information, by either interval.
    for record in records:
        truth, estimate = record["information_truth"], record["information_estimate"]
        assert 0.0 < truth and abs(estimate - truth) < 0.1 * truth
        assert record["coverage_percentile"] >= 0.6 and record["coverage_basic"] >= 0.6


def test_population_margins_vanish_for_equal_experiments_and_betas_are_ordered():
    betas = reveal_size_power.betas_for(64)
    assert betas[0] == pytest.approx(0.5) and betas[-1] == pytest.approx(0.99)
    assert np.all(np.diff(betas) > 0)
    population = P.gaussian_population(betas[:8], np.full(8, 1.5), 0.1)
    assert population.nis_margin == 0.0 and population.niac_margin <= 0.0
    # The lowest decile of x ~ 0.9 N(0, 1) + 0.1 N(1.5, 1) holds the fewest positives.
    cut = brentq(lambda x: 0.9 * ndtr(x) + 0.1 * ndtr(x - 1.5) - 0.1, -10, 10)
    assert population.min_positives == pytest.approx(0.1 * ndtr(cut - 1.5), rel=1e-6)


@pytest.mark.slow
def test_a_sparse_bin_row_at_reduced_scale(tmp_path):
    """Digits' regime (N = 1,797, prior 0.097, d = 3.1: the lowest deciles hold no positives)
    at 48 data sets: deciles and adaptive bins, the sizes of the three tests and NIAS's power
    against one misreported model. The full rows (500 data sets) are in docs/results/revealed."""
    regimes = tmp_path / "regimes.json"
    row = {"models": 3, "n": 1797, "prior": 0.097, "precision": 3.1, "bootstrap": 200,
           "datasets": 48, "deltas": [0.0], "misreport": 3.0}  # fmt: skip
    rows = [{**row, "label": "digits", "strategy": s} for s in ("adaptive", "quantile")]
    regimes.write_text(json.dumps(rows))
    records = reveal_size_power.main(["--regimes", str(regimes)])
    assert [(r["strategy"], r["scenario"]) for r in records] == [
        ("adaptive", "capacity"), ("adaptive", "misreported"),
        ("quantile", "capacity"), ("quantile", "misreported"),
    ]  # fmt: skip
    for record in records:
        assert set(record) == FIELDS | {"regime"} and record["regime"] == "digits"
        assert record["min_bin_positives"] < 0.5  # the sparse regime
    adaptive, misreported = records[:2]
    assert adaptive["min_count"] == R.MIN_COUNT
    # Sizes within Monte Carlo error of 5% or below (at most 3 of 48 = 6.25% plus 2 se).
    for test in ("nis", "niac", "nias"):
        assert adaptive[f"{test}_rejection"] <= 0.05 + 2 * 0.032
    # One model of three reporting for three times its odds: NIAS finds it most times.
    assert misreported["nias_rejection"] >= 0.6


def test_a_regimes_row_with_an_unknown_setting_is_named(tmp_path):
    regimes = tmp_path / "regimes.json"
    regimes.write_text(json.dumps([{"models": 3, "priors": 0.1}]))
    with pytest.raises(SystemExit, match=r"row 0 has unknown settings \['priors'\]"):
        reveal_size_power.main(["--regimes", str(regimes)])


@pytest.mark.parametrize("bad", [["--prior", "1.5"], ["--models", "1"], ["--datasets", "0"]])
def test_bad_arguments_exit_with_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit):
        reveal_size_power.main(bad)
    assert bad[0] in capsys.readouterr().err
