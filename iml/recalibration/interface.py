"""The scikit-learn-style interface of every recalibration method: :class:`Recalibrator`, whose
``fit(scores, labels, sample_weight=None)``, ``transform(scores)`` and ``fit_transform`` wrap a
method's pure ``*_fit`` and ``*_transform`` functions (the estimator convention of
scikit-learn's ``fit``/``transform``).
"""

from __future__ import annotations

from typing import Any

import jax

from iml.recalibration._common import check_scores

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["Recalibrator"]


class Recalibrator:
    """Base class: ``fit(scores, labels, sample_weight=None)``, ``transform``, ``fit_transform``.

    Subclasses hold their fitted parameters in ``params_`` (a pytree of arrays) and delegate
    the arithmetic to the pure functions of their method's module.

    Attributes:
      fits_by_weight: whether ``_fit(scores, labels, sample_weight)`` ignores rows of weight
        zero, so that fits on subsets of one sample can share its shape, and compile once
        (:func:`iml.recalibration.cross_fit`).
      folds_at_once: whether :func:`iml.recalibration.cross_fit` fits every fold at once: in
        one program (``jax.vmap`` of ``_fit`` and ``_transform`` over the folds' weights, or the
        method's own ``_fit_folds(scores, labels, weights [F, n])``, batched parameters), for a
        method whose fit, batched, stays as cheap per fold as alone; or, with
        ``folds_on_host``, on the host. A fit that stops at a tolerance becomes a batched loop
        that runs to its slowest fold, and pool adjacent violators many times slower batched
        in a program (``docs/results/sweep_train``).
      folds_on_host: whether, with ``folds_at_once``, the method's ``_fit_folds`` fits the folds
        of concrete arrays outside any program (isotonic calibration's host fits), its batched
        parameters then applied to the held-out folds in one program; such a ``_fit_folds`` is
        never traced.
    """

    params_: Any = None
    fits_by_weight: bool = False
    folds_at_once: bool = False
    folds_on_host: bool = False

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
        check_scores(scores)

    def _fit(self, scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None) -> Any:
        raise TypeError(f"{type(self).__name__} does not define _fit")

    def _transform(self, params: Any, scores: ArrayLike) -> Array:
        raise TypeError(f"{type(self).__name__} does not define _transform")

    def __repr__(self) -> str:
        public = {k: v for k, v in vars(self).items() if not k.endswith("_")}
        args = ", ".join(f"{k}={v!r}" for k, v in public.items())
        return f"{type(self).__name__}({args})"
