"""Test of experiments.benchmarks.reveal: a tiny run's record, its interleaved runs and its
agreement with the baseline.

Speed targets are measured by running the benchmarks themselves, never here.
"""

import json

import pytest
from _benchmark_records import assert_headline, fake_cpuinfo, last_json_line


@pytest.mark.slow
def test_reveal_benchmark_reports_ratio_and_agrees_with_the_baseline(capsys, tmp_path, monkeypatch):
    from experiments.benchmarks import reveal

    cpu = fake_cpuinfo(monkeypatch, tmp_path)
    argv = ["--models", "6", "--rows", "3000", "--replicates", "20"]
    out = tmp_path / "reveal.json"
    report = reveal.main([*argv, "--baseline-replicates", "4", "--runs", "3", "--out", str(out)])
    assert last_json_line(capsys.readouterr().out) == report == json.loads(out.read_text())
    assert_headline(report, runs=3, cpu=cpu)
    # 4 of 20 replicates timed, scaled; NIAS once a run, unscaled, on both sides
    assert report["baseline_measured"].startswith("4 replicates a run, scaled to 20; NIAS once")
    assert len(report["baseline_nias_s"]) == 4  # the cold call and three runs
    assert report["nias_statistic_max_rel_diff"] < 1e-3  # NIAS agrees model by model
    # the cold call made the programs (nested and threaded events can sum past its wall time)
    assert report["compile_s"] > 0 and report["peak_rss_gb"] > 0
    assert len(report["warm_compile_s"]) == 3
    assert max(report["warm_compile_s"]) < report["compile_s"] / 10
    assert "6 models x 3000 observations, 10 bins, 20 paired bootstrap" in report["work"]
    assert "NIAS" in report["work"]
    # Ours and the baseline loop agree on identical paired weights: G, I_k and the NIS margin to
    # float32 rounding, and the NIAC verdict (minimum cycle mean against the assignment) on each.
    assert all(diff < 1e-5 for diff in report["agreement_max_abs_diff"].values())
    assert set(report["agreement_max_abs_diff"]) == {"G", "I", "nis"}
    assert report["niac_verdicts_agree"] == "4/4"
