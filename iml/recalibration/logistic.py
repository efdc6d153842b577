"""The logistic recalibration maps of the score: Platt scaling, ``sigmoid(a logit(s) + b)``
(Platt 1999), and beta calibration, ``sigmoid(a ln s - b ln(1 - s) + c)`` with ``a, b >= 0``
(Kull, Silva Filho & Flach 2017), which contains Platt scaling on logits and the paper's loss
correction for the beta-weighted loss, both fitted by
:func:`~iml.recalibration.newton.logistic_newton`; and temperature scaling, ``sigmoid(z / T)``
or ``softmax(z / T)`` with the one temperature ``T`` that minimises the negative
log-likelihood (Guo, Pleiss, Sun & Weinberger 2017), found by Newton's method on binary logits
and by bisection on multiclass ones.
Their pure ``*_fit``/``*_transform`` functions and their
:class:`~iml.recalibration.interface.Recalibrator` classes.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.calibration._checks import as_float, check_weights
from iml.recalibration._common import (
    EPS,
    as_weights,
    check_binary,
    check_labels,
    check_scores,
    logit,
)
from iml.recalibration.interface import Recalibrator
from iml.recalibration.newton import logistic_newton

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "BetaCalibration",
    "BetaCalibrationParams",
    "PlattParams",
    "PlattScaling",
    "TemperatureScaling",
    "beta_calibration_fit",
    "beta_calibration_transform",
    "platt_fit",
    "platt_transform",
    "temperature_fit",
    "temperature_transform",
]


class PlattParams(NamedTuple):
    """``P(y = 1 | s) = sigmoid(slope * f(s) + intercept)``, ``f`` the logit (or identity)."""

    slope: Array
    intercept: Array


#: Newton's method stops once the summed gradient's largest entry is at most this fraction of
#: the total weight: float32's rounding floor of that sum, which Newton's quadratic convergence
#: reaches in a handful of steps (a full step that only rounds keeps being taken otherwise, up
#: to ``n_iter``).
GRADIENT_TOL = 1e-6


def _tol(w: Array) -> Array:
    return GRADIENT_TOL * jnp.sum(w)


def platt_fit(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None = None,
    *,
    features: str = "logit",
    smooth_targets: bool = False,
    n_iter: int = 50,
) -> PlattParams:
    """Platt scaling: a one-feature logistic regression of the labels on the scores.

    Fitted by Newton's method (iteratively reweighted least squares, :func:`logistic_newton`)
    for at most ``n_iter`` steps, each with a backtracking line search on the log-likelihood so
    that separable data (or a calibration set without positives) drifts towards the boundary
    instead of overflowing; it stops once the gradient's largest entry is at most ``1e-6`` of the
    total weight (``GRADIENT_TOL``, float32's rounding floor of the summed gradient).

    Args:
      scores: positive-class scores ``[N]``; probabilities when ``features="logit"``.
      features: ``"logit"`` regresses on ``logit(s)`` (right for probabilities: the identity
        map is then ``slope = 1, intercept = 0``); ``"raw"`` on ``s`` itself (Platt's original
        use, on SVM margins).
      smooth_targets: replace the labels by Platt's targets ``(N+ + 1)/(N+ + 2)`` and
        ``1/(N- + 2)``, which keep the fit finite on small or one-class calibration sets.
      n_iter: most Newton steps (static; :func:`logistic_newton` stops earlier at the gradient
        tolerance or where no step descends).

    References:
      Platt (1999), Probabilistic outputs for support vector machines.
    """
    if V.is_concrete(scores, labels, sample_weight):
        if features not in ("logit", "raw"):
            raise ValueError(f"features must be 'logit' or 'raw', got {features!r}")
        check_binary(scores, labels, sample_weight, probabilities=features == "logit")
        V.check_count("n_iter", n_iter)
    s = as_float(scores)
    return _platt_kernel(s, labels, as_weights(sample_weight, s), features, smooth_targets, n_iter)


@functools.partial(jax.jit, static_argnums=(3, 4, 5))
def _platt_kernel(s, labels, w, features, smooth_targets, n_iter) -> PlattParams:
    y = jnp.asarray(labels, s.dtype)
    f = logit(s) if features == "logit" else s
    if smooth_targets:
        n_pos = jnp.sum(w * y)
        n_neg = jnp.sum(w * (1.0 - y))
        y = jnp.where(y == 1, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    X = jnp.stack([f, jnp.ones_like(f)], axis=1)
    theta = logistic_newton(X, y, w, jnp.array([1.0, 0.0]), max_iter=n_iter, tol=_tol(w)).theta
    return PlattParams(slope=theta[0], intercept=theta[1])


def platt_transform(params: PlattParams, scores: ArrayLike, *, features: str = "logit") -> Array:
    """Apply fitted :class:`PlattParams`: ``sigmoid(slope * f(s) + intercept)``."""
    s = as_float(scores)
    f = logit(s) if features == "logit" else s
    return jax.nn.sigmoid(params.slope * f + params.intercept)


class BetaCalibrationParams(NamedTuple):
    """``P(y = 1 | s) = sigmoid(a ln s - b ln(1 - s) + c)`` with ``a, b >= 0``."""

    a: Array
    b: Array
    c: Array


def _beta_features(s: Array) -> tuple[Array, Array]:
    """The features ``ln s`` and ``-ln(1 - s)``, with ``s`` clipped to ``[eps, 1 - eps]``."""
    s = jnp.clip(s, EPS, 1.0 - EPS)
    return jnp.log(s), -jnp.log1p(-s)


def beta_calibration_fit(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None = None,
    *,
    n_iter: int = 50,
) -> BetaCalibrationParams:
    """Beta calibration: a logistic regression of the labels on ``ln s`` and ``-ln(1 - s)``.

    The calibrated score is ``q = sigmoid(a ln s - b ln(1 - s) + c)``, the family of maps that
    Kull et al. (2017) derive from beta-distributed scores within each class. It contains Platt
    scaling on logits (``a = b``), the identity (``a = b = 1, c = 0``) and the paper's loss
    correction for the beta-weighted loss (``a = b = 1``, ``c = -logit(beta)``: Corollary 1,
    eq. ``transformation``, gives ``logit (c^beta)^{-1}(s) = logit s - logit beta``), so on
    scores of a loss-calibrated model it estimates from labels what the correction knows in
    advance.

    Kull et al. keep ``a, b >= 0`` so that the map is non-decreasing: when the unconstrained fit
    has ``a < 0``, the model is refitted without the ``ln s`` feature (``a = 0``); otherwise,
    when ``b < 0``, without ``-ln(1 - s)`` (``b = 0``). If that refit's remaining coefficient is
    negative as well (scores that rank the classes backwards), ``a = b = 0`` and ``c`` is the
    logit of the weighted positive rate. Each fit is Newton's method, as in :func:`platt_fit`;
    the refits run only where a coefficient is negative (``jax.lax.cond``; under ``vmap`` every
    candidate is fitted, so :class:`BetaCalibration` fits the folds of a cross-fit as one stack
    of weights, refitting where any fold needs it), and one candidate is selected with
    ``jnp.where``, so the rule holds under ``jit``.

    Args:
      scores: positive-class probabilities ``[N]`` (clipped to ``[1e-7, 1 - 1e-7]``).
      n_iter: most Newton steps of each fit (static).

    Returns:
      The fitted :class:`BetaCalibrationParams`, with ``a, b >= 0``.

    References:
      Kull, Silva Filho & Flach (2017), Beta calibration: a well-founded and easily implemented
      improvement on logistic calibration for binary classifiers. AISTATS.
    """
    if V.is_concrete(scores, labels, sample_weight):
        check_binary(scores, labels, sample_weight)
        V.check_count("n_iter", n_iter)
    s = as_float(scores)
    return _beta_calibration_kernel(
        s, jnp.asarray(labels, s.dtype), as_weights(sample_weight, s), n_iter
    )


@functools.partial(jax.jit, static_argnums=(3,))
def _beta_calibration_kernel(s: Array, y: Array, w: Array, n_iter: int) -> BetaCalibrationParams:
    """The fit of weights ``w`` ``[n]``, or one fit per row of ``w`` ``[F, n]`` (fields
    ``[F]``), whose refits run where any row needs them."""
    rows = jnp.atleast_2d(w)
    X = jnp.stack([*_beta_features(s), jnp.ones_like(s)], axis=1)
    zero = jnp.zeros(rows.shape[0], s.dtype)

    def fit(columns: list[int], start: list[float]) -> Array:  # [F, k]: each row's coefficients
        def one(weight: Array) -> Array:
            theta = jnp.array(start, s.dtype)
            return logistic_newton(X[:, columns], y, weight, theta, max_iter=n_iter,
                                   tol=_tol(weight)).theta  # fmt: skip

        return jax.vmap(one)(rows)

    # The unconstrained fit starts at the identity map, the refits at their feature's identity.
    a, b, c = fit([0, 1, 2], [1.0, 1.0, 0.0]).T

    def refits() -> tuple[Array, Array, Array, Array]:
        b_only, c_b = fit([1, 2], [1.0, 0.0]).T
        a_only, c_a = fit([0, 2], [1.0, 0.0]).T
        return b_only, c_b, a_only, c_a

    # The refits only matter where a coefficient is negative: skipped where no row has one.
    unused = (zero + 1.0, zero, zero + 1.0, zero)  # positive, so never chosen when unused
    b_only, c_b, a_only, c_a = jax.lax.cond(jnp.any((a < 0) | (b < 0)), refits, lambda: unused)
    rate = jnp.clip(jnp.sum(rows * y, axis=1) / jnp.sum(rows, axis=1), EPS, 1.0 - EPS)
    candidates = jnp.stack(
        [
            jnp.stack([a, b, c]),
            jnp.stack([zero, b_only, c_b]),  # a < 0: refit without ln s
            jnp.stack([a_only, zero, c_a]),  # b < 0: refit without -ln(1 - s)
            jnp.stack([zero, zero, logit(rate)]),  # the refit's coefficient < 0 as well
        ]
    )  # [4, 3, F]
    choice = jnp.where(
        a < 0,
        jnp.where(b_only < 0, 3, 1),
        jnp.where(b < 0, jnp.where(a_only < 0, 3, 2), 0),
    )
    chosen = jnp.take_along_axis(candidates, choice[None, None, :], axis=0)[0]  # [3, F]
    if w.ndim == 1:
        chosen = chosen[:, 0]
    return BetaCalibrationParams(a=chosen[0], b=chosen[1], c=chosen[2])


def beta_calibration_transform(params: BetaCalibrationParams, scores: ArrayLike) -> Array:
    """Apply fitted :class:`BetaCalibrationParams`: ``sigmoid(a ln s - b ln(1 - s) + c)``."""
    log_s, minus_log_1ms = _beta_features(as_float(scores))
    return jax.nn.sigmoid(params.a * log_s + params.b * minus_log_1ms + params.c)


class PlattScaling(Recalibrator):
    """Platt scaling on the logit of the score (:func:`platt_fit`).

    Args:
      smooth_targets: Platt's smoothed targets (default ``True``, as in Platt 1999 and
        scikit-learn's ``CalibratedClassifierCV(method="sigmoid")``).
      n_iter: Newton steps.
    """

    def __init__(self, smooth_targets: bool = True, n_iter: int = 50) -> None:
        self.smooth_targets = smooth_targets
        self.n_iter = n_iter

    fits_by_weight = True
    folds_at_once = True

    def _fit(self, scores, labels, sample_weight) -> PlattParams:
        return platt_fit(
            scores, labels, sample_weight, smooth_targets=self.smooth_targets, n_iter=self.n_iter
        )

    def _transform(self, params, scores) -> Array:
        return platt_transform(params, scores)


class BetaCalibration(Recalibrator):
    """Beta calibration with ``a, b >= 0`` (:func:`beta_calibration_fit`).

    Args:
      n_iter: Newton steps of each fit.
    """

    def __init__(self, n_iter: int = 50) -> None:
        self.n_iter = n_iter

    fits_by_weight = True
    folds_at_once = True

    def _fit(self, scores, labels, sample_weight) -> BetaCalibrationParams:
        return beta_calibration_fit(scores, labels, sample_weight, n_iter=self.n_iter)

    def _fit_folds(self, scores, labels, weights) -> BetaCalibrationParams:
        s = as_float(scores)
        return _beta_calibration_kernel(s, jnp.asarray(labels, s.dtype), weights, self.n_iter)

    def _transform(self, params, scores) -> Array:
        return beta_calibration_transform(params, scores)


def _temperature_nll(inverse_t: Array, logits: Array, labels: Array, w: Array) -> Array:
    z = inverse_t * logits
    if logits.ndim == 1:
        y = labels.astype(z.dtype)
        nll = -(y * jax.nn.log_sigmoid(z) + (1.0 - y) * jax.nn.log_sigmoid(-z))
    else:
        log_p = jax.nn.log_softmax(z, axis=-1)
        nll = -jnp.take_along_axis(log_p, labels[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return jnp.sum(w * nll) / jnp.sum(w)


def temperature_fit(
    logits: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None = None,
    *,
    n_iter: int = 64,
) -> Array:
    """Temperature scaling: the ``T > 0`` that minimises the NLL of ``softmax(logits / T)``.

    The NLL is convex in the inverse temperature ``a = 1/T``, and its minimiser is sought in
    ``a`` in ``[e^-12, e^12]``. Binary logits: ``sigmoid(a z)`` is a logistic regression on the
    logit without intercept, fitted by Newton's method (:func:`logistic_newton`, from ``a = 1``,
    stopping at the gradient tolerance of Platt scaling) and clipped to that range (the
    constrained minimiser, where the minimiser is finite). Where the NLL only falls towards
    ``a -> inf`` (separable labels), Newton stops where the gradient is within the tolerance,
    short of the bisection's end of range; where it is flat (all-zero logits), ``T`` is 1.
    Multiclass logits: the derivative is monotone, and bisection on ``log a`` finds the
    minimiser with a fixed number of steps.

    Args:
      logits: binary logits ``[N]`` (labels in ``{0, 1}``) or multiclass logits ``[N, n]``.
      n_iter: most Newton steps (binary) or bisection steps (multiclass) (static).

    Returns:
      The temperature ``T`` (a scalar).

    References:
      Guo, Pleiss, Sun & Weinberger (2017), On calibration of modern neural networks.
    """
    if V.is_concrete(logits, labels, sample_weight):
        check_scores(logits, "logits", probabilities=False)
        z = np.asarray(logits)
        if z.ndim not in (1, 2):
            raise ValueError(f"logits must have shape [N] or [N, n], got {z.shape}")
        if not np.isfinite(z).all():
            raise ValueError("logits contains infinite values")
        check_labels(labels, z.shape[0], 2 if z.ndim == 1 else z.shape[1])
        check_weights(sample_weight, z.shape[0])
    z = as_float(logits)
    return _temperature_kernel(z, jnp.asarray(labels), as_weights(sample_weight, z), n_iter)


@functools.partial(jax.jit, static_argnums=(3,))
def _temperature_kernel(z: Array, y: Array, w: Array, n_iter: int) -> Array:
    if z.ndim == 1:
        start = jnp.ones(1, z.dtype)
        fit = logistic_newton(z[:, None], y.astype(z.dtype), w, start, max_iter=n_iter, tol=_tol(w))
        return 1.0 / jnp.clip(fit.theta[0], jnp.exp(-12.0), jnp.exp(12.0)).astype(z.dtype)
    slope = jax.grad(_temperature_nll)

    def bisect(_: int, bounds: tuple[Array, Array]) -> tuple[Array, Array]:
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        rising = slope(jnp.exp(mid), z, y, w) > 0
        return jnp.where(rising, lo, mid), jnp.where(rising, mid, hi)

    lo, hi = jax.lax.fori_loop(
        0, n_iter, bisect, (jnp.asarray(-12.0, z.dtype), jnp.asarray(12.0, z.dtype))
    )
    return jnp.exp(-0.5 * (lo + hi))


def temperature_transform(temperature: ArrayLike, logits: ArrayLike) -> Array:
    """Apply a temperature ``T``: ``sigmoid(z / T)`` (binary) or ``softmax(z / T)`` (multiclass)."""
    z = as_float(logits) / jnp.asarray(temperature)
    return jax.nn.sigmoid(z) if z.ndim == 1 else jax.nn.softmax(z, axis=-1)


class TemperatureScaling(Recalibrator):
    """Temperature scaling (:func:`temperature_fit`), binary or multiclass.

    Args:
      inputs: ``"probabilities"`` (binary ``[N]`` scores are mapped to logits, multiclass
        ``[N, n]`` probabilities to log-probabilities, which softmax turns back) or
        ``"logits"``. The output is always probabilities.
    """

    def __init__(self, inputs: str = "probabilities") -> None:
        if inputs not in ("probabilities", "logits"):
            raise ValueError(f"inputs must be 'probabilities' or 'logits', got {inputs!r}")
        self.inputs = inputs

    fits_by_weight = True
    folds_at_once = True

    def _logits(self, scores: ArrayLike) -> Array:
        x = as_float(scores)
        if self.inputs == "logits":
            return x
        return logit(x) if x.ndim == 1 else jnp.log(jnp.clip(x, EPS, 1.0))

    def _check_transform_input(self, scores: ArrayLike) -> None:
        check_scores(scores, probabilities=self.inputs == "probabilities")

    def _fit(self, scores, labels, sample_weight) -> Array:
        self._check_transform_input(scores)
        return temperature_fit(self._logits(scores), labels, sample_weight)

    def _transform(self, params, scores) -> Array:
        return temperature_transform(params, self._logits(scores))
