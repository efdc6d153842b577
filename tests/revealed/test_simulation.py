"""Tests of iml.revealed.simulation: observations drawn from given experiments."""

import jax
import numpy as np
import pytest
from _revealed_references import symmetric_channel

from iml import loss_spec
from iml import revealed as R

BETAS = np.array([0.5, 0.7, 0.9, 0.99])


def test_simulated_observations_reveal_the_experiments_they_came_from():
    ex = R.shannon_agent(BETAS, 0.05, 0.3)
    signals, labels = R.simulate_observations(jax.random.key(10), ex, 200_000)
    revealed = R.experiments_from_signals(signals, labels, 2)
    np.testing.assert_allclose(revealed.probability, ex.probability, atol=5e-3)
    np.testing.assert_allclose(revealed.posterior, ex.posterior, atol=1e-2)
    np.testing.assert_allclose(revealed.prior, 0.05, atol=2e-3)


def test_simulated_class_observations_reveal_the_experiments_they_came_from():
    ex = R.experiments_from_posteriors(*symmetric_channel([0.5, 0.3, 0.2], 0.7, 2))
    signals, labels = R.simulate_observations(jax.random.key(3), ex, 200_000)
    revealed = R.experiments_from_signals(signals, labels, 3, n_classes=3)
    np.testing.assert_allclose(revealed.probability, ex.probability, atol=5e-3)
    np.testing.assert_allclose(revealed.posterior, ex.posterior, atol=1e-2)
    np.testing.assert_allclose(revealed.prior[0], [0.5, 0.3, 0.2], atol=5e-3)


def test_gaussian_agents_of_three_classes_report_the_optimal_score_of_their_posterior():
    """Each agent's loss-corrected scores are its posteriors: on the simplex, and calibrated
    (the mean posterior of each class is its frequency, and the posterior of the true class is
    larger for the more precise agent)."""
    weights = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 5.0]])
    losses = loss_spec("class_weighted_softmax", class_weights=weights)
    prior = np.array([0.5, 0.3, 0.2])
    scores, labels = R.simulate_gaussian_agents(
        jax.random.key(0), losses, [1.0, 2.0], prior, 50_000
    )
    assert scores.shape == (2, 50_000, 3) and labels.shape == (50_000,)
    corrected = np.stack([np.asarray(losses[k].loss_corrected_score(scores[k])) for k in range(2)])
    np.testing.assert_allclose(corrected.sum(-1), 1.0, atol=1e-5)
    frequency = np.bincount(np.asarray(labels), minlength=3) / labels.shape[0]
    np.testing.assert_allclose(corrected.mean(1), np.tile(frequency, (2, 1)), atol=1e-2)
    truth = corrected[:, np.arange(50_000), np.asarray(labels)].mean(1)
    assert truth[1] > truth[0] > 0.5 * (truth[0] + prior @ prior)
    # the weighted agent's reports are tilted toward its heavy class
    assert float(np.mean(scores[1, :, 2])) > float(np.mean(corrected[1, :, 2])) + 0.05


def test_gaussian_agents_take_a_stack_of_weight_matrices_one_per_agent():
    B = np.ones((3, 3, 3))
    B[:, 2, 2] = [1.0, 3.0, 9.0]
    scores, labels = R.simulate_gaussian_agents(jax.random.key(1), B, 1.5, np.full(3, 1 / 3), 500)
    assert scores.shape == (3, 500, 3) and labels.shape == (500,)
    # one sigmoid per class: the heavier B[2, 2], the larger the reported score of class 2
    means = np.asarray(scores[:, :, 2].mean(1))
    assert means[0] < means[1] < means[2]


def test_gaussian_agents_drawn_given_labels_see_the_signals_of_those_labels():
    """Given the labels a call drew, the agents' scores are that call's (the signals come from
    the same draws); given other labels, each agent's signal follows them, and labels out of
    range are named."""
    betas = np.array([0.5, 0.9])
    scores, labels = R.simulate_gaussian_agents(jax.random.key(4), betas, 2.0, 0.3, 5000)
    again, same = R.simulate_gaussian_agents(
        jax.random.key(4), betas, 2.0, 0.3, 5000, labels=labels
    )
    np.testing.assert_array_equal(again, scores)
    np.testing.assert_array_equal(same, labels)
    given = (np.arange(5000) < 1500).astype(np.int32)  # positives first, 30%
    scores, out = R.simulate_gaussian_agents(jax.random.key(5), betas, 2.0, 0.3, 5000, labels=given)
    np.testing.assert_array_equal(out, given)
    # the posterior of the unweighted agent is calibrated on the given labels
    g = np.asarray(scores[0])
    assert (
        abs(g[:1500].mean() - g.mean() - (1.0 - 0.3) * (g[:1500].mean() - g[1500:].mean())) < 0.02
    )
    with pytest.raises(ValueError, match="labels must be class indices"):
        R.simulate_gaussian_agents(jax.random.key(5), betas, 2.0, 0.3, 3, labels=[0, 1, 2])
    with pytest.raises(ValueError, match="labels must have shape"):
        R.simulate_gaussian_agents(jax.random.key(5), betas, 2.0, 0.3, 3, labels=[0, 1])
