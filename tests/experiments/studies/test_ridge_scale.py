"""Tests of experiments.studies.ridge_scale: two sweeps' corrected ECEs at the grid's ends,
side by side."""

import json

import numpy as np
import pytest

from experiments.studies import ridge_scale
from iml.calibration import expected_calibration_error


def _folder(path, corrected, labels, betas, violated):
    path.mkdir()
    np.savez(path / "ensemble_scores.npz", betas=betas, corrected=corrected, labels=labels)
    (path / "revealed").mkdir()
    test = {"margin": 0.1, "lower_bound": 0.05 if violated else -0.05, "p_value": 0.01,
            "violated": violated}  # fmt: skip
    record = {"nis": test, "niac": test, "ridge": {"l2": "auto"}}
    (path / "revealed" / "revealed.json").write_text(json.dumps(record))
    return path


@pytest.mark.slow
def test_the_ends_are_compared_with_a_paired_interval(tmp_path):
    rng = np.random.default_rng(0)
    n, betas = 3000, np.array([0.01, 0.5, 0.99])
    p = rng.uniform(0.05, 0.95, n)
    labels = (rng.uniform(size=n) < p).astype(np.int32)
    calibrated = np.stack([p, p, p]).astype(np.float32)
    off = np.clip(calibrated + 0.1, 0, 1)  # too high everywhere
    first = _folder(tmp_path / "a", off, labels, betas, True)
    second = _folder(tmp_path / "b", calibrated, labels, betas, False)
    report = ridge_scale.compare(first, second, n_bootstrap=200)
    assert list(report["ends"]) == ["0.01", "0.99"]
    for end in report["ends"].values():
        want = float(expected_calibration_error(off[0], labels)) - float(
            expected_calibration_error(calibrated[0], labels)
        )
        assert end["difference"] == pytest.approx(want, abs=1e-6)
        low, high = end["interval"]
        assert 0.05 < low < end["difference"] < high
    assert report["first"]["niac"]["verdict"] == "rejected"
    assert report["second"]["nis"]["verdict"] == "not rejected (power not simulated)"
    other = _folder(tmp_path / "c", calibrated[:, :100], labels[:100], betas, False)
    with pytest.raises(ValueError, match="not sweeps of the same data and grid"):
        ridge_scale.compare(first, other)
    reproduce = tmp_path / "reproduce"  # a reproduce run's ensemble scores: no corrected scores
    reproduce.mkdir()
    np.savez(reproduce / "ensemble_scores.npz", betas=betas, scores=calibrated, labels=labels)
    with pytest.raises(ValueError, match=r"no binary sweep's ensemble scores \(no corrected"):
        ridge_scale.compare(first, reproduce)
