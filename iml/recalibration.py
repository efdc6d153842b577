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
estimation; ``experiments/recalibration_vs_size.py`` measures what the fitted methods lose
against it as the calibration set shrinks.

Binary scores are positive-class probabilities of shape ``[N]`` with labels in ``{0, 1}``;
multiclass scores have classes on the last axis, ``[N, n]``, with integer labels ``[N]``.
Concrete bad input raises ``ValueError`` naming the argument; under ``jit`` nothing is checked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.spec import LossLike, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
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

# Scores are clipped this far from 0 and 1 before taking logits.
_EPS = 1e-7


# ----------------------------------------------------------------------------------------------
# Input checks (concrete arrays only: under jit the arithmetic must stay branch-free)
# ----------------------------------------------------------------------------------------------


def _check_scores(scores: ArrayLike, name: str = "scores", probabilities: bool = True) -> None:
    s = np.asarray(scores)
    if s.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.issubdtype(s.dtype, np.number) or np.issubdtype(s.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real numbers, got dtype {s.dtype}")
    if probabilities:
        V.check_unit(name, s)
    elif np.isnan(s).any():
        raise ValueError(f"{name} contains NaN")


def _check_labels(labels: ArrayLike, n: int, n_classes: int = 2, name: str = "labels") -> None:
    y = np.asarray(labels)
    if y.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) to match the scores, got {y.shape}")
    if np.isnan(y.astype(float)).any():
        raise ValueError(f"{name} contains NaN")
    if not np.isin(y, np.arange(n_classes)).all():
        allowed = "{0, 1}" if n_classes == 2 else f"{{0, ..., {n_classes - 1}}}"
        raise ValueError(f"{name} must take values in {allowed}")


def _check_weights(sample_weight: ArrayLike | None, n: int) -> None:
    if sample_weight is None:
        return
    w = np.asarray(sample_weight, dtype=float)
    V.check_shape("sample_weight", w, (n,))
    V.check_weights("sample_weight", w)


def _check_binary(scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None) -> None:
    _check_scores(scores)
    s = np.asarray(scores)
    if s.ndim != 1:
        raise ValueError(f"scores must be one-dimensional (binary), got shape {s.shape}")
    _check_labels(labels, s.shape[0])
    _check_weights(sample_weight, s.shape[0])


def _weights(sample_weight: ArrayLike | None, like: Array) -> Array:
    if sample_weight is None:
        return jnp.ones(like.shape[0], like.dtype)
    return jnp.asarray(sample_weight, like.dtype)


def _float(x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    return x.astype(jnp.result_type(x.dtype, jnp.float32))


def _logit(p: Array) -> Array:
    p = jnp.clip(p, _EPS, 1.0 - _EPS)
    return jnp.log(p) - jnp.log1p(-p)


# ----------------------------------------------------------------------------------------------
# Logistic regression by Newton's method (shared by Platt scaling and beta calibration)
# ----------------------------------------------------------------------------------------------


def _dot(a: Array, b: Array) -> Array:
    """A product in full float32 precision (accelerators otherwise may round inputs to TF32)."""
    return jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST)


# Eigenvalues of a Hessian are raised to at least this fraction of its largest (float32).
_EIGEN_CUTOFF = 1e-6


class NewtonFit(NamedTuple):
    """The result of :func:`logistic_newton`."""

    theta: Array  # [k] coefficients ([k, n] for a multinomial loss)
    objective: Array  # the objective there
    grad: Array  # its gradient there, shaped as theta
    iterations: Array  # Newton steps taken


