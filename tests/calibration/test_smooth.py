"""Tests of iml.calibration.smooth: the smooth calibration error and the smooth reliability
diagram.

The reference is the authors' ``relplot`` package (Blasiok & Nakkiran 2023). It states one
tolerance: ``relplot.smECE`` searches the bandwidth to ``eps=0.001``, so values are compared to
within 1e-3. ``relplot`` also departs from the paper's kernel in two places where our code
follows the paper: it truncates the Gaussian at distance 0.5 (felt once the bandwidth exceeds
about 0.15) and counts scores within one grid step of 0 or 1 once instead of twice in the
reflection. The comparisons use scores with little mass there, and a direct float64 kernel sum
checks the definition itself where ``relplot`` differs.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import relplot
from _calibration_samples import scores_of_kind

from iml import calibration as cal
from iml.scoring import loss_corrected_score

RELPLOT_TOLERANCE = 1e-3  # relplot.smECE's eps


def _exact_smooth_ece(scores, labels, bandwidth, n_points=1001):
    """The paper's smECE_sigma by direct float64 kernel sums (reflected Gaussian, no grid)."""
    s, r = np.asarray(scores, np.float64), np.asarray(labels, np.float64) - scores
    t = np.linspace(0.0, 1.0, n_points)
    num, den = np.zeros(n_points), np.zeros(n_points)
    for shift in (-4.0, -2.0, 0.0, 2.0):
        for image in (s, -s):
            z = (t[:, None] - image[None, :] - shift) / bandwidth
            k = np.exp(-0.5 * z * z)
            num += k @ r
            den += k.sum(axis=1)
    trapezoid = np.ones(n_points)
    trapezoid[[0, -1]] = 0.5
    return float(np.sum(trapezoid * np.abs(num)) / np.sum(trapezoid * den))


# ---------------------------------------------------------------------------------------------
# The smooth ECE
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["calibrated", "over_confident", "under_confident", "beta_weighted"]
)
def test_smooth_ece_and_its_bandwidth_match_relplot(kind):
    scores, labels = scores_of_kind(kind)
    ours = cal.smooth_ece(scores, labels)
    ece, width = relplot.smECE(
        scores.astype(np.float64), labels.astype(np.float64), return_width=True
    )
    assert abs(float(ours.ece) - ece) < RELPLOT_TOLERANCE
    # The same bisection: equal unless a step's decision falls within the discrepancy.
    assert abs(float(ours.bandwidth) - width) <= 2.0**-9
    # A fixed point: the error at the chosen bandwidth is at most the bandwidth.
    assert float(ours.ece) <= float(ours.bandwidth) < float(ours.ece) + 2e-3


@pytest.mark.slow
def test_smooth_ece_at_a_fixed_bandwidth_matches_relplot_and_the_direct_kernel_sum():
    scores, labels = scores_of_kind("over_confident", n=2000, seed=3)
    for sigma in (0.02, 0.05, 0.1):
        ours = float(cal.smooth_ece(scores, labels, bandwidth=sigma).ece)
        ref = relplot.smECE_sigma(scores.astype(np.float64), labels.astype(np.float64), sigma)
        assert abs(ours - ref) < RELPLOT_TOLERANCE
        assert ours == pytest.approx(_exact_smooth_ece(scores, labels, sigma), rel=1e-4)
    # Scores piled near 0 (a rare class, and its beta-weighted version at a wide bandwidth):
    # the definition holds where relplot's end-point shortcut moves its value by about 1e-3.
    rng = np.random.default_rng(2)
    p = rng.beta(0.5, 20.0, 3000)
    labels = (rng.random(3000) < p).astype(np.int32)
    for beta, sigma in ((0.5, 0.01), (0.9, 0.3)):
        scores = (beta * p / (beta * p + (1 - beta) * (1 - p))).astype(np.float32)
        ours = float(cal.smooth_ece(scores, labels, bandwidth=sigma).ece)
        assert ours == pytest.approx(_exact_smooth_ece(scores, labels, sigma), rel=1e-3)


def test_calibrated_large_sample_has_a_small_smooth_ece_and_a_miscalibrated_one_does_not():
    scores, labels = scores_of_kind("calibrated", n=100_000, seed=1)
    result = cal.smooth_ece(scores, labels)
    assert float(result.ece) < 0.01
    assert float(result.bandwidth) < 0.01
    wrong = cal.smooth_ece(scores, (np.random.default_rng(5).random(100_000) < 0.5 * scores))
    assert float(wrong.ece) > 0.1


