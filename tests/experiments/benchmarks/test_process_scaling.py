"""Tests of experiments.benchmarks.process_scaling: a run split at its stored batches, and two
processes meeting over loopback."""

import pytest


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
