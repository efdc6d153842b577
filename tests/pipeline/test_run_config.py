"""The checks of a run's config (``iml.pipeline.run_config``): each bad key named, with what it
should be."""

import pytest
from _pipeline_runs import MULTICLASS, run_config

from iml.config import to_dict
from iml.pipeline.defaults import default_config
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
    config = run_config(**{"model.name": "logistic", "model.weights": "densenet121.pth"})
    with pytest.raises(ValueError, match="weights fit the DenseNets, not 'logistic'"):
        check_config(config)


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
