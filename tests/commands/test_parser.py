"""The command line's parser (``iml.commands.parser``): config files naming their command, seeds by
count or by name, named options setting their nested keys."""

from pathlib import Path

import pytest

from iml import cli
from iml.commands import config as command_config
from iml.commands import parser as command_parser

ROOT = Path(__file__).resolve().parents[2]


def test_config_files_load_and_name_their_command():
    from iml.config import flatten, load_config_file
    from iml.pipeline.run_config import check_config

    default = command_config.load_config(command_parser.build_parser().parse_args(["reproduce"]))
    for name in ("default", "pneumoniamnist", "chestxray14"):
        path = ROOT / "experiments" / "configs" / f"{name}.py"
        config = load_config_file(path)
        assert "iml reproduce --config experiments/configs/" + name in (
            path.read_text().replace("\\\n", "").replace("  ", " ")
        )
        assert list(flatten(config)) == list(flatten(default))
        assert config.is_locked
        check_config(config)


@pytest.mark.parametrize("command", ["reproduce", "sweep"])
def test_seeds_count_or_name_the_seeds_and_the_key_holds_the_seeds(command):
    def seeds(*argv: str) -> tuple:
        args = command_parser.parse_args([command, "--dataset", "digits", *argv, "--out", "unused"])
        return command_config.load_config(args).plan.seeds

    # one number counts the seeds; several are the seeds themselves
    assert seeds("--seeds", "3") == (0, 1, 2) and seeds("--seeds", "1") == (0,)
    assert seeds("--seeds", "0", "5") == (0, 5)
    with pytest.raises(ValueError, match=r"--seeds 0: one value is a number of seeds"):
        seeds("--seeds", "0")
    # config.plan.seeds is the tuple of seeds in both commands; one bare number is ambiguous
    assert isinstance(seeds(), tuple)
    assert seeds("--config.plan.seeds=4,") == (4,) and seeds("--config.plan.seeds=1,2") == (1, 2)
    message = (
        r"seeds themselves; use --seeds 4 for the seeds 0\.\.3, "
        r"or --config\.plan\.seeds='\(4,\)' for the seed 4 alone"
    )
    with pytest.raises(ValueError, match=message):
        seeds("--config.plan.seeds=4")


def test_named_options_set_their_nested_keys():
    from iml.config import flatten

    argv = [
        "reproduce",
        "--config.train.max_epochs=2",
        "--betas",
        "0.5",
        "0.7",
        "--dataset",
        "pneumoniamnist",
    ]
    config = command_config.load_config(command_parser.parse_args(argv))
    assert config.train.max_epochs == 2 and config.loss.betas == (0.5, 0.7)
    assert config.data.name == "pneumoniamnist"
    assert set(command_config.SHORTCUTS.values()) <= set(flatten(config))
    # comma-separated, as `iml sweep` also takes them
    argv = ["reproduce", "--betas", "0.5,0.7"]
    assert command_config.load_config(
        command_parser.build_parser().parse_args(argv)
    ).loss.betas == (0.5, 0.7)


def test_help_prints_every_key_the_command_reads_with_its_default_and_meaning(capsys):
    """`iml reproduce --help` and `iml sweep --help` list the config's keys that their runs
    read, their defaults and what they mean, from the schema (iml.pipeline.defaults.SCHEMA)."""
    from iml.config import flatten
    from iml.pipeline.defaults import READ_BY, default_config, key_help, sweep_config

    for command, build, inputs in (
        ("reproduce", default_config, "images"),
        ("sweep", sweep_config, "rows"),
    ):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())  # the epilog, unwrapped
        for key, value in flatten(build()).items():
            shown = f"{key} = {value!r}" in text
            assert shown == (READ_BY.get(key, inputs) == inputs), (command, key)
            if shown:
                assert " ".join(key_help(key).split()[:4]) in text, (command, key)
        assert "loss.params.NAME = VALUE" in text
    assert key_help("data.n_folds").startswith("cross-validation folds")


@pytest.mark.parametrize("command", ["reproduce", "sweep"])
def test_about_eight_named_options_each_with_its_keys_meaning_in_the_schema(command):
    """One source for what a key means: the schema, in `--help`'s epilog and in the help of the
    option that sets it."""
    from iml.config import flatten
    from iml.pipeline.defaults import key_help

    (sub,) = [a for a in command_parser.build_parser()._actions if a.dest == "command"]
    parser = sub.choices[command]
    # besides what the command does (--no-progress, --import, --train-only), at most eight
    behaviour = {"help", "no_progress", "imports", "train_only"}
    named = [a.option_strings for a in parser._actions if a.option_strings]
    assert len([a for a in parser._actions if a.option_strings and a.dest not in behaviour]) <= 8
    assert ["--config"] in named and ["--out"] in named and ["--seeds"] in named
    inputs = "images" if command == "reproduce" else "rows"
    defaults = flatten(
        command_config.load_config(command_parser.parse_args([command, "--out", "unused"]))
    )
    actions = {a.dest: a for a in parser._actions}
    for option, key in command_config.shortcuts(inputs).items():
        action = actions[option]
        assert key_help(key).replace("%", "%%") in action.help, (command, key)
        assert action.help.endswith(f"(config.{key})")
        if defaults[key] not in ("", ()):
            assert f"; default {defaults[key]} (config.{key})" in action.help


def test_figures_and_reveal_help_print_the_report_keys_they_take(capsys):
    from iml.commands.reveal import REVEAL_SETTINGS
    from iml.pipeline.defaults import experiment_config, key_help

    for command, settings in (
        ("figures", dict(experiment_config().eval)),
        ("reveal", REVEAL_SETTINGS),
    ):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for key, value in settings.items():
            assert f"eval.{key} = {value!r}" in text, (command, key)
            assert " ".join(key_help(f"eval.{key}").split()[:4]) in text, (command, key)
    assert "eval.n_bootstrap = 1000" in text  # reveal's own default
