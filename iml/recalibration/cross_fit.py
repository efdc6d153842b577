"""Recalibration by cross-fitting over the outer folds: each fold's observations are recalibrated
by a map fitted on the scores and labels of all other folds, so that no observation is ever
recalibrated by a map fitted on its own label (:func:`cross_fit`); and the baselines a run's
report fits so (:data:`BASELINES`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from iml.recalibration.corrections import PriorShiftCorrection
from iml.recalibration.interface import Recalibrator
from iml.recalibration.logistic import BetaCalibration, PlattScaling, TemperatureScaling
from iml.recalibration.nonparametric import HistogramBinning, IsotonicCalibration

__all__ = ["BASELINES", "cross_fit"]


def _prior_shift(beta: float) -> Callable[[np.ndarray], Recalibrator]:
    # The weighted loss trains as if the positive prior were pi' with odds beta/(1-beta) times
    # the fitting part's odds pi/(1-pi); the correction maps back to pi (eq. correct-prior).
    def make(labels: np.ndarray) -> Recalibrator:
        pi = float(np.clip(labels.mean(), 1e-6, 1 - 1e-6))
        odds = beta / (1 - beta) * pi / (1 - pi)
        return PriorShiftCorrection(train_prior=odds / (1 + odds), target_prior=pi)

    return make


# name -> (beta -> (fitting labels -> unfitted recalibrator))
BASELINES: dict[str, Callable[[float], Callable[[np.ndarray], Recalibrator]]] = {
    "platt": lambda beta: lambda labels: PlattScaling(),
    "beta": lambda beta: lambda labels: BetaCalibration(),
    "temperature": lambda beta: lambda labels: TemperatureScaling(),
    "isotonic": lambda beta: lambda labels: IsotonicCalibration(),
    "histogram": lambda beta: lambda labels: HistogramBinning(n_bins=10, strategy="quantile"),
    "prior_shift": _prior_shift,
}


def cross_fit(
    make: Callable[[np.ndarray], Recalibrator],
    scores: np.ndarray,
    labels: np.ndarray,
    fold_ids: np.ndarray,
) -> np.ndarray:
    """Recalibrated scores, each fold's by a map fitted on all other folds.

    A method that fits by weight (:attr:`Recalibrator.fits_by_weight`) is fitted on all ``n``
    observations with the held-out fold weighing zero, so that every fold's fit has one shape
    and compiles once; any other is fitted on the other folds' observations alone.

    Args:
      make: fitting labels -> an unfitted :class:`~iml.recalibration.Recalibrator`.
      scores, labels, fold_ids: ``[n]`` arrays of the evaluated observations.

    Returns:
      ``[n]`` recalibrated scores; no observation's own label was used to fit its map.

    Raises:
      ValueError: if the observations lie in fewer than two folds.
    """
    out = np.empty(len(scores), dtype=np.float64)
    s = np.asarray(scores, np.float32)
    fold_ids = np.asarray(fold_ids)
    folds = np.unique(fold_ids)
    if len(folds) < 2:
        raise ValueError("cross-fitting needs observations in at least two folds")
    for f in folds:
        held, fit = fold_ids == f, fold_ids != f
        cal = make(labels[fit])
        if getattr(cal, "fits_by_weight", False):
            cal.fit(s, labels, sample_weight=fit.astype(np.float32))
        else:
            cal.fit(s[fit], labels[fit])
        out[held] = np.asarray(cal.transform(s))[held]  # one shape for every fold, too
    return out
