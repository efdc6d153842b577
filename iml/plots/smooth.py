"""Smooth reliability diagrams (Blasiok & Nakkiran 2023): the bin-free kernel regression of the
labels on the scores, with its bootstrap band, above the scores' density.

* :func:`smooth_reliability_diagram`: one score vector.
* :func:`figure_smooth_calibration`: one curve per ``beta``, raw or loss-corrected scores (the
  bin-free companion of Figures 1 and 4).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from iml.calibration import SmoothCalibrationCurve, beta_key, smooth_calibration_curve
from iml.grids import LossFamily
from iml.plots._common import (
    N_BOOTSTRAP,
    beta_labels,
    check_betas,
    corrected_scores,
    labels_for,
    symbol,
    unit_axes,
    viridis_colors,
)

ArrayLike = jax.typing.ArrayLike

__all__ = ["figure_smooth_calibration", "smooth_reliability_diagram"]


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
    n_bootstrap: int = N_BOOTSTRAP,
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
    fig, top, bottom = unit_axes("event rate (kernel regression)", "density")
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
    n_bootstrap: int = N_BOOTSTRAP,
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
      corrected: draw the loss-corrected scores instead of the raw ones.
      ci: coverage of the bootstrap bands, or ``None`` for none.
      n_bootstrap: bootstrap replicates behind the bands.
      bandwidth: one kernel bandwidth for every curve, or ``None`` for each one's fixed point.
    """
    betas = check_betas(list(scores_by_beta), "scores_by_beta")
    fig, top, bottom = unit_axes("event rate (kernel regression)", "density")
    names = beta_labels(betas)
    for i, (beta, color) in enumerate(zip(betas, viridis_colors(len(betas)), strict=True)):
        a = np.asarray(scores_by_beta[beta], dtype=float)
        if a.size == 0 or np.isnan(a).any() or (a < 0).any() or (a > 1).any():
            raise ValueError(f"scores for beta = {beta} must be non-empty probabilities in [0, 1]")
        a = jnp.asarray(a, jnp.float32)
        if corrected:
            a = corrected_scores(a, beta, loss)
        curve = _smooth_curve(a, labels_for(labels, beta), bandwidth, ci, n_bootstrap, i)
        label = f"{symbol(loss)} = {names[i]}: smECE {float(curve.ece):.3f}"
        _draw_smooth(top, bottom, curve, a.shape[0], color, label, beta_key(beta))
    top.legend(loc="upper left", fontsize="small")
    what = "loss-corrected scores" if corrected else "raw scores"
    top.set_title(f"Smooth calibration curves, {what}")
    return fig
