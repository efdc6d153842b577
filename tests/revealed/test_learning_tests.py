"""Tests of iml.revealed.learning_tests: NIS and NIAC on value matrices (three ways to check
NIAC), the revealed cost bounds, and NIAS on scores."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _revealed_references import random_value_matrices

from iml import loss_spec
from iml import revealed as R


@pytest.mark.slow
def test_brute_force_assignment_and_floyd_warshall_agree_on_random_matrices():
    rng = np.random.default_rng(5)
    total = 0
    for K in range(2, 7):
        G = random_value_matrices(rng, 200, K)
        total += len(G)
        check = R.niac_check(G)
        mean_gain, total_gain = R.niac_brute_force(G)
        gain, sigma = R.niac_assignment_check(G)
        np.testing.assert_allclose(check.margin, mean_gain, atol=2e-5)
        violated = total_gain > 1e-4
        clear = total_gain < -1e-4
        assert np.array_equal(
            np.asarray(check.negative_cycle)[violated | clear], violated[violated | clear]
        )
        assert np.array_equal((gain > 1e-4)[violated | clear], violated[violated | clear])
        assert 0.1 < violated.mean() < 0.9  # both verdicts are exercised
        # The permutation is an assignment at least as good as any cycle's improvement.
        g64 = G.astype(np.float64)
        assert np.all(gain >= total_gain - 1e-4)
        np.testing.assert_allclose(
            np.take_along_axis(g64, sigma[..., None], -1).sum((-2, -1))
            - np.trace(g64, axis1=-2, axis2=-1),
            gain,
            atol=1e-9,
        )
        # The reported cycle is simple and attains the margin.
        for g, cycle, length, margin in zip(
            g64,
            np.asarray(check.cycle),
            np.asarray(check.cycle_length),
            np.asarray(check.margin),
            strict=True,
        ):
            c = cycle[:length]
            assert length >= 2 and len(set(c)) == length and np.all(cycle[length:] == -1)
            assert np.mean(g[c, np.roll(c, -1)] - g[c, c]) == pytest.approx(margin, abs=2e-5)
    assert total == 1000


@pytest.mark.slow
def test_nias_flags_raw_posteriors_under_beta_and_overconfident_scores():
    key = jax.random.key(13)
    scores, labels = R.simulate_gaussian_agents(key, [0.5, 0.5, 0.9, 0.5], 1.5, 0.1, 10_000)
    posterior = scores[0]  # beta = 0.5 reports the posterior itself
    logit = jnp.log(posterior) - jnp.log1p(-posterior)
    reported = jnp.stack(
        [
            posterior,  # raw posteriors, though trained under beta = 0.9
            jax.nn.sigmoid(2.5 * logit),  # over-confident
            scores[2],  # c^0.9 of the posterior: loss-calibrated under beta = 0.9
            scores[3],  # honest under beta = 0.5
        ]
    )
    losses = [0.9, 0.5, 0.9, 0.5]
    report = R.reveal(reported, labels, losses, n_bootstrap=100, key=key)
    np.testing.assert_array_equal(report.nias.violated, [True, True, False, False])
    p_value = report.nias.p_value
    assert np.all(p_value[:2] <= 1e-6) and np.all(p_value[2:] > 0.05)
    # The honest models' binned calibration error is a sampling error; the others' is not.
    assert np.all(report.nias.calibration_error[:2] > 5 * report.nias.calibration_error[2:])
    # reveal() runs nias_test with the same settings.
    alone = R.nias_test(reported, labels, losses)
    np.testing.assert_array_equal(alone.p_value, p_value)


@pytest.mark.slow
def test_nias_is_each_models_loss_calibration_test_with_holm_over_the_models():
    """NIAS gives each model the one loss-calibration test its run's table gives it (the same
    statistic, bins and unadjusted p-value), and Holm's adjustment over the K models."""
    from iml.calibration import holm_adjusted, loss_calibration_test

    key = jax.random.key(21)
    scores, labels = R.simulate_gaussian_agents(key, [0.3, 0.8, 0.9], 2.0, 0.2, 3000)
    test = R.nias_test(scores, labels, [0.3, 0.5, 0.9])  # the middle model misread
    for k, beta in enumerate([0.3, 0.5, 0.9]):
        alone = loss_calibration_test(scores[k], labels, beta)
        np.testing.assert_allclose(test.test.statistic[k], alone.statistic, rtol=1e-5)
        assert int(test.test.n_bins[k]) == int(alone.n_bins)
    np.testing.assert_allclose(test.p_value, holm_adjusted(test.test.p_value), rtol=1e-6)
    np.testing.assert_array_equal(test.violated, [False, True, False])


