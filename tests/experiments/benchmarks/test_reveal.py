"""Smoke test of experiments.benchmarks.reveal: it runs at a tiny size and reports a sane JSON
line.

Speed targets are measured by running the benchmarks themselves, never here.
"""

import json


def test_reveal_benchmark_reports_ratio_and_agrees_with_the_baseline(capsys):
    from experiments.benchmarks import reveal

    argv = ["--models", "6", "--rows", "3000", "--replicates", "20"]
    report = reveal.main([*argv, "--baseline-replicates", "4", "--repeats", "1"])
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last_line) == report
    assert report["ratio"] > 0 and report["ours_s"] > 0 and report["peak_rss_gb"] > 0
    assert "6 models x 3000 observations, 10 bins, 20 paired bootstrap" in report["work"]
    # Ours and the baseline loop agree on identical paired weights: G, I_k and the NIS margin to
    # float32 rounding, and the NIAC verdict (minimum cycle mean against the assignment) on each.
    assert all(diff < 1e-5 for diff in report["agreement_max_abs_diff"].values())
    assert set(report["agreement_max_abs_diff"]) == {"G", "I", "nis"}
    assert report["niac_verdicts_agree"] == "4/4"
