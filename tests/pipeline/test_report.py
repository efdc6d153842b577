"""A run's report (``iml.pipeline.report``): honest recalibration by cross-fitting, the summary
table and its Markdown, the smooth ECE and figures, the report of a stored run with other eval
settings, and a multiclass run scored per loss."""

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from _pipeline_runs import MULTICLASS, run_config, save_batch

from iml.calibration import METRICS
from iml.pipeline import RunStore
from iml.pipeline.defaults import default_config

# ----------------------------------------------------------------------------------------------
# Honest recalibration and the table
# ----------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------
# The smooth calibration error in the table and the smooth figures of a report
# ----------------------------------------------------------------------------------------------


def summary_table(ensemble, labels, fold_ids, *, n_bins=10, n_bootstrap=200, seed=0, loss=None):
    """The one table of a binary grid (iml.pipeline.scores.run_table) of ``ensemble``'s betas."""
    from iml.grids import LossFamily, loss_grid
    from iml.pipeline.scores import run_table

    family = LossFamily() if loss is None else loss
    betas = np.asarray(ensemble.betas)
    grid = loss_grid(betas if family.name == "log" else family(betas))
    return run_table(grid, ensemble.scores, ensemble.sizes, labels, fold_ids, n_bins=n_bins,
                     n_bootstrap=n_bootstrap, seed=seed, family=family)  # fmt: skip


def test_score_metrics_include_the_smooth_ece_of_the_clipped_scores():
    from iml.calibration import score_metrics, smooth_ece

    rng = np.random.default_rng(0)
    scores = rng.beta(1.0, 6.0, 800)
    labels = (rng.random(800) < scores).astype(np.int32)
    scores[:5] = 0.0  # clipped to 1e-7 first, as every metric sees them
    metrics = score_metrics(scores, labels)
    assert list(metrics) == list(METRICS) and "smooth_ece" in METRICS
    clipped = np.clip(scores, 1e-7, 1 - 1e-7).astype(np.float32)
    assert metrics["smooth_ece"] == pytest.approx(float(smooth_ece(clipped, labels).ece), rel=1e-6)
    assert 0.0 <= metrics["smooth_ece"] < 0.05


def _two_weights_run(root: Path) -> RunStore:
    """A stored run at beta = 0.5 and 0.9 of one member each, the optimal scores of a known
    posterior on 400 observations."""
    rng = np.random.default_rng(1)
    n, betas = 400, (0.5, 0.9)
    posterior = rng.beta(1.0, 6.0, n)
    labels = (rng.random(n) < posterior).astype(np.int32)
    store = RunStore(root)
    store.open_run(
        {
            "loss": {"betas": list(betas)},
            "eval": {"n_bins": 10, "n_bootstrap": 10, "report_seed": 0},
        },
        kind="images",
    )
    store.save_arrays("data/folds", labels=labels, fold_ids=np.arange(n) % 4)
    members = [
        (beta, np.arange(n), beta * posterior / (beta * posterior + (1 - beta) * (1 - posterior)))
        for beta in betas
    ]
    save_batch(store, "batches/batch-0000", members)
    return store


