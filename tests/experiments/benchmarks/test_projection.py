"""Tests of experiments.benchmarks._projection: the paper's experiment projected from measured
speeds, on one card and on several."""

import numpy as np
import pytest


def test_paper_scale_projection_counts_training_and_validation_passes():
    from experiments.benchmarks._projection import project_paper_experiment

    # 1,200 members, each epoch 0.7 * 112,120 training and 0.2 * 112,120 validation images.
    p = project_paper_experiment(100.0, 1000.0, epochs=10)
    per_epoch_s = 1200 * (78_484 / 100.0 + 22_424 / 1000.0)
    assert p["hours_per_epoch"] == pytest.approx(per_epoch_s / 3600)
    assert p["hours"] == pytest.approx(10 * per_epoch_s / 3600)
    assert p["hours_per_member"] == pytest.approx(10 * per_epoch_s / 3600 / 1200)
    # twice the training speed, half the training time
    faster = project_paper_experiment(200.0, 1e12, epochs=1, members=1, images=1000)
    slower = project_paper_experiment(100.0, 1e12, epochs=1, members=1, images=1000)
    assert slower["hours"] == pytest.approx(2 * faster["hours"], rel=1e-6)
    with pytest.raises(ValueError, match="epochs must be positive"):
        project_paper_experiment(100.0, 1000.0, epochs=0)


def test_a_batch_runs_the_expected_maximum_of_its_members_epochs():
    import itertools

    from experiments.benchmarks._projection import expected_batch_epochs

    epochs = np.array([6, 8, 8, 13])
    assert expected_batch_epochs(epochs, 1) == pytest.approx(epochs.mean())
    for k in (2, 3):  # every draw of k members, with replacement, equally likely
        draws = [max(d) for d in itertools.product(epochs, repeat=k)]
        assert expected_batch_epochs(epochs, k) == pytest.approx(np.mean(draws))
    assert expected_batch_epochs(epochs, 500) == pytest.approx(13, abs=1e-6)
    assert expected_batch_epochs(np.full(5, 7), 32) == pytest.approx(7)
    with pytest.raises(ValueError, match="at least 1"):
        expected_batch_epochs(np.array([0, 3]), 2)


def test_the_stored_early_stopping_run_gives_each_members_epochs():
    from experiments.benchmarks._projection import STOPPING_RUN, epochs_until_stopped

    epochs = epochs_until_stopped(STOPPING_RUN)
    stopped = np.concatenate([np.load(f)["stopped_epoch"]
                              for f in sorted(STOPPING_RUN.glob("batches/*.npz"))])  # fmt: skip
    assert epochs.shape == (30,) and np.all(stopped >= 0)  # every member stopped before the cap
    np.testing.assert_array_equal(epochs, stopped + 1)  # epoch e (from 0) is the (e + 1)th
    with pytest.raises(FileNotFoundError, match="no batches"):
        epochs_until_stopped(STOPPING_RUN / "figures")


def test_the_projection_on_cards_shares_batches_and_adds_coordination():
    from experiments.benchmarks import _projection as P

    scaling = {"coordination_s": 2.0, "meetings": [
        {"processes": 1, "join_s": 0.0, "meeting_s": 0.0},
        {"processes": 2, "join_s": 0.1, "meeting_s": 0.025},
        {"processes": 4, "join_s": 0.3, "meeting_s": 0.075},
    ]}  # fmt: skip
    # joining + 4 meetings: 0, 0.2, 0.6 s at 1, 2, 4 processes: 0.2 s more per process past two
    assert P.coordination_seconds(scaling, 1) == 0
    assert P.coordination_seconds(scaling, 2) == pytest.approx(2.0)
    assert P.coordination_seconds(scaling, 10) == pytest.approx(2.0 + 8 * 0.2)
    ours, torch = {"train": 700.0, "eval": 2000.0}, {"train": 70.0, "eval": 200.0}
    epochs = np.array([4, 6])
    out = P.project_on_cards(ours, torch, members_per_batch=3, epochs=epochs, cards=[1, 2, 7],
                             scaling=scaling, compile_s=30.0, members=7, images=1000)  # fmt: skip
    epoch_s = 1000 * (0.7 / 700 + 0.2 / 2000)
    batch_s = 3 * epoch_s * (4 / 8 + 6 * 7 / 8)  # the maximum of 3 draws is 4 with chance 1/8
    assert out["batches"] == 3 and out["batch_epochs"] == pytest.approx(4 / 8 + 6 * 7 / 8)
    one, two, seven = out["cards"]
    assert one["ours_hours"] * 3600 == pytest.approx(3 * batch_s + 30)
    assert one["torch_hours"] * 3600 == pytest.approx(7 * 10 * epoch_s * 5)
    assert two["ours_hours"] * 3600 == pytest.approx(2 * batch_s + 30 + 2.0)
    assert two["torch_hours"] * 3600 == pytest.approx(4 * 10 * epoch_s * 5)
    assert seven["ours_hours"] * 3600 == pytest.approx(batch_s + 30 + 2.0 + 5 * 0.2)
    assert one["ratio"] == pytest.approx(one["torch_hours"] / one["ours_hours"])


def test_the_projections_intervals_cover_it_and_shrink_to_it_without_spread():
    from experiments.benchmarks import _projection as P

    ours, torch = {"train": 700.0, "eval": 2000.0}, {"train": 70.0, "eval": 200.0}
    settings = {"members_per_batch": 4, "cards": [1, 3], "scaling": None, "members": 12,
                "images": 1000}  # fmt: skip
    epochs = np.array([5, 6, 6, 9, 12])
    point = P.project_on_cards(ours, torch, epochs=epochs, **settings)["cards"]
    spread = P.projection_intervals(ours, torch, ours_step_s=[1.0, 1.1, 0.9],
                                    torch_step_s=[2.0, 2.4, 1.8], epochs=epochs, replicates=300,
                                    **settings)  # fmt: skip
    for row, interval in zip(point, spread, strict=True):
        for key in ("ours_hours", "torch_hours", "ratio"):
            low, high = interval[key]
            assert low < high and low <= row[key] <= high, key
    # one epoch count and equal steps: every replicate is the projection itself
    flat = P.projection_intervals(ours, torch, ours_step_s=[1.0, 1.0], torch_step_s=[2.0],
                                  epochs=np.full(4, 7), replicates=20, **settings)  # fmt: skip
    exact = P.project_on_cards(ours, torch, epochs=np.full(4, 7), **settings)["cards"]
    for row, interval in zip(exact, flat, strict=True):
        assert interval["ratio"] == pytest.approx([row["ratio"]] * 2)
