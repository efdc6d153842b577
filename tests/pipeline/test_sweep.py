"""A sweep (``iml.pipeline.sweep``): the vectorized sweep of a grid of losses on a table, its
bookkeeping, its store and resumption, scored against scikit-learn, and the sweep of any loss."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from _sweep_tables import LOGISTIC, TRAIN, D, N, simulated_table, table_config, three_class_table
from sklearn.metrics import brier_score_loss, roc_auc_score

from iml import loss_grid, loss_spec
from iml.calibration import METRICS, MULTICLASS_METRICS, beta_key
from iml.commands import config as command_config
from iml.commands import parser as command_parser
from iml.data.folds import nested_cv_splits
from iml.pipeline import sweep as S
from iml.pipeline import train_plan as TP
from iml.pipeline.defaults import sweep_config
from iml.pipeline.run_config import check_config
from iml.pipeline.scores import RIDGE, SweepResult
from iml.pipeline.store import RunStore
from iml.pipeline.train_plan import run
from iml.recalibration import BASELINES
from iml.training import TrainConfig
from iml.training.tabular import train_tabular

BETAS = [0.5, 0.9]
# each multiclass ECE of a sweep's table with its bootstrap interval
MULTICLASS_INTERVALS = {"top_label_ece_interval", "classwise_ece_interval"}


@pytest.fixture(scope="module")
def simulated() -> tuple[np.ndarray, np.ndarray]:
    return simulated_table()


@pytest.fixture(scope="module")
def sweep_run(simulated, tmp_path_factory) -> tuple[SweepResult, RunStore]:
    x, y = simulated
    store = RunStore(tmp_path_factory.mktemp("sweep"))
    result = S.run_sweep(
        x,
        y,
        None,
        BETAS,
        losses_per_batch=2,
        store=store,
        progress=False,
        train=table_config(**TRAIN),
    )
    return result, store


@pytest.mark.slow
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


@pytest.mark.slow
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
    assert plan.seeds.tolist() == [4] and plan.run_config["plan"]["seeds"] == [4]
    # The record holds the ridge: its scale and standardisation always, its grid where chosen.
    recorded = plan.run_config["train"]
    assert (recorded["l2"], recorded["l2_scale"], recorded["standardize"]) == (0.0, "paper", False)
    assert "l2_grid" not in recorded
    auto = S.plan_sweep(x, y, None, BETAS, train=table_config()).run_config["train"]
    assert auto["l2"] == "auto" and auto["l2_grid"] == sweep_config().train.l2_grid
    assert auto["standardize"] is True
    # Where Adam trains, the seeds are the members' own, and by default there are 8.
    adam = S.plan_sweep(x, y, None, BETAS, train=dataclasses.replace(train, solver="adam"))
    assert adam.seeds.tolist() == list(range(8)) and len(adam.batches) == 1
    assert S.plan_sweep(x, y, None, BETAS, train=train).seeds.tolist() == [0]


@pytest.mark.slow
@pytest.mark.parametrize("beta", [0.01, 0.99])
def test_exact_sweep_matches_scikit_learn_on_a_rare_class_table(beta):
    from sklearn.linear_model import LogisticRegression

    from iml.calibration import score_metrics
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


@pytest.mark.slow
def test_loss_corrected_scores_calibrated_when_logistic_model_is_well_specified(sweep_run):
    table = sweep_run[0].table
    raw, corrected = table["0.9"]["raw"], table["0.9"]["loss_corrected"]
    assert corrected["ece"] < 0.05
    assert raw["ece"] > 0.2
    assert corrected["brier"] < raw["brier"]
    # The correction is strictly increasing: ranking (AUROC) is unchanged.
    assert corrected["auroc"] == pytest.approx(raw["auroc"], abs=1e-6)
    # beta = 1/2 is the unweighted loss: the correction is the identity.
    raw = {k: v for k, v in table["0.5"]["raw"].items() if k != "loss_calibration"}
    corrected = dict(table["0.5"]["loss_corrected"])
    assert corrected.pop("ece_minus_raw") == 0.0
    assert corrected.pop("ece_minus_raw_interval") == [0.0, 0.0]
    assert raw == corrected
    # and the well-specified model's scores are loss-calibrated: the test does not reject them
    for beta in ("0.5", "0.9"):
        assert not table[beta]["raw"]["loss_calibration"]["rejected"]
    assert table["0.5"]["raw"]["ece"] < 0.05


@pytest.mark.slow
def test_table_json_keys_and_values_match_scikit_learn(sweep_run):
    result, store = sweep_run
    stored = json.loads((store.root / "table.json").read_text())
    assert stored == result.table
    assert list(stored) == ["0.5", "0.9"]
    for beta, row in stored.items():
        # the raw and corrected scores, the recalibration baselines of every binary grid, the ridge
        assert list(row) == [*S.METHODS, *BASELINES, RIDGE]
        assert row[RIDGE] == [[0.0] * 10]  # one seed, ten rotations, the config's number
        assert row["raw"]["loss_calibration"]["family"] == 2  # one test per beta of the sweep
        for method in S.METHODS:
            extra = (["loss_calibration", "ece_interval"] if method == "raw" else
                     ["ece_interval", "ece_minus_raw", "ece_minus_raw_interval"])  # fmt: skip
            assert list(row[method]) == [*METRICS, *extra]
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


def _chunk_betas(model, members, *rest, **kwargs):
    """The betas of the chunk that a call of the one loop's ``train`` trains."""
    return sorted({round(float(m.loss.params["beta"]), 6) for m in members})


