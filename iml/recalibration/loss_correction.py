"""The paper's analytic loss correction as a recalibration method that fits nothing:
:class:`LossCorrection`, the loss-corrected confidence score ``(c^L)^{-1}(a)`` of a known loss
(Proposition 4, Corollary 1, eq. ``transformation``), behind the interface of the fitted
baselines.
"""

from __future__ import annotations

import jax
import numpy as np

from iml.recalibration._common import as_float, check_labels, check_scores, check_weights
from iml.recalibration.interface import Recalibrator
from iml.spec import LossLike, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["LossCorrection"]


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
        check_scores(s)
        n_classes = 2 if s.ndim == 1 else s.shape[-1]
        if n_classes != self.spec.n_classes or (s.ndim == 2) != self.spec.multiclass:
            raise ValueError(
                f"scores of shape {s.shape} do not fit the {self.spec.describe()}: it needs "
                + (f"[N, {self.spec.n_classes}]" if self.spec.multiclass else "[N]")
            )
        check_labels(labels, s.shape[0], n_classes)
        check_weights(sample_weight, s.shape[0])
        return {}

    def _transform(self, params, scores) -> Array:
        return self.spec.loss_corrected_score(as_float(scores))
