"""Tests of experiments.benchmarks._harness: interleaved runs, the headline taken from them, and
the machine read into the record.

Speed targets are measured by running the benchmarks themselves, never here.
"""

import argparse
import statistics

import pytest

from experiments.benchmarks import _harness as H


def _clocked(monkeypatch, seconds):
    """Fake sides whose calls take the given seconds (a per-side list, one per call, cold call
    first) on a fake clock, recording the order of the calls."""
    now = [0.0]
    calls = []
    monkeypatch.setattr(H.time, "perf_counter", lambda: now[0])

    def side(name):
        left = list(seconds[name])

        def call():
            calls.append(name)
            now[0] += left.pop(0)

        return call

    return {name: side(name) for name in seconds}, calls


def test_sides_run_cold_once_then_interleaved_and_the_headline_is_the_median(monkeypatch):
    # ours: cold 9 s, then 1, 2, 4 s; the baseline: cold 5 s, then 10, 10, 10 s.
    sides, calls = _clocked(monkeypatch, {"ours": [9, 1, 2, 4], "baseline": [5, 10, 10, 10]})
    t = H.interleaved(sides, 3)
    assert calls == ["ours", "baseline"] * 4  # the cold pair first, then three rounds
    assert t["order"] == ["ours", "baseline"] and t["runs"] == 3
    assert t["cold_s"] == {"ours": 9, "baseline": 5}  # apart from the warm rounds
    assert t["warm_s"] == {"ours": [1, 2, 4], "baseline": [10, 10, 10]}
    assert t["ratios"] == [10, 5, 2.5]
    assert t["ratio"] == 5 == statistics.median(t["ratios"])
    assert t["ratio_range"] == [2.5, 10]
    assert "scale" not in t
    # the first run's figure: the baseline's median warm 10 s over ours' cold 9 s
    assert t["cold_ratio"] == pytest.approx(10 / 9)


def test_a_scaled_side_and_a_third_side_share_the_rounds(monkeypatch):
    # The baseline times a fifth of its work; a reference runs in the same rounds.
    seconds = {"ours": [1, 2, 1, 3], "baseline": [1, 1, 1, 2], "copy": [1] * 4}
    sides, calls = _clocked(monkeypatch, seconds)
    t = H.interleaved(sides, 4, scale={"baseline": 5, "copy": 1}, cold=False)
    assert calls == ["ours", "baseline", "copy"] * 4 and "cold_s" not in t
    assert "cold_ratio" not in t
    assert t["warm_s"]["ours"] == [1, 2, 1, 3] and t["scale"] == {"baseline": 5.0}
    assert t["ratios"] == [5, 2.5, 5, 10 / 3]
    assert t["ratio"] == statistics.median(t["ratios"]) == pytest.approx(25 / 6)
    low, high = t["ratio_range"]
    assert low <= t["ratio"] <= high and [low, high] == [2.5, 5]


def test_the_first_run_figure_scales_the_baseline_and_charges_ours_its_cold_call(monkeypatch):
    # ours: cold 2 s; the baseline times a fifth of its work: warm 1, 3, 2 s (median 2 s).
    sides, _ = _clocked(monkeypatch, {"ours": [2, 1, 1, 1], "baseline": [9, 1, 3, 2]})
    t = H.interleaved(sides, 3, scale={"baseline": 5})
    assert t["cold_ratio"] == pytest.approx(2 * 5 / 2)  # not the baseline's cold 9 s
    assert t["ratio"] == pytest.approx(10)


def test_sides_must_name_ours_and_the_baseline():
    with pytest.raises(ValueError, match="must hold"):
        H.interleaved({"ours": lambda: None, "other": lambda: None}, 3)
    with pytest.raises(ValueError, match="one time of each side"):
        H.per_run_ratios([1.0], [1.0, 2.0])


def test_fewer_than_three_runs_are_refused():
    parser = argparse.ArgumentParser()
    H.add_runs_argument(parser)
    assert parser.parse_args([]).runs == H.MIN_RUNS == 3
    assert parser.parse_args(["--repeats", "5"]).runs == 5  # the name before
    with pytest.raises(SystemExit):
        H.check_runs(parser, 2)
    H.check_runs(parser, 3)


