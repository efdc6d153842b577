"""Tests for iml.revealed: revealed experiments, NIS and NIAC, cost bounds, the Shannon agent and
the paired bootstrap tests' size on simulated agents."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _training_helpers import RUNS_LONG
from scipy.optimize import minimize_scalar

from iml import LossSpec, loss_spec
from iml import revealed as R
from iml.calibration import assign_bins, bin_edges

BETAS = np.array([0.5, 0.7, 0.9, 0.99])
BETAS_64 = 1.0 / (1.0 + np.exp(-np.linspace(0.0, np.log(99.0), 64)))


@pytest.fixture
def x64():
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


def binary_entropy(g):
    g = np.asarray(g, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.nan_to_num(g * np.log(g)) - np.nan_to_num((1 - g) * np.log(1 - g))


def minimised_loss(beta, gamma):
    """The closed form ``l*(gamma) = Z h(c^beta(gamma))`` of the beta-weighted log loss, float64."""
    z = beta * gamma + (1 - beta) * (1 - gamma)
    return z * binary_entropy(beta * gamma / z)


# ----------------------------------------------------------------------------------------------
# Minimised expected loss, value matrix, mutual information
# ----------------------------------------------------------------------------------------------


def test_value_of_a_one_signal_experiment_is_minus_the_numerically_minimised_loss():
    # K experiments of one signal each: G[k, j] = -l*_k(gamma_j), for every loss k.
    gammas = np.array([0.0, 0.01, 0.2, 0.5, 0.77, 0.999, 1.0])
    losses = [0.5, 0.7, 0.9, 0.99, 0.05, 0.3, loss_spec("squared", beta=0.3)]
    experiments = R.experiments_from_posteriors(np.ones((len(gammas), 1)), gammas[:, None])
    G = np.asarray(R.value_matrix(experiments, losses))
    for k, loss in enumerate(losses):
        spec = loss_spec(loss)
        for j, g in enumerate(gammas):
            expected = minimize_scalar(
                lambda a, g=g, spec=spec: (
                    g * float(spec.loss(a, 1)) + (1 - g) * float(spec.loss(a, 0))
                ),
                bounds=(1e-9, 1 - 1e-9),
                method="bounded",
                options={"xatol": 1e-10},
            ).fun
            assert -G[k, j] == pytest.approx(expected, abs=2e-6), (k, g)
            if k < 6:  # the beta-weighted log loss: Z h(c)
                assert -G[k, j] == pytest.approx(minimised_loss(losses[k], g), abs=1e-6)


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


def test_experiments_from_signals_count_like_numpy_and_weights_are_a_paired_resample():
    rng = np.random.default_rng(0)
    signals = rng.integers(0, 5, (3, 400)).astype(np.int32)
    labels = (rng.random(400) < 0.3).astype(np.int32)
    ex = R.experiments_from_signals(signals, labels, 5)
    for k in range(3):
        count = np.bincount(signals[k], minlength=5)
        pos = np.bincount(signals[k], weights=labels, minlength=5)
        np.testing.assert_allclose(ex.probability[k], count / 400, atol=1e-7)
        np.testing.assert_allclose(ex.posterior[k], pos / count, atol=1e-6)
    np.testing.assert_allclose(ex.prior, labels.mean(), atol=1e-7)
    # A multinomial replicate as weights equals resampling the observations for every model.
    weights = R.paired_bootstrap_weights(jax.random.key(1), 400, 3, resampling="multinomial")
    batched = R.experiments_from_signals(signals, labels, 5, weights)
    assert batched.probability.shape == (3, 3, 5)
    for b, w in enumerate(np.asarray(weights).astype(int)):
        idx = np.repeat(np.arange(400), w)
        resampled = R.experiments_from_signals(signals[:, idx], labels[idx], 5)
        np.testing.assert_allclose(batched.posterior[b], resampled.posterior, atol=1e-6)
        np.testing.assert_allclose(batched.probability[b], resampled.probability, atol=1e-6)
    poisson = np.asarray(R.paired_bootstrap_weights(jax.random.key(2), 100_000, 2))
    assert abs(poisson.mean() - 1) < 0.01 and abs(poisson.var() - 1) < 0.02


def test_revealed_experiments_bin_like_calibration_and_ignore_the_reporting_rule():
    key = jax.random.key(3)
    scores, labels = R.simulate_gaussian_agents(key, BETAS, 1.2, 0.2, 5000)
    ex = R.revealed_experiments(scores, labels)
    for k in range(4):
        bins = np.asarray(assign_bins(scores[k], bin_edges(scores[k], 10)))
        np.testing.assert_allclose(ex.probability[k], np.bincount(bins, minlength=10) / 5000)
    # Concrete scores are sorted on the host, traced ones by XLA: the same bins.
    traced = jax.jit(lambda s, y: R.revealed_experiments(s, y))(scores, labels)
    np.testing.assert_array_equal(traced.probability, ex.probability)
    np.testing.assert_array_equal(traced.posterior, ex.posterior)
    # Re-reporting under another loss (a monotone map) reveals the same experiment and I_k.
    posterior = jax.vmap(LossSpec.loss_corrected_score)(loss_spec(BETAS), scores)
    same = R.revealed_experiments(posterior, labels)
    np.testing.assert_allclose(same.posterior, ex.posterior, atol=1e-6)
    np.testing.assert_allclose(R.mutual_information(same), R.mutual_information(ex), atol=1e-6)


def test_mutual_information_matches_the_joint_table_and_zero_for_an_uninformative_signal():
    p = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    g = np.array([[0.0, 0.1, 0.4], [0.23, 0.9, 0.1]])
    ex = R.experiments_from_posteriors(p, g)
    info = np.asarray(R.mutual_information(ex))
    prior = (p[0] * g[0]).sum()
    joint = np.stack([p[0] * (1 - g[0]), p[0] * g[0]], axis=1)
    marginal = np.outer(p[0], [1 - prior, prior])
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.nansum(np.where(joint > 0, joint * np.log(joint / marginal), 0.0))
    assert info[0] == pytest.approx(expected, abs=1e-6)
    assert info[1] == pytest.approx(0.0, abs=1e-7)


# ----------------------------------------------------------------------------------------------
# The Shannon agent: the reference experiments and the tests on them
# ----------------------------------------------------------------------------------------------


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
# NIAC three ways, cost bounds and the lambda interval on random matrices
# ----------------------------------------------------------------------------------------------


def random_value_matrices(rng, n, K):
    """Supermodular matrices (the identity is optimal) plus noise of random size."""
    u = np.sort(rng.normal(size=(n, K, 1)), axis=1)
    v = np.sort(rng.normal(size=(n, 1, K)), axis=2)
    noise = rng.normal(size=(n, K, K)) * rng.choice([0.0, 0.05, 0.3, 1.0], size=(n, 1, 1))
    return (u * v + noise).astype(np.float32)


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


# ----------------------------------------------------------------------------------------------
# Simulated agents: size at K = 4 and K = 64, costly learning, NIAS
# ----------------------------------------------------------------------------------------------


def gaussian_values(betas, precisions, prior):
    """``V_k(d) = -E[l*_k(gamma(x))]`` of a Gaussian signal ``x ~ N(d y, 1)`` (float64 grid)."""
    x = np.linspace(-9.0, 9.0 + precisions.max(), 3001)[:, None]
    d = precisions[None, :]
    f1 = np.exp(-0.5 * (x - d) ** 2) / np.sqrt(2 * np.pi)
    f0 = np.exp(-0.5 * x**2) / np.sqrt(2 * np.pi)
    m = prior * f1 + (1 - prior) * f0
    g = prior * f1 / m
    return np.stack([-(m * minimised_loss(b, g)).sum(0) * (x[1, 0] - x[0, 0]) for b in betas])


def simulated_reports(
    betas, n, n_bootstrap, prior, seed, precision, n_data_sets=100, strategy="adaptive"
):
    """``reveal`` on data sets of Gaussian agents with given precisions, as a user calls it."""
    betas = np.asarray(betas, np.float32)
    reports = []
    keys = jax.random.split(jax.random.key(seed), n_data_sets)
    for i in range(n_data_sets):
        key_data, key_boot = jax.random.split(keys[i])
        scores, labels = R.simulate_gaussian_agents(key_data, betas, precision, prior, n)
        reports.append(
            R.reveal(
                scores,
                labels,
                betas,
                10,
                strategy,
                n_bootstrap=n_bootstrap,
                key=key_boot,
                nias=False,
            )
        )
    return jax.tree.map(lambda *x: np.stack(x), *jax.device_get(reports))


def first_data_set(betas, n, prior, seed, precision):
    """The scores and labels of the first data set of ``simulated_reports(..., seed, ...)``."""
    key_data, _ = jax.random.split(jax.random.split(jax.random.key(seed), 100)[0])
    return R.simulate_gaussian_agents(key_data, np.asarray(betas, np.float32), precision, prior, n)


def population_information(precision, prior, n_bins=10):
    """``I`` of a Gaussian signal ``x ~ N(d y, 1)`` cut at the deciles of its distribution."""
    from scipy.optimize import brentq
    from scipy.special import ndtr

    def cdf(x):
        return prior * ndtr(x - precision) + (1 - prior) * ndtr(x)

    cuts = [brentq(lambda x, q=q: cdf(x) - q, -20, 20) for q in np.arange(1, n_bins) / n_bins]
    edges = np.concatenate([[-np.inf], cuts, [np.inf]])
    positive = prior * np.diff(ndtr(edges - precision))
    probability = np.diff(cdf(edges))
    ex = R.experiments_from_posteriors(probability[None], (positive / probability)[None])
    return float(R.mutual_information(ex)[0])


def test_four_losses_size_power_costly_agents_and_the_report():
    def run(seed, precision, n_data_sets=100, strategy="adaptive"):
        return simulated_reports(BETAS, 10_000, 100, 0.1, seed, precision, n_data_sets, strategy)

    # Capacity-constrained: every model has the same precision -> NIS and NIAC hold.
    reports = run(0, np.full(4, 1.5))
    assert reports.nis_test.violated.mean() <= 0.10
    assert reports.niac_test.violated.mean() <= 0.10
    info = reports.information_interval  # [100, 2, 4]
    truth = population_information(1.5, 0.1)
    assert np.mean((info[:, 0] <= truth) & (truth <= info[:, 1])) >= 0.9
    assert np.mean(info[:, 0].max(-1) <= info[:, 1].min(-1)) >= 0.9  # I_k equal within intervals

    # The report agrees with the standalone functions on the first data set.
    report = jax.tree.map(lambda x: x[0], reports)
    scores, labels = first_data_set(BETAS, 10_000, 0.1, 0, np.full(4, 1.5))
    ex = R.revealed_experiments(scores, labels, 10, "adaptive", losses=BETAS)
    G = R.value_matrix(ex, BETAS)
    np.testing.assert_allclose(report.value_matrix, G, atol=1e-7)
    np.testing.assert_allclose(report.information, R.mutual_information(ex), atol=1e-7)
    assert report.nis.margin == pytest.approx(float(R.nis_check(G).margin), abs=1e-7)
    assert report.niac.margin == pytest.approx(float(R.niac_check(G).margin), abs=1e-7)
    lo, hi = report.value_matrix_interval
    assert np.all(lo <= report.value_matrix) and np.all(report.value_matrix <= hi)
    assert np.all(hi - lo > 0) and report.nias is None
    t = report.niac_test
    assert t.lower_bound == pytest.approx(t.margin - t.critical_value, abs=1e-7)

    # Costly learning: each beta's precision maximises value minus 0.003 d^2.
    grid = np.linspace(0.0, 4.0, 401)
    kappa = 0.003
    d = grid[np.argmax(gaussian_values(BETAS, grid, 0.1) - kappa * grid**2, axis=1)]
    assert np.all(np.diff(d) <= 0) and d[-1] > 1.0  # less is learned as beta grows
    # The revealed bounds bound the costs of the binned experiments. With deciles they cover
    # the agents' own costs; the adaptive bins, which merge the sparse lowest deciles here,
    # garble the experiments further, and their bounds covered them in 80% of data sets.
    reports = run(1, d, 50, "quantile")
    assert reports.niac_test.violated.mean() <= 0.10  # NIAC holds
    assert reports.nis_test.violated.mean() >= 0.9  # NIS does not
    true_costs = kappa * (d**2 - d[0] ** 2)
    lower, upper = reports.cost_lower_interval[:, 0], reports.cost_upper_interval[:, 1]
    assert np.mean((lower - 1e-4 <= true_costs) & (true_costs <= upper + 1e-4)) >= 0.9
    # The same precisions assigned in reverse: NIAC fails.
    reports = run(2, d[::-1], 50)
    assert reports.niac_test.violated.mean() >= 0.9


def test_sixty_four_losses_size_of_nis_and_niac_with_reveal_mapped_under_jit():
    # Balanced labels keep 100 positives per bin at N = 2,000 (with fewer, the bootstrap
    # approximation of the bins' posteriors degrades, and with it the size).
    betas = jnp.asarray(BETAS_64, jnp.float32)

    def one(key):
        key_data, key_boot = jax.random.split(key)
        scores, labels = R.simulate_gaussian_agents(key_data, betas, 1.5, 0.5, 2000)
        report = R.reveal(scores, labels, betas, n_bootstrap=60, key=key_boot, nias=False)
        return report.nis_test.violated, report.niac_test.violated, report.information_interval

    keys = jax.random.split(jax.random.key(3), 100)
    mapped = jax.jit(lambda k: jax.lax.map(one, k), compiler_options=RUNS_LONG)
    nis, niac, info = jax.device_get(mapped(keys))
    assert nis.mean() <= 0.10 and niac.mean() <= 0.10
    truth = population_information(1.5, 0.5)
    assert np.mean((info[:, 0] <= truth) & (truth <= info[:, 1])) >= 0.9


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
    # reveal() runs nias_test on the same bins.
    alone = R.nias_test(reported, labels, losses)
    np.testing.assert_array_equal(alone.p_value, p_value)


def binomial_bin_p_values(scores, labels, beta, n_bins):
    """NIAS's bin p-values by scipy: quantile bins, exact binomial two-sided tails."""
    from scipy.stats import binom

    from iml.scoring import loss_corrected_score

    s, y = np.asarray(scores, np.float64), np.asarray(labels)
    g = np.asarray(loss_corrected_score(np.asarray(scores), beta), np.float64)
    edges = np.quantile(s, np.linspace(0, 1, n_bins + 1))
    bins = np.clip(np.searchsorted(edges, s, side="left") - 1, 0, n_bins - 1)
    out = []
    for b in range(n_bins):
        m = bins == b
        n, o, q = m.sum(), y[m].sum(), g[m].mean()
        out.append(min(1.0, 2 * min(binom.cdf(o, n, q), binom.sf(o - 1, n, q))))
    return np.array(out)


