"""Tests of the pipeline's planning, aggregation and honest recalibration (no training here)."""

import json
from pathlib import Path

import numpy as np
import pytest

from iml.config import lookup, to_dict
from iml.pipeline import (
    RunStore,
    aggregate_members,
    check_betas,
    ensemble_sizes,
    load_ensemble,
    make_plan,
)
from iml.pipeline.report import METRICS, cross_fit, table_markdown
from iml.pipeline.runner import (
    check_config,
    check_resumable,
    config_model,
    default_config,
    initial_variables,
)


def _config(**values):
    """The default config with ``values`` set by dotted key, ``_config(**{"train.epochs": 1})``."""
    config = default_config()
    for key, value in values.items():
        section, name = key.split(".")
        config[section][name] = value
    return config


# ----------------------------------------------------------------------------------------------
# Planning
# ----------------------------------------------------------------------------------------------


def test_full_cycle_tests_every_observation_once_per_seed():
    labels = (np.arange(200) % 7 == 0).astype(int)
    plan = make_plan(200, betas=(0.5, 0.9, 0.99), seeds=(0, 3), labels=labels)
    assert len(plan.members) == 10 * 3 * 2
    assert [len(b.members) for b in plan.batches] == [6] * 10
    sizes = ensemble_sizes(plan, 200)
    for beta in (0.5, 0.9, 0.99):
        np.testing.assert_array_equal(sizes[beta], 2)  # one rotation tests it, once per seed
    for m in plan.members:
        s = m.split
        assert len(s.train_folds) == 7 and len(s.val_folds) == 2 and len(s.test_folds) == 1
        parts = np.concatenate([s.train, s.val, s.test])
        assert len(np.unique(parts)) == 200  # disjoint and complete


def test_batches_share_a_rotation_and_keys_are_distinct():
    plan = make_plan(60, betas=(0.5, 0.9), seeds=(0,), n_folds=5, n_val_folds=1)
    for batch in plan.batches:
        assert len({m.rotation for m in batch.members}) == 1
        assert sorted(m.beta for m in batch.members) == [0.5, 0.9]
    assert len({b.key for b in plan.batches}) == len(plan.batches) == 5


def test_partial_rotations_leave_untested_observations_with_size_zero():
    plan = make_plan(50, betas=(0.9,), n_folds=5, n_val_folds=1, rotations=(0, 2))
    sizes = ensemble_sizes(plan, 50)[0.9]
    tested = np.isin(plan.fold_ids, [0, 2])  # rotation r tests fold r (one test fold)
    np.testing.assert_array_equal(sizes, tested.astype(int))


def test_groups_never_straddle_training_and_test():
    groups = np.repeat(np.arange(40), 3)
    plan = make_plan(120, betas=(0.5,), groups=groups, n_folds=5, n_val_folds=1)
    for m in plan.members:
        train_groups = set(groups[m.split.train])
        assert not train_groups & set(groups[m.split.test])
        assert not train_groups & set(groups[m.split.val])


@pytest.mark.parametrize("betas", [(0.5, 1.0), (0.0,), (), (0.5, 0.5), (float("nan"),)])
def test_bad_betas_are_refused(betas):
    with pytest.raises(ValueError, match="beta"):
        check_betas(betas)


# ----------------------------------------------------------------------------------------------
# Aggregation
# ----------------------------------------------------------------------------------------------


def _save_batch(store, key, members):
    tests = [np.asarray(m[1]) for m in members]
    store.save_arrays(
        key,
        beta=np.array([m[0] for m in members]),
        test_idx=np.concatenate(tests),
        test_scores=np.concatenate([np.asarray(m[2], np.float32) for m in members]),
        test_offsets=np.cumsum([0] + [len(t) for t in tests]),
    )


