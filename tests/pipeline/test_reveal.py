"""The revealed experiments of a run (``iml.pipeline.reveal``): which verdicts change with the
bins, what the record's intervals cover, and what ``iml reveal`` prints and draws from a stored
record."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from iml.grids import loss_family
from iml.pipeline.reveal import (
    fragile,
    intervals_cover,
    revealed_figures,
    revealed_summary,
    verdict_text,
    verdicts_title,
)
from iml.pipeline.reveal_input import reveal_input

RECORD = (
    Path(__file__).resolve().parents[2]
    / "docs/results/sweep_defaults/adult_paper/revealed/revealed.json"
)


def test_a_verdict_that_changes_with_the_bins_is_fragile():
    sensitivity = {
        "adaptive": {"nis": {"rejected": True}, "niac": {"rejected": False}},
        "quantile_5": {"nis": {"rejected": True}, "niac": {"rejected": True}},
        "quantile_10": {"nis": {"rejected": True}, "niac": {"rejected": False}},
    }
    assert fragile(sensitivity) == {"nis": False, "niac": True}


def test_the_intervals_cover_the_seeds_only_where_a_model_has_several():
    rng = np.random.default_rng(0)
    scores, labels = rng.random((2, 50)), (rng.random(50) < 0.3).astype(int)
    one = reveal_input([0.3, 0.7], scores, labels, loss_family("log"))
    assert "not the noise of training" in intervals_cover(one)
    stack = np.stack([scores, scores[::-1]])  # two seeds, each model trained with both
    two = reveal_input([0.3, 0.7], scores, labels, loss_family("log"), seed_scores=stack,
                       seeds=[0, 1])  # fmt: skip
    assert "over its training seeds (2 a model)" in intervals_cover(two)


def _power_text(record, name):
    power = record["simulated"]["power"][name]
    return f"power {power['rate']:.2f} (se {power['se']:.2f}) against {power['against']}"


def test_the_title_and_summary_say_each_verdict_and_its_power():
    record = json.loads(RECORD.read_text())
    niac = _power_text(record, "niac")  # a non-rejection carries its power, in both
    assert verdicts_title(record) == f"NIS rejected, NIAC not rejected ({niac})"
    summary = revealed_summary(record)
    assert "rejected" in summary and "holds" not in summary and "accept" not in summary
    assert niac in summary
    fragile = copy.deepcopy(record)
    fragile["fragile"]["niac"] = True
    assert verdicts_title(fragile) == f"NIS rejected, NIAC not rejected ({niac}; fragile)"
    assert "FRAGILE (" in revealed_summary(fragile)
    assert "quantile bins, size and power not simulated there)" in revealed_summary(fragile)
    counted = {**record, "signals": 3}  # the signals the tests compared, where recorded
    assert verdicts_title(counted) == f"NIS rejected, NIAC not rejected ({niac}); 3 signals"


def test_one_verdict_is_worded_with_its_power_and_signals():
    record = copy.deepcopy(json.loads(RECORD.read_text()))
    niac = _power_text(record, "niac")
    assert verdict_text(record, "nis") == "rejected"
    assert verdict_text(record, "niac") == f"not rejected ({niac})"
    record["signals"] = 4
    assert verdict_text(record, "niac") == f"not rejected ({niac}; 4 signals)"
    assert verdict_text({**record, "classes": 3}, "niac") == f"not rejected ({niac}; 4 cells)"
    record["simulated"]["size"]["nis"] = {"rate": 0.20, "se": 0.04}
    assert verdict_text(record, "nis").startswith("not testable (simulated size 0.20")
    record["signals"] = 1
    assert verdict_text(record, "niac") == "not testable (1 signal)"
    del record["simulated"]
    record["signals"] = 3
    assert verdict_text(record, "niac") == "not rejected (power not simulated; 3 signals)"


def test_the_nias_line_names_the_models_it_does_not_reject_too():
    record = copy.deepcopy(json.loads(RECORD.read_text()))
    K = len(record["nias"]["violated"])
    record["nias"]["violated"] = [True] * (K - 2) + [False] * 2

    def nias_line(r):
        return next(ln for ln in revealed_summary(r).splitlines() if ln.startswith("NIAS "))

    assert nias_line(record).endswith(
        "; not rejected at beta 0.988, 0.99 (power per model not simulated)"
    )
    record["nias"]["violated"] = [True] * 3 + [False] * (K - 3)
    assert f"; not rejected for the other {K - 3} models (power per model" in nias_line(record)
    record["simulated"]["size"]["nias"] = {"rate": 0.20, "se": 0.04}  # its rejection no evidence
    assert "not rejected for the other" not in nias_line(record)


def test_verdicts_whose_size_and_power_were_not_simulated_say_so():
    """A report that skips the simulation (a multiclass grid's ``iml reproduce``) states each
    verdict without a size or power it does not have, and names the command that simulates
    them."""
    record = copy.deepcopy(json.loads(RECORD.read_text()))
    del record["simulated"]
    assert verdicts_title(record) == (
        "NIS rejected, NIAC not rejected (size and power not simulated)"
    )
    lines = revealed_summary(record).splitlines()
    nis = next(ln for ln in lines if ln.startswith("NIS "))
    niac = next(ln for ln in lines if ln.startswith("NIAC "))
    assert "rejected: margin" in nis and "size at this N not simulated" in nis
    assert "power at this N not simulated" in niac and "power 0." not in niac
    assert any(f"`iml reveal --run {record['run']}` simulates them" in ln for ln in lines)


def test_a_rejection_by_a_test_oversized_at_the_runs_size_is_not_testable():
    record = copy.deepcopy(json.loads(RECORD.read_text()))
    assert record["nis"]["violated"] and not record["niac"]["violated"]
    record["simulated"]["size"]["nis"] = {"rate": 0.20, "se": 0.04}  # lower bound 0.12 > 0.05
    record["simulated"]["size"]["niac"] = {"rate": 0.20, "se": 0.04}  # but NIAC did not reject
    title = verdicts_title(record)
    assert title == ("NIS not testable (simulated size 0.20 (se 0.04) above the level 0.05), "
                     f"NIAC not rejected ({_power_text(record, 'niac')})")  # fmt: skip
    nis_line = next(ln for ln in revealed_summary(record).splitlines() if ln.startswith("NIS "))
    assert "not testable" in nis_line and "its rejection: margin" in nis_line
    assert "significant pairs" not in nis_line  # not evidence, so not listed
    # nor marked in the value matrix, which marks them where NIS is rejected
    marked = revealed_figures(json.loads(RECORD.read_text()))["revealed_value_matrix"].axes[0]
    assert any(c.get_gid() == "violations" for c in marked.collections)
    unmarked = revealed_figures(record)["revealed_value_matrix"].axes[0]
    assert not any(c.get_gid() == "violations" for c in unmarked.collections)
    record["simulated"]["size"]["nis"] = {"rate": 0.10, "se": 0.03}  # within its MC error
    assert verdicts_title(record).startswith("NIS rejected")


def test_the_three_figures_are_drawn_from_the_record():
    figures = revealed_figures(json.loads(RECORD.read_text()))
    assert sorted(figures) == ["revealed_cost_bounds", "revealed_information",
                               "revealed_value_matrix"]  # fmt: skip
    assert all(fig.axes for fig in figures.values())


@pytest.mark.slow
def test_one_signal_is_not_testable_never_not_rejected(tmp_path):
    """Near-separable data whose adaptive bins merge into one signal (too few positives for two
    bins of 10): every experiment is uninformative, so NIS and NIAC read "not testable (1
    signal)", and so does each model's loss-calibration test (NIAS), never "not rejected"."""
    from iml.pipeline.reveal import reveal_run

    rng = np.random.default_rng(3)
    labels = (np.arange(300) < 12).astype(np.int32)  # 12 positives: one bin of 10 of each
    scores = np.clip(np.where(labels == 1, 0.95, 0.02) + 0.01 * rng.random((2, 300)), 0, 1)
    inputs = reveal_input([0.5, 0.7], scores, labels, loss_family("log"))
    record = reveal_run(inputs, tmp_path, n_bootstrap=20, formats=(), power_datasets=0)
    assert record["signals"] == 1
    assert verdicts_title(record) == "NIS not testable (1 signal), NIAC not testable (1 signal)"
    summary = revealed_summary(record)
    assert "NIS (capacity-constrained learning) not testable (1 signal)" in summary
    assert "NIAC (costly learning) not testable (1 signal)" in summary
    assert "Shannon cost with one lambda: not testable (1 signal)" in summary
    assert record["nias"]["n_bins"] == [1, 1]
    assert "NIAS (each model's loss-calibration test, Holm over the models) not testable" in summary
    assert "not rejected" not in summary


