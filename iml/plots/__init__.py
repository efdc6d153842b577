"""The paper's Figures 1-4, reliability diagrams and the revealed experiments' figures
(matplotlib: the only plotting package).

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot, so nothing
opens a window and nothing depends on the backend; :func:`save_figure` writes it to files. In the
figures by class weight, ``scores_by_beta`` maps each ``beta`` to the positive-class scores ``[N]``
of the model trained with it, ``labels`` are ``[N]`` labels shared by all or ``beta -> labels``,
and ``loss`` is the loss as a function of its class weight (:func:`iml.grids.loss_family`), by
default the beta-weighted log loss.

One kind of figure per module, all of whose public names are imported here:

* :mod:`~iml.plots.paper`: the paper's Figures 1-4 (binned and theoretical calibration curves).
* :mod:`~iml.plots.reliability`: binned reliability diagrams, ECE by loss, metrics by set size.
* :mod:`~iml.plots.smooth`: smooth reliability diagrams (Blasiok & Nakkiran 2023), by ``beta``.
* :mod:`~iml.plots.revealed`: information, value matrix and cost bounds of revealed experiments.
* :mod:`~iml.plots._common`: shared axes, colors, binned curves and legends; :func:`save_figure`;
  :func:`drawn_rows`, the curves a figure of a long grid draws.

Lines that tests and readers look for carry a ``gid``, with ``<beta>`` the exact key
:func:`iml.calibration.beta_key`: ``"diagonal"`` for the 45-degree line, ``"floor"`` for the
axes' floor, ``"data-<beta>"`` for the bins with events of a binned curve, ``"floor-<beta>"`` for
its bins without events, ``"interval-<beta>"`` for the event-rate bars of all its bins (one
segment per bin, in bin order; ``"interval-x-<beta>"`` for bootstrap bars of the mean scores),
and ``"theory-<beta>"`` for a theoretical curve.
"""

# A former private name that the tests read from here: the intervals' default coverage.
from iml.plots._common import CONFIDENCE as _CONFIDENCE  # noqa: F401
from iml.plots._common import drawn_rows, save_figure
from iml.plots.paper import (
    figure1_calibration_curves,
    figure2_theoretical_curves,
    figure3_loss_calibration,
    figure4_loss_corrected,
)
from iml.plots.reliability import (
    figure_calibration_by_loss,
    figure_metric_vs_size,
    reliability_by_class,
    reliability_diagram,
)
from iml.plots.revealed import (
    figure_cost_bounds,
    figure_information_by_class,
    figure_information_by_weight,
    figure_value_matrix,
)
from iml.plots.smooth import figure_smooth_calibration, smooth_reliability_diagram

__all__ = [
    "drawn_rows",
    "figure1_calibration_curves",
    "figure2_theoretical_curves",
    "figure3_loss_calibration",
    "figure4_loss_corrected",
    "figure_calibration_by_loss",
    "figure_cost_bounds",
    "figure_information_by_class",
    "figure_information_by_weight",
    "figure_metric_vs_size",
    "figure_smooth_calibration",
    "figure_value_matrix",
    "reliability_by_class",
    "reliability_diagram",
    "save_figure",
    "smooth_reliability_diagram",
]