def test_ensemble_mean_and_size_by_hand(tmp_path):
    store = RunStore(tmp_path)
    _save_batch(store, "batches/batch-0000", [(0.5, [0, 1], [0.2, 0.4]), (0.9, [0, 2], [0.5, 0.7])])
    _save_batch(store, "batches/batch-0001", [(0.5, [1, 2], [0.6, 0.8]), (0.5, [1], [0.5])])
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
    _save_batch(
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


# ----------------------------------------------------------------------------------------------
# Honest recalibration and the table
# ----------------------------------------------------------------------------------------------


class _MeanLabel:
    """A recalibrator that predicts the mean label it was fitted on, and records the fit."""

    fits: list

    def __init__(self, fits):
        self.fits = fits

    def fit(self, scores, labels):
        self.fits.append(np.asarray(scores).copy())
        self.rate = float(np.mean(labels))
        return self

    def transform(self, scores):
        return np.full(len(scores), self.rate)


def test_cross_fit_never_fits_on_the_evaluated_fold():
    rng = np.random.default_rng(0)
    scores = rng.uniform(size=30)
    labels = (rng.uniform(size=30) < 0.3).astype(int)
    folds = np.arange(30) % 3
    fits = []
    out = cross_fit(lambda y: _MeanLabel(fits), scores, labels, folds)
    for f in range(3):
        expected = labels[folds != f].mean()
        np.testing.assert_allclose(out[folds == f], expected)
        assert not np.isin(scores[folds == f], fits[f]).any()


@pytest.mark.parametrize("name", ["platt", "beta", "temperature"])
def test_weighted_cross_fit_equals_fitting_on_the_other_folds_alone(name):
    from iml.pipeline.report import BASELINES

    rng = np.random.default_rng(1)
    scores = np.clip(rng.beta(0.5, 3.0, size=300), 1e-4, 1 - 1e-4)
    labels = (rng.uniform(size=300) < scores**0.7).astype(int)
    folds = np.arange(300) % 5
    make = BASELINES[name](0.9)
    out = cross_fit(make, scores, labels, folds)  # held-out observations weigh 0
    for f in range(5):
        fit = folds != f
        alone = make(labels[fit]).fit(scores[fit].astype(np.float32), labels[fit])
        want = np.asarray(alone.transform(scores[~fit].astype(np.float32)))
        np.testing.assert_allclose(out[~fit], want, rtol=2e-5, atol=1e-7)


def test_markdown_table_lists_every_method_and_metric():
    metrics = dict.fromkeys(METRICS, 0.25)
    raw = {**metrics, "loss_calibration_gap": 0.01, "loss_calibration_p_value": 0.5}
    text = table_markdown({"0.9": {"raw": raw, "platt": metrics}})
    assert "## beta = 0.9" in text
    assert "| raw | 0.2500 | 0.2500 | 0.2500 | 0.2500 | 0.2500 |" in text
    assert "| platt |" in text and "p-value 0.5000" in text
    assert json.loads(json.dumps(raw)) == raw


# ----------------------------------------------------------------------------------------------
# Config checks
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("loss.betas", (0.5, 1.5), r"config\.loss\.betas must lie in \(0, 1\)"),
        (
            "loss.name",
            "hinge",
            r"config\.loss\.name must be one of \['focal', 'log', 'squared'\].*"
            r"\['class_weighted_softmax', 'matrix', 'softmax_focal'\].*got 'hinge'",
        ),
        ("loss.gamma", -1.0, r"config\.loss\.gamma must be a finite number >= 0, got -1\.0"),
        ("data.name", "mnist", "config.data.name: unknown dataset 'mnist'"),
        ("model.name", "resnet", "config.model.name: unknown model 'resnet'"),
        ("train.epochs", 0, r"config\.train\.epochs must be an integer >= 1"),
        ("train.eval_batch_size", 0, r"config\.train\.eval_batch_size must be an integer >= 1"),
        ("data.n_folds", 3, r"config\.data\.n_folds=3 leaves no training fold"),
        ("data.image_size", 2, r"config\.data\.image_size=2 is too small"),
        ("model.conv_impl", "im2col", r"config\.model\.conv_impl must be '' .* or one of"),
        ("train.seeds", (-1,), r"config\.train\.seeds must be non-negative"),
        ("train.seeds", (0, 3, 0), r"config\.train\.seeds repeats a seed: \[0, 3, 0\]"),
        (
            "train.min_learning_rate",
            -1e-4,
            r"config\.train\.min_learning_rate must be a finite number >= 0",
        ),
        (
            "eval.average",
            "median",
            r"config\.eval\.average must be one of \('score', 'logit'\), got 'median'",
        ),
    ],
)
def test_check_config_names_the_bad_key(key, value, match):
    with pytest.raises(ValueError, match=match):
        check_config(_config(**{key: value}))


def test_a_model_that_is_no_densenet_takes_no_torchvision_weights():
    config = _config(**{"model.name": "logistic", "model.weights": "densenet121.pth"})
    with pytest.raises(ValueError, match="weights fit the DenseNets, not 'logistic'"):
        check_config(config)


