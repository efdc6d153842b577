"""Tests of iml.sbr.simulation: the simulator of the model and its exact distribution."""

import chex
import jax
import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from iml.sbr import (
    bayesian_posteriors,
    simulate_gaussian_scores,
    simulate_scores,
)

PRIOR = np.array([0.9, 0.1])
EXPERIMENT = np.array([[0.5, 0.1], [0.3, 0.2], [0.15, 0.3], [0.05, 0.4]])  # pi(s | y)
N = 20_000


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
