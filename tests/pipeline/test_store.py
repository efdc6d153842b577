"""The results store (``iml.pipeline.store``): atomic entries, manifests and crash safety, the one
layout of stored members, the ensemble read back from stored member batches, and the one aggregation
of members."""

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from _pipeline_runs import save_batch
from _sweep_tables import write_sweep_scores

from iml import cli, plugins
from iml._io import atomic_write_bytes
from iml.pipeline.store import RunStore, aggregate_members, load_ensemble


def test_ensemble_mean_and_size_by_hand(tmp_path):
    store = RunStore(tmp_path)
    save_batch(store, "batches/batch-0000", [(0.5, [0, 1], [0.2, 0.4]), (0.9, [0, 2], [0.5, 0.7])])
    save_batch(store, "batches/batch-0001", [(0.5, [1, 2], [0.6, 0.8]), (0.5, [1], [0.5])])
    ens = load_ensemble(store, (0.5, 0.9), 4)
    scores, sizes = ens.for_beta(0.5)
    np.testing.assert_array_equal(sizes, [1, 3, 1, 0])
    np.testing.assert_allclose(scores[:3], [0.2, (0.4 + 0.6 + 0.5) / 3, 0.8], rtol=1e-6)
    assert np.isnan(scores[3])
    scores, sizes = ens.for_beta(0.9)
    np.testing.assert_array_equal(sizes, [1, 0, 1, 0])
    np.testing.assert_allclose(scores[[0, 2]], [0.5, 0.7], rtol=1e-6)


def test_aggregate_refuses_foreign_beta_and_bad_scores():
    with pytest.raises(ValueError, match=r"beta 0\.7"):
        aggregate_members([(0.7, np.array([0]), np.array([0.5]))], (0.5,), 2)
    with pytest.raises(ValueError, match="probabilities"):
        aggregate_members([(0.5, np.array([0]), np.array([1.5]))], (0.5,), 2)
    with pytest.raises(ValueError, match="test_idx"):
        aggregate_members([(0.5, np.array([5]), np.array([0.5]))], (0.5,), 2)


def test_logit_average_is_the_score_of_the_members_mean_logit(tmp_path):
    from scipy.special import expit, logit, softmax

    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.01, 0.99, 5), rng.uniform(0.01, 0.99, 3)
    members = [(0.9, np.arange(5), a), (0.9, np.array([0, 1, 4]), b)]
    ens = aggregate_members(members, (0.9,), 6, average="logit")
    np.testing.assert_array_equal(ens.sizes, [[2, 2, 1, 1, 2, 0]])
    pooled = expit(np.mean([logit(a[[0, 1, 4]]), logit(b)], axis=0))
    np.testing.assert_allclose(ens.scores[0, [0, 1, 4]], pooled, rtol=1e-12)
    np.testing.assert_allclose(ens.scores[0, [2, 3]], a[[2, 3]], rtol=1e-12)  # one member: itself
    assert np.isnan(ens.scores[0, 5])
    # near 1, the mean score falls toward the less confident member; the mean logit does not
    near = [(0.9, [0], np.array([0.999999])), (0.9, [0], np.array([0.99]))]
    by_score = aggregate_members(near, (0.9,), 1).scores[0, 0]
    by_logit = aggregate_members(near, (0.9,), 1, average="logit").scores[0, 0]
    assert by_score == pytest.approx(0.9949995) and by_logit == pytest.approx(0.9999, rel=1e-4)
    # a stored 0 or 1 counts as the nearest float32 inside (0, 1), whose logits are finite
    low, high = (float(np.nextafter(np.float32(e), np.float32(0.5))) for e in (0, 1))
    ends = [(0.9, [0, 1], np.array([1.0, 0.0])), (0.9, [0, 1], np.array([0.0, 0.0]))]
    pooled = aggregate_members(ends, (0.9,), 2, average="logit").scores[0]
    np.testing.assert_allclose(pooled, [expit((logit(high) + logit(low)) / 2), low], rtol=1e-9)
    # multiclass: the softmax of the mean log-probabilities, the renormalised geometric mean
    p, q = rng.dirichlet(np.ones(4), 3), rng.dirichlet(np.ones(4), 3)
    ens = aggregate_members([(0.0, np.arange(3), p), (0.0, np.arange(3), q)], (0.0,), 3, "logit")
    np.testing.assert_allclose(ens.scores[0], softmax((np.log(p) + np.log(q)) / 2, axis=-1))
    geometric = np.sqrt(p * q)
    np.testing.assert_allclose(ens.scores[0], geometric / geometric.sum(-1, keepdims=True))
    # the stored run's reader pools the same way
    store = RunStore(tmp_path)
    save_batch(
        store, "batches/batch-0000", [(0.9, [0, 1], [0.2, 0.999]), (0.9, [0, 1], [0.6, 0.9])]
    )
    stored = load_ensemble(store, (0.9,), 2, average="logit").scores[0]
    np.testing.assert_allclose(
        stored, expit(logit(np.array([[0.2, 0.999], [0.6, 0.9]], np.float32)).mean(0)), rtol=1e-6
    )
    with pytest.raises(
        ValueError, match=r"average must be one of \('score', 'logit'\), got 'median'"
    ):
        aggregate_members(members, (0.9,), 6, average="median")


