"""Tests of iml.calibration.loss_calibration: loss calibration (Definition 2), its gap, curve,
test and the test's power."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _calibration_samples import binary_sample, np_loss_calibrated_sample
from _training_helpers import RUNS_LONG

from iml import calibration as cal


def _loss_calibrated_sample(key, n: int, beta: float):
    """Posteriors ~ Beta(1, 5) (inverse CDF), scores c^beta(posterior), labels ~ posterior."""
    from iml.scoring import optimal_score

    k1, k2 = jax.random.split(key)
    posterior = 1.0 - (1.0 - jax.random.uniform(k1, (n,))) ** (1.0 / 5.0)
    scores = optimal_score(posterior, beta)
    labels = (jax.random.uniform(k2, (n,)) < posterior).astype(jnp.int32)
    return scores, labels


def test_loss_calibration_test_size_and_power():
    """Rejection rate at alpha = 0.05 over 200 simulated datasets of 1,000 observations.

    H0 true (scores optimal for beta = 0.8, tested at 0.8): the rejection rate is the test's size.
    H0 false (the same kind of data tested at beta = 0.65, i.e. the wrong loss): its power.
    """

    @functools.partial(jax.jit, compiler_options=RUNS_LONG)
    def rejection_rate(keys, test_beta):
        def one(k):
            k_data, k_test = jax.random.split(k)
            scores, labels = _loss_calibrated_sample(k_data, 1000, 0.8)
            r = cal.loss_calibration_test(scores, labels, test_beta, n_bootstrap=99, key=k_test)
            covered = (r.gap_interval[0] <= r.gap) & (r.gap <= r.gap_interval[1])
            return r.p_value <= 0.05, covered

        rejected, covered = jax.lax.map(one, keys)
        return jnp.mean(rejected), jnp.mean(covered)

    keys = jax.random.split(jax.random.key(10), 200)
    size, covered = rejection_rate(keys, 0.8)
    power, _ = rejection_rate(keys, 0.65)
    # Binomial sd of a rate near 0.05 over 200 datasets is about 0.015.
    assert 0.015 <= float(size) <= 0.095, float(size)
    assert float(power) >= 0.9, float(power)
    assert float(covered) >= 0.9


def test_loss_calibration_gap_matches_hand_computation():
    scores, labels = np_loss_calibrated_sample(11, 2000, 0.9)
    s, y = np.asarray(scores, np.float64), np.asarray(labels)
    key = jax.random.key(12)
    r = cal.loss_calibration_test(scores, labels, 0.9, n_bootstrap=99, key=key)
    # By hand in float64: each decile's loss minus the loss of a' = c^beta(rate) for all of it.
    edges = np.percentile(s, np.linspace(0, 100, 11))
    bins = np.searchsorted(edges[1:-1], s)
    beta = 0.9

    def lb(a, yy):
        with np.errstate(divide="ignore"):
            return np.where(yy == 1, -beta * np.log(a), -(1 - beta) * np.log1p(-a))

    reduction = []
    for b in range(10):
        m = bins == b
        rate = y[m].mean()
        best = beta * rate / (beta * rate + (1 - beta) * (1 - rate))  # c^beta, Prop. 2
        np.testing.assert_allclose(r.optimal_score[b], best, rtol=1e-5)
        reduction.append((lb(s[m], y[m]).sum() - lb(np.full(m.sum(), best), y[m]).sum()) / 2000)
    np.testing.assert_allclose(r.loss_reduction, reduction, atol=2e-6)
    np.testing.assert_allclose(r.gap, np.sum(reduction), atol=1e-5)
    assert 0.05 < float(r.p_value) <= 1.0


def test_loss_calibration_test_with_focal_loss_passes_and_raw_posteriors_fail():
    from iml.losses import focal_loss
    from iml.scoring import optimal_score_for_loss

    k1, k2, k3 = jax.random.split(jax.random.key(13), 3)
    posterior = 1.0 - (1.0 - jax.random.uniform(k1, (2000,))) ** (1.0 / 3.0)
    labels = (jax.random.uniform(k2, (2000,)) < posterior).astype(jnp.int32)
    posterior = jnp.clip(posterior, 1e-3, 1 - 1e-3)
    focal = lambda a, y: focal_loss(a, y, 2.0, 0.5)  # noqa: E731
    optimal = optimal_score_for_loss(focal, posterior)
    passed = cal.loss_calibration_test(optimal, labels, focal, n_bootstrap=99, key=k3)
    failed = cal.loss_calibration_test(posterior, labels, focal, n_bootstrap=99, key=k3)
    assert float(passed.p_value) > 0.05
    assert float(failed.p_value) <= 0.05


def test_loss_calibration_reads_the_loss_as_a_spec_a_name_or_a_callable_alike():
    from iml.losses import focal_loss
    from iml.spec import loss_spec

    k1, k2, k3 = jax.random.split(jax.random.key(21), 3)
    posterior = jnp.clip(jax.random.uniform(k1, (1500,)), 1e-3, 1 - 1e-3)
    labels = (jax.random.uniform(k2, (1500,)) < posterior).astype(jnp.int32)
    spec = loss_spec("focal", gamma=2.0, alpha=0.5)
    scores = spec.optimal_score(posterior)
    as_spec = cal.loss_calibration_test(scores, labels, spec, n_bootstrap=49, key=k3)
    as_config = cal.loss_calibration_test(
        scores, labels, {"name": "focal", "gamma": 2.0}, n_bootstrap=49, key=k3
    )
    as_callable = cal.loss_calibration_test(
        scores, labels, lambda a, y: focal_loss(a, y, 2.0, 0.5), n_bootstrap=49, key=k3
    )
    for other in (as_config, as_callable):
        np.testing.assert_allclose(other.gap, as_spec.gap, rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(other.p_value, as_spec.p_value)
    # The beta-weighted Brier score: the same beta, another base loss, another gap.
    brier = cal.loss_calibration_test(
        scores, labels, loss_spec("squared", beta=0.5), n_bootstrap=49, key=k3
    )
    assert abs(float(brier.gap) - float(as_spec.gap)) > 1e-6
    curve = cal.loss_calibration_curve(scores, labels, spec)
    np.testing.assert_allclose(curve.optimal_score_grid, spec.optimal_score(curve.posterior_grid))
    with pytest.raises(ValueError, match="binary loss"):
        cal.loss_calibration_test(scores, labels, np.eye(3) + 1.0, key=k3)
    with pytest.raises(ValueError, match="not a batch"):
        cal.loss_calibration_curve(scores, labels, np.array([0.3, 0.7]))


def test_loss_calibration_curve_against_theoretical_map():
    from iml.scoring import optimal_score

    scores, labels = np_loss_calibrated_sample(14, 20_000, 0.9)
    curve = cal.loss_calibration_curve(scores, labels, 0.9)
    np.testing.assert_allclose(curve.optimal_score, optimal_score(curve.event_rate, 0.9), rtol=1e-5)
    np.testing.assert_allclose(
        curve.optimal_score_grid, optimal_score(curve.posterior_grid, 0.9), rtol=1e-5
    )
    # Loss-calibrated: the empirical points lie near the theoretical map, not near the diagonal.
    assert float(jnp.max(jnp.abs(curve.optimal_score - curve.mean_score))) < 0.06
    assert float(jnp.max(jnp.abs(curve.event_rate - curve.mean_score))) > 0.2
    wrong = cal.loss_calibration_curve(scores, labels, 0.5)
    assert float(jnp.max(jnp.abs(wrong.optimal_score - wrong.mean_score))) > 0.2


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s, y: cal.loss_calibration_test(s, y, 1.5, key=jax.random.key(0)), "beta"),
        (lambda s, y: cal.loss_calibration_test(s, y, 0.5, n_bootstrap=0), "n_bootstrap"),
        (lambda s, y: cal.loss_calibration_test(s, y * 2, 0.5, key=jax.random.key(0)), "labels"),
        (lambda s, y: cal.loss_calibration_curve(s[:5], y[:5], 0.5), "fewer than n_bins"),
    ],
)
def test_loss_calibration_rejects_bad_input(call, match):
    scores, labels = binary_sample(100)
    with pytest.raises(ValueError, match=match):
        call(scores, labels)


def test_impossible_label_makes_the_gap_infinite_and_rejects():
    scores, labels = np_loss_calibrated_sample(19, 2000, 0.5)
    scores[0], labels[0] = 0.0, 1  # a positive at score 0: impossible under H0
    r = cal.loss_calibration_test(scores, labels, 0.5, n_bootstrap=99, key=jax.random.key(0))
    assert np.isinf(float(r.gap)) and int(np.sum(np.isinf(np.asarray(r.loss_reduction)))) == 1
    np.testing.assert_allclose(r.p_value, 1 / 100)


def test_loss_calibration_power_against_the_neighbouring_beta_at_digits_size():
    """At digits' size (1,797 scores, prior about 0.1), scores calibrated under beta = 10/11:
    the test under 10/11 keeps its size, and its power against beta = 1/2 is reported."""
    from iml.calibration import loss_calibration_power
    from iml.revealed import simulate_gaussian_agents

    scores, _ = simulate_gaussian_agents(jax.random.key(0), [10 / 11], 3.1, 0.097, 1797)
    a = scores[0]

    # 1,000 simulated data sets of 200 bootstrap replicates each: optimised programs
    @functools.partial(jax.jit, static_argnames="n_simulations", compiler_options=RUNS_LONG)
    def power_of(tested, key, n_simulations):
        return loss_calibration_power(a, 10 / 11, tested, key=key, n_simulations=n_simulations)

    size = power_of(10 / 11, jax.random.key(2), n_simulations=400)
    assert float(size.rate) <= 0.05 + 2 * 0.011  # the parametric bootstrap is exact under H0
    assert float(size.standard_error) == pytest.approx(
        np.sqrt(size.rate * (1 - size.rate) / 400), rel=1e-5
    )
    power = power_of(0.5, jax.random.key(3), n_simulations=100)
    assert float(power.rate) >= 0.9  # a precise model at this size: 1/2 is told from 10/11
    # Against a closer neighbour (beta = 0.88) the power is lower.
    near = power_of(0.88, jax.random.key(3), n_simulations=100)
    assert float(near.rate) < float(power.rate)
    other = power_of(10 / 11, jax.random.key(5), n_simulations=400)
    assert not np.array_equal(other.rejected, size.rejected)  # the key draws the labels


def test_loss_calibration_power_names_bad_input():
    from iml.calibration import loss_calibration_power

    with pytest.raises(ValueError, match="n_simulations"):
        loss_calibration_power(np.full(10, 0.5), 0.5, 0.5, key=jax.random.key(0), n_simulations=0)
    with pytest.raises(ValueError, match="key"):
        loss_calibration_power(np.full(10, 0.5), 0.5, 0.5)
