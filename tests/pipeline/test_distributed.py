"""Runs as several processes (``iml.pipeline.distributed``): ``iml sweep`` as two processes
joined over loopback gives the table of one; an ``iml reproduce`` run of two processes, killed on
one and started again on both, ends with the table, the revealed record and the member batches of
one process (trained only, then reported by ``iml figures``); processes that run different
configs are refused before any work, as is an output folder that not every process reaches; a
coordinator that never answers is named with its setting.

Each process of a test is ``python -m iml.cli ... --distributed`` with the coordinator, the count
and its index set by ``--config.distributed.*`` (the settings a launcher without detection gives).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from _pipeline_runs import TINY_REPRODUCE
from _training_helpers import FAST_COMPILE, free_port, wait_for

from iml.pipeline import distributed
from iml.pipeline.defaults import default_config

ROOT = Path(__file__).resolve().parents[2]

#: A small sweep of several chunks (one loss each), so that each process trains some.
SWEEP = ["sweep", "--no-progress", "--dataset", "digits", "--betas", "0.3", "0.5", "0.7",
         "--seeds", "1", "--config.plan.losses_per_batch=1", "--config.eval.n_bootstrap=10",
         "--config.eval.figures=()"]  # fmt: skip
#: The tiny `iml reproduce` run of conftest's tiny_reproduce_run (four batches of two members),
#: without figures.
TINY = [*TINY_REPRODUCE, "--config.eval.figures=()"]
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    env = dict(os.environ)
    env["XLA_FLAGS"] = FAST_COMPILE  # not conftest's eight devices: `iml` takes one per core
    env["IML_JAX_CACHE"] = "off"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # JAX's own compilation cache, one folder per process index (see _cached), kept for the
    # module: a run loads the programs an earlier run of this module compiled
    env[CACHES] = str(tmp_path_factory.mktemp("jax-caches"))
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    return env


#: The environment variable of ``env`` that names the folder of the compilation caches.
CACHES = "IML_TEST_JAX_CACHES"


def _cached(env: dict[str, str], index: int, copy_to: Path | None = None) -> dict[str, str]:
    """``env`` with process ``index``'s compilation cache. JAX writes a cache entry in place, so
    processes running at the same time never share a folder: process 1's starts as a copy of
    process 0's, which every run of one process writes. A process that will be killed, which
    could leave an entry half written, gets a copy of its cache in ``copy_to``."""
    caches = Path(env[CACHES])
    folder = caches / f"process{index}"
    if index and (caches / "process0").is_dir():
        shutil.copytree(caches / "process0", folder, dirs_exist_ok=True)
    if copy_to is not None:
        copy = copy_to / f"jax-cache{index}"
        if folder.is_dir():
            shutil.copytree(folder, copy, dirs_exist_ok=True)
        folder = copy
    return {**env, "JAX_COMPILATION_CACHE_DIR": str(folder)}


def _one(args: list[str], out: Path, env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "iml.cli", *args, "--out", str(out)], cwd=ROOT,
                          env=_cached(env, 0), capture_output=True, text=True,
                          timeout=TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def _start(args, out, env, logs, extra=None, killed=False) -> list[subprocess.Popen]:
    """The two processes of one run, each with its own log and compilation cache (a copy of it
    in ``logs`` where the test kills them)."""
    port, procs = free_port(), []
    envs = [_cached(env, i, logs if killed else None) for i in range(2)]  # before either starts
    for i in range(2):
        command = [sys.executable, "-m", "iml.cli", *args, "--out", str(out),
                   *(extra or {}).get(i, []), "--config.distributed.enabled=true",
                   f"--config.distributed.coordinator_address=127.0.0.1:{port}",
                   "--config.distributed.num_processes=2", f"--config.distributed.process_id={i}",
                   "--config.distributed.initialization_timeout=60"]  # fmt: skip
        with open(logs / f"process{i}-{port}.log", "w") as log:
            procs.append(subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                          env=envs[i]))  # fmt: skip
        procs[-1].log = Path(log.name)
    return procs


def _wait(procs: list[subprocess.Popen]) -> tuple[list[int], str]:
    """The processes' exit statuses (killed past the deadline) and the ends of their logs."""
    wait_for(procs, TIMEOUT_S)
    logs = "\n".join(f"--- process {i}\n{p.log.read_text()[-3000:]}" for i, p in enumerate(procs))
    return [p.returncode for p in procs], logs


