"""Tests of iml.sbr.representation: the signal-based representation of Proposition 1 and its
conditions (Definition 3), on exact populations and on sampled data."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml.losses import squared_loss
from iml.sbr import (
    bayesian_posteriors,
    model_distribution,
    signal_based_representation,
    signal_based_representation_from_joint,
    simulate_gaussian_scores,
    simulate_scores,
)

PRIOR = np.array([0.9, 0.1])
EXPERIMENT = np.array([[0.5, 0.1], [0.3, 0.2], [0.15, 0.3], [0.05, 0.4]])  # pi(s | y)
B = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0], [4.0, 1.0, 1.0]])
PRIOR3 = np.array([0.5, 0.3, 0.2])
EXPERIMENT3 = np.array([[0.6, 0.1, 0.2], [0.3, 0.3, 0.1], [0.1, 0.6, 0.7]])
N = 20_000


def _squared_beta_loss(a, y):
    """A beta-weighted squared loss (beta = 0.9) written by hand: a 'generic' loss."""
    return jnp.where(jnp.asarray(y) == 1, 0.9, 0.1) * squared_loss(a, y)


# ---------------------------------------------------------------------------------------------
# Proposition 1 on exact populations
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prior", "experiment", "kwargs", "spec"),
    [
        (PRIOR, EXPERIMENT, {"beta": 0.9}, 0.9),
        (PRIOR, EXPERIMENT, {"loss": _squared_beta_loss}, _squared_beta_loss),
        (PRIOR3, EXPERIMENT3, {"B": B}, B),
    ],
    ids=["beta", "generic-loss", "B"],
)
def test_model_population_has_an_sbr_and_recovers_its_posteriors(prior, experiment, kwargs, spec):
    alpha, joint = model_distribution(prior, experiment, **kwargs)
    rep = signal_based_representation_from_joint(alpha, joint, spec)
    assert rep.has_sbr and rep.holds["distinct_distributions"], rep.failures()
    assert rep.worst_distance < 1e-4
    assert abs(rep.total_loss_reduction) < 1e-5
    np.testing.assert_allclose(rep.posteriors, bayesian_posteriors(prior, experiment), atol=1e-6)
    np.testing.assert_allclose(rep.prior, prior, atol=1e-6)


def test_perturbed_population_fails_condition_3_by_the_perturbation():
    alpha, joint = model_distribution(PRIOR, EXPERIMENT, beta=0.9)
    rep = signal_based_representation_from_joint(1.05 * alpha, joint, 0.9)
    assert not rep.has_sbr
    assert not rep.holds["loss_minimizing"]
    assert rep.holds["prior"] and rep.holds["bayes"] and rep.holds["generated_by_model"]
    np.testing.assert_allclose(rep.distance, 0.05 * np.asarray(alpha), rtol=1e-3)
    assert rep.worst_signal == int(np.argmax(alpha))
    assert np.all(np.asarray(rep.loss_reduction) > 0)  # the optimal score saves loss
    assert any("condition 3" in line for line in rep.failures())


def test_identical_label_distributions_fail_the_distinct_condition():
    joint = np.array([[0.2, 0.05], [0.2, 0.05], [0.4, 0.1]])
    alpha = np.array([0.3, 0.4, 0.5])
    rep = signal_based_representation_from_joint(alpha, joint, 0.5)
    assert not rep.holds["distinct_distributions"]
    assert rep.distinct_gap == 0.0 and rep.distinct_pair == (0, 1)


# ---------------------------------------------------------------------------------------------
# Proposition 1 on sampled data
# ---------------------------------------------------------------------------------------------


def test_simulated_data_has_an_sbr_and_perturbed_scores_fail_condition_3():
    scores, labels, _, _ = simulate_scores(jax.random.key(2), PRIOR, EXPERIMENT, N, beta=0.9)
    rep = signal_based_representation(scores, labels, 0.9, significance=0.01)
    assert rep.has_sbr, rep.failures()
    assert len(rep.joint) == 4
    # The recovered posterior per signal is the true one, within sampling error.
    true = np.asarray(bayesian_posteriors(PRIOR, EXPERIMENT))[:, 1]
    order = np.argsort(np.asarray(rep.signal_scores))
    se = np.sqrt(true * (1 - true) / np.asarray(rep.counts)[order])
    assert np.all(np.abs(np.asarray(rep.posteriors)[order, 1] - true) < 4 * se)
    # Scores of a beta = 0.9 algorithm do not minimise the beta = 0.7 loss ...
    assert not signal_based_representation(scores, labels, 0.7, significance=0.01).has_sbr
    # ... and perturbed scores fail condition 3 for the right loss.
    bad = signal_based_representation(0.9 * scores, labels, 0.9, significance=0.01)
    assert not bad.holds["loss_minimizing"] and bad.max_abs_z > bad.z_critical
    assert bad.total_loss_reduction > 0


def test_multiclass_simulated_data_has_an_sbr_for_its_own_b_only():
    scores, labels, _, _ = simulate_scores(jax.random.key(3), PRIOR3, EXPERIMENT3, N, B=B)
    chex.assert_shape(scores, (N, 3))
    assert signal_based_representation(scores, labels, B, significance=0.01).has_sbr
    other = np.ones((3, 3))
    rep = signal_based_representation(scores, labels, other, significance=0.01)
    assert not rep.holds["loss_minimizing"]


def test_any_loss_specification_drives_the_model_and_the_representation():
    from iml.spec import loss_spec

    # A named loss and the same loss written by hand give the same model.
    named, joint = model_distribution(PRIOR, EXPERIMENT, loss=loss_spec("squared", beta=0.9))
    by_hand, _ = model_distribution(PRIOR, EXPERIMENT, loss=_squared_beta_loss)
    np.testing.assert_allclose(named, by_hand, atol=1e-5)
    assert signal_based_representation_from_joint(
        named, joint, {"name": "squared", "beta": 0.9}
    ).has_sbr
    # A multiclass loss without a weight matrix: the class-weighted softmax cross-entropy.
    spec = loss_spec("class_weighted_softmax", class_weights=[1.0, 3.0, 0.5])
    alpha, joint3 = model_distribution(PRIOR3, EXPERIMENT3, loss=spec)
    np.testing.assert_allclose(jnp.sum(alpha, axis=1), 1.0, rtol=1e-6)  # softmax scores
    assert signal_based_representation_from_joint(alpha, joint3, spec).has_sbr
    assert not signal_based_representation_from_joint(alpha, joint3, B).has_sbr
    with pytest.raises(ValueError, match="has 3 classes"):
        signal_based_representation_from_joint(named, joint, spec)


@pytest.mark.slow
def test_binned_continuous_scores_pass_for_truthful_loss_and_fail_for_another():
    scores, labels, _, _ = simulate_gaussian_scores(jax.random.key(4), N, prevalence=0.1)
    rep = signal_based_representation(scores, labels, 0.5, n_bins=10, significance=0.01)
    assert len(rep.joint) == 10
    assert rep.holds["loss_minimizing"], rep.failures()
    wrong = signal_based_representation(scores, labels, 0.9, n_bins=10, significance=0.01)
    assert not wrong.holds["loss_minimizing"]
    # Unbinned, every continuous score is its own signal with one label: no SBR, and
    # signals with the same label have identical distributions.
    raw = signal_based_representation(scores[:300], labels[:300], 0.5)
    assert not raw.holds["loss_minimizing"] and not raw.holds["distinct_distributions"]


def test_given_signals_check_condition_4():
    scores, labels, signals, _ = simulate_scores(jax.random.key(5), PRIOR, EXPERIMENT, N, beta=0.9)
    rep = signal_based_representation(scores, labels, 0.9, signals=signals, significance=0.01)
    assert rep.model_residual == 0.0 and rep.has_sbr
    noisy = scores + 0.01 * jax.random.uniform(jax.random.key(6), scores.shape)
    rep = signal_based_representation(noisy, labels, 0.9, signals=signals, significance=0.01)
    assert not rep.holds["generated_by_model"]
    assert 0.004 < rep.model_residual <= 0.01
    assert any("condition 4" in line for line in rep.failures())


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scores", "labels", "spec", "kwargs", "message"),
    [
        (np.array([0.1, 0.5]), np.array([0, 2]), 0.9, {}, "labels"),
        (np.array([0.1, np.nan]), np.array([0, 1]), 0.9, {}, "NaN"),
        (np.array([]), np.array([]), 0.9, {}, "empty"),
        (np.array([0.1, 0.5]), np.array([0, 1]), 0.9, {"sample_weight": [1, -1]}, "weight"),
        (np.array([0.1, 0.5]), np.array([0, 1]), 1.0, {}, "beta"),
        (np.array([0.1, 0.5]), np.array([0, 1]), np.ones((2, 3)), {}, "square"),
        (np.array([0.1, 1.5]), np.array([0, 1]), 0.9, {}, r"\[0, 1\]"),
    ],
)
def test_bad_input_raises_value_error(scores, labels, spec, kwargs, message):
    with pytest.raises(ValueError, match=message):
        signal_based_representation(scores, labels, spec, **kwargs)
