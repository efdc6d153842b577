"""Test of experiments.benchmarks.scoring: a tiny run's record, its interleaved runs, and a
headline that compares like with like.

Speed targets are measured by running the benchmarks themselves, never here.
"""

import json
import statistics

import pytest
from _benchmark_records import assert_headline, fake_cpuinfo, last_json_line

from experiments.benchmarks import scoring


def test_scoring_benchmark_reports_ratio_and_accuracy(tmp_path, capsys, monkeypatch):
    cpu = fake_cpuinfo(monkeypatch, tmp_path)
    out = tmp_path / "scoring.json"
    report = scoring.main(["--betas", "8", "--scores", "1000", "--runs", "3", "--out", str(out)])
    assert last_json_line(capsys.readouterr().out) == report == json.loads(out.read_text())
    assert report["grid"] == [8, 1000]
    assert_headline(report, runs=3, ours="into", baseline="fill", cpu=cpu)
    assert report["order"] == ["into", "fill", "copy", "jit", "numpy"]
    # Like with like: the headline's baseline writes the grid's bytes and reads none; the copy,
    # which reads as many as it writes, has its bandwidth stated for twice the bytes, and no
    # ratio is taken against it.
    results = report["results"]
    assert results["fill"]["bytes_moved"] == results["into"]["bytes_moved"] == 8 * 1000 * 4
    assert results["copy"]["bytes_moved"] == 2 * 8 * 1000 * 4
    assert not any("copy" in key for key in report if key.startswith("ratio"))
    warm = report["warm_s"]
    numpy = [n / o for n, o in zip(warm["numpy"], warm["into"], strict=True)]
    assert report["ratio_numpy"] == pytest.approx(statistics.median(numpy))
    assert report["compile_s"] > 0 and len(report["warm_compile_s"]) == 3
    # What was timed is also correct: float32 within a few ulps of the float64 formula.
    assert report["max_relative_error_float32"] < 1e-6


def test_scoring_refuses_fewer_than_three_runs(tmp_path):
    with pytest.raises(SystemExit):
        scoring.main(["--runs", "2", "--out", str(tmp_path / "scoring.json")])
