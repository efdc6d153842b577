"""A sweep's config checks (``iml.pipeline.sweep_config``): what a config stands for (its data
source, grid and training settings), and each bad key named, as a file or a flag names it, before
any file is read."""

from __future__ import annotations

import numpy as np
import pytest

from iml import beta_grid
from iml.grids import config_grid
from iml.pipeline.defaults import sweep_config
from iml.pipeline.sweep_config import checked_sweep_config


def _config(**keys):
    c = sweep_config()
    for key, value in keys.items():
        section, name = key.split("__")
        c[section][name] = value
    return c


def test_a_config_stands_for_its_source_grid_and_training():
    checked = checked_sweep_config(_config(data__name="digits", data__positive="3"))
    assert checked.source == {"name": "digits", "positive_digit": 3}
    np.testing.assert_array_equal(checked.grid, beta_grid(64, 0.01, 0.99))
    assert checked.train.solver == "exact" and checked.train.l2 == "auto"  # decided here
    focal = _config(data__name="digits", loss__name="focal", loss__betas=(0.25, 0.75))
    focal.train.solver = "adam"
    losses = config_grid(checked_sweep_config(focal).config.loss)
    assert losses.spec.name == "focal" and losses.spec.batch_shape == (2,)
    multi = _config(data__name="digits", data__classes="all", loss__name="matrix")
    multi.loss.weights = "ones;B[8,8]=10"
    assert config_grid(checked_sweep_config(multi).config.loss, 10).keys == ["ones", "B[8,8]=10"]


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
        checked_sweep_config(_config(**keys))


def test_messages_name_the_flag_that_set_a_key():
    names = {"data.csv": "--csv", "data.target": "--target"}
    with pytest.raises(ValueError, match="--csv needs --target COLUMN"):
        checked_sweep_config(_config(data__csv="t.csv"), names)
