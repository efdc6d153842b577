"""Tests of iml.revealed.experiments: revealed experiments and their posteriors, from signals,
from scores or given directly, and their value matrix and mutual information."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _revealed_references import minimised_loss
from scipy.optimize import minimize_scalar

from iml import LossSpec, loss_spec
from iml import revealed as R
from iml.calibration import assign_bins, bin_edges

BETAS = np.array([0.5, 0.7, 0.9, 0.99])


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
    chex.assert_shape(batched.probability, (3, 3, 5))
    for b, w in enumerate(np.asarray(weights).astype(int)):
        idx = np.repeat(np.arange(400), w)
        resampled = R.experiments_from_signals(signals[:, idx], labels[idx], 5)
        np.testing.assert_allclose(batched.posterior[b], resampled.posterior, atol=1e-6)
        np.testing.assert_allclose(batched.probability[b], resampled.probability, atol=1e-6)
    poisson = np.asarray(R.paired_bootstrap_weights(jax.random.key(2), 100_000, 2))
    assert abs(poisson.mean() - 1) < 0.01 and abs(poisson.var() - 1) < 0.02


def test_signal_sums_of_positives_first_from_the_indicators_two_blocks_count_like_numpy():
    from iml.revealed.experiments import signal_indicator, signal_sums

    rng = np.random.default_rng(5)
    n, positives, rows = 600, 140, 160  # the leading block holds every positive and some more
    signals = jnp.asarray(rng.integers(0, 6, (3, n)), jnp.int32)
    y = jnp.asarray((np.arange(n) < positives).astype(np.float32))
    whole = signal_indicator(signals, 6)
    head, tail = signal_indicator(signals, 6, rows)
    np.testing.assert_array_equal(np.concatenate([head, tail], axis=1), whole)
    assert signal_indicator(signals, 6, n).shape == whole.shape  # no block to split off
    counts = np.asarray(R.paired_bootstrap_weights(jax.random.key(3), n, 4))
    fractional = rng.random((4, n)).astype(np.float32)
    for weights in (counts, fractional, counts[0]):
        count, positive = signal_sums(jnp.asarray(weights), y, (head, tail), 6, rows)
        again = signal_sums(jnp.asarray(weights), y, whole, 6, rows)  # the blocks copied out
        w64 = np.asarray(weights, np.float64)
        for k in range(3):
            for s in range(6):
                inside = np.asarray(signals[k]) == s
                want_count = np.sum(w64[..., inside], axis=-1)
                want_positive = np.sum(w64[..., inside & (np.arange(n) < positives)], axis=-1)
                if weights is fractional:
                    np.testing.assert_allclose(count[..., k, s], want_count, rtol=1e-5)
                    np.testing.assert_allclose(positive[..., k, s], want_positive, rtol=1e-5)
                else:  # integer weights: every sum exact
                    np.testing.assert_array_equal(count[..., k, s], want_count)
                    np.testing.assert_array_equal(positive[..., k, s], want_positive)
        np.testing.assert_array_equal(again[0], count)
        np.testing.assert_array_equal(again[1], positive)


def test_the_indicator_holds_each_observation_in_its_signals_row_whatever_their_integer_type():
    from iml.revealed.experiments import signal_indicator

    # int8 signals of more levels than int8 holds, and signals outside [0, S) that count nowhere
    signals = np.array([[0, 127, -1, 5, 199], [3, 200, -100, 0, 150]])
    for dtype in (np.int8, np.int16, np.int32):
        fits = signals if dtype != np.int8 else np.where(signals > 127, -1, signals)
        m = np.asarray(signal_indicator(jnp.asarray(fits.astype(dtype)), 200))
        assert m.shape == (2 * 200, 5)
        want = np.zeros_like(m)
        for k, i in np.ndindex(fits.shape):
            if 0 <= fits[k, i] < 200:
                want[k * 200 + fits[k, i], i] = 1
        np.testing.assert_array_equal(m, want)


def test_signal_sums_in_int8_equal_the_float32_sums_and_keep_a_nan_row_nan():
    from iml.revealed.experiments import class_onehot, signal_indicator, signal_sums

    rng = np.random.default_rng(8)
    n, positives, rows = 700, 170, 176
    signals = jnp.asarray(rng.integers(0, 5, (4, n)), jnp.int32)
    y = jnp.asarray((np.arange(n) < positives).astype(np.float32))
    classes = class_onehot(jnp.asarray(rng.integers(0, 3, n)), 3)
    counts = np.asarray(R.paired_bootstrap_weights(jax.random.key(4), n, 6))
    assert counts.max() == 5  # Poisson counts reach their largest value
    weights = jnp.asarray(counts)
    for blocks, labels in ((None, y), (rows, y), (None, classes)):
        want = signal_sums(weights, labels, signal_indicator(signals, 5, blocks), 5, blocks)
        got = signal_sums(weights, labels, signal_indicator(signals, 5, blocks, True), 5, blocks)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype == jnp.float32
            np.testing.assert_array_equal(a, b)
    # a NaN weight (a label that as_labels made NaN under jit) makes its row's sums NaN
    bad = weights.at[2, 9].set(jnp.nan)
    count, positive = signal_sums(bad, y, signal_indicator(signals, 5, rows, True), 5, rows)
    assert np.isnan(count[2]).all() and np.isnan(positive[2]).all()
    keep = np.arange(6) != 2
    np.testing.assert_array_equal(
        count[keep], signal_sums(weights, y, signal_indicator(signals, 5, rows), 5, rows)[0][keep]
    )


@pytest.mark.slow
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


# ----------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
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


SCORES = np.full((2, 20), 0.5, np.float32)
LABELS = np.tile([0, 1], 10)


def test_invalid_labels_under_jit_give_nan_not_a_number():
    bad = jnp.asarray(LABELS).at[0].set(3)
    ex = jax.jit(lambda s, y: R.revealed_experiments(s, y, 2))(SCORES, bad)
    assert np.isnan(np.asarray(ex.posterior)).any()
    assert np.isnan(np.asarray(R.mutual_information(ex))).all()


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
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_naming_the_argument(name):
    call, match = BAD[name]
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------------------------
# Experiments of n classes: the binary path is their two-class case
# ----------------------------------------------------------------------------------------------


def _two_class(betas):
    """The binary betas' two-class equivalents: the class-weighted softmax with weights
    ``(1 - beta, beta)`` has the beta-weighted log loss's value for every score and label."""
    return [loss_spec("class_weighted_softmax", class_weights=[1.0 - b, b]) for b in betas]


