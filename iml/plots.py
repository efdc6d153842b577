"""The paper's Figures 1-4 and reliability diagrams (matplotlib: the only plotting module).

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot, so nothing
opens a window and nothing depends on the backend; :func:`save_figure` writes it to files.

* :func:`figure1_calibration_curves`: decile calibration curves on log-log axes, one per
  ``beta``, with the 45-degree line (Figure 1). Every non-empty bin is drawn with an interval
  for its event rate (Clopper-Pearson, or bootstrap on request); a bin without events, whose
  rate 0 a log axis cannot show, is an open downward triangle at the axes' floor with a bar up to
  its upper confidence bound. Figures 3 and 4 draw their bins the same way.
* :func:`figure2_theoretical_curves`: the theoretical curves of a loss-calibrated algorithm,
  rate ``gamma`` against score ``c^beta(gamma)`` (Figure 2, Proposition 2).
* :func:`figure3_loss_calibration`: both overlaid: the loss calibration curve (Figure 3).
* :func:`figure4_loss_corrected`: calibration curves of the loss-corrected scores
  ``(c^beta)^{-1}(a)`` (Figure 4, Corollary 1).
* :func:`reliability_diagram`: calibration curve above a histogram of the scores.
* :func:`smooth_reliability_diagram` and :func:`figure_smooth_calibration` (one curve per
  ``beta``, raw or loss-corrected scores): the bin-free smooth reliability diagram of Blasiok &
  Nakkiran (2023), a kernel regression with its bootstrap band above the scores' density.
* :func:`figure_metric_vs_size`: metrics of recalibration methods against the size of the
  calibration set (``experiments/recalibration_vs_size.py``).
* :func:`figure_information_by_weight`, :func:`figure_value_matrix` and
  :func:`figure_cost_bounds`: what models trained at several class weights learned
  (:mod:`iml.revealed`): the mutual information of each one's revealed experiment, the value
  matrix relative to its diagonal with the significant NIS violations and an improving NIAC
  cycle, and the revealed bounds on the costs of learning (each artist's ``gid`` is in the
  function's docstring).

Lines that tests and readers look for carry a ``gid``, with ``<beta>`` the exact key
:func:`iml.calibration.beta_key`: ``"diagonal"`` for the 45-degree line, ``"floor"`` for the
axes' floor, ``"data-<beta>"`` for the bins with events of a binned curve, ``"floor-<beta>"`` for
its bins without events, ``"interval-<beta>"`` for the event-rate bars of all its bins (one
segment per bin, in bin order; ``"interval-x-<beta>"`` for bootstrap bars of the mean scores),
and ``"theory-<beta>"`` for a theoretical curve.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullFormatter

from iml import _validation as V
from iml._io import atomic_write_bytes
from iml.calibration import (
    RENORMALISED,
    SmoothCalibrationCurve,
    beta_key,
    calibration_curve,
    smooth_calibration_curve,
)
from iml.grids import LossFamily
from iml.scoring import loss_corrected_score, optimal_score

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "figure1_calibration_curves",
    "figure2_theoretical_curves",
    "figure3_loss_calibration",
    "figure4_loss_corrected",
    "figure_calibration_by_loss",
    "figure_cost_bounds",
    "figure_information_by_weight",
    "figure_metric_vs_size",
    "figure_smooth_calibration",
    "figure_value_matrix",
    "reliability_by_class",
    "reliability_diagram",
    "save_figure",
    "smooth_reliability_diagram",
]

# Smallest value drawn on log axes; scores below it are drawn at it.
_FLOOR = 1e-5
_N_BOOTSTRAP = 200
_CONFIDENCE = 0.95


def _check_betas(betas: Sequence[float], name: str = "betas") -> list[float]:
    return V.check_betas(name, [float(b) for b in betas], distinct=False).tolist()


def _labels_for(labels: ArrayLike | Mapping[float, ArrayLike], beta: float) -> ArrayLike:
    if isinstance(labels, Mapping):
        if beta not in labels:
            raise ValueError(f"labels has no entry for beta = {beta}")
        return labels[beta]
    return labels


def _colors(n: int) -> list:
    cmap = colormaps["viridis"]
    return [cmap(x) for x in np.linspace(0.0, 0.85, n)]


def _new_figure(figsize: tuple[float, float] = (5.0, 5.0)) -> tuple[Figure, Axes]:
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def _axis_floor(low: float) -> float:
    """The decade at or below ``low`` (kept within ``[_FLOOR, 0.1]``): the lower end of the axes."""
    low = max(min(low, 0.5), _FLOOR)
    return float(10.0 ** np.floor(np.log10(low)))


def _log_axes(ax: Axes, floor: float, xlabel: str, ylabel: str, binned: bool = True) -> None:
    """Log-log axes from ``floor`` to 1 with the 45-degree line.

    For binned curves (``binned``) the axes reach a quarter decade below ``floor``, so that
    markers of bins without events, drawn at the floor (dotted line), are seen whole.
    """
    bottom = floor * 10.0**-0.25 if binned else floor
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([bottom, 1.0], [bottom, 1.0], color="black", lw=1.0, label="45-degree line",
            gid="diagonal")  # fmt: skip
    if binned:
        ax.axhline(floor, color="0.6", lw=0.8, ls=":", zorder=0, gid="floor")
    ax.set_xlim(bottom, 1.0)
    ax.set_ylim(bottom, 1.0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_aspect("equal")
    ax.grid(True, which="major", alpha=0.3)


class _Bins(NamedTuple):
    """The non-empty bins of one curve, as drawn: NumPy arrays of equal length."""

    x: np.ndarray  # mean score
    y: np.ndarray  # event rate (0 in a bin without events)
    y_interval: np.ndarray  # (2, n) interval of the event rate
    x_interval: np.ndarray | None  # (2, n) bootstrap interval of the mean score, or None


def _bins(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int,
    confidence: float,
    n_bootstrap: int,
    seed: int,
) -> _Bins:
    """Quantile-binned calibration curve with an interval for every non-empty bin.

    The event-rate interval is Clopper-Pearson (:func:`iml.calibration.clopper_pearson_interval`)
    or, with ``n_bootstrap > 0``, the percentile bootstrap interval, except in bins without events,
    whose bootstrap interval is ``[0, 0]``: they keep the Clopper-Pearson upper bound.
    """
    V.check_count("n_bootstrap", n_bootstrap, 0)
    V.check_open_unit("confidence", confidence)
    kwargs = {}
    if n_bootstrap > 0:
        kwargs = {"n_bootstrap": n_bootstrap, "key": jax.random.key(seed)}
    curve = calibration_curve(
        scores, labels, n_bins=n_bins, strategy="quantile", confidence=confidence, **kwargs
    )
    keep = np.asarray(curve.count) > 0
    x = np.asarray(curve.mean_score, dtype=float)[keep]
    y = np.asarray(curve.event_rate, dtype=float)[keep]
    y_interval = np.asarray(curve.event_rate_binomial_interval, dtype=float)[:, keep]
    if n_bootstrap == 0:
        return _Bins(x, y, y_interval, None)
    boot = np.asarray(curve.event_rate_interval, dtype=float)[:, keep]
    y_interval = np.where(y > 0, boot, y_interval)
    return _Bins(x, y, y_interval, np.asarray(curve.mean_score_interval, dtype=float)[:, keep])


def _lowest(bins: Sequence[_Bins]) -> float:
    """The smallest positive value the axes must show: scores, positive rates, upper bounds."""
    values = [np.array([1.0])]
    for b in bins:
        values += [b.x, b.y[b.y > 0], b.y_interval[1][b.y <= 0]]
    v = np.concatenate(values)
    return float(v[np.isfinite(v) & (v > 0)].min())


def _draw_curve(ax: Axes, bins: _Bins, floor: float, color, label: str, key: str) -> None:
    """Draw one binned curve so that every non-empty bin is seen.

    Bins with events: points joined by a line (gid ``data-<key>``). Bins without events: an open
    downward triangle at ``floor`` (gid ``floor-<key>``), since a rate of 0 has no place on a log
    axis. Every bin: a vertical bar over its event-rate interval, cut at the floor (one
    collection, gid ``interval-<key>``, one segment per bin in bin order); with bootstrap, a
    horizontal bar over the interval of its mean score (gid ``interval-x-<key>``).
    """
    x = np.maximum(bins.x, floor)
    has_events = bins.y > 0
    y = np.where(has_events, bins.y, floor)
    ax.plot(x[has_events], y[has_events], "o-", color=color, ms=4, label=label,
            gid=f"data-{key}")  # fmt: skip
    ax.plot(x[~has_events], y[~has_events], "v", color=color, mfc="white", ms=6, mew=1.2,
            ls="none", zorder=3, gid=f"floor-{key}")  # fmt: skip
    low, high = np.maximum(bins.y_interval, floor)
    ax.vlines(x, low, high, color=color, lw=1.0, alpha=0.8, gid=f"interval-{key}")
    if bins.x_interval is not None:
        x_low, x_high = np.maximum(bins.x_interval, floor)
        ax.hlines(y, x_low, x_high, color=color, lw=1.0, alpha=0.8, gid=f"interval-x-{key}")


def _legend(ax: Axes, drawn: Sequence[_Bins], confidence: float, bootstrap: bool) -> None:
    """The legend, with one entry for the interval bars and one for the floor marker."""
    handles, labels = ax.get_legend_handles_labels()
    level = f"{100 * confidence:g}%"
    kind = "bootstrap" if bootstrap else "Clopper-Pearson"
    handles.append(Line2D([], [], color="0.3", marker="|", ms=10, ls="none"))
    labels.append(f"{level} {kind} interval")
    if any((b.y <= 0).any() for b in drawn):
        handles.append(Line2D([], [], color="0.3", marker="v", mfc="white", ls="none"))
        labels.append(f"no event in bin (bar: {level} upper bound)")
    ax.legend(handles, labels, loc="upper left", fontsize="x-small")


def _all_bins(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    betas: Sequence[float],
    n_bins: int,
    confidence: float,
    n_bootstrap: int,
    transform=None,
) -> list[_Bins]:
    out = []
    for i, beta in enumerate(betas):
        scores = scores_by_beta[beta] if transform is None else transform(beta)
        out.append(_bins(scores, _labels_for(labels, beta), n_bins, confidence, n_bootstrap, i))
    return out


def figure1_calibration_curves(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    n_bins: int = 10,
    confidence: float = _CONFIDENCE,
    n_bootstrap: int = 0,
) -> Figure:
    """Figure 1: binned calibration curves on log-log axes, one per class weight ``beta``.

    Every non-empty bin is drawn with an interval for its event rate: a point with a vertical
    bar, or, for a bin without events (rate 0, which a log axis cannot show), an open downward
    triangle at the axes' floor with a bar up to the upper confidence bound
    ``1 - (alpha / 2)^(1 / n)`` (Clopper-Pearson with no event in ``n``; ``alpha = 1 -
    confidence``).

    Args:
      scores_by_beta: ``beta -> `` positive-class scores ``[N]`` of the model trained with it.
      labels: ``[N]`` labels shared by all, or ``beta -> labels``.
      n_bins: quantile bins (10: the paper's deciles).
      confidence: coverage of the intervals.
      n_bootstrap: 0 (default) for Clopper-Pearson intervals of the event rates; else the
        replicates of percentile bootstrap intervals of the event rates (vertical bars; bins with
        events only) and of the bin mean scores (horizontal bars).

    Returns:
      The figure: x the bin's mean score, y its event rate, and the 45-degree line.
    """
    betas = _check_betas(list(scores_by_beta), "scores_by_beta")
    drawn = _all_bins(scores_by_beta, labels, betas, n_bins, confidence, n_bootstrap)
    floor = _axis_floor(_lowest(drawn))
    fig, ax = _new_figure()
    for beta, bins, color in zip(betas, drawn, _colors(len(betas)), strict=True):
        key = beta_key(beta)
        _draw_curve(ax, bins, floor, color, f"β = {key}", key)
    _log_axes(ax, floor, "confidence score (bin mean)", "event rate")
    ax.set_title("Calibration curves by class weight")
    _legend(ax, drawn, confidence, n_bootstrap > 0)
    return fig


def _corrected(a: Array, beta: float, loss: LossFamily | None) -> Array:
    """``(c^beta)^{-1}(a)``: Corollary 1's closed form, or the inverse rule of ``loss(beta)``."""
    return loss_corrected_score(a, beta) if loss is None else loss(beta).loss_corrected_score(a)


def _family(loss: LossFamily | None) -> LossFamily:
    return LossFamily() if loss is None else loss


def _symbol(loss: LossFamily | None) -> str:
    return {"beta": "β", "alpha": "α"}[_family(loss).weight_name]


def _theory_points(
    beta: float, low: float, n_points: int = 200, loss: LossFamily | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(c^beta(gamma), gamma)`` along a log grid of posteriors."""
    gamma = jnp.logspace(np.log10(low) - 2.0, 0.0, n_points)[:-1]
    if loss is None:  # the closed form of Proposition 2
        return np.asarray(optimal_score(gamma, beta)), np.asarray(gamma)
    return np.asarray(loss(beta).optimal_score(gamma)), np.asarray(gamma)


def figure2_theoretical_curves(
    betas: Sequence[float], low: float = 1e-3, loss: LossFamily | None = None
) -> Figure:
    """Figure 2: the calibration curves a loss-calibrated algorithm would show (Proposition 2).

    For each ``beta`` the curve of rate ``gamma`` against score ``c^beta(gamma)`` (so its inverse
    ``(c^beta)^{-1}`` as a function of the score), on log-log axes with the 45-degree line.

    Args:
      betas: class weights in ``(0, 1)``.
      low: the smallest score and rate shown.
      loss: the loss as a function of its class weight (:func:`iml.grids.loss_family`); default
        the beta-weighted log loss.
    """
    betas = _check_betas(betas)
    V.check_open_unit("low", low)
    fig, ax = _new_figure()
    for beta, color in zip(betas, _colors(len(betas)), strict=True):
        a, gamma = _theory_points(beta, low, loss=loss)
        key = beta_key(beta)
        ax.plot(a, gamma, "-", color=color, lw=1.5, label=f"{_symbol(loss)} = {key}",
                gid=f"theory-{key}")  # fmt: skip
    _log_axes(ax, _axis_floor(low), "confidence score", "event rate", binned=False)
    ax.set_title("Theoretical calibration curves")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def figure3_loss_calibration(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    n_bins: int = 10,
    confidence: float = _CONFIDENCE,
    n_bootstrap: int = 0,
    loss: LossFamily | None = None,
) -> Figure:
    """Figure 3: the loss calibration curve: data (points) over theory (lines), per ``beta``.

    An algorithm is loss-calibrated (Definition 2) when each binned curve follows its
    theoretical curve ``gamma -> c^beta(gamma)``. Bins are drawn as in
    :func:`figure1_calibration_curves`.

    Args:
      scores_by_beta, labels, n_bins, confidence, n_bootstrap: as in
        :func:`figure1_calibration_curves`.
      loss: the loss as a function of its class weight (:func:`iml.grids.loss_family`); default
        the beta-weighted log loss.
    """
    betas = _check_betas(list(scores_by_beta), "scores_by_beta")
    drawn = _all_bins(scores_by_beta, labels, betas, n_bins, confidence, n_bootstrap)
    floor = _axis_floor(_lowest(drawn))
    fig, ax = _new_figure()
    colors = _colors(len(betas))
    for beta, bins, color in zip(betas, drawn, colors, strict=True):
        key = beta_key(beta)
        _draw_curve(ax, bins, floor, color, f"{_symbol(loss)} = {key} (data)", key)
    for beta, color in zip(betas, colors, strict=True):
        a, gamma = _theory_points(beta, floor, loss=loss)
        key = beta_key(beta)
        ax.plot(a, gamma, "--", color=color, lw=1.2, label=f"{_symbol(loss)} = {key} (theory)",
                gid=f"theory-{key}")  # fmt: skip
    _log_axes(ax, floor, "confidence score", "event rate")
    ax.set_title("Loss calibration: data and theory")
    _legend(ax, drawn, confidence, n_bootstrap > 0)
    return fig


def figure4_loss_corrected(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    n_bins: int = 10,
    confidence: float = _CONFIDENCE,
    n_bootstrap: int = 0,
    loss: LossFamily | None = None,
) -> Figure:
    """Figure 4: calibration curves of the loss-corrected scores ``(c^beta)^{-1}(a)``.

    Each ``beta``'s scores are corrected by Corollary 1 (eq. ``transformation``) before binning;
    calibrated curves lie on the 45-degree line (Proposition 5). Bins are drawn as in
    :func:`figure1_calibration_curves`.

    Args:
      scores_by_beta, labels, n_bins, confidence, n_bootstrap: as in
        :func:`figure1_calibration_curves`.
      loss: the loss as a function of its class weight (:func:`iml.grids.loss_family`), whose
        inverse rule corrects; default the beta-weighted log loss (Corollary 1).
    """
    betas = _check_betas(list(scores_by_beta), "scores_by_beta")

    def corrected(beta: float) -> Array:
        a = np.asarray(scores_by_beta[beta], dtype=float)
        if a.size == 0 or np.isnan(a).any() or (a < 0).any() or (a > 1).any():
            raise ValueError(f"scores for beta = {beta} must be non-empty probabilities in [0, 1]")
        return _corrected(jnp.asarray(a, jnp.float32), beta, loss)

    drawn = _all_bins(scores_by_beta, labels, betas, n_bins, confidence, n_bootstrap, corrected)
    floor = _axis_floor(_lowest(drawn))
    fig, ax = _new_figure()
    for beta, bins, color in zip(betas, drawn, _colors(len(betas)), strict=True):
        key = beta_key(beta)
        _draw_curve(ax, bins, floor, color, f"{_symbol(loss)} = {key}", key)
    _log_axes(ax, floor, "loss-corrected confidence score (bin mean)", "event rate")
    ax.set_title("Loss-corrected scores")
    _legend(ax, drawn, confidence, n_bootstrap > 0)
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


def reliability_by_class(
    scores: ArrayLike,
    labels: ArrayLike,
    corrected: ArrayLike | None = None,
    class_names: Sequence[str] | None = None,
    n_bins: int = 10,
    title: str = "",
    strategy: str = "uniform",
) -> Figure:
    """One reliability panel per class of multiclass scores: class ``j``'s scores against
    ``1{y = j}`` (the class-wise calibration behind the class-wise ECE).

    Bins are uniform by default: a rare class's quantile bins would put nine of ten bins near 0
    and lump every high score into the last one.

    Args:
      scores: ``[N, n]`` raw class scores.
      labels: ``[N]`` class indices.
      corrected: ``[N, n]`` loss-corrected scores, drawn in red beside the raw ones, or None.
      class_names: ``n`` names for the panel titles (default ``"class j"``).
      n_bins: bins per class (empty bins are not drawn).
      title: the figure's title.
      strategy: ``"uniform"`` or ``"quantile"`` bins.
    """
    a = np.asarray(scores, np.float64)
    y = np.asarray(labels)
    if a.ndim != 2 or a.shape[1] < 2 or y.shape != a.shape[:1]:
        raise ValueError(f"scores must be [N, n] and labels [N]; got {a.shape} and {y.shape}")
    n = a.shape[1]
    names = [f"class {j}" for j in range(n)] if class_names is None else list(class_names)
    if len(names) != n:
        raise ValueError(f"class_names has {len(names)} names for {n} classes")
    series = [("raw scores", a, "tab:blue")]
    if corrected is not None:
        c = np.asarray(corrected, np.float64)
        if c.shape != a.shape:
            raise ValueError(f"corrected must have the shape of scores {a.shape}, got {c.shape}")
        series.append(("loss-corrected", c, "tab:red"))
    cols = min(n, 6 if n > 12 else 5)
    rows = -(-n // cols)
    fig = Figure(figsize=(2.1 * cols, 2.1 * rows + 0.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=True)).ravel()
    for j, ax in enumerate(axes):
        if j >= n:
            ax.set_axis_off()
            continue
        ax.plot([0, 1], [0, 1], color="black", lw=0.8, gid=f"diagonal-{j}")
        hits = (y == j).astype(np.int32)
        for label, values, color in series:
            s = np.clip(values[:, j], 0.0, 1.0).astype(np.float32)
            curve = calibration_curve(s, hits, n_bins=n_bins, strategy=strategy)
            x, r = np.asarray(curve.mean_score, float), np.asarray(curve.event_rate, float)
            ok = np.isfinite(x) & np.isfinite(r)
            ax.plot(x[ok], r[ok], "o-", ms=2.5, lw=1.0, color=color, label=label,
                    gid=f"{'raw' if color == 'tab:blue' else 'corrected'}-{j}")  # fmt: skip
        ax.set_title(names[j], fontsize="small")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize="x-small")
    axes[0].legend(fontsize="x-small", loc="upper left")
    fig.supxlabel("mean class score in the bin", fontsize="small")
    fig.supylabel("rate of the class in the bin", fontsize="small")
    if title:
        fig.suptitle(title, fontsize="medium")
    return fig


def _logit(p: float | np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-np.asarray(p))


def _numeric_keys(keys: Sequence[str]) -> np.ndarray | None:
    try:
        values = np.asarray([float(k) for k in keys])
    except ValueError:
        return None
    return values if ((values > 0) & (values < 1)).all() else None


def _weight_axis(ax: Axes, weights: np.ndarray, weight_name: str = "beta") -> None:
    """An x axis of class weights on the logit scale, with ticks labelled by the weights: each
    weight of a short grid, else round weights within the grid's range."""
    if weights.size <= 6:
        ticks = np.unique(weights)
    else:
        ticks = np.asarray([
            t
            for t in (0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99)
            if weights.min() - 1e-9 <= t <= weights.max() + 1e-9
        ])  # fmt: skip
    labels = [f"{t:g}" for t in ticks]
    if len(set(labels)) < len(labels):  # close weights: their exact keys
        labels = [beta_key(t) for t in ticks]
    ax.set_xticks(_logit(ticks), labels)
    ax.set_xlabel(f"class weight {weight_name} (logit scale)")


def figure_calibration_by_loss(
    table: dict[str, dict[str, dict[str, float]]],
    prevalence: float | None = None,
    title: str = "",
    weight_name: str = "beta",
) -> Figure:
    """Calibration error against the loss of each row, raw and loss-corrected.

    For a grid of class weights (numeric keys) the x axis is ``logit(weight)`` with weight ticks,
    and a dotted vertical line marks the inverse-frequency weight ``1 - prevalence`` when given;
    other grids (weight matrices ``B``, ...) are placed side by side, labelled by their keys.
    Binary tables: solid lines the decile ECE, dashed the debiased l2 error. Multiclass tables:
    solid the top-label ECE, dashed the class-wise ECE; the renormalised corrected scores of the
    B-weighted loss in green where the table has them.
    """
    if not table:
        raise ValueError("table is empty")
    keys = list(table)
    weights = _numeric_keys(keys)
    z = _logit(weights) if weights is not None else np.arange(len(keys), dtype=np.float64)
    binary = "ece" in next(iter(table.values()))["raw"]
    solid, dashed = ("ece", "ece_debiased") if binary else ("top_label_ece", "classwise_ece")
    names = ("ECE (deciles)", "debiased l2 error")
    if not binary:
        names = ("top-label ECE", "class-wise ECE")
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    styles = {
        "raw": ("tab:blue", "raw weighted scores"),
        "loss_corrected": ("tab:red", "loss-corrected scores"),
    }
    if all(RENORMALISED in row for row in table.values()):
        styles[RENORMALISED] = ("tab:green", "loss-corrected, renormalised")
    for method, (color, label) in styles.items():
        first = [row[method][solid] for row in table.values()]
        second = [row[method][dashed] for row in table.values()]
        ax.plot(z, first, "-", marker="o", ms=2.5, color=color, label=f"{label}: {names[0]}",
                gid=f"ece-{method}")  # fmt: skip
        ax.plot(z, second, "--", marker="o" if weights is None else None, ms=2.5, color=color,
                lw=1.0, label=f"{label}: {names[1]}", gid=f"debiased-{method}")  # fmt: skip
    if weights is None:
        ax.set_xticks(z, keys, rotation=30 if len(keys) > 3 else 0, fontsize="small")
        ax.set_xlabel("loss")
    else:
        if prevalence is not None and 0 < prevalence < 1:
            ax.axvline(_logit(1 - prevalence), color="gray", ls=":", lw=1.0,
                       label=f"{weight_name} = 1 - prevalence")  # fmt: skip
        _weight_axis(ax, weights, weight_name)
    ax.set_yscale("log")
    ax.set_ylabel("calibration error")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return fig


# Smooth curves are drawn where about this many scores lie within one bandwidth of the point
# (density x N x 2 sigma); further out the kernel regression rests on a handful of scores.
_SMOOTH_MIN_COUNT = 5.0


def _smooth_curve(
    scores: ArrayLike,
    labels: ArrayLike,
    bandwidth: float | None,
    ci: float | None,
    n_bootstrap: int,
    seed: int,
) -> SmoothCalibrationCurve:
    if ci is None:
        return smooth_calibration_curve(scores, labels, bandwidth)
    return smooth_calibration_curve(
        scores, labels, bandwidth, n_bootstrap=n_bootstrap, key=jax.random.key(seed), confidence=ci
    )


def _smooth_axes(fig: Figure) -> tuple[Axes, Axes]:
    """Linear unit axes with the 45-degree line above a panel for the scores' densities."""
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    top.plot([0, 1], [0, 1], color="black", lw=1.0, label="45-degree line", gid="diagonal")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.set_ylabel("event rate (kernel regression)")
    top.grid(True, alpha=0.3)
    bottom.set_ylabel("density")
    bottom.set_xlabel("confidence score")
    return top, bottom


def _draw_smooth(
    top: Axes, bottom: Axes, curve: SmoothCalibrationCurve, n: int, color, label: str, key: str
) -> None:
    """The smooth curve and its band (top; NaN where fewer than ``_SMOOTH_MIN_COUNT`` of the
    ``n`` scores lie within a bandwidth) and the scores' density (bottom)."""
    t = np.asarray(curve.grid, dtype=float)
    rate = np.asarray(curve.event_rate, dtype=float)
    density = np.asarray(curve.density, dtype=float)
    nearby = density * n * 2.0 * float(curve.bandwidth)
    shown = np.isfinite(rate) & (nearby >= _SMOOTH_MIN_COUNT)
    top.plot(t, np.where(shown, rate, np.nan), "-", color=color, lw=1.8, label=label,
             gid=f"smooth-{key}")  # fmt: skip
    if curve.event_rate_interval is not None:
        lower, upper = np.asarray(curve.event_rate_interval, dtype=float)
        shown &= np.isfinite(lower) & np.isfinite(upper)
        top.fill_between(t, lower, upper, where=shown, color=color, alpha=0.2, lw=0,
                         gid=f"band-{key}")  # fmt: skip
    bottom.fill_between(t, 0.0, density, color=color, alpha=0.2, lw=0)
    bottom.plot(t, density, "-", color=color, lw=1.0, gid=f"density-{key}")


def smooth_reliability_diagram(
    scores: ArrayLike,
    labels: ArrayLike,
    bandwidth: float | None = None,
    ci: float | None = 0.95,
    title: str | None = None,
    n_bootstrap: int = _N_BOOTSTRAP,
) -> Figure:
    """The smooth reliability diagram of Blasiok & Nakkiran (2023), without bins.

    Top: the kernel regression of the labels on the scores
    (:func:`iml.calibration.smooth_calibration_curve`, reflected Gaussian kernel at the
    fixed-point bandwidth unless one is given) on linear axes, with its bootstrap band and the
    45-degree line; the legend gives the smooth calibration error. Bottom: the scores' kernel
    density. The curve is drawn where about 5 scores or more lie within one bandwidth.

    Args:
      scores: ``[N]`` positive-class scores.
      labels: ``[N]`` labels in ``{0, 1}``.
      bandwidth: the kernel bandwidth, or ``None`` for the fixed point ``smECE_sigma = sigma``.
      ci: coverage of the bootstrap band, or ``None`` for no band.
      title: optional title.
      n_bootstrap: bootstrap replicates behind the band.
    """
    curve = _smooth_curve(scores, labels, bandwidth, ci, n_bootstrap, 0)
    fig = Figure(figsize=(5.0, 6.0), layout="constrained")
    top, bottom = _smooth_axes(fig)
    label = f"smECE {float(curve.ece):.3f} (σ = {float(curve.bandwidth):.3f})"
    _draw_smooth(top, bottom, curve, np.size(scores), "tab:red", label, "data")
    top.legend(loc="upper left", fontsize="small")
    if title:
        top.set_title(title)
    return fig


def figure_smooth_calibration(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    corrected: bool = False,
    ci: float | None = 0.95,
    n_bootstrap: int = _N_BOOTSTRAP,
    bandwidth: float | None = None,
    loss: LossFamily | None = None,
) -> Figure:
    """Smooth reliability diagrams (Blasiok & Nakkiran 2023), one curve per class weight.

    The bin-free companion of Figures 1 and 4 on linear axes: for each ``beta`` the kernel
    regression of the labels on the raw scores, or with ``corrected`` on the loss-corrected
    scores ``(c^beta)^{-1}(a)`` (Corollary 1), each at its own fixed-point bandwidth, with its
    bootstrap band; the legend gives each smooth calibration error. The densities of the scores
    are drawn below; a curve is drawn where about 5 scores or more lie within one bandwidth.
    Curves and bands carry the ``gid`` ``"smooth-<beta>"`` and ``"band-<beta>"``, densities
    ``"density-<beta>"`` (``<beta>`` as :func:`iml.calibration.beta_key` writes it).

    Args:
      scores_by_beta: ``beta -> `` positive-class scores ``[N]`` of the model trained with it.
      labels: ``[N]`` labels shared by all, or ``beta -> labels``.
      corrected: draw the loss-corrected scores instead of the raw ones.
      ci: coverage of the bootstrap bands, or ``None`` for none.
      n_bootstrap: bootstrap replicates behind the bands.
      bandwidth: one kernel bandwidth for every curve, or ``None`` for each one's fixed point.
      loss: the loss as a function of its class weight (:func:`iml.grids.loss_family`); default
        the beta-weighted log loss.
    """
    betas = _check_betas(list(scores_by_beta), "scores_by_beta")
    fig = Figure(figsize=(5.0, 6.0), layout="constrained")
    top, bottom = _smooth_axes(fig)
    for i, (beta, color) in enumerate(zip(betas, _colors(len(betas)), strict=True)):
        a = np.asarray(scores_by_beta[beta], dtype=float)
        if a.size == 0 or np.isnan(a).any() or (a < 0).any() or (a > 1).any():
            raise ValueError(f"scores for beta = {beta} must be non-empty probabilities in [0, 1]")
        a = jnp.asarray(a, jnp.float32)
        if corrected:
            a = _corrected(a, beta, loss)
        curve = _smooth_curve(a, _labels_for(labels, beta), bandwidth, ci, n_bootstrap, i)
        label = f"{_symbol(loss)} = {beta_key(beta)}: smECE {float(curve.ece):.3f}"
        _draw_smooth(top, bottom, curve, a.shape[0], color, label, beta_key(beta))
    top.legend(loc="upper left", fontsize="small")
    what = "loss-corrected scores" if corrected else "raw scores"
    top.set_title(f"Smooth calibration curves, {what}")
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


# ----------------------------------------------------------------------------------------------
# Revealed experiments across class weights (iml.revealed)
# ----------------------------------------------------------------------------------------------


def _check_weights_and(
    betas: Sequence[float], weight_name: str, **values: ArrayLike
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The class weights ``[K]`` and each named array as float64, its last axis ``K``."""
    b = V.check_betas(weight_name + "s", [float(x) for x in betas])
    out = {}
    for name, value in values.items():
        v = np.asarray(value, dtype=np.float64)
        if v.ndim == 0 or v.shape[-1] != b.size:
            raise ValueError(f"{name} must have one value per class weight ({b.size}); got shape "
                             f"{v.shape}")  # fmt: skip
        out[name] = v
    return b, out


def _interval(name: str, interval: ArrayLike | None, k: int) -> np.ndarray | None:
    if interval is None:
        return None
    iv = np.asarray(interval, dtype=np.float64)
    if iv.shape != (2, k):
        raise ValueError(f"{name} must have shape (2, {k}) (lower and upper ends); got {iv.shape}")
    return iv


def figure_information_by_weight(
    betas: Sequence[float],
    information: ArrayLike,
    interval: ArrayLike | None = None,
    *,
    weight_name: str = "beta",
    title: str = "",
) -> Figure:
    """Mutual information ``I_k`` (nats) of each model's revealed experiment against its weight.

    Does reweighting change what is learned? Flat means the same information at every class
    weight (:func:`iml.revealed.mutual_information`; the x axis is ``logit(weight)``).
    The points carry the ``gid`` ``"information"`` and their interval bars (one segment per model,
    in order) ``"information-interval"``.

    Args:
      betas: the class weights ``[K]``.
      information: ``I_k`` in nats ``[K]``.
      interval: its bootstrap interval ``[2, K]`` (lower, upper), or None.
      weight_name: the class weight's name on the axis (``"beta"``, or ``"alpha"`` for focal).
      title: optional title.
    """
    b, v = _check_weights_and(betas, weight_name, information=information)
    info = v["information"]
    iv = _interval("interval", interval, b.size)
    z = _logit(b)
    fig = Figure(figsize=(6.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(z, info, "o-", color="tab:blue", ms=3.5, lw=1.2, label="I_k (estimate)",
            gid="information")  # fmt: skip
    if iv is not None:
        ax.vlines(z, iv[0], iv[1], color="tab:blue", lw=1.0, alpha=0.7,
                  label="bootstrap interval", gid="information-interval")  # fmt: skip
    _weight_axis(ax, b, weight_name)
    ax.set_ylabel("mutual information I(signal; label) (nats)")
    ax.set_ylim(bottom=0.0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(title or "What each model learned, by class weight")
    return fig


def _pairs(violations: ArrayLike | Sequence[Sequence[int]] | None, k: int) -> np.ndarray:
    """Violating pairs ``(k, j)`` as an ``[n, 2]`` array, from a ``[K, K]`` mask or a list."""
    if violations is None:
        return np.zeros((0, 2), np.int64)
    v = np.asarray(violations)
    if v.dtype == bool:
        if v.shape != (k, k):
            raise ValueError(f"violations must be a [{k}, {k}] mask or a list of (k, j) pairs; "
                             f"got shape {v.shape}")  # fmt: skip
        return np.argwhere(v)
    v = v.reshape(-1, 2) if v.size else np.zeros((0, 2), np.int64)
    if v.size and ((v < 0) | (v >= k)).any():
        raise ValueError(f"violations must be pairs of model indices in [0, {k}); got {v.tolist()}")
    return v.astype(np.int64)


def figure_value_matrix(
    G: ArrayLike,
    keys: Sequence[str],
    violations: ArrayLike | Sequence[Sequence[int]] | None = None,
    cycle: Sequence[int] | None = None,
    *,
    weight_name: str = "beta",
    title: str = "",
) -> Figure:
    """The value matrix relative to its diagonal: ``G[k, j] - G[k, k]`` as a heatmap.

    Row ``k`` is the decision problem (model ``k``'s loss), column ``j`` the experiment learned
    under loss ``j`` and re-scored optimally for ``k`` (:func:`iml.revealed.value_matrix`). A
    positive cell (red) says that training under ``j`` and correcting afterwards beats training
    under ``k`` on ``k``'s own loss: a violation of NIS, which capacity-constrained learning
    forbids. The diverging colormap is centred at 0.

    Artists: the heatmap (``gid`` ``"value-matrix"``; ``get_array()`` is the matrix drawn), the
    significant violations as open squares (``"violations"``; offsets ``(j, k)``) and an
    improving cycle as a closed path through the cells ``(k_i, k_{i+1})``
    (``"niac-cycle"``; x the columns, y the rows).

    Args:
      G: the value matrix ``[K, K]``.
      keys: the label of each model (its class weight), ``[K]``.
      violations: significant NIS violations: a ``[K, K]`` mask (row ``k``, column ``j``) or a
        list of pairs ``(k, j)``.
      cycle: a NIAC cycle ``k_1, ..., k_m`` (``-1`` entries are padding), each ``k_i`` given the
        experiment of ``k_{i+1}`` and ``k_m`` that of ``k_1``, or None.
      weight_name: the class weight's name in the axis labels.
      title: optional title.
    """
    g = np.asarray(G, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] != g.shape[1] or g.shape[0] < 2:
        raise ValueError(f"G must be a square [K, K] value matrix with K >= 2; got {g.shape}")
    k = g.shape[0]
    keys = [str(x) for x in keys]
    if len(keys) != k:
        raise ValueError(f"keys must name the {k} models; got {len(keys)}")
    pairs = _pairs(violations, k)
    D = g - np.diagonal(g)[:, None]
    scale = float(np.nanmax(np.abs(D))) if np.isfinite(D).any() else 0.0
    scale = scale if scale > 0 else 1.0
    size = min(9.0, 4.0 + 0.08 * k)
    fig = Figure(figsize=(size + 1.2, size), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(D, cmap="RdBu_r", vmin=-scale, vmax=scale, interpolation="nearest",
                      gid="value-matrix")  # fmt: skip
    fig.colorbar(image, ax=ax, shrink=0.85, label="G[k, j] − G[k, k] (positive: j is better for k)")
    if k <= 6:  # few cells: their values, too
        for (row, col), d in np.ndenumerate(D):
            ax.text(col, row, f"{d:.3g}", ha="center", va="center", fontsize="small",
                    color="white" if abs(d) > 0.6 * scale else "black")  # fmt: skip
    if len(pairs):
        ax.scatter(pairs[:, 1], pairs[:, 0], s=max(8.0, 400.0 / k), marker="s",
                   facecolors="none", edgecolors="black", linewidths=1.2,
                   label="significant NIS violation", gid="violations")  # fmt: skip
    if cycle is not None:
        c = [int(i) for i in cycle if int(i) >= 0]
        if any(i >= k for i in c):
            raise ValueError(f"cycle must hold model indices in [0, {k}); got {list(cycle)}")
        if len(c) >= 2:
            rows = [*c, c[0]]
            cols = [*c[1:], c[0], c[1]]
            ax.plot(cols, rows, "o-", color="black", ms=4, lw=1.4,
                    label=f"improving cycle ({len(c)} models)", gid="niac-cycle")  # fmt: skip
    step = max(1, int(np.ceil(k / 12)))
    ticks = np.arange(0, k, step)
    ax.set_xticks(ticks, [keys[i] for i in ticks], rotation=90 if k > 6 else 0,
                  fontsize="small")  # fmt: skip
    ax.set_yticks(ticks, [keys[i] for i in ticks], fontsize="small")
    ax.set_xlabel(f"experiment j (learned at {weight_name})")
    ax.set_ylabel(f"decision problem k (loss at {weight_name})")
    if len(pairs) or (cycle is not None and ax.get_legend_handles_labels()[0]):
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 if k <= 6 else -0.2),
                  fontsize="small", ncol=2)  # fmt: skip
    ax.set_title(title or "Value of each experiment, relative to the model's own")
    return fig


def figure_cost_bounds(
    betas: Sequence[float],
    lower: ArrayLike,
    upper: ArrayLike,
    interval: ArrayLike | None = None,
    *,
    reference: int | None = None,
    weight_name: str = "beta",
    title: str = "",
) -> Figure:
    """The revealed bounds on each model's cost of learning, ``C_k - C_ref``, against its weight.

    Costly learning implies ``lower_k <= C_k - C_ref <= upper_k``
    (:func:`iml.revealed.revealed_cost_bounds`); each model's interval is a vertical bar at
    ``logit(weight)`` (``gid`` ``"cost-bounds"``, one segment per model, in order), with its ends
    marked (``"cost-lower"`` and ``"cost-upper"``). NaN bounds (NIAC fails, so no costs fit) are
    not drawn. A bootstrap interval of the bounds is drawn as wider, lighter bars
    (``"cost-interval"``).

    Args:
      betas: the class weights ``[K]``.
      lower, upper: the bounds ``[K]``.
      interval: the bootstrap interval of the bounds ``[2, K]``: the low end of the lower
        bound's interval and the high end of the upper bound's, or None.
      reference: the model whose cost is 0 (marked), or None.
      weight_name: the class weight's name on the axis.
      title: optional title.
    """
    b, v = _check_weights_and(betas, weight_name, lower=lower, upper=upper)
    lo, hi = v["lower"], v["upper"]
    iv = _interval("interval", interval, b.size)
    if reference is not None and not 0 <= reference < b.size:
        raise ValueError(f"reference must be a model index in [0, {b.size}); got {reference!r}")
    z = _logit(b)
    fig = Figure(figsize=(6.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    ax.axhline(0.0, color="0.5", lw=0.8, zorder=0)
    if iv is not None:
        ax.vlines(z, iv[0], iv[1], color="tab:orange", lw=5.0, alpha=0.3,
                  label="bootstrap interval", gid="cost-interval")  # fmt: skip
    ax.vlines(z, lo, hi, color="tab:red", lw=1.8, label="revealed bounds on C_k − C_ref",
              gid="cost-bounds")  # fmt: skip
    ax.plot(z, lo, "_", color="tab:red", ms=8, mew=1.8, ls="none", gid="cost-lower")
    ax.plot(z, hi, "_", color="tab:red", ms=8, mew=1.8, ls="none", gid="cost-upper")
    if reference is not None:
        ax.plot([z[reference]], [0.0], "o", color="black", ms=5, ls="none",
                label=f"reference ({weight_name} = {b[reference]:g}): cost 0",
                gid="cost-reference")  # fmt: skip
    if not (np.isfinite(lo) | np.isfinite(hi)).any():
        ax.text(0.5, 0.5, "no costs fit (NIAC fails)", transform=ax.transAxes, ha="center",
                va="center", color="0.3")  # fmt: skip
    _weight_axis(ax, b, weight_name)
    ax.set_ylabel("C_k − C_ref (value units)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(title or "Revealed costs of learning, relative to the reference model")
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
