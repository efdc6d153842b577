"""The model of Section 3: posterior beliefs by Bayes' rule (eq. ``posterior``) and the scores
that minimise expected loss given them (eq. ``choice``).

An algorithm is a Bayesian decision maker: it holds a prior ``pi(y)``, observes a signal ``s`` of a
statistical experiment ``pi(s | y)``, forms the posterior ``gamma^s``
(:func:`bayesian_posteriors`) and reports the score ``alpha^s = c^L(gamma^s)``
(:func:`optimal_signal_scores`). The loss named by keywords (:func:`loss_from_keywords`) and
``c^L`` of posteriors (:func:`optimal`) serve the simulator (:mod:`iml.sbr.simulation`) and the
signal-based representation of Definition 3 (:mod:`iml.sbr.representation`) too.

Losses are anything :func:`iml.loss_spec` reads (a :class:`iml.LossSpec`): a number
``beta`` in ``(0, 1)`` (the beta-weighted log loss, eq. ``b-loss-bin``, Proposition 2), a matrix
``B`` ``[n, n]`` (the B-weighted log loss, eq. ``b-loss-multi``, Proposition 3), a loss name with
its parameters, or a callable loss ``L(a, y)`` (the generic rule).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from iml.spec import LossSpec, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "bayesian_posteriors",
    "loss_from_keywords",
    "optimal",
    "optimal_signal_scores",
]


# ----------------------------------------------------------------------------------------------
# Naming the loss
# ----------------------------------------------------------------------------------------------


def loss_from_keywords(beta: Any, B: Any, loss: Any) -> LossSpec:
    """The loss named by at most one of the keywords (the unweighted log loss without any)."""
    given = [x for x in (beta, B, loss) if x is not None]
    if len(given) > 1:
        raise ValueError("give at most one of beta, B or loss")
    spec = loss_spec(given[0] if given else 0.5)  # beta = 1/2: truthful scores
    if spec.batch_shape:
        raise ValueError(f"one loss is needed here, not a batch of shape {spec.batch_shape}")
    return spec


def optimal(spec: LossSpec, gamma: Array) -> Array:
    """``c^L`` of posteriors ``[S, k]``: ``[S]`` positive-class scores (binary) or ``[S, n]``."""
    return spec.optimal_score(gamma if spec.multiclass else gamma[:, 1])


# ----------------------------------------------------------------------------------------------
# The model: eqs. posterior and choice
# ----------------------------------------------------------------------------------------------


def bayesian_posteriors(prior: ArrayLike, experiment: ArrayLike) -> Array:
    """Posterior beliefs per signal by Bayes' rule, eq. ``posterior``.

    ``gamma^s_y = pi(s | y) pi(y) / pi(s)``.

    Args:
      prior: ``pi(y)``, shape ``[n]``.
      experiment: ``pi(s | y)``, shape ``[S, n]`` (each column a distribution over signals).

    Returns:
      ``[S, n]`` posteriors (rows sum to one; a signal of probability zero gives NaN).
    """
    joint = jnp.asarray(experiment) * jnp.asarray(prior)
    return joint / jnp.sum(joint, axis=1, keepdims=True)


def optimal_signal_scores(
    posteriors: ArrayLike,
    *,
    beta: float | None = None,
    B: ArrayLike | None = None,
    loss: Callable | None = None,
) -> Array:
    """Scores that minimise expected loss given each posterior, eq. ``choice``.

    Args:
      posteriors: ``[S, n]`` posterior beliefs.
      beta: weight of the positive class (binary, Proposition 2).
      B: weight matrix ``[n, n]`` (multiclass, Proposition 3).
      loss: any differentiable binary loss ``L(a, y)`` (the generic rule of ``iml.scoring``).
        With none of the three, the unweighted log loss: truthful scores.

    Returns:
      ``[S]`` positive-class scores (binary) or ``[S, n]`` score vectors (with ``B``).
    """
    spec = loss_from_keywords(beta, B, loss)
    gamma = jnp.asarray(posteriors)
    if not spec.multiclass and gamma.shape[-1] != 2:
        raise ValueError(f"the {spec.describe()} needs binary posteriors [S, 2], got {gamma.shape}")
    return optimal(spec, gamma)