def _same_numbers(got, want, where="table"):
    """Nested JSON equal, its numbers up to float32 round-off."""
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), where
        for key in want:
            _same_numbers(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for k, (a, b) in enumerate(zip(got, want, strict=True)):
            _same_numbers(a, b, f"{where}[{k}]")
    elif isinstance(want, float):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7, err_msg=where)
    else:
        assert got == want, where


@pytest.fixture(scope="module")
def tiny_alone(tiny_reproduce_run, iml_env, env):
    """TINY run as one process: conftest's tiny run, trained only and then reported by ``iml
    figures``. The programs it compiled start process 0's compilation cache, as a run of TINY
    here would."""
    process0 = Path(env[CACHES]) / "process0"
    shutil.copytree(iml_env["JAX_COMPILATION_CACHE_DIR"], process0, dirs_exist_ok=True)
    return tiny_reproduce_run


@pytest.mark.slow
def test_a_sweep_as_two_processes_gives_the_table_of_one(tmp_path, env):
    _one(SWEEP, tmp_path / "one", env)
    codes, logs = _wait(_start(SWEEP, tmp_path / "two", env, tmp_path))
    assert codes == [0, 0], logs
    assert "trained batches [1]" in logs  # process 1's share; process 0 trained 0 and 2
    want = json.loads((tmp_path / "one" / "table.json").read_text())
    _same_numbers(json.loads((tmp_path / "two" / "table.json").read_text()), want)
    assert sorted(p.name for p in (tmp_path / "two" / "batches").iterdir()) == [
        f"batch-000{i}.npz" for i in range(3)
    ]


@pytest.mark.slow
def test_a_run_killed_on_one_process_resumes_on_both_to_the_same_table(tmp_path, env, tiny_alone):
    out = tmp_path / "run"
    procs = _start(TINY, out, env, tmp_path, killed=True)
    first = out / "batches" / "batch-0001.npz"  # process 1's first batch
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not first.exists() and time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), "a process ended before the kill"
            time.sleep(0.02)
        assert first.exists(), "process 1 never stored its first batch"
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait()
        # its partner is stopped too, as a launcher stops a job whose task died
        procs[0].send_signal(signal.SIGKILL)
    finally:
        _wait(procs)
    assert not (out / "table.json").exists()
    stored = first.stat().st_mtime_ns
    codes, logs = _wait(_start(TINY, out, env, tmp_path))
    assert codes == [0, 0], logs
    assert first.stat().st_mtime_ns == stored  # skipped, not trained again
    # the report of the whole run equals the one `iml figures` wrote from one process's members
    _same_numbers(json.loads((out / "table.json").read_text()),
                  json.loads((tiny_alone / "table.json").read_text()))  # fmt: skip
    revealed = json.loads((out / "revealed.json").read_text())
    want = json.loads((tiny_alone / "revealed.json").read_text())
    assert revealed.pop("run") == str(out) and want.pop("run") == str(tiny_alone)
    _same_numbers(revealed, want, "revealed")
    for batch in sorted((tiny_alone / "batches").glob("*.npz")):
        with np.load(batch) as one, np.load(out / "batches" / batch.name) as two:
            assert sorted(two.files) == sorted(one.files), batch.name
            for name in one.files:
                np.testing.assert_allclose(two[name], one[name], rtol=1e-5, atol=1e-7,
                                           err_msg=f"{batch.name}: {name}")  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["resumed_at"]) == 1
    assert manifest["processes"] == 2 and "distributed" not in manifest["config"]
    assert not (out / "checkpoints").exists() and not (out / distributed.TOKEN).exists()


