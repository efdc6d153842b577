"""Tests of iml.plots.reliability: binned reliability diagrams, by class, and metrics by
calibration-set size."""

import numpy as np
import pytest
from _figure_helpers import N, diagonal_line, line_by_gid, lines_by_gid
from matplotlib.container import ErrorbarContainer

from iml.calibration import calibration_curve
from iml.plots import (
    figure_metric_vs_size,
    reliability_by_class,
    reliability_diagram,
)


def test_reliability_diagram_has_curve_and_histogram(data):
    scores, labels = data
    fig = reliability_diagram(scores[0.9], labels, n_bins=10, ci=0.9, n_bootstrap=10)
    top, bottom = fig.axes
    assert top.get_xscale() == "linear"
    assert diagonal_line(top) is not None
    assert [c for c in top.containers if isinstance(c, ErrorbarContainer)]
    heights = [p.get_height() for p in bottom.patches]
    assert len(heights) == 10 and sum(heights) == N


def test_figure_metric_vs_size_draws_each_method_per_panel():
    rng = np.random.default_rng(0)
    values = {m: {"ece": rng.random((3, 4)), "brier": rng.random((3, 4))} for m in ("a", "b")}
    fig = figure_metric_vs_size([50, 500, 5000], values, metrics=("ece", "brier"))
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert len(lines_by_gid(ax, "method-")) == 2 and ax.get_xscale() == "log"
        np.testing.assert_allclose(
            lines_by_gid(ax, "method-a")[0].get_ydata(),
            np.median(values["a"][ax.get_title()], axis=1),
        )


@pytest.mark.slow
def test_reliability_by_class_draws_each_class_against_its_indicator():
    rng = np.random.default_rng(0)
    scores = rng.dirichlet(np.ones(7), size=500)
    labels = np.array([rng.choice(7, p=p) for p in scores])
    fig = reliability_by_class(scores, labels, corrected=scores**2, n_bins=5, title="t",
                               strategy="quantile")  # fmt: skip
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert len(axes) == 7 and len(fig.axes) == 10  # a 2 x 5 grid, 3 panels off
    for j in (0, 6):
        curve = calibration_curve(scores[:, j].astype(np.float32), labels == j, n_bins=5)
        np.testing.assert_allclose(
            line_by_gid(axes[j], f"raw-{j}").get_ydata(), curve.event_rate, 1e-6
        )
        assert line_by_gid(axes[j], f"corrected-{j}").get_xdata().max() < curve.mean_score.max()
    uniform = reliability_by_class(scores, labels, n_bins=5)
    curve = calibration_curve(scores[:, 0].astype(np.float32), labels == 0, n_bins=5,
                              strategy="uniform")  # fmt: skip
    np.testing.assert_allclose(line_by_gid(uniform.axes[0], "raw-0").get_xdata(),
                               curve.mean_score[np.isfinite(curve.mean_score)], 1e-6)  # fmt: skip
    with pytest.raises(ValueError, match="class_names has 2 names for 7 classes"):
        reliability_by_class(scores, labels, class_names=["a", "b"])
    with pytest.raises(ValueError, match="corrected must have the shape"):
        reliability_by_class(scores, labels, corrected=scores[:, :3])
