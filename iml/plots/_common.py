"""What the figures of :mod:`iml.plots` share: their defaults, colors and new figures, log-log
axes with the 45-degree line, the binned curves of Figures 1, 3 and 4 (bins, intervals, floor
markers and their legend), the loss-corrected scores and the class weight's symbol, class-weight
axes on the logit scale, and :func:`save_figure`, which writes any of them to files.

The names here are public so that the figure modules can share them; the package re-exports only
:func:`save_figure`.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from iml import _validation as V
from iml._io import atomic_write_bytes
from iml.calibration import beta_key, calibration_curve
from iml.grids import LossFamily
from iml.scoring import loss_corrected_score

Array = jax.Array
ArrayLike = jax.typing.ArrayLike


# Smallest value drawn on log axes; scores below it are drawn at it.
_FLOOR = 1e-5
N_BOOTSTRAP = 200
CONFIDENCE = 0.95


def check_betas(betas: Sequence[float], name: str = "betas") -> list[float]:
    return V.check_betas(name, [float(b) for b in betas], distinct=False).tolist()


def beta_labels(betas: Sequence[float]) -> list[str]:
    """Legend labels of class weights: the fewest significant digits (3 or more) that tell the
    given weights apart and keep a weight in ``(0, 1)`` inside it (so 0.9999 is never "1"); the
    figures' gids keep :func:`~iml.grids.beta_key`, which reads back exactly."""
    b = [float(x) for x in betas]
    for digits in range(3, 18):
        labels = [f"{x:.{digits}g}" for x in b]
        inside = all(0.0 < float(t) < 1.0 for t, x in zip(labels, b, strict=True) if 0 < x < 1)
        if inside and len(set(labels)) == len(set(b)):
            return labels
    return [beta_key(x) for x in b]


def drawn_rows(m: int, at_most: int) -> np.ndarray:
    """The indices of at most ``at_most`` of ``m`` grid rows, evenly spaced along the grid from
    its first row to its last: the curves a figure of a long grid draws."""
    V.check_count("at_most", at_most, 2)
    if m <= at_most:
        return np.arange(m)
    return np.unique(np.round(np.linspace(0, m - 1, at_most)).astype(int))


def labels_for(labels: ArrayLike | Mapping[float, ArrayLike], beta: float) -> ArrayLike:
    if isinstance(labels, Mapping):
        if beta not in labels:
            raise ValueError(f"labels has no entry for beta = {beta}")
        return labels[beta]
    return labels


def viridis_colors(n: int) -> list:
    cmap = colormaps["viridis"]
    return [cmap(x) for x in np.linspace(0.0, 0.85, n)]


def new_figure(figsize: tuple[float, float] = (5.0, 5.0)) -> tuple[Figure, Axes]:
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def unit_axes(ylabel: str, bottom_ylabel: str) -> tuple[Figure, Axes, Axes]:
    """A figure of linear unit axes with the 45-degree line above a panel of the scores'
    distribution (a reliability diagram's)."""
    fig = Figure(figsize=(5.0, 6.0), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    top.plot([0, 1], [0, 1], color="black", lw=1.0, label="45-degree line", gid="diagonal")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.set_ylabel(ylabel)
    top.grid(True, alpha=0.3)
    bottom.set_ylabel(bottom_ylabel)
    bottom.set_xlabel("confidence score")
    return fig, top, bottom


def axis_floor(low: float) -> float:
    """The decade at or below ``low`` (kept within ``[_FLOOR, 0.1]``): the lower end of the axes."""
    low = max(min(low, 0.5), _FLOOR)
    return float(10.0 ** np.floor(np.log10(low)))


def log_axes(ax: Axes, floor: float, xlabel: str, ylabel: str, binned: bool = True) -> None:
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


def lowest(bins: Sequence[_Bins]) -> float:
    """The smallest positive value the axes must show: scores, positive rates, upper bounds."""
    values = [np.array([1.0])]
    for b in bins:
        values += [b.x, b.y[b.y > 0], b.y_interval[1][b.y <= 0]]
    v = np.concatenate(values)
    return float(v[np.isfinite(v) & (v > 0)].min())


def draw_curve(ax: Axes, bins: _Bins, floor: float, color, label: str, key: str) -> None:
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


def legend(ax: Axes, drawn: Sequence[_Bins], confidence: float, bootstrap: bool) -> None:
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


def all_bins(
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
        out.append(_bins(scores, labels_for(labels, beta), n_bins, confidence, n_bootstrap, i))
    return out


def corrected_scores(a: Array, beta: float, loss: LossFamily | None) -> Array:
    """``(c^beta)^{-1}(a)``: Corollary 1's closed form, or the inverse rule of ``loss(beta)``."""
    return loss_corrected_score(a, beta) if loss is None else loss(beta).loss_corrected_score(a)


def symbol(loss: LossFamily | None) -> str:
    return {"beta": "β", "alpha": "α"}[(LossFamily() if loss is None else loss).weight_name]


def logit(p: float | np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-np.asarray(p))


def weight_axis(ax: Axes, weights: np.ndarray, weight_name: str = "beta") -> None:
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
    ax.set_xticks(logit(ticks), labels)
    ax.set_xlabel(f"class weight {weight_name} (logit scale)")


def save_figure(
    fig: Figure, path_without_suffix: str | Path, formats: Sequence[str] = ("png", "pdf")
) -> list[Path]:
    """Write ``fig`` as ``path.<fmt>`` for each format (creating the folder); returns the paths.

    Each file is written atomically: a reader finds the previous figure or the whole new one.
    """
    if not formats:
        raise ValueError("formats is empty")
    V.check_figure_formats("formats", formats)
    base = Path(path_without_suffix)
    base.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    engine = fig.get_layout_engine()
    try:
        for fmt in formats:
            path = base.with_name(f"{base.name}.{fmt}")
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, dpi=150)
            atomic_write_bytes(path, buffer.getvalue())
            paths.append(path)
            # the layout the first format drew, kept for the others (laid out once, not per file)
            fig.set_layout_engine("none")
    finally:
        fig.set_layout_engine(engine)
    return paths