@pytest.mark.slow
def test_resume_after_crash_skips_finished_chunks(sweep_run, simulated, tmp_path, monkeypatch):
    x, y = simulated
    real = TP.train
    calls = []

    def crash_on_second(*args, **kwargs):
        calls.append(_chunk_betas(*args))
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        return real(*args, **kwargs)

    monkeypatch.setattr(TP, "train", crash_on_second)
    store = RunStore(tmp_path / "run")
    kwargs = dict(losses_per_batch=2, progress=False, train=table_config(**TRAIN))
    betas = [*BETAS, 0.6, 0.8]
    with pytest.raises(RuntimeError, match="simulated crash"):
        S.run_sweep(x, y, None, betas, store=RunStore(store.root), **kwargs)
    assert list(store.keys("batches")) == ["batches/batch-0000"]
    assert not store.has("table")

    calls.clear()
    monkeypatch.setattr(
        TP, "train", lambda *a, **k: (calls.append(_chunk_betas(*a)), real(*a, **k))[1]
    )
    resumed = S.run_sweep(x, y, None, betas, store=RunStore(store.root), **kwargs)
    assert calls == [[0.6, 0.8]]
    assert resumed.batches_trained == [1]
    # The stored chunk is the fixture's first chunk, trained by the same program.
    np.testing.assert_allclose(resumed.member_scores[:2], sweep_run[0].member_scores, atol=1e-6)
    assert list(resumed.table) == ["0.5", "0.9", "0.6", "0.8"]
    # A different configuration in the same folder is refused, naming the difference.
    with pytest.raises(ValueError, match="different config"):
        S.run_sweep(x, y, None, [0.5, 0.8], store=RunStore(store.root), **kwargs)


def test_a_callers_facts_are_recorded_beside_the_sections_they_may_not_name(simulated):
    x, y = simulated
    train = table_config(**TRAIN)
    info = {"data": {"name": "simulated", "rows": N}, "note": "pilot"}
    recorded = S.plan_sweep(x, y, None, BETAS, train=train, run_info=info).run_config
    assert list(recorded) == ["data", "model", "loss", "train", "plan", "eval", "store", "note"]
    assert recorded["data"]["name"] == "simulated" and recorded["data"]["rows"] == N
    assert recorded["data"]["n_folds"] == 10 and len(recorded["data"]["sha256"]) == 64
    for info, named in [({"eval": {}}, "'eval'"), ({"data": {"sha256": "0"}}, "'sha256'"),
                        ({"data": "simulated"}, "must be a mapping")]:  # fmt: skip
        with pytest.raises(ValueError, match=named):
            S.plan_sweep(x, y, None, BETAS, train=train, run_info=info)


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
        S.plan_sweep(x, y, None, [0.5], train=TrainConfig(flip=True))