@pytest.mark.slow
def test_without_the_bins_sensitivity_the_verdicts_are_the_same_and_said_unchecked(tmp_path):
    """reveal_run(sensitivity=False), as a report at fewer than 100 replicates calls it: the
    adaptive bins' verdicts and numbers as with the sensitivity, no "bins" or "fragile" in the
    record, and a summary that says the fragility was not checked."""
    from iml.pipeline.reveal import reveal_run

    rng = np.random.default_rng(4)
    labels = (rng.random(400) < 0.3).astype(np.int32)
    noise = rng.normal(size=400)
    scores = np.stack([1 / (1 + np.exp(-(2 * labels - 1 + s * noise))) for s in (1.0, 0.6)])
    inputs = reveal_input([0.5, 0.7], scores, labels, loss_family("log"))
    full = reveal_run(inputs, tmp_path / "a", n_bootstrap=20, formats=(), power_datasets=0)
    quick = reveal_run(inputs, tmp_path / "b", n_bootstrap=20, formats=(), power_datasets=0,
                       sensitivity=False)  # fmt: skip
    assert set(full["bins"]) == {"adaptive", "quantile_5", "quantile_10", "quantile_20"}
    assert "bins" not in quick and "fragile" not in quick
    same = {k: v for k, v in full.items() if k not in ("bins", "fragile")}
    assert json.dumps(quick, sort_keys=True) == json.dumps(same, sort_keys=True)  # NaN too
    assert "fragility unchecked" in revealed_summary(quick)
    assert "fragility unchecked" not in revealed_summary(full)


