"""Tests of iml.power: the simulated agents' precisions and scenarios, the population they
make, and the rates and errors read off simulated rejections."""

import jax
import numpy as np
import pytest

from iml import loss_spec
from iml import power as P


def test_matched_precision_inverts_the_population_information():
    for d, prior in ((1.5, 0.1), (3.1, 0.097), (1.9, 0.239)):
        info = float(P.gaussian_population([0.5], np.array([d]), prior).information[0])
        assert P.matched_precision(info, prior) == pytest.approx(d, abs=1e-4)


def test_precisions_spread_evenly_about_the_centre_and_name_their_scenario():
    np.testing.assert_allclose(P.precisions(3, 0.4, 1.5), [1.3, 1.5, 1.7], rtol=1e-6)
    np.testing.assert_array_equal(P.precisions(4, 0.0, 2.0), np.full(4, 2.0, np.float32))
    assert P.precisions(5, -0.3, 1.5).dtype == np.float32
    assert [P.scenario_name(d) for d in (0.0, -0.3, 0.3)] == ["capacity", "falling", "rising"]
    assert P.scenario_name(0.0, misreport=3.0) == "misreported"


def test_misreported_weights_multiply_the_middle_models_odds_alone():
    # The middle weight 0.5 has odds 1; three times that is 0.75. The others stay.
    np.testing.assert_allclose(P.misreported_weights([0.5, 0.5, 0.9], 3.0), [0.5, 0.75, 0.9])
    # A weight outside (0, 1) (a class weight, say) is multiplied itself.
    np.testing.assert_allclose(P.misreported_weights([1.0, 2.0], 3.0), [1.0, 6.0])


def test_standard_error_is_the_binomial_standard_error_of_the_rate():
    rejected = np.array([True, False, False, False])
    assert P.standard_error(rejected) == pytest.approx(np.sqrt(0.25 * 0.75 / 4))
    assert P.standard_error(np.zeros(10, bool)) == 0.0


def test_matched_precision_needs_positive_information():
    with pytest.raises(ValueError, match="information must be positive"):
        P.matched_precision(0.0, 0.1)


def test_one_agent_counts_its_fewest_negatives_and_has_no_margins():
    one = P.gaussian_population([0.5], np.array([1.5]), 0.1)
    pair = P.gaussian_population([0.5, 0.5], np.array([1.5, 1.5]), 0.1)
    assert one.nis_margin == one.niac_margin == 0.0
    # Its bins are the pair's: the same fewest positives and negatives, which differ.
    assert (one.min_positives, one.min_negatives) == (pair.min_positives, pair.min_negatives)
    assert one.min_negatives > 2 * one.min_positives


def test_rejection_rates_of_agents_of_three_classes_size_and_power():
    """A small version of experiments/studies/multiclass_reveal_power.py: capacity-constrained
    agents of 3 classes (one precision for every weight w[2] = 1, 2, 4, 8) rarely reject NIS or
    NIAC; precision rising along the grid (a more informative experiment for the heavier
    weights, better for every loss) rejects NIS; an agent reporting its posterior
    uncorrected is caught by NIAS."""
    weights = np.ones((4, 3))
    weights[:, 2] = [1.0, 2.0, 4.0, 8.0]
    losses = loss_spec("class_weighted_softmax", class_weights=weights)
    reported_weights = weights.copy()
    reported_weights[2] = 1.0  # the third agent reports its posterior, uncorrected
    reported = loss_spec("class_weighted_softmax", class_weights=reported_weights)
    prior = (0.4, 0.4, 0.2)
    sizes = {"n_datasets": 8, "n_bootstrap": 200, "key": jax.random.key(0), "n_bins": 5}
    capacity = P.rejection_rates(losses, losses, P.precisions(4, 0.0, 1.5), prior, 2000, **sizes)
    rising = P.rejection_rates(losses, losses, P.precisions(4, 1.0, 1.5), prior, 2000, **sizes)
    misreported = P.rejection_rates(
        losses, reported, P.precisions(4, 0.0, 1.5), prior, 2000, **sizes
    )
    assert capacity["nis"].sum() <= 2 and capacity["niac"].sum() <= 2
    assert capacity["nias"].sum() <= 2
    assert rising["nis"].sum() >= 7
    assert misreported["nias"].sum() >= 7
    # NIAS alone (no bootstrap) rejects where the full simulation does, at a least count of
    # its own too: the cells and the pooling of classes within them both take it.
    small = {**sizes, "n_datasets": 12, "n_bootstrap": 20, "min_count": 3}
    args = (losses, reported, P.precisions(4, 0.0, 1.5), prior, 600)
    full = P.rejection_rates(*args, **small)
    alone = P.rejection_rates(*args, tests=("nias",), **small)
    np.testing.assert_array_equal(alone["nias"], full["nias"])


