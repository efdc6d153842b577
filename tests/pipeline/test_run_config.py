"""The checks of an experiment's config (``iml.pipeline.run_config``), one function for both kinds
of run: each bad key named, with what it should be, as a file or a flag names it, before any file
is read; and what a config stands for (its kind, data source, grid and training settings)."""

import numpy as np
import pytest
from _pipeline_runs import MULTICLASS, run_config

from iml import beta_grid
from iml.config import to_dict
from iml.grids import config_grid
from iml.pipeline.defaults import default_config, sweep_config
from iml.pipeline.run_config import check_config


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("loss.betas", (0.5, 1.5), r"config\.loss\.betas must lie in \(0, 1\)"),
        (
            "loss.name",
            "hinge",
            r"config\.loss\.name must be one of \['focal', 'log', 'squared'\].*"
            r"\['class_weighted_softmax', 'matrix', 'softmax_focal'\].*got 'hinge'",
        ),
        ("loss.params.gamma", 1.0, r"config\.loss\.params\.gamma: the loss 'log' takes no param"),
        ("data.name", "mnist", "config.data.name: unknown dataset 'mnist'"),
        ("model.name", "resnet", "config.model.name: unknown model 'resnet'"),
        ("train.max_epochs", 0, r"config\.train\.max_epochs must be an integer >= 1"),
        ("train.eval_batch_size", 0, r"config\.train\.eval_batch_size must be an integer >= 1"),
        ("data.n_folds", 3, r"config\.data\.n_folds=3 leaves no training fold"),
        ("data.image_size", 2, r"config\.data\.image_size=2 is too small"),
        ("model.conv_impl", "im2col", r"config\.model\.conv_impl must be '' .* or one of"),
        ("plan.seeds", (-1,), r"config\.plan\.seeds must be non-negative"),
        ("plan.seeds", (0, 3, 0), r"config\.plan\.seeds repeats a seed: \[0, 3, 0\]"),
        (
            "train.min_lr",
            -1e-4,
            r"config\.train\.min_lr must be a finite number >= 0",
        ),
        (
            "eval.average",
            "median",
            r"config\.eval\.average must be one of \('score', 'logit'\), got 'median'",
        ),
    ],
)
def test_check_config_names_the_bad_key(key, value, match):
    with pytest.raises(ValueError, match=match):
        check_config(run_config(**{key: value}))


def test_a_model_that_is_no_densenet_takes_no_torchvision_weights():
    from iml.models import register_model, unregister_model

    # a model that takes rows makes a run on a table, which reads no weights file
    config = run_config(**{"model.name": "logistic", "model.weights": "densenet121.pth"})
    with pytest.raises(ValueError, match=r"config\.model\.weights is read by runs on images"):
        check_config(config)
    register_model("images_only_test", lambda n: None, inputs=("images",))
    try:
        config = run_config(**{"model.name": "images_only_test", "model.weights": "d.pth"})
        with pytest.raises(ValueError, match="weights fit the DenseNets, not 'images_only_test'"):
            check_config(config)
    finally:
        unregister_model("images_only_test")


def test_check_config_refuses_unknown_keys_wrong_types_and_missing_dirs(tmp_path):
    config = to_dict(default_config())  # as nested dicts, which no lock guards
    config["train"]["epochz"] = 3
    with pytest.raises(
        ValueError, match=r"config\.train\.epochz; did you mean config\.train\.max_epochs"
    ):
        check_config(config)
    del config["train"]["epochz"], config["eval"]["n_bins"]
    with pytest.raises(ValueError, match=r"config lacks key\(s\) config\.eval\.n_bins"):
        check_config(config)
    config = to_dict(default_config())
    config["train"]["learning_rate"] = "fast"
    with pytest.raises(ValueError, match=r"config\.train\.learning_rate: expected a number"):
        check_config(config)
    with pytest.raises(FileNotFoundError, match=r"config\.data\.data_dir"):
        check_config(run_config(**{"data.data_dir": str(tmp_path / "nope")}))


def test_check_config_names_a_missing_weights_file(tmp_path):
    config = run_config(**{"model.weights": str(tmp_path / "densenet121.pth")})
    with pytest.raises(FileNotFoundError, match=r"config\.model\.weights"):
        check_config(config)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"loss.weights": ""}, r"needs config\.loss\.weights"),
        ({"loss.betas": (0.9,)}, r"config\.loss\.betas does not apply"),
        ({"data.classes": "binary"}, r"is multiclass: set config\.data\.classes='all'"),
        ({"loss.weights": "ones;B[1,1]=2"}, r"config\.loss\.weights: cannot read 'B\[1,1\]=2'"),
        ({"loss.name": "log"}, r"config\.loss\.weights applies to the multiclass losses"),
        (
            {"loss.name": "log", "loss.weights": ""},
            r"classes='all' needs a multiclass config\.loss\.name",
        ),
        ({"data.classes": "some"}, r"config\.data\.classes must be 'binary' or 'all'"),
        (
            {"data.name": "pneumoniamnist"},
            r"dataset 'pneumoniamnist' has no classes beyond its binary label; the image "
            r"datasets with classes are \['digits'\]",
        ),
    ],
)
def test_check_config_of_a_multiclass_run_names_the_bad_key(values, match):
    with pytest.raises(ValueError, match=match):
        check_config(run_config(**{**MULTICLASS, **values}))


