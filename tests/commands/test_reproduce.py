"""The ``iml reproduce`` command (``iml.commands.reproduce``), end to end on one small run: the
documented table, figures, manifest and ensemble sizes, a run killed and rerun to the same results,
and ``iml figures`` reporting that stored run."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _pipeline_runs import TINY_REPRODUCE, run_iml

import iml._io
from iml import cli
from iml.commands import parser as command_parser
from iml.commands.figures import eval_overrides
from iml.training import host

#: Every test here reads or runs a whole `iml reproduce` run.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


GLIBC = host._glibc() is not None  # the C library of this process and of the `iml` it starts


TINY = TINY_REPRODUCE


#: The report's tables and scores alone, for tests that do not look at its figures.
NO_FIGURES = ["--config.eval.figures=()"]


BASELINES = ("platt", "beta", "temperature", "isotonic", "histogram", "prior_shift")


METRICS = ("ece", "ece_debiased", "brier", "log_loss", "auroc")


@pytest.fixture(scope="module")
def env(iml_env):
    return iml_env


@pytest.fixture(scope="module")
def run_dir(tiny_reproduce_run):
    # conftest's tiny run: trained only (as on a GPU machine), then reported from the stored run
    # alone with `iml figures` (test_kill_9_then_rerun_gives_the_same_results checks that a whole
    # `iml reproduce` writes the same report)
    return tiny_reproduce_run


def test_figures_reports_a_stored_run_with_the_logit_average_writing_each_file_atomically(
    run_dir, tmp_path, monkeypatch, capsys
):
    from iml.pipeline import RunStore, load_ensemble

    written = []
    original = iml._io.atomic_write_bytes

    def spy(path, data):
        written.append(Path(path).resolve())
        original(path, data)

    monkeypatch.setattr(iml._io, "atomic_write_bytes", spy)
    for module in list(sys.modules.values()):  # modules that imported the name itself
        if getattr(module, "atomic_write_bytes", None) is original:
            monkeypatch.setattr(module, "atomic_write_bytes", spy)
    out = tmp_path / "logit"
    argv = ["figures", "--run", str(run_dir), "--out", str(out), "--config.eval.average=logit",
            "--config.eval.n_bins=4", "--config.eval.n_bootstrap", "3",
            "--config.eval.figures=png"]  # fmt: skip
    assert cli.main(argv) == 0
    files = {p.resolve() for p in out.rglob("*") if p.is_file()}
    assert len(files) >= 10  # tables, ensemble scores and sizes, figures
    assert {p.suffix for p in (out / "figures").iterdir()} == {".png"}
    assert files <= set(written), sorted(map(str, files - set(written)))
    assert json.loads((out / "ensemble.json").read_text())["average"] == "logit"
    assert json.loads((run_dir / "ensemble.json").read_text())["average"] == "score"
    # the report's settings: the run's own, but for those given, and recorded
    settings = json.loads((out / "ensemble.json").read_text())["eval"]
    stored = json.loads((run_dir / "manifest.json").read_text())["config"]["eval"]
    assert settings == {**stored, "n_bins": 4, "average": "logit", "n_bootstrap": 3,
                        "figures": ["png"]}  # fmt: skip
    assert json.loads((run_dir / "ensemble.json").read_text())["eval"] == stored
    revealed = json.loads((out / "revealed.json").read_text())
    assert (revealed["n_bins"], revealed["n_bootstrap"]) == (4, 3)
    with np.load(out / "ensemble_scores.npz") as stored:
        labels, scores = stored["labels"], stored["scores"]
    by_logit = load_ensemble(RunStore(run_dir), (0.5, 0.9), len(labels), "logit")
    np.testing.assert_allclose(scores, by_logit.scores, rtol=1e-12)
    capsys.readouterr()
    assert cli.main(["figures", "--run", str(run_dir), "--config.eval.average=mean"]) == 2
    assert "config.eval.average must be one of ('score', 'logit')" in capsys.readouterr().err


def test_figures_takes_only_the_report_settings_and_checks_them(run_dir, tmp_path, capsys):
    # a key given twice: the last one counts
    argv = ["figures", "--run", str(run_dir), "--config.eval.n_bins=4",
            "--config.eval.average=logit", "--config.eval.average=score"]  # fmt: skip
    assert eval_overrides(command_parser.parse_args(argv)) == {"n_bins": 4, "average": "score"}
    for flag, message in (
        ("--config.eval.n_binz=4", "config.eval.n_binz: no such key; did you mean config.eval."),
        ("--config.eval.n_bins=0", "config.eval.n_bins must be an integer >= 1, got 0"),
        ("--config.eval.n_bins", "--config.eval.n_bins: no value"),
        ("--config.train.max_epochs=1", "--config.train.max_epochs: `iml figures` trains nothing"),
        ("--config.eval=3", "--config.eval: `iml figures` trains nothing"),
        ("--config.eval.figures=png,gif", "config.eval.figures: unknown figure format 'gif'"),
    ):
        bad = tmp_path / "bad"
        assert cli.main(["figures", "--run", str(run_dir), "--out", str(bad), flag]) == 2, flag
        assert message in capsys.readouterr().err, flag
        assert not bad.exists()


def test_reproduce_writes_the_documented_table(run_dir):
    table = json.loads((run_dir / "table.json").read_text())
    assert list(table) == ["0.5", "0.9"]
    for methods in table.values():
        assert list(methods) == ["raw", "loss_corrected", *BASELINES]
        for metrics in methods.values():
            for m in METRICS:
                assert math.isfinite(metrics[m]), metrics
            assert 0.0 <= metrics["auroc"] <= 1.0 and metrics["brier"] >= 0.0
        test = methods["raw"]["loss_calibration"]
        assert test["verdict"].split(" (")[0] in ("rejected", "not rejected", "not testable")
        assert test["family"] <= 2 and test["n_bins"] >= 1
    assert "## beta = 0.9" in (run_dir / "table.md").read_text()


def test_reproduce_writes_figures_manifest_and_ensemble_sizes(run_dir):
    for k in range(1, 5):
        png = (run_dir / "figures" / f"figure{k}.png").read_bytes()
        pdf = (run_dir / "figures" / f"figure{k}.pdf").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and pdf[:5] == b"%PDF-"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["loss"] == {  # the schema's every key, the grid's unread here
        **{"name": "log", "betas": [0.5, 0.9], "params": {}, "weights": ""},
        **{"n_betas": 64, "beta_min": 0.01, "beta_max": 0.99},
    }
    assert manifest["config"]["data"]["classes"] == "binary"
    assert manifest["config"]["train"]["members_per_batch"] == 2
    assert manifest["num_members"] == 8 and manifest["devices"]
    assert "jax" in manifest["packages"] and manifest["seeds"]["members"] == [0]
    # set before JAX started: CPU steps run on the calling thread, and where the C library is glibc
    # (whose mallopt it sets) freed memory is kept; elsewhere nothing is changed and it says so
    assert manifest["host_memory"] == {
        "freed_memory_kept": GLIBC,
        "synchronous_cpu_dispatch": True,
    }
    sizes = json.loads((run_dir / "ensemble.json").read_text())["ensemble_size"]
    assert sizes["0.9"] == {"min": 1, "max": 1, "mean": 1.0, "histogram": {"1": 160}}
    batches = sorted((run_dir / "batches").glob("*.npz"))
    assert len(batches) == 4 and not (run_dir / "checkpoints").exists()
    # what the two ensembles learned: iml reveal's record and figures, at the report's settings
    revealed = json.loads((run_dir / "revealed.json").read_text())
    assert revealed["kind"] == "reproduce" and revealed["betas"] == [0.5, 0.9]
    assert (revealed["K"], revealed["n"], revealed["n_bootstrap"]) == (2, 160, 20)
    assert 0.0 < revealed["nis"]["p_value"] <= 1.0 and len(revealed["nias"]["p_value"]) == 2
    for name in ("information", "value_matrix", "cost_bounds"):
        assert (run_dir / "figures" / f"revealed_{name}.png").read_bytes()[:4] == b"\x89PNG"
    with np.load(batches[0]) as b:
        assert b["train_loss"].shape == (2, 1) and np.isfinite(b["train_loss"]).all()


def test_kill_9_then_rerun_gives_the_same_results(run_dir, tmp_path, env):
    out = tmp_path / "killed"
    first = out / "batches" / "batch-0000.npz"
    # The process killed writes to a copy of the module's compilation cache: JAX writes an entry
    # in place, and one half written would reach the runs after it.
    cache = tmp_path / "jax-cache"
    shutil.copytree(env["JAX_COMPILATION_CACHE_DIR"], cache, dirs_exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "iml.cli", *TINY, *NO_FIGURES, "--out", str(out)],
        cwd=ROOT,
        env={**env, "JAX_COMPILATION_CACHE_DIR": str(cache)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert first.exists(), "the first member batch was never stored"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert not (out / "table.json").exists()  # killed before the end
    done = run_iml([*TINY, *NO_FIGURES, "--out", str(out)], env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"results in {out}" in done.stdout
    assert not (out / "figures").exists()  # config.eval.figures=()
    # The same report as `iml figures` wrote from the uninterrupted run's stored members.
    assert json.loads((out / "table.json").read_text()) == json.loads(
        (run_dir / "table.json").read_text()
    )
    revealed = json.loads((out / "revealed.json").read_text())
    want = json.loads((run_dir / "revealed.json").read_text())
    assert revealed.pop("run") == str(out) and want.pop("run") == str(run_dir)
    assert revealed == want
    for batch in sorted((run_dir / "batches").glob("*.npz")):
        with np.load(batch) as want, np.load(out / "batches" / batch.name) as got:
            for name in want.files:
                np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert len(json.loads((out / "manifest.json").read_text())["resumed_at"]) == 1
