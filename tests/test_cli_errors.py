"""Errors that tell the truth: exit 2 only for bad input found before work, exit 1 for a failure
during work (with its traceback, finished results kept), and every output written atomically.

The stored PneumoniaMNIST run in docs/results/ serves as a real run to report from.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import iml._io
from iml import cli

ROOT = Path(__file__).resolve().parents[1]
STORED_RUN = ROOT / "docs" / "results" / "pneumoniamnist"


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
        (["reproduce", "--set", "n_foldz=3", "--out", "unused"], "'n_foldz' does not exist"),
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
    # The disk fills up while the figures are written: the tables written before stay whole.
    out = tmp_path / "report"
    done = _python(
        f"""
        import errno, sys
        import iml.pipeline.report as report

        def full_disk(*args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")

        report.save_figure = full_disk
        from iml import cli
        sys.exit(cli.main(["figures", "--run", {str(STORED_RUN)!r}, "--out", {str(out)!r}]))
        """
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" in done.stderr and "No space left on device" in done.stderr
    assert "iml figures: error:" not in done.stderr  # not reported as bad input
    stored = json.loads((STORED_RUN / "table.json").read_text())
    assert json.loads((out / "table.json").read_text()).keys() == stored.keys()
    assert (out / "table.md").read_text().startswith("#")


def test_every_file_a_command_writes_is_written_atomically(tmp_path, monkeypatch):
    written = []
    original = iml._io.atomic_write_bytes

    def spy(path, data):
        written.append(Path(path).resolve())
        original(path, data)

    monkeypatch.setattr(iml._io, "atomic_write_bytes", spy)
    for module in list(sys.modules.values()):  # modules that imported the name itself
        if getattr(module, "atomic_write_bytes", None) is original:
            monkeypatch.setattr(module, "atomic_write_bytes", spy)
    out = tmp_path / "report"
    assert cli.main(["figures", "--run", str(STORED_RUN), "--out", str(out)]) == 0
    files = {p.resolve() for p in out.rglob("*") if p.is_file()}
    assert len(files) >= 10  # tables, ensemble scores and sizes, figures in two formats
    assert files <= set(written), sorted(map(str, files - set(written)))