def logistic_newton(
    X: Array,
    y: Array,
    w: Array,
    theta: Array,
    *,
    max_iter: int,
    tol: float | Array = 0.0,
    penalty: Array | None = None,
) -> NewtonFit:
    """Coefficients ``[k]`` minimising ``sum_i w_i logloss(y_i, sigmoid(X_i . theta)) +
    sum_j penalty_j theta_j^2 / 2`` by Newton's method (iteratively reweighted least squares).

    Each step solves the Newton system with the Hessian's eigenvalues raised to at least ``1e-6``
    of the largest. Collinear columns, or a column no weighted row uses, have no gradient along
    their null directions, so the step stays finite; a direction in which the loss only flattens
    out towards infinity (the coefficient of a category whose rows all share a label, without a
    penalty) keeps moving, where dropping its small eigenvalue would stall it short of the
    tolerance. The step then backtracks, halving, to the longest step that does not increase the
    objective beyond float rounding; separable data (or a calibration set without positives)
    then drifts towards the boundary instead of overflowing. Each trial objective is summed
    exactly as the current one is, so that near the optimum their float32 rounding agrees and
    the comparison stays meaningful (trial values summed in another order made members stall
    just above a tight tolerance). The iteration stops after ``max_iter`` steps, when the
    gradient's largest entry is at most ``tol``, or when no step length descends. Pure and
    jittable (``max_iter`` static); the kernel of Platt scaling and beta calibration (the sweeps'
    many members have their own batched solver, :mod:`iml.training.exact`).

    Args:
      X: ``[N, k]`` design (with a column of ones for an intercept).
      y: ``[N]`` targets in ``[0, 1]`` (fractional ones, such as Platt's smoothed targets, too).
      w: ``[N]`` non-negative weights.
      theta: ``[k]`` starting point.
      max_iter: most Newton steps.
      tol: gradient tolerance (0: run ``max_iter`` steps unless no step descends).
      penalty: ``[k]`` ridge coefficients (default none).
    """

    def hessian(v: Array) -> Array:
        return _dot((X * v[:, None]).T, X)

    def loss(z: Array) -> Array:
        # the log loss on logits, softplus(z) - y z, written stably
        return _dot(w, jnp.logaddexp(0.0, z) - y * z)

    def logit_gradient(z: Array) -> Array:
        return w * (jax.nn.sigmoid(z) - y)

    def loss_hessian(z: Array) -> Array:
        p = jax.nn.sigmoid(z)
        return hessian(w * p * (1.0 - p))

    return _newton_on_logits(
        X, theta, loss, logit_gradient, loss_hessian, penalty, max_iter=max_iter, tol=tol
    )


def _newton_on_logits(
    X: Array,
    theta: Array,
    loss: Callable[[Array], Array],
    logit_gradient: Callable[[Array], Array],
    loss_hessian: Callable[[Array], Array],
    penalty: Array | None,
    *,
    max_iter: int,
    tol: float | Array,
) -> NewtonFit:
    """Newton's method (the rules of :func:`logistic_newton`) on ``loss(X theta) + sum_j
    penalty_j ||theta_j||^2 / 2`` for a convex ``loss`` of the logits ``z = X theta`` (``theta
    [k]`` or ``[k, n]``), given its gradient in ``z`` and its Hessian in ``theta`` (flattened)."""
    k = X.shape[1]
    penalty = jnp.zeros(k, X.dtype) if penalty is None else penalty
    ridge = jnp.reshape(penalty, (k,) + (1,) * (jnp.ndim(theta) - 1))  # one per row of theta
    halvings = 2.0 ** -jnp.arange(20, dtype=X.dtype)

    def objective(z: Array, theta: Array) -> Array:
        return loss(z) + 0.5 * jnp.sum(ridge * theta * theta)

    def gradient(z: Array, theta: Array) -> Array:
        return _dot(X.T, logit_gradient(z)) + ridge * theta

    def cond(carry):
        _, _, grad, it, stalled = carry
        return (it < max_iter) & (jnp.max(jnp.abs(grad)) > tol) & ~stalled

    def body(carry):
        theta, z, grad, it, _ = carry
        shape = theta.shape
        curvature = loss_hessian(z) + jnp.diag(jnp.broadcast_to(ridge, shape).ravel())
        eigenvalues, vectors = jnp.linalg.eigh(curvature)
        inverse = 1.0 / jnp.maximum(eigenvalues, _EIGEN_CUTOFF * jnp.max(eigenvalues))
        step = _dot(vectors, inverse * _dot(vectors.T, grad.ravel())).reshape(shape)
        step = jnp.where(jnp.isfinite(step), step, 0.0)
        # The logits are linear in theta: every trial step costs elementwise work only.
        dz = _dot(X, step)
        current = objective(z, theta)

        def descends(k: Array) -> Array:
            value = objective(z - halvings[k] * dz, theta - halvings[k] * step)
            return jnp.isfinite(value) & (value <= current + 1e-7 * jnp.abs(current))

        # The longest halving that descends, tried in turn: mostly the first, the full step.
        k = jax.lax.while_loop(
            lambda k: (k < halvings.shape[0]) & ~descends(jnp.minimum(k, halvings.shape[0] - 1)),
            lambda k: k + 1,
            jnp.int32(0),
        )
        h = jnp.where(k < halvings.shape[0], halvings[jnp.minimum(k, halvings.shape[0] - 1)], 0.0)
        theta = theta - h * step
        z = _dot(X, theta)
        # No descent at any step length: float precision is reached, stop.
        return theta, z, gradient(z, theta), it + 1, h == 0

    theta = jnp.asarray(theta, X.dtype)
    z = _dot(X, theta)
    start = (theta, z, gradient(z, theta), jnp.int32(0), jnp.bool_(False))
    theta, z, grad, it, _ = jax.lax.while_loop(cond, body, start)
    return NewtonFit(theta=theta, objective=objective(z, theta), grad=grad, iterations=it)


