"""Closed-form binary rules: the optimal score under the beta-weighted loss (eq.
``b-loss-bin``) and its inverse, the loss-corrected confidence score.

* :func:`optimal_score`, :func:`optimal_logit`: Proposition 2, ``c^beta(gamma)`` (eq.
  ``choice-b1``), in probabilities and in logits.
* :func:`loss_corrected_score`, :func:`loss_corrected_logit`: Corollary 1, its inverse
  ``g^beta(a)`` (eq. ``loss-c-bin``; the undersampling correction of eq. ``correct-prior``).
* :func:`loss_corrected_score_into`: the same written into a reused buffer, for large sweeps.

The closed forms are accurate to a few ulps in float32 over ``beta`` in ``[1e-6, 1 - 1e-6]`` and
all scores in ``[0, 1]`` (no cancellation: both terms of every denominator are positive). The
logit forms are exact shifts and keep full precision for scores near 0 and 1.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from iml import _validation as V
from iml.scoring._common import Array, ArrayLike, as_float, logit, tilt

__all__ = [
    "loss_corrected_logit",
    "loss_corrected_score",
    "loss_corrected_score_into",
    "optimal_logit",
    "optimal_score",
]


def optimal_score(gamma: ArrayLike, beta: ArrayLike) -> Array:
    """Optimal posterior score under the beta-weighted loss, Proposition 2 (eq. ``choice-b1``).

    ``c^beta(gamma) = beta gamma / (1 - beta - gamma + 2 beta gamma)``: the score that minimises
    the expected beta-weighted loss (eq. ``b-loss-bin``) of any differentiable strictly proper
    base loss, given posterior ``gamma``. Symmetric in ``(beta, gamma)``, increasing in
    ``gamma``, the identity at ``beta = 1/2``, and ``c^beta(1/2) = beta``.

    Args:
      gamma: posterior probability of the positive class, in ``[0, 1]``.
      beta: weight of the positive class, in ``(0, 1)``; broadcasts against ``gamma``.
    """
    V.check_unit("gamma", gamma)
    V.check_beta("beta", beta)
    V.check_broadcastable(gamma=gamma, beta=beta)
    return _tilted(*as_float(gamma, beta), inverse=False)


def loss_corrected_score(a: ArrayLike, beta: ArrayLike) -> Array:
    """The loss-corrected confidence score for the beta-weighted loss, Corollary 1.

    Inverts :func:`optimal_score` (eq. ``loss-c-bin``, also eq. ``transformation``):

        (c^beta)^{-1}(a) = (1 - beta) a / (beta + (1 - 2 beta) a).

    Equal to the undersampling correction ``d a / (1 + (d - 1) a)`` with
    ``d = (1 - beta) / beta`` (eq. ``correct-prior``; Dal Pozzolo et al. 2015). Under loss
    calibration the result is the probability of the positive class given the score
    (Proposition 4).

    Args:
      a: positive-class scores of a model trained with weight ``beta``, in ``[0, 1]``.
      beta: weight of the positive class in training, in ``(0, 1)``; broadcasts against ``a``.
    """
    V.check_unit("a", a)
    V.check_beta("beta", beta)
    V.check_broadcastable(a=a, beta=beta)
    return _tilted(*as_float(a, beta), inverse=True)


@functools.partial(jax.jit, static_argnames="inverse")
def _tilted(p: Array, beta: Array, inverse: bool) -> Array:
    """``p`` tilted by ``beta`` (the optimal score), or by ``1 - beta`` where ``inverse`` (its
    inverse: tilting by ``1 - beta`` multiplies the odds by the inverse factor); NaN where ``p``
    lies outside ``[0, 1]`` or ``beta`` outside ``(0, 1)``. One compiled program per shape, so
    that an eager call does not compile each of its operations apart."""
    p = V.nan_unless((p >= 0) & (p <= 1), p)
    beta = V.nan_unless((beta > 0) & (beta < 1), beta)
    return tilt(p, 1.0 - beta, beta) if inverse else tilt(p, beta, 1.0 - beta)


@functools.partial(jax.jit, donate_argnums=0)
def _write_loss_corrected(out: Array, a: Array, beta: Array) -> Array:
    return out.at[...].set(_tilted(a, beta, inverse=True).astype(out.dtype))


def loss_corrected_score_into(out: Array, a: ArrayLike, beta: ArrayLike) -> Array:
    """:func:`loss_corrected_score` written into a reused buffer, for large sweeps.

    ``out`` is donated: its memory receives the result and the returned array aliases it, so a
    loop over score sets reuses one ``[n_beta, n_scores]`` buffer instead of allocating (and
    page-faulting) a fresh one per call (``docs/results/scoring`` times it against a plain write
    of the same bytes). ``out`` must not be used after the call; use the return value.

    Args:
      out: a floating array with the broadcast shape of ``a`` and ``beta``.
      a: scores in ``[0, 1]``, e.g. ``scores[None, :]``.
      beta: weights in ``(0, 1)``, e.g. ``betas[:, None]``.

    Returns:
      The corrected scores, in ``out``'s memory and dtype.
    """
    V.check_unit("a", a)
    V.check_beta("beta", beta)
    shape = V.check_broadcastable(a=a, beta=beta)
    if tuple(out.shape) != shape or not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(
            f"out must be a floating array of the broadcast shape {shape}; "
            f"got {out.dtype} {tuple(out.shape)}"
        )
    a, beta = as_float(a, beta)
    return _write_loss_corrected(out, a, beta)


def optimal_logit(gamma_logit: ArrayLike, beta: ArrayLike) -> Array:
    """Proposition 2 (eq. ``choice-b1``) in logits: ``logit c = logit gamma + logit beta``.

    The odds of the optimal score are the posterior odds times ``beta / (1 - beta)``.
    """
    V.check_beta("beta", beta)
    V.check_broadcastable(gamma_logit=gamma_logit, beta=beta)
    z, beta = as_float(gamma_logit, beta)
    beta = V.nan_unless((beta > 0) & (beta < 1), beta)
    return z + logit(beta)


def loss_corrected_logit(logits: ArrayLike, beta: ArrayLike) -> Array:
    """Corollary 1 (eq. ``loss-c-bin``) in logits: ``logit g^beta(a) = logit a - logit beta``.

    An exact shift, so it keeps full precision where scores are within float precision of 0 or
    1; apply ``jax.nn.sigmoid`` for the corrected probability.
    """
    V.check_beta("beta", beta)
    V.check_broadcastable(logits=logits, beta=beta)
    z, beta = as_float(logits, beta)
    beta = V.nan_unless((beta > 0) & (beta < 1), beta)
    return z - logit(beta)
