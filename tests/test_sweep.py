"""Tests of iml.pipeline.sweep and `iml sweep`: the vectorized beta sweep, its bookkeeping, store,
config and command."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, roc_auc_score

from iml import cli, loss_grid, loss_spec
from iml.calibration import METRICS, MULTICLASS_METRICS, beta_key
from iml.config import flatten, to_dict
from iml.data.folds import assign_folds, nested_cv, nested_cv_splits
from iml.models import MLP, LogisticRegression
from iml.pipeline import sweep as S
from iml.pipeline import sweep_report
from iml.pipeline.defaults import READ_BY
from iml.pipeline.markdown import markdown_by_loss
from iml.pipeline.store import RunStore
from iml.plots import figure_calibration_by_loss
from iml.training import DataSource, MemberSpec, TrainConfig, train_ensemble
from iml.training.tabular import TABULAR_DEFAULTS, out_of_fold_logits, train_tabular

N, D = 2000, 3
BETAS = [0.5, 0.9]
# each multiclass ECE of a sweep's table with its bootstrap interval
MULTICLASS_INTERVALS = {"top_label_ece_interval", "classwise_ece_interval"}
# One training configuration for every test, so that the compiled programs are shared.
TRAIN = {"max_epochs": 40, "batch_size": 128, "learning_rate": 0.05, "patience": 4, "l2": 0.0,
         "standardize": False}  # fmt: skip
LOGISTIC = LogisticRegression()


def table_config(**fields) -> TrainConfig:
    """The sweeps' configuration of the trainer with ``fields`` changed."""
    return dataclasses.replace(TABULAR_DEFAULTS, **fields)


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
        x,
        y,
        None,
        BETAS,
        betas_per_chunk=2,
        store=store,
        progress=False,
        train=table_config(**TRAIN),
    )
    return result, store


@pytest.mark.parametrize("solver", ["exact", "adam"])
def test_vectorized_training_equals_training_members_one_at_a_time(sweep_run, simulated, solver):
    x, y = simulated
    # The fixture's folds (and, for the exact solver, its compiled program).
    splits = nested_cv_splits(sweep_run[0].fold_ids)
    config = table_config(**TRAIN, solver=solver)
    together = train_tabular(LOGISTIC, x, y, splits, BETAS, [0, 1], config)
    assert together.params["w"].shape == (2, 2, 10, D)
    for i, j, r in [(0, 0, 0), (1, 1, 3), (0, 1, 7), (1, 0, 9)]:
        alone = train_tabular(LOGISTIC, x, y, [splits[r]], [BETAS[j]], [i], config)
        if solver == "adam":
            assert alone.best_epoch[0, 0, 0] == together.best_epoch[i, j, r]
        else:  # Newton steps: together, a member starts from its neighbouring beta's optimum
            assert together.best_epoch[i, j, r] <= alone.best_epoch[0, 0, 0]
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
    oof = out_of_fold_logits(logits.astype(np.float32), splits, 300)
    rotation_of = np.empty(300, int)
    for r, split in enumerate(splits):
        rotation_of[split.test] = r
    expected = rotation_of[None, None] + 100 * np.arange(2)[None, :, None]
    np.testing.assert_array_equal(oof, expected + 1000 * np.arange(3)[:, None, None])
    # With the default rotations a fold's rotation is the fold id's position in the cycle.
    assert len({tuple(np.unique(fold_ids[s.test])) for s in splits}) == 10
    with pytest.raises(ValueError, match="several rotations"):
        out_of_fold_logits(np.zeros((1, 1, 2, t), np.float32), [splits[0], splits[0]], 300)


def test_sweep_scores_every_observation_once_per_beta_and_seed(sweep_run, simulated):
    result, _ = sweep_run
    # The exact solver: a convex problem has one optimum, so the sweep fits one seed.
    assert result.seeds.tolist() == [0]
    assert result.member_scores.shape == (2, 1, N)
    assert np.isfinite(result.member_scores).all()
    assert ((result.member_scores > 0) & (result.member_scores < 1)).all()
    np.testing.assert_allclose(result.scores, result.member_scores.mean(axis=1), rtol=1e-6)
    assert result.best_epoch.shape == (2, 1, 10)  # Newton steps
    assert (result.best_epoch >= 1).all() and (result.best_epoch <= 50).all()


def test_seeds_asked_of_an_exact_sweep_are_fitted_once_with_a_warning(simulated):
    x, y = simulated
    train = table_config(**TRAIN)
    with pytest.warns(UserWarning, match=r"3 seeds asked of a sweep fitted exactly.*seed 4"):
        plan = S.plan_sweep(x, y, None, BETAS, seeds=[4, 5, 6], train=train)
    assert plan.seeds.tolist() == [4] and plan.run_config["seeds"] == [4]
    # The record holds the ridge: its scale and standardisation always, its grid where chosen.
    recorded = plan.run_config["train"]
    assert (recorded["l2"], recorded["l2_scale"], recorded["standardize"]) == (0.0, "paper", False)
    assert "l2_grid" not in recorded
    auto = S.plan_sweep(x, y, None, BETAS, train=table_config()).run_config["train"]
    assert auto["l2"] == "auto" and auto["l2_grid"] == S.sweep_config().train.l2_grid
    assert auto["standardize"] is True
    # Where Adam trains, the seeds are the members' own, and by default there are 8.
    adam = S.plan_sweep(x, y, None, BETAS, train=dataclasses.replace(train, solver="adam"))
    assert adam.seeds.tolist() == list(range(8)) and len(adam.chunks) == 1
    assert S.plan_sweep(x, y, None, BETAS, train=train).seeds.tolist() == [0]


