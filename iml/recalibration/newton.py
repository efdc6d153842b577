"""Logistic regression by Newton's method (iteratively reweighted least squares, with the
Hessian's small eigenvalues raised and a backtracking line search): :func:`logistic_newton`,
the fitting kernel shared by Platt scaling and beta calibration (:mod:`iml.recalibration.logistic`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array

__all__ = [
    "NewtonFit",
    "logistic_newton",
]


def _dot(a: Array, b: Array) -> Array:
    """A product in full float32 precision (accelerators otherwise may round inputs to TF32)."""
    return jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST)


# Eigenvalues of a Hessian are raised to at least this fraction of its largest (float32).
_EIGEN_CUTOFF = 1e-6


class NewtonFit(NamedTuple):
    """The result of :func:`logistic_newton`."""

    theta: Array  # [k] coefficients
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
    """Coefficients ``[k]`` minimising ``sum_i w_i logloss(y_i, sigmoid(X_i @ theta)) +
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
    k = X.shape[1]
    penalty = jnp.zeros(k, X.dtype) if penalty is None else penalty
    ridge = jnp.reshape(penalty, (k,))
    halvings = 2.0 ** -jnp.arange(20, dtype=X.dtype)

    def objective(z: Array, theta: Array) -> Array:
        # the log loss on logits, softplus(z) - y z, written stably
        return _dot(w, jnp.logaddexp(0.0, z) - y * z) + 0.5 * jnp.sum(ridge * theta * theta)

    def gradient(z: Array, theta: Array) -> Array:
        return _dot(X.T, w * (jax.nn.sigmoid(z) - y)) + ridge * theta

    def cond(carry):
        _, _, grad, it, stalled = carry
        return (it < max_iter) & (jnp.max(jnp.abs(grad)) > tol) & ~stalled

    def body(carry):
        theta, z, grad, it, _ = carry
        p = jax.nn.sigmoid(z)
        curvature = _dot((X * (w * p * (1.0 - p))[:, None]).T, X) + jnp.diag(ridge)
        eigenvalues, vectors = jnp.linalg.eigh(curvature)
        inverse = 1.0 / jnp.maximum(eigenvalues, _EIGEN_CUTOFF * jnp.max(eigenvalues))
        step = _dot(vectors, inverse * _dot(vectors.T, grad))
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
