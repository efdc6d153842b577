"""The tabular trainer (``iml.training.tabular``): members of every loss on a table, by the exact
solver or by Adam, their out-of-fold logits, and what it refuses."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression


def _sklearn_fit(x, y, s, l2):
    """The same minimiser by scikit-learn: C sum_i w_i l_i + ||w||^2 / 2 with w_i = s_i / (l2 C)."""
    keep = s > 0
    scale = 1.0 / s[keep].min()
    clf = LogisticRegression(C=1.0 / (l2 * scale), tol=1e-12, max_iter=100_000)
    clf.fit(x[keep], y[keep], sample_weight=s[keep] * scale)
    return clf.coef_[0], clf.intercept_[0]


def _matrix_objective(spec, w, b, x, y, l2):
    import jax.numpy as jnp

    return jnp.mean(spec.logits_loss(x @ w + b, y)) + 0.5 * l2 * jnp.sum(jnp.square(w))


def test_matrix_weighted_members_sit_at_the_optimum_of_their_own_loss(three_class_table):
    """The exact solver's members against the loss specification itself: the gradient of each
    member's B-weighted training objective, by automatic differentiation, vanishes; and each
    class's output is scikit-learn's weighted logistic regression of that class."""
    import dataclasses

    import jax

    from iml import loss_grid
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular
    from iml.training.tabular import exact_solver_applies

    x, y, splits, B = three_class_table
    l2 = 1e-3
    model = build_model("logistic", 3)
    spec = loss_grid(B).spec
    assert exact_solver_applies(model, spec)
    # solver "auto": exact here; the objective's ridge is on the features as they are
    config = dataclasses.replace(TABULAR_DEFAULTS, l2=l2, standardize=False)
    fit = train_tabular(model, x, y, splits, B, [0, 3], config)
    assert fit.params["w"].shape == (2, 3, 4, 5, 3) and fit.params["b"].shape == (2, 3, 4, 3)
    np.testing.assert_array_equal(fit.params["w"][0], fit.params["w"][1])  # seeds share it
    assert fit.best_epoch.max() == fit.epochs_run <= TABULAR_DEFAULTS.max_newton_steps
    grad = jax.grad(_matrix_objective, argnums=(1, 2))
    for k in range(3):
        for r, split in enumerate(splits):
            w, b = fit.params["w"][0, k, r], fit.params["b"][0, k, r]
            rows = split.train
            gw, gb = grad(spec[k], w, b, x[rows], y[rows], l2)
            assert max(np.abs(gw).max(), np.abs(gb).max()) < 1e-5, (k, r)
            # the validation loss is the member's own loss on its validation rows
            val = _matrix_objective(spec[k], w, b, x[split.val], y[split.val], 0.0)
            assert fit.best_val[0, k, r] == pytest.approx(float(val), rel=1e-5)
            # and its test logits are the model's on its test rows
            test = x[split.test] @ w + b
            np.testing.assert_allclose(fit.test_logits[0, k, r, : len(split.test)], test, atol=1e-5)
    # class c's output: weights B[y_i, c] on the indicator of class c
    k, r, c = 2, 1, 2
    rows = splits[r].train
    s = B[k][y[rows], c] / len(rows)
    coef, intercept = _sklearn_fit(x[rows], (y[rows] == c).astype(np.int32), s, l2)
    np.testing.assert_allclose(fit.params["w"][0, k, r][:, c], coef, atol=2e-4)
    assert fit.params["b"][0, k, r][c] == pytest.approx(intercept, abs=2e-4)


def test_exact_matrix_members_reach_a_lower_objective_than_adam(three_class_table):
    import dataclasses

    from iml import loss_grid
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular

    x, y, splits, B = three_class_table
    model = build_model("logistic", 3)
    spec = loss_grid(B).spec
    exact = train_tabular(model, x, y, splits, B, [0], TABULAR_DEFAULTS)
    adam = dataclasses.replace(TABULAR_DEFAULTS, solver="adam", learning_rate=0.05, max_epochs=20)
    trained = train_tabular(model, x, y, splits, B, [0], adam)
    for k in range(3):
        for r, split in enumerate(splits):
            rows = split.train

            def objective(fit, k=k, r=r, rows=rows):
                w, b = fit.params["w"][0, k, r], fit.params["b"][0, k, r]
                return float(_matrix_objective(spec[k], w, b, x[rows], y[rows], 0.0))

            assert objective(exact) <= objective(trained) + 1e-6, (k, r)
