"""Tests of iml.revealed.shannon: the Shannon agent, the concavification behind it and the
interval of Shannon costs that fit a value matrix."""

import jax.numpy as jnp
import numpy as np
import pytest
from _revealed_references import binary_entropy, minimised_loss
from jax.scipy.special import logsumexp

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


# ----------------------------------------------------------------------------------------------
# The Shannon agent of n classes
# ----------------------------------------------------------------------------------------------


def test_class_agent_of_two_classes_is_the_binary_agent():
    """The class-weighted softmax with weights ``(1 - beta, beta)`` is the beta-weighted log loss
    on two class scores: its agent (Blahut-Arimoto) uses the binary agent's posteriors (best
    chord) with the same probabilities."""
    betas, pi, lam = np.array([0.6, 0.95, 0.3, 0.8]), 0.2, 0.25
    binary = R.shannon_agent(betas, pi, lam)
    two = loss_spec("class_weighted_softmax", class_weights=np.stack([1 - betas, betas], -1))
    classes = R.shannon_agent(two, np.array([1 - pi, pi]), lam)
    assert classes.posterior.shape == (4, 2, 2)
    order = np.argsort(np.asarray(classes.posterior)[..., 1], axis=1)  # g_1 <= g_2
    g = np.take_along_axis(np.asarray(classes.posterior)[..., 1], order, 1)
    p = np.take_along_axis(np.asarray(classes.probability), order, 1)
    np.testing.assert_allclose(g, binary.posterior, atol=5e-4)
    np.testing.assert_allclose(p, binary.probability, atol=5e-4)
    np.testing.assert_allclose(
        R.mutual_information(classes), R.mutual_information(binary), atol=5e-4
    )


def _log_optimality_ratio(spec, experiments, k, prior, lam, candidates):
    """``log sum_y pi_y exp(-L(c(b), y) / lambda) / sum_s P(s) exp(-L(c(gamma_s), y) /
    lambda)`` for posteriors ``b`` ``[m, n]``, in float64: at most 0 at the optimum (Caplin,
    Dean and Leahy's condition for rational inattention with Shannon cost)."""
    n = len(prior)

    def utility(gamma):
        a = spec.optimal_score(jnp.asarray(gamma, jnp.float32))
        y = [spec.loss(a, jnp.full(a.shape[:-1], c, jnp.int32)) for c in range(n)]
        return -np.stack([np.asarray(v, np.float64) for v in y], -1) / lam

    p = np.asarray(experiments.probability[k], np.float64)
    used = p > 0
    log_z = logsumexp(np.log(p[used])[:, None] + utility(experiments.posterior[k][used]), axis=0)
    return np.asarray(logsumexp(np.log(prior) + utility(candidates) - log_z, axis=1))


@pytest.mark.slow
def test_class_agents_meet_the_optimality_condition_and_their_lambda_is_revealed():
    """Agents of three classes under two weighted losses (class 2's weight 1, 2, 4, 8): Bayes
    plausible, no posterior does better than their scores (the optimality condition on 4,000
    random posteriors, and equality at their own), and the value matrix of their experiments
    fits Shannon cost at their own lambda, with NIAC's margin at most 0."""
    rng = np.random.default_rng(0)
    prior = np.array([0.4, 0.4, 0.2])
    w = np.array([[1, 1, 1], [1, 1, 2], [1, 1, 4], [1, 1, 8]], float)
    grids = {
        1.3: loss_spec("class_weighted_softmax", class_weights=w),
        2.5: loss_spec("matrix", B=np.stack([np.ones((3, 3)) + np.diag(v - 1) for v in w])),
    }
    for lam, spec in grids.items():
        ex = R.shannon_agent(spec, prior, lam)
        plausible = np.einsum("ks,ksn->kn", ex.probability, ex.posterior)
        np.testing.assert_allclose(plausible, np.broadcast_to(prior, (4, 3)), atol=1e-6)
        for k in range(4):
            own = np.asarray(ex.posterior[k])[np.asarray(ex.probability[k]) > 0]
            others = rng.dirichlet(np.full(3, 0.7), 4000)
            ratio = _log_optimality_ratio(spec[k], ex, k, prior, lam, np.vstack([others, own]))
            assert ratio.max() < 1e-4
            np.testing.assert_allclose(ratio[-len(own) :], 0.0, atol=1e-4)
        info = R.mutual_information(ex)
        # information bought as class 2's weight rises, none at equal weights
        assert np.all(np.diff(np.asarray(info)) >= -1e-6) and float(info[0]) < 1e-6
        assert float(info[3]) > 0.3
        G = R.value_matrix(ex, spec)
        interval = R.shannon_lambda_interval(G, info)
        assert not bool(interval.rejected)
        assert float(interval.lower) < lam < float(interval.upper)
        assert float(R.niac_check(G).margin) <= 1e-6


def test_class_agent_learns_everything_or_nothing_under_the_unweighted_log_loss():
    """Under the unweighted log loss ``l* = H``, so ``N = (lambda - 1) H``: convex below
    ``lambda = 1`` (the agent learns the class), concave above (it learns nothing); free
    information (``lambda = 0``) is the class itself."""
    prior = np.array([0.5, 0.3, 0.2])
    log_loss = loss_spec("class_weighted_softmax", class_weights=np.ones(3))
    for lam in (0.0, 0.5):
        ex = R.shannon_agent(log_loss, prior, lam)
        order = np.argmax(np.asarray(ex.posterior[0]), axis=-1)
        np.testing.assert_allclose(np.asarray(ex.posterior[0]), np.eye(3)[order], atol=1e-4)
        np.testing.assert_allclose(np.asarray(ex.probability[0]), prior[order], atol=1e-4)
    dear = R.shannon_agent(log_loss, prior, 2.0)
    assert dear.probability.shape == (1, 1)
    np.testing.assert_allclose(dear.posterior[0, 0], prior, atol=1e-6)


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
    "class prior shape": (
        lambda: R.shannon_agent(loss_spec("matrix", B=np.ones((3, 3))), 0.3, 1.0),
        "prior",
    ),
    "class prior sum": (
        lambda: R.shannon_class_agent(
            loss_spec("matrix", B=np.ones((3, 3))), np.array([0.5, 0.3, 0.3]), 1.0
        ),
        "prior must sum to 1",
    ),
    "binary loss": (lambda: R.shannon_class_agent(0.9, np.array([0.5, 0.5]), 1.0), "n classes"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_naming_the_argument(name):
    call, match = BAD[name]
    with pytest.raises(ValueError, match=match):
        call()
