"""The ``iml figures`` command (``iml.commands.figures``): a missing run named, a sweep's folder
told apart (its report of a stored run is tested with that run, in
tests/commands/test_reproduce.py)."""

import numpy as np
from _sweep_tables import write_sweep_scores

from iml import cli


def test_figures_of_a_missing_run_is_named(tmp_path, capsys):
    status = cli.main(["figures", "--run", str(tmp_path / "norun")])
    assert status == 2 and "norun" in capsys.readouterr().err


def test_a_sweeps_folder_is_named_as_a_sweep_before_any_work(tmp_path, capsys):
    labels = np.arange(40) % 2
    run = write_sweep_scores(tmp_path / "sweep", np.full((2, 40), 0.5), labels, [0.5, 0.9])
    status = cli.main(["figures", "--run", str(run), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2 and f"{run} holds an `iml sweep` run" in err
    assert "`iml figures` reports `iml reproduce` runs" in err
    assert not (tmp_path / "out").exists()
