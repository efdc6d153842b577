"""Tests of iml.plots.revealed: the figures of revealed experiments across class weights."""

import numpy as np
import pytest
from _figure_helpers import collection_by_gid, line_by_gid, lines_by_gid

from iml.plots import (
    figure_cost_bounds,
    figure_information_by_class,
    figure_information_by_weight,
    figure_value_matrix,
)


def _logit(p):
    p = np.asarray(p, dtype=float)
    return np.log(p) - np.log1p(-p)


def _segments(ax, gid):
    """``(x, low, high)`` of each vertical segment of the collection ``gid``, in order."""
    segments = collection_by_gid(ax, gid).get_segments()
    return np.asarray([[s[0, 0], s[0, 1], s[1, 1]] for s in segments]).T


def test_figure_information_by_weight_draws_each_model_and_its_interval():
    betas = [0.1, 0.5, 0.9, 0.99]
    information = [0.12, 0.2, 0.18, 0.05]
    interval = [[0.1, 0.17, 0.15, 0.03], [0.14, 0.23, 0.2, 0.07]]
    (ax,) = figure_information_by_weight(betas, information, interval).axes
    line = line_by_gid(ax, "information")
    np.testing.assert_allclose(line.get_xdata(), _logit(betas))
    np.testing.assert_allclose(line.get_ydata(), information)
    x, low, high = _segments(ax, "information-interval")
    np.testing.assert_allclose(x, _logit(betas))
    np.testing.assert_allclose([low, high], interval)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "0.5", "0.9", "0.99"]
    alpha = figure_information_by_weight(betas, information, weight_name="alpha").axes[0]
    assert alpha.get_xlabel() == "class weight alpha (logit scale)"
    with pytest.raises(ValueError, match=r"interval must have shape \(2, 4\)"):
        figure_information_by_weight(betas, information, interval[0])
    with pytest.raises(ValueError, match="information must have one value per class weight"):
        figure_information_by_weight(betas, information[:3])


def test_figure_value_matrix_draws_g_relative_to_its_diagonal_and_marks_violations():
    rng = np.random.default_rng(0)
    G = -rng.uniform(0.1, 0.3, (4, 4))
    keys = ["0.5", "0.7", "0.9", "0.99"]
    violations = np.zeros((4, 4), bool)
    violations[2, 0] = violations[3, 1] = True
    fig = figure_value_matrix(G, keys, violations, cycle=[1, 3, 2, -1])
    ax = fig.axes[0]
    (image,) = [im for im in ax.get_images() if im.get_gid() == "value-matrix"]
    np.testing.assert_allclose(image.get_array(), G - np.diagonal(G)[:, None])
    low, high = image.get_clim()
    assert low == -high and high > 0  # centred at 0
    # the violating pairs (k, j) at column j, row k
    np.testing.assert_array_equal(
        collection_by_gid(ax, "violations").get_offsets(), [[0, 2], [1, 3]]
    )
    # the cycle 1 -> 3 -> 2 -> 1 passes the cells (k_i, k_{i+1}): (1, 3), (3, 2), (2, 1)
    cycle = line_by_gid(ax, "niac-cycle")
    assert list(zip(cycle.get_ydata(), cycle.get_xdata(), strict=True)) == [
        (1, 3), (3, 2), (2, 1), (1, 3)
    ]  # fmt: skip
    assert [t.get_text() for t in ax.get_yticklabels()] == keys
    # pairs may be given as a list, and no marks at all
    listed = figure_value_matrix(G, keys, [(2, 0), (3, 1)]).axes[0]
    np.testing.assert_array_equal(
        collection_by_gid(listed, "violations").get_offsets(), [[0, 2], [1, 3]]
    )
    bare = figure_value_matrix(G, keys).axes[0]
    assert not [c for c in bare.collections if c.get_gid() == "violations"]
    assert not lines_by_gid(bare, "niac-cycle")
    with pytest.raises(ValueError, match="keys must name the 4 models"):
        figure_value_matrix(G, keys[:3])
    with pytest.raises(ValueError, match="G must be a square"):
        figure_value_matrix(G[:3], keys)


