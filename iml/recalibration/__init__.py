"""Recalibration baselines and the paper's analytic loss correction, behind one interface.

Every method is a pair of pure JAX functions, ``*_fit(scores, labels, ...) -> params`` and
``*_transform(params, scores) -> calibrated scores``, that work under ``jax.jit`` (and ``vmap``
over replicates: all shapes are fixed by the input's), and a thin class over them that feels like
scikit-learn: ``fit(scores, labels)`` then ``transform(scores)``, or ``fit_transform``.

=====================================  ========================================================
method                                 fitted parameters
=====================================  ========================================================
:class:`PlattScaling`                  ``sigmoid(a logit(s) + b)``: two numbers (Platt 1999)
:class:`BetaCalibration`               ``sigmoid(a ln s - b ln(1 - s) + c)``, ``a, b >= 0``:
                                       three numbers (Kull et al. 2017); the loss correction
                                       is its case ``a = b = 1``, ``c = -logit(beta)``
:class:`TemperatureScaling`            ``softmax(z / T)``: one number (Guo et al. 2017)
:class:`IsotonicCalibration`           a monotone step function by pool adjacent violators
:class:`HistogramBinning`              the event rate per score bin (Zadrozny & Elkan 2001)
:class:`PriorShiftCorrection`          ``d a / (1 + (d - 1) a)``, eq. ``correct-prior``, with
                                       ``d`` from the training and target class ratios (Elkan
                                       2001; Saerens et al. 2002; Dal Pozzolo et al. 2015)
:class:`LossCorrection`                nothing: the loss-corrected score ``(c^L)^{-1}(a)`` of
                                       the known loss (Proposition 4, Corollary 1, eq.
                                       ``transformation``)
=====================================  ========================================================

The paper's claim (Section 1) is that where the loss is known the analytic correction needs no
estimation; ``experiments/studies/recalibration_vs_size.py`` measures what the fitted methods lose
against it as the calibration set shrinks.

Binary scores are positive-class probabilities of shape ``[N]`` with labels in ``{0, 1}``;
multiclass scores have classes on the last axis, ``[N, n]``, with integer labels ``[N]``; a
``sample_weight`` is optional, non-negative weights ``[N]``. Concrete bad input raises
``ValueError`` naming the argument; under ``jit`` nothing is checked.

One idea per module, all of whose public names are imported here:

* :mod:`~iml.recalibration.interface`: :class:`Recalibrator`, the ``fit``/``transform`` base class.
* :mod:`~iml.recalibration.newton`: :func:`logistic_newton`, logistic regression by Newton's method.
* :mod:`~iml.recalibration.logistic`: Platt scaling, beta calibration and temperature scaling.
* :mod:`~iml.recalibration.nonparametric`: isotonic regression and histogram binning.
* :mod:`~iml.recalibration.corrections`: the paper's loss correction, which fits nothing, and the
  prior-shift correction, eq. ``correct-prior``.
* :mod:`~iml.recalibration.cross_fit`: recalibration cross-fitted over folds, and the baselines
  a run's report fits so.

The input checks and coercions they share live in :mod:`iml.recalibration._common` and, those
shared with the calibration analysis, in :mod:`iml.calibration._checks`.
"""

from iml.recalibration.corrections import (
    LossCorrection,
    PriorShiftCorrection,
    prior_shift_ratio,
    prior_shift_transform,
)
from iml.recalibration.cross_fit import BASELINES, cross_fit
from iml.recalibration.interface import Recalibrator
from iml.recalibration.logistic import (
    BetaCalibration,
    BetaCalibrationParams,
    PlattParams,
    PlattScaling,
    TemperatureScaling,
    beta_calibration_fit,
    beta_calibration_transform,
    platt_fit,
    platt_transform,
    temperature_fit,
    temperature_transform,
)
from iml.recalibration.newton import NewtonFit, logistic_newton
from iml.recalibration.nonparametric import (
    HistogramBinning,
    HistogramParams,
    IsotonicCalibration,
    IsotonicParams,
    histogram_binning_fit,
    histogram_binning_transform,
    isotonic_fit,
    isotonic_transform,
    pool_adjacent_violators,
)

__all__ = [
    "BASELINES",
    "BetaCalibration",
    "BetaCalibrationParams",
    "HistogramBinning",
    "HistogramParams",
    "IsotonicCalibration",
    "IsotonicParams",
    "LossCorrection",
    "NewtonFit",
    "PlattParams",
    "PlattScaling",
    "PriorShiftCorrection",
    "Recalibrator",
    "TemperatureScaling",
    "beta_calibration_fit",
    "beta_calibration_transform",
    "cross_fit",
    "histogram_binning_fit",
    "histogram_binning_transform",
    "isotonic_fit",
    "isotonic_transform",
    "logistic_newton",
    "platt_fit",
    "platt_transform",
    "pool_adjacent_violators",
    "prior_shift_ratio",
    "prior_shift_transform",
    "temperature_fit",
    "temperature_transform",
]
