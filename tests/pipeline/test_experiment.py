"""One experiment (``iml.pipeline.experiment``): the kind of run follows from the model, one
``build`` makes either kind, one ``run`` trains it, and one report gives a binary grid the
recalibration baselines and Figures 1-4 whatever trained it (here a sweep of a CSV file)."""

import json
import math

import numpy as np
import pytest
from _sweep_tables import simulated_table

from iml.pipeline.defaults import default_config, sweep_config
from iml.pipeline.experiment import build, check_resumable
from iml.pipeline.report import report_run
from iml.pipeline.run_config import experiment_kind
from iml.pipeline.store import RunStore
from iml.pipeline.train_plan import run
from iml.recalibration import BASELINES


def _csv(path, n=600):
    x, y = simulated_table()
    rows = [f"{a:.5f},{b:.5f},{c:.5f},{t}" for (a, b, c), t in zip(x[:n], y[:n], strict=True)]
    path.write_text("a,b,c,y\n" + "\n".join(rows) + "\n")
    return path


def _csv_config(path, **keys):
    config = sweep_config()
    config.data.csv, config.data.target = str(path), "y"
    config.loss.betas = (0.3, 0.7)
    config.eval.n_bootstrap = 20
    for key, value in keys.items():
        section, name = key.split("__")
        config[section][name] = value
    return config


def test_the_kind_follows_from_the_model_not_the_command():
    assert experiment_kind(default_config()) == "images"  # a DenseNet: images from the host
    assert experiment_kind(sweep_config()) == "table"  # logistic regression: rows on the device
    config = default_config()
    config.model.name = "mlp"  # the reproduce defaults with a model of rows: a table
    assert experiment_kind(config) == "table"
    config.model.name = "nope"
    with pytest.raises(ValueError, match=r"config\.model\.name: unknown model 'nope'"):
        experiment_kind(config)


@pytest.mark.slow
def test_a_csv_sweep_is_reported_with_the_baselines_and_figures_1_to_4(tmp_path):
    experiment = build(_csv_config(_csv(tmp_path / "table.csv")))
    assert experiment.kind == "table" and experiment.dataset.num_examples == 600
    out = tmp_path / "run"
    check_resumable(experiment, out)  # a new folder
    trained = run(experiment, RunStore(out), progress=False)
    assert [b.batch.index for b in trained] == list(range(len(experiment.plan.batches)))
    assert run(experiment, RunStore(out), progress=False) == []  # stored: nothing trained again
    table = report_run(out, formats=("png",))
    assert list(table) == ["0.3", "0.7"]
    for row in table.values():
        # the baselines, cross-fitted over the outer folds, as in a run on images
        assert set(BASELINES) <= set(row) and {"raw", "loss_corrected"} <= set(row)
        assert row["raw"]["loss_calibration"]["verdict"].split()[0] in ("rejected", "not")
        assert len(row["l2"]) == 1 and len(row["l2"][0]) == 10  # one seed, ten rotations
    for name in ("figure1", "figure2", "figure3", "figure4", "smooth_raw", "smooth_corrected",
                 "ece_by_loss", "revealed_information"):  # fmt: skip
        assert (out / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name
    assert json.loads((out / "table.json").read_text()) == table
    assert json.loads((out / "revealed.json").read_text())["kind"] == "table"  # the manifest's
    assert "## beta = 0.3" in (out / "table.md").read_text()
    with np.load(out / "ensemble_scores.npz") as arrays:
        assert arrays["betas"].tolist() == [0.3, 0.7] and arrays["scores"].shape == (2, 600)


@pytest.mark.slow
def test_a_folder_is_resumed_only_by_the_same_experiment(tmp_path):
    path = _csv(tmp_path / "table.csv", n=300)
    experiment = build(_csv_config(path))
    out = tmp_path / "run"
    run(experiment, RunStore(out), progress=False)
    assert check_resumable(build(_csv_config(path)), out) == json.loads(
        json.dumps(experiment.record)
    )
    with pytest.raises(ValueError, match=r"--out: .*first difference: config\.loss\.beta:"):
        check_resumable(build(_csv_config(path, loss__betas=(0.3, 0.8))), out)
    # a grid computed again an ulp apart (another version or CPU) resumes the stored run
    nearby = _csv_config(path, loss__betas=(0.3, math.nextafter(0.7, 1.0)))
    assert check_resumable(build(nearby), out) == json.loads(json.dumps(experiment.record))
    # only the report's settings differ: the stored members serve, and the message says how
    with pytest.raises(ValueError, match=r"iml figures --run .* --config\.eval\.n_bins=5$"):
        check_resumable(build(_csv_config(path, eval__n_bins=5)), out)
