"""Validation of the calibration functions' input (only where arrays are concrete: under jit
nothing can be checked).

The ``check_*`` functions raise ``ValueError``, naming the argument, on concrete bad input and do
nothing for traced arrays. The ``as_*`` coercions and :func:`class_labels_invalid` are what
happens under ``jax.jit`` instead: an invalid entry becomes NaN, so that every result that
depends on it is NaN (the conventions of :mod:`iml.calibration`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

#: The binning strategies of :func:`iml.calibration.binning.bin_edges`.
STRATEGIES = ("quantile", "uniform")


def check_n_bins(n_bins: int) -> None:
    V.check_count("n_bins", n_bins)


def check_bins(n_bins: int, strategy: str) -> None:
    check_n_bins(n_bins)
    V.check_choice("strategy", strategy, STRATEGIES)


def check_weights(sample_weight: ArrayLike | None, n: int) -> None:
    w = V.concrete_value(sample_weight)
    if w is None:
        return
    V.check_shape("sample_weight", w, (n,))
    V.check_weights("sample_weight", w)


def check_binary(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None = None,
    n_bins: int | None = None,
    scores_name: str = "scores",
) -> None:
    """Raise ``ValueError`` on bad binary input (a no-op for traced arrays)."""
    s, y = V.concrete_value(scores), V.concrete_value(labels)
    if s is not None:
        if s.ndim != 1:
            raise ValueError(f"{scores_name} must be one-dimensional, got shape {s.shape}")
        if s.size == 0:
            raise ValueError(f"{scores_name} is empty")
        V.check_unit(scores_name, s)
        if n_bins is not None and s.size < n_bins:
            raise ValueError(f"{scores_name} has {s.size} observations, fewer than n_bins={n_bins}")
    if y is not None:
        if y.ndim != 1:
            raise ValueError(f"labels must be one-dimensional, got shape {y.shape}")
        if s is not None and y.shape != s.shape:
            raise ValueError(f"labels has shape {y.shape} but {scores_name} has shape {s.shape}")
        if y.size == 0:
            raise ValueError("labels is empty")
        if not np.all((y == 0) | (y == 1)):
            bad = np.unique(y[(y != 0) & (y != 1)])[:5]
            raise ValueError(f"labels must be 0 or 1 for binary scores, found {bad}")
    n = s.shape[0] if s is not None else (y.shape[0] if y is not None else None)
    if n is not None:
        check_weights(sample_weight, n)


def check_multiclass(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None, n_bins: int | None
) -> None:
    """Raise ``ValueError`` on bad multiclass input: scores ``(n, k)``, labels in ``[0, k)``."""
    s, y = V.concrete_value(scores), V.concrete_value(labels)
    if s is not None:
        if s.ndim != 2 or s.shape[1] < 2:
            raise ValueError(f"multiclass scores must have shape (n, k>=2), got {s.shape}")
        if s.shape[0] == 0:
            raise ValueError("scores is empty")
        V.check_unit("scores", s)
        if n_bins is not None and s.shape[0] < n_bins:
            raise ValueError(f"scores has {s.shape[0]} observations, fewer than n_bins={n_bins}")
    if y is not None:
        if s is not None:
            V.check_shape("labels", y, s.shape[:1])
        if s is not None and not np.all((y >= 0) & (y < s.shape[1]) & (y == np.round(y))):
            raise ValueError(f"labels must be class indices in [0, {s.shape[1]})")
    if s is not None:
        check_weights(sample_weight, s.shape[0])


def check_scores_labels(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None, n_bins: int | None
) -> int:
    """Validate binary (1-D scores) or multiclass (2-D scores) input; return the scores' ndim."""
    ndim = jnp.ndim(scores)
    if ndim == 1:
        check_binary(scores, labels, sample_weight, n_bins)
    elif ndim == 2:
        check_multiclass(scores, labels, sample_weight, n_bins)
    else:
        raise ValueError(f"scores must have shape (n,) or (n, k), got {jnp.shape(scores)}")
    return ndim


def check_smooth_options(bandwidth: ArrayLike | None, n_grid: int, n_bisection: int) -> None:
    V.check_count("n_grid", n_grid, 3)
    V.check_count("n_bisection", n_bisection)
    b = V.concrete_value(bandwidth)
    if b is not None and (b.ndim != 0 or not np.isfinite(b) or not b > 0):
        raise ValueError(f"bandwidth must be a positive scalar or None, got {bandwidth!r}")


def as_weights(sample_weight: ArrayLike | None, like: Array) -> Array:
    """Weights as floats; under jit a negative weight becomes NaN (so results are NaN)."""
    if sample_weight is None:
        return jnp.ones(like.shape[:1], like.dtype)
    w = jnp.asarray(sample_weight, like.dtype)
    return jnp.where(w >= 0, w, jnp.nan)


def as_labels(labels: ArrayLike, like: Array) -> Array:
    """Binary labels as floats; under jit a label outside {0, 1} becomes NaN."""
    y = jnp.asarray(labels).astype(like.dtype)
    return jnp.where((y == 0) | (y == 1), y, jnp.nan)


def class_labels_invalid(labels: Array, n_classes: int) -> Array:
    """Whether any multiclass label is outside ``[0, n_classes)`` (checked under jit)."""
    return jnp.any((labels < 0) | (labels >= n_classes))


def as_float(x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    return x.astype(jnp.result_type(x.dtype, jnp.float32))