def test_value_matrix_of_two_class_posteriors_equals_the_binary_path():
    """The REQUIRED equivalence: a binary grid's experiments read as class posteriors
    ``[1 - gamma, gamma]`` under the two-class equivalent losses give the binary path's G to
    float32 round-off, and the same mutual information."""
    betas = [0.5, 0.8, 0.95, 0.99]
    scores, labels = R.simulate_gaussian_agents(jax.random.key(0), betas, 1.5, 0.2, 4000)
    binary = R.revealed_experiments(scores, labels, 10, "adaptive", losses=betas)
    classes = R.experiments_from_posteriors(
        binary.probability, jnp.stack([1.0 - binary.posterior, binary.posterior], axis=-1)
    )
    G_binary = np.asarray(R.value_matrix(binary, betas))
    G_classes = np.asarray(R.value_matrix(classes, _two_class(betas)))
    np.testing.assert_allclose(G_classes, G_binary, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(
        R.mutual_information(classes), R.mutual_information(binary), rtol=2e-6, atol=1e-7
    )
    # and the one-vs-rest information of either class of a binary experiment is its I
    info = np.asarray(R.class_information(binary))
    np.testing.assert_allclose(info, np.stack([R.mutual_information(binary)] * 2, -1), rtol=1e-5)
    np.testing.assert_allclose(R.class_information(classes), info, rtol=1e-5)


def test_experiments_from_signals_counts_each_class_per_signal():
    signals = np.array([[0, 0, 1, 1, 1, 2], [1, 1, 1, 0, 0, 0]], np.int32)
    labels = np.array([0, 2, 1, 1, 2, 0])
    ex = R.experiments_from_signals(signals, labels, 3, n_classes=3)
    np.testing.assert_allclose(ex.probability[0], [2 / 6, 3 / 6, 1 / 6])
    np.testing.assert_allclose(ex.posterior[0, 0], [0.5, 0.0, 0.5])
    np.testing.assert_allclose(ex.posterior[0, 1], [0.0, 2 / 3, 1 / 3])
    np.testing.assert_allclose(ex.posterior[1, 0], [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(ex.prior, np.full((2, 3), [2 / 6, 2 / 6, 2 / 6]))
    weighted = R.experiments_from_signals(signals, labels, 3, np.array([1, 1, 1, 1, 1, 3.0]),
                                          n_classes=3)  # fmt: skip
    np.testing.assert_allclose(weighted.posterior[0, 2], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(weighted.prior[0], [4 / 8, 2 / 8, 2 / 8])


def test_value_matrix_of_class_posteriors_is_minus_the_expected_minimised_loss_of_any_loss():
    """G[k, j] = -sum_s P_j(s) l*_k(gamma_{j,s}) for a B-weighted, a class-weighted softmax and
    a (generic, autodiff) softmax focal loss, each l* evaluated one posterior at a time."""
    B = np.ones((3, 3))
    B[2, 2] = 4.0
    losses = [
        loss_spec(B),
        loss_spec("class_weighted_softmax", class_weights=[1.0, 1.0, 5.0]),
        loss_spec("softmax_focal", gamma=1.0, class_weights=[1.0, 2.0, 1.0]),
    ]
    rng = np.random.default_rng(0)
    probability = rng.dirichlet(np.ones(4), size=3).astype(np.float32)
    posterior = rng.dirichlet(np.ones(3), size=(3, 4)).astype(np.float32)
    ex = R.experiments_from_posteriors(probability, posterior)
    G = np.asarray(R.value_matrix(ex, losses))
    for k, spec in enumerate(losses):
        for j in range(3):
            lstar = [float(spec.minimised_expected_loss(posterior[j, s])) for s in range(4)]
            np.testing.assert_allclose(G[k, j], -np.dot(probability[j], lstar), rtol=1e-4)
    assert np.isfinite(G).all()


def test_class_information_is_at_most_the_mutual_information():
    rng = np.random.default_rng(1)
    probability = rng.dirichlet(np.ones(6), size=2)
    posterior = rng.dirichlet(np.ones(4) * 0.5, size=(2, 6))
    ex = R.experiments_from_posteriors(probability, posterior)
    info = np.asarray(R.mutual_information(ex))
    per_class = np.asarray(R.class_information(ex))
    assert per_class.shape == (2, 4)
    assert (per_class >= -1e-7).all() and (per_class <= info[:, None] + 1e-6).all()


def test_class_experiments_reject_bad_input_naming_it():
    p = np.full((2, 3), 1 / 3)
    with pytest.raises(ValueError, match="posterior"):
        R.experiments_from_posteriors(p, np.full((2, 3, 4, 2), 0.5))
    with pytest.raises(ValueError, match="posterior"):
        R.experiments_from_posteriors(p, np.full((2, 3, 2), 0.9))  # rows off the simplex
    ex = R.experiments_from_posteriors(p, np.full((2, 3, 2), 0.5))
    with pytest.raises(ValueError, match="losses"):
        R.value_matrix(ex, [0.5, 0.9])  # binary losses for class posteriors
    with pytest.raises(ValueError, match="labels"):
        R.experiments_from_signals(np.zeros((1, 3), np.int32), [0, 1, 3], 2, n_classes=3)