def test_data_sets_with_the_run_positives_are_the_agents_on_those_labels():
    """With ``positives``, every data set is the agents' scores on fixed labels (that many
    positives, first) revealed with the same keys: the rates equal those of the data sets
    made and revealed one by one; a bad count is refused, naming it."""
    from iml import revealed as R
    from iml.grids import loss_family

    losses = loss_family("log")(np.array([0.2, 0.5, 0.8]))
    precision, key, n, positives = P.precisions(3, 0.5, 1.2), jax.random.key(3), 900, 250
    settings = {"n_datasets": 3, "n_bootstrap": 50, "key": key, "n_bins": 5}
    rates = P.rejection_rates(losses, losses, precision, 0.3, n, positives=positives, **settings)
    labels = (np.arange(n) < positives).astype(np.int32)
    for i, k in enumerate(jax.random.split(key, 3)):
        key_data, key_boot = jax.random.split(k)
        scores, drawn = R.simulate_gaussian_agents(key_data, losses, precision, 0.3, n,
                                                   labels=labels)  # fmt: skip
        np.testing.assert_array_equal(drawn, labels)
        report = R.reveal(scores, labels, losses, 5, "adaptive", n_bootstrap=50, key=key_boot)
        assert rates["nis"][i] == bool(report.nis_test.violated)
        assert rates["niac"][i] == bool(report.niac_test.violated)
        assert rates["nias"][i] == bool(np.any(report.nias.violated))
        np.testing.assert_allclose(rates["information"][i], report.information, rtol=1e-5)
    # Only the tests asked for run, on the same draws: NIAS alone (no bootstrap), or NIS and
    # NIAC without NIAS, reject exactly where the full simulation does.
    misreported = loss_family("log")(P.misreported_weights([0.2, 0.5, 0.8], 3.0))
    full = P.rejection_rates(losses, misreported, precision, 0.3, n, positives=positives,
                             **settings)  # fmt: skip
    for tests in (("nias",), ("niac",), ("niac", "nis")):
        part = P.rejection_rates(losses, misreported, precision, 0.3, n, positives=positives,
                                 tests=tests, **settings)  # fmt: skip
        assert set(part) - {"information", "information_interval"} == set(tests)
        for test in tests:
            np.testing.assert_array_equal(part[test], full[test])
    assert full["nias"].all()  # the misreport is caught
    with pytest.raises(ValueError, match="tests must be a non-empty subset"):
        P.rejection_rates(losses, losses, precision, 0.3, n, tests=("nias", "nip"), **settings)
    with pytest.raises(ValueError, match="positives must be an integer in"):
        P.rejection_rates(losses, losses, precision, 0.3, n, positives=n, **settings)
    with pytest.raises(ValueError, match="positives is for binary agents"):
        P.rejection_rates(losses, losses, precision, (0.5, 0.5), n, positives=10, **settings)


def test_a_rejected_test_has_its_size_simulated_but_not_its_power():
    """simulated_power given the run's verdicts: every test's size (capacity), and the power
    scenario of NIAC alone, the one test not rejected, running NIAC alone; its rates equal those
    of the simulation of every scenario (the same draws)."""
    from iml.grids import loss_family

    rng = np.random.default_rng(5)
    labels = (rng.random(600) < 0.3).astype(np.int32)
    args = (loss_family("log"), [0.3, 0.5, 0.7], labels, 0.3, 0.2)
    settings = {"n_bins": 5, "n_datasets": 3, "n_bootstrap": 20, "seed": 0}
    full = P.simulated_power(*args, **settings)
    said = []
    some = P.simulated_power(*args, rejected={"nis": True, "niac": False, "nias": True},
                             say=said.append, **settings)  # fmt: skip
    assert set(full["scenarios"]) == {"capacity", "falling", "rising", "misreported"}
    assert set(full["power"]) == {"nis", "niac", "nias"}
    assert full["power"]["nias"]["against"] == "the middle model reporting its odds times 2.0"
    assert full["precision"] == round(P.matched_precision(0.2, 0.3, 5), 4)
    assert f"{len(labels)} observations, {int(labels.sum())} positive" in full["agents"]
    assert set(some["scenarios"]) == {"capacity", "rising"} and set(some["power"]) == {"niac"}
    assert some["scenarios"]["capacity"] == full["scenarios"]["capacity"]
    assert some["size"] == full["size"] and some["power"]["niac"] == full["power"]["niac"]
    assert set(some["scenarios"]["rising"]) - set(full["scenarios"]["rising"]) == set()
    assert "nis" not in some["scenarios"]["rising"] and "nias" not in some["scenarios"]["rising"]
    assert said[-1].endswith("rising (NIAC)")