# ----------------------------------------------------------------------------------------------
# A run on a table
# ----------------------------------------------------------------------------------------------


def _config(**keys):
    c = sweep_config()
    for key, value in keys.items():
        section, name = key.split("__")
        c[section][name] = value
    return c


def test_a_config_stands_for_its_source_grid_and_training():
    checked = check_config(_config(data__name="digits", data__positive="3"))
    assert checked.source == {"name": "digits", "positive_digit": 3}
    np.testing.assert_array_equal(checked.grid, beta_grid(64, 0.01, 0.99))
    assert checked.train.solver == "exact" and checked.train.l2 == "auto"  # decided here
    focal = _config(data__name="digits", loss__name="focal", loss__betas=(0.25, 0.75))
    focal.train.solver = "adam"
    losses = config_grid(check_config(focal).config.loss)
    assert losses.spec.name == "focal" and losses.spec.batch_shape == (2,)
    multi = _config(data__name="digits", data__classes="all", loss__name="matrix")
    multi.loss.weights = "ones;B[8,8]=10"
    assert config_grid(check_config(multi).config.loss, 10).keys == ["ones", "B[8,8]=10"]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({}, r"give exactly one of config\.data\.csv or config\.data\.name"),
        ({"data__name": "digits", "data__csv": "t.csv"}, "give exactly one of"),
        ({"data__csv": "t.csv"}, r"config\.data\.csv needs config\.data\.target"),
        ({"data__name": "nope"}, r"config\.data\.name: unknown value 'nope'"),
        ({"data__name": "digits", "loss__name": "matrix"}, r"needs config\.loss\.weights"),
        ({"data__name": "digits", "data__classes": "all"}, r"needs a multiclass config\.loss"),
        ({"data__name": "digits", "data__positive": "12"}, r"is one digit, got '12'"),
        ({"data__name": "letter"}, r"config\.data\.name='letter' needs config\.data\.data_dir"),
        ({"data__name": "digits", "loss__betas": (0.5, 1.5)}, r"config\.loss\.betas"),
        ({"data__name": "digits", "data__n_folds": 3}, r"config\.data\.n_folds must be"),
        ({"data__name": "digits", "model__name": "mlp", "train__solver": "exact"},
         r"config\.train\.solver='exact': the exact solver fits logistic regression .* not MLP"),
        ({"data__name": "digits", "train__solver": "lbfgs"},
         r"config\.train\.solver: unknown value 'lbfgs'; expected one of \['auto', 'exact'"),
        ({"data__name": "digits", "train__l2_scale": "total"},
         r"config\.train\.l2_scale: unknown value 'total'; expected one of \['paper'"),
        ({"data__name": "digits", "train__l2_choice": "lowest"},
         r"config\.train\.l2_choice: unknown value 'lowest'; expected one of \['least_penalty'"),
    ],
)  # fmt: skip
def test_a_bad_key_is_named_before_any_file_is_read(keys, message):
    with pytest.raises(ValueError, match=message):
        check_config(_config(**keys))


def test_messages_name_the_flag_that_set_a_key():
    names = {"data.csv": "--csv", "data.target": "--target"}
    with pytest.raises(ValueError, match="--csv needs --target COLUMN"):
        check_config(_config(data__csv="t.csv"), names)


def test_either_kind_of_run_is_checked_by_one_function_from_its_model():
    images = check_config(default_config())
    assert (images.kind, images.source) == ("images", {})
    assert images.train.learning_rate == default_config().train.learning_rate
    np.testing.assert_array_equal(images.grid, [0.5, 0.9, 0.99])
    table = sweep_config()
    table.data.name = "digits"
    assert check_config(table).kind == "table"
    table.model.name = "densenet_tiny"  # the model makes the kind, whichever defaults start it
    assert check_config(table, {"model.name": "--model"}).kind == "images"
    # a key a run of the other kind reads is named as the command line set it
    with pytest.raises(ValueError, match=r"^--csv is read by runs on rows"):
        check_config(run_config(**{"data.csv": "t.csv"}), {"data.csv": "--csv"})


def test_a_table_run_is_not_prepared_from_a_run_on_images():
    from iml.pipeline.sweep import prepare_sweep

    with pytest.raises(ValueError, match=r"config\.model\.name: 'densenet_small' takes images"):
        prepare_sweep(check_config(default_config()))


def test_the_keys_and_the_data_are_named_before_the_loss_and_the_model():
    config = to_dict(default_config())
    config["model"]["nmae"] = config["model"].pop("name")
    with pytest.raises(ValueError, match=r"config\.model\.nmae; did you mean config\.model\.name"):
        check_config(config)
    # a dataset without classes is named before the loss that classes='all' would need
    config = run_config(**{"data.name": "pneumoniamnist", "data.classes": "all"})
    with pytest.raises(ValueError, match="has no classes beyond its binary label"):
        check_config(config)
    with pytest.raises(ValueError, match=r"^--model: unknown model 'resnet'"):
        check_config(run_config(**{"model.name": "resnet"}), {"model.name": "--model"})
    table = sweep_config()
    table.data.name, table.loss.name = "digitz", "matrix"
    with pytest.raises(ValueError, match=r"config\.data\.name: unknown value 'digitz'"):
        check_config(table)
