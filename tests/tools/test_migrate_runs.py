"""The migration of stored runs to the current manifest schema (``tools/migrate_runs.py``): every
layout an earlier version wrote comes out in the one layout the library reads, the library then
reports it as it reported it before, and every run in ``docs/results`` is at the current schema."""

import copy
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from _sweep_tables import simulated_table

from iml.config import to_dict
from iml.pipeline import SCHEMA, RunStore
from iml.pipeline.defaults import default_config
from iml.pipeline.report import report_run
from iml.pipeline.sweep import SECTIONS, run_sweep
from iml.training import TABULAR_DEFAULTS, TrainConfig
from tools import migrate_runs as M

ROOT = Path(__file__).resolve().parents[2]

#: The flat config that ``iml reproduce``'s default run recorded at schema 1.
FLAT_DEFAULT = {
    "batch_size": 16, "betas": [0.5, 0.9, 0.99], "checkpoint": True, "conv_impl": "",
    "csv_path": "", "csv_target": "", "data_dir": "", "dataset": "digits", "epochs": 3,
    "flip": False, "fold_seed": 0, "image_size": 4, "learning_rate": 0.001, "manual_dir": "",
    "max_examples": 0, "members_per_batch": 0, "model": "densenet_small", "n_bins": 10,
    "n_bootstrap": 200, "n_folds": 10, "n_test_folds": 1, "n_val_folds": 2,
    "normalize": "imagenet", "patience": 5, "plateau_patience": 1, "report_seed": 0,
    "rotations": [], "seeds": [0], "weights": "",
}  # fmt: skip


def _current_default():
    """The default config, as a run on images recorded it (it reads no ridge choice: the
    schema's default)."""
    config = to_dict(default_config())
    del config["distributed"]  # how many processes ran it: never recorded
    return config


def _flat_sweep(record):
    """A sweep's record in sections as schema 1 stored it flat (the test's own translation)."""
    data, model, loss = dict(record["data"]), record["model"], record["loss"]
    train, report, plan = dict(record["train"]), record["eval"], record["plan"]
    train.pop("min_lr")  # not recorded then
    train.pop("l2_choice")  # nor this
    extra = {k: v for k, v in record.items() if k not in SECTIONS}
    flat = {"betas": loss["beta"]} if loss.get("name") == "log" else {"loss": loss}
    flat["seeds"] = plan["seeds"]
    chunk = plan["losses_per_batch"]
    flat["train"] = {"model": model["name"], "hidden": model["hidden"], **train}
    flat |= {"n_folds": data.pop("n_folds"), "fold_seed": data.pop("fold_seed"),
             "betas_per_chunk": chunk, "n_bins": report["n_bins"]}  # fmt: skip
    for key, default in (("average", "score"), ("n_bootstrap", 200), ("report_seed", 0)):
        if report[key] != default:  # the flat form left a setting out at its default
            flat[key] = report[key]
    flat["data_sha256"] = data.pop("sha256")
    flat["store"] = record["store"]
    return {**flat, **({"data": data} if data else {}), **extra}


def test_a_flat_run_on_images_migrates_to_the_current_config():
    migrated = M.migrate_manifest({"config": FLAT_DEFAULT, "command": ["iml", "reproduce"]})
    assert migrated["schema"] == SCHEMA and migrated["kind"] == "images"
    assert migrated["config"] == _current_default()
    assert migrated["command"] == ["iml", "reproduce"]  # the other facts stay
    assert M.migrate_manifest(migrated) == migrated  # at the current schema: unchanged
    with pytest.raises(ValueError, match=r"config\.csv_path='x\.csv': a retired key"):
        M.migrate_manifest({"config": {**FLAT_DEFAULT, "csv_path": "x.csv"}})
    with pytest.raises(ValueError, match=r"config\.epochz: not a key of a run on images"):
        M.migrate_manifest({"config": {**FLAT_DEFAULT, "epochz": 3}})


def test_a_run_on_images_in_sections_gets_the_keys_added_since():
    sections = copy.deepcopy(M.IMAGES_DEFAULTS)  # schema 2's keys
    del sections["model"]["conv_impl"], sections["train"]["min_learning_rate"]
    sections["train"]["epochs"] = 6
    sections["loss"] |= {"name": "focal", "gamma": 1.5}
    migrated = M.migrate_manifest({"config": sections})["config"]
    want = _current_default()
    want["train"]["max_epochs"] = 6
    want["loss"] |= {"name": "focal", "params": {"gamma": 1.5}}
    assert migrated == want


