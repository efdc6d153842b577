"""The model of Section 3 (:mod:`iml.sbr`) and its simulator, data with a known signal-based
representation for tests, notebooks and benchmarks: posteriors by Bayes' rule (eq.
``posterior``, :func:`bayesian_posteriors`), the scores that minimise expected loss given them
(eq. ``choice``, :func:`optimal_signal_scores`), the model's exact distribution of scores and
labels (:func:`model_distribution`), and draws from a model with finitely many signals
(:func:`simulate_scores`) or with a continuous signal, for rare-class scenarios
(:func:`simulate_gaussian_scores`). The loss named by keywords (:func:`loss_from_keywords`) and
``c^L`` of posteriors (:func:`optimal`) serve :mod:`iml.sbr.representation` too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.spec import LossSpec, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "bayesian_posteriors",
    "loss_from_keywords",
    "model_distribution",
    "optimal",
    "optimal_signal_scores",
    "simulate_gaussian_scores",
    "simulate_scores",
]


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


def _check_model(prior: ArrayLike, experiment: ArrayLike) -> None:
    p = np.asarray(prior, dtype=float)
    e = np.asarray(experiment, dtype=float)
    if p.ndim != 1 or p.shape[0] < 2:
        raise ValueError(f"prior must be a vector over at least two labels, got shape {p.shape}")
    if np.isnan(p).any() or (p < 0).any() or not np.isclose(p.sum(), 1.0, atol=1e-5):
        raise ValueError("prior must be non-negative and sum to one")
    if e.ndim != 2 or e.shape[1] != p.shape[0]:
        raise ValueError(
            f"experiment must have shape [n_signals, {p.shape[0]}] (pi(s | y) in columns), "
            f"got {e.shape}"
        )
    if np.isnan(e).any() or (e < 0).any() or not np.allclose(e.sum(0), 1.0, atol=1e-5):
        raise ValueError("experiment columns pi(. | y) must be non-negative and sum to one")


def model_distribution(
    prior: ArrayLike,
    experiment: ArrayLike,
    *,
    beta: float | None = None,
    B: ArrayLike | None = None,
    loss: Callable | None = None,
) -> tuple[Array, Array]:
    """The model's exact distribution of scores and labels: ``(alpha^s, pi(s, y))``.

    Args:
      prior, experiment: as :func:`bayesian_posteriors`.
      beta, B, loss: the loss, as in :func:`optimal_signal_scores`.

    Returns:
      ``signal_scores`` (``[S]`` or ``[S, n]``) and the joint ``pi(s, y)`` ``[S, n]``, ready for
      :func:`signal_based_representation_from_joint`.
    """
    _check_model(prior, experiment)
    gamma = bayesian_posteriors(prior, experiment)
    alpha = optimal_signal_scores(gamma, beta=beta, B=B, loss=loss)
    return alpha, jnp.asarray(experiment) * jnp.asarray(prior)


def simulate_scores(
    key: Array,
    prior: ArrayLike,
    experiment: ArrayLike,
    n: int,
    *,
    beta: float | None = None,
    B: ArrayLike | None = None,
    loss: Callable | None = None,
) -> tuple[Array, Array, Array, Array]:
    """Draw ``n`` observations from the model of Section 3.

    Each draws a label ``y ~ pi(y)``, a signal ``s ~ pi(s | y)``, and reports
    ``alpha^s = c^L(gamma^s)``.

    Args:
      prior, experiment: as :func:`bayesian_posteriors`, with ``n_labels`` labels.
      n: number of observations (static).
      beta, B, loss: the loss, as in :func:`optimal_signal_scores`.

    Returns:
      ``(scores, labels, signals, posteriors)``: binary ``[n]`` positive-class scores and
      posteriors ``gamma^s_1``; with ``B``, ``[n, n_labels]`` score vectors and posteriors.
      ``signals`` are the indices of the signals drawn.
    """
    _check_model(prior, experiment)
    V.check_count("n", n)
    spec = loss_from_keywords(beta, B, loss)
    prior = jnp.asarray(prior, jnp.float32)
    experiment = jnp.asarray(experiment, jnp.float32)
    if not spec.multiclass and prior.shape[0] != 2:
        raise ValueError(
            f"the {spec.describe()} needs a binary model (2 labels), got {prior.shape[0]}"
        )
    return _simulate_kernel(key, prior, experiment, int(n), spec)


@functools.partial(jax.jit, static_argnums=(3,))
def _simulate_kernel(key, prior, experiment, n, spec) -> tuple[Array, Array, Array, Array]:
    gamma = bayesian_posteriors(prior, experiment)
    alpha = optimal(spec, gamma)
    key_y, key_s = jax.random.split(key)
    labels = jax.random.categorical(key_y, jnp.log(prior), shape=(n,))
    log_experiment = jnp.log(experiment.T)  # [n_labels, S]
    signals = jax.random.categorical(key_s, log_experiment[labels], axis=-1)
    posteriors = gamma[signals] if alpha.ndim == 2 else gamma[signals, 1]
    return alpha[signals], labels, signals, posteriors


def simulate_gaussian_scores(
    key: Array,
    n: int,
    *,
    prevalence: float = 0.013,
    separation: float = 2.0,
    beta: float | None = None,
    loss: Callable | None = None,
) -> tuple[Array, Array, Array, Array]:
    """A continuous-signal model for rare-class scenarios (default prevalence 0.013).

    ``y ~ Bernoulli(prevalence)``, the signal ``x | y ~ N(separation * y, 1)``, and the exact
    posterior by Bayes' rule: ``logit gamma = logit(prevalence) + separation (x - separation/2)``.
    Scores are ``c^L(gamma)`` (eq. ``choice``); the AUROC is ``Phi(separation / sqrt 2)``.

    Args:
      n: number of observations (static).
      prevalence: ``P(y = 1)`` in ``(0, 1)``.
      separation: distance between the two signal means (``> 0``).
      beta: class weight of the beta-weighted log loss; or ``loss``: any binary loss. With
        neither, truthful scores.

    Returns:
      ``(scores, labels, signals, posteriors)``, each ``[n]``; ``signals`` the ``x``.
    """
    V.check_count("n", n)
    V.check_open_unit("prevalence", prevalence)
    V.check_positive("separation", separation)
    spec = loss_from_keywords(beta, None, loss)
    return _gaussian_kernel(key, int(n), spec, prevalence, separation)


@functools.partial(jax.jit, static_argnums=(1,))
def _gaussian_kernel(key, n, spec, prevalence, separation) -> tuple[Array, Array, Array, Array]:
    key_y, key_x = jax.random.split(key)
    labels = jax.random.bernoulli(key_y, prevalence, (n,)).astype(jnp.int32)
    x = separation * labels + jax.random.normal(key_x, (n,))
    log_odds = jnp.log(prevalence) - jnp.log1p(-prevalence) + separation * (x - separation / 2)
    gamma = jax.nn.sigmoid(log_odds)
    scores = optimal(spec, jnp.stack([1.0 - gamma, gamma], axis=1))
    return scores, labels, x, gamma
