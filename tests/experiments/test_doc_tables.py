"""experiments.doc_tables: the records its tables render, against each other and the library."""

from __future__ import annotations

import numpy as np
import pytest

import iml
from experiments import doc_tables as docs
from iml.calibration import expected_calibration_error
from iml.models import DEFAULT_CONV_IMPL
from iml.training import DEFAULT_MEMBER_BATCHING


def test_the_pneumoniamnist_runs_score_the_same_test_images():
    # the runs' READMEs compare them observation for observation
    folds = [
        np.load(docs.RESULTS / run / "data" / "folds.npz")
        for run in (
            "pneumoniamnist_early_stopping",
            "pneumoniamnist_patience",
            "pneumoniamnist_seeds",
            "pneumoniamnist_lr_floor",
            "pneumoniamnist_lr_floor_other_betas",
            "pneumoniamnist_lr_floor_seeds",
        )
    ]
    for key in ("labels", "fold_ids"):
        for other in folds[1:]:
            np.testing.assert_array_equal(folds[0][key], other[key])


def test_the_logit_average_of_iml_gives_the_tables_mean_logit_of_four_seeds():
    # The table's 4-seed "mean logit, corrected" comes from pmn_averages (NumPy); the library's
    # ensemble of the same members, pooled by logit, must give the same ECE.
    from iml.pipeline import aggregate_members, member_test_scores

    runs = ("pneumoniamnist_lr_floor", "pneumoniamnist_lr_floor_seeds")
    members = [
        member
        for run in runs
        for path in sorted((docs.RESULTS / run / "batches").glob("*.npz"))
        for member in member_test_scores(dict(np.load(path)))
    ]
    raw, labels = zip(*(docs.pmn_seed_scores(run) for run in runs), strict=True)
    assert np.array_equal(*labels)
    ensemble = aggregate_members(members, (0.99,), len(labels[0]), average="logit")
    assert (ensemble.sizes == 4).all()
    corrected = np.asarray(iml.loss_corrected_score(ensemble.scores[0], 0.99))
    library = float(expected_calibration_error(corrected, labels[0]))
    table = docs.pmn_averages(np.concatenate(raw), labels[0])["mean_logit"]
    assert library == pytest.approx(table, abs=1e-4)


def test_multiclass_record_per_class_eces_are_recomputed_from_its_scores():
    """The report's ece_by_class.json holds what the scores give, class by class."""
    unweighted, raw, corrected = docs.mc_series()
    by_class = docs.record("reproduce_digits_multiclass/ece_by_class.json")
    for stored, scores in (
        (by_class["ones"]["raw"], unweighted),
        (by_class["w[8]=10"]["raw"], raw),
        (by_class["w[8]=10"]["loss_corrected"], corrected),
    ):
        fresh = [docs.class_ece(scores, j) for j in range(10)]
        np.testing.assert_allclose(stored, fresh, atol=1e-6)


def test_member_batching_defaults_are_the_fastest_measured():
    """DEFAULT_MEMBER_BATCHING's comment: its CPU and GPU choices, with the models' default
    convolutions (DEFAULT_CONV_IMPL), won every run of the records."""
    cpu, gpu = (f"{DEFAULT_MEMBER_BATCHING[b]}/{DEFAULT_CONV_IMPL[b]}" for b in ("cpu", "gpu"))
    for run in (
        "ensemble.json",
        "ensemble_2026-11-26_moments.json",
        "ensemble_2026-11-26_stem.json",
        "ensemble_2026-11-26_keep_memory.json",
        "ensemble_2026-11-26_system.json",
    ):
        r = docs.record(f"cpu_ensemble/{run}")
        assert r["default_strategy"].endswith(cpu) and r["best_strategy"] == r["default_strategy"]
    for run in ("gpu_h200/ensemble_f32.json", "gpu_h200/ensemble_bf16.json"):
        assert docs.record(run)["best_strategy"] == gpu


@pytest.mark.slow
def test_the_revealed_sweeps_are_the_default_sweeps_of_sweep_defaults():
    # docs/results/revealed/{adult64,letter64} keep no manifest of their own: their README names
    # the default sweeps of sweep_defaults, whose revealed experiments are the same numbers
    for revealed, default in (("adult64", "adult_paper"), ("letter64", "letter_paper")):
        ours = docs.record(f"revealed/{revealed}/revealed.json")
        theirs = docs.record(f"sweep_defaults/{default}/revealed/revealed.json")
        for key in ("information", "value_matrix"):
            assert ours[key] == theirs[key]
        assert ours["ridge"] == theirs["ridge"] and ours["betas"] == theirs["betas"]
        assert ours["nis"] == theirs["nis"] and ours["niac"] == theirs["niac"]


def test_a_record_of_the_former_loss_calibration_tests_is_labelled_in_its_cell():
    # the current test's record gives its verdict; the former gap test's only a p-value, named so
    current = {"p_value": 0.0163, "n_bins": 3, "verdict": "rejected (p = 0.016, 3 bins)"}
    former = {"beta": 0.9, "gap": 0.002, "p_value": 0.001996}
    assert docs.loss_calibration_cell(current) == "rejected (p = 0.016, 3 bins)"
    assert docs.loss_calibration_cell(former) == "former gap test: p = 0.002"
    assert docs.loss_calibration_cells([former, former]) == "former gap test: p = 0.002 / 0.002"
    assert docs.loss_calibration_cells([current, former]) == (
        "rejected (p = 0.016, 3 bins) / former gap test: p = 0.002"
    )
    assert docs.table_loss_calibration({"loss_calibration": current}) == current["verdict"]
    assert docs.table_loss_calibration({"loss_calibration_p_value": 0.318}) == (
        "former gap test: p = 0.318"
    )
    # NIAS: a column of former records says so in its header, a mixed one cell by cell
    new, old = {"nias": {"n_bins": [4]}}, {"nias": {"p_value": [0.01]}}
    assert docs.nias_column("NIAS", "NIAS (former)", [[("3", old)], [("2", old)]]) == (
        "NIAS (former)",
        ["3", "2"],
    )
    assert docs.nias_column("NIAS", "NIAS (former)", [[("3", new), ("2", old)]]) == (
        "NIAS",
        ["3 / former binomial test: 2"],
    )


def test_a_rejected_test_without_simulated_power_is_said_so():
    """A record simulates no power for a test that rejected: its cells say so, and a verdict
    not rejected still carries its power."""
    simulated = {"power": {"niac": {"rate": 0.914, "against": "precision rising"}}}
    assert docs._simulated_power(simulated, "nis") == "not simulated (rejected)"
    assert docs._simulated_power(simulated, "niac") == "0.91"
    rejected = {"violated": True, "p_value": 0.001, "margin": 0.1, "lower_bound": 0.02}
    assert docs._margin_verdict(rejected, None).startswith("**rejected**")
    held = dict(rejected, violated=False, p_value=0.4, lower_bound=-0.01)
    said = docs._margin_verdict(held, simulated["power"]["niac"])
    assert said.endswith("power 0.91 against precision rising")