def test_schema_3_moves_the_member_layout_from_train_to_plan_and_its_command_with_it():
    config = _current_default()
    plan = config.pop("plan")
    schema_3 = {**config, "train": {**config["train"], **plan, "members_per_batch": 10}}
    command = ["iml", "reproduce", "--config.train.members_per_batch=10", "--seeds", "4",
               "--config.train.seedsx=1", "--config.train.max_epochs=6"]  # fmt: skip
    migrated = M.migrate_manifest({"schema": 3, "kind": "images", "config": schema_3,
                                   "command": command})  # fmt: skip
    want = _current_default()
    want["plan"]["members_per_batch"] = 10
    assert migrated["schema"] == SCHEMA and migrated["config"] == want
    assert migrated["command"] == [
        "iml", "reproduce", "--config.plan.members_per_batch=10", "--seeds", "4",
        "--config.train.seedsx=1", "--config.train.max_epochs=6",
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"config\.plan='a note': schema 4 names a section"):
        M.migrate_manifest(
            {"schema": 3, "kind": "images", "config": {**schema_3, "plan": "a note"}}
        )
    with pytest.raises(ValueError, match=r"config\.train: a section of schema 3"):
        M.migrate_manifest({"schema": 3, "kind": "table", "config": {"data": {}}})
    train = migrated["config"]["train"]  # TrainConfig's fields only
    assert TrainConfig(**train | {"l2_grid": tuple(train["l2_grid"])}).max_epochs == 3


def test_schema_4_records_that_a_table_s_ridge_was_the_lowest_validation_loss_s():
    config = _current_default()
    del config["train"]["l2_choice"]
    migrated = M.migrate_manifest({"schema": 4, "kind": "table", "config": config})
    assert migrated["schema"] == SCHEMA == 6
    want = _current_default()
    want["train"]["l2_choice"] = "lowest_loss"
    assert migrated["config"] == want
    assert list(migrated["config"]["train"]) == list(to_dict(default_config())["train"])
    on_images = M.migrate_manifest({"schema": 4, "kind": "images", "config": config})
    assert on_images["config"] == _current_default()  # not read there: the default
    fixed = copy.deepcopy(config)
    fixed["train"]["l2"] = 1e-4
    del fixed["train"]["l2_grid"]  # as a sweep at a fixed ridge records it
    migrated = M.migrate_manifest({"schema": 4, "kind": "table", "config": fixed})
    assert migrated["config"] == fixed  # nothing was chosen
    with pytest.raises(ValueError, match=r"config\.train: a section of schema 4"):
        M.migrate_manifest({"schema": 4, "kind": "table", "config": {"data": {}}})


