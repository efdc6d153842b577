"""What exact fits share (``iml.training.exact_design``): Hessians from the table of feature-pair
products equal those from the design, pairs of one category's levels are left out of it, and each
bad argument of a fit is named."""

import numpy as np
import pytest

from iml.training.exact import beta_weighted_sample_weights, fit_weighted_logistic


@pytest.mark.slow
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


@pytest.mark.slow
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