def test_the_validation_batch_reaches_the_trainer_and_defaults_to_what_stored_runs_used():
    from iml.pipeline.runner import _train_config
    from iml.training import TrainConfig

    assert _train_config(_config(**{"train.eval_batch_size": 16})).eval_batch_size == 16
    # a run stored before the key existed takes the default, which is what it validated with
    assert default_config().train.eval_batch_size == TrainConfig().eval_batch_size == 64


def test_check_config_refuses_unknown_keys_wrong_types_and_missing_dirs(tmp_path):
    config = to_dict(default_config())  # as nested dicts, which no lock guards
    config["train"]["epochz"] = 3
    with pytest.raises(
        ValueError, match=r"config\.train\.epochz; did you mean config\.train\.epochs"
    ):
        check_config(config)
    del config["train"]["epochz"], config["eval"]["n_bins"]
    with pytest.raises(ValueError, match=r"config lacks key\(s\) config\.eval\.n_bins"):
        check_config(config)
    config = to_dict(default_config())
    config["train"]["learning_rate"] = "fast"
    with pytest.raises(ValueError, match=r"config\.train\.learning_rate: expected a number"):
        check_config(config)
    with pytest.raises(FileNotFoundError, match=r"config\.data\.data_dir"):
        check_config(_config(**{"data.data_dir": str(tmp_path / "nope")}))


def test_conv_impl_key_reaches_the_model():
    import jax

    from iml.models import DEFAULT_CONV_IMPL

    default = DEFAULT_CONV_IMPL[jax.default_backend()]
    assert config_model(default_config()).conv_impl == default  # the backend's default
    matmul = _config(**{"model.conv_impl": "matmul"})
    check_config(matmul)
    assert config_model(matmul).conv_impl == "matmul"


def test_check_config_names_a_missing_weights_file(tmp_path):
    config = _config(**{"model.weights": str(tmp_path / "densenet121.pth")})
    with pytest.raises(FileNotFoundError, match=r"config\.model\.weights"):
        check_config(config)


def test_initial_variables_adapt_torchvision_rgb_weights_to_gray_images(tmp_path):
    torch = pytest.importorskip("torch")
    import jax
    import jax.numpy as jnp

    from iml.models import variables_to_torchvision_state_dict

    config = _config(**{"model.name": "densenet_tiny"})
    model = config_model(config)
    assert initial_variables(config, model, 1) is None  # no file: random initialisation
    rgb = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, 8, 8, 3)))
    state = variables_to_torchvision_state_dict(rgb)
    path = tmp_path / "weights.pth"
    torch.save({k: torch.from_numpy(v.copy()) for k, v in state.items()}, path)
    weighted = _config(**{"model.name": "densenet_tiny", "model.weights": str(path)})
    got = initial_variables(weighted, model, 1)
    np.testing.assert_allclose(
        got["params"]["conv0"]["kernel"][:, :, 0],
        np.asarray(rgb["params"]["conv0"]["kernel"]).sum(axis=2),
        rtol=1e-6,
    )
    np.testing.assert_array_equal(
        got["batch_stats"]["norm5"]["var"], rgb["batch_stats"]["norm5"]["var"]
    )
    other = config_model(default_config())
    with pytest.raises(ValueError, match="state_dict"):
        initial_variables(weighted, other, 1)


def test_a_run_stored_before_a_new_config_key_still_resumes(tmp_path):
    store = RunStore(tmp_path / "run")
    old = to_dict(default_config())
    del old["model"]["weights"]  # a run made before the key existed
    store.open_run(old)
    config = default_config()
    assert check_resumable(config, store.root) == old
    store.open_run(check_resumable(config, store.root))  # resumes without complaint
    with pytest.raises(ValueError, match=r"config\.model\.weights: '' stored, 'imagenet.pth' now"):
        check_resumable(_config(**{"model.weights": "imagenet.pth"}), store.root)


# ----------------------------------------------------------------------------------------------
# The smooth calibration error in the table and the smooth figures of a report
# ----------------------------------------------------------------------------------------------


def test_score_metrics_include_the_smooth_ece_of_the_clipped_scores():
    from iml.calibration import smooth_ece
    from iml.pipeline.report import score_metrics

    rng = np.random.default_rng(0)
    scores = rng.beta(1.0, 6.0, 800)
    labels = (rng.random(800) < scores).astype(np.int32)
    scores[:5] = 0.0  # clipped to 1e-7 first, as every metric sees them
    metrics = score_metrics(scores, labels)
    assert list(metrics) == list(METRICS) and "smooth_ece" in METRICS
    clipped = np.clip(scores, 1e-7, 1 - 1e-7).astype(np.float32)
    assert metrics["smooth_ece"] == pytest.approx(float(smooth_ece(clipped, labels).ece), rel=1e-6)
    assert 0.0 <= metrics["smooth_ece"] < 0.05


