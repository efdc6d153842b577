"""Tests of iml.revealed.simulation: observations drawn from given experiments."""

import jax
import numpy as np

from iml import revealed as R

BETAS = np.array([0.5, 0.7, 0.9, 0.99])


def test_simulated_observations_reveal_the_experiments_they_came_from():
    ex = R.shannon_agent(BETAS, 0.05, 0.3)
    signals, labels = R.simulate_observations(jax.random.key(10), ex, 200_000)
    revealed = R.experiments_from_signals(signals, labels, 2)
    np.testing.assert_allclose(revealed.probability, ex.probability, atol=5e-3)
    np.testing.assert_allclose(revealed.posterior, ex.posterior, atol=1e-2)
    np.testing.assert_allclose(revealed.prior, 0.05, atol=2e-3)
