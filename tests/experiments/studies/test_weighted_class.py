"""Tests of experiments.studies.weighted_class: the diagnostics of one weighted class of a sweep."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments.studies import weighted_class as W
from iml import loss_spec


def _simulated(n: int = 4000, k: int = 1, w: float = 10.0):
    """Posteriors of 3 classes, labels drawn from them, and the scores of the unweighted and the
    class-k-weighted class-weighted softmax cross-entropy's exact optimal rules."""
    rng = np.random.default_rng(0)
    gamma = rng.dirichlet([0.5, 0.5, 0.5], size=n)
    labels = (rng.random((n, 1)) > np.cumsum(gamma, axis=1)).sum(1)
    weights = np.ones((2, 3))
    weights[1, k] = w
    spec = loss_spec("class_weighted_softmax", class_weights=weights)
    scores = np.stack([np.asarray(spec[i].optimal_score(gamma)) for i in range(2)])
    corrected = np.stack([np.asarray(spec[i].loss_corrected_score(scores[i])) for i in range(2)])
    return scores, corrected, labels


@pytest.mark.slow
def test_scores_optimal_for_the_weighted_loss_pass_its_test_and_fail_the_unweighted_one():
    scores, corrected, labels = _simulated()
    report = W.weighted_class_report(scores, corrected, labels, ["ones", "w[1]=10"], 1, 10.0, 200)
    weighted, unweighted = report["w[1]=10"], report["ones"]
    assert weighted["loss_calibration_trained"]["beta"] == pytest.approx(10 / 11)
    assert weighted["loss_calibration_trained"]["p_value"] > 0.05
    assert weighted["loss_calibration_unweighted"]["p_value"] < 0.01
    assert unweighted["loss_calibration_unweighted"]["p_value"] > 0.05
    # Each verdict in the project's words, with its bins and its power against odds x2.
    trained = weighted["loss_calibration_trained"]
    assert trained["verdict"].startswith("not rejected") and "against odds x2" in trained["verdict"]
    assert trained["n_bins"] >= 2 and trained["power_against_odds_x2"] >= 0.9
    assert weighted["loss_calibration_unweighted"]["verdict"].startswith("rejected")
    # The weight inflates class 1's scores; the rule's inverse gives the posteriors back.
    assert weighted["mean_raw"] > weighted["rate"] + 0.1
    assert weighted["mean_corrected"] == pytest.approx(weighted["rate"], abs=0.02)
    assert weighted["ece_raw"] > 0.1 > 0.03 > weighted["ece_corrected"]
    # Each ECE with its 95% interval, all on the same resampled rows: the weighted model's raw
    # interval lies wholly above its corrected one.
    for row in (weighted, unweighted):
        for method in ("raw", "corrected"):
            low, high = row[f"ece_{method}_interval"]
            assert 0 <= low < high and low <= row[f"ece_{method}"] * 1.5
    assert weighted["ece_raw_interval"][0] > weighted["ece_corrected_interval"][1]
    assert weighted["row_sum_quantiles"] == [1.0, 1.0, 1.0]
    # Exact posteriors both: the corrected weighted scores are as calibrated as the unweighted.
    diff = weighted["ece_corrected_minus_unweighted"]
    assert diff["estimate"] == pytest.approx(weighted["ece_corrected"] - unweighted["ece_raw"])
    low, high = diff["interval"]
    assert low < 0 < high and high - low < 0.05
    assert "ece_corrected_minus_unweighted" not in unweighted


@pytest.mark.slow
def test_a_correction_that_misses_is_told_apart_from_the_unweighted_model():
    scores, corrected, labels = _simulated()
    shifted = corrected.copy()
    shifted[1, :, 1] = np.clip(shifted[1, :, 1] + 0.1, 0, 1)  # corrected 0.1 too high
    report = W.weighted_class_report(scores, shifted, labels, ["ones", "w[1]=10"], 1, 10.0, 200)
    low, _ = report["w[1]=10"]["ece_corrected_minus_unweighted"]["interval"]
    assert low > 0.05


@pytest.mark.slow
def test_the_command_reads_a_sweep_folder_and_refuses_a_missing_one(tmp_path, capsys):
    scores, corrected, labels = _simulated(n=600)
    np.savez(tmp_path / "ensemble_scores.npz", scores=scores, corrected=corrected, labels=labels,
             keys=np.asarray(["ones", "w[1]=10"]))  # fmt: skip
    argv = ["--run", str(tmp_path), "--class", "1", "--weight", "10", "--n-bootstrap", "20"]
    assert W.main(argv) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"ones", "w[1]=10"}
    assert W.main(["--run", str(tmp_path / "none"), "--class", "1", "--weight", "10"]) == 2
    assert "ensemble_scores.npz not found" in capsys.readouterr().err
    with pytest.raises(ValueError, match="class 3 < n"):
        W.weighted_class_report(scores, corrected, labels, ["a", "b"], 3, 10.0)
    # a binary reproduce run's ensemble scores, and a multiclass one's with unscored rows
    (binary := tmp_path / "binary").mkdir()
    np.savez(binary / "ensemble_scores.npz", scores=scores[:, :, 0], labels=labels,
             betas=np.asarray([0.5, 0.9]))  # fmt: skip
    assert W.main(["--run", str(binary), "--class", "1", "--weight", "10"]) == 2
    assert "holds no multiclass sweep's ensemble scores" in capsys.readouterr().err
    (gaps := tmp_path / "gaps").mkdir()
    holed = scores.copy()
    holed[0, 0] = np.nan
    np.savez(gaps / "ensemble_scores.npz", scores=holed, corrected=corrected, labels=labels,
             keys=np.asarray(["ones", "w[1]=10"]))  # fmt: skip
    assert W.main(["--run", str(gaps), "--class", "1", "--weight", "10"]) == 2
    assert "leaves observations unscored (NaN)" in capsys.readouterr().err