def test_report_writes_the_smooth_ece_of_every_method_and_the_smooth_figures(tmp_path):
    from iml.pipeline.report import report_run

    rng = np.random.default_rng(1)
    n, betas = 400, (0.5, 0.9)
    posterior = rng.beta(1.0, 6.0, n)
    labels = (rng.random(n) < posterior).astype(np.int32)
    store = RunStore(tmp_path / "run")
    store.open_run({"betas": list(betas), "n_bins": 10, "n_bootstrap": 10, "report_seed": 0})
    store.save_arrays("data/folds", labels=labels, fold_ids=np.arange(n) % 4)
    members = [
        (beta, np.arange(n), beta * posterior / (beta * posterior + (1 - beta) * (1 - posterior)))
        for beta in betas
    ]
    _save_batch(store, "batches/batch-0000", members)
    table = report_run(store.root, tmp_path / "out", formats=("png",))
    for methods in table.values():
        for metrics in methods.values():
            assert 0.0 <= metrics["smooth_ece"] < 1.0
    # Raw scores of beta = 0.9 overstate the rate; their loss correction undoes it.
    assert table["0.9"]["raw"]["smooth_ece"] > 0.1 > table["0.9"]["loss_corrected"]["smooth_ece"]
    assert "smooth_ece" in (tmp_path / "out" / "table.md").read_text()
    for name in ("smooth_raw", "smooth_corrected"):
        assert (tmp_path / "out" / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


def _stored_run_at_beta_09(
    root: Path, seed: int, n: int, noise: tuple[float, ...] = ()
) -> tuple[RunStore, np.ndarray, list[np.ndarray]]:
    """A stored run at beta = 0.9 of one member per seed: the optimal scores of a known
    posterior, or, for each ``noise``, those scores times log-normal noise of that scale."""
    rng = np.random.default_rng(seed)
    beta = 0.9
    posterior = rng.beta(1.0, 6.0, n)
    labels = (rng.random(n) < posterior).astype(np.int32)
    optimal = beta * posterior / (beta * posterior + (1 - beta) * (1 - posterior))
    members = [np.clip(optimal * np.exp(rng.normal(0, s, n)), 1e-4, 1 - 1e-4) for s in noise]
    members = members or [optimal]
    store = RunStore(root)
    store.open_run({"betas": [beta], "n_bins": 10, "n_bootstrap": 10, "report_seed": 0})
    store.save_arrays("data/folds", labels=labels, fold_ids=np.arange(n) % 4)
    _save_batch(store, "batches/batch-0000", [(beta, np.arange(n), m) for m in members])
    return store, labels, members


def test_a_stored_run_reports_with_either_average_and_says_which(tmp_path):
    # The members are stored once; `iml figures --average logit` pools their logits instead.
    from scipy.special import expit, logit

    from iml.pipeline.report import report_run

    store, _, seeds = _stored_run_at_beta_09(tmp_path / "run", 3, 300, noise=(0.2, 0.5))
    tables = {}
    for average in ("score", "logit"):
        out = tmp_path / average
        overrides = {"average": average}
        tables[average] = report_run(store.root, out, formats=("png",), eval_overrides=overrides)
        assert json.loads((out / "ensemble.json").read_text())["average"] == average
        with np.load(out / "ensemble_scores.npz") as stored:
            pooled = stored["scores"][0]
        stored32 = [s.astype(np.float32).astype(float) for s in seeds]
        by_hand = np.mean(stored32, 0) if average == "score" else expit(np.mean(logit(stored32), 0))
        np.testing.assert_allclose(pooled, by_hand, rtol=1e-9)
    raw = {a: tables[a]["0.9"]["raw"]["ece"] for a in tables}
    assert raw["score"] != raw["logit"]
    default = report_run(store.root, tmp_path / "default", formats=("png",))
    assert default == tables["score"]  # the run's config.eval.average, 'score' by default
    with pytest.raises(ValueError, match=r"config\.eval\.average must be one of \('score', "):
        report_run(store.root, tmp_path / "bad", eval_overrides={"average": "mean"})
    assert not (tmp_path / "bad").exists()


def test_a_stored_run_reports_with_other_eval_settings_and_records_them(tmp_path):
    # `iml figures --config.eval.n_bins=5`: the same members, binned otherwise, and said so
    from iml.calibration import expected_calibration_error
    from iml.pipeline.report import report_run

    store, labels, (optimal,) = _stored_run_at_beta_09(tmp_path / "run", 4, 400)
    tables = {}
    for n_bins in (10, 5):
        out = tmp_path / f"bins{n_bins}"
        tables[n_bins] = report_run(
            store.root, out, formats=("png",), eval_overrides={"n_bins": n_bins}
        )
        settings = json.loads((out / "ensemble.json").read_text())["eval"]
        assert settings == {"n_bins": n_bins, "n_bootstrap": 10, "report_seed": 0,
                            "average": "score"}  # fmt: skip
        raw = np.asarray(optimal, np.float32).astype(float)
        by_hand = float(expected_calibration_error(raw, labels, n_bins))
        assert tables[n_bins]["0.9"]["raw"]["ece"] == pytest.approx(by_hand, rel=1e-5)
    assert tables[5]["0.9"]["raw"]["ece"] != tables[10]["0.9"]["raw"]["ece"]
    assert report_run(store.root, tmp_path / "stored", formats=("png",)) == tables[10]
    for overrides, message in (
        ({"n_binz": 5}, r"config\.eval\.n_binz: no such key; did you mean config\.eval\.n_bins"),
        ({"n_bins": 0}, r"config\.eval\.n_bins must be an integer >= 1, got 0"),
        ({"n_bootstrap": "many"}, r"config\.eval\.n_bootstrap: expected an integer"),
        ({"report_seed": -1}, r"config\.eval\.report_seed must be an integer >= 0, got -1"),
    ):
        with pytest.raises(ValueError, match=message):
            report_run(store.root, tmp_path / "bad", eval_overrides=overrides)
        assert not (tmp_path / "bad").exists()


def test_two_close_betas_keep_their_own_rows_and_curves_in_the_report(tmp_path):
    # f"{beta:g}" would give both "1": the table, its Markdown and the figures keep them apart.
    from iml.pipeline.report import report_run

    rng = np.random.default_rng(2)
    n, betas = 400, (0.9999991, 0.9999992)
    posterior = rng.beta(1.0, 6.0, n)
    labels = (rng.random(n) < posterior).astype(np.int32)
    store = RunStore(tmp_path / "run")
    store.open_run({"betas": list(betas), "n_bins": 10, "n_bootstrap": 10, "report_seed": 0})
    store.save_arrays("data/folds", labels=labels, fold_ids=np.arange(n) % 4)
    members = [(beta, np.arange(n), posterior) for beta in betas]
    _save_batch(store, "batches/batch-0000", members)
    table = report_run(store.root, tmp_path / "out", formats=("svg",))
    assert list(table) == ["0.9999991", "0.9999992"]
    markdown = (tmp_path / "out" / "table.md").read_text()
    assert "## beta = 0.9999991" in markdown and "## beta = 0.9999992" in markdown
    sizes = json.loads((tmp_path / "out" / "ensemble.json").read_text())["ensemble_size"]
    assert list(sizes) == ["0.9999991", "0.9999992"]
    for figure in ("figure1", "figure3", "figure4"):
        svg = (tmp_path / "out" / "figures" / f"{figure}.svg").read_text()
        for key in table:
            assert f'id="data-{key}"' in svg, (figure, key)


def test_a_run_stored_with_a_retired_config_key_still_resumes(tmp_path):
    from iml.pipeline.runner import FLAT_KEYS, RETIRED_KEYS

    store = RunStore(tmp_path / "run")
    flat = {flat: lookup(to_dict(default_config()), key) for flat, key in FLAT_KEYS.items()}
    old = {**flat, "csv_path": "", "csv_target": ""}  # as runs stored them, flat
    assert set(RETIRED_KEYS) == {"csv_path", "csv_target"}
    store.open_run(old)
    assert check_resumable(default_config(), store.root) == old
    store.open_run(check_resumable(default_config(), store.root))  # resumes without complaint
    with pytest.raises(ValueError, match=r"config\.loss\.betas: \[0\.5, 0\.9, 0\.99\] stored"):
        check_resumable(_config(**{"loss.betas": (0.5,)}), store.root)
    # a run stored before config.eval.average pooled scores; other report settings name the
    # iml figures command that reports the stored members with them
    hint = r"iml figures --run .*run --out DIR --config\.eval\.average=logit$"
    with pytest.raises(ValueError, match=r"config\.eval\.average: 'score' stored, 'logit' now.*"
                       + hint):  # fmt: skip
        check_resumable(_config(**{"eval.average": "logit"}), store.root)
    both = _config(**{"eval.n_bins": 20, "eval.average": "logit"})
    with pytest.raises(ValueError, match=r"config\.eval\.average: .* --out DIR "
                       r"--config\.eval\.average=logit --config\.eval\.n_bins=20$"):  # fmt: skip
        check_resumable(both, store.root)
    # where training differs too, the stored members do not serve: no iml figures hint
    trained = _config(**{"eval.n_bins": 20, "train.epochs": 5})
    with pytest.raises(ValueError, match=r"config\.eval\.n_bins: 10 stored, 20 now") as err:
        check_resumable(trained, store.root)
    assert "iml figures" not in str(err.value)
    store = RunStore(tmp_path / "csv")
    store.open_run({**old, "csv_path": "data.csv"})  # a run this software no longer makes
    with pytest.raises(ValueError, match=r"config\.csv_path='data\.csv': a retired key"):
        check_resumable(default_config(), store.root)


def test_a_focal_run_is_corrected_by_the_focal_rule_and_drops_the_prior_shift():
    """`iml reproduce --loss focal`: the run's loss (run_loss) is the focal loss by its class
    weight alpha, and the report corrects and tests with its rule."""
    import jax.numpy as jnp

    from iml.pipeline.report import summary_table
    from iml.pipeline.runner import run_loss
    from iml.pipeline.store import EnsembleScores
    from iml.spec import loss_spec

    family = run_loss(_config(**{"loss.name": "focal", "loss.gamma": 2.0, "loss.betas": (0.9,)}))
    assert family.name == "focal" and family.params == {"gamma": 2.0}
    assert family.weight_name == "alpha" and run_loss(default_config()).name == "log"
    rng = np.random.default_rng(0)
    gamma = rng.beta(0.5, 3.0, 1500)
    labels = (rng.random(gamma.size) < gamma).astype(np.int32)
    scores = np.asarray(loss_spec("focal", gamma=2.0, alpha=0.9).optimal_score(jnp.asarray(gamma)))
    ensemble = EnsembleScores(
        (0.9,), scores[None].astype(np.float64), np.ones((1, gamma.size), np.int64)
    )
    folds = np.arange(gamma.size) % 4
    table = summary_table(ensemble, labels, folds, n_bootstrap=20, loss=family)["0.9"]
    assert "prior_shift" not in table and "platt" in table
    assert table["raw"]["ece"] > 0.1 > 0.03 > table["loss_corrected"]["ece"]
    assert table["raw"]["loss_calibration_p_value"] > 0.05  # optimal for the focal loss
    log_table = summary_table(ensemble, labels, folds, n_bootstrap=20)["0.9"]
    assert log_table["loss_corrected"]["ece"] > 0.05  # the log loss's inverse is the wrong one


# ----------------------------------------------------------------------------------------------
# Multiclass runs: a grid of weighted multiclass losses over every class
# ----------------------------------------------------------------------------------------------

MULTICLASS = {
    "data.classes": "all",
    "data.image_size": 8,
    "data.max_examples": 400,
    "data.n_folds": 5,
    "data.n_val_folds": 1,
    "model.name": "densenet_tiny",
    "loss.name": "class_weighted_softmax",
    "loss.weights": "ones;w[8]=10",
    "train.epochs": 1,
    "train.members_per_batch": 10,  # every member in one call of the trainer
    "train.checkpoint": False,
    "eval.n_bins": 5,
}


def test_plan_of_a_multiclass_grid_keys_members_by_loss():
    plan = make_plan(100, losses=("ones", "w[8]=10"), seeds=(0, 1), n_folds=5, n_val_folds=1)
    assert plan.keys == ("ones", "w[8]=10") and plan.betas == ()
    assert {m.beta for m in plan.members} == {None}
    assert [m.loss for m in plan.batches[0].members] == [0, 0, 1, 1]
    sizes = ensemble_sizes(plan, 100)
    np.testing.assert_array_equal(sizes["w[8]=10"], 2)  # one rotation tests it, once per seed
    with pytest.raises(ValueError, match="not both"):
        make_plan(100, betas=(0.5,), losses=("ones",))
    with pytest.raises(ValueError, match="distinct"):
        make_plan(100, losses=("ones", "ones"))


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


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"loss.weights": ""}, r"needs config\.loss\.weights"),
        ({"loss.betas": (0.9,)}, r"config\.loss\.betas does not apply"),
        ({"data.classes": "binary"}, r"is multiclass; set config\.data\.classes='all'"),
        ({"loss.weights": "ones;B[1,1]=2"}, r"config\.loss\.weights: cannot read 'B\[1,1\]=2'"),
        ({"loss.name": "log"}, r"config\.loss\.weights applies to the multiclass losses"),
        ({"loss.name": "log", "loss.weights": ""}, r"classes='all' needs a multiclass loss"),
        ({"data.classes": "some"}, r"config\.data\.classes must be 'binary' or 'all'"),
        (
            {"data.name": "pneumoniamnist"},
            r"dataset 'pneumoniamnist' has no classes beyond its binary label; the image "
            r"datasets with classes are \['digits'\]",
        ),
    ],
)
def test_check_config_of_a_multiclass_run_names_the_bad_key(values, match):
    with pytest.raises(ValueError, match=match):
        check_config(_config(**{**MULTICLASS, **values}))


