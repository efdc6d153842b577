"""Simulated data: observations drawn from given experiments (binary, or of ``n`` classes), and
the scores of Bayesian agents with Gaussian signals, each reporting optimally for its loss
(capacity-constrained agents, with one precision for every loss, or costly-learning agents, with
a precision per loss), binary or of ``n`` classes."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.calibration._checks import as_float
from iml.revealed.experiments import RevealedExperiments, check_experiments
from iml.revealed.losses import as_losses, loss_count
from iml.spec import LossLike, LossSpec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["simulate_gaussian_agents", "simulate_observations"]


def simulate_observations(
    key: Array, experiments: RevealedExperiments, n: int
) -> tuple[Array, Array]:
    """Draw ``n`` observations ``(signals, label)`` from experiments that share their prior.

    The label is ``y ~ Bernoulli(pi)`` (``y ~ Categorical(pi)`` for class posteriors
    ``[K, S, n]``); given ``y`` each model's signal is drawn independently from
    ``P_k(s | y) = P_k(s) P_k(y | s) / P(y)``, so each model's revealed experiment is the given
    one (the joint law across models is conditionally independent given the label).

    Args:
      key: ``jax.random`` key.
      experiments: :class:`RevealedExperiments` ``[K, S]`` (prior taken from the first model).
      n: observations.

    Returns:
      ``(signals [K, n] int32, labels [n] int32)`` (class indices for class posteriors).

    Raises:
      ValueError: naming ``experiments`` or ``n``.
    """
    check_experiments(experiments)
    if np.ndim(experiments.probability) != 2:
        raise ValueError(
            "experiments must be unbatched [K, S]; map over batches with jax.vmap; got shape "
            f"{np.shape(experiments.probability)}"
        )
    prior = V.concrete_value(experiments.prior)
    if prior is not None and np.ptp(prior, axis=0).max() > 1e-4:
        raise ValueError(
            f"experiments must share one prior; got priors from {prior.min(axis=0)} "
            f"to {prior.max(axis=0)}"
        )
    V.check_count("n", n)
    return _simulate_observations(key, experiments, int(n))


@functools.partial(jax.jit, static_argnums=(2,))
def _simulate_observations(key, experiments, n) -> tuple[Array, Array]:
    key_y, key_s = jax.random.split(key)
    p, g = experiments.probability, experiments.posterior
    pi = experiments.prior[0]
    if g.ndim == 3:  # class posteriors [K, S, n]
        y = jax.random.categorical(key_y, jnp.log(pi), shape=(n,))
        given_y = jnp.moveaxis(p[..., None] * g / pi, -1, 1)  # [K, n, S]
    else:
        y = jax.random.uniform(key_y, (n,)) < pi
        given_y = jnp.stack([p * (1.0 - g) / (1.0 - pi), p * g / pi], axis=1)  # [K, 2, S]
    cdf = jnp.cumsum(given_y, axis=-1)[..., :-1]  # [K, 2, S - 1]
    u = jax.random.uniform(key_s, (p.shape[0], n))
    rows = cdf[:, y.astype(jnp.int32)]  # [K, n, S - 1]
    signals = jnp.sum(u[..., None] >= rows, axis=-1).astype(jnp.int32)
    return signals, y.astype(jnp.int32)


def simulate_gaussian_agents(
    key: Array,
    losses: LossLike | Sequence[LossLike],
    precision: ArrayLike,
    prior: ArrayLike,
    n: int,
    *,
    labels: ArrayLike | None = None,
) -> tuple[Array, Array]:
    """Scores of Bayesian agents with Gaussian signals, each reporting optimally for its loss.

    ``y ~ Bernoulli(pi)``; agent ``k`` observes its own signal ``x_k ~ N(d_k y, 1)`` (independent
    across agents given ``y``), forms the posterior
    ``gamma_k = sigmoid(logit(pi) + d_k x_k - d_k^2 / 2)`` and reports ``c^{L_k}(gamma_k)``
    (eq. ``choice``). Equal precisions ``d_k`` are capacity-constrained agents (one feasible
    experiment for every loss); precisions chosen per loss are costly-learning agents.

    With a prior vector ``pi`` ``[n]`` the agents are of ``n`` classes: ``y ~ Categorical(pi)``,
    agent ``k`` observes ``x_k ~ N(d_k e_y, I_n)``, forms
    ``gamma_k = softmax(log pi + d_k x_k)`` and reports ``c^{L_k}(gamma_k)`` ``[n]`` under its
    loss of ``n`` class scores; so each agent is loss-calibrated by construction.

    Args:
      key: ``jax.random`` key.
      losses: the agents' losses (binary, or of ``n`` class scores with a prior vector).
      precision: ``d`` ``[K]`` (or a scalar for all), the separation of the signal's means in
        standard deviations.
      prior: ``pi`` in ``(0, 1)``, or class probabilities ``[n]`` (positive, summing to one).
      n: observations.
      labels: ``[n]`` labels (class indices) to draw the signals given, in place of labels drawn
        from ``pi`` (for example a fixed number of positives, as in a run); the posteriors still
        use ``pi``.

    Returns:
      ``(scores [K, n], labels [n] int32)``, or ``(scores [K, n, n_classes], labels)``.

    Raises:
      ValueError: naming ``losses``, ``precision``, ``prior``, ``n`` or ``labels``.
    """
    n_models = loss_count(losses)
    if n_models is None:  # one loss for every agent
        n_models = np.shape(precision)[0] if np.ndim(precision) == 1 else 1
        losses = [losses] * n_models
    if np.shape(precision) not in ((), (n_models,)):
        raise ValueError(
            f"precision must be a scalar or one per loss ({n_models}); got shape "
            f"{np.shape(precision)}"
        )
    n_classes = None
    if np.ndim(prior) == 1:
        n_classes = np.shape(prior)[0]
        if n_classes < 2:
            raise ValueError(f"prior must hold n >= 2 class probabilities; got {n_classes}")
        V.check_simplex("prior", prior)
    elif np.ndim(prior):
        raise ValueError(f"prior must be a scalar or a vector [n]; got shape {np.shape(prior)}")
    specs = as_losses(losses, n_models, n_classes)
    V.check_interval("precision", precision, 0.0, np.inf, open_low=False, open_high=True)
    V.check_interval("prior", prior, 0.0, 1.0, open_low=True, open_high=True)
    V.check_count("n", n)
    if labels is not None:
        V.check_shape("labels", labels, (n,))
        y = V.concrete_value(labels)
        top = 2 if n_classes is None else n_classes
        if y is not None and not np.isin(y, np.arange(top)).all():
            raise ValueError(f"labels must be class indices in [0, {top}); got {np.unique(y)}")
        labels = jnp.asarray(labels, jnp.int32)
    precision = jnp.broadcast_to(as_float(precision), (n_models,))
    return _simulate_gaussian_agents(key, specs, precision, prior, int(n), labels)


@functools.partial(jax.jit, static_argnums=(4,))
def _simulate_gaussian_agents(key, losses, precision, prior, n, labels) -> tuple[Array, Array]:
    key_y, key_x = jax.random.split(key)
    pi = jnp.asarray(prior, jnp.float32)
    if pi.ndim == 1:  # n classes
        classes = jax.random.categorical(key_y, jnp.log(pi), shape=(n,))
        classes = classes if labels is None else labels
        d = precision[:, None, None]
        means = jax.nn.one_hot(classes, pi.shape[0], dtype=jnp.float32)
        x = d * means + jax.random.normal(key_x, (precision.shape[0], n, pi.shape[0]))
        posterior = jax.nn.softmax(jnp.log(pi) + d * x, axis=-1)
        y = classes
    else:
        y = jax.random.uniform(key_y, (n,)) < pi if labels is None else labels
        y = y.astype(jnp.float32)
        d = precision[:, None]
        x = d * y + jax.random.normal(key_x, (precision.shape[0], n))
        posterior = jax.nn.sigmoid(jnp.log(pi) - jnp.log1p(-pi) + d * x - 0.5 * d * d)
    if isinstance(losses, LossSpec):
        scores = jax.vmap(LossSpec.optimal_score)(losses, posterior)
    else:
        scores = jnp.stack(
            [spec.optimal_score(g) for spec, g in zip(losses, posterior, strict=True)]
        )
    return scores, y.astype(jnp.int32)