# ----------------------------------------------------------------------------------------------
# Platt scaling
# ----------------------------------------------------------------------------------------------


class PlattParams(NamedTuple):
    """``P(y = 1 | s) = sigmoid(slope * f(s) + intercept)``, ``f`` the logit (or identity)."""

    slope: Array
    intercept: Array


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
    instead of overflowing.

    Args:
      scores: positive-class scores ``[N]``; probabilities when ``features="logit"``.
      labels: labels ``[N]`` in ``{0, 1}``.
      sample_weight: optional non-negative weights ``[N]``.
      features: ``"logit"`` regresses on ``logit(s)`` (right for probabilities: the identity
        map is then ``slope = 1, intercept = 0``); ``"raw"`` on ``s`` itself (Platt's original
        use, on SVM margins).
      smooth_targets: replace the labels by Platt's targets ``(N+ + 1)/(N+ + 2)`` and
        ``1/(N- + 2)``, which keep the fit finite on small or one-class calibration sets.
      n_iter: most Newton steps (static; :func:`logistic_newton` stops earlier where no step
        descends).

    Returns:
      The fitted :class:`PlattParams`.

    References:
      Platt (1999), Probabilistic outputs for support vector machines.
    """
    if V.is_concrete(scores, labels, sample_weight):
        if features not in ("logit", "raw"):
            raise ValueError(f"features must be 'logit' or 'raw', got {features!r}")
        if features == "logit":
            _check_binary(scores, labels, sample_weight)
        else:
            _check_scores(scores, probabilities=False)
            _check_labels(labels, np.asarray(scores).shape[0])
            _check_weights(sample_weight, np.asarray(scores).shape[0])
        V.check_count("n_iter", n_iter)
    s = _float(scores)
    return _platt_kernel(s, labels, _weights(sample_weight, s), features, smooth_targets, n_iter)


@functools.partial(jax.jit, static_argnums=(3, 4, 5))
def _platt_kernel(
    s: Array, labels: ArrayLike, w: Array, features: str, smooth_targets: bool, n_iter: int
) -> PlattParams:
    y = jnp.asarray(labels, s.dtype)
    f = _logit(s) if features == "logit" else s
    if smooth_targets:
        n_pos = jnp.sum(w * y)
        n_neg = jnp.sum(w * (1.0 - y))
        y = jnp.where(y == 1, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    X = jnp.stack([f, jnp.ones_like(f)], axis=1)
    theta = logistic_newton(X, y, w, jnp.array([1.0, 0.0]), max_iter=n_iter).theta
    return PlattParams(slope=theta[0], intercept=theta[1])


def platt_transform(params: PlattParams, scores: ArrayLike, *, features: str = "logit") -> Array:
    """Apply fitted :class:`PlattParams`: ``sigmoid(slope * f(s) + intercept)``."""
    s = _float(scores)
    f = _logit(s) if features == "logit" else s
    return jax.nn.sigmoid(params.slope * f + params.intercept)


# ----------------------------------------------------------------------------------------------
# Beta calibration
# ----------------------------------------------------------------------------------------------


class BetaCalibrationParams(NamedTuple):
    """``P(y = 1 | s) = sigmoid(a ln s - b ln(1 - s) + c)`` with ``a, b >= 0``."""

    a: Array
    b: Array
    c: Array


def _beta_features(s: Array) -> tuple[Array, Array]:
    """The features ``ln s`` and ``-ln(1 - s)``, with ``s`` clipped to ``[eps, 1 - eps]``."""
    s = jnp.clip(s, _EPS, 1.0 - _EPS)
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
    logit of the weighted positive rate. All candidate models are fitted and one is selected
    with ``jnp.where``, so the rule holds under ``jit`` and ``vmap``. Each fit is Newton's
    method with a backtracking line search (the kernel of :func:`platt_fit`).

    Args:
      scores: positive-class probabilities ``[N]`` (clipped to ``[1e-7, 1 - 1e-7]``).
      labels: labels ``[N]`` in ``{0, 1}``.
      sample_weight: optional non-negative weights ``[N]``.
      n_iter: most Newton steps of each fit (static).

    Returns:
      The fitted :class:`BetaCalibrationParams`, with ``a, b >= 0``.

    References:
      Kull, Silva Filho & Flach (2017), Beta calibration: a well-founded and easily implemented
      improvement on logistic calibration for binary classifiers. AISTATS.
    """
    if V.is_concrete(scores, labels, sample_weight):
        _check_binary(scores, labels, sample_weight)
        V.check_count("n_iter", n_iter)
    s = _float(scores)
    return _beta_calibration_kernel(
        s, jnp.asarray(labels, s.dtype), _weights(sample_weight, s), n_iter
    )