def test_nias_bin_p_values_are_exact_binomial_tails_and_holm_spans_every_model():
    key = jax.random.key(21)
    scores, labels = R.simulate_gaussian_agents(key, [0.3, 0.8], 2.0, 0.2, 3000)
    test = R.nias_test(scores, labels, [0.3, 0.8], 10, "quantile")
    for k, beta in enumerate([0.3, 0.8]):
        expected = binomial_bin_p_values(scores[k], labels, beta, 10)
        np.testing.assert_allclose(test.bin_p_value[k], expected, rtol=2e-3, atol=1e-6)
    # Holm over all 20 bins: the smallest p-value is multiplied by 20, not by 10.
    smallest = float(np.min(test.bin_p_value))
    assert float(np.min(test.p_value)) == pytest.approx(min(1.0, 20 * smallest), rel=1e-5)


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
    assert not np.any(honest.violated)


def test_weighted_report_matches_the_weighted_experiments():
    scores, labels = R.simulate_gaussian_agents(jax.random.key(14), BETAS, 1.0, 0.3, 10_000)
    weight = np.random.default_rng(15).integers(0, 4, 10_000).astype(np.float32)
    report = R.reveal(
        scores, labels, BETAS, weight=weight, n_bootstrap=100, key=jax.random.key(16), nias=False
    )
    ex = R.revealed_experiments(scores, labels, weight=weight)
    np.testing.assert_allclose(report.experiments.posterior, ex.posterior, atol=1e-6)
    np.testing.assert_allclose(report.value_matrix, R.value_matrix(ex, BETAS), atol=1e-7)
    plain = R.value_matrix(R.revealed_experiments(scores, labels), BETAS)
    assert np.abs(np.asarray(plain) - np.asarray(report.value_matrix)).max() > 1e-4


