"""Batched Newton steps of binary members (``iml.training.exact_binary``): each member solved on its
own whatever the batch, and a coefficient whose optimum is at infinity kept moving."""

import numpy as np

from iml.training.exact import beta_weighted_sample_weights, fit_weighted_logistic


def test_members_are_independent_of_each_other(rare_class_table):
    x, y, mask = rare_class_table
    S = beta_weighted_sample_weights(y, np.array([0.05, 0.9]), mask)
    together = fit_weighted_logistic(x, y, S.reshape(4, -1), l2=1e-3, chunk=3)
    alone = fit_weighted_logistic(x, y, S.reshape(4, -1)[2:3], l2=1e-3)
    np.testing.assert_allclose(together.coef[2], alone.coef[0], rtol=1e-5, atol=1e-6)


def test_a_coefficient_whose_optimum_is_at_infinity_keeps_moving_along_a_path():
    # Without a penalty, the level whose rows are all negative has its optimum at -infinity: its
    # Hessian eigenvalue shrinks as its coefficient falls. Steps that dropped eigenvalues below
    # 1e-6 of the largest stopped moving it, and 10 of these 128 members, started from their
    # neighbours' optima, then stalled above the tolerance until the step limit.
    rng = np.random.default_rng(1)
    n, levels, scale = 20_000, 50, 5.0
    category = rng.integers(0, levels, n)
    numeric = rng.normal(size=(n, 4)) * scale
    logit = -2.0 + numeric @ np.array([1.0, -0.6, 0.4, 0.2]) / scale
    logit += rng.normal(size=levels)[category]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    y[category == 0] = 0
    x = np.column_stack([numeric, np.eye(levels)[category]]).astype(np.float32)
    mask = (np.arange(n)[None, :] % 5 != np.arange(2)[:, None]).astype(np.float32)
    betas = 1 / (1 + np.exp(-np.linspace(-4.6, 4.6, 64)))
    S = beta_weighted_sample_weights(y, betas, mask)
    fit = fit_weighted_logistic(x, y, S, path=np.log(betas / (1 - betas)))
    assert np.all(fit.converged) and np.max(fit.iterations) <= 20
    assert np.all(fit.coef[:, :, 4] < -5.0)  # the all-negative level, far out towards -infinity