@functools.partial(jax.jit, static_argnums=(3,))
def _beta_calibration_kernel(s: Array, y: Array, w: Array, n_iter: int) -> BetaCalibrationParams:
    X = jnp.stack([*_beta_features(s), jnp.ones_like(s)], axis=1)
    zero = jnp.zeros((), s.dtype)
    # The unconstrained fit starts at the identity map, the refits at their feature's identity.
    a, b, c = logistic_newton(X, y, w, jnp.array([1.0, 1.0, 0.0]), max_iter=n_iter).theta
    b_only, c_b = logistic_newton(X[:, 1:], y, w, jnp.array([1.0, 0.0]), max_iter=n_iter).theta
    a_only, c_a = logistic_newton(X[:, ::2], y, w, jnp.array([1.0, 0.0]), max_iter=n_iter).theta
    rate = jnp.clip(jnp.sum(w * y) / jnp.sum(w), _EPS, 1.0 - _EPS)
    candidates = jnp.stack(
        [
            jnp.stack([a, b, c]),
            jnp.stack([zero, b_only, c_b]),  # a < 0: refit without ln s
            jnp.stack([a_only, zero, c_a]),  # b < 0: refit without -ln(1 - s)
            jnp.stack([zero, zero, _logit(rate)]),  # the refit's coefficient < 0 as well
        ]
    )
    choice = jnp.where(
        a < 0,
        jnp.where(b_only < 0, 3, 1),
        jnp.where(b < 0, jnp.where(a_only < 0, 3, 2), 0),
    )
    chosen = candidates[choice]
    return BetaCalibrationParams(a=chosen[0], b=chosen[1], c=chosen[2])


def beta_calibration_transform(params: BetaCalibrationParams, scores: ArrayLike) -> Array:
    """Apply fitted :class:`BetaCalibrationParams`: ``sigmoid(a ln s - b ln(1 - s) + c)``."""
    log_s, minus_log_1ms = _beta_features(_float(scores))
    return jax.nn.sigmoid(params.a * log_s + params.b * minus_log_1ms + params.c)


