"""The experiment configs (``iml.config``): nested, locked, overridden by
``--config.SECTION.KEY=VALUE``, plain dicts and their differences."""

import json
import math

import ml_collections
import pytest

from iml.config import (
    first_difference,
    from_dict,
    load_config,
    load_config_file,
    parse_value,
    split_overrides,
    to_dict,
)
from iml.pipeline.defaults import default_config


def _load(*overrides, path=None):
    return load_config(path, list(overrides), default=default_config)


# ------------------------------------------------------------------------------------------------
# Overrides
# ------------------------------------------------------------------------------------------------


def test_overrides_set_nested_keys_with_the_keys_types():
    config = _load(
        ("train.max_epochs", "2"),
        ("train.learning_rate", "1"),  # an int for a float key
        ("loss.betas", "0.5,0.8"),
        ("plan.seeds", "3"),  # one value for a tuple key
        ("train.flip", "true"),
        ("data.manual_dir", "123"),  # text keys take the text
        ("model.weights", "'w.pth'"),
    )
    assert config.train.max_epochs == 2 and isinstance(config.train.max_epochs, int)
    assert config.train.learning_rate == 1.0 and isinstance(config.train.learning_rate, float)
    assert config.loss.betas == (0.5, 0.8) and config.plan.seeds == (3,)
    assert config.train.flip is True
    assert config.data.manual_dir == "123" and config.model.weights == "w.pth"


def test_parse_value_reads_literals_else_text():
    assert parse_value("1e-4", 1.0) == 1e-4
    assert parse_value("[1, 2]", ()) == (1, 2)
    assert parse_value("/data/nih", "") == "/data/nih"
    assert parse_value("False", True) is False
    assert parse_value("", "x") == ""


def test_a_tuple_of_text_takes_its_items_separated_by_commas():
    formats = ("png", "pdf")
    assert parse_value("svg", formats) == ("svg",)
    assert parse_value("png, svg", formats) == ("png", "svg")
    assert parse_value("", formats) == () == parse_value("()", formats)
    assert parse_value("('pdf',)", formats) == ("pdf",)
    assert parse_value("0.5,0.9", (0.5,)) == (0.5, 0.9)  # numbers stay literals


def test_a_misspelled_key_is_named_with_the_nearest_existing_key():
    with pytest.raises(ValueError) as err:
        _load(("train.learnig_rate", "1e-4"))
    message = str(err.value)
    assert message == (
        "--config.train.learnig_rate: no such key; did you mean config.train.learning_rate?"
    )
    with pytest.raises(
        ValueError, match=r"--config\.trian\.max_epochs: .* config\.train\.max_epochs\?"
    ):
        _load(("trian.max_epochs", "1"))
    with pytest.raises(
        ValueError, match=r"--config\.zzz: no such key; config has data, distributed, eval, "
    ):
        _load(("zzz", "1"))


def test_a_value_of_another_type_or_a_section_is_refused_naming_the_key():
    with pytest.raises(
        ValueError, match=r"--config\.train\.max_epochs: expected an integer, got 2\.5"
    ):
        _load(("train.max_epochs", "2.5"))
    with pytest.raises(ValueError, match=r"--config\.train\.flip: expected True or False"):
        _load(("train.flip", "1"))
    with pytest.raises(ValueError, match=r"--config\.train: config\.train is a section"):
        _load(("train", "3"))
    with pytest.raises(ValueError, match=r"--config\.train\.max_epochs: no value"):
        _load(("train.max_epochs", None))


def test_the_config_is_locked_against_new_fields():
    config = _load(("train.max_epochs", "1"))
    assert config.is_locked and config.train.is_locked
    with pytest.raises(AttributeError, match="epochz"):
        config.train.epochz = 2
    with pytest.raises(AttributeError, match="optimizer"):
        config.optimizer = ml_collections.ConfigDict()
    config.train.max_epochs = 4  # existing keys stay settable
    assert default_config().is_locked  # config files start from a locked config too


def test_split_overrides_takes_both_forms_in_order():
    argv = [
        "reproduce",
        "--config",
        "c.py",
        "--config.train.max_epochs=2",
        "--seeds",
        "3",
    ]
    argv += ["--config.loss.betas", "0.5,0.9", "--out", "o", "--config.eval.n_bins"]
    rest, overrides = split_overrides(argv)
    assert rest == ["reproduce", "--config", "c.py", "--seeds", "3", "--out", "o"]
    assert overrides == [
        ("train.max_epochs", "2"),
        ("loss.betas", "0.5,0.9"),
        ("eval.n_bins", None),
    ]


def test_a_config_file_setting_a_misspelled_key_is_named_with_its_line(tmp_path):
    path = tmp_path / "typo.py"
    path.write_text(
        "from iml.pipeline.defaults import default_config\n\n\n"
        "def get_config():\n"
        "    c = default_config()\n"
        "    c.train.learnig_rate = 1e-4\n"
        "    return c\n"
    )
    with pytest.raises(ValueError, match=r"typo\.py, line 6: .*learnig_rate.* locked"):
        load_config_file(path)
    with pytest.raises(FileNotFoundError, match="--config: file not found"):
        load_config_file(tmp_path / "absent.py")


# ------------------------------------------------------------------------------------------------
# Plain dicts, differences
# ------------------------------------------------------------------------------------------------


def test_to_dict_and_from_dict_round_trip_through_json():
    config = _load(("loss.betas", "0.5,0.9"))
    stored = json.loads(json.dumps(to_dict(config)))
    assert stored["loss"] == {
        **{"betas": [0.5, 0.9], "params": {}, "name": "log", "weights": ""},
        **{"n_betas": 64, "beta_min": 0.01, "beta_max": 0.99},
    }
    again = from_dict(stored)
    assert again.is_locked and again.loss.betas == (0.5, 0.9)
    assert to_dict(again) == stored


def test_first_difference_names_the_dotted_key():
    a = {"train": {"max_epochs": 3, "seeds": [0]}, "loss": {"betas": [0.5]}}
    b = {"train": {"max_epochs": 4, "seeds": [0]}, "loss": {"betas": [0.5]}}
    assert first_difference(a, a) is None
    assert first_difference(a, b) == "train.max_epochs"
    assert first_difference(a, {**a, "eval": {}}) == "eval"

    # floats within a relative 1e-12 (a grid computed again elsewhere) are the same setting; a
    # list of another length, a float further off, an infinity or NaN is not
    def betas(*values):
        return {**a, "loss": {"betas": list(values)}}

    assert first_difference(a, betas(math.nextafter(0.5, 1.0))) is None
    assert first_difference(a, betas(0.5 * (1 + 0.9e-12))) is None
    for other in ([0.5 * (1 + 1.1e-12)], [0.5, 0.5], [math.inf], [math.nan]):
        assert first_difference(betas(0.5), betas(*other)) == "loss.betas", other
    assert first_difference(betas(1.0), betas(1)) is None  # 1 == 1.0, as JSON reads them
    assert first_difference(betas(math.inf), betas(1.0)) == "loss.betas"
    assert first_difference(betas(-math.inf), betas(-1e300)) == "loss.betas"
    assert first_difference(betas(0.0), betas(1e-320)) == "loss.betas"
    assert first_difference({"x": [[0.5]]}, {"x": [[math.nextafter(0.5, 0.0)]]}) is None