def test_a_table_member_trains_as_the_ensemble_trainer_trains_it(simulated):
    """One trainer, two feeds: with one minibatch per epoch (so that row order does not matter),
    a member trained on the device-resident table follows the same path as the same member
    streamed from the host by train_ensemble: same initial parameters, steps, validation and
    epoch-end rule."""
    x, y = simulated
    _, splits = nested_cv(len(y), labels=y, seed=0)
    split = splits[2]
    model = LogisticRegression()
    fields = {"max_epochs": 8, "learning_rate": 0.2, "patience": 3, "eval_batch_size": 64,
              "l2": 0.0, "standardize": False}  # fmt: skip
    table = train_tabular(
        model, x, y, [split], [0.8], [5], table_config(**fields, batch_size=len(y), solver="adam")
    )
    member = MemberSpec(beta=0.8, seed=5, train_idx=split.train, val_idx=split.val)
    streamed = table_config(**fields, batch_size=len(split.train), member_batching="vmap")
    states, history = train_ensemble(
        model, [member], DataSource.from_arrays(x, y), streamed, progress=False
    )
    assert len(history[0].val_loss) == table.epochs_run
    assert int(states.best_epoch[0]) == int(table.best_epoch[0, 0, 0])
    np.testing.assert_allclose(float(states.best_val_loss[0]), table.best_val[0, 0, 0], rtol=1e-5)
    for name in ("w", "b"):
        np.testing.assert_allclose(
            np.asarray(states.best_params[name][0]), table.params[name][0, 0, 0], atol=1e-5
        )


def test_adam_seeds_differ_but_agree_closely_on_a_convex_problem(simulated):
    x, y = simulated
    _, splits = nested_cv(len(y), labels=y, seed=0)
    config = table_config(**TRAIN, solver="adam")
    fit = train_tabular(LOGISTIC, x, y, splits[:2], [0.9], [0, 1], config)
    t = len(splits[0].test)
    spread = np.abs(fit.test_logits[0, 0, 0, :t] - fit.test_logits[1, 0, 0, :t])
    assert 0 < np.median(spread) < 0.1
    assert (fit.best_epoch >= 1).all() and (fit.best_epoch <= TRAIN["max_epochs"]).all()


@pytest.mark.parametrize("beta", [0.01, 0.99])
def test_exact_sweep_matches_scikit_learn_on_a_rare_class_table(beta):
    from sklearn.linear_model import LogisticRegression

    from iml.pipeline.report import score_metrics
    from iml.scoring import loss_corrected_score

    rng = np.random.default_rng(5)
    n = 5000
    x = rng.normal(size=(n, 4)).astype(np.float32)
    logits = x @ np.array([1.2, -0.8, 0.5, 0.0]) - 3.6  # about 5% positive
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logits))).astype(np.int32)
    assert 0.03 < y.mean() < 0.08
    train = table_config(l2=0.0, standardize=False)
    result = S.run_sweep(x, y, None, [beta], seeds=1, progress=False, train=train)
    # The same members by scikit-learn (unpenalised, beta-weighted), one fit per rotation.
    oof = np.full(n, np.nan)
    for split in nested_cv_splits(result.fold_ids):
        train = split.train
        weight = np.where(y[train] == 1, beta, 1.0 - beta)
        clf = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000)
        clf.fit(x[train], y[train], sample_weight=weight / weight.mean())
        oof[split.test] = clf.predict_proba(x[split.test])[:, 1]
    assert np.isfinite(oof).all()
    exact = score_metrics(np.asarray(loss_corrected_score(oof, beta)), y)
    ours = result.table[beta_key(beta)]["loss_corrected"]
    assert abs(ours["ece"] - exact["ece"]) < 0.005
    np.testing.assert_allclose(result.scores[0], oof, atol=2e-3)


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
        assert list(row) == [*S.METHODS, S.RIDGE]
        assert row[S.RIDGE] == [[0.0] * 10]  # one seed, ten rotations, the config's number
        for method in S.METHODS:
            assert list(row[method]) == [*METRICS, "ece_interval"]
            low, high = row[method]["ece_interval"]  # its 95% bootstrap interval
            assert 0 <= low < high and low <= row[method]["ece"] * 1.5 and high > 0
        k = BETAS.index(float(beta))
        raw = np.clip(result.scores[k], 1e-7, 1 - 1e-7)
        assert row["raw"]["brier"] == pytest.approx(brier_score_loss(result.labels, raw), rel=1e-4)
        assert row["raw"]["auroc"] == pytest.approx(roc_auc_score(result.labels, raw), abs=1e-4)
        corrected = np.clip(result.corrected[k], 1e-7, 1 - 1e-7)
        assert row["loss_corrected"]["brier"] == pytest.approx(
            brier_score_loss(result.labels, corrected), rel=1e-4
        )
    assert list(store.keys("batches")) == ["batches/batch-0000"]  # every run's layout
    entry = store.load_arrays("batches/batch-0000")
    rotations = len(nested_cv_splits(result.fold_ids))  # one seed, two losses per rotation
    assert entry["loss_index"].tolist() == [0, 1] * rotations
    np.testing.assert_array_equal(store.load_arrays("data/folds")["labels"], result.labels)


def _chunk_betas(x, y, grid, batch, *rest):
    """The betas of the chunk that a call of the sweep's ``_train_chunk`` trains."""
    return grid.weights[sorted({m.loss for m in batch.members})].tolist()