# ----------------------------------------------------------------------------------------------
# Temperature scaling
# ----------------------------------------------------------------------------------------------


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

    The NLL is convex in the inverse temperature ``1/T``, so its derivative is monotone and
    bisection on ``log(1/T)`` over ``[-12, 12]`` finds the minimiser with a fixed number of steps
    (jit- and vmap-friendly, no tolerance to tune).

    Args:
      logits: binary logits ``[N]`` (labels in ``{0, 1}``) or multiclass logits ``[N, n]``.
      labels: ``[N]`` integer labels.
      sample_weight: optional non-negative weights ``[N]``.
      n_iter: bisection steps (static).

    Returns:
      The temperature ``T`` (a scalar).

    References:
      Guo, Pleiss, Sun & Weinberger (2017), On calibration of modern neural networks.
    """
    if V.is_concrete(logits, labels, sample_weight):
        _check_scores(logits, "logits", probabilities=False)
        z = np.asarray(logits)
        if z.ndim not in (1, 2):
            raise ValueError(f"logits must have shape [N] or [N, n], got {z.shape}")
        if not np.isfinite(z).all():
            raise ValueError("logits contains infinite values")
        _check_labels(labels, z.shape[0], 2 if z.ndim == 1 else z.shape[1])
        _check_weights(sample_weight, z.shape[0])
    z = _float(logits)
    return _temperature_kernel(z, jnp.asarray(labels), _weights(sample_weight, z), n_iter)


@functools.partial(jax.jit, static_argnums=(3,))
def _temperature_kernel(z: Array, y: Array, w: Array, n_iter: int) -> Array:
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
    z = _float(logits) / jnp.asarray(temperature)
    return jax.nn.sigmoid(z) if z.ndim == 1 else jax.nn.softmax(z, axis=-1)


# ----------------------------------------------------------------------------------------------
# Isotonic regression by pool adjacent violators
# ----------------------------------------------------------------------------------------------


class IsotonicParams(NamedTuple):
    """A monotone piecewise-linear map: knots ``x`` (sorted) and values ``y``, both ``[N]``.

    Knots past the number of distinct fitted scores repeat the last knot (fixed-size padding).
    """

    x: Array
    y: Array


def pool_adjacent_violators(values: ArrayLike, weights: ArrayLike, n: ArrayLike) -> Array:
    """Weighted least-squares non-decreasing fit of ``values[:n]`` (in their given order).

    The classic stack algorithm with fixed-size buffers: each value is pushed as a block and
    merged with its predecessor while their means violate monotonicity. Entries from ``n`` on
    are ignored (padding); the output holds the fitted value of each of the first ``n`` entries
    and repeats the last fitted value after them. ``O(N)`` amortised, jit- and vmap-able.

    Args:
      values: ``[N]`` responses in the order of the covariate.
      weights: ``[N]`` positive weights.
      n: how many leading entries are real (an int or a traced scalar).

    Returns:
      ``[N]`` fitted values.
    """
    v = _float(values)
    w = jnp.asarray(weights, v.dtype)
    size = v.shape[0]
    zeros = jnp.zeros(size, v.dtype)

    def violated(state: tuple[Array, Array, Array, Array]) -> Array:
        wy, ws, _, k = state
        # mean[k-2] > mean[k-1], cross-multiplied (weights are positive).
        return (k >= 2) & (wy[k - 2] * ws[k - 1] > wy[k - 1] * ws[k - 2])

    def merge(state: tuple[Array, Array, Array, Array]) -> tuple[Array, Array, Array, Array]:
        wy, ws, count, k = state
        wy = wy.at[k - 2].add(wy[k - 1]).at[k - 1].set(0.0)
        ws = ws.at[k - 2].add(ws[k - 1]).at[k - 1].set(0.0)
        count = count.at[k - 2].add(count[k - 1]).at[k - 1].set(0)
        return wy, ws, count, k - 1

    def push(i: Array, state: tuple[Array, Array, Array, Array]) -> tuple:
        wy, ws, count, k = state
        state = (wy.at[k].set(w[i] * v[i]), ws.at[k].set(w[i]), count.at[k].set(1), k + 1)
        return jax.lax.while_loop(violated, merge, state)

    init = (zeros, zeros, jnp.zeros(size, jnp.int32), jnp.asarray(0, jnp.int32))
    wy, ws, count, k = jax.lax.fori_loop(0, jnp.asarray(n, jnp.int32), push, init)
    means = wy / jnp.where(ws > 0, ws, 1.0)
    fitted = jnp.repeat(means, count, total_repeat_length=size)
    last = means[jnp.maximum(k - 1, 0)]
    return jnp.where(jnp.arange(size) < n, fitted, last)


def isotonic_fit(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
) -> IsotonicParams:
    """Isotonic regression of the labels on the scores (Zadrozny & Elkan 2002).

    Tied scores are pooled first (their weighted mean label), then
    :func:`pool_adjacent_violators` fits a non-decreasing step function through the distinct
    scores; :func:`isotonic_transform` interpolates linearly between them and clips outside
    their range, as scikit-learn's ``IsotonicRegression(out_of_bounds="clip")`` does.

    Args:
      scores: ``[N]`` scores (any real numbers).
      labels: ``[N]`` labels in ``{0, 1}`` (any real responses work arithmetically).
      sample_weight: optional non-negative weights ``[N]``; rows of weight zero are ignored, so
        calibration sets of different sizes can be padded to one shape and vmapped.

    Returns:
      :class:`IsotonicParams` of size ``N``.
    """
    if V.is_concrete(scores, labels, sample_weight):
        _check_scores(scores, probabilities=False)
        s_np = np.asarray(scores)
        if s_np.ndim != 1:
            raise ValueError(f"scores must be one-dimensional, got shape {s_np.shape}")
        _check_labels(labels, s_np.shape[0])
        _check_weights(sample_weight, s_np.shape[0])
    s = _float(scores)
    return _isotonic_kernel(s, jnp.asarray(labels, s.dtype), _weights(sample_weight, s))


@jax.jit
def _isotonic_kernel(s: Array, y: Array, w: Array) -> IsotonicParams:
    size = s.shape[0]
    valid = w > 0
    # Zero-weight rows go last and join the last real group with no weight: they are padding,
    # so calibration sets of different sizes can share one shape (and be vmapped).
    order = jnp.lexsort((s, ~valid))
    s, y, w, valid = s[order], y[order], w[order], valid[order]
    is_new = jnp.concatenate([jnp.array([True]), s[1:] != s[:-1]]) & valid
    group = jnp.cumsum(is_new) - 1
    n_unique = jnp.sum(is_new)
    ws = jax.ops.segment_sum(w, group, num_segments=size)
    wy = jax.ops.segment_sum(w * y, group, num_segments=size)
    knots = jax.ops.segment_max(jnp.where(valid, s, -jnp.inf), group, num_segments=size)
    knots = jnp.where(jnp.arange(size) < n_unique, knots, knots[n_unique - 1])
    means = wy / jnp.where(ws > 0, ws, 1.0)
    fitted = pool_adjacent_violators(means, jnp.where(ws > 0, ws, 1.0), n_unique)
    return IsotonicParams(x=knots, y=fitted)


def isotonic_transform(params: IsotonicParams, scores: ArrayLike) -> Array:
    """Evaluate a fitted isotonic map: linear between knots, constant outside them."""
    return jnp.interp(_float(scores), params.x, params.y)


# ----------------------------------------------------------------------------------------------
# Histogram binning
# ----------------------------------------------------------------------------------------------


class HistogramParams(NamedTuple):
    """Bin edges ``[n_bins + 1]`` (first 0, last 1) and each bin's calibrated value ``[n_bins]``."""

    edges: Array
    values: Array