def test_aggregate_means_class_scores_per_loss():
    a, b = np.array([[0.2, 0.8], [0.6, 0.4]]), np.array([[0.4, 0.6]])
    ens = aggregate_members([(0.0, np.array([0, 1]), a), (0.0, np.array([0]), b)], (0.0, 1.0), 3)
    assert ens.scores.shape == (2, 3, 2)
    np.testing.assert_allclose(ens.scores[0, 0], [0.3, 0.7])
    np.testing.assert_allclose(ens.scores[0, 1], [0.6, 0.4])
    assert np.isnan(ens.scores[0, 2]).all() and np.isnan(ens.scores[1]).all()
    np.testing.assert_array_equal(ens.sizes, [[2, 1, 0], [0, 0, 0]])
    with pytest.raises(ValueError, match="differ in shape"):
        aggregate_members([(0.0, [0], a[:1]), (0.0, [1], np.ones((1, 3)) / 3)], (0.0,), 2)


def _trained(feed: str):
    from iml.training import MemberHistory, Trained

    scores = [np.array([0.2, 0.7]), np.array([0.9])]
    if feed == "host":
        history = [MemberHistory([0.5, 0.4], [0.6, 0.5], [1e-3, 1e-3], None, False, 0.5),
                   MemberHistory([0.5], [0.7], [1e-3], 1, True, 0.7)]  # fmt: skip
        return Trained(scores, None, np.array([0.5, 0.7]), np.array([2, 1]), None, history,
                       "host", "adam", 2)  # fmt: skip
    logits = [np.log(s / (1 - s)).astype(np.float32) for s in scores]
    return Trained(scores, logits, np.array([0.5, 0.7]), np.array([3, 4]), np.array([1e-2, 1e-3]),
                   None, "table", "exact", 4)  # fmt: skip


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
    first = store.open_run({"betas": [0.5, 0.9], "seed": 0}, kind="images", devices=["cpu:0"])
    assert first["packages"]["numpy"] == np.__version__
    again = RunStore(tmp_path).open_run(
        {"betas": [0.5, 0.9], "seed": 0}, kind="images", devices=["cuda:0"]
    )
    assert again["created_at"] == first["created_at"] and len(again["resumed_at"]) == 1
    # the first machine's devices stay; the resume's are recorded beside them
    assert again["devices"] == ["cpu:0"]
    assert [r["devices"] for r in again["resumed_on"]] == [["cuda:0"]]
    assert again["resumed_on"][0]["packages"]["numpy"] == np.__version__
    with pytest.raises(ValueError, match=r"config\.seed: 0 stored, 1 now"):
        RunStore(tmp_path).open_run({"betas": [0.5, 0.9], "seed": 1}, kind="images")
    assert "config_within_rounding" not in again["resumed_on"][0]
    # a grid computed again an ulp apart resumes, and the manifest takes the weights this
    # process trains and reports with, saying so
    nearby = {"betas": [0.5, math.nextafter(0.9, 1.0)], "seed": 0}
    third = RunStore(tmp_path).open_run(nearby, kind="images")
    assert third["config"] == nearby and third["resumed_on"][-1]["config_within_rounding"]
    assert RunStore(tmp_path).manifest()["config"] == nearby