# ----------------------------------------------------------------------------------------------
# Any loss: focal, multiclass weights
# ----------------------------------------------------------------------------------------------

K = 3


@pytest.fixture(scope="module")
def three_classes() -> tuple[np.ndarray, np.ndarray]:
    return three_class_table()


@pytest.mark.slow
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
    assert set(unweighted["raw"]) == set(MULTICLASS_METRICS) | MULTICLASS_INTERVALS | {
        "loss_calibration"
    }


@pytest.mark.slow
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


# ----------------------------------------------------------------------------------------------
# The config: named options, --config.KEY=VALUE and config files set the same keys
# ----------------------------------------------------------------------------------------------


def _config(*argv):
    return command_config.load_config(
        command_parser.parse_args(["sweep", *map(str, argv), "--out", "unused"])
    )


def test_a_sweep_records_its_learning_rate_floor_and_resumes_only_at_the_same(tmp_path):
    from iml.pipeline.store import RunStore

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(200, 3)), (rng.random(200) < 0.3).astype(np.int32)
    plain = S.plan_sweep(x, y, None, [0.5], train=table_config(solver="adam")).run_config
    floor = S.plan_sweep(x, y, None, [0.5], train=table_config(solver="adam", min_lr=1e-4))
    assert plain["train"]["min_lr"] == 0.0 and floor.run_config["train"]["min_lr"] == 1e-4
    store = RunStore(tmp_path / "run")
    store.open_run(plain, kind="table")
    with pytest.raises(ValueError, match=r"first difference: config\.train\.min_lr"):
        store.check_resumable(floor.run_config, "table")


@pytest.mark.slow
def test_a_logit_average_pools_the_seeds_mean_logit_and_is_recorded(simulated, tmp_path):
    # Adam's seeds differ, so how they pool matters; the record names the pool, and a stored
    # sweep pooled otherwise does not resume.
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
    assert plain["eval"]["average"] == "score" and pooled["eval"]["average"] == "logit"
    store = RunStore(tmp_path / "run")
    store.open_run(plain, kind="table")
    with pytest.raises(ValueError, match=r"first difference: config\.eval\.average"):
        store.check_resumable(pooled, "table")
    with pytest.raises(ValueError, match=r"average must be one of \('score', 'logit'\)"):
        S.plan_sweep(x, y, None, [0.9], train=config, average="mean")
    assert _config("--dataset", "digits", "--config.eval.average=logit").eval.average == "logit"


