"""Tests of iml.sbr.model: posteriors by Bayes' rule and the loss-minimising scores of each
signal (Section 3)."""

import chex
import jax.numpy as jnp
import numpy as np

from iml.losses import squared_loss
from iml.sbr import (
    bayesian_posteriors,
    optimal_signal_scores,
)

PRIOR = np.array([0.9, 0.1])
EXPERIMENT = np.array([[0.5, 0.1], [0.3, 0.2], [0.15, 0.3], [0.05, 0.4]])  # pi(s | y)


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
