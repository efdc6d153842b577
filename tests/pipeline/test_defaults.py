"""The experiment's one config schema (``iml.pipeline.defaults``): both commands' defaults are
the schema, a key that one kind of run does not read is refused there, and the keys both read
reach both runs."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from iml import beta_grid
from iml.config import apply_overrides, flatten, to_dict
from iml.grids import config_betas, config_grid
from iml.pipeline.defaults import (
    READ_BY,
    SCHEMA,
    check_eval_settings,
    check_loss_params,
    check_read_keys,
    default_config,
    experiment_config,
    key_help,
    sweep_config,
    train_fields,
)
from iml.pipeline.run_config import check_config
from iml.pipeline.sweep import prepare_sweep
from iml.training import TrainConfig

ROOT = Path(__file__).resolve().parents[2]


def test_both_commands_defaults_are_the_one_schema():
    schema = flatten(experiment_config())
    assert flatten(default_config()) == schema
    sweep = flatten(sweep_config())
    assert sweep.keys() == schema.keys()
    # the sweep's defaults differ from the schema's only in keys that a run on rows reads
    changed = {k for k in schema if sweep[k] != schema[k]}
    assert changed and not {k for k in changed if READ_BY.get(k) == "images"}


@pytest.mark.parametrize("make", [default_config, sweep_config])
def test_the_train_section_is_trainconfig_s_fields_and_plan_the_member_layout(make):
    c = make()
    assert TrainConfig(**c.train).max_epochs == c.train.max_epochs  # every key a field
    assert set(c.plan) == {"seeds", "losses_per_batch", "members_per_batch",
                           "memory_budget_bytes", "checkpoint"}  # fmt: skip
    assert not set(c.plan) & {f.name for f in dataclasses.fields(TrainConfig)}
    # each kind of run takes the fields it reads: the ridge's keys are a table's only
    images, rows = train_fields(c, "images"), train_fields(c, "rows")
    assert "l2" not in images and "flip" not in rows
    assert set(images) | set(rows) == set(c.train)
    assert TrainConfig(**images).l2 == 0.0 and TrainConfig(**rows).l2 == "auto"
    c.train.learning_rate = 0.05
    assert TrainConfig(**train_fields(c, "images")).learning_rate == 0.05


def test_every_key_has_its_meaning_in_the_schema_and_read_by_follows_from_it():
    keys = flatten(experiment_config())
    assert set(keys) == {f"{s}.{k}" for s, section in SCHEMA.items() for k in section}
    assert all(len(key_help(key)) > 10 for key in keys)
    assert READ_BY["train.l2"] == "rows" and READ_BY["train.flip"] == "images"
    assert "data.n_folds" not in READ_BY and set(READ_BY.values()) == {"images", "rows"}


def test_the_loss_parameters_are_an_open_section_checked_by_the_loss():
    c = experiment_config()
    apply_overrides(c, [("loss.params.gamma", "1.5")])
    assert to_dict(c)["loss"]["params"] == {"gamma": 1.5}
    with pytest.raises(ValueError, match=r"config\.loss\.foo: no such key"):
        apply_overrides(c, [("loss.foo", "1")])  # the other sections stay locked
    c.loss.name = "focal"
    assert check_loss_params(c.loss) == {"gamma": 1.5}
    c.loss.params.gamma = -1.0
    with pytest.raises(ValueError, match=r"^config\.loss\.params: .*gamma"):
        check_loss_params(c.loss)
    c.loss.name = "log"
    c.loss.params.gamma = 1.5
    with pytest.raises(ValueError, match=r"config\.loss\.params\.gamma: the loss 'log' takes no"):
        check_loss_params(c.loss)
    c.loss.name = "focal"
    del c.loss.params["gamma"]
    c.loss.params.alpha = 0.3
    with pytest.raises(ValueError, match=r"params\.alpha: the loss 'focal' takes gamma \(its grid"):
        check_loss_params(c.loss)


@pytest.mark.parametrize(
    ("key", "value", "inputs", "reader"),
    [
        ("train.flip", True, "rows", "images"),
        ("data.rotations", (0,), "rows", "images"),
        ("model.weights", "w.pth", "rows", "images"),
        ("train.l2", 0.1, "images", "rows"),
        ("data.csv", "t.csv", "images", "rows"),
        ("train.solver", "adam", "images", "rows"),
    ],
)
def test_a_key_the_run_does_not_read_is_refused_naming_it(key, value, inputs, reader):
    c = experiment_config()
    section, name = key.split(".")
    c[section][name] = value
    with pytest.raises(ValueError, match=rf"config\.{re.escape(key)} is read by runs on {reader}"):
        check_read_keys(c, inputs)
    flag = "--" + name.replace("_", "-")
    with pytest.raises(ValueError, match=f"^{flag} is read by"):
        check_read_keys(c, inputs, lambda k: flag if k == key else f"config.{k}")
    check_read_keys(c, reader)  # the runs that read it take it


def test_each_command_refuses_the_other_s_keys_before_any_work():
    c = sweep_config()
    c.data.name = "digits"
    c.plan.checkpoint = False
    with pytest.raises(ValueError, match=r"config\.plan\.checkpoint is read by runs on images"):
        check_config(c)
    with pytest.raises(ValueError, match=r"^--config\.train\.standardize is read by runs on rows"):
        c = default_config()
        c.train.standardize = False
        check_read_keys(c, "images", {"train.standardize": "--config.train.standardize"}.get)


def test_a_run_on_images_reads_the_grid_of_betas():
    c = default_config()
    c.loss.betas = ()
    c.loss.n_betas, c.loss.beta_min, c.loss.beta_max = 5, 0.1, 0.9
    check_config(c)
    np.testing.assert_array_equal(config_betas(c.loss), beta_grid(5, 0.1, 0.9))
    assert config_betas(default_config().loss).tolist() == [0.5, 0.9, 0.99]
    # the one grid of either kind of run: the log loss keyed by its betas, a family's by its own
    assert config_grid(default_config().loss).keys == ["0.5", "0.9", "0.99"]
    focal = default_config().loss
    focal.name, focal.params.gamma = "focal", 1.0
    grid = config_grid(focal)
    assert grid.spec.name == "focal" and grid.keys == ["0.5", "0.9", "0.99"]
    np.testing.assert_allclose(grid.spec.params["gamma"], 1.0)
    c.loss.n_betas = 0
    with pytest.raises(ValueError, match=r"config\.loss\.n_betas"):
        check_config(c)


def test_a_sweep_reads_the_report_s_bootstrap_and_the_image_size(tmp_path):
    c = sweep_config()
    c.data.name, c.data.data_dir = "digits", str(tmp_path)
    plan, _ = prepare_sweep(check_config(c))
    assert (plan.n_bootstrap, plan.report_seed) == (200, 0)
    recorded = plan.run_config["eval"]
    assert (recorded["n_bootstrap"], recorded["report_seed"]) == (200, 0)
    assert plan.features.shape == (1797, 64)  # the digits' own 8 x 8 pixels
    c.eval.n_bootstrap, c.eval.report_seed, c.data.image_size = 50, 3, 4
    plan, _ = prepare_sweep(check_config(c))
    assert (plan.n_bootstrap, plan.report_seed) == (50, 3)
    recorded = plan.run_config["eval"]
    assert (recorded["n_bootstrap"], recorded["report_seed"]) == (50, 3)
    assert plan.features.shape == (1797, 16)  # shrunk to 4 x 4
    assert plan.run_config["data"]["image_size"] == 4
    c.train.plateau_patience, c.train.min_lr = 3, 1e-5
    plan, _ = prepare_sweep(check_config(c))
    assert (plan.config.plateau_patience, plan.config.min_lr) == (3, 1e-5)


def test_image_size_applies_to_image_datasets_only(tmp_path):
    c = sweep_config()
    (tmp_path / "t.csv").write_text("a,y\n1,0\n2,1\n")
    c.data.csv, c.data.target, c.data.image_size = str(tmp_path / "t.csv"), "y", 4
    with pytest.raises(ValueError, match=r"config\.data\.image_size applies to image datasets"):
        check_config(c)


def _shipped(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config()


@pytest.mark.parametrize(
    "path", sorted((ROOT / "experiments" / "configs").glob("*.py")), ids=lambda p: p.name
)
def test_every_shipped_config_is_the_schema_and_passes_its_command_s_check(path):
    if path.name == "__init__.py":
        return
    config = _shipped(path)
    assert flatten(config).keys() == flatten(experiment_config()).keys()
    if path.stem.startswith("sweep"):
        check_config(config)
    else:
        check_read_keys(config, "images")


def test_the_report_settings_of_either_run_are_checked_by_one_function():
    good = dict(default_config().eval)
    check_eval_settings(good)
    check_eval_settings({**good, "n_bootstrap": 0}, min_bootstrap=0)  # a sweep's: no intervals
    for key, value, message in (
        ("n_bins", 0, r"^config\.eval\.n_bins must be an integer >= 1, got 0$"),
        ("n_bootstrap", 0, r"^config\.eval\.n_bootstrap must be an integer >= 1, got 0$"),
        ("report_seed", -1, r"^config\.eval\.report_seed must be an integer >= 0, got -1$"),
        ("average", "mean", r"^config\.eval\.average must be one of \('score', 'logit'\)"),
        ("figures", ("gif",), r"^config\.eval\.figures: unknown figure format 'gif'"),
    ):
        with pytest.raises(ValueError, match=message):
            check_eval_settings({**good, key: value})
    # named as the command line set it, in both kinds of run
    with pytest.raises(ValueError, match=r"^--n-bins must be an integer >= 1, got 0$"):
        check_eval_settings({**good, "n_bins": 0}, {"n_bins": "--n-bins"}.get, 0)
    table = sweep_config()
    table.data.name = "digits"
    for config in (default_config(), table):
        config.eval.figures = ("png", "png")
        with pytest.raises(ValueError, match=r"config\.eval\.figures names a format twice"):
            check_config(config)