@pytest.mark.slow
def test_nias_rejects_one_misreported_model_among_64():
    """One test over 64 models and their bins: analytic p-values, so it can reject at K = 64
    (Holm over p-values floored at 1 / (B + 1) could not)."""
    betas = np.asarray(1.0 / (1.0 + np.exp(-np.linspace(0.0, np.log(99.0), 64))), np.float32)
    odds = 3.0 * betas[32] / (1.0 - betas[32])
    reported = betas.copy()
    reported[32] = odds / (1.0 + odds)
    scores, labels = R.simulate_gaussian_agents(jax.random.key(22), reported, 1.5, 0.1, 20_000)
    test = R.nias_test(scores, labels, betas)
    assert np.flatnonzero(test.violated).tolist() == [32]
    assert float(test.p_value[32]) < 1e-4
    honest = R.nias_test(scores, labels, reported)
    assert np.all(np.asarray(honest.p_value) > 1e-3)


def test_cost_bounds_are_feasible_exactly_without_negative_cycles_and_are_sharp():
    rng = np.random.default_rng(6)
    G = random_value_matrices(rng, 300, 5)
    check = R.niac_check(G)
    bounds = R.revealed_cost_bounds(G, reference=2)
    np.testing.assert_array_equal(bounds.feasible, ~np.asarray(check.negative_cycle))
    w = np.diagonal(G, axis1=-2, axis2=-1)[:, :, None] - G  # w[k, j] = G[k, k] - G[k, j]
    for i in np.flatnonzero(bounds.feasible):
        for costs in (bounds.upper[i], bounds.lower[i]):  # each end is itself a feasible cost
            c = np.asarray(costs, np.float64)
            assert c[2] == 0.0
            assert np.all(c[:, None] - c[None, :] <= w[i] + 1e-5)
    assert np.isnan(bounds.lower[~np.asarray(bounds.feasible)]).all()


G2 = np.eye(2, dtype=np.float32)

