"""The analytic corrections, which need no map fitted to labels: the paper's loss correction,
:class:`LossCorrection`, the loss-corrected confidence score ``(c^L)^{-1}(a)`` of a known loss
(Proposition 4, Corollary 1, eq. ``transformation``), which fits nothing; and the prior-shift
correction, eq. ``correct-prior``: ``h^d(a) = d a / (1 + (d - 1) a)`` with ``d`` the target odds
over the training odds (Elkan 2001; Saerens, Latinne & Decaestecker 2002; Dal Pozzolo et al.
2015): :func:`prior_shift_ratio`, :func:`prior_shift_transform` and
:class:`PriorShiftCorrection`, which reads the target prior from the calibration labels. Both
behind the interface of the fitted baselines.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.calibration._checks import as_float, check_weights
from iml.recalibration._common import check_labels, check_scores
from iml.recalibration.interface import Recalibrator
from iml.spec import LossLike, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "LossCorrection",
    "PriorShiftCorrection",
    "prior_shift_ratio",
    "prior_shift_transform",
]


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


def prior_shift_ratio(train_prior: ArrayLike, target_prior: ArrayLike) -> Array:
    """The ratio ``d`` of eq. ``correct-prior``: target odds over training odds.

    Bayes' rule under a change of class priors from ``pi`` (training) to ``pi'`` (target)
    multiplies the posterior odds by ``(pi'_1 / pi'_0) / (pi_1 / pi_0)`` (Elkan 2001; Saerens,
    Latinne & Decaestecker 2002). Binary priors are positive-class probabilities (scalars);
    multiclass priors are vectors ``[n]``, for which the ratio is ``pi'_k / pi_k`` per class.

    The paper (Section 4) notes that the loss correction for weight ``beta`` is this correction
    with ``d = (1 - beta) / beta``.
    """
    p, q = as_float(train_prior), as_float(target_prior)
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
    a = as_float(scores)
    d = jnp.asarray(d, a.dtype)
    if d.ndim == 0:
        return d * a / (1.0 + (d - 1.0) * a)
    shifted = a * d
    return shifted / jnp.sum(shifted, axis=-1, keepdims=True)


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
        check_scores(s)
        if self.d is not None:
            return jnp.asarray(self.d, jnp.float32)
        n_classes = 2 if s.ndim == 1 else s.shape[-1]
        check_labels(labels, s.shape[0], n_classes)
        check_weights(sample_weight, s.shape[0])
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
