"""Smoke test of experiments.studies.recalibration_vs_size in --quick mode (its measurements are its
runs)."""

import numpy as np
import pytest


@pytest.mark.slow
def test_recalibration_vs_size_quick_run_writes_sane_outputs(tmp_path):
    import json

    import matplotlib.image

    from experiments.studies.recalibration_vs_size import main

    main(["--quick", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    assert (
        "python -m experiments.studies.recalibration_vs_size --quick"
        in (tmp_path / "results.md").read_text()
    )
    assert matplotlib.image.imread(tmp_path / "recalibration_vs_size.png").ndim == 3
    summary = results["summary"]
    for method, by_metric in summary.items():
        for metric, stats in by_metric.items():
            med = np.asarray(stats["median"])
            assert med.shape == (len(results["sizes"]),), (method, metric)
            assert np.all(np.isfinite(med)) and np.all(med >= 0), (method, metric)
            assert np.all(med <= 1.0 if metric != "log_loss" else med < 14.0), (method, metric)
    ece = {m: summary[m]["ece"]["median"][0] for m in summary}
    # The analytic correction needs no data: at the smallest size it beats every fitted method.
    for fitted in ("Platt", "temperature", "isotonic", "histogram", "prior shift (fitted)"):
        assert ece["loss correction"] < ece[fitted], (fitted, ece)
    # And it is as calibrated as the true posteriors, while the raw weighted scores are not.
    assert abs(ece["loss correction"] - results["oracle_posterior"]["ece"]) < 1e-3
    assert ece["uncorrected"] > 10 * ece["loss correction"]
