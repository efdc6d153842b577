"""What every benchmark's record must hold, checked the same way for each
(``tests/experiments/benchmarks/``): a headline that is the median of at least three interleaved
runs, their range, cold and warm times apart, and the CPU read from the machine."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

FAKE_CPU = "Fake CPU 9000 @ 1.00GHz"


def fake_cpuinfo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Points the benchmarks' reader of the CPU at a made-up ``/proc/cpuinfo``; returns the
    model name a record must then carry."""
    from experiments.benchmarks import _harness

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: {FAKE_CPU}\n")
    monkeypatch.setattr(_harness, "CPUINFO", cpuinfo)
    return FAKE_CPU


def last_json_line(out: str) -> dict[str, Any]:
    """The JSON object of the last line printed."""
    return json.loads(out.strip().splitlines()[-1])


def assert_headline(
    record: dict[str, Any],
    *,
    runs: int,
    ours: str = "ours",
    baseline: str = "baseline",
    cpu: str | None = FAKE_CPU,
    cold: bool = True,
) -> None:
    """``record`` holds a headline taken as the harness takes it (see the module docstring)."""
    assert record["runs"] == runs >= 3
    ratios = record["ratios"]
    assert len(ratios) == runs
    assert record["ratio"] == pytest.approx(statistics.median(ratios), rel=1e-12)
    low, high = record["ratio_range"]
    assert low == min(ratios) and high == max(ratios) and low <= record["ratio"] <= high
    # one round's order: ours, then the baseline, then any other side
    assert record["order"][:2] == [ours, baseline]
    warm = record["warm_s"]
    assert set(warm) == set(record["order"]) and all(len(t) == runs for t in warm.values())
    scale = record.get("scale", {})
    expected = [
        b * scale.get(baseline, 1.0) / (o * scale.get(ours, 1.0))
        for b, o in zip(warm[baseline], warm[ours], strict=True)
    ]
    assert ratios == pytest.approx(expected, rel=1e-9)
    if cold:  # the first calls, apart from the warm runs
        assert set(record["cold_s"]) == set(record["order"])
        assert all(s > 0 for s in record["cold_s"].values())
    assert "compile_s" in record
    if cpu is not None:  # None: a part of a record, without the machine
        assert record["cpu"]["model"] == cpu
        assert record["cpu"]["logical_cores"] >= 1 and "gpu" in record
