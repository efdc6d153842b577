"""Tests of iml.pipeline.sweep: the vectorized beta sweep, its bookkeeping, store and command."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, roc_auc_score

from iml.data.folds import nested_cv, nested_cv_splits
from iml.pipeline import sweep as S
from iml.pipeline.store import RunStore

N, D = 2000, 3
BETAS = [0.5, 0.9]
# One training configuration for every test, so that the compiled programs are shared.
TRAIN = {"max_epochs": 40, "batch_size": 128, "learning_rate": 0.05, "patience": 4}


@pytest.fixture(scope="module")
def simulated() -> tuple[np.ndarray, np.ndarray]:
    """Data where logistic regression is well specified: y ~ Bernoulli(sigmoid(w.x + b))."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    logits = x @ np.array([1.5, -1.0, 0.5]) - 2.0
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-logits))).astype(np.int32)
    return x, y


@pytest.fixture(scope="module")
def sweep_run(simulated, tmp_path_factory) -> tuple[S.SweepResult, RunStore]:
    x, y = simulated
    store = RunStore(tmp_path_factory.mktemp("sweep"))
    result = S.run_sweep(
        x, y, None, BETAS, seeds=2, betas_per_chunk=2, store=store, progress=False, **TRAIN
    )
    return result, store


def test_vectorized_training_equals_training_members_one_at_a_time(sweep_run, simulated):
    x, y = simulated
    # The fixture's folds and configuration: the vectorized program is already compiled.
    splits = nested_cv_splits(sweep_run[0].fold_ids)
    config = S.TrainConfig(**TRAIN)
    together = S.train_members(x, y, splits, BETAS, [0, 1], config)
    assert together.params["w"].shape == (2, 2, 10, D)
    for i, j, r in [(0, 0, 0), (1, 1, 3), (0, 1, 7), (1, 0, 9)]:
        alone = S.train_members(x, y, [splits[r]], [BETAS[j]], [i], config)
        assert alone.best_epoch[0, 0, 0] == together.best_epoch[i, j, r]
        for name in ("w", "b"):
            np.testing.assert_allclose(
                alone.params[name][0, 0, 0], together.params[name][i, j, r], atol=1e-4
            )
        t = len(splits[r].test)
        np.testing.assert_allclose(
            alone.test_logits[0, 0, 0, :t], together.test_logits[i, j, r, :t], atol=1e-3
        )
    # Members really differ: a higher beta pushes the intercept up (logit c = logit g + logit b).
    assert (together.params["b"][:, 1] > together.params["b"][:, 0] + 1.0).all()


def test_out_of_fold_takes_each_observation_from_its_test_rotation():
    rng = np.random.default_rng(3)
    y = (rng.random(300) < 0.3).astype(int)
    fold_ids, splits = nested_cv(300, labels=y, seed=2)
    t = max(len(s.test) for s in splits)
    # Logit of member (s, b, r) on its t-th test row: encodes rotation, beta and seed.
    logits = np.arange(10)[None, None, :, None] + 100 * np.arange(2)[None, :, None, None]
    logits = np.broadcast_to(logits + 1000 * np.arange(3)[:, None, None, None], (3, 2, 10, t))
    oof = S.out_of_fold_logits(logits.astype(np.float32), splits, 300)
    rotation_of = np.empty(300, int)
    for r, split in enumerate(splits):
        rotation_of[split.test] = r
    expected = rotation_of[None, None] + 100 * np.arange(2)[None, :, None]
    np.testing.assert_array_equal(oof, expected + 1000 * np.arange(3)[:, None, None])
    # With the default rotations a fold's rotation is the fold id's position in the cycle.
    assert len({tuple(np.unique(fold_ids[s.test])) for s in splits}) == 10
    with pytest.raises(ValueError, match="several rotations"):
        S.out_of_fold_logits(np.zeros((1, 1, 2, t), np.float32), [splits[0], splits[0]], 300)


def test_sweep_scores_every_observation_once_per_beta_and_seed(sweep_run, simulated):
    result, _ = sweep_run
    assert result.member_scores.shape == (2, 2, N)
    assert np.isfinite(result.member_scores).all()
    assert ((result.member_scores > 0) & (result.member_scores < 1)).all()
    np.testing.assert_allclose(result.scores, result.member_scores.mean(axis=1), rtol=1e-6)
    # Seeds differ (initialisation and minibatch order) but agree closely on a convex problem.
    spread = np.abs(result.member_scores[:, 0] - result.member_scores[:, 1])
    assert 0 < np.median(spread) < 0.02
    assert result.best_epoch.shape == (2, 2, 10)
    assert (result.best_epoch >= 1).all() and (result.best_epoch <= TRAIN["max_epochs"]).all()


