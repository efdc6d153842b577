"""Tests of iml.revealed.shannon: the Shannon agent, the concavification behind it and the
interval of Shannon costs that fit a value matrix."""

import jax.numpy as jnp
import numpy as np
import pytest
from _revealed_references import binary_entropy, minimised_loss

from iml import loss_spec
from iml import revealed as R

BETAS = np.array([0.5, 0.7, 0.9, 0.99])


def test_curvature_identity_of_the_concavified_function(x64):
    # gamma (1 - gamma) N''(gamma) = beta (1 - beta) / Z(gamma) - lambda, N = -l* + lambda H.
    lam, h = 0.3, 1e-4
    gamma = np.array([0.03, 0.2, 0.5, 0.8, 0.97])
    for beta in BETAS:
        spec = loss_spec(beta)
        b = float(spec.params["beta"])

        def N(g, spec=spec):
            g = jnp.asarray(g, jnp.float64)
            return np.asarray(-spec.minimised_expected_loss(g)) + lam * binary_entropy(g)

        second = (N(gamma + h) - 2 * N(gamma) + N(gamma - h)) / h**2
        z = b * gamma + (1 - b) * (1 - gamma)
        np.testing.assert_allclose(
            gamma * (1 - gamma) * second, b * (1 - b) / z - lam, rtol=1e-5, atol=1e-6
        )


@pytest.mark.slow
def test_shannon_agent_reproduces_the_reference_experiments_and_verdicts():
    ex = R.shannon_agent(BETAS, 0.05, 0.3)
    np.testing.assert_allclose(ex.posterior[:, 0], 0.0, atol=1e-6)
    np.testing.assert_allclose(ex.posterior[:, 1], [1.0, 1.0, 0.578, 0.068], atol=5e-4)
    np.testing.assert_allclose(ex.prior, 0.05, atol=1e-6)
    info = R.mutual_information(ex)
    np.testing.assert_allclose(info, [0.199, 0.199, 0.140, 0.016], atol=5e-4)
    G = R.value_matrix(ex, BETAS)
    niac = R.niac_check(G)
    assert float(niac.margin) <= 1e-7 and not bool(niac.negative_cycle)
    assert R.niac_assignment_check(G)[0] <= 1e-7 and R.niac_brute_force(G)[0] <= 1e-7
    nis = R.nis_check(G)
    assert float(nis.margin) == pytest.approx(0.0209, abs=5e-4)  # beta = 0.99 prefers beta = 0.5's
    assert bool(nis.violations[3, 0]) and not bool(nis.violations[0].any())
    lam = R.shannon_lambda_interval(G, info)
    assert float(lam.lower) == pytest.approx(0.220, abs=1e-3)
    assert float(lam.upper) == pytest.approx(0.428, abs=1e-3)
    assert float(lam.lower) < 0.3 < float(lam.upper) and not bool(lam.rejected)
    bounds = R.revealed_cost_bounds(G)
    assert bool(bounds.feasible) and np.all(bounds.lower <= bounds.upper + 1e-7)
    # The true costs lambda I_k (relative to model 0) lie within the revealed bounds.
    cost = 0.3 * (np.asarray(info) - float(info[0]))
    assert np.all(bounds.lower - 1e-6 <= cost) and np.all(cost <= bounds.upper + 1e-6)


@pytest.mark.slow
def test_shannon_agent_is_the_concave_envelope_and_stops_learning_when_information_is_dear():
    rng = np.random.default_rng(4)
    pi, lam = 0.2, 0.25
    betas = np.array([0.6, 0.95, 0.3, 0.8])
    agents = R.shannon_agent(betas, pi, lam)
    for beta, p, g in zip(
        betas, np.asarray(agents.probability), np.asarray(agents.posterior), strict=True
    ):

        def objective(p, g, beta=beta):
            return np.sum(p * (-minimised_loss(beta, g) + lam * binary_entropy(g)))

        best = objective(p, g.astype(np.float64))
        assert p[1] > 0.01 and g[0] < pi < g[1]  # these agents learn
        for _ in range(200):  # random Bayes-plausible experiments of two signals
            a, b = rng.random() * pi, pi + rng.random() * (1 - pi)
            t = (pi - a) / (b - a)
            assert objective(np.array([1 - t, t]), np.array([a, b])) <= best + 1e-6
    dear = R.shannon_agent(np.array([0.5, 0.6, 0.7, 0.8]), pi, 2.0)
    np.testing.assert_allclose(dear.posterior, pi, atol=1e-6)
    np.testing.assert_allclose(R.mutual_information(dear), 0.0, atol=1e-6)


def test_lambda_interval_is_exactly_the_set_of_lambdas_that_fit():
    # Slack w[k, j] = G[k, k] - G[k, j] = 0.7 (I_k - I_j) + noise, the noise non-negative (so
    # lambda = 0.7 fits) in half of the matrices and of either sign in the other half.
    rng = np.random.default_rng(7)
    info = rng.random((200, 4))
    dI = info[:, :, None] - info[:, None, :]
    noise = rng.normal(size=(200, 4, 4)) * 0.05
    noise[:100] = np.abs(noise[:100])
    w = 0.7 * dI + noise * (1 - np.eye(4))
    G = (rng.normal(size=(200, 4, 1)) - w).astype(np.float32)
    info = info.astype(np.float32)
    lam = R.shannon_lambda_interval(G, info)
    w = np.diagonal(G, axis1=-2, axis2=-1)[:, :, None] - G
    dI = info[:, :, None] - info[:, None, :]
    assert not np.asarray(lam.rejected)[:100].any()
    assert np.all((lam.lower[:100] <= 0.7 + 1e-5) & (0.7 - 1e-5 <= lam.upper[:100]))
    for x in np.linspace(0.0, 3.0, 61):
        fits = np.all(x * dI <= w + 1e-6, axis=(-2, -1))
        inside = ~np.asarray(lam.rejected) & (lam.lower - 1e-5 <= x) & (x <= lam.upper + 1e-5)
        strictly = ~np.asarray(lam.rejected) & (lam.lower + 1e-5 < x) & (x < lam.upper - 1e-5)
        assert np.all(fits[strictly]) and not np.any(fits & ~inside)
    assert 0.1 < np.mean(lam.rejected) < 0.9


G2 = np.eye(2, dtype=np.float32)

BAD = {
    "information": (lambda: R.shannon_lambda_interval(G2, np.ones(3)), "information"),
    "prior": (lambda: R.shannon_agent(0.9, 1.0, 0.3), "prior"),
    "lam": (lambda: R.shannon_agent(0.9, 0.1, -1.0), "lam"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_naming_the_argument(name):
    call, match = BAD[name]
    with pytest.raises(ValueError, match=match):
        call()