@pytest.mark.slow
def test_report_writes_the_smooth_ece_of_every_method_and_the_smooth_figures(tmp_path):
    from iml.pipeline.report import report_run

    store = _two_weights_run(tmp_path / "run")
    table = report_run(store.root, tmp_path / "out", formats=("png",))
    for methods in table.values():
        for metrics in methods.values():
            assert 0.0 <= metrics["smooth_ece"] < 1.0
    # Raw scores of beta = 0.9 overstate the rate; their loss correction undoes it.
    assert table["0.9"]["raw"]["smooth_ece"] > 0.1 > table["0.9"]["loss_corrected"]["smooth_ece"]
    assert "smooth_ece" in (tmp_path / "out" / "table.md").read_text()
    for name in ("smooth_raw", "smooth_corrected"):
        assert (tmp_path / "out" / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_the_revealed_experiments_made_beside_the_table_are_the_same_files(
    tmp_path, monkeypatch, caplog
):
    from iml.pipeline import report

    started = []

    def recorded(*args, **kwargs):
        started.append(report.call_beside.__wrapped__(*args, **kwargs))
        return started[-1]

    recorded.__wrapped__ = report.call_beside
    monkeypatch.setattr(report, "call_beside", recorded)
    store = _two_weights_run(tmp_path / "run")
    here = report.report_run(store.root, tmp_path / "here", formats=("png",), beside=False)
    assert not started
    with caplog.at_level(logging.INFO, logger="iml.pipeline.beside"):
        beside = report.report_run(store.root, tmp_path / "beside", formats=("png",),
                                   beside=True)  # fmt: skip
    assert [call.beside for call in started] == [True]  # made in a second process
    assert "ran in this process" not in caplog.text  # and not again here
    with pytest.raises(ValueError, match="beside must be True, False or None"):
        report.report_run(store.root, tmp_path / "bad", beside="no")
    assert json.dumps(beside) == json.dumps(here)
    files = sorted(p.relative_to(tmp_path / "here") for p in (tmp_path / "here").rglob("*.*"))
    assert Path("revealed.json") in files and Path("figures/revealed_information.png") in files
    assert sorted(p.relative_to(tmp_path / "beside")
                  for p in (tmp_path / "beside").rglob("*.*")) == files  # fmt: skip
    for name in files:
        assert (tmp_path / "beside" / name).read_bytes() == (tmp_path / "here" / name).read_bytes()


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
    store.open_run(
        {"loss": {"betas": [beta]}, "eval": {"n_bins": 10, "n_bootstrap": 10, "report_seed": 0}},
        kind="images",
    )
    store.save_arrays("data/folds", labels=labels, fold_ids=np.arange(n) % 4)
    save_batch(store, "batches/batch-0000", [(beta, np.arange(n), m) for m in members])
    return store, labels, members


@pytest.mark.slow
def test_a_stored_run_reports_with_either_average_and_says_which(tmp_path):
    # The members are stored once; `iml figures --config.eval.average=logit` pools their logits
    # instead.
    from scipy.special import expit, logit

    from iml.pipeline.report import report_run

    store, _, seeds = _stored_run_at_beta_09(tmp_path / "run", 3, 300, noise=(0.2, 0.5))
    tables = {}
    for average in ("score", "logit"):
        out = tmp_path / average
        overrides = {"average": average}
        tables[average] = report_run(store.root, out, formats=(), eval_overrides=overrides)
        assert json.loads((out / "ensemble.json").read_text())["average"] == average
        with np.load(out / "ensemble_scores.npz") as stored:
            pooled = stored["scores"][0]
        stored32 = [s.astype(np.float32).astype(float) for s in seeds]
        by_hand = np.mean(stored32, 0) if average == "score" else expit(np.mean(logit(stored32), 0))
        np.testing.assert_allclose(pooled, by_hand, rtol=1e-9)
    raw = {a: tables[a]["0.9"]["raw"]["ece"] for a in tables}
    assert raw["score"] != raw["logit"]
    default = report_run(store.root, tmp_path / "default", formats=())
    assert default == tables["score"]  # the run's config.eval.average, 'score' by default
    with pytest.raises(ValueError, match=r"config\.eval\.average must be one of \('score', "):
        report_run(store.root, tmp_path / "bad", eval_overrides={"average": "mean"})
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_a_stored_run_reports_with_other_eval_settings_and_records_them(tmp_path):
    # `iml figures --config.eval.n_bins=5`: the same members, binned otherwise, and said so
    from iml.calibration import expected_calibration_error
    from iml.pipeline.report import report_run

    store, labels, (optimal,) = _stored_run_at_beta_09(tmp_path / "run", 4, 400)
    tables = {}
    for n_bins in (10, 5):
        out = tmp_path / f"bins{n_bins}"
        tables[n_bins] = report_run(
            store.root, out, eval_overrides={"n_bins": n_bins, "figures": ()}
        )
        settings = json.loads((out / "ensemble.json").read_text())["eval"]
        assert settings == {"n_bins": n_bins, "n_bootstrap": 10, "report_seed": 0,
                            "average": "score", "figures": []}  # fmt: skip
        assert not (out / "figures").exists()
        raw = np.asarray(optimal, np.float32).astype(float)
        by_hand = float(expected_calibration_error(raw, labels, n_bins))
        assert tables[n_bins]["0.9"]["raw"]["ece"] == pytest.approx(by_hand, rel=1e-5)
    assert tables[5]["0.9"]["raw"]["ece"] != tables[10]["0.9"]["raw"]["ece"]
    assert report_run(store.root, tmp_path / "stored", formats=()) == tables[10]
    for overrides, message in (
        ({"n_binz": 5}, r"config\.eval\.n_binz: no such key; did you mean config\.eval\.n_bins"),
        ({"n_bins": 0}, r"config\.eval\.n_bins must be an integer >= 1, got 0"),
        ({"n_bootstrap": "many"}, r"config\.eval\.n_bootstrap: expected an integer"),
        ({"report_seed": -1}, r"config\.eval\.report_seed must be an integer >= 0, got -1"),
        ({"figures": ("png", "jpg")}, r"config\.eval\.figures: unknown figure format 'jpg'"),
    ):
        with pytest.raises(ValueError, match=message):
            report_run(store.root, tmp_path / "bad", eval_overrides=overrides)
        assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_two_close_betas_keep_their_own_rows_and_curves_in_the_report(tmp_path):
    # f"{beta:g}" would give both "1": the table, its Markdown and the figures keep them apart.
    from iml.pipeline.report import report_run

    rng = np.random.default_rng(2)
    n, betas = 400, (0.9999991, 0.9999992)
    posterior = rng.beta(1.0, 6.0, n)
    labels = (rng.random(n) < posterior).astype(np.int32)
    store = RunStore(tmp_path / "run")
    store.open_run(
        {
            "loss": {"betas": list(betas)},
            "eval": {"n_bins": 10, "n_bootstrap": 10, "report_seed": 0},
        },
        kind="images",
    )
    store.save_arrays("data/folds", labels=labels, fold_ids=np.arange(n) % 4)
    members = [(beta, np.arange(n), posterior) for beta in betas]
    save_batch(store, "batches/batch-0000", members)
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


@pytest.mark.slow
def test_a_long_grid_draws_seven_evenly_spaced_weights_and_says_so(tmp_path):
    from iml.pipeline.report import CURVES_DRAWN, report_run

    rng = np.random.default_rng(3)
    n, betas = 400, np.linspace(0.1, 0.9, 9).round(2).tolist()
    posterior = rng.beta(1.0, 6.0, n)
    labels = (rng.random(n) < posterior).astype(np.int32)
    store = RunStore(tmp_path / "run")
    store.open_run(
        {"loss": {"betas": betas}, "eval": {"n_bins": 5, "n_bootstrap": 10, "report_seed": 0}},
        kind="images",
    )
    store.save_arrays("data/folds", labels=labels, fold_ids=np.arange(n) % 4)
    save_batch(store, "batches/batch-0000", [(b, np.arange(n), posterior) for b in betas])
    table = report_run(store.root, tmp_path / "out", formats=("svg",))
    assert len(table) == 9 and CURVES_DRAWN == 7
    drawn = [betas[i] for i in (0, 1, 3, 4, 5, 7, 8)]  # rows 0 to 8 at seven even steps
    for figure, prefix in [("figure1", "data"), ("figure4", "data"), ("figure2", "theory"),
                           ("smooth_corrected", "smooth")]:  # fmt: skip
        svg = (tmp_path / "out" / "figures" / f"{figure}.svg").read_text()
        ids = {b for b in betas if f'id="{prefix}-{b!r}"' in svg}
        assert ids == set(drawn), figure
        assert "7 of the run" in svg and "9 class weights" in svg, figure


@pytest.mark.slow
def test_a_focal_run_is_corrected_by_the_focal_rule_and_drops_the_prior_shift():
    """`iml reproduce --loss focal`: the run's loss (run_loss) is the focal loss by its class
    weight alpha, and the report corrects and tests with its rule."""
    import jax.numpy as jnp

    from iml.pipeline.runner import run_loss
    from iml.pipeline.store import EnsembleScores
    from iml.spec import loss_spec

    family = run_loss(
        run_config(**{"loss.name": "focal", "loss.params.gamma": 2.0, "loss.betas": (0.9,)})
    )
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
    test = table["raw"]["loss_calibration"]  # optimal for the focal loss: not rejected
    assert test["p_value"] > 0.05 and test["verdict"].startswith("not rejected")
    log_table = summary_table(ensemble, labels, folds, n_bootstrap=20)["0.9"]
    assert log_table["loss_corrected"]["ece"] > 0.05  # the log loss's inverse is the wrong one


# ----------------------------------------------------------------------------------------------
# Multiclass runs: a grid of weighted multiclass losses over every class
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def multiclass_run(tmp_path_factory):
    from iml.pipeline.experiment import build
    from iml.pipeline.report import report_run
    from iml.pipeline.train_plan import run

    out = tmp_path_factory.mktemp("multiclass")
    run(build(run_config(**MULTICLASS)), RunStore(out), progress=False)
    # 50 replicates: under the 100 at which the report simulates the tests' size and power
    return out, report_run(out, formats=("png",), eval_overrides={"n_bootstrap": 50})


@pytest.mark.slow
def test_a_multiclass_run_is_scored_per_loss_and_corrected_by_its_own_rule(multiclass_run):
    """`iml reproduce --config.data.classes=all --loss class_weighted_softmax
    --config.loss.weights='ones;w[8]=10'`: one ensemble per loss, softmax class scores, each
    corrected by the inverse of its own rule (Proposition 4: a_j / w_j, renormalised), reported
    with the multiclass metrics."""
    from iml.calibration import MULTICLASS_METRICS

    out, table = multiclass_run
    assert list(table) == ["ones", "w[8]=10"]
    for row in table.values():
        assert set(row) == {"raw", "loss_corrected"}
        intervals = {"top_label_ece_interval", "classwise_ece_interval"}
        assert set(row["raw"]) == set(MULTICLASS_METRICS) | intervals | {"loss_calibration"}
        # every class's one-vs-rest test and the top label's, adjusted over the run's tests
        test = row["raw"]["loss_calibration"]
        assert len(test["classes"]) == 10 and test["top_label"]["family"] <= 22
        assert all("verdict" in r for r in [*test["classes"], test["top_label"]])
        for method in row.values():  # each ECE inside its own bootstrap interval's reach
            for name in ("top_label_ece", "classwise_ece"):
                low, high = method[f"{name}_interval"]
                assert 0 <= low <= high and low - 0.05 < method[name] < high + 0.05
    # (compared as JSON text: an untestable class's NaN p-value is not equal to itself)
    assert json.dumps(json.loads((out / "table.json").read_text())) == json.dumps(table)
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
        if metric != "loss_calibration":  # the raw scores' test, which the corrected lack
            assert table["ones"]["loss_corrected"][metric] == pytest.approx(value, abs=1e-6)
    for key in ("ones", "w_8_=10"):
        assert (out / "figures" / "reliability_by_class" / f"{key}.png").stat().st_size > 0
    assert (out / "figures" / "ece_by_loss.png").exists()


@pytest.mark.slow
def test_a_multiclass_run_is_revealed_by_its_report_and_by_reveal(multiclass_run, tmp_path):
    """The report of a grid of two softmax losses writes its revealed experiments (the cells of
    each model's class posteriors over 10 classes), as `iml reveal` finds them from the run's
    member batches; joining it with a binary run is refused, naming both."""
    from iml.pipeline.reveal import CLASS_FIGURES, reveal_run
    from iml.pipeline.reveal_input import load_reveal_input

    out, _ = multiclass_run
    record = json.loads((out / "revealed.json").read_text())
    assert record["classes"] == 10 and record["keys"] == ["ones", "w[8]=10"]
    assert record["kind"] == "images" and (record["K"], record["n"]) == (2, 400)
    assert np.shape(record["class_information"]["estimate"]) == (2, 10)
    assert np.shape(record["experiments"]["posterior"])[::2] == (2, 10)
    assert len(record["nias"]["degrees_of_freedom"]) == 2 and "simulated" not in record
    for name in CLASS_FIGURES:
        assert (out / "figures" / f"{name}.png").stat().st_size > 0
    inputs = load_reveal_input(out)
    assert inputs.multiclass and inputs.scores.shape == (2, 400, 10)
    again = reveal_run(inputs, tmp_path, n_bins=record["n_bins"],
                       n_bootstrap=record["n_bootstrap"], formats=(), power_datasets=0)  # fmt: skip
    assert again["nias"]["p_value"] == record["nias"]["p_value"]
    assert again["value_matrix"] == record["value_matrix"]
    with pytest.raises(ValueError, match=rf"{STORED_DIGITS} is a binary run; it does not join"):
        load_reveal_input([out, STORED_DIGITS])


@pytest.mark.slow
def test_the_summary_table_gives_each_test_its_verdict_and_each_ece_its_interval():
    """Scores optimal for beta = 0.9 on 3,000 observations, reported as the run's beta = 0.9 and
    as a beta = 0.5 they were not trained for: the table's loss-calibration test does not reject
    the first (with its power against odds x2, at the level of Holm's first step over the
    run's two betas) and rejects the second, and every method's ECE has its bootstrap interval,
    which holds the estimate's neighbourhood."""
    import jax.numpy as jnp

    from iml.pipeline.markdown import markdown_by_method
    from iml.pipeline.store import EnsembleScores
    from iml.spec import loss_spec

    rng = np.random.default_rng(1)
    gamma = rng.beta(0.5, 3.0, 3000)
    labels = (rng.random(gamma.size) < gamma).astype(np.int32)
    scores = np.asarray(loss_spec(0.9).optimal_score(jnp.asarray(gamma)))
    ensemble = EnsembleScores(
        (0.5, 0.9),
        np.stack([scores, scores]).astype(np.float64),
        np.ones((2, gamma.size), np.int64),
    )
    table = summary_table(ensemble, labels, np.arange(gamma.size) % 4, n_bootstrap=40)
    right, wrong = table["0.9"]["raw"]["loss_calibration"], table["0.5"]["raw"]["loss_calibration"]
    assert right["verdict"].startswith("not rejected") and right["power"] >= 0.9
    assert right["power_level"] == 0.025 and right["family"] == 2
    assert wrong["rejected"] and wrong["verdict"].startswith("rejected")
    assert wrong["p_value_familywise"] == pytest.approx(min(1.0, 2 * wrong["p_value"]), rel=1e-5)
    assert wrong["calibration_error"] > 5 * wrong["null_calibration_error"]
    for methods in table.values():
        for metrics in methods.values():
            low, high = metrics["ece_interval"]
            assert 0 <= low < high and high > 0.5 * metrics["ece"]
        # each method against the raw scores of its beta, paired on the same replicates
        assert "ece_minus_raw" not in methods["raw"]
        for name, metrics in methods.items():
            if name != "raw":
                assert metrics["ece_minus_raw"] == metrics["ece"] - methods["raw"]["ece"]
                low, high = metrics["ece_minus_raw_interval"]
                assert low <= high, name
    # at 0.9 the correction undoes the weight: its ECE is lower than the raw scores', paired;
    # at 0.5 it is the identity, and so is the prior-shift correction: a difference of zero
    assert table["0.9"]["loss_corrected"]["ece_minus_raw_interval"][1] < 0
    for name in ("loss_corrected", "prior_shift"):
        assert table["0.5"][name]["ece_minus_raw_interval"] == [0.0, 0.0]
    text = markdown_by_method(table)
    assert "| method | ece | ece 95% CI | ece − raw [paired 95% CI] |" in text
    assert "Loss calibration of the raw scores (Definition 2): rejected (p" in text
    assert "is rejected for 1 of 2 tests" in text


STORED_DIGITS = Path(__file__).resolve().parents[2] / "docs" / "results" / "reproduce_digits"


@pytest.mark.slow
def test_the_stored_default_run_gives_its_stored_table_again():
    # The one table (iml.calibration.table_by_loss, a beta at a time) on the stored members of
    # `iml reproduce`'s default run: the raw and loss-corrected scores' metrics, intervals and
    # tests to float32 round-off, the recalibration baselines' to their fits' (below).
    from iml.config import flatten
    from iml.grids import config_betas
    from iml.pipeline.run_config import as_config
    from iml.pipeline.runner import run_loss
    from iml.pipeline.store import load_ensemble

    config = as_config(json.loads((STORED_DIGITS / "manifest.json").read_text())["config"])
    store = RunStore(STORED_DIGITS)
    folds = store.load_arrays("data/folds")
    ensemble = load_ensemble(store, config_betas(config.loss).tolist(), len(folds["labels"]))
    table = summary_table(ensemble, folds["labels"], folds["fold_ids"],
                          n_bins=config.eval.n_bins, n_bootstrap=config.eval.n_bootstrap,
                          seed=config.eval.report_seed, loss=run_loss(config))  # fmt: skip
    stored = flatten(json.loads((STORED_DIGITS / "table.json").read_text()))
    now = flatten(json.loads(json.dumps(table)))
    assert list(now) == list(stored)  # the same rows, methods and metrics, in the same order
    for key, value in stored.items():
        if isinstance(value, str | bool):  # verdicts, and what the power is against
            assert now[key] == value, key
        elif key.endswith(".power"):  # a share of 2,000 draws: one draw may flip at round-off
            np.testing.assert_allclose(now[key], value, atol=2e-3, err_msg=key)
        elif key.split(".")[1] in ("raw", "loss_corrected"):
            np.testing.assert_allclose(now[key], value, rtol=1e-5, err_msg=key)
        else:  # fitted maps: under the tests' unoptimised XLA (FAST_COMPILE) a fit moves at
            # float32 round-off, and a score at a quantile bin's edge may change bins
            np.testing.assert_allclose(now[key], value, atol=5e-4, err_msg=key)


def test_every_stored_difference_from_the_raw_scores_is_its_rows_difference():
    # Each `*_minus_raw` field of a stored table is the method's metric minus the raw scores'
    # for the same loss, with an ordered interval; the tables that hold them include the
    # reproduce runs on PneumoniaMNIST and the multiclass digits run.
    results = STORED_DIGITS.parent
    checked = set()
    for path in sorted(results.rglob("table.json")):
        for key, methods in json.loads(path.read_text()).items():
            for method, metrics in methods.items():
                if not isinstance(metrics, dict):
                    continue
                for field, value in metrics.items():
                    if not field.endswith("_minus_raw"):
                        continue
                    metric = field.removesuffix("_minus_raw")
                    want = metrics[metric] - methods["raw"][metric]
                    where = f"{path.relative_to(results)}: {key} {method} {field}"
                    np.testing.assert_allclose(value, want, atol=1e-5, err_msg=where)
                    low, high = metrics[f"{field}_interval"]
                    assert low <= high, where
                    checked.add(path.parent.relative_to(results).as_posix())
    assert {"reproduce_digits", "pneumoniamnist", "reproduce_digits_multiclass"} <= checked


def test_the_figures_title_names_every_grid_by_its_loss():
    import jax.numpy as jnp

    from iml.grids import loss_family, loss_grid
    from iml.pipeline.report import _title

    def weighted_log(a, y, beta):
        return jnp.where(y == 1, -beta * jnp.log(a), -(1.0 - beta) * jnp.log1p(-a))

    manifest = {"config": {"data": {"name": "digits"}, "model": {"name": "logistic"}}}
    betas = np.array([0.5, 0.9])
    assert _title(manifest, loss_grid(betas), 1) == (
        "digits: beta-weighted log loss, 2 losses x 1 seeds, logistic"
    )
    own = loss_grid(loss_family(weighted_log)(betas))
    assert (
        _title(manifest, own, 3)
        == "digits: callable loss weighted_log, 2 losses x 3 seeds, logistic"
    )
