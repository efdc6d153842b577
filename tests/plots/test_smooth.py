"""Tests of iml.plots.smooth: smooth reliability diagrams (Blasiok & Nakkiran 2023)."""

import numpy as np
import pytest
from _figure_helpers import BETAS, N, diagonal_line, line_by_gid


def _drawn(line):
    """The points of a smooth curve that are drawn (NaN marks the undrawn range)."""
    x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    return x[np.isfinite(y)], y[np.isfinite(y)]


def test_smooth_figure_draws_a_curve_band_and_density_per_beta(data):
    from iml.calibration import beta_key, smooth_ece
    from iml.plots import figure_smooth_calibration

    scores, labels = data
    top, bottom = figure_smooth_calibration(scores, labels, n_bootstrap=20).axes
    diagonal_line(top)
    assert top.get_xscale() == "linear" and top.get_xlim() == (0.0, 1.0)
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    for beta in BETAS:
        key = beta_key(beta)
        curve = line_by_gid(top, f"smooth-{key}")
        line_by_gid(bottom, f"density-{key}")
        assert [c for c in top.collections if c.get_gid() == f"band-{key}"]
        x, y = _drawn(curve)
        assert x.size > 100 and np.all((y >= 0) & (y <= 1))
        ece = float(smooth_ece(scores[beta], labels).ece)
        assert f"β = {beta:g}: smECE {ece:.3f}" in legend
    # The raw scores of the heaviest weight lie far above their event rates.
    x, y = _drawn(line_by_gid(top, f"smooth-{beta_key(0.99)}"))
    assert np.mean(x - y) > 0.2


def test_smooth_figure_of_loss_corrected_scores_follows_the_diagonal(data):
    from iml.calibration import beta_key
    from iml.plots import figure_smooth_calibration

    scores, labels = data
    top, _ = figure_smooth_calibration(scores, labels, corrected=True, ci=None).axes
    assert "loss-corrected" in top.get_title()
    for beta in BETAS:
        curve = line_by_gid(top, f"smooth-{beta_key(beta)}")
        assert not [c for c in top.collections if c.get_gid() == f"band-{beta_key(beta)}"]
        x, y = _drawn(curve)
        assert np.median(np.abs(y - x)) < 0.05


def test_smooth_reliability_diagram_shows_the_smooth_ece_and_bandwidth(data):
    from iml.calibration import smooth_ece
    from iml.plots import smooth_reliability_diagram

    scores, labels = data
    fig = smooth_reliability_diagram(scores[0.9], labels, n_bootstrap=20, title="beta 0.9")
    top, bottom = fig.axes
    diagonal_line(top)
    curve = line_by_gid(top, "smooth-data")
    assert _drawn(curve)[0].size > 100
    assert line_by_gid(bottom, "density-data") and top.get_title() == "beta 0.9"
    result = smooth_ece(scores[0.9], labels)
    (label,) = [t.get_text() for t in top.get_legend().get_texts() if "smECE" in t.get_text()]
    assert label == f"smECE {float(result.ece):.3f} (σ = {float(result.bandwidth):.3f})"


def test_smooth_figures_reject_bad_input(data):
    from iml.plots import figure_smooth_calibration, smooth_reliability_diagram

    scores, labels = data
    with pytest.raises(ValueError, match="beta"):
        figure_smooth_calibration({1.5: scores[0.5]}, labels)
    with pytest.raises(ValueError, match="probabilities"):
        figure_smooth_calibration({0.5: np.full(N, np.nan)}, labels, corrected=True)
    with pytest.raises(ValueError, match="labels"):
        smooth_reliability_diagram(scores[0.5], labels + 1)
    with pytest.raises(ValueError, match="bandwidth"):
        smooth_reliability_diagram(scores[0.5], labels, bandwidth=0.0)