def test_a_class_out_of_range_is_named_when_the_data_is_loaded():
    from iml.pipeline.runner import load_run_data

    with pytest.raises(ValueError, match=r"config\.loss\.weights: index \[12\] is out of range"):
        load_run_data(_config(**{**MULTICLASS, "loss.weights": "ones;w[12]=2"}))


_AUTOTUNER = "INTERNAL: Failed to get configs for: 269 out of 1029 instructions."
_ILLEGAL_ADDRESS = (
    "INTERNAL: CUDA error: Failed to check stream capturing status: CUDA_ERROR_ILLEGAL_ADDRESS: "
    "an illegal memory access was encountered [executable_name='jit_member_train_step']"
)
_ON_THE_GPU = r"failed on the GPU \(XLA's autotuner or a CUDA illegal address\)"


@pytest.mark.parametrize(
    ("failure", "error", "what"),
    [
        (
            "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9.1GiB",
            MemoryError,
            "ran out of device memory",
        ),
        # how 62 and 48 DenseNet-121s in one program failed on an H200, where 32 ran
        (_AUTOTUNER, RuntimeError, _ON_THE_GPU),
        (_ILLEGAL_ADDRESS, RuntimeError, _ON_THE_GPU),
    ],
)
def test_a_batch_out_of_device_memory_or_failing_to_compile_names_members_per_batch(
    tmp_path, monkeypatch, failure, error, what
):
    from iml.pipeline import runner

    def fail(*args, **kwargs):
        raise RuntimeError(failure)

    monkeypatch.setattr(runner, "train", fail)
    config = _config(**{**MULTICLASS, "train.members_per_batch": 4})
    with pytest.raises(
        error,
        match=rf"batch 0: 4 members trained in one program {what}; "
        r".*--config\.train\.members_per_batch=2, or with fewer validation images per member "
        r"and step \(--config\.train\.eval_batch_size, now 64\), in a new output directory",
    ) as err:
        runner.run_experiment(config, tmp_path / "run", progress=False)
    assert str(err.value.__cause__) == failure


