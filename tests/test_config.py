"""Tests of the experiment configs: nested, locked, overridden by ``--config.SECTION.KEY=VALUE``,
and read back from runs stored before the config had sections (``docs/results``)."""

import json
from pathlib import Path

import ml_collections
import pytest

from iml import cli
from iml.config import (
    first_difference,
    flatten,
    from_dict,
    load_config,
    load_config_file,
    parse_value,
    split_overrides,
    to_dict,
)
from iml.pipeline.runner import (
    FLAT_KEYS,
    check_resumable,
    default_config,
    stored_config,
)

ROOT = Path(__file__).resolve().parents[1]
STORED_RUNS = [ROOT / "docs" / "results" / name for name in ("reproduce_digits", "pneumoniamnist")]


def _load(*overrides, path=None):
    return load_config(path, list(overrides), default=default_config)


# ------------------------------------------------------------------------------------------------
# Overrides
# ------------------------------------------------------------------------------------------------


def test_overrides_set_nested_keys_with_the_keys_types():
    config = _load(
        ("train.epochs", "2"),
        ("train.learning_rate", "1"),  # an int for a float key
        ("loss.betas", "0.5,0.8"),
        ("train.seeds", "3"),  # one value for a tuple key
        ("train.flip", "true"),
        ("data.manual_dir", "123"),  # text keys take the text
        ("model.weights", "'w.pth'"),
    )
    assert config.train.epochs == 2 and isinstance(config.train.epochs, int)
    assert config.train.learning_rate == 1.0 and isinstance(config.train.learning_rate, float)
    assert config.loss.betas == (0.5, 0.8) and config.train.seeds == (3,)
    assert config.train.flip is True
    assert config.data.manual_dir == "123" and config.model.weights == "w.pth"


def test_parse_value_reads_literals_else_text():
    assert parse_value("1e-4", 1.0) == 1e-4
    assert parse_value("[1, 2]", ()) == (1, 2)
    assert parse_value("/data/nih", "") == "/data/nih"
    assert parse_value("False", True) is False
    assert parse_value("", "x") == ""


def test_a_misspelled_key_is_named_with_the_nearest_existing_key():
    with pytest.raises(ValueError) as err:
        _load(("train.learnig_rate", "1e-4"))
    message = str(err.value)
    assert message == (
        "--config.train.learnig_rate: no such key; did you mean config.train.learning_rate?"
    )
    with pytest.raises(ValueError, match=r"--config\.trian\.epochs: .* config\.train\.epochs\?"):
        _load(("trian.epochs", "1"))
    with pytest.raises(ValueError, match=r"--config\.zzz: no such key; config has data, eval, "):
        _load(("zzz", "1"))


def test_a_value_of_another_type_or_a_section_is_refused_naming_the_key():
    with pytest.raises(ValueError, match=r"--config\.train\.epochs: expected an integer, got 2\.5"):
        _load(("train.epochs", "2.5"))
    with pytest.raises(ValueError, match=r"--config\.train\.flip: expected True or False"):
        _load(("train.flip", "1"))
    with pytest.raises(ValueError, match=r"--config\.train: config\.train is a section"):
        _load(("train", "3"))
    with pytest.raises(ValueError, match=r"--config\.train\.epochs: no value"):
        _load(("train.epochs", None))


def test_the_config_is_locked_against_new_fields():
    config = _load(("train.epochs", "1"))
    assert config.is_locked and config.train.is_locked
    with pytest.raises(AttributeError, match="epochz"):
        config.train.epochz = 2
    with pytest.raises(AttributeError, match="optimizer"):
        config.optimizer = ml_collections.ConfigDict()
    config.train.epochs = 4  # existing keys stay settable
    assert default_config().is_locked  # config files start from a locked config too


def test_split_overrides_takes_both_forms_in_order():
    argv = ["reproduce", "--config", "c.py", "--config.train.epochs=2", "--epochs", "3"]
    argv += ["--config.loss.betas", "0.5,0.9", "--out", "o", "--config.eval.n_bins"]
    rest, overrides = split_overrides(argv)
    assert rest == ["reproduce", "--config", "c.py", "--epochs", "3", "--out", "o"]
    assert overrides == [("train.epochs", "2"), ("loss.betas", "0.5,0.9"), ("eval.n_bins", None)]


