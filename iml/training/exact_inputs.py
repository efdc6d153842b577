"""What an exact fit takes and returns: its arguments checked (features, labels, sample weights,
the grid of ridge coefficients, the per-feature multipliers of the ridge) and the fitted members
(:class:`LogisticFit`), shared by the binary fits of :mod:`iml.training.exact` and the multinomial
ones of :mod:`iml.training.exact_multinomial`.

A member ``k`` of a logistic sweep minimises

    f_k(w, b) = sum_i s_ki l(y_i, x_i . w + b) + (1/2) sum_j p_kj w_j^2,

with ``l`` the log loss on logits, ``s_ki >= 0`` its sample weights (for the beta-weighted
cross-entropy of eq. ``b-loss-bin``: ``beta`` on a positive training row, ``1 - beta`` on a
negative one, over the count of training rows) and ``p_kj >= 0`` its ridge coefficients (the
intercept is not penalised): ``p_kj`` is a level of the ``l2`` grid times the member's multiplier
of feature ``j`` (:func:`ridge_multipliers`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from numpy.typing import ArrayLike

from iml import _validation as V

Array = jax.Array

__all__ = ["LogisticFit", "checked_grid", "checked_inputs", "ridge_multipliers"]


class LogisticFit(NamedTuple):
    """Fitted members (arrays with the members' leading axes).

    Attributes:
      coef: ``[..., d]`` weights (``[..., d, n]`` for a multinomial fit of ``n`` classes).
      intercept: ``[...]`` biases (``[..., n]``).
      objective: ``[...]`` the minimised ``f_k``.
      grad_norm: ``[...]`` the largest absolute entry of the gradient at the fit.
      iterations: ``[...]`` Newton steps taken.
      converged: ``[...]`` whether ``grad_norm <= tol``.
      hessians: ``[...]`` Hessians formed for the member (a member that borrows an anchor's
        Hessian, or keeps one across steps, forms fewer than it takes steps).
    """

    coef: Array
    intercept: Array
    objective: Array
    grad_norm: Array
    iterations: Array
    converged: Array
    hessians: Array


def checked_inputs(
    features: ArrayLike, labels: ArrayLike, sample_weights: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features ``[N, d]`` (finite), labels ``[N]`` and sample weights ``[..., N]`` (finite,
    non-negative), checked and as arrays."""
    x = np.asarray(features, np.float32)
    y = np.asarray(labels)
    s = np.asarray(sample_weights, np.float32)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"features must be [N, d] and labels [N]; got {x.shape} and {y.shape}")
    if s.ndim < 1 or s.shape[-1] != x.shape[0]:
        raise ValueError(f"sample_weights must be [..., {x.shape[0]}]; got shape {s.shape}")
    V.check_finite("features", x)
    V.check_interval("sample_weights", s, 0.0, np.inf, open_low=False, open_high=True)
    return x, y, s


def checked_grid(name: str, l2: ArrayLike) -> np.ndarray:
    values = np.asarray(l2, np.float64)
    if values.ndim > 1:
        raise ValueError(
            f"{name} must be a number or a 1-D grid of numbers, got shape {values.shape}"
        )
    V.check_interval(name, values, 0.0, np.inf, open_low=False, open_high=True)
    return np.atleast_1d(values)


def ridge_multipliers(scale: ArrayLike | None, lead: tuple[int, ...], d: int) -> np.ndarray:
    """Per-member ridge multipliers ``[*lead, d + 1]`` (0 for the intercept)."""
    if scale is None:
        base = np.ones((*lead, d), np.float64)
    else:
        base = np.asarray(scale, np.float64)
        V.check_interval("penalty_scale", base, 0.0, np.inf, open_low=False, open_high=True)
        try:
            base = np.broadcast_to(base, (*lead, d))
        except ValueError:
            raise ValueError(
                f"penalty_scale must broadcast to the members' shape {(*lead, d)}; got shape "
                f"{base.shape}"
            ) from None
    return np.concatenate([base, np.zeros((*lead, 1))], axis=-1)