# ----------------------------------------------------------------------------------------------
# Multiclass runs: class-posterior experiments over the cells of the simplex
# ----------------------------------------------------------------------------------------------

CLASS_PRIOR = (0.4, 0.4, 0.2)
CLASS_KEYS = ["ones", "w[2]=2", "w[2]=4"]


def class_grid():
    """The class-weighted softmax at the last class's weights 1, 2 and 4 (3 classes)."""
    from iml.grids import loss_grid
    from iml.spec import loss_spec

    weights = np.ones((3, 3))
    weights[:, 2] = [1.0, 2.0, 4.0]
    return loss_grid(loss_spec("class_weighted_softmax", class_weights=weights))


def class_agents(reported, n=1500, key=5):
    """Gaussian agents of 3 classes at one precision, reporting for ``reported``'s losses."""
    import jax

    from iml.revealed import simulate_gaussian_agents

    scores, labels = simulate_gaussian_agents(jax.random.key(key), reported, 1.5, CLASS_PRIOR, n)
    return np.asarray(scores), np.asarray(labels)


@pytest.fixture(scope="module")
def class_records(tmp_path_factory):
    """The records of calibrated agents (each reports optimally for its own loss) and of agents
    whose middle model reports for the first loss (its scores not those of its own)."""
    import jax

    from iml.pipeline.reveal import reveal_run
    from iml.pipeline.reveal_input import class_input

    grid = class_grid()
    misreported = jax.tree.map(lambda x: x.at[1].set(x[0]), grid.spec)
    out = {}
    for name, reported in (("calibrated", grid.spec), ("misreported", misreported)):
        scores, labels = class_agents(reported)
        inputs = class_input(grid, scores, labels, run=name, kind="table")
        record = reveal_run(inputs, tmp_path_factory.mktemp(name), n_bins=5, n_bootstrap=100,
                            formats=("png",), power_datasets=0)  # fmt: skip
        out[name] = (inputs, record)
    return out


