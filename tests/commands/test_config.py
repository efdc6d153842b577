"""The config of a command (``iml.commands.config``): named options, ``--config.KEY=VALUE`` and
config files set the same keys."""

from __future__ import annotations

import pytest

from iml.commands import config as command_config
from iml.commands import parser as command_parser
from iml.config import (
    flatten,
    load_config,
    split_overrides,
    to_dict,
)
from iml.pipeline.defaults import READ_BY, default_config, sweep_config


def _config(*argv):
    return command_config.load_config(
        command_parser.parse_args(["sweep", *map(str, argv), "--out", "unused"])
    )


def test_every_named_option_sets_a_key_and_an_override_equals_its_option():
    # one table of a few named options for both commands; every other key is --config.KEY
    rows = command_config.shortcuts("rows")
    assert set(rows.values()) <= set(flatten(sweep_config()))
    assert rows == {o: k for o, k in command_config.SHORTCUTS.items() if READ_BY.get(k) != "images"}
    assert (
        len(command_config.SHORTCUTS) <= 8
        and "csv" in rows
        and "csv" not in command_config.shortcuts("images")
    )
    assert command_config.shortcuts("images")["seeds"] == rows["seeds"] == "plan.seeds"
    by_key = _config("--config.data.name=digits", "--config.train.learning_rate=0.05")
    by_flag = _config("--dataset", "digits", "--config.train.learning_rate=0.05")
    assert by_key.train.learning_rate == 0.05 and by_key.is_locked
    assert to_dict(by_key) == to_dict(by_flag)
    betas = _config(
        "--csv", "t.csv", "--betas", "0.5,0.9", "--config.train.max_epochs=3", "--seeds", "2"
    )
    assert to_dict(betas) == to_dict(
        _config("--config.data.csv=t.csv", "--config.loss.betas=0.5,0.9",
                "--config.train.max_epochs", "3", "--config.plan.seeds=0,1")
    )  # fmt: skip
    assert betas.loss.betas == (0.5, 0.9) and betas.data.csv == "t.csv"
    # as `iml reproduce` takes them: space-separated, or both at once
    for spaced in (["0.5", "0.9"], ["0.5,", "0.9"]):
        assert _config("--csv", "t.csv", "--betas", *spaced).loss.betas == (0.5, 0.9)
    with pytest.raises(ValueError, match="--betas must be numbers, space- or comma-separated, got"):
        _config("--betas", "a,b")


def _load(*overrides, path=None):
    return load_config(path, list(overrides), default=default_config)


def test_file_then_overrides_then_named_options(tmp_path):
    path = tmp_path / "small.py"
    path.write_text(
        "from iml.pipeline.defaults import default_config\n\n\n"
        "def get_config():\n"
        "    c = default_config()\n"
        "    c.train.max_epochs = 7\n"
        "    c.train.batch_size = 4\n"
        "    c.data.image_size = 8\n"
        "    return c\n"
    )
    config = _load(("train.max_epochs", "2"), ("train.max_epochs", "5"), path=path)
    assert (config.train.max_epochs, config.train.batch_size, config.data.image_size) == (5, 4, 8)
    argv, overrides = split_overrides(
        [
            "reproduce",
            "--config",
            str(path),
            "--seeds",
            "3",
            "--config.plan.seeds=(5,)",
            "--config.train.max_epochs=2",
        ]
    )
    args = command_parser.build_parser().parse_args(argv)
    args.overrides = overrides
    config = command_config.load_config(args)
    assert config.plan.seeds == (0, 1, 2)  # the named option comes last
    assert config.train.max_epochs == 2 and config.train.batch_size == 4 and config.is_locked