BAD = {
    "G": (lambda: R.nis_check(np.ones((2, 3))), "G"),
    "K": (lambda: R.niac_brute_force(np.eye(7)), "K <= 6"),
    "reference": (
        lambda: R.revealed_cost_bounds(np.eye(2, dtype=np.float32), reference=5),
        "reference",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_naming_the_argument(name):
    call, match = BAD[name]
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------------------------
# NIAS of models of n classes: the multinomial test of each model's cells
# ----------------------------------------------------------------------------------------------


def test_multinomial_test_of_two_classes_is_the_binary_statistic_on_the_same_cells():
    """For n = 2 the quadratic form with the multinomial covariance is the binary test's
    ``sum_s (O_s - E_s)^2 / V_s`` of the positives, ``V_s = sum w^2 g (1 - g)``, with one
    degree of freedom per cell."""
    rng = np.random.default_rng(0)
    n = 3000
    g = rng.uniform(0.05, 0.95, size=(2, n)).astype(np.float32)
    labels = (rng.uniform(size=n) < g[0]).astype(np.int32)
    cells = np.stack([np.minimum((g[k] * 6).astype(np.int32), 5) for k in range(2)])
    posteriors = np.stack([1.0 - g, g], axis=-1)
    test = R.multinomial_calibration_test(posteriors, cells, labels, 6, min_count=0.0)
    for k in range(2):
        O = np.bincount(cells[k], labels, 6)
        E = np.bincount(cells[k], g[k], 6)
        V = np.bincount(cells[k], g[k] * (1 - g[k]), 6)
        np.testing.assert_allclose(test.statistic[k], np.sum((O - E) ** 2 / V), rtol=2e-3)
        assert int(test.n_bins[k]) == 6
        binary_error = np.abs(O - E).sum() / n
        np.testing.assert_allclose(test.calibration_error[k], binary_error, rtol=1e-4)
    assert float(test.p_value[0]) > 1e-3  # model 0's posteriors are the truth


def test_nias_of_class_scores_rejects_uncorrected_scores_not_optimal_reports():
    """Agents of 3 classes reporting c^w of their posterior are loss-calibrated by construction;
    reports of the posterior itself, read as trained under the weights, are not. (The size at
    level 5% is simulated in experiments/studies/multiclass_reveal_power.py; here the honest
    agents' familywise p-values stay above 1e-3, which fails about once in a thousand keys.)"""
    weights = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 4.0], [1.0, 1.0, 10.0]])
    losses = loss_spec("class_weighted_softmax", class_weights=weights)
    unweighted = loss_spec("class_weighted_softmax", class_weights=np.ones((3, 3)))
    key = jax.random.key(4)
    prior = np.array([0.5, 0.3, 0.2])
    scores, labels = R.simulate_gaussian_agents(key, losses, 1.5, prior, 4000)
    honest = R.nias_test(scores, labels, losses, 5)
    assert np.all(np.asarray(honest.p_value) > 1e-3)
    assert np.all(np.asarray(honest.test.power) > 0.9)  # against top-class odds x2
    raw, labels = R.simulate_gaussian_agents(key, unweighted, 1.5, prior, 4000)
    misread = R.nias_test(raw, labels, losses, 5)
    np.testing.assert_array_equal(misread.violated, [False, True, True])


def test_a_cell_pooled_into_one_category_is_no_miss_however_its_sums_round():
    """A cell whose top class is near certain pools its other classes (expected under
    ``min_count`` together) into the top one: one category holding the whole cell, with zero
    variance and a count equal to its expectation. Float32 sums of thousands of posteriors
    miss that count by rounding; the statistic stays finite and the calibrated model is not
    rejected. A class given no chance that occurs, left unpooled, still makes the statistic
    infinite."""
    rng = np.random.default_rng(1)
    n = 20000
    confident = np.array([1.3e-4, 1.7e-4, 1 - 3e-4], np.float32)
    g = np.where((np.arange(n) < n // 2)[:, None], confident, [0.5, 0.3, 0.2]).astype(np.float32)
    labels = np.array([rng.choice(3, p=row / row.sum()) for row in g.astype(np.float64)])
    cells = (np.arange(n) >= n // 2).astype(np.int32)[None]
    test = R.multinomial_calibration_test(g[None], cells, labels, 2)
    assert np.isfinite(float(test.statistic[0])) and float(test.p_value[0]) > 1e-3
    impossible = g.copy()
    impossible[n // 2 :] = [0.6, 0.4, 0.0]  # class 2 given no chance in cell 1
    labels[-1] = 2
    test = R.multinomial_calibration_test(impossible[None], cells, labels, 2, min_count=0.0)
    assert np.isinf(float(test.statistic[0])) and float(test.p_value[0]) == 0.0
    pooled = R.multinomial_calibration_test(impossible[None], cells, labels, 2)  # into class 0
    assert np.isfinite(float(pooled.statistic[0])) and float(pooled.statistic[0]) > 100.0
    assert int(pooled.n_bins[0]) == 1  # cell 0 adds no degree of freedom: one category


def test_multinomial_test_rejects_bad_input_naming_it():
    g = np.full((1, 4, 3), 1 / 3, np.float32)
    with pytest.raises(ValueError, match="cells"):
        R.multinomial_calibration_test(g, np.zeros((1, 3), np.int32), [0, 1, 2, 0], 2)
    with pytest.raises(ValueError, match="cells"):
        R.multinomial_calibration_test(g, np.full((1, 4), 2, np.int32), [0, 1, 2, 0], 2)
    with pytest.raises(ValueError, match="labels"):
        R.nias_test(g, [0, 1, 5, 0], loss_spec("class_weighted_softmax", class_weights=[[1.0] * 3]))
