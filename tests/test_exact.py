"""Tests of the exact solvers (iml.training.exact) and the tabular trainer that uses them,
against scikit-learn."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from iml.training.exact import beta_weighted_sample_weights, fit_weighted_logistic


def _objective(x, y, s, coef, intercept, l2):
    z = x.astype(np.float64) @ np.asarray(coef, np.float64) + float(intercept)
    return np.dot(s, np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * np.sum(np.square(coef))


def _sklearn_fit(x, y, s, l2):
    """The same minimiser by scikit-learn: C sum_i w_i l_i + ||w||^2 / 2 with w_i = s_i / (l2 C)."""
    keep = s > 0
    scale = 1.0 / s[keep].min()
    clf = LogisticRegression(C=1.0 / (l2 * scale), tol=1e-12, max_iter=100_000)
    clf.fit(x[keep], y[keep], sample_weight=s[keep] * scale)
    return clf.coef_[0], clf.intercept_[0]


@pytest.fixture(scope="module")
def rare_class_table():
    rng = np.random.default_rng(0)
    n, d = 3000, 6
    x = rng.normal(size=(n, d)).astype(np.float32)
    logit = -3.0 + x @ np.array([1.0, -0.5, 0.8, 0.0, 0.3, -1.2])
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    mask = (np.arange(n)[None, :] % 4 != np.arange(2)[:, None]).astype(np.float32)  # 2 rotations
    return x, y, mask


def test_every_member_reaches_scikit_learns_optimum(rare_class_table):
    x, y, mask = rare_class_table
    betas = np.array([0.01, 0.5, 0.99])
    l2 = 1e-3
    S = beta_weighted_sample_weights(y, betas, mask)
    assert S.shape == (3, 2, len(y))
    np.testing.assert_allclose(S.sum(-1), [[(b * y + (1 - b) * (1 - y)) @ m / m.sum() for m in mask]
                                           for b in betas], rtol=1e-5)  # fmt: skip
    fit = fit_weighted_logistic(x, y, S, l2=l2, tol=1e-6)
    assert fit.coef.shape == (3, 2, 6) and fit.intercept.shape == (3, 2)
    assert np.all(fit.converged) and np.all(fit.grad_norm <= 1e-6)
    for b in range(3):
        for r in range(2):
            s = S[b, r].astype(np.float64)
            coef, intercept = _sklearn_fit(x, y, s, l2)
            ours = _objective(x, y, s, fit.coef[b, r], fit.intercept[b, r], l2)
            theirs = _objective(x, y, s, coef, intercept, l2)
            assert ours <= theirs * (1 + 1e-6), (betas[b], r)
            assert ours == pytest.approx(theirs, rel=1e-6)
            assert float(fit.objective[b, r]) == pytest.approx(ours, rel=1e-5)
            np.testing.assert_allclose(fit.coef[b, r], coef, atol=2e-3)


def test_members_are_independent_of_each_other(rare_class_table):
    x, y, mask = rare_class_table
    S = beta_weighted_sample_weights(y, np.array([0.05, 0.9]), mask)
    together = fit_weighted_logistic(x, y, S.reshape(4, -1), l2=1e-3, chunk=3)
    alone = fit_weighted_logistic(x, y, S.reshape(4, -1)[2:3], l2=1e-3)
    np.testing.assert_allclose(together.coef[2], alone.coef[0], rtol=1e-5, atol=1e-6)


def test_separable_data_needs_a_penalty_for_a_finite_optimum():
    x = np.array([[-2.0], [-1.0], [1.0], [2.0]], np.float32)
    y = np.array([0, 0, 1, 1])
    weights = np.full((1, 4), 0.25, np.float32)
    free = fit_weighted_logistic(x, y, weights, max_iter=30)
    assert float(free.coef[0, 0]) > 5.0  # no minimiser: the weights grow
    ridge = fit_weighted_logistic(x, y, weights, l2=0.1)
    assert bool(ridge.converged[0]) and 0.5 < float(ridge.coef[0, 0]) < 5.0
    # The penalised optimum: the gradient of the objective vanishes there.
    z = x[:, 0] * float(ridge.coef[0, 0]) + float(ridge.intercept[0])
    p = 1 / (1 + np.exp(-z))
    assert abs(0.25 * np.dot(p - y, x[:, 0]) + 0.1 * float(ridge.coef[0, 0])) < 1e-5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sample_weights": np.ones((2, 5))}, r"sample_weights must be \[\.\.\., 4\]"),
        ({"sample_weights": -np.ones((1, 4))}, r"sample_weights must lie in \[0, inf\)"),
        ({"labels": np.array([0, 1, 2, 1])}, "labels must be 0 or 1"),
        ({"features": np.array([[0.0, np.nan]] * 4)}, "features must be finite; 4 entries"),
        ({"l2": -1.0}, r"l2 must lie in \[0, inf\)"),
        ({"max_iter": 0}, "max_iter must be an integer >= 1"),
        ({"tol": 0.0}, "tol must be a finite number > 0"),
    ],
)
def test_bad_input_is_named(kwargs, message):
    args = {
        "features": np.zeros((4, 2)),
        "labels": np.array([0, 1, 0, 1]),
        "sample_weights": np.ones((1, 4)),
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        fit_weighted_logistic(**args)
    with pytest.raises(ValueError, match=r"betas must lie in \(0, 1\)"):
        beta_weighted_sample_weights(np.array([0, 1]), [1.0], np.ones((1, 2)))
    with pytest.raises(ValueError, match="no training rows"):
        beta_weighted_sample_weights(np.array([0, 1]), [0.5], np.zeros((1, 2)))


def test_uci_adult_members_at_extreme_betas_match_scikit_learn(shared_data_path):
    from iml.data.tabular import read_adult

    table, split = read_adult(shared_data_path("uci-adult"))
    train = split == "train"
    x, y = np.asarray(table.features, np.float32)[train], np.asarray(table.labels)[train]
    mask = (np.arange(len(y)) % 10 != 0).astype(np.float32)[None, :]
    l2 = 1e-4
    S = beta_weighted_sample_weights(y, np.array([0.01, 0.99]), mask)
    fit = fit_weighted_logistic(x, y, S, l2=l2)
    assert np.all(fit.converged)
    for b in range(2):
        s = S[b, 0].astype(np.float64)
        coef, intercept = _sklearn_fit(x, y, s, l2)
        ours = _objective(x, y, s, fit.coef[b, 0], fit.intercept[b, 0], l2)
        assert ours == pytest.approx(_objective(x, y, s, coef, intercept, l2), rel=1e-6)


def test_hessians_from_pair_products_equal_those_from_the_design(rare_class_table, monkeypatch):
    from iml.training import exact_design

    x, y, mask = rare_class_table
    S = beta_weighted_sample_weights(y, np.array([0.02, 0.7]), mask)
    pairs = fit_weighted_logistic(x, y, S, l2=1e-3)
    monkeypatch.setattr(exact_design, "_PAIR_BYTES", 0)  # too little room: the direct products
    direct = fit_weighted_logistic(x, y, S, l2=1e-3)
    np.testing.assert_allclose(pairs.coef, direct.coef, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(pairs.objective, direct.objective, rtol=1e-6)
    assert np.all(pairs.converged) and np.all(direct.converged)


def test_one_hot_columns_that_sum_to_the_intercept_need_no_penalty():
    rng = np.random.default_rng(2)
    n = 2000
    category = rng.integers(0, 3, n)
    numeric = rng.normal(size=n)
    x = np.column_stack([np.eye(3)[category], numeric]).astype(np.float32)  # rank-deficient
    logit = np.array([-2.0, -1.0, 0.5])[category] + 1.2 * numeric
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    S = beta_weighted_sample_weights(y, np.array([0.1, 0.9]), np.ones((1, n), np.float32))
    fit = fit_weighted_logistic(x, y, S)
    assert np.all(fit.converged) and np.isfinite(fit.coef).all()
    for b in range(2):
        s = S[b, 0].astype(np.float64)
        clf = LogisticRegression(C=np.inf, tol=1e-12, max_iter=100_000)
        clf.fit(x, y, sample_weight=s * n)
        theirs = _objective(x, y, s, clf.coef_[0], clf.intercept_[0], 0.0)
        ours = _objective(x, y, s, fit.coef[b, 0], fit.intercept[b, 0], 0.0)
        assert ours == pytest.approx(theirs, rel=1e-6)


@pytest.fixture(scope="module")
def large_rare_class_table():
    """40,000 rows: 12 normal features and a 30-level one-hot category, 10% positive."""
    rng = np.random.default_rng(0)
    n, d = 40_000, 12
    category = rng.integers(0, 30, n)
    numeric = rng.normal(size=(n, d))
    x = np.column_stack([numeric, np.eye(30)[category]]).astype(np.float32)
    logit = -2.5 + numeric @ rng.normal(size=d) * 0.7 + rng.normal(size=30)[category]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    mask = (np.arange(n)[None, :] % 5 != np.arange(5)[:, None]).astype(np.float32)
    betas = 1 / (1 + np.exp(-np.linspace(-4.6, 4.6, 16)))  # 0.01 to 0.99, even in logit
    return x, y, beta_weighted_sample_weights(y, betas, mask), betas


@pytest.fixture(scope="module")
def large_cold_fit(large_rare_class_table):
    x, y, S, _ = large_rare_class_table
    return fit_weighted_logistic(x, y, S, l2=1e-4, tol=1e-7)


def test_members_reach_a_tolerance_near_float_precision(large_cold_fit):
    # A line search that summed its trial objectives in another order than the current one
    # (vmapped over the halvings) stalled 13 of these 80 members between 1e-7 and 2e-6.
    fit = large_cold_fit
    assert np.all(fit.converged) and np.max(fit.grad_norm) <= 1e-7
    assert np.max(fit.iterations) <= 12


def test_a_path_of_betas_reaches_the_same_optima_in_fewer_steps(
    large_rare_class_table, large_cold_fit
):
    x, y, S, betas = large_rare_class_table
    cold = large_cold_fit
    path = np.log(betas / (1 - betas))
    warm = fit_weighted_logistic(x, y, S, l2=1e-4, tol=1e-7, path=path, chunk=10)
    assert np.all(warm.converged)
    np.testing.assert_allclose(warm.objective, cold.objective, rtol=1e-6)
    np.testing.assert_allclose(warm.coef, cold.coef, atol=2e-3)
    assert warm.coef.shape == (16, 5, 42) and warm.hessians.shape == (16, 5)
    # Only the middle step starts cold; the anchors start from a solved neighbour, and the steps
    # between them borrow an anchor's Hessian, and many form none of their own.
    assert np.mean(warm.hessians) < 0.5 * np.mean(cold.hessians)
    assert np.mean(warm.hessians == 0) > 0.3
    # The steps are solved in the order of their path values, whatever order they come in.
    shuffled = np.random.default_rng(1).permutation(16)
    again = fit_weighted_logistic(
        x, y, S[shuffled], l2=1e-4, tol=1e-7, path=path[shuffled], chunk=10
    )
    np.testing.assert_allclose(again.coef, warm.coef[shuffled], atol=1e-6)
    np.testing.assert_array_equal(again.hessians, warm.hessians[shuffled])


def test_a_path_must_match_the_first_axis():
    args = {"features": np.zeros((4, 2)), "labels": np.array([0, 1, 0, 1])}
    with pytest.raises(ValueError, match=r"path must have shape \(2,\), got \(3,\)"):
        fit_weighted_logistic(**args, sample_weights=np.ones((2, 1, 4)), path=[0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="path must be finite; 1 entries are not"):
        fit_weighted_logistic(**args, sample_weights=np.ones((2, 1, 4)), path=[0.0, np.nan])
    with pytest.raises(ValueError, match=r"sample_weights must be \[P, \.\.\., N\] with a path"):
        fit_weighted_logistic(**args, sample_weights=np.ones(4), path=[0.0])


def test_pairs_of_one_category_are_left_out_of_the_table(monkeypatch):
    from iml.training import exact_design

    rng = np.random.default_rng(3)
    n = 1500
    category = rng.integers(0, 4, n)
    x = np.column_stack([rng.normal(size=n), np.eye(4)[category]]).astype(np.float32)
    logit = np.array([-2.0, -1.0, 0.0, 1.0])[category] + x[:, 0]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    rows, cols = exact_design._nonzero_pairs(x)
    # 6 columns with the intercept's: 21 pairs, less the 6 pairs of distinct levels.
    assert len(rows) == 15
    assert not any(1 <= r < c <= 4 for r, c in zip(rows, cols, strict=True))
    S = beta_weighted_sample_weights(y, np.array([0.05, 0.8]), np.ones((1, n), np.float32))
    pairs = fit_weighted_logistic(x, y, S, l2=1e-3)
    monkeypatch.setattr(exact_design, "_PAIR_BYTES", 0)
    direct = fit_weighted_logistic(x, y, S, l2=1e-3)
    np.testing.assert_allclose(pairs.coef, direct.coef, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(pairs.objective, direct.objective, rtol=1e-6)


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


# ----------------------------------------------------------------------------------------------
# The B-weighted log loss: one weighted logistic regression per class
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_class_table():
    """Three overlapping classes in 5 features; 4 rotations of 4 folds (2 train, 1 val, 1 test)."""
    from iml.data.folds import nested_cv_splits

    rng = np.random.default_rng(1)
    n, d = 900, 5
    x = rng.normal(size=(n, d)).astype(np.float32)
    z = x @ rng.normal(size=(d, 3)) + np.array([0.0, -0.5, -1.5])
    y = np.argmax(z + rng.gumbel(size=z.shape), axis=1).astype(np.int32)
    splits = nested_cv_splits(np.arange(n) % 4, n_folds=4)
    B = np.ones((3, 3, 3))
    B[1, 2, 2] = 10.0  # the rare class's own term
    B[2, 0, 2] = 5.0  # scoring the rare class when the truth is 0
    return x, y, splits, B


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


# ----------------------------------------------------------------------------------------------
# The class-weighted softmax cross-entropy: multinomial logistic regression
# ----------------------------------------------------------------------------------------------


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
    from iml.training.tabular import exact_solver_applies

    x, y, splits, _ = three_class_table
    l2 = 1e-3
    weights = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 10.0], [5.0, 1.0, 1.0]])
    losses = loss_spec("class_weighted_softmax", class_weights=weights)
    spec = loss_grid(losses).spec
    model = build_model("logistic", 3)
    assert exact_solver_applies(model, spec)
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


def test_weighted_softmax_reaches_the_multinomial_optimum_of_scipy():
    """Weighted multinomial logistic regression with a ridge on the features' rows, against
    scipy's BFGS on the same objective in float64, for two weightings at once."""
    from scipy.optimize import minimize
    from scipy.special import log_softmax

    from iml.training.exact import fit_weighted_softmax

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
    from iml.training.exact import fit_weighted_softmax

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


