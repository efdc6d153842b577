"""Tests of iml.recalibration.corrections: the analytic loss correction as a recalibrator, and the
correction of posteriors for a change of prior."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml.recalibration import (
    LossCorrection,
    PriorShiftCorrection,
    prior_shift_ratio,
    prior_shift_transform,
)
from iml.sbr import simulate_gaussian_scores, simulate_scores


@pytest.mark.parametrize("beta", [0.1, 0.9, 0.99])
def test_loss_correction_recovers_posteriors_and_equals_prior_shift(beta):
    scores, _, _, gamma = simulate_gaussian_scores(jax.random.key(1), 2000, beta=beta)
    corrected = LossCorrection(beta=beta).transform(scores)
    np.testing.assert_allclose(corrected, gamma, rtol=2e-3, atol=1e-6)
    # Section 4: the loss correction is the prior-shift correction with d = (1 - beta) / beta.
    shifted = PriorShiftCorrection(d=(1 - beta) / beta).fit_transform(scores, np.zeros(2000, int))
    np.testing.assert_allclose(shifted, corrected, rtol=1e-4, atol=1e-7)


def test_loss_correction_multiclass_recovers_posteriors():
    B = jnp.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0], [4.0, 1.0, 1.0]])
    prior = jnp.array([0.5, 0.3, 0.2])
    experiment = jnp.array([[0.6, 0.1, 0.2], [0.3, 0.3, 0.1], [0.1, 0.6, 0.7]])
    scores, labels, _, gamma = simulate_scores(jax.random.key(2), prior, experiment, 50, B=B)
    out = LossCorrection(B=B).fit(scores, labels).transform(scores)
    np.testing.assert_allclose(out, gamma, atol=1e-4)


@pytest.mark.slow
def test_loss_correction_takes_any_loss_the_spec_reads():
    from iml.losses import focal_loss
    from iml.spec import loss_spec

    scores = np.linspace(0.02, 0.98, 25).astype(np.float32)
    spec = loss_spec("focal", gamma=2.0, alpha=0.25)
    by_spec = LossCorrection(spec).transform(scores)
    by_callable = LossCorrection(lambda a, y: focal_loss(a, y, 2.0, 0.25)).transform(scores)
    np.testing.assert_allclose(by_spec, by_callable, rtol=1e-6)
    np.testing.assert_allclose(spec.optimal_score(by_spec), scores, atol=1e-5)
    np.testing.assert_allclose(
        LossCorrection(0.9).transform(scores), LossCorrection(beta=0.9).transform(scores)
    )
    # A multiclass loss wants score vectors.
    with pytest.raises(ValueError, match=r"do not fit the B-weighted log loss.*\[N, 3\]"):
        LossCorrection(B=np.ones((3, 3))).fit(scores, (scores > 0.5).astype(int))
    with pytest.raises(ValueError, match="exactly one"):
        LossCorrection(0.9, beta=0.9)
    with pytest.raises(ValueError, match="not a batch"):
        LossCorrection(np.array([0.2, 0.8]))


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