def test_the_manifest_records_the_plugins_loaded_and_a_resume_adds_new_ones(tmp_path, monkeypatch):
    loss = {"given": "loss.py", "path": "/work/loss.py", "module": "iml_plugin_loss_0"}
    model = {"given": "my_models", "module": "my_models"}
    entry = {"name": "boosting", "value": "iml_plugin_example.boosting"}
    monkeypatch.setattr(plugins, "_IMPORTED", {loss["module"]: loss})
    monkeypatch.setattr(plugins, "_ENTRY_POINTS", [entry])
    first = RunStore(tmp_path).open_run({"seed": 0}, kind="table")
    assert first["plugins"] == {"imports": [loss], "entry_points": [entry]}
    monkeypatch.setattr(plugins, "_IMPORTED", {model["module"]: model, loss["module"]: loss})
    again = RunStore(tmp_path).open_run({"seed": 0}, kind="table")
    assert again["plugins"] == {"imports": [loss, model], "entry_points": [entry]}
    assert RunStore(tmp_path).manifest()["plugins"] == again["plugins"]


def test_the_manifest_records_its_schema_and_kind_and_an_earlier_schema_is_refused(tmp_path):
    from iml.pipeline import SCHEMA

    config = {"loss": {"name": "log", "beta": [0.5, 0.9]}}
    manifest = RunStore(tmp_path / "new").open_run(config, kind="table")
    assert manifest["schema"] == SCHEMA and manifest["kind"] == "table"
    assert (
        RunStore(tmp_path / "new").kind() == "table" and RunStore(tmp_path / "none").kind() is None
    )
    with pytest.raises(ValueError, match=r"kind must be one of \(.images., .table.\), got .rows."):
        RunStore(tmp_path / "other").check_resumable(config, "rows")
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text(json.dumps({"config": {"betas": [0.5]}}))
    for read in (lambda s: s.manifest(), lambda s: s.check_resumable(config, "images")):
        with pytest.raises(ValueError) as err:
            read(RunStore(old))
        assert f"recorded at manifest schema 1; this iml reads schema {SCHEMA}" in str(err.value)
        assert f"python -m tools.migrate_runs {old}" in str(err.value)


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


@pytest.mark.slow
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