def test_simulated_observations_reveal_the_experiments_they_came_from():
    ex = R.shannon_agent(BETAS, 0.05, 0.3)
    signals, labels = R.simulate_observations(jax.random.key(10), ex, 200_000)
    revealed = R.experiments_from_signals(signals, labels, 2)
    np.testing.assert_allclose(revealed.probability, ex.probability, atol=5e-3)
    np.testing.assert_allclose(revealed.posterior, ex.posterior, atol=1e-2)
    np.testing.assert_allclose(revealed.prior, 0.05, atol=2e-3)


# ----------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------

SCORES = np.full((2, 20), 0.5, np.float32)
LABELS = np.tile([0, 1], 10)
G2 = np.eye(2, dtype=np.float32)

BAD = {
    "scores-1d": (lambda: R.revealed_experiments(SCORES[0], LABELS), "scores"),
    "scores-range": (lambda: R.revealed_experiments(SCORES + 1, LABELS), r"scores\[0\]"),
    "labels": (lambda: R.revealed_experiments(SCORES, LABELS * 2), "labels"),
    "n_bins": (lambda: R.revealed_experiments(SCORES, LABELS, n_bins=0), "n_bins"),
    "weight": (lambda: R.revealed_experiments(SCORES, LABELS, weight=-np.ones(20)), "weight"),
    "signals": (lambda: R.experiments_from_signals(np.full((2, 20), 7), LABELS, 5), "signals"),
    "probability": (
        lambda: R.experiments_from_posteriors([[0.5, 0.4]], [[0.1, 0.2]]),
        "probability",
    ),
    "posterior": (lambda: R.experiments_from_posteriors([[0.5, 0.5]], [[0.1, 1.2]]), "posterior"),
    "losses": (lambda: R.value_matrix(R.shannon_agent(BETAS, 0.1, 0.3), [0.5, 0.9]), "losses"),
    "losses-beta": (
        lambda: R.value_matrix(R.shannon_agent(BETAS, 0.1, 0.3), [0.5, 0.9, 1.5, 0.2]),
        "beta",
    ),
    "G": (lambda: R.nis_check(np.ones((2, 3))), "G"),
    "reference": (lambda: R.revealed_cost_bounds(G2, reference=5), "reference"),
    "information": (lambda: R.shannon_lambda_interval(G2, np.ones(3)), "information"),
    "prior": (lambda: R.shannon_agent(0.9, 1.0, 0.3), "prior"),
    "lam": (lambda: R.shannon_agent(0.9, 0.1, -1.0), "lam"),
    "n_bootstrap": (
        lambda: R.reveal(SCORES, LABELS, [0.5, 0.9], n_bootstrap=1, key=jax.random.key(0)),
        "n_bootstrap",
    ),
    "key": (lambda: R.reveal(SCORES, LABELS, [0.5, 0.9], n_bootstrap=10), "key"),
    "resampling": (
        lambda: R.paired_bootstrap_weights(jax.random.key(0), 5, 2, "jackknife"),
        "resampling",
    ),
    "K": (lambda: R.niac_brute_force(np.eye(7)), "K <= 6"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_naming_the_argument(name):
    call, match = BAD[name]
    with pytest.raises(ValueError, match=match):
        call()


def test_invalid_labels_under_jit_give_nan_not_a_number():
    bad = jnp.asarray(LABELS).at[0].set(3)
    ex = jax.jit(lambda s, y: R.revealed_experiments(s, y, 2))(SCORES, bad)
    assert np.isnan(np.asarray(ex.posterior)).any()
    assert np.isnan(np.asarray(R.mutual_information(ex))).all()


def test_chunked_bootstrap_covers_every_replicate():
    for n_boot, n in itertools.product((1, 7, 1000), (10, 112_120)):
        chunks, size = R._bootstrap_chunks(n_boot, n)
        assert chunks * size >= n_boot and (chunks - 1) * size < n_boot


def test_seed_bootstrap_equals_the_row_bootstrap_for_identical_seeds_and_widens_for_noisy_ones():
    betas = [0.5, 0.9, 0.99]
    scores, labels = R.simulate_gaussian_agents(jax.random.key(0), betas, 2.0, 0.27, 4000)
    scores = np.asarray(scores, np.float64)
    key = jax.random.key(1)
    rows = R.reveal(scores, labels, betas, n_bootstrap=200, key=key)
    copies = R.reveal(
        scores, labels, betas, n_bootstrap=200, key=key, seed_scores=np.stack([scores] * 3)
    )
    # Seeds that agree add no noise: the same replicates, bins and tests, to the last bit.
    np.testing.assert_array_equal(copies.value_matrix_interval, rows.value_matrix_interval)
    np.testing.assert_allclose(copies.information_interval, rows.information_interval, rtol=1e-6)
    assert float(copies.nis_test.p_value) == float(rows.nis_test.p_value)
    # Seeds that rank the observations differently: the intervals cover that noise too.
    rng = np.random.default_rng(0)
    logit = np.log(scores) - np.log1p(-scores)
    noise = [0.1, 0.5, 1.5, 3.0]
    seeds = np.stack([1 / (1 + np.exp(-(logit + rng.normal(0, sd, scores.shape)))) for sd in noise])
    seeds[1:, 0] = np.nan  # the first model has one seed: its scores are never resampled
    pooled = np.nanmean(seeds, axis=0)
    both = R.reveal(pooled, labels, betas, n_bootstrap=300, key=key, seed_scores=seeds)
    alone = R.reveal(pooled, labels, betas, n_bootstrap=300, key=key)
    width = lambda r: np.diff(np.asarray(r.information_interval), axis=0)[0]  # noqa: E731
    assert np.all(width(both)[1:] > 2 * width(alone)[1:])
    assert width(both)[0] == pytest.approx(width(alone)[0], rel=0.2)


@pytest.mark.parametrize(
    ("seed_scores", "message"),
    [
        (np.full((2, 3, 10), 0.5), r"seed_scores must have shape \[M, 2, 50\]"),
        (np.where(np.arange(50) < 3, np.nan, np.full((2, 2, 50), 0.5)), "some observations"),
        (np.stack([np.full((2, 50), np.nan), np.full((2, 50), 0.5)], axis=1), "no seed of model 0"),
        (np.full((2, 2, 50), 1.5), r"seed_scores must lie in \[0, 1\]"),
    ],
)
def test_bad_seed_scores_are_named(seed_scores, message):
    scores = np.full((2, 50), 0.5)
    labels = np.arange(50) % 2
    with pytest.raises(ValueError, match=message):
        R.reveal(scores, labels, [0.5, 0.9], n_bootstrap=10, key=jax.random.key(0),
                 seed_scores=seed_scores)  # fmt: skip


def test_adaptive_bins_merge_the_same_deciles_for_every_model_and_meet_the_count():
    """Digits' regime (prior 0.097, N = 1,797, d = 2.79: the lowest deciles hold about no
    positives). Every model's merged bins are the same quantile ranges, so each bin has the same
    probability for every model, and each holds at least MIN_COUNT expected positives and
    negatives under every model's loss-corrected scores."""
    betas = [0.5, 0.9, 0.99]
    scores, labels = R.simulate_gaussian_agents(jax.random.key(7), betas, 2.79, 0.097, 1797)
    ex = R.revealed_experiments(scores, labels, 10, "adaptive", losses=betas)
    p = np.asarray(ex.probability)
    np.testing.assert_allclose(p, np.broadcast_to(p[0], p.shape), atol=1.5 / 1797)
    used = p[0] > 0
    assert 2 <= used.sum() < 10  # some deciles merged, not all
    signals = np.asarray(R._signals(scores, 10, "adaptive", R._as_losses(betas, 3)))
    g = np.stack(
        [
            np.asarray(loss_spec(b).loss_corrected_score(s))
            for b, s in zip(betas, scores, strict=True)
        ]
    )
    for k in range(3):
        for s in np.flatnonzero(used):
            m = signals[k] == s
            assert g[k, m].sum() >= R.MIN_COUNT and (1 - g[k, m]).sum() >= R.MIN_COUNT
