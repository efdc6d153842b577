"""Tests of iml.scoring.checks: the first-order-condition and invertibility checks of a rule."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _scoring_references import dented_partial_losses, dented_weight, random_simplex, user_loss

from iml import losses as L
from iml import scoring as S
from iml.scoring import checks


@pytest.mark.slow
def test_non_invertible_rules_are_detected():
    # Negative squared loss has its expected loss maximised where the FOC holds; absolute loss
    # makes every score optimal at gamma = 1/2. Neither rule can be inverted.
    for loss in (lambda a, y: -L.squared_loss(a, y), lambda a, y: jnp.abs(a - y)):
        report = S.check_invertibility(loss)
        assert not bool(report.invertible)
        assert np.all(np.isnan(S.loss_corrected_score_for_loss(loss, jnp.array([0.3, 0.6]))))
    for loss, params in ((L.log_loss, ()), (L.focal_loss, (2.0,)), (L.focal_loss, (5.0, 0.9))):
        assert bool(S.check_invertibility(loss, *params).invertible)


BINARY_GAMMAS = jnp.asarray(np.linspace(0.01, 0.99, 33), jnp.float32)


@pytest.mark.parametrize(
    ("loss", "rule", "weights"),
    [
        (L.log_loss, lambda g: g, None),
        (L.squared_loss, lambda g: g, None),
        (user_loss(), lambda g: g, None),
        (L.beta_weighted_loss, S.optimal_score, 0.9),
        (lambda a, y, b: L.beta_weighted_loss(a, y, b, L.squared_loss), S.optimal_score, 0.02),
        (
            lambda a, y, b: L.beta_weighted_loss(a, y, b, user_loss()),
            S.optimal_score,
            0.7,
        ),
        (L.focal_loss, lambda g, f: S.optimal_score_for_loss(L.focal_loss, g, f), 2.0),
    ],
    ids=["log", "squared", "user_weight", "beta_log", "beta_squared", "beta_user", "focal"],
)
def test_foc_check_passes_for_every_builtin_binary_loss(loss, rule, weights):
    report = S.check_first_order_conditions(loss, rule, BINARY_GAMMAS, weights)
    assert float(report.residual) < 1e-4
    assert float(report.min_curvature) > 0
    assert report.passed()


@pytest.mark.slow
def test_foc_check_passes_for_multiclass_losses():
    gamma = random_simplex(jax.random.PRNGKey(11), 3, 12)
    B = jnp.array([[1.0, 2.0, 0.5], [1.5, 1.0, 1.0], [0.7, 3.0, 2.0]])
    w = jnp.array([1.0, 4.0, 0.25])
    focal = functools.partial(L.focal_loss_multiclass, gamma=2.0)
    cases = [
        (L.matrix_weighted_loss, S.optimal_score_multiclass, B, "box"),
        (L.class_weighted_cross_entropy, S.optimal_score_class_weighted, w, "simplex"),
        (focal, lambda g: S.optimal_score_multiclass_for_loss(focal, g), None, "simplex"),
    ]
    for loss, rule, weights, domain in cases:
        report = S.check_first_order_conditions(loss, rule, gamma, weights, domain=domain)
        assert float(report.residual) < 1e-3, (domain, report.residual)
        assert float(report.min_curvature) > 0


@pytest.mark.slow
def test_foc_check_flags_a_wrong_rule():
    # Reporting the posterior itself is not optimal under a weighted loss.
    report = S.check_first_order_conditions(
        L.beta_weighted_loss, lambda g, b: g, BINARY_GAMMAS, 0.9
    )
    assert float(report.residual) > 0.5
    assert not report.passed()
    B = jnp.array([[1.0, 2.0], [3.0, 1.0]])
    gamma = random_simplex(jax.random.PRNGKey(12), 2, 5)
    report = S.check_first_order_conditions(
        L.matrix_weighted_loss, lambda g, B: g, gamma, B, domain="box"
    )
    assert float(report.residual) > 0.1
    # A rule at a maximum: stationary, but the curvature check fails.
    neg = S.check_first_order_conditions(
        lambda a, y: -L.squared_loss(a, y), lambda g: g, BINARY_GAMMAS
    )
    assert float(neg.residual) < 1e-6
    assert float(neg.min_curvature) < 0 and not neg.passed()


def test_foc_check_rejects_boundary_posteriors():
    with pytest.raises(ValueError, match="posteriors"):
        S.check_first_order_conditions(L.log_loss, lambda g: g, jnp.array([0.0, 0.5]))


@pytest.mark.slow
def test_invertibility_fails_when_the_round_trip_misses(monkeypatch):
    # A solver that lands 0.05 in the logit beside the minimum: the inverse is still fine
    # pointwise and increasing, so only the round trip can catch it. (The round trip allows 1e-3
    # of the logit beyond a logit of 1, up to 0.017 at the grid's ends.)
    exact = checks.solve_binary_rule_jit

    def off(loss, gamma, params):
        a = exact(loss, gamma, params)
        return jax.nn.sigmoid(jnp.log(a) - jnp.log1p(-a) + 0.05)

    assert bool(S.check_invertibility(L.log_loss).invertible)
    monkeypatch.setattr(checks, "solve_binary_rule_jit", off)
    report = S.check_invertibility(L.log_loss)
    assert bool(report.increasing) and bool(jnp.all(report.pointwise))
    assert not bool(report.invertible)
    # all but where float32 posteriors near 1 stand for a range of scores wider than 0.05
    assert float(jnp.mean(report.round_trip)) < 0.1


# ----------------------------------------------------------------------------------------------
# The default grid, passed() and failing_range(), against brute-force scans in float64
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_default_grid_spans_the_float32_scores_of_logits_to_16_64():
    grid = checks._default_grid()
    assert grid.dtype == np.float32 and np.all(np.diff(grid) > 0)
    assert grid[0] == np.float32(2.0**-24)
    assert grid[-1] == np.nextafter(np.float32(1), np.float32(0))  # 1 - 2^-24
    top = np.log(np.float64(grid[-1])) - np.log1p(-np.float64(grid[-1]))
    assert top == pytest.approx(checks._FLOAT32_MAX_LOGIT, abs=1e-9)
    report = S.check_invertibility(L.log_loss)
    np.testing.assert_array_equal(report.scores, grid)
    assert report.passed() is True and report.failing_range() is None


def _flat_weight(t):
    """``w(a) = (a (1 - a))^4``: a proper loss whose derivatives vanish like ``a^5`` and
    ``(1 - a)^5`` at the ends, and so fall towards float32's smallest normal number."""
    return (t * (1.0 - t)) ** 4