def test_loss_corrected_scores_calibrated_when_logistic_model_is_well_specified(sweep_run):
    table = sweep_run[0].table
    raw, corrected = table["0.9"]["raw"], table["0.9"]["loss_corrected"]
    assert corrected["ece"] < 0.05
    assert raw["ece"] > 0.2
    assert corrected["brier"] < raw["brier"]
    # The correction is strictly increasing: ranking (AUROC) is unchanged.
    assert corrected["auroc"] == pytest.approx(raw["auroc"], abs=1e-6)
    # beta = 1/2 is the unweighted loss: the correction is the identity.
    assert table["0.5"]["raw"] == table["0.5"]["loss_corrected"]
    assert table["0.5"]["raw"]["ece"] < 0.05


def test_table_json_keys_and_values_match_scikit_learn(sweep_run):
    result, store = sweep_run
    stored = json.loads((store.root / "sweep_table.json").read_text())
    assert stored == result.table
    assert list(stored) == ["0.5", "0.9"]
    for beta, row in stored.items():
        assert list(row) == list(S.METHODS)
        for method in S.METHODS:
            assert list(row[method]) == list(S.METRICS)
        k = BETAS.index(float(beta))
        raw = np.clip(result.scores[k], 1e-7, 1 - 1e-7)
        assert row["raw"]["brier"] == pytest.approx(brier_score_loss(result.labels, raw), rel=1e-4)
        assert row["raw"]["auroc"] == pytest.approx(roc_auc_score(result.labels, raw), abs=1e-4)
        corrected = np.clip(result.corrected[k], 1e-7, 1 - 1e-7)
        assert row["loss_corrected"]["brier"] == pytest.approx(
            brier_score_loss(result.labels, corrected), rel=1e-4
        )
    assert list(store.keys("chunks")) == ["chunks/0000"]


def test_resume_after_crash_skips_finished_chunks(sweep_run, simulated, tmp_path, monkeypatch):
    x, y = simulated
    real = S._train_chunk
    calls = []

    def crash_on_second(*args, **kwargs):
        calls.append(args[3].tolist())
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        return real(*args, **kwargs)

    monkeypatch.setattr(S, "_train_chunk", crash_on_second)
    store = RunStore(tmp_path / "run")
    kwargs = dict(seeds=2, betas_per_chunk=2, progress=False, **TRAIN)
    betas = [*BETAS, 0.6, 0.8]
    with pytest.raises(RuntimeError, match="simulated crash"):
        S.run_sweep(x, y, None, betas, store=RunStore(store.root), **kwargs)
    assert list(store.keys("chunks")) == ["chunks/0000"]
    assert not store.has("sweep_table")

    calls.clear()
    monkeypatch.setattr(
        S, "_train_chunk", lambda *a, **k: (calls.append(a[3].tolist()), real(*a, **k))[1]
    )
    resumed = S.run_sweep(x, y, None, betas, store=RunStore(store.root), **kwargs)
    assert calls == [[0.6, 0.8]]
    assert resumed.chunks_trained == [1]
    # The stored chunk is the fixture's first chunk, trained by the same program.
    np.testing.assert_allclose(resumed.member_scores[:2], sweep_run[0].member_scores, atol=1e-6)
    assert list(resumed.table) == ["0.5", "0.9", "0.6", "0.8"]
    # A different configuration in the same folder is refused, naming the difference.
    with pytest.raises(ValueError, match="different config"):
        S.run_sweep(x, y, None, [0.5, 0.8], store=RunStore(store.root), **kwargs)


