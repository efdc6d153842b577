"""The paper's Figures 1-4: calibration curves by class weight on log-log axes.

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.figure import Figure

from iml import _validation as V
from iml.calibration import beta_key
from iml.grids import LossFamily
from iml.plots._common import (
    CONFIDENCE,
    all_bins,
    axis_floor,
    beta_labels,
    check_betas,
    corrected_scores,
    draw_curve,
    legend,
    log_axes,
    lowest,
    new_figure,
    symbol,
    viridis_colors,
)
from iml.scoring import optimal_score

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "figure1_calibration_curves",
    "figure2_theoretical_curves",
    "figure3_loss_calibration",
    "figure4_loss_corrected",
]


def figure1_calibration_curves(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    n_bins: int = 10,
    confidence: float = CONFIDENCE,
    n_bootstrap: int = 0,
) -> Figure:
    """Figure 1: binned calibration curves on log-log axes, one per class weight ``beta``.

    Every non-empty bin is drawn with an interval for its event rate: a point with a vertical
    bar, or, for a bin without events (rate 0, which a log axis cannot show), an open downward
    triangle at the axes' floor with a bar up to the upper confidence bound
    ``1 - (alpha / 2)^(1 / n)`` (Clopper-Pearson with no event in ``n``; ``alpha = 1 -
    confidence``).

    Args:
      n_bins: quantile bins (10: the paper's deciles).
      confidence: coverage of the intervals.
      n_bootstrap: 0 (default) for Clopper-Pearson intervals of the event rates; else the
        replicates of percentile bootstrap intervals of the event rates (vertical bars; bins with
        events only) and of the bin mean scores (horizontal bars).

    Returns:
      The figure: x the bin's mean score, y its event rate, and the 45-degree line.
    """
    betas = check_betas(list(scores_by_beta), "scores_by_beta")
    drawn = all_bins(scores_by_beta, labels, betas, n_bins, confidence, n_bootstrap)
    floor = axis_floor(lowest(drawn))
    fig, ax = new_figure()
    for beta, name, bins, color in zip(betas, beta_labels(betas), drawn,
                                       viridis_colors(len(betas)), strict=True):  # fmt: skip
        draw_curve(ax, bins, floor, color, f"β = {name}", beta_key(beta))
    log_axes(ax, floor, "confidence score (bin mean)", "event rate")
    ax.set_title("Calibration curves by class weight")
    legend(ax, drawn, confidence, n_bootstrap > 0)
    return fig


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
    """
    betas = check_betas(betas)
    V.check_open_unit("low", low)
    fig, ax = new_figure()
    for beta, name, color in zip(betas, beta_labels(betas), viridis_colors(len(betas)),
                                 strict=True):  # fmt: skip
        a, gamma = _theory_points(beta, low, loss=loss)
        ax.plot(a, gamma, "-", color=color, lw=1.5, label=f"{symbol(loss)} = {name}",
                gid=f"theory-{beta_key(beta)}")  # fmt: skip
    log_axes(ax, axis_floor(low), "confidence score", "event rate", binned=False)
    ax.set_title("Theoretical calibration curves")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def figure3_loss_calibration(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    n_bins: int = 10,
    confidence: float = CONFIDENCE,
    n_bootstrap: int = 0,
    loss: LossFamily | None = None,
) -> Figure:
    """Figure 3: the loss calibration curve: data (points) over theory (lines), per ``beta``.

    An algorithm is loss-calibrated (Definition 2) when each binned curve follows its
    theoretical curve ``gamma -> c^beta(gamma)``. Bins are drawn as in
    :func:`figure1_calibration_curves`.

    Args:
      n_bins, confidence, n_bootstrap: as in :func:`figure1_calibration_curves`.
    """
    betas = check_betas(list(scores_by_beta), "scores_by_beta")
    drawn = all_bins(scores_by_beta, labels, betas, n_bins, confidence, n_bootstrap)
    floor = axis_floor(lowest(drawn))
    fig, ax = new_figure()
    colors, names = viridis_colors(len(betas)), beta_labels(betas)
    for beta, name, bins, color in zip(betas, names, drawn, colors, strict=True):
        draw_curve(ax, bins, floor, color, f"{symbol(loss)} = {name} (data)", beta_key(beta))
    for beta, name, color in zip(betas, names, colors, strict=True):
        a, gamma = _theory_points(beta, floor, loss=loss)
        ax.plot(a, gamma, "--", color=color, lw=1.2, label=f"{symbol(loss)} = {name} (theory)",
                gid=f"theory-{beta_key(beta)}")  # fmt: skip
    log_axes(ax, floor, "confidence score", "event rate")
    ax.set_title("Loss calibration: data and theory")
    legend(ax, drawn, confidence, n_bootstrap > 0)
    return fig


def figure4_loss_corrected(
    scores_by_beta: Mapping[float, ArrayLike],
    labels: ArrayLike | Mapping[float, ArrayLike],
    n_bins: int = 10,
    confidence: float = CONFIDENCE,
    n_bootstrap: int = 0,
    loss: LossFamily | None = None,
    verdicts: Mapping[float, str] | None = None,
) -> Figure:
    """Figure 4: calibration curves of the loss-corrected scores ``(c^beta)^{-1}(a)``.

    Each ``beta``'s scores are corrected by Corollary 1 (eq. ``transformation``) before binning;
    calibrated curves lie on the 45-degree line (Proposition 5). Bins are drawn as in
    :func:`figure1_calibration_curves`.

    Args:
      n_bins, confidence, n_bootstrap: as in :func:`figure1_calibration_curves`.
      loss: the loss whose inverse rule corrects (default: Corollary 1's).
      verdicts: each beta's loss-calibration verdict, written after its legend entry, so that the
        figure states what the test does ("rejected" curves are not calibrated).
    """
    betas = check_betas(list(scores_by_beta), "scores_by_beta")

    def corrected(beta: float) -> Array:
        a = np.asarray(scores_by_beta[beta], dtype=float)
        if a.size == 0 or np.isnan(a).any() or (a < 0).any() or (a > 1).any():
            raise ValueError(f"scores for beta = {beta} must be non-empty probabilities in [0, 1]")
        return corrected_scores(jnp.asarray(a, jnp.float32), beta, loss)

    drawn = all_bins(scores_by_beta, labels, betas, n_bins, confidence, n_bootstrap, corrected)
    floor = axis_floor(lowest(drawn))
    fig, ax = new_figure()
    for beta, name, bins, color in zip(betas, beta_labels(betas), drawn,
                                       viridis_colors(len(betas)), strict=True):  # fmt: skip
        said = f": loss calibration {verdicts[beta]}" if verdicts and beta in verdicts else ""
        draw_curve(ax, bins, floor, color, f"{symbol(loss)} = {name}{said}", beta_key(beta))
    log_axes(ax, floor, "loss-corrected confidence score (bin mean)", "event rate")
    ax.set_title("Loss-corrected scores")
    legend(ax, drawn, confidence, n_bootstrap > 0)
    return fig
