"""Tests of experiments.benchmarks.process_scaling: a run split at its stored batches, two
processes meeting over loopback, and the interleaved runs behind its headline (on fake runs).

Speed targets are measured by running the benchmarks themselves, never here.
"""

import pytest


@pytest.mark.slow
def test_process_scaling_splits_a_run_at_its_stored_batches():
    from experiments.benchmarks.process_scaling import components, meetings

    # two processes: batches 0, 2, 4 on process 0 and 1, 3, 5 on process 1
    stored = [10.0, 10.5, 11.0, 11.6, 12.0, 12.7]
    got = components(stored, wall_s=14.0, count=2)
    assert got == {"start_s": 10.0, "batch_s": pytest.approx(1.05), "end_s": pytest.approx(1.3),
                   "wall_s": 14.0}  # fmt: skip
    assert components([1.0, 2.0, 4.0], 5.0, 1)["batch_s"] == pytest.approx(1.5)
    with pytest.raises(ValueError, match="fewer than two"):
        components([1.0, 2.0, 3.0], 4.0, 2)
    met = meetings(2, repeats=3)  # two processes join the runtime and meet over loopback
    assert met["processes"] == 2 and 0 < met["meeting_s"] < 5 and met["join_s"] > 0


def test_process_scaling_interleaves_two_processes_with_one_and_heads_with_the_median(
    tmp_path, monkeypatch, capsys
):
    # Fake runs (no process starts): one process takes 30, 36, 33 s; two take 20, 30, 22 s.
    import json

    from _benchmark_records import assert_headline, fake_cpuinfo, last_json_line

    from experiments.benchmarks import process_scaling as S

    cpu = fake_cpuinfo(monkeypatch, tmp_path)
    walls = {1: [30.0, 36.0, 33.0], 2: [20.0, 30.0, 22.0]}
    calls = []

    def timed_run(plan, out, count, timeout_s):
        calls.append((out.name, count))
        wall = walls[count][len([c for c in calls if c[1] == count]) - 1]
        return {"start_s": 10.0 + count, "batch_s": 1.0, "end_s": 0.5, "wall_s": wall}

    monkeypatch.setattr(S, "_timed_run", timed_run)
    monkeypatch.setattr(S, "run_processes", lambda *args: 1.0)  # the untimed warm-up
    monkeypatch.setattr(S, "meetings", lambda n, repeats: {"processes": n, "join_s": 0.0,
                                                            "meeting_s": 0.0})  # fmt: skip
    monkeypatch.setattr(S, "_cores", lambda: [0, 1])
    out = tmp_path / "process_scaling.json"
    argv = ["--quick", "--work", str(tmp_path / "work"), "--out", str(out)]
    summary = S.main(argv)
    assert calls == [("two-0", 2), ("one-0", 1), ("two-1", 2), ("one-1", 1), ("two-2", 2),
                     ("one-2", 1)]  # fmt: skip
    line = last_json_line(capsys.readouterr().out)
    assert line["ratio"] == summary["ratio"] == pytest.approx(1.5)  # median of 1.5, 1.2, 1.5
    assert summary["ratios"] == pytest.approx([1.5, 1.2, 1.5])
    assert_headline(summary, runs=3, ours="two", baseline="one", cpu=cpu, cold=False)
    assert summary["gpu"] is None and summary["efficiency"] == pytest.approx(0.75)
    stored = json.loads(out.read_text())
    assert [run["wall_s"] for run in stored["components"]["one"]] == walls[1]
    assert stored["coordination_s"] == pytest.approx(1.0)  # starts of 12 s against 11 s
    with pytest.raises(SystemExit):
        S.main(["--runs", "2", "--work", str(tmp_path / "other"), "--out", str(out)])
