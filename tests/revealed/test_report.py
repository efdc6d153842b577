"""Tests of iml.revealed.report: reveal() with its paired bootstrap, the size and power of its
tests on simulated agents, weights and seeds."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _revealed_references import minimised_loss, symmetric_channel
from _training_helpers import RUNS_LONG

from iml import loss_spec
from iml import revealed as R
from iml.revealed.report import bootstrap_chunks

BETAS = np.array([0.5, 0.7, 0.9, 0.99])
BETAS_64 = 1.0 / (1.0 + np.exp(-np.linspace(0.0, np.log(99.0), 64)))


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_positives_first_labels_need_no_concrete_scores_for_the_positives_block():
    """Traced scores with concrete labels that come positives first (as iml.power simulates
    them) give the report of concrete scores whose rows the host puts positives first, and of
    traced labels (every row in the positives' product)."""
    scores, _ = R.simulate_gaussian_agents(jax.random.key(20), BETAS, 1.5, 0.3, 4000)
    labels = (np.arange(4000) < 1210).astype(np.int32)
    # interleaved, each class in its order: the host's stable reordering restores the above
    mixed = np.argsort(np.concatenate([np.arange(1210) * 3.0, np.arange(2790) * 1.3 + 0.1]))
    key = jax.random.key(22)

    def numbers(s, y):
        report = R.reveal(s, y, BETAS, n_bootstrap=50, key=key)
        return [report.value_matrix, report.information_interval, report.nis_test.p_value]

    traced = jax.jit(lambda s: numbers(s, labels))(scores)
    on_host = numbers(np.asarray(scores)[:, mixed], labels[mixed])
    all_rows = jax.jit(numbers)(scores, labels)
    for a, b, c in zip(traced, on_host, all_rows, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-7)


def test_resampling_sums_in_int8_give_the_report_of_float32_sums(monkeypatch):
    """Unit weights and Poisson counts: the report with the signal sums made in int8 is the
    float32 one (its counts and value matrices exactly; what later programs fuse otherwise, to
    float32 rounding); with weights or multinomial counts, the sums stay float32."""
    from iml import _device
    from iml.revealed import report as module

    scores, labels = R.simulate_gaussian_agents(jax.random.key(30), BETAS, 1.2, 0.3, 3000)
    scores, labels = np.asarray(scores), np.asarray(labels)
    seen = []
    replicates = module._replicates

    def spy(*args):
        seen.append(args[-1])
        return replicates(*args)

    monkeypatch.setattr(module, "_replicates", spy)
    reports = {}
    for integer in (False, True):
        monkeypatch.setattr(_device, "integer_products", lambda integer=integer: integer)
        reports[integer] = R.reveal(scores, labels, BETAS, n_bootstrap=60, key=jax.random.key(31))
        others = [
            R.reveal(scores, labels, BETAS, n_bootstrap=4, key=jax.random.key(31), **kwargs)
            for kwargs in ({"weight": np.ones(3000)}, {"resampling": "multinomial"})
        ]
        jax.block_until_ready([reports[integer], others])  # no program left running at exit
    assert seen == [False] * 3 + [True, False, False]
    floats, ints = reports[False], reports[True]
    np.testing.assert_array_equal(ints.experiments.probability, floats.experiments.probability)
    np.testing.assert_array_equal(ints.value_matrix, floats.value_matrix)
    np.testing.assert_array_equal(ints.value_matrix_interval, floats.value_matrix_interval)
    np.testing.assert_allclose(ints.information_interval, floats.information_interval, rtol=1e-6)
    np.testing.assert_allclose(ints.nis_test.p_value, floats.nis_test.p_value, atol=1e-6)
    np.testing.assert_allclose(ints.niac_test.p_value, floats.niac_test.p_value, atol=1e-6)


def test_replicates_summed_in_int8_equal_the_float32_ones_and_keep_an_invalid_labels_nan():
    """The replicates of unit weights and Poisson counts, with the counts made and summed in
    int8 (``integer``): the value matrices and information of the float32 counts, to the last
    bit; with a label outside {0, 1} (NaN under jit), NaN where the float32 sums are NaN."""
    from iml.revealed import report as module
    from iml.revealed.bins import bin_signals

    scores, labels = R.simulate_gaussian_agents(jax.random.key(40), BETAS, 1.0, 0.3, 2000)
    order = np.argsort(-np.asarray(labels), kind="stable")  # positives first, as reveal puts them
    scores, labels = np.asarray(scores)[:, order], np.asarray(labels)[order]
    signals = bin_signals(jnp.asarray(scores), 6, "quantile")
    positives = int(labels.sum())
    specs = loss_spec("log", beta=np.asarray(BETAS))
    for y in (labels, np.where(np.arange(2000) == 7, 2, labels)):
        out = {}
        for integer in (False, True):
            args = (signals, jnp.asarray(y), None, specs, jax.random.key(41), 6, 50, "poisson",
                    positives + 16, None, None, None, integer)  # fmt: skip
            out[integer] = jax.device_get(module._replicates(*args))
        for a, b in zip(jax.tree.leaves(out[True]), jax.tree.leaves(out[False]), strict=True):
            np.testing.assert_array_equal(a, b)
        replicate_G = out[True][1][0]
        assert np.isnan(replicate_G).all() == (y.max() > 1)


def test_chunked_bootstrap_covers_every_replicate():
    for n_boot, n in itertools.product((1, 7, 1000), (10, 112_120)):
        chunks, size = bootstrap_chunks(n_boot, n)
        assert chunks * size >= n_boot and (chunks - 1) * size < n_boot


@pytest.mark.slow
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


# ----------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------

SCORES = np.full((2, 20), 0.5, np.float32)
LABELS = np.tile([0, 1], 10)

BAD = {
    "n_bootstrap": (
        lambda: R.reveal(SCORES, LABELS, [0.5, 0.9], n_bootstrap=1, key=jax.random.key(0)),
        "n_bootstrap",
    ),
    "key": (lambda: R.reveal(SCORES, LABELS, [0.5, 0.9], n_bootstrap=10), "key"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_naming_the_argument(name):
    call, match = BAD[name]
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------------------------
# Models of n classes: the same bootstrap on the cells of their posteriors
# ----------------------------------------------------------------------------------------------


def _class_losses(heavy):
    weights = np.ones((len(heavy), 3))
    weights[:, 2] = heavy
    return loss_spec("class_weighted_softmax", class_weights=weights)


def test_reveal_of_class_scores_is_the_value_matrix_of_their_cells_with_intervals():
    losses = _class_losses([1.0, 3.0, 9.0])
    prior = np.array([0.5, 0.3, 0.2])
    scores, labels = R.simulate_gaussian_agents(jax.random.key(2), losses, 1.5, prior, 3000)
    report = R.reveal(scores, labels, losses, 5, n_bootstrap=200, key=jax.random.key(0))
    ex = R.revealed_experiments(scores, labels, 5, "adaptive", losses=losses)
    np.testing.assert_allclose(report.experiments.posterior, ex.posterior, atol=1e-6)
    np.testing.assert_allclose(report.value_matrix, R.value_matrix(ex, losses), rtol=1e-6)
    np.testing.assert_allclose(report.information, R.mutual_information(ex), rtol=1e-6)
    assert report.class_information.shape == (3, 3)
    assert report.class_information_interval.shape == (2, 3, 3)
    low, high = np.asarray(report.class_information_interval)
    assert (low <= np.asarray(report.class_information) + 1e-6).all()
    assert (np.asarray(report.class_information) <= high + 1e-6).all()
    low, high = np.asarray(report.information_interval)
    assert (low < np.asarray(report.information)).all()
    assert (np.asarray(report.information) < high).all()
    assert report.nias.p_value.shape == (3,)
    assert int(report.nias.test.n_bins[0]) >= 2
    with pytest.raises(ValueError, match=r"seed_scores must have shape \[M, 3, 3000, 3\]"):
        R.reveal(
            scores, labels, losses, 5, key=jax.random.key(0), seed_scores=scores[None, ..., :2]
        )
    with pytest.raises(ValueError, match="losses"):
        R.reveal(scores, labels, [0.5, 0.6, 0.7], 5, key=jax.random.key(0))


@pytest.mark.slow
def test_class_seed_bootstrap_equals_the_row_bootstrap_for_identical_seeds_and_widens():
    """As for binary models: seeds of class scores that agree add nothing to the row bootstrap;
    seeds that disagree (pooled by their mean log score) widen every model's information
    interval, except that of a model with one seed."""
    losses = _class_losses([1.0, 3.0, 9.0])
    prior = np.array([0.5, 0.3, 0.2])
    scores, labels = R.simulate_gaussian_agents(jax.random.key(6), losses, 1.5, prior, 3000)
    scores = np.asarray(scores, np.float64)
    key = jax.random.key(7)

    def run(pooled, seeds=None, average="score"):
        return R.reveal(pooled, labels, losses, 5, n_bootstrap=200, key=key, nias=False,
                        seed_scores=seeds, seed_average=average)  # fmt: skip

    rows, copies = run(scores), run(scores, np.stack([scores] * 3))
    np.testing.assert_allclose(copies.value_matrix_interval, rows.value_matrix_interval, rtol=1e-5)
    np.testing.assert_allclose(copies.information_interval, rows.information_interval, rtol=1e-5)
    assert float(copies.nis_test.p_value) == pytest.approx(float(rows.nis_test.p_value))
    # seeds whose log scores carry independent noise, more in some seeds than in others
    rng = np.random.default_rng(1)
    sd = np.array([0.1, 0.5, 1.5, 3.0])[:, None, None, None]
    noisy = np.log(scores) + sd * rng.normal(0.0, 1.0, (4, *scores.shape))
    seeds = np.exp(noisy - noisy.max(-1, keepdims=True))
    seeds /= seeds.sum(-1, keepdims=True)
    seeds[1:, 0] = np.nan  # the first model has one seed
    pooled = np.asarray(pooled_seeds(seeds, "logit"))
    both, alone = run(pooled, seeds, "logit"), run(pooled)
    width = lambda r: np.diff(np.asarray(r.information_interval), axis=0)[0]  # noqa: E731
    assert np.all(width(both)[1:] > 2 * width(alone)[1:])
    assert width(both)[0] == pytest.approx(width(alone)[0], rel=0.2)


def pooled_seeds(seeds, average):
    """Each model's pool of its seeds (NaN rows left out), as the run pools members."""
    valid = np.isfinite(seeds).all(axis=(2, 3))
    if average == "score":
        return np.stack([seeds[valid[:, k], k].mean(0) for k in range(seeds.shape[1])])
    logs = [np.log(seeds[valid[:, k], k]).mean(0) for k in range(seeds.shape[1])]
    e = np.exp(np.stack(logs) - np.max(logs, axis=-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_binary_reveal_gives_both_classes_its_information():
    scores, labels = R.simulate_gaussian_agents(jax.random.key(1), BETAS, 1.5, 0.2, 2000)
    report = R.reveal(scores, labels, BETAS, n_bootstrap=50, key=jax.random.key(0), nias=False)
    info = np.asarray(report.information)
    np.testing.assert_allclose(report.class_information, np.stack([info, info], -1), rtol=1e-5)


def test_reveal_recovers_the_known_mutual_information_of_a_channel_of_three_classes():
    """Agents whose signal is a symmetric channel (the signal is the class with probability
    0.7) report c^w of its posterior; each top class then holds one posterior, so the cells'
    population information is the channel's, known exactly. The 95% bootstrap interval of I
    covers it in most of 12 data sets (each agent)."""
    losses = _class_losses([1.0, 4.0])
    ex = R.experiments_from_posteriors(*symmetric_channel([0.5, 0.3, 0.2], 0.7, 2))
    truth = np.asarray(R.mutual_information(ex))

    @jax.jit
    def covered(key):
        key_data, key_boot = jax.random.split(key)
        signals, labels = R.simulate_observations(key_data, ex, 3000)
        posterior = jnp.take_along_axis(ex.posterior, signals[..., None], axis=1)
        scores = jax.vmap(type(losses).optimal_score)(losses, posterior)
        report = R.reveal(scores, labels, losses, 2, n_bootstrap=200, key=key_boot, nias=False)
        low, high = report.information_interval
        return (low <= truth) & (truth <= high)

    hits = np.asarray(jax.lax.map(covered, jax.random.split(jax.random.key(5), 12)))
    assert hits.mean(0).min() >= 9 / 12


def test_information_intervals_are_basic_intervals_reflected_against_the_plug_in_bias():
    from iml._bootstrap import basic_interval

    estimate, percentile = jnp.array([0.2, 0.01]), jnp.array([[0.15, 0.02], [0.3, 0.05]])
    np.testing.assert_allclose(basic_interval(estimate, percentile), [[0.1, -0.03], [0.25, 0.0]])
    np.testing.assert_allclose(basic_interval(estimate, percentile, floor=0.0),
                               [[0.1, 0.0], [0.25, 0.0]])  # fmt: skip
    # Few positives per decile (N 2,000, prior 0.1): the plug-in information is biased upward,
    # its replicates lie above the estimate, and the basic interval is centred below it.
    scores, labels = R.simulate_gaussian_agents(jax.random.key(4), BETAS, 1.5, 0.1, 2000)
    report = R.reveal(scores, labels, BETAS, 10, "quantile", n_bootstrap=400,
                      key=jax.random.key(1), nias=False)  # fmt: skip
    low, high = np.asarray(report.information_interval)
    info = np.asarray(report.information)
    assert np.all(low <= info) and np.all(info <= high) and np.all(low >= 0.0)
    assert np.mean((low + high) / 2) < np.mean(info)
    class_low, class_high = np.asarray(report.class_information_interval)
    assert np.mean((class_low + class_high) / 2) < np.mean(np.asarray(report.class_information))
