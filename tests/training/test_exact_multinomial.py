"""Multinomial logistic regressions under the class-weighted softmax cross-entropy
(``iml.training.exact_multinomial``): at the optimum of scipy and below Adam's, and bad input
named."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression


def _matrix_objective(spec, w, b, x, y, l2):
    import jax.numpy as jnp

    return jnp.mean(spec.logits_loss(x @ w + b, y)) + 0.5 * l2 * jnp.sum(jnp.square(w))


@pytest.mark.slow
def test_class_weighted_softmax_members_sit_at_their_optimum_below_adam(three_class_table):
    """Multinomial members against the loss specification itself: the autodiff gradient of each
    member's class-weighted training objective vanishes; a member's probabilities are
    scikit-learn's weighted multinomial fit's; no member's objective is above Adam's."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    from iml import loss_grid, loss_spec
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular
    from iml.training.tabular import table_solver

    x, y, splits, _ = three_class_table
    l2 = 1e-3
    weights = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 10.0], [5.0, 1.0, 1.0]])
    losses = loss_spec("class_weighted_softmax", class_weights=weights)
    spec = loss_grid(losses).spec
    model = build_model("logistic", 3)
    assert table_solver(model, spec.record) == "exact"
    # solver "auto": exact here; the objective's ridge is on the features as they are
    config = dataclasses.replace(TABULAR_DEFAULTS, l2=l2, standardize=False)
    fit = train_tabular(model, x, y, splits[:2], losses, [0], config)
    adam = dataclasses.replace(config, solver="adam", learning_rate=0.05, max_epochs=20)
    trained = train_tabular(model, x, y, splits[:2], losses, [0], adam)
    assert fit.params["w"].shape == (1, 3, 2, 5, 3) and fit.params["b"].shape == (1, 3, 2, 3)
    assert fit.epochs_run <= 20  # Newton steps
    grad = jax.value_and_grad(_matrix_objective, argnums=(1, 2))
    for k in range(3):
        for r, split in enumerate(splits[:2]):
            rows = split.train
            w, b = fit.params["w"][0, k, r], fit.params["b"][0, k, r]
            value, (gw, gb) = grad(spec[k], w, b, x[rows], y[rows], l2)
            assert max(np.abs(gw).max(), np.abs(gb).max()) < 1e-5, (k, r)
            w, b = trained.params["w"][0, k, r], trained.params["b"][0, k, r]
            assert value <= _matrix_objective(spec[k], w, b, x[rows], y[rows], l2) + 1e-6, (k, r)
    # scikit-learn's multinomial fit of C sum_i w[y_i] l_i + ||W||^2 / 2, C = 1 / (l2 n_rows)
    k, r = 1, 1
    rows = splits[r].train
    clf = LogisticRegression(C=1.0 / (l2 * len(rows)), solver="newton-cholesky", tol=1e-12)
    clf.fit(x[rows].astype(np.float64), y[rows], sample_weight=weights[k][y[rows]])
    logits = x @ fit.params["w"][0, k, r] + fit.params["b"][0, k, r]
    np.testing.assert_allclose(jax.nn.softmax(jnp.asarray(logits)), clf.predict_proba(x), atol=1e-4)


@pytest.mark.slow
def test_weighted_softmax_reaches_the_multinomial_optimum_of_scipy():
    """Weighted multinomial logistic regression with a ridge on the features' rows, against
    scipy's BFGS on the same objective in float64, for two weightings at once."""
    from scipy.optimize import minimize
    from scipy.special import log_softmax

    from iml.training.exact_multinomial import fit_weighted_softmax

    rng = np.random.default_rng(21)
    n, d, k = 400, 3, 4
    x = rng.normal(size=(n, d))
    y = np.argmax(x @ rng.normal(size=(d, k)) + rng.gumbel(size=(n, k)), axis=1)
    X = np.concatenate([x, np.ones((n, 1))], axis=1)
    weights = np.stack([np.ones(n), np.where(y == 3, 5.0, 1.0)]) / n
    l2 = 0.01  # on the features' rows, not the intercepts

    def objective(theta, w):
        z = X @ theta.reshape(d + 1, k)
        value = w @ (np.logaddexp.reduce(z, axis=1) - z[np.arange(n), y])
        return value + 0.5 * l2 * np.sum(theta.reshape(d + 1, k)[:d] ** 2)

    fit = fit_weighted_softmax(x, y, weights, k, l2=l2, tol=1e-7)
    assert fit.coef.shape == (2, d, k) and fit.intercept.shape == (2, k)
    assert np.all(fit.converged) and np.all(fit.iterations <= 20)
    for i, w in enumerate(weights):
        best = minimize(objective, np.zeros((d + 1) * k), args=(w,), method="BFGS", tol=1e-12)
        theta = np.concatenate([fit.coef[i], fit.intercept[i][None]]).astype(np.float64)
        assert float(fit.objective[i]) == pytest.approx(best.fun, rel=1e-6)
        assert objective(theta.ravel(), w) <= best.fun + 1e-7
        probs = np.exp(log_softmax(X @ theta, axis=1))
        want = np.exp(log_softmax(X @ best.x.reshape(d + 1, k), axis=1))
        np.testing.assert_allclose(probs, want, atol=1e-4)
    # a grid of penalties: each level is the optimum at its own penalty, whatever the order
    grid = fit_weighted_softmax(x, y, weights, k, l2=[1.0, l2, 1e-4], tol=1e-7)
    assert grid.coef.shape == (3, 2, d, k) and np.all(grid.converged)
    np.testing.assert_allclose(grid.objective[1], fit.objective, rtol=1e-6)
    assert np.all(np.abs(grid.coef[0]) < np.abs(grid.coef[2]).max())  # more penalty, smaller


def test_weighted_softmax_names_bad_input():
    from iml.training.exact_multinomial import fit_weighted_softmax

    x, y, w = np.ones((5, 2), np.float32), np.array([0, 1, 2, 1, 0]), np.ones((1, 5), np.float32)

    def fit(**changed):
        args = {"features": x, "labels": y, "sample_weights": w, "n_classes": 3, **changed}
        return fit_weighted_softmax(**args, max_iter=3)

    with pytest.raises(ValueError, match=r"labels must be class indices in \[0, 3\)"):
        fit(labels=np.array([0, 1, 3, 1, 0]))
    with pytest.raises(ValueError, match=r"sample_weights must lie in \[0, inf\)"):
        fit(sample_weights=-w)
    with pytest.raises(ValueError, match="features must be finite"):
        fit(features=np.where(np.eye(5, 2) > 0, np.nan, x))
    with pytest.raises(ValueError, match=r"sample_weights must be \[\.\.\., 5\]"):
        fit(sample_weights=np.ones((1, 4), np.float32))
    with pytest.raises(ValueError, match=r"l2 must lie in \[0, inf\)"):
        fit(l2=-1.0)
    assert np.isfinite(fit().objective).all()  # the same arguments, well formed