@pytest.mark.slow
def test_processes_with_different_configs_are_refused_before_any_work(tmp_path, env):
    out = tmp_path / "run"
    procs = _start(SWEEP, out, env, tmp_path, extra={1: ["--config.data.n_folds=5"]})
    codes, logs = _wait(procs)
    assert codes == [2, 2], logs
    assert logs.count("process 1 of 2 runs another config than process 0") == 2, logs
    assert not (out / "manifest.json").exists() and not (out / "batches").exists()


@pytest.mark.slow
def test_an_output_folder_that_not_every_process_reaches_is_refused_before_any_work(tmp_path, env):
    # process 1 writes elsewhere, as a host would that does not share process 0's file system
    procs = _start(SWEEP, tmp_path / "run", env, tmp_path,
                   extra={1: ["--out", str(tmp_path / "elsewhere")]})  # fmt: skip
    codes, logs = _wait(procs)
    assert codes == [2, 2], logs
    token = tmp_path / "run" / distributed.TOKEN
    refused = f"--out: process 1 of 2 cannot read the token process 0 wrote to {token}"
    assert logs.count(refused) == 2, logs
    assert not token.exists() and not (tmp_path / "run" / "manifest.json").exists()


# ----------------------------------------------------------------------------------------------
# Within one process
# ----------------------------------------------------------------------------------------------


def _config(**settings):
    c = default_config()
    for key, value in settings.items():
        c.distributed[key] = value
    return c


def test_batches_are_shared_round_robin_and_one_process_owns_them_all():
    shares = [[i for i in range(7) if distributed.Processes(p, 3).owns(i)] for p in range(3)]
    assert shares == [[0, 3, 6], [1, 4], [2, 5]]
    assert distributed.Processes(0, 3).main and not distributed.Processes(1, 3).main
    # without config.distributed.enabled: one process, and every check passes alone
    assert distributed.initialize(_config()) == distributed.Processes(0, 1)
    assert distributed.processes() == (0, 1)
    assert distributed.allgather("x", "a", 1) == ["a"]
    distributed.check_same_run(_config(), {"anything": 1}, "config")
    distributed.check_shared_folder(_config(), "/nonexistent/folder")
    distributed.barrier("alone")


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"num_processes": -1}, r"config\.distributed\.num_processes must be 0"),
        ({"num_processes": 2, "process_id": 2}, r"config\.distributed\.process_id must be -1"),
        ({"process_id": -2}, r"config\.distributed\.process_id"),
        ({"initialization_timeout": 0}, r"config\.distributed\.initialization_timeout"),
        ({"coordinator_address": "localhost"}, r"coordinator_address must be HOST:PORT"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(settings, match):
    with pytest.raises(ValueError, match=match):
        distributed.initialize(_config(enabled=True, **settings))


def test_a_coordinator_that_never_answers_is_named_with_its_setting():
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    config = _config(enabled=True, coordinator_address=address, num_processes=2, process_id=1,
                     initialization_timeout=1)  # fmt: skip
    start = time.monotonic()
    with pytest.raises(ValueError, match=rf"no coordinator answered at {address} within "
                       r"config\.distributed\.initialization_timeout=1 s"):  # fmt: skip
        distributed.initialize(config)
    assert time.monotonic() - start < 10


def test_a_launch_without_a_cluster_or_a_coordinator_names_the_settings(monkeypatch):
    monkeypatch.delenv("JAX_COORDINATOR_ADDRESS", raising=False)
    for name in [v for v in os.environ if v.startswith(("SLURM_", "OMPI_", "TPU_"))]:
        monkeypatch.delenv(name)
    with pytest.raises(ValueError, match=r"no cluster detected .*config\.distributed\."
                       "coordinator_address"):  # fmt: skip
        distributed.initialize(_config(enabled=True, initialization_timeout=5))
    assert not jax.distributed.is_initialized()
