"""Tests of iml.revealed.costs: the revealed cost bounds."""

import numpy as np
import pytest
from _revealed_references import random_value_matrices

from iml import revealed as R


def test_cost_bounds_are_feasible_exactly_without_negative_cycles_and_are_sharp():
    rng = np.random.default_rng(6)
    G = random_value_matrices(rng, 300, 5)
    check = R.niac_check(G)
    bounds = R.revealed_cost_bounds(G, reference=2)
    np.testing.assert_array_equal(bounds.feasible, ~np.asarray(check.negative_cycle))
    w = np.diagonal(G, axis1=-2, axis2=-1)[:, :, None] - G  # w[k, j] = G[k, k] - G[k, j]
    for i in np.flatnonzero(bounds.feasible):
        for costs in (bounds.upper[i], bounds.lower[i]):  # each end is itself a feasible cost
            c = np.asarray(costs, np.float64)
            assert c[2] == 0.0
            assert np.all(c[:, None] - c[None, :] <= w[i] + 1e-5)
    assert np.isnan(bounds.lower[~np.asarray(bounds.feasible)]).all()


G2 = np.eye(2, dtype=np.float32)

BAD = {
    "reference": (lambda: R.revealed_cost_bounds(G2, reference=5), "reference"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_naming_the_argument(name):
    call, match = BAD[name]
    with pytest.raises(ValueError, match=match):
        call()
