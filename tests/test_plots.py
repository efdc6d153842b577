"""Tests of iml.plots: Figures 1-4, reliability diagrams, rendered headless and inspected."""

import jax
import matplotlib.image
import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer

from iml.calibration import calibration_curve
from iml.plots import (
    figure1_calibration_curves,
    figure2_theoretical_curves,
    figure3_loss_calibration,
    figure4_loss_corrected,
    figure_metric_vs_size,
    reliability_diagram,
    save_figure,
)
from iml.sbr import simulate_gaussian_scores

BETAS = (0.5, 0.9, 0.99)
N = 4000


@pytest.fixture(scope="module")
def data():
    """Scores of the same signals scored under three class weights (one shared label vector)."""
    scores = {}
    for beta in BETAS:
        s, y, _, _ = simulate_gaussian_scores(jax.random.key(0), N, prevalence=0.1, beta=beta)
        scores[beta] = np.asarray(s)
    return scores, np.asarray(y)


def _lines(ax, prefix):
    return [line for line in ax.get_lines() if (line.get_gid() or "").startswith(prefix)]


def _diagonal(ax):
    (line,) = _lines(ax, "diagonal")
    return line


def _drawn_points(scores, labels):
    curve = calibration_curve(scores, labels, n_bins=10, strategy="quantile")
    rate = np.asarray(curve.event_rate)
    return int(np.sum(np.isfinite(rate) & (rate > 0)))


def test_figure1_draws_one_log_log_curve_per_beta_with_the_diagonal(data):
    scores, labels = data
    fig = figure1_calibration_curves(scores, labels)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    curves = _lines(ax, "data-")
    assert [c.get_gid() for c in curves] == ["data-0.5", "data-0.9", "data-0.99"]
    for beta, curve in zip(BETAS, curves, strict=True):
        assert len(curve.get_xdata()) == _drawn_points(scores[beta], labels)
    diagonal = _diagonal(ax)
    np.testing.assert_allclose(diagonal.get_xdata(), diagonal.get_ydata())
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"β = 0.5", "β = 0.9", "β = 0.99", "45-degree line"} <= set(legend)
    # beta = 0.99 overscores: its points lie far below the diagonal (Proposition 2).
    x, y = curves[2].get_xdata(), curves[2].get_ydata()
    assert np.median(np.log10(x / y)) > 0.8


def test_figure1_error_bars_when_asked(data):
    scores, labels = data
    (ax,) = figure1_calibration_curves(scores, labels, ci=0.9, n_bootstrap=20).axes
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 3
    assert all(c.has_yerr and c.has_xerr for c in bars)
    (ax,) = figure1_calibration_curves(scores, labels).axes
    assert not [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def test_figure2_draws_the_theoretical_curves_of_proposition_2():
    (ax,) = figure2_theoretical_curves(BETAS).axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    curves = _lines(ax, "theory-")
    assert len(curves) == 3
    gamma = np.asarray(curves[1].get_ydata(), dtype=float)
    expected = 0.9 * gamma / (0.9 * gamma + 0.1 * (1 - gamma))
    np.testing.assert_allclose(curves[1].get_xdata(), expected, rtol=1e-5)
    np.testing.assert_allclose(curves[0].get_xdata(), curves[0].get_ydata(), rtol=1e-5)
    assert _diagonal(ax) is not None


def test_figure3_overlays_data_and_theory(data):
    scores, labels = data
    (ax,) = figure3_loss_calibration(scores, labels).axes
    assert len(_lines(ax, "data-")) == 3 and len(_lines(ax, "theory-")) == 3
    assert _diagonal(ax) is not None
    # The simulated algorithm is loss-calibrated: data points lie near their theory curve.
    data_curve, theory = _lines(ax, "data-0.99")[0], _lines(ax, "theory-0.99")[0]
    tx, ty = np.asarray(theory.get_xdata()), np.asarray(theory.get_ydata())
    x, y = np.asarray(data_curve.get_xdata()), np.asarray(data_curve.get_ydata())
    predicted = np.interp(np.log(x), np.log(tx), np.log(ty))
    assert np.median(np.abs(np.log(y) - predicted)) < 0.5


def test_figure4_loss_corrected_curves_lie_on_the_diagonal(data):
    scores, labels = data
    (ax,) = figure4_loss_corrected(scores, labels).axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    curves = _lines(ax, "data-")
    assert len(curves) == 3
    for curve in curves:
        x, y = np.asarray(curve.get_xdata()), np.asarray(curve.get_ydata())
        assert np.median(np.abs(np.log10(x / y))) < 0.2


def test_reliability_diagram_has_curve_and_histogram(data):
    scores, labels = data
    fig = reliability_diagram(scores[0.9], labels, n_bins=10, ci=0.9, n_bootstrap=20)
    top, bottom = fig.axes
    assert top.get_xscale() == "linear"
    assert _diagonal(top) is not None
    assert [c for c in top.containers if isinstance(c, ErrorbarContainer)]
    heights = [p.get_height() for p in bottom.patches]
    assert len(heights) == 10 and sum(heights) == N


def test_figure_metric_vs_size_draws_each_method_per_panel():
    rng = np.random.default_rng(0)
    values = {m: {"ece": rng.random((3, 4)), "brier": rng.random((3, 4))} for m in ("a", "b")}
    fig = figure_metric_vs_size([50, 500, 5000], values, metrics=("ece", "brier"))
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert len(_lines(ax, "method-")) == 2 and ax.get_xscale() == "log"
        np.testing.assert_allclose(
            _lines(ax, "method-a")[0].get_ydata(),
            np.median(values["a"][ax.get_title()], axis=1),
        )


def test_save_figure_writes_readable_png_and_pdf(data, tmp_path):
    scores, labels = data
    paths = save_figure(figure3_loss_calibration(scores, labels), tmp_path / "sub" / "fig3")
    png, pdf = paths
    assert png.name == "fig3.png" and pdf.name == "fig3.pdf"
    assert png.stat().st_size > 20_000
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] > 500 and image.shape[1] > 500
    assert image.std() > 0.05  # not a blank canvas
    assert pdf.read_bytes()[:4] == b"%PDF"


def test_bad_input_raises_value_error(data, tmp_path):
    scores, labels = data
    with pytest.raises(ValueError, match="beta"):
        figure1_calibration_curves({1.5: scores[0.5]}, labels)
    with pytest.raises(ValueError, match="beta"):
        figure2_theoretical_curves([0.0, 0.5])
    with pytest.raises(ValueError, match="empty"):
        figure3_loss_calibration({}, labels)
    with pytest.raises(ValueError, match="labels"):
        figure1_calibration_curves({0.5: scores[0.5]}, labels + 1)
    with pytest.raises(ValueError, match="NaN"):
        figure1_calibration_curves({0.5: np.full(N, np.nan)}, labels)
    with pytest.raises(ValueError, match="probabilities"):
        figure4_loss_corrected({0.5: np.full(N, np.nan)}, labels)
    with pytest.raises(ValueError, match="format"):
        save_figure(figure2_theoretical_curves([0.5]), tmp_path / "x", formats=("bmp",))