def test_schema_5_records_a_table_s_loss_as_its_grid_writes_it_with_the_same_keys():
    from iml import beta_grid
    from iml.grids import loss_grid
    from iml.spec import loss_spec

    betas = beta_grid(5).tolist()
    focal = loss_spec("focal", gamma=2.0, alpha=np.asarray(betas, np.float32))
    cases = {  # schema 5's record -> the grid it was read as then (keys and float32 parameters)
        "log": ({"name": "log", "betas": betas}, loss_grid(np.asarray(betas))),
        "focal": (focal.to_config(), loss_grid(focal)),
    }
    for name, (loss, then) in cases.items():
        config = {**_current_default(), "loss": loss}
        migrated = M.migrate_manifest({"schema": 5, "kind": "table", "config": config})
        assert migrated["schema"] == SCHEMA == 6
        now = loss_grid(migrated["config"]["loss"])
        assert now.keys == then.keys, name
        np.testing.assert_array_equal(now.weights, then.weights)
        for a, b in zip(jax_leaves(now.spec), jax_leaves(then.spec), strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        assert migrated["config"]["loss"] == then.to_config()  # as a sweep records it now
    log = M.migrate_manifest({"schema": 5, "kind": "table", "config": {"loss": cases["log"][0]}})
    assert log["config"]["loss"] == {"name": "log", "beta": betas}
    # what is not a grid keyed by its weights stays as written: a multiclass loss, a callable's
    # name, and any run on images
    for loss in ({"name": "matrix", "B": [[[1.0, 2.0], [1.0, 1.0]]]}, "callable loss wl"):
        kept = M.migrate_manifest({"schema": 5, "kind": "table", "config": {"loss": loss}})
        assert kept["config"]["loss"] == loss
    # a plugin's loss, whose keys depend on its class weight, needs its plugin loaded first
    unknown = {"name": "not_loaded", "alpha": [0.30000001192092896]}
    with pytest.raises(ValueError, match=r"'not_loaded': a loss not registered .* --import"):
        M.migrate_manifest({"schema": 5, "kind": "table", "config": {"loss": unknown}})
    images = _current_default()
    assert M.migrate_manifest({"schema": 5, "kind": "images", "config": images})["config"] == images


def jax_leaves(tree):
    import jax

    return [np.asarray(leaf) for leaf in jax.tree.leaves(tree)]


@pytest.mark.slow
def test_a_sweep_stored_flat_or_without_its_floor_migrates_to_sections(tmp_path):
    x, y = simulated_table()
    run = tmp_path / "run"
    earlier = dataclasses.replace(TABULAR_DEFAULTS, l2_choice="lowest_loss")  # as runs chose then
    run_sweep(x, y, None, [0.3, 0.9], store=RunStore(run), progress=False, n_bootstrap=20,
              train=earlier)  # fmt: skip
    manifest = json.loads((run / "manifest.json").read_text())
    want = report_run(run, tmp_path / "before", formats=())
    old = {k: v for k, v in manifest.items() if k not in ("schema", "kind")}
    flat = {**old, "config": _flat_sweep(manifest["config"])}
    assert "data_sha256" in flat["config"] and flat["config"]["n_bootstrap"] == 20
    assert M.migrate_manifest(flat) == manifest
    in_sections = {k: v for k, v in manifest["config"].items() if k != "plan"}
    no_floor = {**old, "config": {**in_sections, "train": {"seeds": [0]}}}
    migrated = M.migrate_manifest(no_floor)["config"]
    assert migrated["train"] == {"min_lr": 0.0}  # no "auto" ridge recorded: no choice added
    assert migrated["plan"] == {"seeds": [0]}
    # a whole folder: its manifest and the report files an earlier layout named otherwise
    (run / "manifest.json").write_text(json.dumps(flat))
    (run / "table.json").rename(run / "sweep_table.json")
    with pytest.raises(ValueError, match="manifest schema 1"):
        report_run(run, tmp_path / "refused", formats=())
    assert M.main([str(tmp_path), "--check"]) == 1
    assert json.loads((run / "manifest.json").read_text()) == flat  # --check writes nothing
    assert M.main([str(tmp_path)]) == 0
    assert json.loads((run / "manifest.json").read_text()) == manifest
    assert (run / "table.json").is_file() and not (run / "sweep_table.json").exists()
    assert M.main([str(tmp_path), "--check"]) == 0
    again = report_run(run, tmp_path / "after", formats=())
    assert again == want
    with np.load(tmp_path / "before" / "ensemble_scores.npz") as before:
        with np.load(tmp_path / "after" / "ensemble_scores.npz") as after:
            np.testing.assert_array_equal(after["scores"], before["scores"])


def test_every_stored_run_in_the_results_is_at_the_current_schema():
    paths = M.manifests([ROOT / "docs" / "results"])
    assert len(paths) >= 30
    stale = [change for path in paths for change in M.migrate_run(path, write=False)]
    assert not stale, "run python -m tools.migrate_runs docs/results:\n" + "\n".join(stale)
    for path in paths:
        if path.name == "manifest.json":
            assert RunStore(path.parent).kind() in ("images", "table")
    records = M.manifests([ROOT / "docs" / "results"], ("revealed.json",))
    assert len(records) >= 19
    assert {json.loads(path.read_text())["kind"] for path in records} == {"images", "table"}


def test_a_revealed_record_takes_its_run_s_kind_and_keeps_the_rest_byte_for_byte(tmp_path):
    """A revealed.json that names its kind by the command that wrote it takes the manifest's
    name for it; every other byte of the file stays; --check names it and rewrites nothing."""
    folder = tmp_path / "run"
    folder.mkdir()
    text = '{\n  "run": "r",\n  "kind": "sweep",\n  "information": {"interval_kind": "basic"}\n}'
    (folder / "revealed.json").write_text(text)
    (tmp_path / "other.json").write_text('{"kind": "sweep"}')  # not a record of reveal's
    assert M.main([str(tmp_path), "--check"]) == 1
    assert (folder / "revealed.json").read_text() == text
    assert M.main([str(tmp_path)]) == 0
    assert (folder / "revealed.json").read_text() == text.replace('"sweep"', '"table"')
    assert (tmp_path / "other.json").read_text() == '{"kind": "sweep"}'
    assert M.main([str(tmp_path), "--check"]) == 0
    spaced = folder / "spaced" / "revealed.json"  # a kind not as the library writes it
    spaced.parent.mkdir()
    spaced.write_text('{"kind":"reproduce"}')
    with pytest.raises(ValueError, match="rewrite it by hand"):
        M.migrate_revealed(spaced, write=False)


def test_a_plugin_loss_migrates_once_its_plugin_is_loaded(tmp_path, monkeypatch):
    from iml import losses as L
    from iml import plugins

    monkeypatch.setattr(plugins, "_IMPORTED", {})  # this process's record of loaded plugins

    plugin = tmp_path / "migrate_probe_plugin.py"
    plugin.write_text(
        "import dataclasses\nfrom iml import losses\n"
        "losses.register(dataclasses.replace(losses.lookup('log'), name='migrate_probe'))\n"
    )
    run = tmp_path / "run"
    run.mkdir()
    loss = {"name": "migrate_probe", "beta": [0.009999999776482582, 0.5]}
    manifest = {"schema": 5, "kind": "table", "config": {"loss": loss}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    try:
        with pytest.raises(ValueError, match="'migrate_probe': a loss not registered"):
            M.main([str(run)])
        assert json.loads((run / "manifest.json").read_text()) == manifest  # nothing written
        assert M.main([str(run), "--import", str(plugin)]) == 0
        migrated = json.loads((run / "manifest.json").read_text())
        assert migrated["schema"] == SCHEMA
        assert migrated["config"]["loss"] == {"name": "migrate_probe", "beta": [0.01, 0.5]}
    finally:
        if "migrate_probe" in L.registered():
            L.unregister("migrate_probe")
