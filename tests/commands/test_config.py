"""The config of a command (``iml.commands.config``): named options, ``--config.KEY=VALUE`` and
config files set the same keys."""

from __future__ import annotations

import pytest

from iml import cli
from iml.config import (
    flatten,
    load_config,
    split_overrides,
    to_dict,
)
from iml.pipeline import sweep as S
from iml.pipeline.defaults import READ_BY
from iml.pipeline.runner import default_config


def _config(*argv):
    return cli.load_config(cli.parse_args(["sweep", *map(str, argv), "--out", "unused"]))


def test_every_named_option_sets_a_key_and_an_override_equals_its_option():
    # one table of named options for both commands; a sweep offers those of every key its runs
    # read but the few that need no option (the folds of a sweep are fixed at 2-1; ...)
    rows = cli.shortcuts("rows")
    assert set(rows.values()) <= set(flatten(S.sweep_config()))
    assert rows == {o: k for o, k in cli.SHORTCUTS.items() if READ_BY.get(k) != "images"}
    assert "lr" in rows and "weights" not in rows and cli.shortcuts("images")["lr"] == rows["lr"]
    by_key = _config("--dataset", "digits", "--config.train.learning_rate=0.05")
    by_flag = _config("--dataset", "digits", "--lr", "0.05")
    assert by_key.train.learning_rate == 0.05 and by_key.is_locked
    assert to_dict(by_key) == to_dict(by_flag)
    betas = _config("--csv", "t.csv", "--betas", "0.5,0.9", "--epochs", "3", "--seeds", "2")
    assert to_dict(betas) == to_dict(
        _config("--config.data.csv=t.csv", "--config.loss.betas=0.5,0.9",
                "--config.train.epochs", "3", "--config.train.seeds=0,1")
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
