"""Fixtures shared by the tests of the training modules: small tables (cheap to make, so each
module makes its own) that the exact solvers and the tabular trainer fit."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def rare_class_table():
    rng = np.random.default_rng(0)
    n, d = 3000, 6
    x = rng.normal(size=(n, d)).astype(np.float32)
    logit = -3.0 + x @ np.array([1.0, -0.5, 0.8, 0.0, 0.3, -1.2])
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    mask = (np.arange(n)[None, :] % 4 != np.arange(2)[:, None]).astype(np.float32)  # 2 rotations
    return x, y, mask


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