def test_other_batch_failures_propagate_as_raised(tmp_path, monkeypatch):
    from iml.pipeline import runner

    def untuned(*args, **kwargs):
        raise RuntimeError(_AUTOTUNER)

    # a single member has no smaller batch to try
    monkeypatch.setattr(runner, "train", untuned)
    one = _config(**{**MULTICLASS, "train.members_per_batch": 1})
    with pytest.raises(RuntimeError, match=r"^INTERNAL: Failed to get configs"):
        runner.run_experiment(one, tmp_path / "single", progress=False)
    monkeypatch.setattr(runner, "train", lambda *a, **k: 1 / 0)
    config = _config(**{**MULTICLASS, "train.members_per_batch": 4})
    with pytest.raises(ZeroDivisionError):
        runner.run_experiment(config, tmp_path / "other", progress=False)


@pytest.fixture(scope="module")
def multiclass_run(tmp_path_factory):
    from iml.pipeline.report import report_run
    from iml.pipeline.runner import run_experiment

    out = tmp_path_factory.mktemp("multiclass")
    run_experiment(_config(**MULTICLASS), out, progress=False)
    return out, report_run(out, formats=("png",))


def test_a_multiclass_run_is_scored_per_loss_and_corrected_by_its_own_rule(multiclass_run):
    """`iml reproduce --classes all --loss class_weighted_softmax --loss-weights 'ones;w[8]=10'`:
    one ensemble per loss, softmax class scores, each corrected by the inverse of its own rule
    (Proposition 4: a_j / w_j, renormalised), reported with the multiclass metrics."""
    from iml.calibration import MULTICLASS_METRICS

    out, table = multiclass_run
    assert list(table) == ["ones", "w[8]=10"]
    for row in table.values():
        assert set(row) == {"raw", "loss_corrected"}
        intervals = {"top_label_ece_interval", "classwise_ece_interval"}
        assert set(row["raw"]) == set(MULTICLASS_METRICS) | intervals
        for method in row.values():  # each ECE inside its own bootstrap interval's reach
            for name in ("top_label_ece", "classwise_ece"):
                low, high = method[f"{name}_interval"]
                assert 0 <= low <= high and low - 0.05 < method[name] < high + 0.05
    assert json.loads((out / "table.json").read_text()) == table
    with np.load(out / "ensemble_scores.npz") as stored:
        keys, scores, corrected = stored["keys"], stored["scores"], stored["corrected"]
        labels, sizes = stored["labels"], stored["sizes"]
    assert keys.tolist() == ["ones", "w[8]=10"] and scores.shape == (2, 400, 10)
    assert labels.max() == 9 and (sizes == 1).all()  # one full cycle: each tested once
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)  # softmax
    np.testing.assert_allclose(corrected[0], scores[0], atol=1e-5)  # unweighted: the identity
    w = np.ones(10)
    w[8] = 10.0
    by_hand = scores[1] / w
    np.testing.assert_allclose(corrected[1], by_hand / by_hand.sum(-1, keepdims=True), atol=1e-5)
    assert corrected[1][:, 8].mean() < scores[1][:, 8].mean()
    # Each class's ECE; their mean is the class-wise ECE of the table.
    by_class = json.loads((out / "ece_by_class.json").read_text())
    assert list(by_class) == ["ones", "w[8]=10"]
    for key, row in by_class.items():
        for method in ("raw", "loss_corrected"):
            assert len(row[method]) == 10
            assert np.mean(row[method]) == pytest.approx(table[key][method]["classwise_ece"])
    assert by_class["ones"]["raw"] == pytest.approx(by_class["ones"]["loss_corrected"], abs=1e-6)
    # The unweighted ensemble's raw scores are its corrected ones, metric by metric.
    for metric, value in table["ones"]["raw"].items():
        assert table["ones"]["loss_corrected"][metric] == pytest.approx(value, abs=1e-6)
    for key in ("ones", "w_8_=10"):
        assert (out / "figures" / "reliability_by_class" / f"{key}.png").stat().st_size > 0
    assert (out / "figures" / "ece_by_loss.png").exists()
    assert not (out / "revealed.json").exists()