# ----------------------------------------------------------------------------------------------
# The ridge: its scale, standardisation, and its choice on the validation folds
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["matrix", "class_weighted_softmax"])
def test_a_ridge_per_unit_of_weight_ignores_a_common_factor_of_the_weights(three_class_table, loss):
    """Under l2_scale='per_weight', multiplying every sample weight by 5 (B -> 5B, w -> 5w)
    leaves each member's fit unchanged; in the paper's units it weakens the ridge 5-fold."""
    import dataclasses

    from iml import loss_spec
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular

    x, y, splits, B = three_class_table
    model = build_model("logistic", 3)

    def losses(factor):
        if loss == "matrix":
            return factor * B
        return loss_spec(loss, class_weights=factor * np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 10.0]]))

    def coef(scale, factor):
        config = dataclasses.replace(TABULAR_DEFAULTS, l2=0.05, l2_scale=scale)
        return train_tabular(model, x, y, splits[:2], losses(factor), [0], config).params["w"]

    np.testing.assert_allclose(coef("per_weight", 5.0), coef("per_weight", 1.0), atol=2e-5)
    paper = np.abs(coef("paper", 5.0) - coef("paper", 1.0)).max()
    assert paper > 1e-2


def test_standardised_fits_are_scikit_learns_pipeline_on_the_training_rows(rare_class_table):
    """standardize=True: the members are StandardScaler + LogisticRegression fitted on each
    rotation's training rows (the ridge on the standardised coefficients), with coefficients in
    the features' own units."""
    import dataclasses

    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from iml.data.folds import nested_cv_splits
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular

    x, y, _ = rare_class_table
    x = x * np.array([1.0, 10.0, 0.1, 3.0, 1.0, 50.0], np.float32) + 2.0  # scales apart
    splits = nested_cv_splits(np.arange(len(y)) % 10)[:2]
    l2, beta = 1e-2, 0.8
    config = dataclasses.replace(TABULAR_DEFAULTS, l2=l2, standardize=True)
    fit = train_tabular(build_model("logistic"), x, y, splits, [beta], [0], config)
    raw_config = dataclasses.replace(config, standardize=False)
    unscaled = train_tabular(build_model("logistic"), x, y, splits, [beta], [0], raw_config)
    for r, split in enumerate(splits):
        rows = split.train
        # scikit-learn's C sum_i w_i l_i + ||w'||^2 / 2 over C n is the mean loss + l2 / 2 ||w'||^2
        clf = LogisticRegression(C=1.0 / (l2 * len(rows)), class_weight={0: 1 - beta, 1: beta},
                                 tol=1e-12, max_iter=10_000)  # fmt: skip
        pipe = make_pipeline(StandardScaler(), clf).fit(x[rows], y[rows])
        ours = x[split.test] @ fit.params["w"][0, 0, r] + fit.params["b"][0, 0, r]
        theirs = pipe.decision_function(x[split.test])
        np.testing.assert_allclose(ours, theirs, atol=1e-3)  # a gradient below 1e-6, in float32
        raw = x[split.test] @ unscaled.params["w"][0, 0, r] + unscaled.params["b"][0, 0, r]
        assert np.abs(raw - theirs).max() > 0.05  # the ridge on the features as they are
