"""The ``iml figures`` command (``iml.commands.figures``): a missing run named; a stored sweep
reported again without training, with its own report settings or others, and a bad setting
refused before any work (its report of a stored reproduce run is tested with that run, in
tests/commands/test_experiment.py)."""

import json

import pytest

from iml import cli
from iml.commands import config as command_config
from iml.commands import parser as command_parser
from iml.pipeline.report import report_run


def test_figures_of_a_missing_run_is_named(tmp_path, capsys):
    status = cli.main(["figures", "--run", str(tmp_path / "norun")])
    assert status == 2 and "norun" in capsys.readouterr().err


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    run = tmp_path_factory.mktemp("sweep") / "digits"
    argv = ["sweep", "--no-progress", "--dataset", "digits", "--betas", "0.3", "0.6", "0.9",
            "--config.data.n_folds=5", "--config.eval.n_bootstrap=20", "--config.eval.figures=",
            "--out", str(run)]  # fmt: skip
    assert cli.main(argv) == 0
    return run


@pytest.mark.slow
def test_a_sweep_is_reported_again_without_training(sweep, tmp_path, capsys):
    stored = json.loads((sweep / "table.json").read_text())
    batches = {p.name: p.stat().st_mtime_ns for p in (sweep / "batches").iterdir()}
    # in place, with its own settings (the figures' formats are not among them: none asked)
    capsys.readouterr()
    assert cli.main(["figures", "--run", str(sweep), "--config.eval.figures="]) == 0
    said = capsys.readouterr().err  # each stage as it starts, on stderr
    assert "  the table of 3 losses (20 bootstrap replicates of each ECE, the recalibration " \
           "baselines cross-fitted) ...\n" in said  # fmt: skip
    assert "  revealing with adaptive bins (20 paired bootstrap replicates) ...\n" in said
    assert "the figures" not in said  # none asked
    assert json.loads((sweep / "table.json").read_text()) == stored
    assert {p.name: p.stat().st_mtime_ns for p in (sweep / "batches").iterdir()} == batches
    out = tmp_path / "five_bins"
    capsys.readouterr()
    argv = ["figures", "--run", str(sweep), "--out", str(out), "--config.eval.n_bins=5",
            "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)["losses"] == list(stored)
    assert " ...\n" not in printed.err  # no stage said
    table = json.loads((out / "table.json").read_text())
    # as JSON text: five deciles of so precise a model merge into one bin, whose test is not
    # testable (a NaN p-value, unequal to itself)
    again = report_run(sweep, tmp_path / "again", formats=(), eval_overrides={"n_bins": 5})
    assert json.dumps(table) == json.dumps(again)
    assert table != stored
    assert table["0.9"]["raw"]["loss_calibration"]["verdict"].startswith("not testable")
    for name in (
        "table.md",
        "ensemble_scores.npz",
        "figures/ece_by_loss.png",
        "figures/figure1.pdf",
        "figures/figure4.png",
    ):
        assert (out / name).stat().st_size > 0, name
    # the figures in other formats, or none
    for formats, drawn in (("svg", ["ece_by_loss.svg"]), ("", [])):
        out = tmp_path / f"figures_{formats}"
        argv = [
            "figures",
            "--run",
            str(sweep),
            "--out",
            str(out),
            f"--config.eval.figures={formats}",
        ]
        assert cli.main(argv) == 0
        assert sorted(p.name for p in out.glob("figures/ece_by_loss.*")) == drawn
        assert json.loads((out / "table.json").read_text()) == stored


@pytest.mark.slow
def test_a_bad_report_setting_of_a_sweep_is_refused_before_any_work(sweep, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["figures", "--run", str(sweep), "--out", str(out), "--config.eval.n_bins=0"]
    assert cli.main(argv) == 2
    assert "config.eval.n_bins" in capsys.readouterr().err and not out.exists()
    argv = ["figures", "--run", str(sweep), "--out", str(out), "--config.eval.figures=png,bmp"]
    assert cli.main(argv) == 2
    assert "config.eval.figures: unknown figure format 'bmp'" in capsys.readouterr().err
    assert not out.exists()


def test_the_report_settings_are_the_config_eval_keys_as_in_every_command():
    from iml.commands.figures import eval_overrides

    def overrides(*argv):
        return eval_overrides(command_parser.parse_args(["figures", "--run", "r", *argv]))

    named = overrides(
        "--config.eval.n_bins=20",
        "--config.eval.n_bootstrap=50",
        "--config.eval.report_seed=3",
        "--config.eval.average=logit",
    )
    assert named == {"n_bins": 20, "n_bootstrap": 50, "report_seed": 3, "average": "logit"}
    keys = ["n_bins=20", "n_bootstrap=50", "report_seed=3", "average=logit"]
    assert named == overrides(*(f"--config.eval.{key}" for key in keys))
    assert overrides("--config.eval.n_bins=5", "--config.eval.n_bins=7") == {
        "n_bins": 7
    }  # named last
    assert overrides() == {}  # the run's own settings
    with pytest.raises(ValueError, match=r"config\.eval\.n_bins must be an integer >= 1, got 0"):
        overrides("--config.eval.n_bins=0")
    with pytest.raises(ValueError, match=r"config\.eval\.report_seed must be an integer >= 0"):
        overrides("--config.eval.report_seed=-1")
    for command in ("reproduce", "sweep"):
        config = command_config.load_config(
            command_parser.parse_args(
                [
                    command,
                    "--config.eval.n_bootstrap=50",
                    "--config.eval.report_seed=3",
                    "--out",
                    "o",
                ]
            )
        )
        assert (config.eval.n_bootstrap, config.eval.report_seed) == (50, 3)