def test_reveal_refuses_a_multiclass_run_naming_its_loss(multiclass_run):
    from iml.pipeline.reveal import load_reveal_input

    with pytest.raises(ValueError, match=r"multiclass run .*class_weighted_softmax"):
        load_reveal_input(multiclass_run[0])


def test_the_summary_table_gives_each_test_its_power_and_each_ece_its_interval():
    """Scores optimal for beta = 0.9 on 3,000 observations: the table's loss-calibration test at
    0.9 carries its power against the run's other beta (0.5), high at this size, and every
    method's ECE its bootstrap interval, which holds the estimate's neighbourhood."""
    import jax.numpy as jnp

    from iml.pipeline.report import summary_table, table_markdown
    from iml.pipeline.store import EnsembleScores
    from iml.spec import loss_spec

    rng = np.random.default_rng(1)
    gamma = rng.beta(0.5, 3.0, 3000)
    labels = (rng.random(gamma.size) < gamma).astype(np.int32)
    scores = np.stack(
        [np.asarray(loss_spec(b).optimal_score(jnp.asarray(gamma))) for b in (0.5, 0.9)]
    )
    ensemble = EnsembleScores(
        (0.5, 0.9), scores.astype(np.float64), np.ones((2, gamma.size), np.int64)
    )
    table = summary_table(ensemble, labels, np.arange(gamma.size) % 4, n_bootstrap=40)
    power = table["0.9"]["raw"]["loss_calibration_power"]
    assert power["against"] == 0.5 and power["simulations"] == 40 and power["rate"] >= 0.9
    assert table["0.5"]["raw"]["loss_calibration_power"]["against"] == 0.9
    for methods in table.values():
        for metrics in methods.values():
            low, high = metrics["ece_interval"]
            assert 0 <= low < high and high > 0.5 * metrics["ece"]
    text = table_markdown(table)
    assert "| method | ece | ece 95% CI |" in text
    assert "Its power against scores calibrated for beta = 0.5: " in text