def test_the_cpu_is_read_from_the_machine(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: Fake\nmodel name\t: Fake CPU 9000 @ 1.00GHz\n"
        "processor\t: 1\nmodel name\t: Fake CPU 9000 @ 1.00GHz\n"
    )
    assert H.cpu_model(cpuinfo) == "Fake CPU 9000 @ 1.00GHz"
    monkeypatch.setattr(H, "CPUINFO", cpuinfo)
    monkeypatch.setattr(H.os, "cpu_count", lambda: 7)
    record = H.headline({"ratio": 2.0}, compile_s=1.5)
    assert record["cpu"]["model"] == "Fake CPU 9000 @ 1.00GHz"
    assert record["cpu"]["logical_cores"] == 7 and record["cpu"]["usable_cores"] >= 1
    assert record["gpu"] is None  # the tests run JAX on the CPU
    assert record["compile_s"] == 1.5 and record["ratio"] == 2.0
    # without a model name line: the platform's processor name, or None
    monkeypatch.setattr(H.platform, "processor", lambda: "")
    assert H.cpu_model(tmp_path / "missing") is None


def test_compile_seconds_counts_making_programs_not_running_them():
    import jax
    import jax.numpy as jnp

    def program(x):
        return jnp.cumsum(jnp.sin(x) * 3.0)

    x = jnp.ones(1000)
    with H.CompileSeconds() as first:
        jax.block_until_ready(jax.jit(program)(x))
    assert first.seconds > 0
    compiled = jax.jit(program).lower(x).compile()
    with H.CompileSeconds() as outer:
        with H.CompileSeconds() as inner:
            for _ in range(50):
                jax.block_until_ready(compiled(x))  # runs only: nothing to make
        assert inner.seconds == 0.0
        jax.block_until_ready(jax.jit(lambda x: program(x) + 1.0)(x))
    assert outer.seconds > 0 and inner.seconds == 0.0


def test_sides_that_time_their_own_work_give_their_seconds():
    # e.g. processes launched and waited for: the side returns its own wall time
    seconds = {"ours": iter([4.0, 2.0, 3.0, 1.0]), "baseline": iter([8.0, 6.0, 6.0, 6.0])}
    sides = {name: (lambda it=it: next(it)) for name, it in seconds.items()}
    t = H.interleaved(sides, 3, timer=lambda call: call())
    assert t["cold_s"] == {"ours": 4.0, "baseline": 8.0}
    assert t["warm_s"] == {"ours": [2.0, 3.0, 1.0], "baseline": [6.0, 6.0, 6.0]}
    assert t["ratios"] == [3.0, 2.0, 6.0] and t["ratio"] == 3.0 and t["ratio_range"] == [2.0, 6.0]


def test_each_warm_round_records_the_process_own_cpu_seconds_and_page_faults():
    import mmap

    def touch() -> None:  # 64 MiB of fresh anonymous pages, each written once
        with mmap.mmap(-1, 64 << 20) as m:
            for offset in range(0, 64 << 20, 4096):
                m[offset] = 1

    t = H.interleaved({"ours": touch, "baseline": lambda: None}, 3, cold=False)
    ours, baseline = t["warm_process"]["ours"], t["warm_process"]["baseline"]
    assert len(ours) == len(baseline) == 3
    # 16,384 pages were touched in each of ours' rounds (the kernel may map a few together)
    assert all(r["minor_faults"] >= 1000 for r in ours)
    assert all(r["minor_faults"] < 1000 for r in baseline)
    assert all(r["user_s"] >= 0 and r["sys_s"] >= 0 for r in ours + baseline)


def test_the_record_names_the_environment_that_changes_how_memory_is_got(monkeypatch):
    import os

    for key in list(os.environ):
        if key in H.MEMORY_ENVIRONMENT or key.startswith("MALLOC_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "1")
    monkeypatch.setenv("PATH_UNRELATED", "x")
    timing = H.interleaved({"ours": lambda: None, "baseline": lambda: None}, 3, cold=False)
    assert H.headline(timing, gpu=False)["memory_environment"] == {"MALLOC_ARENA_MAX": "1"}