def test_figure_cost_bounds_draws_each_models_bounds_and_interval():
    betas = [0.5, 0.8, 0.95]
    lower, upper = [0.0, -0.02, -0.03], [0.0, -0.01, -0.015]
    interval = [[0.0, -0.03, -0.04], [0.0, -0.005, -0.01]]
    (ax,) = figure_cost_bounds(betas, lower, upper, interval, reference=0).axes
    x, low, high = _segments(ax, "cost-bounds")
    np.testing.assert_allclose(x, _logit(betas))
    np.testing.assert_allclose([low, high], [lower, upper])
    np.testing.assert_allclose(line_by_gid(ax, "cost-lower").get_ydata(), lower)
    np.testing.assert_allclose(_segments(ax, "cost-interval")[1:], interval)
    np.testing.assert_allclose(line_by_gid(ax, "cost-reference").get_xdata(), [0.0])
    # where NIAC fails at the point estimates no costs fit: NaN bounds, and the figure says so as
    # a point estimate, not as the test's verdict (its title carries the verdict)
    (empty,) = figure_cost_bounds(betas, [np.nan] * 3, [np.nan] * 3).axes
    (note,) = [t.get_text() for t in empty.texts]
    assert "no costs fit the point estimates" in note and "not the test's verdict" in note
    with pytest.raises(ValueError, match="reference must be a model index"):
        figure_cost_bounds(betas, lower, upper, reference=3)


def test_figure_cost_bounds_draws_a_grid_of_losses_by_its_keys():
    keys = ["ones", "w[8]=10", "w[8]=100"]
    lower, upper = [0.0, -0.02, -0.03], [0.0, -0.01, -0.015]
    (ax,) = figure_cost_bounds(None, lower, upper, reference=0, grid_keys=keys).axes
    x, low, high = _segments(ax, "cost-bounds")
    np.testing.assert_allclose(x, [0.0, 1.0, 2.0])  # the grid's order
    np.testing.assert_allclose([low, high], [lower, upper])
    assert [t.get_text() for t in ax.get_xticklabels()] == keys
    assert "reference (ones): cost 0" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="betas or their grid_keys, one of the two"):
        figure_cost_bounds([0.5, 0.8, 0.9], lower, upper, grid_keys=keys)
    with pytest.raises(ValueError, match=r"one value per grid key \(3\)"):
        figure_cost_bounds(None, lower[:2], upper[:2], grid_keys=keys)


def test_figure_information_by_class_draws_each_class_along_the_grid_with_its_interval():
    information = np.array([[0.1, 0.05, 0.02], [0.1, 0.06, 0.04], [0.09, 0.06, 0.07]])
    interval = np.stack([information - 0.01, information + 0.02])
    keys = ["ones", "w[2]=4", "w[2]=16"]
    (ax,) = figure_information_by_class(information, interval, grid_keys=keys).axes
    for c in range(3):
        line = line_by_gid(ax, f"class-information-{c}")
        np.testing.assert_allclose(line.get_xdata(), [0, 1, 2])
        np.testing.assert_allclose(line.get_ydata(), information[:, c])
        x, low, high = _segments(ax, f"class-information-interval-{c}")
        np.testing.assert_allclose(x, [0, 1, 2])
        np.testing.assert_allclose([low, high], interval[:, :, c])
    assert [t.get_text() for t in ax.get_xticklabels()] == keys
    assert len(lines_by_gid(ax, "class-information-")) == 3
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[-1] == "bars: marginal bootstrap intervals (not a test of a difference)"
    with pytest.raises(ValueError, match=r"interval must have shape \(2, 3, 3\)"):
        figure_information_by_class(information, interval[0])
    with pytest.raises(ValueError, match="grid_keys"):
        figure_information_by_class(information, grid_keys=keys[:2])
    with pytest.raises(ValueError, match="information must have shape"):
        figure_information_by_class(information[:, 0])