def _earlier_schema(root):
    """A finished sweep's folder whose manifest is of schema 1 (no ``schema``, no ``kind``)."""
    rng = np.random.default_rng(0)
    labels = (rng.random(200) < 0.3).astype(np.int32)
    scores = np.clip(0.3 + 0.4 * labels + 0.1 * rng.normal(size=(2, 200)), 0.01, 0.99)
    write_sweep_scores(root, scores, labels, [0.5, 0.9])
    manifest = json.loads((root / "manifest.json").read_text())
    del manifest["schema"], manifest["kind"]
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def _files(root):
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "argv",
    [
        ["figures", "--run", "{run}", "--out", "{out}"],
        ["figures", "--run", "{run}"],
        ["reveal", "--run", "{run}", "--out", "{out}", "--no-progress"],
        ["sweep", "--dataset", "digits", "--betas", "0.5", "0.9", "--out", "{run}",
         "--no-progress"],
    ],
    ids=["figures", "figures-in-place", "reveal", "sweep-resumed"],
)  # fmt: skip
def test_every_command_refuses_an_earlier_schema_before_any_work(tmp_path, capsys, argv):
    run, out = _earlier_schema(tmp_path / "run"), tmp_path / "out"
    before = _files(tmp_path)
    assert cli.main([a.format(run=run, out=out) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"iml {argv[0]}: error: ") and "\n" not in err
    assert "manifest schema 1" in err and f"python -m tools.migrate_runs {run}" in err
    assert _files(tmp_path) == before and not out.exists()  # nothing written


def test_one_member_layout_for_both_feeds():
    from iml.pipeline.store import member_entry, member_test_scores

    members = {"member_index": [0, 1], "beta": [0.5, 0.9], "rotation": [0, 1], "seed": [0, 0]}
    tests = [np.array([3, 1]), np.array([2])]
    host = member_entry(_trained("host"), members, tests, epochs=3)
    assert list(host) == ["member_index", "beta", "rotation", "seed", "test_idx", "test_scores",
                          "test_offsets", "train_loss", "val_loss", "lr", "stopped_epoch",
                          "diverged", "best_val_loss"]  # fmt: skip
    assert host["train_loss"].shape == (2, 3) and np.isnan(host["train_loss"][1, 1:]).all()
    assert host["stopped_epoch"].tolist() == [-1, 1] and host["test_offsets"].tolist() == [0, 2, 3]
    table = member_entry(_trained("table"), members, tests)
    assert {"test_logits", "best_epoch", "epochs_run", "l2"} <= set(table)
    assert "train_loss" not in table and table["l2"].tolist() == [1e-2, 1e-3]
    (_, idx, z), _ = member_test_scores(table, logits=True)
    assert idx.tolist() == [3, 1] and z.dtype == np.float32
    assert [m[0] for m in member_test_scores(host)] == [0.5, 0.9]


def test_members_given_by_logits_pool_their_own_logits():
    from iml.pipeline.store import aggregate_members

    def link(row, z):
        return 1 / (1 + np.exp(-np.asarray(z, np.float64)))

    z = [np.array([-1.0, 2.0]), np.array([3.0, 0.5])]
    members = [(0.0, np.array([0, 1]), z[0]), (0.0, np.array([0, 1]), z[1])]
    by_score = aggregate_members(members, [0.0], 2, "score", link)
    np.testing.assert_allclose(by_score.scores[0], (link(0, z[0]) + link(0, z[1])) / 2)
    by_logit = aggregate_members(members, [0.0], 2, "logit", link)
    np.testing.assert_allclose(by_logit.scores[0], link(0, (z[0] + z[1]) / 2))
    # as logits of their scores pool, up to rounding, when the scores are stored instead
    stored = [(b, i, link(0, v)) for b, i, v in members]
    np.testing.assert_allclose(aggregate_members(stored, [0.0], 2, "logit").scores[0],
                               by_logit.scores[0], rtol=1e-12)  # fmt: skip
    assert by_logit.sizes[0].tolist() == [2, 2]
    with pytest.raises(ValueError, match="test_logits of a member of row 0 are not finite"):
        aggregate_members([(0.0, np.array([0]), np.array([np.nan]))], [0.0], 1, "score", link)


def test_a_folder_holding_one_kind_of_run_is_refused_to_the_other(tmp_path):
    from iml.config import to_dict
    from iml.pipeline.defaults import default_config
    from iml.pipeline.experiment import build, check_resumable

    sweep = write_sweep_scores(tmp_path / "sweep", np.full((2, 20), 0.5), np.arange(20) % 2,
                               betas=[0.5, 0.9])  # fmt: skip
    on_images = {k: v for k, v in to_dict(default_config()).items() if k != "distributed"}
    images = tmp_path / "images"
    RunStore(images).open_run(on_images, kind="images")
    swept = RunStore(sweep).manifest()["config"]
    with pytest.raises(ValueError, match=r"holds a sweep of a table \(`iml sweep`\), not a run on"):
        RunStore(sweep).check_resumable(on_images, "images")
    with pytest.raises(
        ValueError, match=r"holds a run on images \(`iml reproduce`\), not a sweep of a table"
    ):
        RunStore(images).check_resumable(swept, "table")
    with pytest.raises(ValueError, match=r"holds a sweep of a table \(`iml sweep`\), not a run on"):
        check_resumable(build(default_config()), sweep)
    assert RunStore(sweep).check_resumable(swept, "table") == swept  # each resumes as itself
    assert check_resumable(build(default_config()), images) == on_images