def test_file_then_overrides_then_named_options(tmp_path):
    path = tmp_path / "small.py"
    path.write_text(
        "from iml.pipeline.runner import default_config\n\n\n"
        "def get_config():\n"
        "    c = default_config()\n"
        "    c.train.epochs = 7\n"
        "    c.train.batch_size = 4\n"
        "    c.data.image_size = 8\n"
        "    return c\n"
    )
    config = _load(("train.epochs", "2"), ("train.epochs", "5"), path=path)
    assert (config.train.epochs, config.train.batch_size, config.data.image_size) == (5, 4, 8)
    argv, overrides = split_overrides(
        ["reproduce", "--config", str(path), "--epochs", "9", "--config.train.epochs=2"]
    )
    args = cli.build_parser().parse_args(argv)
    args.overrides = overrides
    config = cli.load_config(args)
    assert config.train.epochs == 9  # the named option comes last
    assert config.train.batch_size == 4 and config.is_locked


def test_a_config_file_setting_a_misspelled_key_is_named_with_its_line(tmp_path):
    path = tmp_path / "typo.py"
    path.write_text(
        "from iml.pipeline.runner import default_config\n\n\n"
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
        **{"betas": [0.5, 0.9], "gamma": 2.0, "name": "log", "weights": ""},
        **{"n_betas": 64, "beta_min": 0.01, "beta_max": 0.99},
    }
    again = from_dict(stored)
    assert again.is_locked and again.loss.betas == (0.5, 0.9)
    assert to_dict(again) == stored


def test_first_difference_names_the_dotted_key():
    a = {"train": {"epochs": 3, "seeds": [0]}, "loss": {"betas": [0.5]}}
    b = {"train": {"epochs": 4, "seeds": [0]}, "loss": {"betas": [0.5]}}
    assert first_difference(a, a) is None
    assert first_difference(a, b) == "train.epochs"
    assert first_difference(a, {**a, "eval": {}}) == "eval"


# ------------------------------------------------------------------------------------------------
# Stored runs: the flat config of runs stored before the sections
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("run", STORED_RUNS, ids=lambda p: p.name)
def test_stored_flat_configs_convert_to_the_nested_form(run):
    flat = json.loads((run / "manifest.json").read_text())["config"]
    assert not any(isinstance(v, dict) for v in flat.values())  # stored flat
    config = stored_config(flat)
    assert config.is_locked
    values = flatten(to_dict(config))
    for key, value in flat.items():
        if key in FLAT_KEYS:
            assert values[FLAT_KEYS[key]] == value, key
        else:
            assert (key, value) in {("csv_path", ""), ("csv_target", "")}  # retired keys
    assert config.loss.name == "log"  # the only loss these runs trained with
    assert check_resumable(config, run) == flat  # resumable as stored


def test_the_stored_default_run_holds_the_default_config():
    flat = json.loads((STORED_RUNS[0] / "manifest.json").read_text())["config"]
    assert to_dict(stored_config(flat)) == to_dict(default_config())


def test_the_stored_pneumoniamnist_run_holds_its_config_file():
    flat = json.loads((STORED_RUNS[1] / "manifest.json").read_text())["config"]
    config = load_config_file(ROOT / "experiments" / "configs" / "pneumoniamnist.py")
    config.data.manual_dir = flat["manual_dir"]  # given on its command line
    assert first_difference(to_dict(stored_config(flat)), to_dict(config)) is None


def test_a_stored_config_with_an_unknown_key_is_named():
    with pytest.raises(ValueError, match=r"config\.epochz: no such key"):
        stored_config({"betas": [0.5], "epochz": 3})
    partial = stored_config({"betas": [0.5], "n_bins": 5})  # what tests and old reports stored
    assert partial.loss.betas == (0.5,) and partial.eval.n_bins == 5


# ------------------------------------------------------------------------------------------------
# The command line
# ------------------------------------------------------------------------------------------------


def test_cli_misspelled_key_exits_2_naming_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["reproduce", "--config.train.learnig_rate=1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "iml reproduce: error: --config.train.learnig_rate: no such key; "
        "did you mean config.train.learning_rate?\n"
    )
    assert not out.exists()


def test_help_prints_every_config_key_with_its_default_and_meaning(capsys):
    """`iml reproduce --help` and `iml sweep --help` list the config's keys, their defaults and
    what they mean, read from the config's own source (the comment of each assignment)."""
    from iml import cli
    from iml.config import flatten, key_meanings
    from iml.pipeline.defaults import default_config, experiment_config, sweep_config

    for command, build in (("reproduce", default_config), ("sweep", sweep_config)):
        meanings = key_meanings(experiment_config, build)
        keys = flatten(build())
        assert set(keys) <= set(meanings) and all(meanings[k] for k in keys), command
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())  # the epilog, unwrapped
        for key, value in keys.items():
            assert f"{key} = {value!r}" in text, (command, key)
            assert " ".join(meanings[key].split()[:4]) in text, (command, key)
    assert key_meanings(experiment_config)["data.n_folds"].startswith("cross-validation folds")
    # the sweep's own comment on a key replaces the schema's
    assert key_meanings(experiment_config, sweep_config)["train.batch_size"].endswith("seed")
