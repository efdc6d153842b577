"""What exact fits share (``iml.training.exact_design``): Hessians from the table of feature-pair
products and from the cells of pairs of categories equal those from the design, pairs of one
category's levels are left out of it, and each bad argument of a fit is named."""

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


@pytest.mark.parametrize("cores", [1, 3, 500])
def test_the_table_is_the_same_however_its_rows_are_shared_among_threads(monkeypatch, cores):
    # 500 threads asked for a table of fewer pairs: one a pair; 3: spans of unequal sizes
    from iml.training import exact_design

    rng = np.random.default_rng(11)
    X = rng.normal(size=(1001, 7)).astype(np.float32)
    rows, cols = np.triu_indices(7)
    monkeypatch.setattr(exact_design, "usable_cores", lambda: cores)
    Z = exact_design._pair_products(X, rows, cols)
    assert Z.shape == (28, 1001) and Z.dtype == np.float32
    np.testing.assert_array_equal(Z, (X[:, rows] * X[:, cols]).T)


def _two_categories(n: int = 3000, seed: int = 5):
    """Rows with a numeric column, two one-hot categories of 8 and 6 levels (48 pairs of levels,
    some rows with no level of the second), each level's column scaled as the tabular sweep
    scales it, and a column of zeros."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 8, n), rng.integers(0, 7, n)  # b = 6: no level
    onehot_a = np.eye(8)[a] / rng.uniform(0.2, 3.0, 8)
    onehot_b = np.eye(7)[b][:, :6] * -rng.uniform(0.2, 3.0, 6)
    x = np.column_stack([rng.normal(size=n), onehot_a, np.zeros(n), onehot_b]).astype(np.float32)
    logit = np.linspace(-2, 1, 8)[a] + np.linspace(1, -1, 7)[b] + 0.5 * x[:, 0]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    return x, y, a, b


def test_hessians_from_cells_of_two_categories_equal_the_designs_in_float64():
    import jax.numpy as jnp

    from iml.training import exact_design

    x, _, _, b = _two_categories()
    design = exact_design.Design.of(x)
    pairs = design.pairs
    q, m = pairs.products.shape[0], pairs.cells.shape[0]
    # 48 pairs of levels from the cells (one pair of categories); the table keeps the rest
    assert m == 1 and pairs.rows.shape[0] - q == 48
    rows, cols = np.asarray(pairs.rows), np.asarray(pairs.cols)
    first, second = set(range(1, 9)), set(range(10, 16))
    assert all(r in first and c in second for r, c in zip(rows[q:], cols[q:], strict=True))
    assert not any(r in first and c in second for r, c in zip(rows[:q], cols[:q], strict=True))
    assert sorted(zip(rows, cols, strict=True)) == sorted(
        zip(*exact_design._nonzero_pairs(x), strict=True)
    )
    cells = np.asarray(pairs.cells[0])
    assert np.all(cells[b == 6] == 48) and np.all(cells[b < 6] < 48)
    V = np.random.default_rng(0).uniform(size=(3, x.shape[0])).astype(np.float32)
    H = np.asarray(exact_design.data_hessians(design, jnp.asarray(V)), np.float64)
    X = np.column_stack([x, np.ones(x.shape[0])]).astype(np.float64)
    exact = np.einsum("kn,ni,nj->kij", V.astype(np.float64), X, X)
    scale = np.abs(exact).max(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(H / scale, exact / scale, rtol=0, atol=2e-6)


def test_the_table_holds_each_pairs_products_and_each_row_the_cell_of_its_two_levels():
    from iml.training import exact_design

    x, _, a, b = _two_categories()
    design = exact_design.Design.of(x)
    pairs = design.pairs
    rows, cols = np.asarray(pairs.rows), np.asarray(pairs.cols)
    q = pairs.products.shape[0]
    X = np.column_stack([x, np.ones(x.shape[0], np.float32)])
    np.testing.assert_array_equal(np.asarray(design.X), X)
    np.testing.assert_array_equal(np.asarray(design.X_abs), np.abs(X))  # negative levels too
    assert np.any(X < 0)
    # the table's column t is the products of its pair's two design columns, to the bit
    np.testing.assert_array_equal(np.asarray(pairs.products), (X[:, rows[:q]] * X[:, cols[:q]]).T)
    # each row's cell is the pair of its own two levels, whose value is the row's product
    cell = np.asarray(pairs.cells[0])
    both = b < 6
    assert np.all(cell[~both] == rows.shape[0] - q)
    r, c = rows[q + cell[both]], cols[q + cell[both]]
    at = np.flatnonzero(both)
    assert np.all(r == 1 + a[both]) and np.all(c == 10 + b[both])
    np.testing.assert_array_equal(np.asarray(pairs.values)[cell[both]], X[at, r] * X[at, c])


@pytest.mark.slow
def test_fits_with_the_cells_of_categories_equal_fits_with_the_table_alone(monkeypatch):
    from iml.training import exact_design
    from iml.training.exact_multinomial import fit_weighted_softmax

    x, y, a, b = _two_categories()
    mask = np.ones((1, x.shape[0]), np.float32)
    S = beta_weighted_sample_weights(y, np.array([0.1, 0.6]), mask)
    # three classes, each likelier with some levels of both categories
    logits = np.column_stack([np.zeros(len(a)), (a % 3) - 1.0, (b % 2) - 0.5 * x[:, 0]])
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    u = np.random.default_rng(1).uniform(size=(len(a), 1))
    classes = (u > np.cumsum(p, axis=1)).sum(axis=1)
    weights = np.ones((2, x.shape[0]), np.float32) / x.shape[0]
    cells = fit_weighted_logistic(x, y, S, l2=1e-3, tol=1e-7)
    softmax_cells = fit_weighted_softmax(x, classes, weights, 3, l2=1e-3, tol=1e-7)
    assert exact_design.Design.of(x).pairs.cells.shape[0] == 1
    monkeypatch.setattr(exact_design, "_CELLS", 10**9)  # every pair from the table
    assert exact_design.Design.of(x).pairs.cells.shape[0] == 0
    table = fit_weighted_logistic(x, y, S, l2=1e-3, tol=1e-7)
    softmax_table = fit_weighted_softmax(x, classes, weights, 3, l2=1e-3, tol=1e-7)
    assert np.all(cells.converged) and np.all(table.converged)
    np.testing.assert_allclose(cells.objective, table.objective, rtol=1e-6)
    np.testing.assert_allclose(cells.coef, table.coef, rtol=1e-4, atol=1e-5)
    assert np.all(softmax_cells.converged) and np.all(softmax_table.converged)
    np.testing.assert_allclose(softmax_cells.objective, softmax_table.objective, rtol=1e-6)


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
