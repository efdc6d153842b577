"""Tests for the results store: atomic entries, manifests, and crash safety."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from iml.pipeline.store import RunStore, atomic_write_bytes


def test_arrays_and_json_round_trip(tmp_path):
    store = RunStore(tmp_path / "run")
    scores = np.random.default_rng(0).uniform(size=(3, 5)).astype(np.float32)
    store.save_arrays("members/beta0.9/seed0", scores=scores, index=np.arange(5))
    store.save_json("tables/summary", {"0.9": {"raw": {"ece": 0.1}}})
    assert store.has("members/beta0.9/seed0") and store.has("tables/summary")
    assert not store.has("members/beta0.5/seed0")
    loaded = store.load_arrays("members/beta0.9/seed0")
    np.testing.assert_array_equal(loaded["scores"], scores)
    assert loaded["scores"].dtype == np.float32
    assert store.load_json("tables/summary")["0.9"]["raw"]["ece"] == 0.1
    assert list(store.keys()) == ["members/beta0.9/seed0", "tables/summary"]
    assert list(store.keys("members")) == ["members/beta0.9/seed0"]


def test_missing_entries_and_bad_keys_are_named(tmp_path):
    store = RunStore(tmp_path)
    with pytest.raises(FileNotFoundError, match="nothing"):
        store.load_arrays("nothing")
    with pytest.raises(ValueError, match="keys"):
        store.save_json("../escape", {})


def test_manifest_resumes_same_config_and_refuses_another(tmp_path):
    store = RunStore(tmp_path)
    first = store.open_run({"betas": [0.5, 0.9], "seed": 0}, devices=["cpu:0"])
    assert first["packages"]["numpy"] == np.__version__
    again = RunStore(tmp_path).open_run({"betas": [0.5, 0.9], "seed": 0}, devices=["cuda:0"])
    assert again["created_at"] == first["created_at"] and len(again["resumed_at"]) == 1
    # the first machine's devices stay; the resume's are recorded beside them
    assert again["devices"] == ["cpu:0"]
    assert [r["devices"] for r in again["resumed_on"]] == [["cuda:0"]]
    assert again["resumed_on"][0]["packages"]["numpy"] == np.__version__
    with pytest.raises(ValueError, match="'seed': 0 stored, 1 now"):
        RunStore(tmp_path).open_run({"betas": [0.5, 0.9], "seed": 1})


def test_failed_write_leaves_old_content_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "entry.json"
    atomic_write_bytes(path, b'{"old": 1}')

    def fail(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_bytes(path, b'{"new": 2}')
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["entry.json"]


def test_kill_during_writes_never_leaves_a_partial_entry(tmp_path):
    # A child process writes large entries in a loop; SIGKILL it mid-stream, then every entry
    # the store reports must load completely.
    script = textwrap.dedent(
        f"""
        import numpy as np
        from iml.pipeline.store import RunStore
        store = RunStore({str(tmp_path)!r})
        big = np.arange(2_000_000, dtype=np.float64)
        for i in range(10_000):
            store.save_arrays(f"e/{{i:05d}}", x=big + i)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = subprocess.Popen([sys.executable, "-c", script], env=env)
    deadline = time.time() + 60
    while time.time() < deadline and len(list(RunStore(tmp_path).keys("e"))) < 3:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    store = RunStore(tmp_path)
    keys = list(store.keys("e"))
    assert len(keys) >= 3
    for key in keys:
        x = store.load_arrays(key)["x"]
        assert x.shape == (2_000_000,) and x[0] == int(key.split("/")[1])


def test_entries_get_the_usual_file_permissions(tmp_path):
    store = RunStore(tmp_path)
    store.save_json("table", {"a": 1})
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "table.json").stat().st_mode & 0o777 == 0o666 & ~umask