def test_one_signed_residuals_give_the_mean_residual_at_every_bandwidth():
    # The reflected kernel keeps every score's mass inside [0, 1], so when no residual changes
    # sign the integral of |r_hat| delta_hat is the mean residual itself.
    scores, _ = scores_of_kind("calibrated", n=4000, seed=6)
    for labels, mean in ((np.zeros(4000), scores.mean()), (np.ones(4000), 1 - scores.mean())):
        for bandwidth in (None, 0.01, 0.3, 1.0):
            ece = float(cal.smooth_ece(scores, labels.astype(np.int32), bandwidth).ece)
            assert ece == pytest.approx(float(mean), rel=1e-4)


def test_integer_sample_weights_equal_repeated_observations():
    scores, labels = scores_of_kind("over_confident", n=500, seed=7)
    weights = np.random.default_rng(8).integers(0, 4, 500)
    weighted = cal.smooth_ece(scores, labels, sample_weight=weights)
    repeated = cal.smooth_ece(np.repeat(scores, weights), np.repeat(labels, weights))
    np.testing.assert_allclose(weighted.ece, repeated.ece, rtol=1e-5)
    assert float(weighted.bandwidth) == float(repeated.bandwidth)


@pytest.mark.slow
def test_vmap_over_betas_equals_the_loop_and_jit_equals_eager():
    scores, labels = scores_of_kind("beta_weighted", n=2000, seed=9)
    betas = jnp.array([0.3, 0.5, 0.8, 0.95])
    by_beta = jax.vmap(lambda b: loss_corrected_score(jnp.asarray(scores), b))(betas)
    vmapped = jax.vmap(cal.smooth_ece, in_axes=(0, None))(by_beta, labels)
    looped = [cal.smooth_ece(row, labels) for row in by_beta]
    np.testing.assert_allclose(vmapped.ece, [r.ece for r in looped], rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(vmapped.bandwidth, [r.bandwidth for r in looped])
    # The weight the scores were made with calibrates them best.
    assert int(np.argmin(vmapped.ece)) == 2
    eager, jitted = cal.smooth_ece(scores, labels), jax.jit(cal.smooth_ece)(scores, labels)
    np.testing.assert_allclose(jitted.ece, eager.ece, rtol=1e-6)
    assert float(jitted.bandwidth) == float(eager.bandwidth)
    curve = cal.smooth_calibration_curve(scores, labels)
    jitted_curve = jax.jit(cal.smooth_calibration_curve)(scores, labels)
    np.testing.assert_allclose(jitted_curve.event_rate, curve.event_rate, rtol=1e-5, atol=1e-7)
    curves = jax.vmap(cal.smooth_calibration_curve, in_axes=(0, None))(by_beta, labels)
    np.testing.assert_allclose(curves.ece, vmapped.ece, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# The smooth reliability diagram
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["calibrated", "over_confident"])
def test_smooth_curve_and_density_match_relplot_diagram(kind):
    # Bandwidths here are below 0.15, where relplot's truncated kernel is the paper's.
    scores, labels = scores_of_kind(kind)
    ref = relplot.prepare_rel_diagram(
        scores.astype(np.float64),
        labels.astype(np.float64),
        plot_confidence_band=False,
        report_CE_std=False,
    )
    curve = cal.smooth_calibration_curve(scores, labels)
    assert float(curve.bandwidth) == pytest.approx(ref["sigma"], abs=2.0**-9)
    assert float(curve.bandwidth) < 0.15
    assert abs(float(curve.ece) - ref["ce"]) < RELPLOT_TOLERANCE
    grid = np.asarray(curve.grid)
    rate = np.interp(ref["mesh"], grid, np.asarray(curve.event_rate))
    density = np.interp(ref["mesh"], grid, np.asarray(curve.density))
    dense = ref["density"] > 0.01 * ref["density"].max()
    np.testing.assert_allclose(rate[dense], ref["mu"][dense], atol=2e-3)
    np.testing.assert_allclose(
        density[dense], ref["density"][dense], atol=0.01 * ref["density"].max()
    )


@pytest.mark.slow
def test_calibrated_curve_follows_the_diagonal_within_its_band():
    scores, labels = scores_of_kind("calibrated", n=5000, seed=11)
    key = jax.random.key(12)
    curve = cal.smooth_calibration_curve(scores, labels, n_bootstrap=100, key=key)
    grid, rate = np.asarray(curve.grid), np.asarray(curve.event_rate)
    lower, upper = np.asarray(curve.event_rate_interval)
    density = np.asarray(curve.density)
    chex.assert_shape(curve.event_rate_interval, (2, grid.size))
    assert density.sum() * (grid[1] - grid[0]) == pytest.approx(1.0, abs=1e-3)
    dense = density > 0.2 * density.max()
    assert np.all((lower[dense] <= rate[dense] + 1e-6) & (rate[dense] <= upper[dense] + 1e-6))
    assert np.sum((density * np.abs(rate - grid))[dense]) / np.sum(density[dense]) < 0.03
    again = cal.smooth_calibration_curve(scores, labels, n_bootstrap=100, key=key)
    np.testing.assert_array_equal(again.event_rate_interval, curve.event_rate_interval)
    # At a fixed bandwidth, a quarter of the sample doubles the band's width (1 / sqrt(n)).
    widths = []
    for n in (5000, 1250):
        c = cal.smooth_calibration_curve(
            scores[:n], labels[:n], bandwidth=0.05, n_bootstrap=100, key=key
        )
        lo, hi = np.asarray(c.event_rate_interval)
        widths.append(np.median((hi - lo)[dense]))
    assert 1.6 < widths[1] / widths[0] < 2.5


def test_smooth_curve_is_nan_where_no_score_reaches_like_an_empty_bin():
    rng = np.random.default_rng(13)
    scores = rng.uniform(0.0, 0.2, 500).astype(np.float32)
    labels = (rng.random(500) < scores).astype(np.int32)
    curve = cal.smooth_calibration_curve(scores, labels, bandwidth=0.01)
    rate, grid = np.asarray(curve.event_rate), np.asarray(curve.grid)
    assert np.all(np.isnan(rate[grid > 0.5])) and np.all(np.isfinite(rate[grid < 0.2]))
    assert np.all(np.asarray(curve.density)[grid > 0.5] == 0.0)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s, y: cal.smooth_ece(s, y, bandwidth=0.0), "bandwidth"),
        (lambda s, y: cal.smooth_ece(s, y, bandwidth=np.nan), "bandwidth"),
        (lambda s, y: cal.smooth_ece(s, y, n_grid=2), "n_grid"),
        (lambda s, y: cal.smooth_ece(s, y, n_bisection=0), "n_bisection"),
        (lambda s, y: cal.smooth_ece(s * 2, y), "scores"),
        (lambda s, y: cal.smooth_ece(s, y + 1), "labels"),
        (lambda s, y: cal.smooth_ece(s, y[:-1]), "labels"),
        (lambda s, y: cal.smooth_ece(s, y, sample_weight=-np.ones(s.size)), "sample_weight"),
        (lambda s, y: cal.smooth_calibration_curve(s, y, n_bootstrap=5), "key"),
        (lambda s, y: cal.smooth_calibration_curve(s, y, bandwidth=-1.0), "bandwidth"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(call, match):
    scores, labels = scores_of_kind("calibrated", n=100)
    with pytest.raises(ValueError, match=match):
        call(scores, labels)


def test_under_jit_bad_entries_give_nan():
    scores, labels = scores_of_kind("calibrated", n=300, seed=14)
    ece = jax.jit(lambda s, y, w, b: cal.smooth_ece(s, y, b, w))
    curve = jax.jit(lambda s, y, w, b: cal.smooth_calibration_curve(s, y, b, w))
    ones = np.ones(300)
    bad = {
        "nan score": (np.where(np.arange(300) == 3, np.nan, scores), labels, ones, None),
        "score above 1": (np.where(np.arange(300) == 3, 1.5, scores), labels, ones, None),
        "label 2": (scores, np.where(np.arange(300) == 3, 2, labels), ones, None),
        "negative weight": (scores, labels, np.where(np.arange(300) == 3, -1.0, 1.0), None),
        "zero bandwidth": (scores, labels, ones, 0.0),
    }
    for name, args in bad.items():
        assert np.all(np.isnan(np.array(ece(*args)))), name
        c = curve(*args)
        assert np.all(np.isnan(np.asarray(c.event_rate))) and np.isnan(float(c.ece)), name
    good = ece(scores, labels, ones, None)
    assert np.all(np.isfinite(np.array(good)))
