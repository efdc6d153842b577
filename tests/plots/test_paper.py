"""Tests of iml.plots.paper: the paper's Figures 1-4, rendered headless and inspected."""

import jax.numpy as jnp
import numpy as np
import pytest
from _figure_helpers import (
    BETAS,
    N,
    collection_by_gid,
    diagonal_line,
    floor_of,
    line_by_gid,
    lines_by_gid,
)

from iml.calibration import calibration_curve
from iml.grids import loss_family
from iml.plots import (
    figure1_calibration_curves,
    figure2_theoretical_curves,
    figure3_loss_calibration,
    figure4_loss_corrected,
    save_figure,
)


def _bins_with_events(scores, labels):
    curve = calibration_curve(scores, labels, n_bins=10, strategy="quantile")
    rate = np.asarray(curve.event_rate)
    return int(np.sum(np.isfinite(rate) & (rate > 0)))


@pytest.fixture(scope="module")
def sparse():
    """Scores whose lower half holds no positive (as on a nearly separable task), two betas."""
    rng = np.random.default_rng(1)
    a = np.sort(rng.uniform(0.001, 0.999, 1000))
    labels = np.where(np.arange(1000) >= 500, rng.random(1000) < a, 0).astype(np.int32)
    return {0.5: a, 0.9: np.sqrt(a)}, labels


def test_figure1_draws_one_log_log_curve_per_beta_with_the_diagonal(data):
    scores, labels = data
    fig = figure1_calibration_curves(scores, labels)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    curves = lines_by_gid(ax, "data-")
    assert [c.get_gid() for c in curves] == ["data-0.5", "data-0.9", "data-0.99"]
    for beta, curve in zip(BETAS, curves, strict=True):
        assert len(curve.get_xdata()) == _bins_with_events(scores[beta], labels)
        floor = line_by_gid(ax, f"floor-{beta}")
        assert len(curve.get_xdata()) + len(floor.get_xdata()) == 10
    diagonal = diagonal_line(ax)
    np.testing.assert_allclose(diagonal.get_xdata(), diagonal.get_ydata())
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"β = 0.5", "β = 0.9", "β = 0.99", "45-degree line"} <= set(legend)
    # beta = 0.99 overscores: its points lie far below the diagonal (Proposition 2).
    x, y = curves[2].get_xdata(), curves[2].get_ydata()
    assert np.median(np.log10(x / y)) > 0.8


