"""iml: loss-corrected confidence scores for class-weighted classifiers.

Implements Caplin, Martin & Marx, *Calibrating for Class Weights by Modeling Machine Learning*:
weighted proper losses (:mod:`iml.losses`), optimal scoring rules and their inverses
(:mod:`iml.scoring`), one specification of a loss that carries both (:func:`loss_spec`,
:class:`LossSpec`), calibration analysis, recalibration baselines, the DenseNet beta-ensemble
trainer and the experiment pipeline. A user's own losses, models and datasets are loaded as
plugins (:mod:`iml.plugins`: :func:`load_plugins` for installed packages' entry points).
"""

from iml.grids import LossGrid, beta_grid, loss_grid
from iml.plugins import load_plugins
from iml.scoring import (
    check_first_order_conditions,
    check_invertibility,
    loss_corrected_logit,
    loss_corrected_score,
    loss_corrected_score_class_weighted,
    loss_corrected_score_for_loss,
    loss_corrected_score_into,
    loss_corrected_score_multiclass,
    loss_corrected_score_multiclass_for_loss,
    optimal_logit,
    optimal_score,
    optimal_score_class_weighted,
    optimal_score_for_loss,
    optimal_score_multiclass,
    optimal_score_multiclass_for_loss,
)
from iml.spec import LOSSES, LossSpec, loss_spec

__version__ = "0.1.0"

__all__ = [
    "LOSSES",
    "LossGrid",
    "LossSpec",
    "beta_grid",
    "check_first_order_conditions",
    "check_invertibility",
    "load_plugins",
    "loss_corrected_logit",
    "loss_corrected_score",
    "loss_corrected_score_class_weighted",
    "loss_corrected_score_for_loss",
    "loss_corrected_score_into",
    "loss_corrected_score_multiclass",
    "loss_corrected_score_multiclass_for_loss",
    "loss_grid",
    "loss_spec",
    "optimal_logit",
    "optimal_score",
    "optimal_score_class_weighted",
    "optimal_score_for_loss",
    "optimal_score_multiclass",
    "optimal_score_multiclass_for_loss",
]
