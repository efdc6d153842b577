"""The paper's Figures 1-4 and reliability diagrams (matplotlib: the only plotting module).

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot, so nothing
opens a window and nothing depends on the backend; :func:`save_figure` writes it to files.

* :func:`figure1_calibration_curves`: decile calibration curves on log-log axes, one per
  ``beta``, with the 45-degree line (Figure 1; optional bootstrap error bars).
* :func:`figure2_theoretical_curves`: the theoretical curves of a loss-calibrated algorithm,
  rate ``gamma`` against score ``c^beta(gamma)`` (Figure 2, Proposition 2).
* :func:`figure3_loss_calibration`: both overlaid: the loss calibration curve (Figure 3).
* :func:`figure4_loss_corrected`: calibration curves of the loss-corrected scores
  ``(c^beta)^{-1}(a)`` (Figure 4, Corollary 1).
* :func:`reliability_diagram`: calibration curve above a histogram of the scores.
* :func:`figure_metric_vs_size`: metrics of recalibration methods against the size of the
  calibration set (``experiments/recalibration_vs_size.py``).

Lines that tests and readers look for carry a ``gid``: ``"diagonal"`` for the 45-degree line,
``"data-<beta>"`` for a binned curve and ``"theory-<beta>"`` for a theoretical one.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from iml._io import atomic_write_bytes
from iml.calibration import CalibrationCurve, calibration_curve
from iml.scoring import loss_corrected_score, optimal_score

ArrayLike = jax.typing.ArrayLike

__all__ = [
    "figure1_calibration_curves",
    "figure2_theoretical_curves",
    "figure3_loss_calibration",
    "figure4_loss_corrected",
    "figure_metric_vs_size",
    "reliability_diagram",
    "save_figure",
]

# Smallest value drawn on log axes (bins with rate 0 cannot be drawn there and are left out).
_FLOOR = 1e-5
_N_BOOTSTRAP = 200


def _check_betas(betas: Sequence[float], name: str = "betas") -> list[float]:
    out = [float(b) for b in betas]
    if not out:
        raise ValueError(f"{name} is empty")
    for b in out:
        if np.isnan(b) or not 0.0 < b < 1.0:
            raise ValueError(f"every beta in {name} must lie strictly between 0 and 1, got {b}")
    return out


def _labels_for(labels: ArrayLike | Mapping[float, ArrayLike], beta: float) -> ArrayLike:
    if isinstance(labels, Mapping):
        if beta not in labels:
            raise ValueError(f"labels has no entry for beta = {beta}")
        return labels[beta]
    return labels


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(x) for x in np.linspace(0.0, 0.85, n)]


def _new_figure(figsize: tuple[float, float] = (5.0, 5.0)) -> tuple[Figure, Axes]:
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def _log_axes(ax: Axes, low: float, xlabel: str, ylabel: str) -> None:
    """Log-log axes from ``low`` to 1 with the 45-degree line."""
    low = max(min(low, 0.5), _FLOOR)
    lo = 10.0 ** np.floor(np.log10(low))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([lo, 1.0], [lo, 1.0], color="black", lw=1.0, label="45-degree line", gid="diagonal")
    ax.set_xlim(lo, 1.0)
    ax.set_ylim(lo, 1.0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_aspect("equal")
    ax.grid(True, which="major", alpha=0.3)


def _curve(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int,
    ci: float | None,
    seed: int,
    n_bootstrap: int = _N_BOOTSTRAP,
) -> CalibrationCurve:
    if ci is None:
        return calibration_curve(scores, labels, n_bins=n_bins, strategy="quantile")
    return calibration_curve(
        scores,
        labels,
        n_bins=n_bins,
        strategy="quantile",
        n_bootstrap=n_bootstrap,
        key=jax.random.key(seed),
        confidence=ci,
    )


def _draw_curve(ax: Axes, curve: CalibrationCurve, color, label: str, gid: str) -> float:
    """Draw a binned curve (points joined by lines); returns the smallest value drawn."""
    x = np.asarray(curve.mean_score, dtype=float)
    y = np.asarray(curve.event_rate, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = x[ok], y[ok]
    if curve.event_rate_interval is not None:
        yi = np.asarray(curve.event_rate_interval, dtype=float)[:, ok]
        xi = np.asarray(curve.mean_score_interval, dtype=float)[:, ok]
        yerr = np.stack([y - np.maximum(yi[0], _FLOOR), np.maximum(yi[1] - y, 0.0)])
        xerr = np.stack([x - np.maximum(xi[0], _FLOOR), np.maximum(xi[1] - x, 0.0)])
        ax.errorbar(
            x,
            y,
            xerr=np.maximum(xerr, 0.0),
            yerr=np.maximum(yerr, 0.0),
            fmt="o-",
            color=color,
            ms=4,
            capsize=2,
            label=label,
            gid=gid,
        )
    else:
        ax.plot(x, y, "o-", color=color, ms=4, label=label, gid=gid)
    return float(min(x.min(initial=1.0), y.min(initial=1.0)))


def figure1_calibration_curves(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    n_bins: int = 10,
    ci: float | None = None,
    n_bootstrap: int = _N_BOOTSTRAP,
) -> Figure:
    """Figure 1: binned calibration curves on log-log axes, one per class weight ``beta``.

    Args:
      scores_by_beta: ``beta -> `` positive-class scores ``[N]`` of the model trained with it.
      labels: ``[N]`` labels shared by all, or ``beta -> labels``.
      n_bins: quantile bins (10: the paper's deciles).
      ci: bootstrap confidence level for error bars (e.g. ``0.95``); ``None`` for none.
      n_bootstrap: bootstrap replicates behind the error bars.

    Returns:
      The figure: x the bin's mean score, y its event rate, and the 45-degree line.
    """
    betas = _check_betas(list(scores_by_beta), "scores_by_beta")
    fig, ax = _new_figure()
    low = 1.0
    for i, (beta, color) in enumerate(zip(betas, _colors(len(betas)), strict=True)):
        curve = _curve(scores_by_beta[beta], _labels_for(labels, beta), n_bins, ci, i, n_bootstrap)
        low = min(low, _draw_curve(ax, curve, color, f"β = {beta:g}", f"data-{beta:g}"))
    _log_axes(ax, low, "confidence score (bin mean)", "event rate")
    ax.set_title("Calibration curves by class weight")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def _theory_points(beta: float, low: float, n_points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """``(c^beta(gamma), gamma)`` along a log grid of posteriors."""
    gamma = jnp.logspace(np.log10(low) - 2.0, 0.0, n_points)[:-1]
    return np.asarray(optimal_score(gamma, beta)), np.asarray(gamma)


def figure2_theoretical_curves(betas: Sequence[float], low: float = 1e-3) -> Figure:
    """Figure 2: the calibration curves a loss-calibrated algorithm would show (Proposition 2).

    For each ``beta`` the curve of rate ``gamma`` against score ``c^beta(gamma)`` (so its inverse
    ``(c^beta)^{-1}`` as a function of the score), on log-log axes with the 45-degree line.

    Args:
      betas: class weights in ``(0, 1)``.
      low: the smallest score and rate shown.
    """
    betas = _check_betas(betas)
    if not 0.0 < low < 1.0:
        raise ValueError(f"low must lie in (0, 1), got {low}")
    fig, ax = _new_figure()
    for beta, color in zip(betas, _colors(len(betas)), strict=True):
        a, gamma = _theory_points(beta, low)
        ax.plot(a, gamma, "-", color=color, lw=1.5, label=f"β = {beta:g}", gid=f"theory-{beta:g}")
    _log_axes(ax, low, "confidence score", "event rate")
    ax.set_title("Theoretical calibration curves")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def figure3_loss_calibration(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    n_bins: int = 10,
    ci: float | None = None,
    n_bootstrap: int = _N_BOOTSTRAP,
) -> Figure:
    """Figure 3: the loss calibration curve: data (points) over theory (lines), per ``beta``.

    An algorithm is loss-calibrated (Definition 2) when each binned curve follows its
    theoretical curve ``gamma -> c^beta(gamma)``.

    Args:
      scores_by_beta, labels, n_bins, ci, n_bootstrap: as in :func:`figure1_calibration_curves`.
    """
    betas = _check_betas(list(scores_by_beta), "scores_by_beta")
    fig, ax = _new_figure()
    low = 1.0
    for i, (beta, color) in enumerate(zip(betas, _colors(len(betas)), strict=True)):
        curve = _curve(scores_by_beta[beta], _labels_for(labels, beta), n_bins, ci, i, n_bootstrap)
        low = min(low, _draw_curve(ax, curve, color, f"β = {beta:g} (data)", f"data-{beta:g}"))
    for beta, color in zip(betas, _colors(len(betas)), strict=True):
        a, gamma = _theory_points(beta, low)
        ax.plot(a, gamma, "--", color=color, lw=1.2, label=f"β = {beta:g} (theory)",
                gid=f"theory-{beta:g}")  # fmt: skip
    _log_axes(ax, low, "confidence score", "event rate")
    ax.set_title("Loss calibration: data and theory")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def figure4_loss_corrected(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    n_bins: int = 10,
    ci: float | None = None,
    n_bootstrap: int = _N_BOOTSTRAP,
) -> Figure:
    """Figure 4: calibration curves of the loss-corrected scores ``(c^beta)^{-1}(a)``.

    Each ``beta``'s scores are corrected by Corollary 1 (eq. ``transformation``) before binning;
    calibrated curves lie on the 45-degree line (Proposition 5).

    Args:
      scores_by_beta, labels, n_bins, ci, n_bootstrap: as in :func:`figure1_calibration_curves`.
    """
    betas = _check_betas(list(scores_by_beta), "scores_by_beta")
    fig, ax = _new_figure()
    low = 1.0
    for i, (beta, color) in enumerate(zip(betas, _colors(len(betas)), strict=True)):
        a = np.asarray(scores_by_beta[beta], dtype=float)
        if a.size == 0 or np.isnan(a).any() or (a < 0).any() or (a > 1).any():
            raise ValueError(f"scores for beta = {beta} must be non-empty probabilities in [0, 1]")
        corrected = loss_corrected_score(jnp.asarray(a, jnp.float32), beta)
        curve = _curve(corrected, _labels_for(labels, beta), n_bins, ci, i, n_bootstrap)
        low = min(low, _draw_curve(ax, curve, color, f"β = {beta:g}", f"data-{beta:g}"))
    _log_axes(ax, low, "loss-corrected confidence score (bin mean)", "event rate")
    ax.set_title("Loss-corrected scores")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def reliability_diagram(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    strategy: str = "uniform",
    ci: float | None = None,
    title: str | None = None,
    n_bootstrap: int = _N_BOOTSTRAP,
) -> Figure:
    """A reliability diagram: the calibration curve (linear axes) above a histogram of scores.

    Args:
      scores: ``[N]`` positive-class scores.
      labels: ``[N]`` labels in ``{0, 1}``.
      n_bins: bins of the curve and of the histogram.
      strategy: ``"uniform"`` or ``"quantile"`` bins for the curve.
      ci: bootstrap confidence level for error bars, or ``None``.
      title: optional title.
      n_bootstrap: bootstrap replicates behind the error bars.
    """
    if ci is None:
        curve = calibration_curve(scores, labels, n_bins=n_bins, strategy=strategy)
    else:
        curve = calibration_curve(
            scores,
            labels,
            n_bins=n_bins,
            strategy=strategy,
            n_bootstrap=n_bootstrap,
            key=jax.random.key(0),
            confidence=ci,
        )
    fig = Figure(figsize=(5.0, 6.0), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    top.plot([0, 1], [0, 1], color="black", lw=1.0, label="45-degree line", gid="diagonal")
    x = np.asarray(curve.mean_score, dtype=float)
    y = np.asarray(curve.event_rate, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    if curve.event_rate_interval is not None:
        yi = np.asarray(curve.event_rate_interval, dtype=float)[:, ok]
        yerr = np.maximum(np.stack([y[ok] - yi[0], yi[1] - y[ok]]), 0.0)
        top.errorbar(x[ok], y[ok], yerr=yerr, fmt="o-", ms=4, capsize=2, label="binned", gid="data")
    else:
        top.plot(x[ok], y[ok], "o-", ms=4, label="binned", gid="data")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.set_ylabel("event rate")
    top.legend(loc="upper left", fontsize="small")
    top.grid(True, alpha=0.3)
    if title:
        top.set_title(title)
    bottom.hist(np.asarray(scores, dtype=float), bins=np.linspace(0, 1, n_bins + 1), color="0.5")
    bottom.set_xlabel("confidence score")
    bottom.set_ylabel("count")
    return fig


def figure_metric_vs_size(
    sizes: Sequence[int],
    values: Mapping[str, Mapping[str, ArrayLike]],
    metrics: Sequence[str] = ("ece", "brier", "log_loss"),
    reference: Mapping[str, float] | None = None,
) -> Figure:
    """Metrics of several methods against the calibration-set size, one panel per metric.

    Args:
      sizes: calibration-set sizes ``[n_sizes]`` (a log axis).
      values: ``method -> metric -> [n_sizes, n_replicates]`` values; each method is drawn as its
        median over replicates with the interquartile range shaded.
      metrics: which metrics, one panel each (log y axis).
      reference: optional ``metric -> value`` drawn as a dotted horizontal line (e.g. the
        metric of the true posteriors).
    """
    if not values:
        raise ValueError("values is empty")
    sizes = np.asarray(sizes, dtype=float)
    if sizes.ndim != 1 or sizes.size == 0 or (sizes <= 0).any():
        raise ValueError("sizes must be a non-empty list of positive sizes")
    from matplotlib import colormaps
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig = Figure(figsize=(4.2 * len(metrics), 4.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(metrics)))
    palette = colormaps["tab10"]
    for ax, metric in zip(axes, metrics, strict=True):
        for i, (name, by_metric) in enumerate(values.items()):
            if metric not in by_metric:
                raise ValueError(f"values[{name!r}] has no metric {metric!r}")
            v = np.asarray(by_metric[metric], dtype=float).reshape(sizes.size, -1)
            analytic = name == "loss correction"
            color = "tab:red" if analytic else palette(i % 10 if i % 10 != 3 else 9)
            ax.plot(sizes, np.nanmedian(v, axis=1), "-", marker="o", ms=3, color=color,
                    lw=2.5 if analytic else 1.2, zorder=3 if analytic else 2, label=name,
                    gid=f"method-{name}")  # fmt: skip
            lo, hi = np.nanquantile(v, 0.25, axis=1), np.nanquantile(v, 0.75, axis=1)
            ax.fill_between(sizes, lo, hi, color=color, alpha=0.15, lw=0)
        if reference is not None and metric in reference:
            ax.axhline(reference[metric], color="black", ls=":", lw=1.2, label="true posterior",
                       zorder=4)  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("calibration-set size")
        ax.set_title(metric.replace("_", " "))
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 4),
               fontsize="small")  # fmt: skip
    return fig


def save_figure(
    fig: Figure, path_without_suffix: str | Path, formats: Sequence[str] = ("png", "pdf")
) -> list[Path]:
    """Write ``fig`` as ``path.<fmt>`` for each format (creating the folder); returns the paths.

    Each file is written atomically: a reader finds the previous figure or the whole new one.
    """
    if not formats:
        raise ValueError("formats is empty")
    base = Path(path_without_suffix)
    base.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        if fmt not in ("png", "pdf", "svg"):
            raise ValueError(f"unknown figure format {fmt!r}: use png, pdf or svg")
        path = base.with_name(f"{base.name}.{fmt}")
        buffer = io.BytesIO()
        fig.savefig(buffer, format=fmt, dpi=150)
        atomic_write_bytes(path, buffer.getvalue())
        paths.append(path)
    return paths
