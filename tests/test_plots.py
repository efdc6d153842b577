"""Tests of iml.plots: Figures 1-4, reliability diagrams and the revealed experiments' figures,
rendered headless and inspected."""

import jax
import jax.numpy as jnp
import matplotlib.image
import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer

from iml.calibration import calibration_curve
from iml.grids import loss_family
from iml.plots import (
    figure1_calibration_curves,
    figure2_theoretical_curves,
    figure3_loss_calibration,
    figure4_loss_corrected,
    figure_cost_bounds,
    figure_information_by_weight,
    figure_metric_vs_size,
    figure_value_matrix,
    reliability_by_class,
    reliability_diagram,
    save_figure,
)
from iml.sbr import simulate_gaussian_scores

BETAS = (0.5, 0.9, 0.99)
N = 2000


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


def _bins_with_events(scores, labels):
    curve = calibration_curve(scores, labels, n_bins=10, strategy="quantile")
    rate = np.asarray(curve.event_rate)
    return int(np.sum(np.isfinite(rate) & (rate > 0)))


def _line(ax, gid):
    (line,) = [line for line in ax.get_lines() if line.get_gid() == gid]
    return line


def _collection(ax, gid):
    (coll,) = [c for c in ax.collections if c.get_gid() == gid]
    return coll


