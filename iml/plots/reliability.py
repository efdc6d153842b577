"""Binned reliability diagrams and calibration metrics across losses and calibration-set sizes.

* :func:`reliability_diagram`: calibration curve (linear axes) above a histogram of the scores.
* :func:`reliability_by_class`: one reliability panel per class of multiclass scores, raw and
  loss-corrected.
* :func:`figure_calibration_by_loss`: the calibration error of each row of a table by loss, raw
  and loss-corrected, against the class weight (logit scale) or the loss's key.
* :func:`figure_metric_vs_size`: metrics of recalibration methods against the size of the
  calibration set (``experiments/studies/recalibration_vs_size.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from iml.calibration import RENORMALISED, calibration_curve
from iml.calibration.tables import table_tests
from iml.plots._common import N_BOOTSTRAP, logit, new_figure, unit_axes, weight_axis

ArrayLike = jax.typing.ArrayLike

__all__ = [
    "figure_calibration_by_loss",
    "figure_metric_vs_size",
    "reliability_by_class",
    "reliability_diagram",
]


def reliability_diagram(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    strategy: str = "uniform",
    ci: float | None = None,
    title: str | None = None,
    n_bootstrap: int = N_BOOTSTRAP,
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
    fig, top, bottom = unit_axes("event rate", "count")
    x = np.asarray(curve.mean_score, dtype=float)
    y = np.asarray(curve.event_rate, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    if curve.event_rate_interval is not None:
        yi = np.asarray(curve.event_rate_interval, dtype=float)[:, ok]
        yerr = np.maximum(np.stack([y[ok] - yi[0], yi[1] - y[ok]]), 0.0)
        top.errorbar(x[ok], y[ok], yerr=yerr, fmt="o-", ms=4, capsize=2, label="binned", gid="data")
    else:
        top.plot(x[ok], y[ok], "o-", ms=4, label="binned", gid="data")
    top.legend(loc="upper left", fontsize="small")
    if title:
        top.set_title(title)
    bottom.hist(np.asarray(scores, dtype=float), bins=np.linspace(0, 1, n_bins + 1), color="0.5")
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


def _numeric_keys(keys: Sequence[str]) -> np.ndarray | None:
    try:
        values = np.asarray([float(k) for k in keys])
    except ValueError:
        return None
    return values if ((values > 0) & (values < 1)).all() else None


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
    B-weighted loss in green where the table has them. A black cross marks each loss whose
    loss calibration the table's test rejects (``row["raw"]["loss_calibration"]``, any of its
    tests for a multiclass loss): its corrected scores cannot be trusted.
    """
    if not table:
        raise ValueError("table is empty")
    keys = list(table)
    weights = _numeric_keys(keys)
    z = logit(weights) if weights is not None else np.arange(len(keys), dtype=np.float64)
    binary = "ece" in next(iter(table.values()))["raw"]
    solid, dashed = ("ece", "ece_debiased") if binary else ("top_label_ece", "classwise_ece")
    names = ("ECE (deciles)", "debiased l2 error")
    if not binary:
        names = ("top-label ECE", "class-wise ECE")
    fig, ax = new_figure((6.4, 4.2))
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
    rejected = [i for i, row in enumerate(table.values()) if _rejected(row)]
    if (
        rejected
    ):  # the losses whose correction cannot be trusted (their model is not at its optimum)
        ax.plot(z[rejected], [list(table.values())[i]["loss_corrected"][solid] for i in rejected],
                "x", color="black", ms=7, mew=1.5, ls="none", gid="loss-calibration-rejected",
                label="loss calibration rejected (Holm, level 0.05): correction not trusted",
                )  # fmt: skip
    if weights is None:
        ax.set_xticks(z, keys, rotation=30 if len(keys) > 3 else 0, fontsize="small")
        ax.set_xlabel("loss")
    else:
        if prevalence is not None and 0 < prevalence < 1:
            ax.axvline(logit(1 - prevalence), color="gray", ls=":", lw=1.0,
                       label=f"{weight_name} = 1 - prevalence")  # fmt: skip
        weight_axis(ax, weights, weight_name)
    ax.set_yscale("log")
    ax.set_ylabel("calibration error")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return fig


def _rejected(row: Mapping) -> bool:
    return any(record.get("rejected") for _, _, record in table_tests({"": row}))


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