def test_resume_after_crash_skips_finished_chunks(sweep_run, simulated, tmp_path, monkeypatch):
    x, y = simulated
    real = S._train_chunk
    calls = []

    def crash_on_second(*args, **kwargs):
        calls.append(_chunk_betas(*args))
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        return real(*args, **kwargs)

    monkeypatch.setattr(S, "_train_chunk", crash_on_second)
    store = RunStore(tmp_path / "run")
    kwargs = dict(betas_per_chunk=2, progress=False, train=table_config(**TRAIN))
    betas = [*BETAS, 0.6, 0.8]
    with pytest.raises(RuntimeError, match="simulated crash"):
        S.run_sweep(x, y, None, betas, store=RunStore(store.root), **kwargs)
    assert list(store.keys("batches")) == ["batches/batch-0000"]
    assert not store.has("sweep_table")

    calls.clear()
    monkeypatch.setattr(
        S,
        "_train_chunk",
        lambda *a, **k: (calls.append(_chunk_betas(*a)), real(*a, **k))[1],
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


def test_a_sweep_stored_in_the_earlier_chunk_layout_is_refused_before_work(simulated, tmp_path):
    x, y = simulated
    plan = S.plan_sweep(x, y, None, BETAS, train=table_config(**TRAIN))
    assert plan.run_config["store"] == S.STORE_LAYOUT == "batches"
    store = RunStore(tmp_path / "old")
    store.open_run({k: v for k, v in plan.run_config.items() if k != "store"}, devices=[])
    with pytest.raises(ValueError, match=r"first difference: 'store': None stored, 'batches' now"):
        store.check_resumable(plan.run_config)


def test_reveal_names_a_sweep_that_has_not_finished(simulated, tmp_path):
    from iml.pipeline.reveal_input import load_reveal_input

    x, y = simulated
    plan = S.plan_sweep(x, y, None, BETAS, train=table_config(**TRAIN))
    store = RunStore(tmp_path / "run")
    store.open_run(plan.run_config, devices=[])
    store.save_arrays("data/folds", labels=y, fold_ids=plan.fold_ids)  # as a sweep's first step
    with pytest.raises(ValueError, match="an `iml sweep` run that has not finished"):
        load_reveal_input(store.root)


def _write_csv(path, x, y) -> None:
    lines = ["a,b,c,label"] + [
        f"{r[0]},{r[1]},{r[2]},{'yes' if t else 'no'}" for r, t in zip(x, y, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")


def _sweep(argv: list[str]) -> int:
    return cli.main(["sweep", *map(str, argv)])


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
    rc = _sweep(_args(**flags, betas="0.5,0.9", out=out))
    assert rc == 0, capsys.readouterr().err
    table = json.loads((out / "sweep_table.json").read_text())
    assert list(table) == ["0.5", "0.9"]
    assert table["0.9"]["loss_corrected"]["ece"] < 0.05 < 0.2 < table["0.9"]["raw"]["ece"]
    # The default ridge: one of the grid's per rotation, chosen on its validation folds.
    grid = S.sweep_config().train.l2_grid
    assert all(len(row["l2"]) == 1 and len(row["l2"][0]) == 10 for row in table.values())
    assert {v for row in table.values() for v in row["l2"][0]} <= set(grid)
    assert (out / "sweep_table.md").read_text().count("\n") == 4
    assert (out / "ece_vs_beta.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "ece_vs_beta.pdf").read_bytes()[:4] == b"%PDF"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["data"]["target"] == "label"
    assert "loss-corrected ECE" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"target": "nope"}, r"--target 'nope': no such column .*\['a', 'label'\]"),
        ({"target": "label", "betas": "0.5,1.5"}, r"--betas.*\(0, 1\).*1\.5"),
        ({"target": "label", "betas": "0,0.5"}, r"--betas.*\(0, 1\)"),
        ({"target": "label", "beta_min": "-0.1"}, "beta_min must lie in"),
        ({"target": "label", "seeds": "0"}, "--seeds"),
        ({"target": "label", "lr": "-1"}, "learning_rate"),
        ({"target": "label", "csv": "missing.csv"}, "--csv 'missing.csv': file not found"),
        ({"target": "label", "positive": "maybe"}, r"--positive 'maybe' .*'no', 'yes'"),
        ({"target": "label", "delimiter": "tab"}, r"--target 'label': no such column"),
        ({"csv": None, "dataset": "letter", "data_dir": "no-such-dir"}, "folder not found"),
        ({"csv": None, "dataset": "adult"}, "needs --data-dir"),
        ({"csv": None, "dataset": "adult", "delimiter": ";"}, "--delimiter applies to --csv only"),
        ({"csv": None, "dataset": "letter", "data_dir": "."}, "letter-recognition.data not found"),
    ],
)
def test_bad_input_is_reported_before_any_work(flags, message, tmp_path, capsys, monkeypatch):
    (tmp_path / "data.csv").write_text("a,label\n1,yes\n2,no\n")
    monkeypatch.chdir(tmp_path)

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(S, "_train_chunk", no_work)
    options = {"csv": "data.csv", "out": "out", **flags}
    argv = []
    for k, v in options.items():
        if v is not None:
            argv += [f"--{k.replace('_', '-')}", str(v)]
    assert _sweep(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("iml sweep: error:")
    assert __import__("re").search(message, err), err
    assert not (tmp_path / "out").exists()


def test_library_rejects_bad_arrays(simulated):
    x, y = simulated
    with pytest.raises(ValueError, match="betas must lie in \\(0, 1\\)"):
        S.run_sweep(x, y, None, [0.5, 1.0], progress=False)
    with pytest.raises(ValueError, match="features must be finite; 6000 entries are not"):
        S.run_sweep(np.full_like(x, np.nan), y, None, [0.5], progress=False)
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        S.run_sweep(x, y + 1, None, [0.5], progress=False)
    with pytest.raises(ValueError, match="unknown model 'forest'"):
        S.run_sweep(x, y, None, [0.5], model="forest", progress=False)
    with pytest.raises(ValueError, match="train must be a TrainConfig, got dict"):
        S.run_sweep(x, y, None, [0.5], train={"max_epochs": 2}, progress=False)
    with pytest.raises(ValueError, match=r"train\.flip and train\.normalize apply to images"):
        S.plan_sweep(x, y, None, [0.5], train=TrainConfig(normalize="none"))


def test_mlp_members_train(simulated):
    x, y = simulated
    _, splits = nested_cv(N, labels=y)
    config = table_config(max_epochs=2, batch_size=256, learning_rate=0.05)
    fit = train_tabular(MLP(hidden=4), x, y, splits[:1], [0.9], [0], config)
    assert fit.params["w1"].shape == (1, 1, 1, D, 4)
    assert np.isfinite(fit.best_val).all() and fit.epochs_run == 2
    logits = jax.numpy.asarray(fit.test_logits)
    assert logits.shape[:3] == (1, 1, 1) and bool(jax.numpy.isfinite(logits).all())


def _semicolon_export(path, n: int = 300) -> np.ndarray:
    """A spreadsheet export: ';'-separated, quoted names and text, a BOM, CRLF line ends."""
    rng = np.random.default_rng(5)
    age = rng.integers(18, 80, n)
    income = rng.normal(40.0, 12.0, n).round(2)
    region = rng.choice(["north, coast", "south", "east; inland"], n)
    logits = 0.06 * (age - 50) + 1.2 * (region == "south") - 3.0
    y = rng.random(n) < 1.0 / (1.0 + np.exp(-logits))
    lines = ['"age";"income (k)";"region";"y"'] + [
        f'{a};{i};"{r}";"{"yes" if t else "no"}"'
        for a, i, r, t in zip(age, income, region, y, strict=True)
    ]
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    return y.astype(np.int32)


def test_command_on_a_semicolon_export_writes_every_file_atomically(tmp_path, monkeypatch):
    y = _semicolon_export(tmp_path / "export.csv")
    assert 0.05 < y.mean() < 0.15  # a rare "yes" class
    written = []
    for name in ("atomic_write_text", "atomic_write_bytes"):
        real = getattr(sweep_report, name)
        monkeypatch.setattr(sweep_report, name,
                            lambda path, data, real=real: (written.append(path.name),
                                                           real(path, data)))  # fmt: skip
    out = tmp_path / "out"
    argv = ["sweep", "--csv", str(tmp_path / "export.csv"), "--target", "y", "--positive", "yes"]
    argv += ["--out", str(out), "--n-betas", "3", "--seeds", "1", "--epochs", "3"]
    assert cli.main([*argv, "--n-folds", "4", "--no-progress"]) == 0
    assert sorted(written) == ["scores.npz", "sweep_table.md"]
    table = json.loads((out / "sweep_table.json").read_text())
    assert list(table) == ["0.01", "0.5", "0.99"]
    assert (out / "sweep_table.md").read_text().count("\n") == 2 + 3
    with np.load(out / "scores.npz") as scores:
        np.testing.assert_array_equal(scores["labels"], y)
        assert scores["scores"].shape == (3, 300)
    assert (out / "ece_vs_beta.png").read_bytes()[:4] == b"\x89PNG"
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_close_betas_keep_their_own_rows_from_a_dataframe():
    import pandas as pd

    from iml.data.tabular import encode_table

    rng = np.random.default_rng(2)
    n = 80
    frame = pd.DataFrame({"x": rng.normal(size=n), "kind": rng.choice(["a", "b"], n)})
    frame["y"] = np.where(rng.random(n) < 0.3 + 0.3 * (frame["kind"] == "a"), "yes", "no")
    table = encode_table(frame, "y", positive="yes")
    assert table.feature_names == ("x", "kind=a", "kind=b")
    betas = [0.9999991, 0.9999992]
    result = S.run_sweep(
        table.features, table.labels, None, betas, seeds=1, n_folds=4, progress=False,
        train=table_config(max_epochs=2),
    )  # fmt: skip
    assert list(result.table) == ["0.9999991", "0.9999992"]
    rows = markdown_by_loss(result.table).splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == ["| 0.9999991", "| 0.9999992"]
    line = next(
        ln
        for ln in figure_calibration_by_loss(result.table).axes[0].lines
        if ln.get_gid() == "ece-raw"
    )
    assert len(set(line.get_xdata())) == 2


def test_a_failure_during_the_work_propagates_instead_of_exit_2(tmp_path, monkeypatch):
    (tmp_path / "data.csv").write_text("a;label\n1;yes\n2;no\n3;no\n4;yes\n5;no\n6;no\n")

    def fail(*args, **kwargs):
        raise RuntimeError("device lost")

    monkeypatch.setattr(S, "_train_chunk", fail)
    argv = ["--csv", str(tmp_path / "data.csv"), "--target", "label", "--positive", "yes"]
    argv += ["--out", str(tmp_path / "out"), "--n-folds", "4", "--no-progress"]
    args = cli.parse_args(["sweep", *argv])
    work = args.func(args)  # checked, nothing trained yet
    with pytest.raises(RuntimeError, match="device lost"):
        work()
    with pytest.raises(RuntimeError, match="device lost"):
        cli.main(["sweep", *argv])


def test_finished_chunks_survive_a_failure_and_another_config_is_refused_first(
    simulated, tmp_path, monkeypatch, capsys
):
    # The second chunk fails during the work: the first stays stored. A later sweep with other
    # settings into the same folder is bad input, found before any work (exit 2 naming --out).
    x, y = simulated
    _write_csv(tmp_path / "data.csv", x[:300], y[:300])
    out = tmp_path / "out"
    flags = {"csv": tmp_path / "data.csv", "target": "label", "positive": "yes", "out": out}
    argv = _args(**flags, betas="0.5,0.9", seeds=1, betas_per_chunk=1, n_folds=4)
    train_chunk = S._train_chunk
    calls = []

    def fail_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("device lost")
        return train_chunk(*args, **kwargs)

    monkeypatch.setattr(S, "_train_chunk", fail_second)
    with pytest.raises(RuntimeError, match="device lost"):
        _sweep(argv)
    stored = sorted(p.name for p in (out / "batches").iterdir())
    assert stored == ["batch-0000.npz"]
    first = (out / "batches" / "batch-0000.npz").read_bytes()
    manifest = (out / "manifest.json").read_text()
    assert "note: --lr, --batch-size, --epochs, --patience not used" in capsys.readouterr().err

    monkeypatch.setattr(S, "_train_chunk", fail_second)
    assert _sweep(_args(**flags, betas="0.5,0.8", seeds=1, betas_per_chunk=1, n_folds=4)) == 2
    err = capsys.readouterr().err
    assert err.startswith("iml sweep: error: --out: ") and err.count("\n") == 1
    assert "'betas': [0.5, 0.9] stored, [0.5, 0.8] now" in err
    assert len(calls) == 2  # nothing trained
    assert (out / "batches" / "batch-0000.npz").read_bytes() == first
    assert (out / "manifest.json").read_text() == manifest


def test_members_the_exact_solver_could_not_finish_are_reported(simulated):
    x, y = simulated
    _, splits = nested_cv(len(y), labels=y, seed=0)
    config = table_config(max_newton_steps=1)
    with pytest.warns(RuntimeWarning, match=r"2 of 2 members stopped .*max_newton_steps"):
        train_tabular(LOGISTIC, x, y, splits[:2], [0.5], [0], config)


# ----------------------------------------------------------------------------------------------
# Any loss: focal, multiclass weights
# ----------------------------------------------------------------------------------------------

K = 3


@pytest.fixture(scope="module")
def three_classes() -> tuple[np.ndarray, np.ndarray]:
    """Data where multinomial logistic regression is well specified (3 classes)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(N, D)).astype(np.float32)
    logits = x @ np.array([[1.5, -1.0, 0.0], [-0.5, 1.0, 0.5], [0.5, 0.0, -1.0]])
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = (rng.random((N, 1)) > np.cumsum(p, axis=1)).sum(1).astype(np.int32)
    return x, y


def test_a_grid_of_class_weighted_softmax_losses_is_corrected_by_its_own_rule(three_classes):
    x, y = three_classes
    w = np.ones((2, K))
    w[1, 2] = 10.0
    grid = loss_grid(loss_spec("class_weighted_softmax", class_weights=w))
    assert grid.keys == ["ones", "w[2]=10"] and grid.weights is None
    result = S.run_sweep(
        x, y, None, grid, seeds=1, n_folds=5, progress=False, train=table_config(**TRAIN)
    )
    assert result.scores.shape == result.corrected.shape == (2, N, K)
    np.testing.assert_allclose(result.scores.sum(-1), 1.0, atol=1e-5)  # softmax scores
    unweighted, weighted = (result.table[k] for k in grid.keys)
    # The weight pulls scores towards class 2 (its mean score rises well above its frequency);
    # the correction w_y a_y / sum w a, inverted, brings the class-wise error back to the
    # unweighted model's.
    assert result.scores[1, :, 2].mean() > (y == 2).mean() + 0.15
    assert weighted["raw"]["classwise_ece"] > 0.1
    assert weighted["loss_corrected"]["classwise_ece"] < 0.03
    assert weighted["loss_corrected"]["classwise_ece"] < 2 * unweighted["raw"]["classwise_ece"]
    # The unweighted loss's rule is the identity.
    np.testing.assert_allclose(result.corrected[0], result.scores[0], atol=1e-5)
    assert set(unweighted["raw"]) == set(MULTICLASS_METRICS) | MULTICLASS_INTERVALS


def test_matrix_weighted_members_train_independently(three_classes):
    x, y = three_classes
    B = np.ones((2, K, K))
    B[1, 0, 2] = 5.0
    splits = nested_cv_splits(assign_folds(N, n_folds=5, labels=y), n_folds=5)[:2]
    config = table_config(**TRAIN, solver="adam")
    model = LogisticRegression(n_outputs=K)
    together = train_tabular(model, x, y, splits, B, [0], config)
    assert together.params["w"].shape == (1, 2, 2, D, K)
    assert together.test_logits.shape[-1] == K
    alone = train_tabular(model, x, y, [splits[1]], B[1:], [0], config)
    np.testing.assert_allclose(alone.params["w"][0, 0, 0], together.params["w"][0, 1, 1], atol=1e-4)
    # the exact solver's members are independent too
    exact = table_config(**TRAIN, solver="exact")
    together = train_tabular(model, x, y, splits, B, [0], exact)
    alone = train_tabular(model, x, y, [splits[1]], B[1:], [0], exact)
    np.testing.assert_allclose(alone.params["w"][0, 0, 0], together.params["w"][0, 1, 1], atol=1e-5)
    focal = loss_spec("softmax_focal", gamma=2.0, class_weights=np.ones((1, K)))
    with pytest.raises(ValueError, match="exact solver fits logistic regression under the beta-"
                       "weighted or B-weighted log loss or the class-weighted softmax "
                       "cross-entropy, not LogisticRegression under the"):  # fmt: skip
        train_tabular(model, x, y, splits, focal, [0], exact)
    with pytest.raises(ValueError, match=r"class indices in \[0, 3\)"):
        train_tabular(model, x, y + 1, splits, B, [0], config)
    with pytest.raises(ValueError, match=r"logits of shape \(2,\) on 2 rows.*needs \(2, 3\)"):
        train_tabular(LOGISTIC, x, y, splits, B, [0], config)
    with pytest.raises(ValueError, match=r"flip and config\.normalize apply to images"):
        train_tabular(model, x, y, splits, B, [0], TrainConfig())


def test_a_focal_sweep_is_keyed_by_alpha_and_corrected_by_the_generic_rule(simulated):
    x, y = simulated
    losses = loss_spec("focal", gamma=2.0, alpha=np.array([0.5, 0.9]))
    result = S.run_sweep(
        x, y, None, losses, seeds=1, n_folds=5, progress=False, train=table_config(**TRAIN)
    )
    assert result.keys == ["0.5", "0.9"]
    np.testing.assert_allclose(result.betas, [0.5, 0.9])
    for key in result.keys:
        raw, corrected = (result.table[key][m]["ece"] for m in S.METHODS)
        # Focal loss pushes scores towards 1/2 (and alpha = 0.9 further up); its own inverse
        # undoes both.
        assert raw > 0.1 and corrected < 0.04, (key, raw, corrected)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            {"loss": "matrix", "loss_weights": "ones"},
            "--loss matrix is multiclass: add --classes all",
        ),
        ({"classes": "all"}, "--classes all needs a multiclass --loss"),
        ({"loss": "matrix", "classes": "all"}, "--loss matrix needs --loss-weights"),
        ({"loss": "log", "loss_weights": "ones"}, "--loss-weights applies to the multiclass"),
        ({"loss": "squared", "gamma": "1"}, "--gamma applies to --loss focal"),
        (
            {"loss": "focal", "solver": "exact"},
            "--solver exact fits --loss class_weighted_softmax, --loss log or --loss matrix only, "
            "not --loss focal",
        ),
        ({"positive": "x"}, "--positive of --dataset digits is one digit"),
    ],
)
def test_loss_flags_are_checked_before_any_work(flags, message, tmp_path, capsys):
    argv = _args(dataset="digits", **flags, out=tmp_path / "out")
    assert _sweep(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_command_trains_digits_with_all_ten_classes_and_draws_each_class(tmp_path, capsys):
    out = tmp_path / "out"
    # the exact solver by default (multinomial logistic regression); digits' classes separate
    # without a ridge
    argv = _args(dataset="digits", classes="all", loss="class_weighted_softmax",
                 loss_weights="ones;w[8]=10", seeds=1, n_folds=4, l2="1e-3", out=out)  # fmt: skip
    assert _sweep(argv) == 0, capsys.readouterr().err
    table = json.loads((out / "sweep_table.json").read_text())
    assert list(table) == ["ones", "w[8]=10"]
    assert set(table["ones"]["raw"]) == set(MULTICLASS_METRICS) | MULTICLASS_INTERVALS
    assert table["ones"]["raw"]["accuracy"] > 0.85
    with np.load(out / "scores.npz") as stored:
        assert stored["scores"].shape == (2, 1797, 10)
        assert list(stored["keys"]) == ["ones", "w[8]=10"]
    for name in ("ones", "w_8_=10"):
        assert (out / "reliability_by_class" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    assert "top-label ECE" in capsys.readouterr().out
    assert json.loads((out / "manifest.json").read_text())["config"]["loss"]["name"] == (
        "class_weighted_softmax"
    )


# ----------------------------------------------------------------------------------------------
# The config: named options, --config.KEY=VALUE and config files set the same keys
# ----------------------------------------------------------------------------------------------


def _config(*argv):
    return cli.load_config(cli.parse_args(["sweep", *map(str, argv), "--out", "unused"]))


def test_every_named_option_sets_a_key_and_an_override_equals_its_option():
    # one table of named options for both commands; a sweep offers those of every key its runs
    # read but the few that need no option (the folds of a sweep are fixed at 2-1; ...)
    rows = cli.shortcuts("rows")
    assert set(rows.values()) <= set(flatten(S.sweep_config()))
    assert rows == {o: k for o, k in cli.SHORTCUTS.items() if READ_BY.get(k) != "images"}
    assert "lr" in rows and "weights" not in rows and cli.shortcuts("images")["lr"] == rows["lr"]
    by_key = _config("--dataset", "digits", "--config.train.learning_rate=0.05")
    by_flag = _config("--dataset", "digits", "--lr", "0.05")
    assert by_key.train.learning_rate == 0.05 and by_key.is_locked
    assert to_dict(by_key) == to_dict(by_flag)
    betas = _config("--csv", "t.csv", "--betas", "0.5,0.9", "--epochs", "3", "--seeds", "2")
    assert to_dict(betas) == to_dict(
        _config("--config.data.csv=t.csv", "--config.loss.betas=0.5,0.9",
                "--config.train.epochs", "3", "--config.train.seeds=0,1")
    )  # fmt: skip
    assert betas.loss.betas == (0.5, 0.9) and betas.data.csv == "t.csv"
    # as `iml reproduce` takes them: space-separated, or both at once
    for spaced in (["0.5", "0.9"], ["0.5,", "0.9"]):
        assert _config("--csv", "t.csv", "--betas", *spaced).loss.betas == (0.5, 0.9)
    with pytest.raises(ValueError, match="--betas must be numbers, space- or comma-separated, got"):
        _config("--betas", "a,b")


def test_a_config_file_runs_a_sweep_stored_in_the_layout_of_named_options(tmp_path, capsys):
    path = tmp_path / "digits.py"
    path.write_text(
        "from iml.pipeline.sweep import sweep_config\n\n\n"
        "def get_config():\n"
        "    c = sweep_config()\n"
        "    c.data.name = 'digits'\n"
        "    c.data.n_folds = 4\n"
        "    c.loss.betas = (0.5, 0.9)\n"
        "    c.train.seeds = (0,)\n"
        "    return c\n"
    )
    out = tmp_path / "out"
    argv = ["--config", path, "--config.eval.n_bins=5", "--out", out, "--no-progress"]
    assert _sweep(argv) == 0, capsys.readouterr().err
    assert list(json.loads((out / "sweep_table.json").read_text())) == ["0.5", "0.9"]
    stored = json.loads((out / "manifest.json").read_text())["config"]
    keys = ["betas", "seeds", "train", "n_folds", "fold_seed", "n_bins", "betas_per_chunk"]
    assert sorted(stored) == sorted([*keys, "data_sha256", "data", "store"])
    assert stored["betas"] == [0.5, 0.9] and stored["seeds"] == [0] and stored["n_bins"] == 5
    assert stored["data"] == {"name": "digits"} and stored["train"]["solver"] == "exact"
    # The same sweep by named options finds the stored one: it resumes, training nothing.
    flags = ["--dataset", "digits", "--n-folds", "4", "--betas", "0.5,0.9", "--seeds", "1"]
    assert _sweep([*flags, "--n-bins", "5", "--out", out, "--no-progress"]) == 0
    assert "trained chunks []" in capsys.readouterr().out


def test_misspelled_keys_and_bad_values_of_a_config_are_named_before_any_work(tmp_path, capsys):
    out = tmp_path / "out"
    assert _sweep(["--dataset", "digits", "--config.train.learnig_rate=1", "--out", out]) == 2
    assert capsys.readouterr().err == (
        "iml sweep: error: --config.train.learnig_rate: no such key; "
        "did you mean config.train.learning_rate?\n"
    )
    path = tmp_path / "matrix.py"
    path.write_text(
        "from iml.pipeline.sweep import sweep_config\n\n\n"
        "def get_config():\n"
        "    c = sweep_config()\n"
        "    c.data.name = 'digits'\n"
        "    c.loss.name = 'matrix'\n"
        "    return c\n"
    )
    # Keys set by the file (or left at its defaults) are named as config keys, flags as flags.
    for argv, message in [
        ([], "config.loss.name='matrix' needs config.loss.weights"),
        (["--loss-weights", "ones;w[1]=2"], "--loss-weights: cannot read 'w[1]=2'"),
        (["--weights", "ones"], "--weights: the grid of a multiclass loss is --loss-weights"),
        (["--config.loss.weights=ones", "--classes", "binary"], "add --classes all"),
        (["--config.loss.weights=ones", "--config.data.classes=all", "--config.loss.gamma=1"],
         "config.loss.gamma does not apply to config.loss.name='matrix'"),
        (["--config.loss.weights=ones", "--config.data.classes=all", "--epochs", "0"],
         "--epochs: TrainConfig.max_epochs must be an integer >= 1, got 0"),
    ]:  # fmt: skip
        assert _sweep(["--config", path, *argv, "--out", out]) == 2
        err = capsys.readouterr().err
        assert err.startswith("iml sweep: error: ") and err.count("\n") == 1
        assert message in err, err
    plain = to_dict(S.sweep_config())  # plain nested dicts are checked too
    plain["loss"]["name"] = "hinge"
    with pytest.raises(ValueError, match=r"config.loss.name: unknown value 'hinge'"):
        S.check_sweep_config(plain)
    config = S.sweep_config()
    with pytest.raises(
        ValueError, match=r"give exactly one of config.data.csv or config.data.name"
    ):
        S.check_sweep_config(config)
    config.data.name = "digits"
    S.check_sweep_config(config)
    config.train.betas_per_chunk = -1
    with pytest.raises(ValueError, match=r"config.train.betas_per_chunk must be an integer >= 0"):
        S.check_sweep_config(config)
    config.train.betas_per_chunk = 0
    for key, value, message in [
        ("l2", "none", r"config.train.l2: TrainConfig.l2 must be a number >= 0 or 'auto'"),
        ("l2", -1.0, r"config.train.l2: TrainConfig.l2 must be a finite number >= 0"),
        ("l2_grid", (1e-3, 0.0), r"config.train.l2_grid: TrainConfig.l2_grid must be a finite"),
        ("l2_scale", "unit", r"config.train.l2_scale: TrainConfig.l2_scale must be one of"),
    ]:
        config.train[key] = value
        with pytest.raises(ValueError, match=message):
            S.check_sweep_config(config)
        config.train[key] = S.sweep_config().train[key]
    assert not out.exists()


def test_adam_options_of_an_exact_sweep_are_named_as_unused(tmp_path, capsys):
    def prepare(*argv):
        cli._sweep(cli.parse_args(["sweep", "--dataset", "digits", *argv, "--out", str(tmp_path)]))
        return capsys.readouterr().err

    # the logistic model under the log loss is fitted exactly: the learning rate is not read
    err = prepare("--lr", "0.05", "--config.train.epochs=3")
    assert err == (
        "iml sweep: note: --lr, config.train.epochs not used: the logistic model under this loss "
        "is fitted exactly (--solver adam trains it by Adam)\n"
    )
    assert prepare("--lr", "0.05", "--solver", "adam") == ""
    assert prepare("--lr", "0.05", "--model", "mlp") == ""
    assert prepare("--l2", "1e-3") == ""  # the exact solver's own options


def test_a_sweep_records_a_learning_rate_floor_only_where_one_is_set(tmp_path):
    # Sweeps stored before the floor existed ran without one: at its default the record leaves it
    # out, so that such a sweep resumes; a floor that is set is recorded, so it cannot.
    from iml.pipeline.store import RunStore

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(200, 3)), (rng.random(200) < 0.3).astype(np.int32)
    plain = S.plan_sweep(x, y, None, [0.5], train=table_config(solver="adam")).run_config
    floor = S.plan_sweep(x, y, None, [0.5], train=table_config(solver="adam", min_lr=1e-4))
    assert "min_lr" not in plain["train"] and floor.run_config["train"]["min_lr"] == 1e-4
    store = RunStore(tmp_path / "run")
    store.open_run(plain)
    with pytest.raises(ValueError, match=r"first difference: 'train\.min_lr'"):
        store.check_resumable(floor.run_config)


def test_a_logit_average_pools_the_seeds_mean_logit_and_is_recorded(simulated, tmp_path):
    # Adam's seeds differ, so how they pool matters; the record names a pool other than the
    # paper's, and leaves the paper's out, so that stored sweeps resume.
    from scipy.special import expit, logit

    from iml.pipeline.store import RunStore

    x, y = simulated
    config = table_config(**TRAIN, solver="adam")
    by_score = S.run_sweep(x, y, None, [0.9], seeds=2, train=config, progress=False)
    by_logit = S.run_sweep(
        x, y, None, [0.9], seeds=2, train=config, average="logit", progress=False
    )
    np.testing.assert_array_equal(by_logit.member_scores, by_score.member_scores)
    np.testing.assert_allclose(
        by_logit.scores[0], expit(logit(by_score.member_scores[0]).mean(axis=0)), rtol=1e-5
    )
    assert not np.allclose(by_logit.scores, by_score.scores, rtol=1e-7, atol=0)
    np.testing.assert_allclose(by_score.scores[0], by_score.member_scores[0].mean(axis=0))
    plain = S.plan_sweep(x, y, None, [0.9], train=config).run_config
    pooled = S.plan_sweep(x, y, None, [0.9], train=config, average="logit").run_config
    assert "average" not in plain and pooled["average"] == "logit"
    store = RunStore(tmp_path / "run")
    store.open_run(plain)
    with pytest.raises(ValueError, match=r"first difference: 'average'"):
        store.check_resumable(pooled)
    with pytest.raises(ValueError, match=r"average must be one of \('score', 'logit'\)"):
        S.plan_sweep(x, y, None, [0.9], train=config, average="mean")
    assert _config("--dataset", "digits", "--average", "logit").eval.average == "logit"


def test_the_default_ridge_is_scikit_learns_choice_on_the_validation_folds(simulated):
    """l2='auto': per beta and rotation, the grid's penalty whose standardised fit has the lowest
    validation value of the beta-weighted log loss, as a scikit-learn pipeline chooses it."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = simulated
    x = x[:600] * np.array([1.0, 5.0, 0.2], np.float32)
    y = y[:600]
    grid = (1e-3, 1e-2, 1e-1, 1.0)
    train = table_config(l2_grid=grid)  # l2 'auto', standardised, in the paper's units
    result = S.run_sweep(x, y, None, [0.2, 0.9], train=train, progress=False)
    for k, beta in enumerate((0.2, 0.9)):
        chosen, scores = [], np.full(len(y), np.nan)
        for split in nested_cv_splits(result.fold_ids):
            rows, val = split.train, split.val
            best = None
            for l2 in grid:
                clf = LogisticRegression(C=1.0 / (l2 * len(rows)), tol=1e-10, max_iter=10_000,
                                         class_weight={0: 1 - beta, 1: beta})  # fmt: skip
                pipe = make_pipeline(StandardScaler(), clf).fit(x[rows], y[rows])
                p = np.clip(pipe.predict_proba(x[val])[:, 1], 1e-12, 1 - 1e-12)
                loss = np.mean(np.where(y[val] == 1, -beta * np.log(p), -(1 - beta) * np.log1p(-p)))
                if best is None or loss < best[0]:
                    best = (loss, l2, pipe)
            chosen.append(best[1])
            scores[split.test] = best[2].predict_proba(x[split.test])[:, 1]
        assert result.l2[k, 0].tolist() == chosen
        np.testing.assert_allclose(result.scores[k], scores, atol=5e-4)


def test_adam_members_keep_the_grids_penalty_of_lowest_validation_loss(simulated):
    """l2='auto' under Adam: each (seed, loss, rotation) trains at every penalty of the grid and
    keeps the one whose own run has the lowest best validation loss; with standardisation, on
    each rotation's standardised features."""
    x, y = simulated
    _, splits = nested_cv(len(y), labels=y, seed=0)
    splits = splits[:3]
    fields = {**TRAIN, "max_epochs": 10, "solver": "adam", "standardize": True}
    del fields["l2"]
    grid = (1e-4, 0.3)
    auto = train_tabular(LOGISTIC, x, y, splits, BETAS, [0, 1],
                         table_config(**fields, l2="auto", l2_grid=grid))  # fmt: skip
    alone = [train_tabular(LOGISTIC, x, y, splits, BETAS, [0, 1], table_config(**fields, l2=l2))
             for l2 in grid]  # fmt: skip
    vals = np.stack([fit.best_val for fit in alone])  # [G, S, nb, R]
    pick = np.argmin(vals, axis=0)
    np.testing.assert_array_equal(auto.l2, np.asarray(grid)[pick])
    np.testing.assert_allclose(auto.best_val, vals.min(axis=0), rtol=1e-5)
    for g, fit in enumerate(alone):
        here = pick == g
        np.testing.assert_allclose(auto.params["w"][here], fit.params["w"][here], atol=1e-5)
        np.testing.assert_allclose(auto.test_logits[here], fit.test_logits[here], atol=1e-4)
    # the heavy penalty shrinks the weights: the grid's levels were really trained apart
    assert np.abs(alone[1].params["w"]).max() < np.abs(alone[0].params["w"]).max()


def test_the_multiclass_focal_loss_sweeps_with_its_focusing_parameter(tmp_path, capsys):
    """`--loss softmax_focal --gamma 1`: a registered multiclass loss without a closed-form rule,
    its grid over class weights and its gamma from the config, corrected by the generic inverse."""
    out = tmp_path / "out"
    argv = ["--dataset", "digits", "--classes", "all", "--loss", "softmax_focal", "--gamma", "1",
            "--loss-weights", "ones;w[8]=10", "--seeds", "1", "--l2", "1e-3", "--epochs", "1",
            "--lr", "0.05", "--batch-size", "512", "--n-folds", "4", "--out", str(out),
            "--no-progress"]  # fmt: skip
    assert _sweep(argv) == 0, capsys.readouterr().err
    table = json.loads((out / "sweep_table.json").read_text())
    assert list(table) == ["gamma=1,ones", "gamma=1,w[8]=10"]
    with np.load(out / "scores.npz") as stored:
        scores, corrected = stored["scores"][1], stored["corrected"][1]
    spec = loss_spec("softmax_focal", gamma=1.0, class_weights=np.r_[np.ones(8), 10.0, 1.0])
    want = np.asarray(spec.loss_corrected_score(scores[:50].astype(np.float32)))
    np.testing.assert_allclose(corrected[:50], want, atol=1e-4)
    # posteriors on the simplex, wherever the generic inverse found one
    assert np.mean(np.abs(corrected.sum(-1) - 1.0) < 1e-4) > 0.99


def test_the_stored_default_sweep_of_digits_comes_out_the_same():
    """The shipped config experiments/configs/sweep_digits_softmax.py (`iml sweep`'s defaults on
    the built-in digits, all ten classes under three class-weighted softmax losses), whose run
    docs/results/sweep_defaults/digits_softmax was stored by an earlier version of the code
    compiled with XLA's default flags: the same table, every metric and interval. (The command's
    figures are left out: the table is what was stored.)"""
    from pathlib import Path

    from iml.config import load_config_file

    root = Path(__file__).resolve().parents[1]
    stored = root / "docs/results/sweep_defaults/digits_softmax"
    plan, _ = S.prepare_sweep(
        load_config_file(root / "experiments/configs/sweep_digits_softmax.py")
    )
    table = S.execute_sweep(plan, None, progress=False).table
    want = flatten(json.loads((stored / "sweep_table.json").read_text()))
    got = flatten(json.loads(json.dumps(table)))
    assert list(got) == list(want)
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-7, err_msg=key)
