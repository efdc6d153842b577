"""A sweep's record (``iml.pipeline.sweep_record``): the sections of a sweep stored flat are those
it records now, every stored sweep of docs/results is read into them, and a sweep is told from a
run on images in either form."""

import json
from pathlib import Path

import pytest
from _sweep_tables import flat_record

from iml import config as config_lib
from iml.pipeline.defaults import default_config
from iml.pipeline.sweep_record import SECTIONS, is_sweep, sweep_record

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "ab" * 32
TRAINED = {"l2": "auto", "l2_grid": [0.01, 1.0], "l2_scale": "paper", "solver": "exact"}

#: The same two sweeps, as recorded now and in the flat form: the log loss at the report's
#: defaults, and a focal loss pooled by logit with a caller's fact beside the record.
SAME = [
    (
        {"data": {"name": "digits", "n_folds": 4, "fold_seed": 0, "sha256": DIGEST},
         "model": {"name": "logistic", "hidden": 32},
         "loss": {"name": "log", "betas": [0.5, 0.9]},
         "train": {"seeds": [0], "betas_per_chunk": 2, **TRAINED},
         "eval": {"n_bins": 5, "average": "score", "n_bootstrap": 200, "report_seed": 0},
         "store": "batches"},
        {"betas": [0.5, 0.9], "seeds": [0],
         "train": {"model": "logistic", "hidden": 32, **TRAINED}, "n_folds": 4, "fold_seed": 0,
         "betas_per_chunk": 2, "n_bins": 5, "data_sha256": DIGEST, "store": "batches",
         "data": {"name": "digits"}},
    ),
    (
        {"data": {"name": "csv", "path": "t.csv", "target": "y", "n_folds": 10, "fold_seed": 3,
                  "sha256": DIGEST},
         "model": {"name": "mlp", "hidden": 8},
         "loss": {"name": "focal", "gamma": [2.0, 2.0], "alpha": [0.5, 0.75]},
         "train": {"seeds": [0, 1], "betas_per_chunk": 16, "l2": 0.0, "solver": "adam"},
         "eval": {"n_bins": 10, "average": "logit", "n_bootstrap": 50, "report_seed": 3},
         "store": "batches", "note": "pilot"},
        {"loss": {"name": "focal", "gamma": [2.0, 2.0], "alpha": [0.5, 0.75]}, "seeds": [0, 1],
         "train": {"model": "mlp", "hidden": 8, "l2": 0.0, "solver": "adam"}, "n_folds": 10,
         "fold_seed": 3, "betas_per_chunk": 16, "n_bins": 10, "average": "logit",
         "n_bootstrap": 50, "report_seed": 3, "data_sha256": DIGEST, "store": "batches",
         "data": {"name": "csv", "path": "t.csv", "target": "y"}, "note": "pilot"},
    ),
]  # fmt: skip


@pytest.mark.parametrize(("sections", "flat"), SAME)
def test_a_flat_record_reads_as_the_sections_of_the_same_sweep(sections, flat):
    assert is_sweep(sections) and is_sweep(flat)
    assert sweep_record(flat) == sweep_record(sections) == sections
    assert list(sweep_record(flat)) == list(sections)  # the sections in the record's order
    assert flat_record(sections) == flat  # the tests' own translation is its inverse
    got = sweep_record(sections)
    got["eval"]["n_bins"] = 99  # a new dict: the record read is not changed
    assert sections["eval"]["n_bins"] != 99


def test_a_flat_record_that_left_settings_out_reads_them_at_the_values_it_ran_at():
    flat = {"betas": [0.5], "seeds": [0], "data_sha256": DIGEST}
    record = sweep_record(flat)
    assert record["eval"] == {"n_bins": 10, "average": "score", "n_bootstrap": 200,
                              "report_seed": 0}  # fmt: skip
    assert record["data"] == {"sha256": DIGEST} and record["model"] == {}
    assert "store" not in record  # a sweep stored before the layout was recorded


def test_a_run_on_images_is_no_sweep_in_either_form():
    nested = config_lib.to_dict(default_config())
    stored_flat = json.loads((ROOT / "docs/results/reproduce_digits/manifest.json").read_text())
    for config in (nested, stored_flat["config"]):
        assert not is_sweep(config)
        with pytest.raises(ValueError, match="records no `iml sweep` run"):
            sweep_record(config)


def _stored_sweeps() -> list[Path]:
    paths = sorted((ROOT / "docs" / "results").glob("**/manifest.json"))
    return [p for p in paths if is_sweep(json.loads(p.read_text())["config"])]


def test_every_stored_sweep_is_read_into_the_sections():
    stored = _stored_sweeps()
    assert len(stored) == 28
    current = []
    for path in stored:
        config = json.loads(path.read_text())["config"]
        if "data_sha256" not in config:  # made by the current code: already in sections
            current.append(path.parent.name)
            assert sweep_record(config) == config
            continue
        # stored flat by earlier code: records, kept as they were
        record = sweep_record(config)
        assert set(record) <= set(SECTIONS) and set(SECTIONS) - set(record) <= {"store"}
        assert record["data"]["sha256"] == config["data_sha256"]
        assert record["data"]["name"] == config["data"]["name"]
        assert record["train"]["seeds"] == config["seeds"]
        assert record["model"]["name"] == config["train"]["model"]
        assert sweep_record(record) == record
        assert flat_record(record) == config, path
    assert sorted(current) == ["adult_adam_2_epochs", "digits_softmax"]