def _write_csv(path, x, y) -> None:
    lines = ["a,b,c,label"] + [
        f"{r[0]},{r[1]},{r[2]},{'yes' if t else 'no'}" for r, t in zip(x, y, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")


def _args(**flags) -> list[str]:
    train = ["--epochs", "40", "--batch-size", "128", "--lr", "0.05", "--patience", "4"]
    out = []
    for k, v in flags.items():
        out += [f"--{k.replace('_', '-')}", str(v)]
    return out + train + ["--no-progress"]


def test_command_on_a_csv_writes_table_markdown_and_figures(simulated, tmp_path, capsys):
    x, y = simulated
    _write_csv(tmp_path / "data.csv", x, y)
    out = tmp_path / "out"
    flags = {"csv": tmp_path / "data.csv", "target": "label", "positive": "yes"}
    rc = S.main(_args(**flags, betas="0.5,0.9", seeds=2, out=out))
    assert rc == 0, capsys.readouterr().err
    table = json.loads((out / "sweep_table.json").read_text())
    assert list(table) == ["0.5", "0.9"]
    assert table["0.9"]["loss_corrected"]["ece"] < 0.05 < 0.2 < table["0.9"]["raw"]["ece"]
    assert (out / "sweep_table.md").read_text().count("\n") == 4
    assert (out / "ece_vs_beta.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "ece_vs_beta.pdf").read_bytes()[:4] == b"%PDF"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["data"]["target"] == "label"
    assert "loss-corrected ECE" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"target": "nope"}, "no column 'nope'"),
        ({"target": "label", "betas": "0.5,1.5"}, r"--betas.*\(0, 1\).*1\.5"),
        ({"target": "label", "betas": "0,0.5"}, r"--betas.*\(0, 1\)"),
        ({"target": "label", "beta_min": "-0.1"}, "beta_min must lie in"),
        ({"target": "label", "seeds": "0"}, "--seeds"),
        ({"target": "label", "lr": "-1"}, "learning_rate"),
        ({"target": "label", "csv": "missing.csv"}, "file not found: .*missing.csv"),
        ({"csv": None, "dataset": "letter", "data_dir": "no-such-dir"}, "folder not found"),
        ({"csv": None, "dataset": "adult"}, "needs --data-dir"),
        ({"csv": None, "dataset": "letter", "data_dir": "."}, "letter-recognition.data not found"),
    ],
)
def test_bad_input_is_reported_before_any_work(flags, message, tmp_path, capsys, monkeypatch):
    (tmp_path / "data.csv").write_text("a,label\n1,yes\n2,no\n")
    monkeypatch.chdir(tmp_path)

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr("iml.data.load_dataset", no_work)
    monkeypatch.setattr(S, "_train_chunk", no_work)
    options = {"csv": "data.csv", "out": "out", **flags}
    argv = []
    for k, v in options.items():
        if v is not None:
            argv += [f"--{k.replace('_', '-')}", str(v)]
    assert S.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("iml sweep: error:")
    assert __import__("re").search(message, err), err
    assert not (tmp_path / "out").exists()


def test_library_rejects_bad_arrays(simulated):
    x, y = simulated
    with pytest.raises(ValueError, match="betas must lie in the open interval"):
        S.run_sweep(x, y, None, [0.5, 1.0], progress=False)
    with pytest.raises(ValueError, match="features contain NaN"):
        S.run_sweep(np.full_like(x, np.nan), y, None, [0.5], progress=False)
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        S.run_sweep(x, y + 1, None, [0.5], progress=False)
    with pytest.raises(ValueError, match="model must be one of"):
        S.run_sweep(x, y, None, [0.5], model="forest", progress=False)
    with pytest.raises(ValueError, match="n_betas"):
        S.beta_grid(0)


def test_mlp_members_train_and_logit_grid_is_symmetric(simulated):
    grid = S.beta_grid(5, 0.01, 0.99)
    mid = 0.1 / (0.1 + np.sqrt(0.99))  # odds sqrt(0.01 / 0.99): halfway in logit
    np.testing.assert_allclose(grid, [0.01, mid, 0.5, 1 - mid, 0.99], rtol=1e-9)
    x, y = simulated
    _, splits = nested_cv(N, labels=y)
    config = S.TrainConfig(model="mlp", hidden=4, max_epochs=2, batch_size=256, learning_rate=0.05)
    fit = S.train_members(x, y, splits[:1], [0.9], [0], config)
    assert fit.params["w1"].shape == (1, 1, 1, D, 4)
    assert np.isfinite(fit.best_val).all() and fit.epochs_run == 2
    logits = jax.numpy.asarray(fit.test_logits)
    assert logits.shape[:3] == (1, 1, 1) and bool(jax.numpy.isfinite(logits).all())
