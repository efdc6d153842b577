"""Recalibration by cross-fitting over the outer folds: each fold's observations are recalibrated
by a map fitted on the scores and labels of all other folds, so that no observation is ever
recalibrated by a map fitted on its own label (:func:`cross_fit`); and the baselines a run's
report fits so (:data:`BASELINES`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from iml.recalibration._common import check_labels
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
    observations with the held-out fold weighing zero; where it fits its folds at once
    (:attr:`Recalibrator.folds_at_once`) and ``make`` gives every fold the same recalibrator,
    every fold's fit is one program (``jax.vmap`` over the folds' weights, or the method's own
    ``_fit_folds`` of the stack of them; compiled once per method and ``n``), or, for a method
    that fits its folds on the host (:attr:`Recalibrator.folds_on_host`, isotonic calibration),
    the folds are fitted there and each fold's held-out scores mapped in one program. Any other
    is fitted on the other folds' observations alone, fold by fold.

    Args:
      make: fitting labels -> an unfitted :class:`~iml.recalibration.Recalibrator`.
      scores, labels, fold_ids: ``[n]`` arrays of the evaluated observations.

    Returns:
      ``[n]`` recalibrated scores; no observation's own label was used to fit its map.

    Raises:
      ValueError: if the observations lie in fewer than two folds, or for bad scores or labels
        (naming them).
    """
    out = np.empty(len(scores), dtype=np.float64)
    s = np.asarray(scores, np.float32)
    fold_ids = np.asarray(fold_ids)
    folds = np.unique(fold_ids)
    if len(folds) < 2:
        raise ValueError("cross-fitting needs observations in at least two folds")
    cals = [make(labels[fold_ids != f]) for f in folds]
    at_once = all(getattr(c, "fits_by_weight", False) and getattr(c, "folds_at_once", False)
                  for c in cals)  # fmt: skip
    if at_once and len({repr(c) for c in cals}) == 1:
        cal = cals[0]
        cal._check_transform_input(s)  # on concrete arrays: the program checks nothing
        check_labels(labels, len(s))
        weights = np.stack([fold_ids != f for f in folds]).astype(np.float32)
        held = np.searchsorted(folds, fold_ids)
        if getattr(cal, "folds_on_host", False):
            return _held_out(cal, cal._fit_folds(s, np.asarray(labels), weights), s, held)
        by_fold = np.asarray(_fold_fits(cal)(s, np.asarray(labels), weights))  # [F, n]
        return by_fold[held, np.arange(len(s))].astype(np.float64)
    for f, cal in zip(folds, cals, strict=True):
        held, fit = fold_ids == f, fold_ids != f
        if getattr(cal, "fits_by_weight", False):
            cal.fit(s, labels, sample_weight=fit.astype(np.float32))
        else:
            cal.fit(s[fit], labels[fit])
        out[held] = np.asarray(cal.transform(s))[held]  # one shape for every fold, too
    return out


_FOLD_FITS: dict[tuple[type, str], Callable] = {}
_FOLD_TRANSFORMS: dict[tuple[type, str], Callable] = {}


def _held_out(
    cal: Recalibrator, params: object, scores: np.ndarray, held: np.ndarray
) -> np.ndarray:
    """``[n]`` each observation's score mapped by the parameters of its own fold (``held``
    ``[n]``, the fold's row of the batched ``params``): every fold's held-out scores, padded to
    the longest fold's number, in one jitted program (``jax.vmap`` of ``_transform``), compiled
    once per kind and configuration of recalibrator and padded length."""
    n_folds = int(held.max()) + 1
    counts = np.bincount(held, minlength=n_folds)
    order = np.argsort(held, kind="stable")
    position = np.empty(len(held), np.int64)  # each observation's place among its fold's
    position[order] = np.arange(len(held)) - np.repeat(np.cumsum(counts) - counts, counts)
    padded = np.full((n_folds, int(counts.max())), scores[0], scores.dtype)
    padded[held, position] = scores
    key = (type(cal), repr(cal))
    if key not in _FOLD_TRANSFORMS:
        _FOLD_TRANSFORMS[key] = jax.jit(jax.vmap(cal._transform))
    out = np.asarray(_FOLD_TRANSFORMS[key](params, padded))
    return out[held, position].astype(np.float64)


def _fold_fits(cal: Recalibrator) -> Callable:
    """``(scores [n], labels [n], weights [F, n]) -> [F, n]``: the map fitted with each row of
    weights, applied to every score; one jitted program per kind and configuration of
    recalibrator. The fits are ``jax.vmap`` of its ``_fit``, or its own ``_fit_folds(scores,
    labels, weights)`` (batched parameters) where it has one that may be traced (not
    :attr:`Recalibrator.folds_on_host`)."""
    if getattr(cal, "folds_on_host", False):
        raise TypeError(f"{type(cal).__name__} fits its folds on the host, not in a program")
    key = (type(cal), repr(cal))
    if key not in _FOLD_FITS:

        def one(scores: jax.Array, labels: jax.Array, weight: jax.Array) -> jax.Array:
            return cal._transform(cal._fit(scores, labels, weight), scores)

        def stacked(scores: jax.Array, labels: jax.Array, weights: jax.Array) -> jax.Array:
            params = cal._fit_folds(scores, labels, weights)
            return jax.vmap(cal._transform, in_axes=(0, None))(params, scores)

        batched = stacked if hasattr(cal, "_fit_folds") else jax.vmap(one, in_axes=(None, None, 0))
        _FOLD_FITS[key] = jax.jit(batched)
    return _FOLD_FITS[key]