@pytest.mark.slow
def test_the_default_ridge_is_chosen_from_scikit_learn_fits_validation_losses(simulated):
    """l2='auto': per beta and rotation, of the grid's standardised fits, the level its rule
    keeps, computed here from scikit-learn pipelines' losses on each validation row:
    'lowest_loss', the lowest mean beta-weighted log loss (as LogisticRegressionCV);
    'least_penalty' (the default), the smallest penalty whose mean exceeds the lowest by at most
    half the standard error of their difference, paired over the rows."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = simulated
    x = x[:600] * np.array([1.0, 5.0, 0.2], np.float32)
    y = y[:600]
    grid = (1e-3, 1e-2, 1e-1, 1.0)
    assert table_config().l2_choice == "least_penalty"
    chosen = {}
    for choice in ("least_penalty", "lowest_loss"):
        train = table_config(l2_grid=grid, l2_choice=choice)  # 'auto', standardised, paper units
        result = S.run_sweep(x, y, None, [0.2, 0.9], train=train, progress=False)
        for k, beta in enumerate((0.2, 0.9)):
            want, scores = [], np.full(len(y), np.nan)
            for split in nested_cv_splits(result.fold_ids):
                rows, val = split.train, split.val
                losses, pipes = [], []
                for l2 in grid:
                    clf = LogisticRegression(C=1.0 / (l2 * len(rows)), tol=1e-10, max_iter=10_000,
                                             class_weight={0: 1 - beta, 1: beta})  # fmt: skip
                    pipes.append(make_pipeline(StandardScaler(), clf).fit(x[rows], y[rows]))
                    p = np.clip(pipes[-1].predict_proba(x[val])[:, 1], 1e-12, 1 - 1e-12)
                    losses.append(
                        np.where(y[val] == 1, -beta * np.log(p), -(1 - beta) * np.log1p(-p))
                    )
                losses = np.array(losses)  # [levels, rows]
                best = int(np.argmin(losses.mean(axis=1)))
                if choice == "least_penalty":
                    gap = losses - losses[best]
                    se = gap.std(axis=1, ddof=1) / np.sqrt(len(val))
                    best = min(g for g in range(len(grid)) if gap[g].mean() <= 0.5 * se[g])
                want.append(grid[best])
                scores[split.test] = pipes[best].predict_proba(x[split.test])[:, 1]
            assert result.l2[k, 0].tolist() == want, (choice, beta)
            np.testing.assert_allclose(result.scores[k], scores, atol=5e-4)
        chosen[choice] = result.l2
    # the rules differ here: the default keeps smaller penalties, never larger ones
    assert (chosen["least_penalty"] <= chosen["lowest_loss"]).all()
    assert (chosen["least_penalty"] < chosen["lowest_loss"]).any()


def _leaves(record, prefix: str = "") -> dict:
    """Every number or string of a nested record, by its dotted path (list items by index)."""
    if isinstance(record, dict):
        items = record.items()
    elif isinstance(record, list) and record and isinstance(record[0], dict | list):
        items = enumerate(record)
    else:
        return {prefix: record}
    return {k: v for key, value in items for k, v in _leaves(value, f"{prefix}.{key}").items()}


@pytest.mark.slow
def test_the_stored_default_sweep_of_digits_comes_out_the_same():
    """The shipped config experiments/configs/sweep_digits_softmax.py (`iml sweep`'s defaults on
    the built-in digits, all ten classes under three class-weighted softmax losses), whose run
    docs/results/sweep_defaults/digits_softmax was stored by an earlier version of the code
    compiled with XLA's default flags: the same table row, every metric and interval, for its
    middle loss (w[8] = 10) run alone. Each loss is fitted apart and each ECE's interval
    resamples the same rows whatever the other losses (one draw of counts for every row), so
    the row alone is the row of the whole sweep. (The figures are left out: the table is what
    was stored.)"""
    from pathlib import Path

    from iml.config import load_config_file

    root = Path(__file__).resolve().parents[2]
    stored = root / "docs/results/sweep_defaults/digits_softmax"
    config = load_config_file(root / "experiments/configs/sweep_digits_softmax.py")
    assert config.loss.weights == "ones;w[8]=10;w[8]=100"
    # the ridge as the stored run chose it (its manifest, migrated, says how)
    manifest = json.loads((stored / "manifest.json").read_text())
    config.train.l2_choice = manifest["config"]["train"]["l2_choice"]
    assert config.train.l2_choice == "lowest_loss"
    config.loss.weights = "w[8]=10"
    plan, _ = S.prepare_sweep(check_config(config))
    trained = run(S.sweep_experiment(plan), None, progress=False)
    table = S.sweep_result(plan, [b.entry for b in trained]).table
    want = _leaves(json.loads((stored / "table.json").read_text())["w[8]=10"])
    got = _leaves(json.loads(json.dumps(table["w[8]=10"])))
    # the same fields, the paired differences from the raw scores among them (added to the
    # stored table from its ensemble scores after the run)
    assert list(got) == list(want)
    assert any("_minus_raw" in key for key in want)
    # The loss-calibration verdicts are adjusted over the run's tests (three losses' in the
    # stored sweep, one's here), and the power is at Holm's first level: those depend on the
    # grid; each test's own statistic, p-value, bins and miss do not.
    family = ("p_value_familywise", "rejected", "family", "verdict", "power", "power_level")
    for key, value in want.items():
        if key.rsplit(".", 1)[-1] in family:
            continue
        if isinstance(value, str):
            assert got[key] == value, key
        elif "loss_calibration" in key:  # float32 sums of squares: the last digits move
            np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=key)
        else:
            np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-7, err_msg=key)
