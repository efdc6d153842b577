"""Tests of iml.recalibration.prior_shift: the correction of posteriors for a change of prior."""

import chex
import jax
import numpy as np

from iml.recalibration import (
    PriorShiftCorrection,
    prior_shift_ratio,
    prior_shift_transform,
)
from iml.sbr import simulate_gaussian_scores


class PriorShift(chex.TestCase):
    """The ratio of priors and the correction it makes, jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_prior_shift_recovers_the_target_posterior_by_bayes(self):
        ratio = self.variant(prior_shift_ratio)
        transform = self.variant(prior_shift_transform)
        # Gaussian signals: truthful posteriors at a training prevalence of 30% ...
        train, target = 0.3, 0.013
        _, _, x, gamma_train = simulate_gaussian_scores(jax.random.key(0), 2000, prevalence=train)
        # ... and the exact posteriors of the same signals at the target prevalence, by Bayes'
        # rule.
        logit = np.log(target / (1 - target)) + 2.0 * (np.asarray(x) - 1.0)
        gamma_target = 1.0 / (1.0 + np.exp(-logit))
        d = ratio(train, target)
        np.testing.assert_allclose(transform(d, gamma_train), gamma_target, atol=2e-5)
        # Fitted from the calibration labels' class ratio (given the training prior).
        labels = (np.arange(1000) < 13).astype(np.int32)
        fitted = PriorShiftCorrection(train_prior=train).fit(np.full(1000, 0.5), labels)
        np.testing.assert_allclose(float(fitted.params_), float(d), rtol=1e-5)

    @chex.variants(with_jit=True, without_jit=True)
    def test_prior_shift_multiclass_reweights_by_prior_ratios(self):
        a = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
        train, target = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
        out = self.variant(prior_shift_transform)(self.variant(prior_shift_ratio)(train, target), a)
        expected = a * target / train
        chex.assert_shape(out, a.shape)
        np.testing.assert_allclose(out, expected / expected.sum(1, keepdims=True), rtol=1e-5)
