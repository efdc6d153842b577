"""Errors that tell the truth: exit 2 only for bad input found before work, exit 1 for a failure
during work (with its traceback, finished results kept), and every output written atomically.
(That every file a command writes is written atomically is tested in tests/test_cli.py, on its
tiny run.)
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iml import cli

ROOT = Path(__file__).resolve().parents[1]


def _python(script: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["figures", "--run", "no/such/run"], "no stored run (manifest.json) in no/such/run"),
        (["reproduce", "--betas", "0.5", "1.5", "--out", "unused"], "beta"),
        (
            ["reproduce", "--config.data.n_foldz=3", "--out", "unused"],
            "--config.data.n_foldz: no such key; did you mean config.data.n_folds?",
        ),
        (
            ["sweep", "--dataset", "digits", "--config.train.learnig_rate=1", "--out", "unused"],
            "--config.train.learnig_rate: no such key; did you mean config.train.learning_rate?",
        ),
        (
            ["reproduce", "--classes", "all", "--loss", "matrix", "--out", "unused"],
            "config.loss.name='matrix' needs config.loss.weights",
        ),
        (
            [
                "reproduce",
                "--loss",
                "class_weighted_softmax",
                "--loss-weights",
                "ones;w[1]=2",
                "--out",
                "unused",
            ],
            "is multiclass; set config.data.classes='all'",
        ),
        (["sweep", "--out", "unused"], "give exactly one of --csv PATH or --dataset "),
        (["sweep", "--dataset", "digits", "--betas", "0.5,1", "--out", "unused"], "--betas"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"iml {argv[0]}: error: ")
    assert message in err
    assert not (tmp_path / "unused").exists()  # nothing was started


def test_failure_during_work_exits_1_with_traceback_and_keeps_finished_results(tmp_path):
    # The second chunk of a sweep fails (a device lost mid-way): exit 1 with the traceback, not
    # a one-line "bad input", and the first chunk stays stored.
    rows = ["x;label"] + [f"{i % 7};{'yes' if i % 5 == 0 else 'no'}" for i in range(80)]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "sweep"
    argv = ["sweep", "--csv", str(tmp_path / "data.csv"), "--target", "label", "--positive"]
    argv += ["yes", "--betas", "0.5,0.9", "--betas-per-chunk", "1", "--seeds", "1"]
    argv += ["--epochs", "2", "--n-folds", "4", "--no-progress", "--out", str(out)]
    done = _python(
        f"""
        import sys
        import iml.pipeline.sweep as sweep
        from iml import cli

        train_chunk, calls = sweep._train_chunk, []

        def fail_second(*args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                raise RuntimeError("device lost")
            return train_chunk(*args, **kwargs)

        sweep._train_chunk = fail_second
        sys.exit(cli.main({argv!r}))
        """
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" in done.stderr and "RuntimeError: device lost" in done.stderr
    assert "iml sweep: error:" not in done.stderr  # not reported as bad input
    assert sorted(p.name for p in (out / "batches").iterdir()) == ["batch-0000.npz"]
    assert json.loads((out / "manifest.json").read_text())["config"]["betas"] == [0.5, 0.9]