def _floor(ax):
    (line,) = [line for line in ax.get_lines() if line.get_gid() == "floor"]
    return float(line.get_ydata()[0])


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
    curves = _lines(ax, "data-")
    assert [c.get_gid() for c in curves] == ["data-0.5", "data-0.9", "data-0.99"]
    for beta, curve in zip(BETAS, curves, strict=True):
        assert len(curve.get_xdata()) == _bins_with_events(scores[beta], labels)
        floor = _line(ax, f"floor-{beta}")
        assert len(curve.get_xdata()) + len(floor.get_xdata()) == 10
    diagonal = _diagonal(ax)
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
        assert len(_collection(ax, f"interval-{beta}").get_segments()) == 10
        assert not [c for c in ax.collections if c.get_gid() == f"interval-x-{beta}"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "95% Clopper-Pearson interval" in legend
    (ax,) = figure1_calibration_curves(scores, labels, confidence=0.9, n_bootstrap=10).axes
    for beta in BETAS:
        (x,) = _line(ax, f"data-{beta}").get_xdata()[:1]
        horizontal = _collection(ax, f"interval-x-{beta}").get_segments()
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
    floor = _floor(ax)
    assert ax.get_ylim()[0] < floor  # floor markers are seen whole
    for beta in scores:
        points = _line(ax, f"data-{beta}")
        floor_markers = _line(ax, f"floor-{beta}")
        segments = _collection(ax, f"interval-{beta}").get_segments()
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
    assert [line.get_gid() for line in _lines(ax, "data-")] == ["data-0.9999991", "data-0.9999992"]
    assert len(_lines(ax, "theory-0.999999")) == 2


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
    fig = reliability_diagram(scores[0.9], labels, n_bins=10, ci=0.9, n_bootstrap=10)
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


# ----------------------------------------------------------------------------------------------
# Smooth reliability diagrams (Blasiok & Nakkiran 2023)
# ----------------------------------------------------------------------------------------------


def _line(ax, gid):
    """The one line with exactly this gid."""
    (line,) = [line for line in ax.get_lines() if line.get_gid() == gid]
    return line


def _drawn(line):
    """The points of a smooth curve that are drawn (NaN marks the undrawn range)."""
    x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    return x[np.isfinite(y)], y[np.isfinite(y)]


def test_smooth_figure_draws_a_curve_band_and_density_per_beta(data):
    from iml.calibration import beta_key, smooth_ece
    from iml.plots import figure_smooth_calibration

    scores, labels = data
    top, bottom = figure_smooth_calibration(scores, labels, n_bootstrap=20).axes
    _diagonal(top)
    assert top.get_xscale() == "linear" and top.get_xlim() == (0.0, 1.0)
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    for beta in BETAS:
        key = beta_key(beta)
        curve = _line(top, f"smooth-{key}")
        _line(bottom, f"density-{key}")
        assert [c for c in top.collections if c.get_gid() == f"band-{key}"]
        x, y = _drawn(curve)
        assert x.size > 100 and np.all((y >= 0) & (y <= 1))
        ece = float(smooth_ece(scores[beta], labels).ece)
        assert f"β = {beta:g}: smECE {ece:.3f}" in legend
    # The raw scores of the heaviest weight lie far above their event rates.
    x, y = _drawn(_line(top, f"smooth-{beta_key(0.99)}"))
    assert np.mean(x - y) > 0.2


def test_smooth_figure_of_loss_corrected_scores_follows_the_diagonal(data):
    from iml.calibration import beta_key
    from iml.plots import figure_smooth_calibration

    scores, labels = data
    top, _ = figure_smooth_calibration(scores, labels, corrected=True, ci=None).axes
    assert "loss-corrected" in top.get_title()
    for beta in BETAS:
        curve = _line(top, f"smooth-{beta_key(beta)}")
        assert not [c for c in top.collections if c.get_gid() == f"band-{beta_key(beta)}"]
        x, y = _drawn(curve)
        assert np.median(np.abs(y - x)) < 0.05


def test_smooth_reliability_diagram_shows_the_smooth_ece_and_bandwidth(data):
    from iml.calibration import smooth_ece
    from iml.plots import smooth_reliability_diagram

    scores, labels = data
    fig = smooth_reliability_diagram(scores[0.9], labels, n_bootstrap=20, title="beta 0.9")
    top, bottom = fig.axes
    _diagonal(top)
    curve = _line(top, "smooth-data")
    assert _drawn(curve)[0].size > 100
    assert _line(bottom, "density-data") and top.get_title() == "beta 0.9"
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
        np.testing.assert_allclose(_line(axes[j], f"raw-{j}").get_ydata(), curve.event_rate, 1e-6)
        assert _line(axes[j], f"corrected-{j}").get_xdata().max() < curve.mean_score.max()
    uniform = reliability_by_class(scores, labels, n_bins=5)
    curve = calibration_curve(scores[:, 0].astype(np.float32), labels == 0, n_bins=5,
                              strategy="uniform")  # fmt: skip
    np.testing.assert_allclose(_line(uniform.axes[0], "raw-0").get_xdata(),
                               curve.mean_score[np.isfinite(curve.mean_score)], 1e-6)  # fmt: skip
    with pytest.raises(ValueError, match="class_names has 2 names for 7 classes"):
        reliability_by_class(scores, labels, class_names=["a", "b"])
    with pytest.raises(ValueError, match="corrected must have the shape"):
        reliability_by_class(scores, labels, corrected=scores[:, :3])


def test_figures_of_a_focal_loss_use_its_own_rule_and_name_alpha():
    rng = np.random.default_rng(3)
    gamma = rng.beta(0.6, 2.0, 20_000)
    labels = (rng.random(gamma.size) < gamma).astype(np.int32)
    family = loss_family("focal", gamma=2.0)
    scores = np.asarray(family(0.9).optimal_score(jnp.asarray(gamma, jnp.float32)))
    fig2 = figure2_theoretical_curves([0.9], loss=family)
    theory = _line(fig2.axes[0], "theory-0.9")
    np.testing.assert_allclose(
        theory.get_xdata(), family(0.9).optimal_score(jnp.asarray(theory.get_ydata())), rtol=1e-5
    )
    assert next(t.get_text() for t in fig2.axes[0].get_legend().get_texts()) == "α = 0.9"
    # Scores optimal for the focal loss, corrected by its inverse, lie on the diagonal.
    fig4 = figure4_loss_corrected({0.9: scores}, labels, n_bins=10, loss=family)
    data = _line(fig4.axes[0], "data-0.9")
    np.testing.assert_allclose(data.get_ydata(), data.get_xdata(), rtol=0.15, atol=0.01)
    # ... while the beta-weighted log loss's inverse, the wrong one, does not.
    wrong = _line(figure4_loss_corrected({0.9: scores}, labels, n_bins=10).axes[0], "data-0.9")
    assert np.max(np.abs(wrong.get_ydata() - wrong.get_xdata())) > 0.05


# ----------------------------------------------------------------------------------------------
# Revealed experiments across class weights
# ----------------------------------------------------------------------------------------------


def _logit(p):
    p = np.asarray(p, dtype=float)
    return np.log(p) - np.log1p(-p)


def _segments(ax, gid):
    """``(x, low, high)`` of each vertical segment of the collection ``gid``, in order."""
    segments = _collection(ax, gid).get_segments()
    return np.asarray([[s[0, 0], s[0, 1], s[1, 1]] for s in segments]).T


def test_figure_information_by_weight_draws_each_model_and_its_interval():
    betas = [0.1, 0.5, 0.9, 0.99]
    information = [0.12, 0.2, 0.18, 0.05]
    interval = [[0.1, 0.17, 0.15, 0.03], [0.14, 0.23, 0.2, 0.07]]
    (ax,) = figure_information_by_weight(betas, information, interval).axes
    line = _line(ax, "information")
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
    np.testing.assert_array_equal(_collection(ax, "violations").get_offsets(), [[0, 2], [1, 3]])
    # the cycle 1 -> 3 -> 2 -> 1 passes the cells (k_i, k_{i+1}): (1, 3), (3, 2), (2, 1)
    cycle = _line(ax, "niac-cycle")
    assert list(zip(cycle.get_ydata(), cycle.get_xdata(), strict=True)) == [
        (1, 3), (3, 2), (2, 1), (1, 3)
    ]  # fmt: skip
    assert [t.get_text() for t in ax.get_yticklabels()] == keys
    # pairs may be given as a list, and no marks at all
    listed = figure_value_matrix(G, keys, [(2, 0), (3, 1)]).axes[0]
    np.testing.assert_array_equal(_collection(listed, "violations").get_offsets(), [[0, 2], [1, 3]])
    bare = figure_value_matrix(G, keys).axes[0]
    assert not [c for c in bare.collections if c.get_gid() == "violations"]
    assert not _lines(bare, "niac-cycle")
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
    np.testing.assert_allclose(_line(ax, "cost-lower").get_ydata(), lower)
    np.testing.assert_allclose(_segments(ax, "cost-interval")[1:], interval)
    np.testing.assert_allclose(_line(ax, "cost-reference").get_xdata(), [0.0])
    # where NIAC fails no costs fit: NaN bounds, and the figure says so
    (empty,) = figure_cost_bounds(betas, [np.nan] * 3, [np.nan] * 3).axes
    assert any("NIAC fails" in t.get_text() for t in empty.texts)
    with pytest.raises(ValueError, match="reference must be a model index"):
        figure_cost_bounds(betas, lower, upper, reference=3)