def test_figure1_draws_binomial_intervals_by_default_and_bootstrap_bars_when_asked(data):
    scores, labels = data
    (ax,) = figure1_calibration_curves(scores, labels).axes
    for beta in BETAS:
        assert len(collection_by_gid(ax, f"interval-{beta}").get_segments()) == 10
        assert not [c for c in ax.collections if c.get_gid() == f"interval-x-{beta}"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "95% Clopper-Pearson interval" in legend
    (ax,) = figure1_calibration_curves(scores, labels, confidence=0.9, n_bootstrap=10).axes
    for beta in BETAS:
        (x,) = line_by_gid(ax, f"data-{beta}").get_xdata()[:1]
        horizontal = collection_by_gid(ax, f"interval-x-{beta}").get_segments()
        assert len(horizontal) == 10
        assert horizontal[0][0, 0] <= x <= horizontal[0][1, 0]
    assert "90% bootstrap interval" in [t.get_text() for t in ax.get_legend().get_texts()]


@pytest.mark.parametrize(
    "figure", [figure1_calibration_curves, figure3_loss_calibration, figure4_loss_corrected]
)
def test_every_bin_is_drawn_and_bins_without_events_sit_at_the_floor(sparse, figure):
    from scipy.stats import binomtest

    scores, labels = sparse
    (ax,) = figure(scores, labels).axes
    floor = floor_of(ax)
    assert ax.get_ylim()[0] < floor  # floor markers are seen whole
    for beta in scores:
        points = line_by_gid(ax, f"data-{beta}")
        floor_markers = line_by_gid(ax, f"floor-{beta}")
        segments = collection_by_gid(ax, f"interval-{beta}").get_segments()
        n_points, n_floor = len(points.get_xdata()), len(floor_markers.get_xdata())
        # About 100 observations per decile; the five lower deciles hold no positive.
        assert n_floor == 5 and n_points == 5 and len(segments) == 10
        assert np.all(floor_markers.get_ydata() == floor)
        assert floor_markers.get_marker() == "v" and floor_markers.get_linestyle() == "None"
        count = np.asarray(calibration_curve(scores[beta], labels).count)
        # Bars in bin order: the floor bins' bars run from the floor to the exact upper bound.
        for k, ((x0, lo), (x1, hi)) in enumerate(segments[:5]):
            assert x0 == x1 and lo == floor
            np.testing.assert_allclose(hi, 1 - 0.025 ** (1 / count[k]), rtol=1e-5)
        np.testing.assert_allclose([s[0, 0] for s in segments[:5]], floor_markers.get_xdata())
        # Bins with events: the bar is the Clopper-Pearson interval and holds the point.
        y = np.asarray(points.get_ydata())
        for k, ((x0, lo), (_, hi)) in enumerate(segments[5:]):
            assert x0 == points.get_xdata()[k] and lo <= y[k] <= hi
            n = int(count[5 + k])
            expected = binomtest(round(float(y[k]) * n), n).proportion_ci(0.95, method="exact")
            np.testing.assert_allclose([lo, hi], [max(expected.low, floor), expected.high],
                                       rtol=3e-4)  # fmt: skip
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend.count("no event in bin (bar: 95% upper bound)") == 1


def test_gids_use_the_exact_beta_key():
    rng = np.random.default_rng(2)
    a = rng.uniform(0.01, 0.99, 400)
    labels = (rng.random(400) < a).astype(np.int32)
    close = {0.9999991: a, 0.9999992: a}  # equal under f"{beta:g}"
    (ax,) = figure3_loss_calibration(close, labels).axes
    assert [line.get_gid() for line in lines_by_gid(ax, "data-")] == [
        "data-0.9999991",
        "data-0.9999992",
    ]
    assert len(lines_by_gid(ax, "theory-0.999999")) == 2


def test_figure2_draws_the_theoretical_curves_of_proposition_2():
    (ax,) = figure2_theoretical_curves(BETAS).axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    curves = lines_by_gid(ax, "theory-")
    assert len(curves) == 3
    gamma = np.asarray(curves[1].get_ydata(), dtype=float)
    expected = 0.9 * gamma / (0.9 * gamma + 0.1 * (1 - gamma))
    np.testing.assert_allclose(curves[1].get_xdata(), expected, rtol=1e-5)
    np.testing.assert_allclose(curves[0].get_xdata(), curves[0].get_ydata(), rtol=1e-5)
    assert diagonal_line(ax) is not None


def test_figure3_overlays_data_and_theory(data):
    scores, labels = data
    (ax,) = figure3_loss_calibration(scores, labels).axes
    assert len(lines_by_gid(ax, "data-")) == 3 and len(lines_by_gid(ax, "theory-")) == 3
    assert diagonal_line(ax) is not None
    # The simulated algorithm is loss-calibrated: data points lie near their theory curve.
    data_curve, theory = lines_by_gid(ax, "data-0.99")[0], lines_by_gid(ax, "theory-0.99")[0]
    tx, ty = np.asarray(theory.get_xdata()), np.asarray(theory.get_ydata())
    x, y = np.asarray(data_curve.get_xdata()), np.asarray(data_curve.get_ydata())
    predicted = np.interp(np.log(x), np.log(tx), np.log(ty))
    assert np.median(np.abs(np.log(y) - predicted)) < 0.5


def test_figure4_loss_corrected_curves_lie_on_the_diagonal(data):
    scores, labels = data
    (ax,) = figure4_loss_corrected(scores, labels).axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    curves = lines_by_gid(ax, "data-")
    assert len(curves) == 3
    for curve in curves:
        x, y = np.asarray(curve.get_xdata()), np.asarray(curve.get_ydata())
        assert np.median(np.abs(np.log10(x / y))) < 0.2


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


@pytest.mark.slow
def test_figures_of_a_focal_loss_use_its_own_rule_and_name_alpha():
    rng = np.random.default_rng(3)
    gamma = rng.beta(0.6, 2.0, 20_000)
    labels = (rng.random(gamma.size) < gamma).astype(np.int32)
    family = loss_family("focal", gamma=2.0)
    scores = np.asarray(family(0.9).optimal_score(jnp.asarray(gamma, jnp.float32)))
    fig2 = figure2_theoretical_curves([0.9], loss=family)
    theory = line_by_gid(fig2.axes[0], "theory-0.9")
    np.testing.assert_allclose(
        theory.get_xdata(), family(0.9).optimal_score(jnp.asarray(theory.get_ydata())), rtol=1e-5
    )
    assert next(t.get_text() for t in fig2.axes[0].get_legend().get_texts()) == "α = 0.9"
    # Scores optimal for the focal loss, corrected by its inverse, lie on the diagonal.
    fig4 = figure4_loss_corrected({0.9: scores}, labels, n_bins=10, loss=family)
    data = line_by_gid(fig4.axes[0], "data-0.9")
    np.testing.assert_allclose(data.get_ydata(), data.get_xdata(), rtol=0.15, atol=0.01)
    # ... while the beta-weighted log loss's inverse, the wrong one, does not.
    wrong = line_by_gid(
        figure4_loss_corrected({0.9: scores}, labels, n_bins=10).axes[0], "data-0.9"
    )
    assert np.max(np.abs(wrong.get_ydata() - wrong.get_xdata())) > 0.05
