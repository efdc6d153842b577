"""Tests of iml.scoring.generic: the optimal scoring rule of any loss and its inverse by automatic
differentiation, and the projection onto the simplex."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _scoring_references import (
    c_ref,
    dented_partial_losses,
    dented_weight,
    random_simplex,
    user_loss,
)

from iml import losses as L
from iml import scoring as S
from iml.scoring import generic


@pytest.mark.parametrize("n", [2, 3, 26, generic._PAIRWISE_PROJECTION_MAX + 1])
def test_simplex_projection_is_the_nearest_point_of_the_simplex(n, x64):
    """Both ways of projecting (all pairs of entries up to 64 classes, a sort above) against the
    optimality conditions of the projection: ``x = max(v - theta, 0)`` on the simplex, which
    holds for one ``theta`` only; with ties, large and tiny entries."""
    rng = np.random.default_rng(n)
    v = rng.normal(size=(200, n)) * rng.choice([1e-3, 1.0, 30.0], size=(200, 1))
    v[:20, 1] = v[:20, 0]  # ties
    v[20:30] = 0.25  # a whole row of ties
    x = np.asarray(generic._project_to_simplex(jnp.asarray(v)))
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-12)
    assert np.all(x >= 0)
    # KKT: on the support x = v - theta, off it v <= theta, with one theta per row
    support = x > 0
    theta = np.where(support, v - x, np.nan)
    theta_row = np.nanmean(theta, axis=-1, keepdims=True)
    np.testing.assert_allclose(
        np.where(support, theta, theta_row), np.broadcast_to(theta_row, v.shape), atol=1e-12
    )
    assert np.all(np.where(support, True, v <= theta_row + 1e-12))
    # and nearer to v than random points of the simplex
    other = rng.dirichlet(np.ones(n), size=200)
    assert np.all(np.sum((x - v) ** 2, -1) <= np.sum((other - v) ** 2, -1) + 1e-12)


def brute_force_minimiser(loss, gamma, *params, n=50_001):
    grid = jnp.asarray(np.linspace(1e-6, 1 - 1e-6, n), jnp.float64)
    expected = gamma * loss(grid, 1.0, *params) + (1 - gamma) * loss(grid, 0.0, *params)
    return float(grid[jnp.argmin(expected)])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "loss", "params", "closed_form"),
    [
        ("log", L.beta_weighted_loss, (0.9,), lambda g: c_ref(g, 0.9)),
        (
            "squared",
            lambda a, y, b: L.beta_weighted_loss(a, y, b, L.squared_loss),
            (0.2,),
            lambda g: c_ref(g, 0.2),
        ),
        (
            "user_weight",
            lambda a, y, b: L.beta_weighted_loss(a, y, b, user_loss()),
            (0.97,),
            lambda g: c_ref(g, 0.97),
        ),
        ("focal", L.focal_loss, (2.0, 0.5), None),
    ],
)
def test_brute_force_minimiser_matches_the_rule(x64, name, loss, params, closed_form):
    gammas = [0.02, 0.3, 0.5, 0.85]
    rule = S.optimal_score_for_loss(loss, jnp.asarray(gammas, jnp.float64), *params)
    for gamma, a in zip(gammas, np.asarray(rule), strict=True):
        assert a == pytest.approx(brute_force_minimiser(loss, gamma, *params), abs=3e-5)
        if closed_form is not None:
            assert a == pytest.approx(closed_form(gamma), rel=1e-9)


def test_generic_rule_in_float32_reaches_extreme_scores():
    gamma = jnp.array([0.0, 1e-7, 1e-4, 0.5, 1 - 1e-4, 1.0], jnp.float32)
    a = S.optimal_score_for_loss(L.beta_weighted_loss, gamma, 0.99)
    ref = [c_ref(g, np.float32(0.99)) for g in np.asarray(gamma)]
    np.testing.assert_allclose(a, ref, rtol=1e-5)


@pytest.mark.slow
def test_generic_inverse_matches_closed_form_and_undoes_the_rule():
    a = jnp.linspace(0.001, 0.999, 50)
    for beta in (0.1, 0.9, 0.999):
        gamma = S.loss_corrected_score_for_loss(L.beta_weighted_loss, a, beta)
        np.testing.assert_allclose(gamma, S.loss_corrected_score(a, beta), rtol=5e-5)
    focal = functools.partial(L.focal_loss, gamma=3.0, alpha=0.25)
    gam = jnp.linspace(0.01, 0.99, 25)
    scores = S.optimal_score_for_loss(focal, gam)
    np.testing.assert_allclose(S.loss_corrected_score_for_loss(focal, scores), gam, atol=2e-5)


def test_generic_inverse_at_scores_of_exactly_zero_and_one():
    gamma = S.loss_corrected_score_for_loss(L.beta_weighted_loss, jnp.array([0.0, 1.0]), 0.9)
    np.testing.assert_array_equal(gamma, [0.0, 1.0])


def test_gradient_of_generic_rule_uses_implicit_function_theorem():
    gamma = jnp.array([0.1, 0.5, 0.8])

    def total(g, b):
        return S.optimal_score_for_loss(L.beta_weighted_loss, g, b).sum()

    grads = jax.grad(total, argnums=(0, 1))(gamma, 0.9)
    ref = jax.grad(lambda g, b: S.optimal_score(g, b).sum(), argnums=(0, 1))(gamma, 0.9)
    np.testing.assert_allclose(grads[0], ref[0], rtol=1e-4)
    np.testing.assert_allclose(grads[1], ref[1], rtol=1e-4)


@pytest.mark.slow
def test_generic_rule_vmaps_over_a_grid_of_weights():
    grid = jnp.array([0.3, 0.6, 0.95])
    gamma = jnp.array([0.05, 0.5, 0.9])
    out = jax.vmap(lambda b: S.optimal_score_for_loss(L.beta_weighted_loss, gamma, b))(grid)
    np.testing.assert_allclose(out, S.optimal_score(gamma[None, :], grid[:, None]), rtol=1e-5)
    broadcast = S.optimal_score_for_loss(L.beta_weighted_loss, gamma[None, :], grid[:, None])
    np.testing.assert_allclose(broadcast, out, rtol=1e-6)


@pytest.mark.slow
def test_generic_multiclass_rules_match_closed_forms():
    gamma = random_simplex(jax.random.PRNGKey(7), 4, 8)
    w = jnp.array([1.0, 5.0, 2.0, 0.3])
    a = S.optimal_score_multiclass_for_loss(L.class_weighted_cross_entropy, gamma, w)
    exact = S.optimal_score_class_weighted(gamma, w)
    np.testing.assert_allclose(a, exact, atol=5e-5)
    # the generic inverse of the exact scores (the inverse scales an error in the scores by up
    # to max(w) / min(w), so the generic scores' 5e-5 would blur it)
    back = S.loss_corrected_score_multiclass_for_loss(L.class_weighted_cross_entropy, exact, w)
    np.testing.assert_allclose(back, gamma, atol=1e-5)
    B = jnp.exp(jax.random.normal(jax.random.PRNGKey(8), (4, 4)))
    a_box = S.optimal_score_multiclass_for_loss(L.matrix_weighted_loss, gamma, B, domain="box")
    np.testing.assert_allclose(a_box, S.optimal_score_multiclass(gamma, B), atol=5e-5)
    back_box, residual = S.loss_corrected_score_multiclass_for_loss(
        L.matrix_weighted_loss, a_box, B, domain="box", return_residual=True
    )
    np.testing.assert_allclose(back_box, gamma, atol=1e-4)
    assert np.all(residual < 1e-3)


@pytest.mark.slow
def test_focal_multiclass_correction_round_trips():
    gamma = random_simplex(jax.random.PRNGKey(9), 3, 6)
    focal = functools.partial(L.focal_loss_multiclass, gamma=2.0)
    a = S.optimal_score_multiclass_for_loss(focal, gamma)
    # Focal loss is not proper: its optimal scores are less confident than the posterior.
    top = jnp.argmax(gamma, axis=-1)
    assert np.all(
        jnp.take_along_axis(a, top[:, None], -1) < jnp.take_along_axis(gamma, top[:, None], -1)
    )
    np.testing.assert_allclose(
        S.loss_corrected_score_multiclass_for_loss(focal, a), gamma, atol=2e-4
    )


@pytest.mark.slow
def test_generic_rule_finds_the_global_minimum_among_several():
    # Root loss sqrt|a - y| makes the expected loss concave: its minimum is at a boundary, 1 for
    # gamma > 1/2 and 0 below, with a local minimum at the other end.
    def root(a, y):
        return jnp.sqrt(jnp.abs(a - y))

    a = S.optimal_score_for_loss(root, jnp.array([0.2, 0.45, 0.55, 0.9]))
    np.testing.assert_allclose(a, [0.0, 0.0, 1.0, 1.0], atol=1e-6)

    # A double well in the logit, tilted by gamma:
    # E(z) = (z^2 - 4)^2 / 10 + 0.3 z (gamma - 1/2), whose global minimum is near z = -2 for
    # gamma > 1/2, with a local one near z = +2.
    def wells(a, y):
        z = jnp.log(a) - jnp.log1p(-a)
        return (z * z - 4.0) ** 2 / 10.0 + (y - 0.5) * 0.3 * z

    gamma = 0.7
    z = np.linspace(-8, 8, 160_001)
    expected = (z * z - 4.0) ** 2 / 10.0 + 0.3 * z * (gamma - 0.5)
    best = 1 / (1 + np.exp(-z[np.argmin(expected)]))
    assert best < 0.5
    ours = S.optimal_score_for_loss(wells, jnp.array([gamma]))
    np.testing.assert_allclose(ours, [best], atol=1e-4)


def _neg_spherical(a, y, beta):
    """The beta-weighted spherical scoring rule as a loss: its expected loss is flat to float32
    precision near the minimum (within 1e-8 of -1 at beta = 0.99)."""
    a = jnp.asarray(a)
    norm = jnp.sqrt(a**2 + (1 - a) ** 2)
    return jnp.where(y == 1, -beta * a / norm, -(1 - beta) * (1 - a) / norm)


@pytest.mark.slow
def test_generic_rule_finds_minima_of_nearly_flat_expected_losses():
    # The spherical rule is proper, so at beta its optimal score is the beta-tilted posterior
    # (Proposition 2's closed form); the loss values alone cannot tell 0.99987 from 0.9999969.
    gamma = jnp.array([0.2, 0.5, 0.9, 0.99969, 0.999999])
    a = S.optimal_score_for_loss(_neg_spherical, gamma, 0.99)
    np.testing.assert_allclose(a, S.optimal_score(gamma, 0.99), rtol=2e-6)
    inner = jax.nn.sigmoid(jnp.linspace(-9.0, 9.0, 1801))
    report = S.check_invertibility(_neg_spherical, 0.99, grid=inner)
    assert bool(report.invertible) and bool(jnp.all(report.round_trip))
    # Written as a / |a| in float32, its derivatives cancel to within float precision of 1 - a
    # and of a: the default grid (logits to +-16.64) finds the float32 rule noisy beyond that.
    full = S.check_invertibility(_neg_spherical, 0.99)
    failing = np.asarray(full.scores)[np.asarray(full.failing)]
    assert not full.passed() and np.all(np.abs(np.log(failing) - np.log1p(-failing)) > 9)


# ----------------------------------------------------------------------------------------------
# The generic binary rule and its inverse at float32's ends
# ----------------------------------------------------------------------------------------------


def _corollary_1(a, beta):
    """Corollary 1 (eq. ``loss-c-bin``) in float64: ``(1 - beta) a / (beta + (1 - 2 beta) a)``."""
    a = np.asarray(a, np.float64)
    return (1 - beta) * a / (beta * (1 - a) + (1 - beta) * a)


def test_generic_rule_of_weighted_log_loss_is_positive_below_float32_resolution():
    # At beta = 0.01 the optimal score is about gamma / 99: below 1.2e-7 (logit -16) for
    # gamma <= 1e-5, where float32 scores are still dense.
    gamma = np.array([1e-4, 1e-5, 1e-6, 1e-7, 1e-12, 1e-30], np.float32)
    a = np.asarray(S.optimal_score_for_loss(L.beta_weighted_loss, jnp.asarray(gamma), 0.01))
    ref = np.array([c_ref(g, np.float32(0.01)) for g in gamma])
    assert np.all(a > 0)
    np.testing.assert_allclose(a, ref, rtol=1e-6)
    # and so the expected loss at the optimum is finite and the weighted entropy (Z h(c))
    expected = np.asarray(
        gamma * L.beta_weighted_loss(a, 1.0, 0.01)
        + (1 - gamma) * L.beta_weighted_loss(a, 0.0, 0.01)
    )
    z = 0.01 * gamma.astype(np.float64) + 0.99 * (1 - gamma.astype(np.float64))
    entropy = -z * (ref * np.log(ref) + (1 - ref) * np.log1p(-ref))
    np.testing.assert_allclose(expected, entropy, rtol=1e-5)


def test_generic_inverse_of_weighted_log_loss_near_and_at_one_and_zero():
    a = np.array([0.0, 1e-30, 2.0**-24, 0.999995, 0.999999, 1 - 2.0**-24, 1.0], np.float32)
    for beta in (0.01, 0.5, 0.99):
        gamma = np.asarray(S.loss_corrected_score_for_loss(L.beta_weighted_loss, a, beta))
        assert np.all(np.isfinite(gamma)), beta
        ref = _corollary_1(a, float(np.float32(beta)))  # the weight the loss sees
        np.testing.assert_allclose(gamma, ref, rtol=2e-7, atol=0)
        assert gamma[0] == 0.0 and gamma[-1] == 1.0


def _boosting(a, y, beta):
    """The beta-weighted boosting (exponential) loss: ``sqrt((1 - a)/a)`` for the positive class,
    ``sqrt(a/(1 - a))`` for the negative; strictly proper with ``w(a) = (a(1 - a))^(-3/2) / 2``,
    so its rule and inverse are Proposition 2's and Corollary 1's."""
    a = jnp.asarray(a)
    return jnp.where(y == 1, beta * jnp.sqrt((1 - a) / a), (1 - beta) * jnp.sqrt(a / (1 - a)))


@pytest.mark.slow
@pytest.mark.parametrize("beta", [0.01, 0.1, 0.5, 0.9, 0.99])
def test_generic_boosting_loss_matches_closed_forms_across_float32_scores(beta):
    z = np.linspace(-16.6, 16.6, 667)
    scores = np.concatenate([[0.0], 1 / (1 + np.exp(-z)), [1.0]]).astype(np.float32)
    inverse = np.asarray(S.loss_corrected_score_for_loss(_boosting, scores, beta))
    np.testing.assert_allclose(inverse, _corollary_1(scores, beta), rtol=0, atol=2e-6)
    assert inverse[0] == 0.0 and inverse[-1] == 1.0
    gamma = np.linspace(0.0, 1.0, 101).astype(np.float32)
    rule = np.asarray(S.optimal_score_for_loss(_boosting, jnp.asarray(gamma), beta))
    np.testing.assert_allclose(rule, S.optimal_score(gamma, beta), rtol=0, atol=2e-6)


def test_generic_rule_keeps_the_lower_of_two_minima_closer_than_the_scan():
    # Posteriors whose two local minima differ in expected loss by 3e-6 to 1e-5: less than the
    # expected loss changes between the scan's grid points around them.
    l1, l0 = dented_partial_losses()
    x = np.linspace(0.0, 1.0, 1_000_001)[1:-1]
    gamma = np.array([0.2059, 0.2142, 0.4950, 0.5075, 0.5150], np.float32)
    best = [x[np.argmin(g * l1(x) + (1 - g) * l0(x))] for g in gamma.astype(np.float64)]
    ours = S.optimal_score_for_loss(L.proper_loss(dented_weight), jnp.asarray(gamma))
    np.testing.assert_allclose(ours, best, atol=1e-5)
