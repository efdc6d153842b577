"""The ridge and the standardisation of the tabular trainer's members
(:func:`iml.training.tabular.train_tabular`), per loss and rotation.

It holds the coefficients a member is fitted at (:func:`ridge_levels`), each member's total
sample weight that ``l2_scale = "per_weight"`` measures the ridge against (:func:`total_weights`),
each rotation's feature centre and scale on its training rows (:func:`standardizer`), and, for the
exact solver, the features' scale over all rows (:func:`column_scale`) and each member's ridge
multipliers per feature in the features' own units (:func:`penalty_scale`).
"""

from __future__ import annotations

import numpy as np

from iml.spec import LossSpec
from iml.training.trainer import TrainConfig


def ridge_levels(config: TrainConfig) -> np.ndarray:
    """The ridge coefficients a member is fitted at: ``config.l2_grid`` where ``l2 = "auto"``,
    else the one number."""
    return np.asarray(config.l2_grid if config.l2 == "auto" else [config.l2], np.float64)


def _row_weights(spec: LossSpec, y: np.ndarray) -> np.ndarray:
    """``[m, N]``: the weight each loss of a grid puts on a row of its label, summed over the
    outputs (``beta`` or ``1 - beta``; a focal loss's ``alpha`` or ``1 - alpha``; ``sum_c
    B[y, c]``; ``w[y]``), whose mean over a member's training rows is its total weight."""
    p = {k: np.asarray(v, np.float64) for k, v in spec.params.items()}
    (m,) = spec.batch_shape
    weight = spec.record.row_weight
    return np.stack([weight(y, **{k: v[i] for k, v in p.items()}) for i in range(m)])


def standardizer(
    x: np.ndarray, train_mask: np.ndarray, standardize: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Each rotation's feature centre and scale ``[R, d]`` on its training rows (the mean and
    standard deviation, 1 where a feature is constant there, as ``StandardScaler`` does), or 0
    and 1."""
    R, d = train_mask.shape[0], x.shape[1]
    if not standardize:
        return np.zeros((R, d), np.float32), np.ones((R, d), np.float32)
    mask = train_mask.astype(np.float64)
    count = mask.sum(axis=1, keepdims=True)
    mean = mask @ x.astype(np.float64) / count
    var = mask @ np.square(x.astype(np.float64)) / count - np.square(mean)
    constant = var <= 1e-12 * np.maximum(1.0, np.square(mean))
    scale = np.sqrt(np.where(constant, 1.0, var))
    return mean.astype(np.float32), scale.astype(np.float32)


def column_scale(x: np.ndarray) -> np.ndarray:
    """Each feature's standard deviation over all rows (1 where it is constant)."""
    sd = np.std(x.astype(np.float64), axis=0)
    return np.where(sd > 1e-6 * np.maximum(1.0, np.abs(x).max(axis=0)), sd, 1.0)


def total_weights(
    spec: LossSpec, y: np.ndarray, share: np.ndarray, config: TrainConfig
) -> np.ndarray:
    """Each member's total sample weight ``[m, R]`` under ``l2_scale = "per_weight"`` (the mean
    over its training rows of the weight its loss puts on a row, summed over the outputs), else
    1."""
    if config.l2_scale == "per_weight":
        return _row_weights(spec, y) @ share.T
    return np.ones((spec.batch_shape[0], share.shape[0]))


def penalty_scale(
    x: np.ndarray, train_mask: np.ndarray, totals: np.ndarray, config: TrainConfig
) -> np.ndarray:
    """Each member's ridge multipliers per feature in the features' own units, ``[m, R, d]``:
    the variance of the feature over the rotation's training rows where ``config.standardize``
    (1 for a feature constant there, as ``StandardScaler`` leaves it), times the member's total
    weight ``totals [m, R]``.

    A ridge on standardised features, ``(l2 / 2) sum_j w'_j^2``, is ``(l2 / 2) sum_j sigma_j^2
    w_j^2`` in the features' own units (``w_j = w'_j / sigma_j``; centring moves only the
    intercept, which has no penalty): so the members of every rotation share one design."""
    _, scale = standardizer(x, train_mask, config.standardize)
    return totals[..., None] * np.square(scale.astype(np.float64))[None]