def _bin_index(edges: Array, scores: Array) -> Array:
    n_bins = edges.shape[0] - 1
    return jnp.clip(jnp.searchsorted(edges, scores, side="right") - 1, 0, n_bins - 1)


def histogram_binning_fit(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None = None,
    *,
    n_bins: int = 10,
    strategy: str = "uniform",
) -> HistogramParams:
    """Histogram binning: each score bin is mapped to its (weighted) event rate.

    Bins are ``[e_k, e_{k+1})`` (the last one closed). ``strategy="uniform"`` splits ``[0, 1]``
    into equal widths, ``"quantile"`` puts equal numbers of scores in each bin. A bin with no
    calibration data keeps the midpoint of its edges.

    Args:
      scores: ``[N]`` probabilities.
      labels: ``[N]`` labels in ``{0, 1}``.
      sample_weight: optional non-negative weights ``[N]``.
      n_bins: number of bins (static).
      strategy: ``"uniform"`` or ``"quantile"``.

    Returns:
      :class:`HistogramParams`.

    References:
      Zadrozny & Elkan (2001), Obtaining calibrated probability estimates from decision trees
      and naive Bayesian classifiers.
    """
    if V.is_concrete(scores, labels, sample_weight):
        _check_binary(scores, labels, sample_weight)
        V.check_count("n_bins", n_bins)
        if strategy not in ("uniform", "quantile"):
            raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}")
    s = _float(scores)
    return _histogram_kernel(
        s, jnp.asarray(labels, s.dtype), _weights(sample_weight, s), n_bins, strategy
    )


@functools.partial(jax.jit, static_argnums=(3, 4))
def _histogram_kernel(s: Array, y: Array, w: Array, n_bins: int, strategy: str) -> HistogramParams:
    grid = jnp.linspace(0.0, 1.0, n_bins + 1, dtype=s.dtype)
    if strategy == "quantile":
        edges = jnp.quantile(s, grid).at[0].set(0.0).at[-1].set(1.0)
    else:
        edges = grid
    index = _bin_index(edges, s)
    mass = jax.ops.segment_sum(w, index, num_segments=n_bins)
    events = jax.ops.segment_sum(w * y, index, num_segments=n_bins)
    midpoints = 0.5 * (edges[:-1] + edges[1:])
    values = jnp.where(mass > 0, events / jnp.where(mass > 0, mass, 1.0), midpoints)
    return HistogramParams(edges=edges, values=values)


def histogram_binning_transform(params: HistogramParams, scores: ArrayLike) -> Array:
    """Map each score to the calibrated value of its bin."""
    return params.values[_bin_index(params.edges, _float(scores))]


# ----------------------------------------------------------------------------------------------
# Prior-shift correction (eq. correct-prior)
# ----------------------------------------------------------------------------------------------


def prior_shift_ratio(train_prior: ArrayLike, target_prior: ArrayLike) -> Array:
    """The ratio ``d`` of eq. ``correct-prior``: target odds over training odds.

    Bayes' rule under a change of class priors from ``pi`` (training) to ``pi'`` (target)
    multiplies the posterior odds by ``(pi'_1 / pi'_0) / (pi_1 / pi_0)`` (Elkan 2001; Saerens,
    Latinne & Decaestecker 2002). Binary priors are positive-class probabilities (scalars);
    multiclass priors are vectors ``[n]``, for which the ratio is ``pi'_k / pi_k`` per class.

    The paper (Section 4) notes that the loss correction for weight ``beta`` is this correction
    with ``d = (1 - beta) / beta``.
    """
    p, q = _float(train_prior), _float(target_prior)
    if V.is_concrete(p, q):
        for name, x in (("train_prior", p), ("target_prior", q)):
            x = np.asarray(x)
            if np.isnan(x).any() or (x <= 0).any() or (x.ndim == 0 and x >= 1):
                raise ValueError(f"{name} must be probabilities strictly inside (0, 1), got {x}")
        if p.shape != q.shape:
            raise ValueError(f"train_prior {p.shape} and target_prior {q.shape} differ in shape")
    if p.ndim == 0:
        return (q / (1.0 - q)) / (p / (1.0 - p))
    return q / p


