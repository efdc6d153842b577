"""Calibration analysis: binning, calibration curves and metrics, the loss-calibration test,
calibration across betas, the smooth calibration error, and the tables of a grid of losses.

Notation follows Caplin, Martin & Marx, *Calibrating for Class Weights by Modeling Machine
Learning* (the paper). Scores ``a`` are positive-class confidence scores in ``[0, 1]`` (binary) or
rows of class scores ``a[..., n]`` (multiclass); labels are ``{0, 1}`` (binary) or class indices.

One idea per module, all of whose public names are imported here:

* :mod:`~iml.calibration.binning`: bin edges (quantile or uniform), the bin of every score and
  the weighted per-bin sums (:class:`BinnedStatistics`) that every binned quantity comes from.
* :mod:`~iml.calibration.curves`: the binned calibration curve (Definition 1; Figures 1 and 4)
  and the Clopper-Pearson interval of a binomial rate.
* :mod:`~iml.calibration.metrics`: the expected calibration error (binned, and the debiased
  estimator of Kumar, Liang & Ma 2019), the Brier score, the log loss and the AUROC.
* :mod:`~iml.calibration.loss_calibration`: loss calibration (Definition 2): the one test of
  it (Proposition 4: the labels against the loss-corrected scores, bin by bin), with its power,
  effect size and verdict; the curve of Figure 3 against the map ``c`` (Proposition 2;
  ``c^beta`` of eq. ``choice-b1``); and the gap of a wholesale switch.
* :mod:`~iml.calibration.comparison`: bootstrap intervals of many ECEs on the same resampled rows,
  and the paired comparison of two ECEs (their difference and ratio).
* :mod:`~iml.calibration.across_betas`: calibration of the loss-corrected scores ``g^beta(a)``
  (Corollary 1) for many class weights at once, beside the loss-calibration gap to ``L^beta``
  (Proposition 5).
* :mod:`~iml.calibration.smooth`: the smooth calibration error and smooth reliability diagram
  (Blasiok & Nakkiran 2023).
* :mod:`~iml.calibration.tables`: the metrics of one score vector or matrix (the rows of the
  reports' tables) and the table of a grid of losses, raw and loss-corrected (Proposition 4).

Input validation lives in :mod:`iml.calibration._checks` and the bootstrap's resampling and
percentile intervals in :mod:`iml._bootstrap`.

Conventions shared by every function here:

* **Bins** are right-closed, ``(e_b, e_{b+1}]``, except that the first bin also holds its lower
  edge: bin ``b`` of a score ``s`` is ``searchsorted(edges[1:-1], s, side="left")``, exactly as in
  scikit-learn's ``calibration_curve``. Ties therefore always share a bin, and a score of exactly 0
  or 1 falls in the first or last bin.
* **Quantile edges** (the paper's deciles for ``n_bins=10``) are the ``b / n_bins`` quantiles of the
  scores with linear interpolation (``np.percentile``'s default, as scikit-learn uses). They are
  computed from the scores as observed, unweighted, so reweighting (sample or bootstrap weights)
  keeps the bins fixed. Repeated quantiles (ties across a quantile) give duplicate edges; the bins
  between duplicates are empty.
* **Empty bins** have ``count == 0`` and ``NaN`` means; metrics skip them.
* **Arguments** mean the same in every function that takes them, unless its docstring says more:
  ``n_bins`` the number of bins; ``strategy`` ``"quantile"`` (the paper's deciles for
  ``n_bins=10``) or ``"uniform"``; ``sample_weight`` non-negative weights ``(n,)``, which weight
  means and counts but not the quantile edges; ``n_bootstrap`` the nonparametric bootstrap's
  replicates (observations resampled with replacement, bins held fixed; 0 for none), ``key`` the
  ``jax.random`` key they are drawn from (required when ``n_bootstrap > 0``) and ``confidence``
  the coverage of the intervals.
* **Validation**: when arrays are concrete, bad input raises ``ValueError`` naming the argument.
  Under ``jax.jit`` values cannot be inspected; instead every result that depends on an invalid
  entry is NaN (never a plausible wrong number): a NaN score, a binary label outside ``{0, 1}``
  or a multiclass label outside ``[0, k)``, and a negative weight all give NaN. A NaN score or
  bad label in one bin of a curve makes that bin's means NaN and leaves the other bins intact.
"""

from iml.calibration.across_betas import CalibrationAcrossBetas, calibration_across_betas
from iml.calibration.binning import BinnedStatistics, assign_bins, bin_edges, binned_statistics
from iml.calibration.comparison import (
    ECEComparison,
    compare_ece,
    ece_intervals,
    multiclass_ece_intervals,
    paired_comparison,
)
from iml.calibration.curves import CalibrationCurve, calibration_curve, clopper_pearson_interval
from iml.calibration.loss_calibration import (
    LossCalibrationCurve,
    LossCalibrationTest,
    calibration_test,
    holm_adjusted,
    loss_calibration_curve,
    loss_calibration_test,
    loss_calibration_verdict,
)
from iml.calibration.metrics import (
    auroc,
    brier_score,
    calibration_error_from_statistics,
    expected_calibration_error,
    mean_log_loss,
)
from iml.calibration.smooth import (
    SmoothCalibrationCurve,
    SmoothECE,
    smooth_calibration_curve,
    smooth_ece,
)
from iml.calibration.tables import (
    METRICS,
    MULTICLASS_METRICS,
    RENORMALISED,
    loss_calibration_summary,
    loss_calibration_verdicts,
    loss_corrected_scores,
    multiclass_score_metrics,
    score_metrics,
    score_metrics_by_row,
    scores_from_logits,
    table_by_loss,
)
from iml.grids import beta_key

__all__ = [
    "METRICS",
    "MULTICLASS_METRICS",
    "RENORMALISED",
    "BinnedStatistics",
    "CalibrationAcrossBetas",
    "CalibrationCurve",
    "ECEComparison",
    "LossCalibrationCurve",
    "LossCalibrationTest",
    "SmoothCalibrationCurve",
    "SmoothECE",
    "assign_bins",
    "auroc",
    "beta_key",
    "bin_edges",
    "binned_statistics",
    "brier_score",
    "calibration_across_betas",
    "calibration_curve",
    "calibration_error_from_statistics",
    "calibration_test",
    "clopper_pearson_interval",
    "compare_ece",
    "ece_intervals",
    "expected_calibration_error",
    "holm_adjusted",
    "loss_calibration_curve",
    "loss_calibration_summary",
    "loss_calibration_test",
    "loss_calibration_verdict",
    "loss_calibration_verdicts",
    "loss_corrected_scores",
    "mean_log_loss",
    "multiclass_ece_intervals",
    "multiclass_score_metrics",
    "paired_comparison",
    "score_metrics",
    "score_metrics_by_row",
    "scores_from_logits",
    "smooth_calibration_curve",
    "smooth_ece",
    "table_by_loss",
]