@pytest.mark.slow
def test_a_multiclass_record_holds_the_class_posterior_experiments(class_records):
    """The record of a grid of 3 softmax losses: its keys and classes in place of betas, each
    model's cells [K, S] with posteriors on the simplex [K, S, 3], the information about each
    class with its interval, G and NIAS by degrees of freedom and cells, equal to what
    iml.revealed.reveal finds on the same arrays."""
    import jax

    from iml.revealed import reveal

    inputs, record = class_records["calibrated"]
    assert record["classes"] == 3 and record["keys"] == CLASS_KEYS and "betas" not in record
    assert (record["K"], record["n"]) == (3, 1500)
    assert record["loss"]["name"] == "class_weighted_softmax"
    probability = np.asarray(record["experiments"]["probability"])
    posterior = np.asarray(record["experiments"]["posterior"])
    assert probability.shape == (3, 15) and posterior.shape == (3, 15, 3)  # 5 quantiles x 3
    np.testing.assert_allclose(probability.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(posterior.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(record["prior"], np.bincount(inputs.labels) / 1500, atol=1e-6)
    assert 2 <= record["signals"] <= 15
    info = np.asarray(record["class_information"]["estimate"])
    low, high = np.asarray(record["class_information"]["interval"])
    assert info.shape == (3, 3) and (low <= info + 1e-7).all() and (info <= high + 1e-7).all()
    assert np.asarray(record["value_matrix"]["estimate"]).shape == (3, 3)
    direct = reveal(inputs.scores, inputs.labels, class_grid().spec, 5, n_bootstrap=100,
                    key=jax.random.key(0))  # fmt: skip
    np.testing.assert_array_equal(np.asarray(record["nias"]["p_value"], np.float32),
                                  np.asarray(direct.nias.p_value))  # fmt: skip
    np.testing.assert_array_equal(np.asarray(record["value_matrix"]["estimate"], np.float32),
                                  np.asarray(direct.value_matrix))  # fmt: skip
    assert record["nis"]["violated"] == bool(direct.nis_test.violated)
    nias = record["nias"]
    # each model's chi-square has (n - 1) = 2 degrees of freedom per cell, at most
    assert all(
        2 <= d <= 2 * c for d, c in zip(nias["degrees_of_freedom"], nias["cells"], strict=True)
    )
    assert set(record["bins"]) == {"adaptive", "quantile_5", "quantile_10", "quantile_20"}


@pytest.mark.slow
def test_nias_is_not_rejected_for_calibrated_agents_and_rejected_for_a_misreport(class_records):
    """Agents reporting optimally for their own losses: NIAS not rejected (every Holm-adjusted
    p-value above 0.05); the middle agent reporting for the first loss (weight 1 where its loss
    weights the last class 2): NIAS rejected at that model, and the summary says so."""
    _, calibrated = class_records["calibrated"]
    assert not calibrated["nias"]["rejected"]
    assert min(calibrated["nias"]["p_value"]) > 0.05
    _, misreported = class_records["misreported"]
    assert misreported["nias"]["rejected"] and misreported["nias"]["violated"] == [0, 1, 0]
    assert misreported["nias"]["p_value"][1] < 0.05
    summary = revealed_summary(misreported)
    assert "multinomial loss-calibration test, Holm over the models) rejected at w[2]=2" in summary
    assert "cells and" in summary and "degrees of freedom per model" in summary
    for text in (summary, revealed_summary(calibrated)):
        assert "holds" not in text and "accept" not in text and "confirm" not in text
        assert "3 classes; signals: cells of the loss-corrected posteriors" in text


@pytest.mark.slow
def test_the_multiclass_figures_are_drawn_from_the_record(class_records):
    from iml.pipeline.reveal import CLASS_FIGURES, figure_names

    _, record = class_records["calibrated"]
    assert figure_names(record) == CLASS_FIGURES
    figures = revealed_figures(record)
    assert sorted(figures) == sorted(CLASS_FIGURES)
    assert all(fig.axes for fig in figures.values())
    lines = [ln for ln in figures["revealed_information_by_class"].axes[0].lines
             if str(ln.get_gid()).startswith("class-information-")]  # fmt: skip
    assert len([ln for ln in lines if "interval" not in str(ln.get_gid())]) == 3  # a class each
    ticks = [t.get_text() for t in figures["revealed_cost_bounds"].axes[0].get_xticklabels()]
    assert ticks == CLASS_KEYS


@pytest.mark.slow
def test_a_multiclass_runs_size_and_power_are_simulated_for_its_classes(tmp_path):
    """The simulated agents carry the run's information (matched precision), and the record
    states each test's size and its power against a named alternative."""
    import jax

    from iml.pipeline.reveal import reveal_run
    from iml.pipeline.reveal_input import class_input
    from iml.power import matched_class_precision
    from iml.revealed import mutual_information, revealed_experiments

    grid = class_grid()
    first = jax.tree.map(lambda x: x[:1], grid.spec)
    key = jax.random.key(7)
    from iml.revealed import simulate_gaussian_agents

    scores, labels = simulate_gaussian_agents(key, first, np.array([1.2]), CLASS_PRIOR, 4000)
    info = float(mutual_information(revealed_experiments(scores, labels, 5, "adaptive",
                                                         losses=first))[0])  # fmt: skip
    assert matched_class_precision(info, grid.spec, CLASS_PRIOR, 4000, 5, key) == pytest.approx(
        1.2, abs=1e-3
    )
    scores, labels = class_agents(grid.spec, n=600)
    record = reveal_run(class_input(grid, scores, labels), tmp_path, n_bins=5, n_bootstrap=20,
                        formats=(), power_datasets=3, power_bootstrap=20)  # fmt: skip
    simulated = record["simulated"]
    assert simulated["datasets"] == 3 and simulated["precision"] > 0
    assert set(simulated["size"]) == set(simulated["power"]) == {"nis", "niac", "nias"}
    assert simulated["power"]["nias"]["against"].startswith("the middle model (w[2]=2)")
    for rate in [*simulated["size"].values(), *simulated["power"].values()]:
        assert rate["rate"] in (0.0, 1 / 3, 2 / 3, 1.0)
    assert "Simulated sizes at this N, K, number of classes and class frequencies" in (
        revealed_summary(record)
    )


READ_REVEAL = Path(__file__).resolve().parents[2] / "docs/howto/read_reveal.md"


def _fields(record, depth=2):
    """The keys of ``record`` and of its sections, ``depth`` levels down."""
    keys = set(record)
    if depth > 1:
        for value in record.values():
            if isinstance(value, dict):
                keys |= _fields(value, depth - 1)
    return keys


@pytest.mark.slow
def test_the_record_reference_names_every_field_a_record_holds(tmp_path, class_records):
    """docs/howto/read_reveal.md, "The record", names each field (and each field of a section)
    of a binary run's record with its simulated sizes and powers, and of a multiclass run's."""
    import re

    from iml.pipeline.reveal import reveal_run

    text = READ_REVEAL.read_text()
    section = text[text.index("## The record") :].split("\n## ", 1)[0]
    documented = set(re.findall(r'"([A-Za-z_0-9]+)"', section))
    rng = np.random.default_rng(4)
    labels = (rng.random(400) < 0.3).astype(np.int32)
    noise = rng.normal(size=400)
    scores = np.stack([1 / (1 + np.exp(-(2 * labels - 1 + s * noise))) for s in (1.0, 0.6)])
    inputs = reveal_input([0.5, 0.7], scores, labels, loss_family("log"))
    binary = reveal_run(inputs, tmp_path, n_bootstrap=20, formats=(), power_datasets=2)
    assert "simulated" in binary and "bins" in binary
    for record in (binary, class_records["calibrated"][1]):
        assert _fields(record) <= documented, sorted(_fields(record) - documented)
