"""Tests of iml.sbr.simulation: posteriors by Bayes' rule and the loss-minimising scores of each
signal (Section 3), the simulator of the model and its exact distribution."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from iml.losses import squared_loss
from iml.sbr import (
    bayesian_posteriors,
    optimal_signal_scores,
    simulate_gaussian_scores,
    simulate_scores,
)

PRIOR = np.array([0.9, 0.1])
EXPERIMENT = np.array([[0.5, 0.1], [0.3, 0.2], [0.15, 0.3], [0.05, 0.4]])  # pi(s | y)
N = 20_000


def _squared_beta_loss(a, y):
    """A beta-weighted squared loss (beta = 0.9) written by hand: a 'generic' loss."""
    return jnp.where(jnp.asarray(y) == 1, 0.9, 0.1) * squared_loss(a, y)


class Model(chex.TestCase):
    """Posteriors and the loss-minimising scores of each signal, jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_bayesian_posteriors_match_bayes_rule_in_float64(self):
        joint = EXPERIMENT * PRIOR
        expected = joint / joint.sum(1, keepdims=True)
        posteriors = self.variant(bayesian_posteriors)(PRIOR, EXPERIMENT)
        chex.assert_shape(posteriors, EXPERIMENT.shape)
        np.testing.assert_allclose(posteriors, expected, rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_optimal_signal_scores_follow_proposition_2_for_any_proper_base_loss(self):
        gamma = bayesian_posteriors(PRIOR, EXPERIMENT)
        g1 = np.asarray(gamma[:, 1], dtype=np.float64)
        expected = 0.9 * g1 / (0.9 * g1 + 0.1 * (1 - g1))
        closed_form = self.variant(lambda g: optimal_signal_scores(g, beta=0.9))
        np.testing.assert_allclose(closed_form(gamma), expected, rtol=1e-5)
        generic = self.variant(lambda g: optimal_signal_scores(g, loss=_squared_beta_loss))(gamma)
        np.testing.assert_allclose(generic, expected, rtol=1e-4)


def test_simulated_labels_and_signals_follow_prior_and_experiment():
    scores, labels, signals, post = simulate_scores(
        jax.random.key(0), PRIOR, EXPERIMENT, N, beta=0.9
    )
    chex.assert_shape([scores, labels, signals, post], (N,))
    freq_y = np.bincount(np.asarray(labels), minlength=2) / N
    np.testing.assert_allclose(freq_y, PRIOR, atol=4 * np.sqrt(0.09 / N))
    for y in (0, 1):
        sig = np.asarray(signals)[np.asarray(labels) == y]
        freq = np.bincount(sig, minlength=4) / sig.size
        np.testing.assert_allclose(freq, EXPERIMENT[:, y], atol=4 * np.sqrt(0.25 / sig.size))
    gamma = np.asarray(bayesian_posteriors(PRIOR, EXPERIMENT))[:, 1]
    np.testing.assert_allclose(post, gamma[np.asarray(signals)], rtol=1e-6)


def test_gaussian_generator_posterior_is_exact_bayes_and_auroc_matches():
    scores, labels, x, gamma = simulate_gaussian_scores(jax.random.key(1), N, beta=0.99)
    x64 = np.asarray(x, dtype=np.float64)
    p = 0.013
    expected = p * norm.pdf(x64, 2.0) / (p * norm.pdf(x64, 2.0) + (1 - p) * norm.pdf(x64, 0.0))
    np.testing.assert_allclose(gamma, expected, rtol=2e-4, atol=1e-9)
    assert abs(float(np.mean(labels)) - p) < 4 * np.sqrt(p * (1 - p) / N)
    assert abs(roc_auc_score(labels, scores) - norm.cdf(2.0 / np.sqrt(2.0))) < 0.03
    # Scores are c^beta(gamma): overscored for beta > 1/2 (Proposition 2).
    assert np.all(np.asarray(scores) >= np.asarray(gamma))


def test_bad_model_raises_value_error():
    with pytest.raises(ValueError, match="prior"):
        simulate_scores(jax.random.key(0), [0.5, 0.6], EXPERIMENT, 10, beta=0.9)
    with pytest.raises(ValueError, match="experiment"):
        simulate_scores(jax.random.key(0), PRIOR, EXPERIMENT[:, :1], 10, beta=0.9)
    with pytest.raises(ValueError, match="prevalence"):
        simulate_gaussian_scores(jax.random.key(0), 10, prevalence=1.2)
    with pytest.raises(ValueError, match="beta"):
        simulate_gaussian_scores(jax.random.key(0), 10, beta=0.0)