def prior_shift_transform(d: ArrayLike, scores: ArrayLike) -> Array:
    """Eq. ``correct-prior``: ``h^d(a) = d a / (1 + (d - 1) a)`` (Dal Pozzolo et al. 2015).

    Args:
      d: the odds ratio (scalar) for binary scores ``[N]``, or per-class ratios ``[n]`` for
        multiclass scores ``[N, n]``, which become ``a_k d_k / sum_j a_j d_j``.
      scores: the scores to correct.
    """
    a = _float(scores)
    d = jnp.asarray(d, a.dtype)
    if d.ndim == 0:
        return d * a / (1.0 + (d - 1.0) * a)
    shifted = a * d
    return shifted / jnp.sum(shifted, axis=-1, keepdims=True)


# ----------------------------------------------------------------------------------------------
# The scikit-learn-style interface
# ----------------------------------------------------------------------------------------------


class Recalibrator:
    """Base class: ``fit(scores, labels, sample_weight=None)``, ``transform``, ``fit_transform``.

    Subclasses hold their fitted parameters in ``params_`` (a pytree of arrays) and delegate
    the arithmetic to the pure functions of this module.
    """

    params_: Any = None

    def fit(
        self, scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> Recalibrator:
        """Fit the map from scores to calibrated probabilities; returns ``self``."""
        self.params_ = self._fit(scores, labels, sample_weight)
        return self

    def transform(self, scores: ArrayLike) -> Array:
        """Calibrated probabilities for ``scores``."""
        if self.params_ is None:
            raise ValueError(f"{type(self).__name__} is not fitted: call fit(scores, labels)")
        self._check_transform_input(scores)
        return self._transform(self.params_, scores)

    def fit_transform(
        self, scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> Array:
        """``fit(scores, labels, sample_weight)`` then ``transform(scores)``."""
        return self.fit(scores, labels, sample_weight).transform(scores)

    def _check_transform_input(self, scores: ArrayLike) -> None:
        _check_scores(scores)

    def _fit(self, scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None) -> Any:
        raise TypeError(f"{type(self).__name__} does not define _fit")

    def _transform(self, params: Any, scores: ArrayLike) -> Array:
        raise TypeError(f"{type(self).__name__} does not define _transform")

    def __repr__(self) -> str:
        public = {k: v for k, v in vars(self).items() if not k.endswith("_")}
        args = ", ".join(f"{k}={v!r}" for k, v in public.items())
        return f"{type(self).__name__}({args})"


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

    def _fit(self, scores, labels, sample_weight) -> BetaCalibrationParams:
        return beta_calibration_fit(scores, labels, sample_weight, n_iter=self.n_iter)

    def _transform(self, params, scores) -> Array:
        return beta_calibration_transform(params, scores)


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

    def _logits(self, scores: ArrayLike) -> Array:
        x = _float(scores)
        if self.inputs == "logits":
            return x
        return _logit(x) if x.ndim == 1 else jnp.log(jnp.clip(x, _EPS, 1.0))

    def _check_transform_input(self, scores: ArrayLike) -> None:
        _check_scores(scores, probabilities=self.inputs == "probabilities")

    def _fit(self, scores, labels, sample_weight) -> Array:
        self._check_transform_input(scores)
        return temperature_fit(self._logits(scores), labels, sample_weight)

    def _transform(self, params, scores) -> Array:
        return temperature_transform(params, self._logits(scores))


class IsotonicCalibration(Recalibrator):
    """Isotonic regression by pool adjacent violators (:func:`isotonic_fit`)."""

    def _fit(self, scores, labels, sample_weight) -> IsotonicParams:
        _check_binary(scores, labels, sample_weight)
        return isotonic_fit(scores, labels, sample_weight)

    def _transform(self, params, scores) -> Array:
        return isotonic_transform(params, scores)


class HistogramBinning(Recalibrator):
    """Histogram binning (:func:`histogram_binning_fit`).

    Args:
      n_bins: number of bins.
      strategy: ``"uniform"`` or ``"quantile"``.
    """

    def __init__(self, n_bins: int = 10, strategy: str = "uniform") -> None:
        self.n_bins = n_bins
        self.strategy = strategy

    def _fit(self, scores, labels, sample_weight) -> HistogramParams:
        return histogram_binning_fit(
            scores, labels, sample_weight, n_bins=self.n_bins, strategy=self.strategy
        )

    def _transform(self, params, scores) -> Array:
        return histogram_binning_transform(params, scores)


class PriorShiftCorrection(Recalibrator):
    """The prior-shift correction, eq. ``correct-prior`` (:func:`prior_shift_transform`).

    Either ``d`` is given (nothing is fitted), or ``train_prior`` is, and ``fit`` reads the
    target prior from the calibration labels' (weighted) class frequencies (or takes
    ``target_prior`` if given) and sets ``d`` by :func:`prior_shift_ratio`.

    Args:
      train_prior: the training set's positive rate (binary) or class frequencies ``[n]``.
      target_prior: the target population's; default: estimated from the calibration labels.
      d: the ratio itself (a scalar, or ``[n]`` for multiclass).
    """

    def __init__(
        self,
        train_prior: ArrayLike | None = None,
        target_prior: ArrayLike | None = None,
        d: ArrayLike | None = None,
    ) -> None:
        if d is None and train_prior is None:
            raise ValueError("PriorShiftCorrection needs train_prior or d")
        if d is not None:
            V.check_interval("d", d, 0.0, np.inf, open_low=True, open_high=True)
        self.train_prior = train_prior
        self.target_prior = target_prior
        self.d = d

    def _fit(self, scores, labels, sample_weight) -> Array:
        s = np.asarray(scores)
        _check_scores(s)
        if self.d is not None:
            return jnp.asarray(self.d, jnp.float32)
        n_classes = 2 if s.ndim == 1 else s.shape[-1]
        _check_labels(labels, s.shape[0], n_classes)
        _check_weights(sample_weight, s.shape[0])
        target = self.target_prior
        if target is None:
            w = np.ones(s.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
            freq = np.bincount(np.asarray(labels, int), weights=w, minlength=n_classes) / w.sum()
            if (freq == 0).any():
                raise ValueError("labels lack a class: the target prior cannot be estimated")
            target = freq[1] if s.ndim == 1 else freq
        return prior_shift_ratio(self.train_prior, target)

    def _transform(self, params, scores) -> Array:
        return prior_shift_transform(params, scores)


class LossCorrection(Recalibrator):
    """The paper's loss-corrected confidence score ``(c^L)^{-1}(a)``: fits nothing.

    The loss is anything :func:`iml.loss_spec` reads: a ``beta`` (binary beta-weighted loss,
    Corollary 1, eq. ``transformation``), a matrix ``B`` (multiclass B-weighted loss, inverse of
    Proposition 3 output by output: one posterior per class, rows not renormalised), a loss name
    with its parameters, a :class:`iml.LossSpec` or any differentiable loss ``L(a, y)`` (the
    generic rule). ``beta=`` and ``B=`` name the first two explicitly. ``fit`` only checks its
    input, so that the class composes with the fitted methods.
    """

    def __init__(
        self,
        loss: LossLike | None = None,
        *,
        beta: float | None = None,
        B: ArrayLike | None = None,
    ) -> None:
        if sum(x is not None for x in (loss, beta, B)) != 1:
            raise ValueError("LossCorrection needs exactly one of loss, beta or B")
        if beta is not None:
            loss = loss_spec("log", beta=beta)
        elif B is not None:
            loss = loss_spec("matrix", B=B)
        self.spec = loss_spec(loss)
        if self.spec.batch_shape:
            raise ValueError(
                f"LossCorrection corrects for one loss, not a batch of shape "
                f"{self.spec.batch_shape}"
            )
        self.params_ = {}  # nothing to fit: transform works before fit

    def _fit(self, scores, labels, sample_weight) -> dict:
        s = np.asarray(scores)
        _check_scores(s)
        n_classes = 2 if s.ndim == 1 else s.shape[-1]
        if n_classes != self.spec.n_classes or (s.ndim == 2) != self.spec.multiclass:
            raise ValueError(
                f"scores of shape {s.shape} do not fit the {self.spec.describe()}: it needs "
                + (f"[N, {self.spec.n_classes}]" if self.spec.multiclass else "[N]")
            )
        _check_labels(labels, s.shape[0], n_classes)
        _check_weights(sample_weight, s.shape[0])
        return {}

    def _transform(self, params, scores) -> Array:
        return self.spec.loss_corrected_score(_float(scores))
