"""What every recalibration method of :mod:`iml.recalibration` shares: the checks of its
input, the coercion of weights to a float array, and the clipped logit.

The checks run on concrete arrays only (under ``jit`` the arithmetic must stay branch-free) and
raise ``ValueError`` naming the argument: scores (probabilities in ``[0, 1]``, or any real
numbers), labels in ``{0, ..., n_classes - 1}``, and these with the sample weights (checked as
:mod:`iml.calibration` checks them, as is its coercion of scores to floats) for binary scores.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.calibration._checks import check_weights

Array = jax.Array
ArrayLike = jax.typing.ArrayLike


# Scores are clipped this far from 0 and 1 before taking logits.
EPS = 1e-7


def check_scores(scores: ArrayLike, name: str = "scores", probabilities: bool = True) -> None:
    if not V.is_concrete(scores):  # traced: checked where the caller's arrays are concrete
        return
    s = np.asarray(scores)
    if s.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.issubdtype(s.dtype, np.number) or np.issubdtype(s.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real numbers, got dtype {s.dtype}")
    if probabilities:
        V.check_unit(name, s)
    elif np.isnan(s).any():
        raise ValueError(f"{name} contains NaN")


def check_labels(labels: ArrayLike, n: int, n_classes: int = 2, name: str = "labels") -> None:
    if not V.is_concrete(labels):
        return
    y = np.asarray(labels)
    if y.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) to match the scores, got {y.shape}")
    if np.isnan(y.astype(float)).any():
        raise ValueError(f"{name} contains NaN")
    if not np.isin(y, np.arange(n_classes)).all():
        allowed = "{0, 1}" if n_classes == 2 else f"{{0, ..., {n_classes - 1}}}"
        raise ValueError(f"{name} must take values in {allowed}")


def check_binary(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None,
    probabilities: bool = True,
) -> None:
    check_scores(scores, probabilities=probabilities)
    if np.ndim(scores) != 1:
        raise ValueError(f"scores must be one-dimensional (binary), got shape {np.shape(scores)}")
    check_labels(labels, np.shape(scores)[0])
    check_weights(sample_weight, np.shape(scores)[0])


def as_weights(sample_weight: ArrayLike | None, like: Array) -> Array:
    if sample_weight is None:
        return jnp.ones(like.shape[0], like.dtype)
    return jnp.asarray(sample_weight, like.dtype)


def logit(p: Array) -> Array:
    p = jnp.clip(p, EPS, 1.0 - EPS)
    return jnp.log(p) - jnp.log1p(-p)