@pytest.mark.slow
@pytest.mark.parametrize("beta", [0.01, 0.99])
def test_flat_proper_loss_is_inverted_across_float32_logits(beta):
    # Schervish: L(a, 1) = int_a^1 (1 - c) w(c) dc and L(a, 0) = int_0^a c w(c) dc, weighted by
    # beta and 1 - beta. The first-order condition
    #   gamma beta (-(1 - a) w(a)) + (1 - gamma)(1 - beta) a w(a) = 0
    # gives gamma(a) = (1 - beta) a / (beta (1 - a) + (1 - beta) a): Corollary 1.
    base = L.proper_loss(_flat_weight)

    def flat(a, y, b):
        return L.beta_weighted_loss(a, y, b, base)

    report = S.check_invertibility(flat, beta)
    assert report.passed() and report.failing_range() is None
    # Brute force in float64 on the float32 scores of logits 0.001 apart over [-17, 17]
    z = np.linspace(-17.0, 17.0, 34_001)
    scores = np.unique((1.0 / (1.0 + np.exp(-z))).astype(np.float32))
    a = scores.astype(np.float64)
    w = (a * (1 - a)) ** 4
    d_pos, d_neg = -beta * (1 - a) * w, (1 - beta) * a * w
    gamma = d_neg / (d_neg - d_pos)
    np.testing.assert_allclose(gamma, (1 - beta) * a / (beta * (1 - a) + (1 - beta) * a), 1e-12)
    assert np.all(np.diff(np.log(d_neg) - np.log(-d_pos)) > 0)  # increasing: invertible
    ours = np.asarray(S.loss_corrected_score_for_loss(flat, scores, beta))
    np.testing.assert_allclose(ours, gamma, rtol=0, atol=1e-5)
    ends = S.loss_corrected_score_for_loss(flat, np.array([0.0, 1.0], np.float32), beta)
    np.testing.assert_array_equal(ends, [0.0, 1.0])


@pytest.mark.slow
def test_failing_range_agrees_with_a_brute_force_scan():
    # A weight negative on (0.3, 0.4): no posterior makes a score there optimal (a maximum), nor
    # scores around it where the expected loss's other minimum is lower.
    report = S.check_invertibility(L.proper_loss(dented_weight))
    assert report.passed() is False
    low, high = report.failing_range()
    message = f"not invertible for scores in [{low:.4g}, {high:.4g}]"
    # Brute force in float64 on the same grid: the posterior a score is optimal for (the loss
    # is proper where w > 0, so gamma = a), its log-odds increasing, and the score the lowest
    # expected loss over a fine grid of scores.
    a = np.asarray(report.scores, np.float64)
    w = dented_weight(a)
    d_pos, d_neg = -(1 - a) * w, a * w
    with np.errstate(invalid="ignore", divide="ignore"):
        log_odds = np.log(d_neg) - np.log(-d_pos)
    up = np.diff(log_odds) > 0
    ok = (d_pos < 0) & (d_neg > 0) & np.r_[up, True] & np.r_[True, up]
    l1, l0 = dented_partial_losses()
    x = np.linspace(0.0, 1.0, 100_001)[1:-1]
    l1x, l0x = l1(x), l0(x)
    for chunk in np.array_split(np.flatnonzero(ok), 30):
        g = a[chunk, None]
        lowest = np.min(g * l1x + (1 - g) * l0x, axis=1)
        ok[chunk] &= g[:, 0] * l1(a[chunk]) + (1 - g[:, 0]) * l0(a[chunk]) <= lowest + 1e-12
    brute = a[~ok]
    assert np.sum(~ok != np.asarray(report.failing)) <= 2
    step = 0.01 * 0.25  # the grid's logit step times a (1 - a) around the failing scores
    np.testing.assert_allclose((low, high), (brute.min(), brute.max()), atol=step, err_msg=message)
    assert 0.15 < low < 0.3 and 0.4 < high < 0.55, message
