"""Smoke test of experiments.benchmarks.scoring: it runs at a tiny size and reports a sane JSON
line.

Speed targets are measured by running the benchmarks themselves, never here.
"""

import json

from experiments.benchmarks import scoring


def test_scoring_benchmark_reports_ratio_and_accuracy(tmp_path, capsys):
    out = tmp_path / "scoring.json"
    report = scoring.main(["--betas", "8", "--scores", "1000", "--repeats", "2", "--out", str(out)])
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last_line)["ratio"] == report["ratio"]
    assert json.loads(out.read_text())["grid"] == [8, 1000]
    assert report["ratio"] > 0
    assert set(report["results"]) == {"copy", "numpy", "jit", "into"}
    # What was timed is also correct: float32 within a few ulps of the float64 formula.
    assert report["max_relative_error_float32"] < 1e-6
