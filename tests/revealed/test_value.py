"""Tests of iml.revealed.value: the value matrix and the mutual information of revealed
experiments."""

import numpy as np
import pytest
from _revealed_references import minimised_loss
from scipy.optimize import minimize_scalar

from iml import loss_spec
from iml import revealed as R


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
