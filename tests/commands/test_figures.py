"""The ``iml figures`` command (``iml.commands.figures``): a missing run named (its report of a
stored run is tested with that run, in tests/commands/test_reproduce.py)."""

from iml import cli


def test_figures_of_a_missing_run_is_named(tmp_path, capsys):
    status = cli.main(["figures", "--run", str(tmp_path / "norun")])
    assert status == 2 and "norun" in capsys.readouterr().err
