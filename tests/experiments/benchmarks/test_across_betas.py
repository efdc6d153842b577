"""Tests of experiments.benchmarks.across_betas: a tiny run's record and its agreement with the
baseline.

Speed targets are measured by running the benchmarks themselves, never here.
"""

import json

import pytest
from _benchmark_records import assert_headline, fake_cpuinfo, last_json_line


@pytest.mark.slow
def test_across_betas_benchmark_runs_tiny_interleaved_and_agrees_with_its_baseline(
    tmp_path, capsys, monkeypatch
):
    from experiments.benchmarks import across_betas

    cpu = fake_cpuinfo(monkeypatch, tmp_path)
    out = tmp_path / "across_betas.json"
    argv = ["--n", "400", "--betas", "4", "--bootstrap", "5", "--runs", "3"]
    report = across_betas.main([*argv, "--baseline-betas", "2", "--out", str(out)])
    assert last_json_line(capsys.readouterr().out) == report == json.loads(out.read_text())
    assert_headline(report, runs=3, cpu=cpu)
    # the baseline times 2 of the 4 betas and is scaled to all of them
    assert report["scale"] == {"baseline": 2.0} and report["baseline_scaled"]
    assert report["compile_s"] > 0 and report["n_betas"] == 4
    # The timed work is the same work: point ECE and gap agree with the NumPy/sklearn loop.
    assert report["check_max_abs_diff_ece"] < 1e-5 and report["check_max_abs_diff_gap"] < 1e-5
