"""Tests of iml.scoring.checks: the first-order-condition and invertibility checks of a rule."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _scoring_references import random_simplex, user_loss

from iml import losses as L
from iml import scoring as S
from iml.scoring import checks


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


def test_invertibility_fails_when_the_round_trip_misses(monkeypatch):
    # A solver that lands 0.01 in the logit beside the minimum: the inverse is still fine
    # pointwise and increasing, so only the round trip can catch it.
    exact = checks.solve_binary_rule_jit

    def off(loss, gamma, params):
        a = exact(loss, gamma, params)
        return jax.nn.sigmoid(jnp.log(a) - jnp.log1p(-a) + 0.01)

    assert bool(S.check_invertibility(L.log_loss).invertible)
    monkeypatch.setattr(checks, "solve_binary_rule_jit", off)
    report = S.check_invertibility(L.log_loss)
    assert bool(report.increasing) and bool(jnp.all(report.pointwise))
    assert not bool(report.invertible)
    # all but where float32 posteriors near 1 stand for a range of scores wider than 0.01
    assert float(jnp.mean(report.round_trip)) < 0.1
