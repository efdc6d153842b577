"""Tests of iml.calibration.loss_calibration: the one test of loss calibration (Definition 2),
its power, effect size and verdict, Holm's adjustment, and the curve of Figure 3."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _calibration_samples import binary_sample, np_loss_calibrated_sample
from scipy.special import expit, logit
from scipy.stats import chi2

from iml import calibration as cal
from iml.calibration.loss_calibration import calibration_test_in_parts


def _hand_test(g: np.ndarray, y: np.ndarray, n_bins: int = 10, m: float = 10.0):
    """Independent float64 reference: deciles of g (np.percentile, right-closed bins), merged
    in order until each holds m expected positives and negatives (a short tail joins the bin
    below), then T = sum (O - E)^2 / V against chi-square with S degrees of freedom."""
    g, y = g.astype(np.float64), y.astype(np.float64)
    edges = np.percentile(g.astype(np.float32), np.linspace(0, 100, n_bins + 1))
    bins = np.searchsorted(edges[1:-1], g.astype(np.float32), side="left")
    groups, group, p, q = [], 0, 0.0, 0.0
    for b in range(n_bins):
        p, q = p + g[bins == b].sum(), q + (1 - g[bins == b]).sum()
        groups.append(group)
        if p >= m and q >= m:
            group, p, q = group + 1, 0.0, 0.0
    groups = np.asarray(groups)
    if groups[-1] == group and group > 0:
        groups[groups == group] = group - 1
    merged = groups[bins]
    S = len(np.unique(merged))
    O = np.bincount(merged, y)
    E = np.bincount(merged, g)
    V = np.bincount(merged, g * (1 - g))
    T = float(np.sum((O - E) ** 2 / V))
    return T, float(chi2.sf(T, S)), S, merged


def _calibrated(seed: int, n: int, prior_logit: float = -1.0, spread: float = 2.0):
    rng = np.random.default_rng(seed)
    g = expit(rng.normal(prior_logit, spread, n)).astype(np.float32)
    return g, (rng.random(n) < g).astype(np.int32)


@pytest.mark.slow
def test_statistic_bins_and_p_value_match_an_independent_float64_computation():
    g, y = _calibrated(0, 3000)
    r = cal.calibration_test(g, y)
    T, p, S, merged = _hand_test(g, y)
    assert int(r.n_bins) == S and bool(r.testable)
    np.testing.assert_array_equal(np.asarray(r.bins), merged)
    np.testing.assert_allclose(float(r.statistic), T, rtol=2e-3)
    np.testing.assert_allclose(float(r.p_value), p, rtol=5e-3, atol=1e-6)
    observed = np.bincount(merged, y.astype(np.float64), 10)
    np.testing.assert_allclose(np.asarray(r.observed), observed)
    # The effect size: the binned calibration error of g on the test's bins.
    expected = np.bincount(merged, g.astype(np.float64), 10)
    np.testing.assert_allclose(
        float(r.calibration_error), np.abs(observed - expected).sum() / g.size, rtol=1e-4
    )


@pytest.mark.slow
def test_loss_calibration_test_is_the_calibration_test_of_the_loss_corrected_scores():
    scores, labels = np_loss_calibrated_sample(11, 2000, 0.9)
    r = cal.loss_calibration_test(scores, labels, 0.9)
    from iml.spec import loss_spec

    corrected = cal.loss_corrected_scores(loss_spec(np.array([0.9])), scores[None])[0]
    direct = cal.calibration_test(corrected.astype(np.float32), labels)
    np.testing.assert_allclose(float(r.statistic), float(direct.statistic), rtol=1e-4)
    assert float(r.p_value) > 0.05  # loss-calibrated for 0.9
    wrong = cal.loss_calibration_test(scores, labels, 0.5)  # the same scores read under 1/2
    assert float(wrong.p_value) < 1e-6


@pytest.mark.slow
def test_size_at_most_the_level_and_power_as_reported():
    """300 data sets of 1,000 loss-calibrated observations: the test's size at 0.05, its power
    against true odds twice the corrected odds, and the power the test reports for them."""
    rng = np.random.default_rng(1)
    g = expit(rng.normal(-1.0, 1.5, 1000)).astype(np.float32)
    q = expit(logit(g.astype(np.float64)) + np.log(2.0)).astype(np.float32)

    @jax.jit
    def rates(key):
        def one(k):
            k_null, k_alt = jax.random.split(k)
            settings = {"min_count": 10.0, "level": 0.05, "n_bins": 10, "n_bootstrap": 0}
            run = functools.partial(
                calibration_test_in_parts, jnp.asarray(g), weight=None, key=k, **settings
            )
            null = run(labels=(jax.random.uniform(k_null, g.shape) < g).astype(jnp.float32))
            alt = run(labels=(jax.random.uniform(k_alt, g.shape) < q).astype(jnp.float32))
            return null.p_value <= 0.05, alt.p_value <= 0.05, null.power

        return jax.lax.map(one, jax.random.split(key, 300))

    null, alt, reported = map(np.asarray, rates(jax.random.key(2)))
    assert 0.01 <= null.mean() <= 0.09, null.mean()  # sd of a rate near 0.05 over 300: 0.013
    assert alt.mean() >= 0.8
    # The reported power is the smaller of odds x2 and x1/2: at most the simulated x2 rate (up
    # to Monte Carlo error), and close to it.
    assert reported[0] <= alt.mean() + 0.06
    assert reported[0] >= alt.mean() - 0.25


def test_one_bin_is_not_testable_never_not_rejected():
    rng = np.random.default_rng(3)
    g = np.full(300, 0.02, np.float32)  # 6 expected positives: one bin after merging
    y = (rng.random(300) < 0.02).astype(np.int32)
    r = cal.calibration_test(g, y)
    assert int(r.n_bins) == 1 and not bool(r.testable)
    assert np.isnan(float(r.p_value)) and np.isnan(float(r.power))
    assert cal.loss_calibration_verdict(float(r.p_value), 1, float(r.power)) == (
        "not testable (1 bin)"
    )


def test_verdicts_say_rejected_not_rejected_with_power_or_not_testable():
    assert cal.loss_calibration_verdict(3e-5, 6, 1.0) == "rejected (p = 3e-05, 6 bins)"
    assert cal.loss_calibration_verdict(0.41, 6, 0.93) == (
        "not rejected (p = 0.41, 6 bins; power 0.93 against odds x2)"
    )
    assert cal.loss_calibration_verdict(0.41, 3, 0.5, what="signals").endswith("odds x2)")
    assert cal.loss_calibration_verdict(float("nan"), 0, float("nan")) == "not testable (0 bins)"
    assert cal.loss_calibration_verdict(0.0, 4, 1.0) == "rejected (p < 1e-38, 4 bins)"


def test_impossible_label_rejects():
    g, y = _calibrated(4, 2000)
    g[0], y[0] = 0.0, 1  # a positive whose posterior is 0: impossible under H0
    r = cal.calibration_test(g, y)
    assert np.isinf(float(r.statistic)) and float(r.p_value) == 0.0


def test_miscalibration_in_one_direction_is_rejected_and_the_miss_exceeds_the_null():
    g, _ = _calibrated(5, 5000)
    rng = np.random.default_rng(6)
    y = (rng.random(g.size) < expit(logit(g.astype(np.float64)) + np.log(2))).astype(np.int32)
    r = cal.calibration_test(g, y)
    assert float(r.p_value) < 1e-6
    low, high = np.asarray(r.calibration_error_interval)
    assert low > float(r.null_calibration_error)
    assert low <= float(r.calibration_error) <= high


@pytest.mark.slow
def test_null_calibration_error_is_the_mean_calibration_error_of_calibrated_labels():
    g, _ = _calibrated(7, 4000)
    keys = jax.random.split(jax.random.key(8), 200)
    ys = [(jax.random.uniform(k, g.shape) < g).astype(jnp.int32) for k in keys[:200]]
    errors = [float(cal.calibration_test(g, np.asarray(y), n_bootstrap=0).calibration_error)
              for y in ys[:60]]  # fmt: skip
    r = cal.calibration_test(g, np.asarray(ys[0]))
    np.testing.assert_allclose(np.mean(errors), float(r.null_calibration_error), rtol=0.1)


@pytest.mark.slow
def test_reads_the_loss_as_a_spec_a_name_or_a_callable_alike():
    from iml.losses import focal_loss
    from iml.spec import loss_spec

    k1, k2 = jax.random.split(jax.random.key(21))
    posterior = jnp.clip(jax.random.uniform(k1, (1500,)), 1e-3, 1 - 1e-3)
    labels = (jax.random.uniform(k2, (1500,)) < posterior).astype(jnp.int32)
    spec = loss_spec("focal", gamma=2.0, alpha=0.5)
    scores = spec.optimal_score(posterior)
    as_spec = cal.loss_calibration_test(scores, labels, spec)
    as_config = cal.loss_calibration_test(scores, labels, {"name": "focal", "gamma": 2.0})
    as_callable = cal.loss_calibration_test(scores, labels, lambda a, y: focal_loss(a, y, 2.0, 0.5))
    for other in (as_config, as_callable):
        np.testing.assert_allclose(other.statistic, as_spec.statistic, rtol=1e-4, atol=1e-6)
    assert float(as_spec.p_value) > 0.05
    # The raw posteriors are not optimal under the focal loss: rejected.
    assert float(cal.loss_calibration_test(posterior, labels, spec).p_value) <= 0.05
    with pytest.raises(ValueError, match="not a batch"):
        cal.loss_calibration_test(scores, labels, np.array([0.3, 0.7]))


@pytest.mark.slow
def test_multiclass_tests_each_class_one_vs_rest_and_the_top_label():
    rng = np.random.default_rng(9)
    G = rng.dirichlet(np.full(4, 0.7), 4000).astype(np.float32)
    y = (rng.random((4000, 1)) > np.cumsum(G, axis=1)).sum(axis=1).clip(0, 3)
    r = cal.calibration_test(G, y)
    assert np.asarray(r.p_value).shape == (5,)  # four classes, then the top label
    for j in range(4):
        alone = cal.calibration_test(G[:, j], (y == j).astype(np.int32))
        np.testing.assert_allclose(float(r.statistic[j]), float(alone.statistic), rtol=1e-5)
    top = cal.calibration_test(G.max(1), (y == G.argmax(1)).astype(np.int32))
    np.testing.assert_allclose(float(r.statistic[4]), float(top.statistic), rtol=1e-5)
    assert float(np.min(cal.holm_adjusted(r.p_value))) > 0.05
    # Class 2 reported with doubled odds: its one-vs-rest test rejects.
    shifted = G.copy()
    shifted[:, 2] = expit(logit(G[:, 2].astype(np.float64)) - np.log(3)).astype(np.float32)
    bad = cal.calibration_test(shifted, y)
    assert float(bad.p_value[2]) < 1e-6


def test_holm_adjusted_matches_the_step_down_by_hand_and_skips_untestable():
    p = np.array([0.01, np.nan, 0.04, 0.03, 0.5], np.float32)
    got = np.asarray(cal.holm_adjusted(p))
    # four tests: sorted 0.01, 0.03, 0.04, 0.5 -> 0.04, 0.09, 0.09 (monotone), 0.5
    np.testing.assert_allclose(got[[0, 3, 2, 4]], [0.04, 0.09, 0.09, 0.5], rtol=1e-6)
    assert np.isnan(got[1])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s, y: cal.loss_calibration_test(s, y, 1.5), "beta"),
        (lambda s, y: cal.loss_calibration_test(s, y * 2, 0.5), "labels"),
        (lambda s, y: cal.loss_calibration_test(s, y, 0.5, min_count=0), "min_count"),
        (lambda s, y: cal.loss_calibration_test(s, y, 0.5, level=1.0), "level"),
        (lambda s, y: cal.loss_calibration_test(s, y, 0.5, n_bootstrap=-1), "n_bootstrap"),
        (lambda s, y: cal.loss_calibration_test(s[:5], y[:5], 0.5), "fewer than n_bins"),
        (lambda s, y: cal.loss_calibration_curve(s[:5], y[:5], 0.5), "fewer than n_bins"),
    ],
)
def test_bad_input_is_named(call, match):
    scores, labels = binary_sample(100)
    with pytest.raises(ValueError, match=match):
        call(scores, labels)


def test_nan_posteriors_give_nan_not_a_verdict():
    g, y = _calibrated(10, 500)
    g[3] = np.nan
    r = cal.calibration_test(g, y)
    assert np.isnan(float(r.p_value))


@pytest.mark.slow
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
