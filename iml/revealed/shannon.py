"""Shannon cost ``C_k = lambda I_k``: the interval of ``lambda`` that fits a value matrix, and
the Shannon agent, the learner with that cost (the concave envelope of
``-l*(gamma) + lambda H(gamma)`` at the prior)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlogy

from iml import _validation as V
from iml.calibration._checks import as_float
from iml.revealed.experiments import RevealedExperiments
from iml.revealed.learning_tests import check_value_matrix, switch_gains
from iml.spec import LossLike, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["LambdaInterval", "shannon_agent", "shannon_lambda_interval"]


class LambdaInterval(NamedTuple):
    """The values of ``lambda`` for which Shannon cost ``C_k = lambda I_k`` fits the data.

    Attributes:
      lower, upper: the interval's ends (``lambda >= 0``; ``upper = inf`` when unbounded),
        ``[...]``.
      rejected: whether no ``lambda`` fits (the interval is empty), ``[...]``.
    """

    lower: Array
    upper: Array
    rejected: Array


def shannon_lambda_interval(
    G: ArrayLike, information: ArrayLike, atol: float = 1e-6
) -> LambdaInterval:
    """Shannon cost with one ``lambda`` requires ``lambda (I_k - I_j) <= G[k, k] - G[k, j]``.

    Pairs with ``I_k > I_j`` bound ``lambda`` above, pairs with ``I_k < I_j`` below; pairs of equal
    information (within ``atol`` nats) need ``G[k, k] >= G[k, j] - atol`` whatever ``lambda``. The
    interval is intersected with ``lambda >= 0``.

    Args:
      information: ``I`` ``[..., K]`` (:func:`mutual_information`).
      atol: the information difference below which two experiments count as equally informative.
    """
    check_value_matrix(G)
    if np.shape(information) != np.shape(G)[:-1]:
        raise ValueError(
            f"information must have shape {np.shape(G)[:-1]} (one per model); got "
            f"{np.shape(information)}"
        )
    return shannon_lambda_interval_of(G, information, atol)


@jax.jit
def shannon_lambda_interval_of(G: ArrayLike, information: ArrayLike, atol: float) -> LambdaInterval:
    slack = -switch_gains(as_float(G))  # [k, j]: G[k, k] - G[k, j]
    I = as_float(information)
    dI = I[..., :, None] - I[..., None, :]  # I_k - I_j
    ratio = slack / jnp.where(jnp.abs(dI) > atol, dI, 1.0)
    upper = jnp.min(jnp.where(dI > atol, ratio, jnp.inf), axis=(-2, -1))
    lower = jnp.maximum(jnp.max(jnp.where(dI < -atol, ratio, -jnp.inf), axis=(-2, -1)), 0.0)
    equal_fails = jnp.any((jnp.abs(dI) <= atol) & (slack < -atol), axis=(-2, -1))
    return LambdaInterval(lower, upper, (lower > upper) | equal_fails)


def shannon_agent(
    loss: LossLike,
    prior: ArrayLike,
    lam: ArrayLike,
    n_grid: int = 513,
    n_refine: int = 12,
) -> RevealedExperiments:
    """The experiment of a learner with Shannon cost: the concave envelope of ``N`` at the prior.

    The learner chooses posteriors to maximise ``E[-l*(gamma) + lambda H(gamma)]`` subject to
    ``E[gamma] = pi`` (value minus ``lambda`` times the mutual information, up to the constant
    ``lambda H(pi)``): the concave envelope of ``N(gamma) = -l*(gamma) + lambda H(gamma)`` at
    ``pi``. In one dimension two posteriors ``g_1 <= pi <= g_2`` suffice, so the envelope is the
    best chord ``max [(g_2 - pi) N(g_1) + (pi - g_1) N(g_2)] / (g_2 - g_1)``: found on a grid of
    pairs, refined by zooming ``n_refine`` times (each a fourth of the previous spacing), and an
    interior posterior is then placed exactly by bisection on the tangency condition
    ``N'(g)(g_2 - g_1) = N(g_2) - N(g_1)``. Under the beta-weighted log loss
    ``gamma (1 - gamma) N''(gamma) = beta (1 - beta) / Z(gamma) - lambda``, so ``N`` is convex
    then concave (``lambda < beta (1 - beta) / Z``, small ``gamma`` first, where ``beta > 1/2``)
    and the agent uses at most two posteriors.

    Args:
      loss: a binary loss (anything :func:`iml.loss_spec` reads), or a batched specification
        (e.g. an array of betas ``[K]``): one agent per loss.
      prior: ``pi`` in ``(0, 1)``.
      lam: ``lambda >= 0``, the cost of a nat of mutual information.
      n_grid: grid points per posterior for the first search.
      n_refine: zoom rounds.

    Returns:
      :class:`RevealedExperiments` ``[K, 2]`` (``K = 1`` for one loss): the posteriors
      ``g_1 <= g_2`` and their probabilities. Without learning both posteriors are ``pi``.
    """
    spec = loss_spec(loss)
    if spec.multiclass:
        raise ValueError(f"loss must be a binary loss; got the {spec.describe()}")
    V.check_interval("prior", prior, 0.0, 1.0, open_low=True, open_high=True)
    V.check_interval("lam", lam, 0.0, np.inf, open_low=False, open_high=True)
    if np.ndim(prior) or np.ndim(lam):
        raise ValueError("prior and lam must be scalars; map over them with jax.vmap")
    V.check_count("n_grid", n_grid, 2)
    V.check_count("n_refine", n_refine, 0)
    agent = functools.partial(
        _shannon_agent, prior=prior, lam=lam, n_grid=n_grid, n_refine=n_refine
    )
    if not spec.batch_shape:  # one model: K = 1
        spec = jax.tree.map(lambda x: jnp.asarray(x)[None], spec)
    for _ in spec.batch_shape:
        agent = jax.vmap(agent)
    return agent(spec)


@functools.partial(jax.jit, static_argnames=("n_grid", "n_refine"))
def _shannon_agent(spec, prior, lam, n_grid, n_refine) -> RevealedExperiments:
    pi = jnp.asarray(prior, jnp.float32)
    lam = jnp.asarray(lam, jnp.float32)

    def concavified(g: Array) -> Array:
        return -spec.minimised_expected_loss(g) + lam * (-xlogy(g, g) - xlogy(1.0 - g, 1.0 - g))

    def best_chord(g1: Array, g2: Array) -> tuple[Array, Array, Array]:
        n1, n2 = concavified(g1), concavified(g2)
        gap = g2[None, :] - g1[:, None]
        t = jnp.clip((pi - g1[:, None]) / jnp.where(gap > 0, gap, 1.0), 0.0, 1.0)
        value = jnp.where(gap > 0, (1.0 - t) * n1[:, None] + t * n2[None, :], n1[:, None])
        flat = jnp.argmax(value)
        i, j = flat // g2.shape[0], flat % g2.shape[0]
        return g1[i], g2[j], value.reshape(-1)[flat]

    u = jnp.linspace(0.0, 1.0, n_grid, dtype=jnp.float32)
    g1, g2, _ = best_chord(pi * u, 1.0 - (1.0 - pi) * (1.0 - u))
    step1, step2 = pi / (n_grid - 1), (1.0 - pi) / (n_grid - 1)
    zoom = jnp.linspace(-2.0, 2.0, 17, dtype=jnp.float32)

    def refine(_, carry):
        g1, g2, step1, step2 = carry
        lo1, hi1 = jnp.maximum(g1 - 2 * step1, 0.0), jnp.minimum(g1 + 2 * step1, pi)
        lo2, hi2 = jnp.maximum(g2 - 2 * step2, pi), jnp.minimum(g2 + 2 * step2, 1.0)
        w = (zoom + 2.0) / 4.0
        grid1 = jnp.concatenate([lo1 + (hi1 - lo1) * w, g1[None]])
        grid2 = jnp.concatenate([lo2 + (hi2 - lo2) * w, g2[None]])
        g1, g2, _ = best_chord(grid1, grid2)
        return g1, g2, step1 / 4.0, step2 / 4.0

    g1, g2, _, _ = jax.lax.fori_loop(0, n_refine, refine, (g1, g2, step1, step2))

    # The chord's value is flat at its maximum, so float32 values place an interior posterior
    # only to about 1e-4; its first-order condition N'(g)(g2 - g1) = N(g2) - N(g1) (tangency)
    # places it to float32 resolution. N' by the envelope theorem: l*'(g) = L(c(g), 1) - L(c(g), 0).
    def slope(g: Array) -> Array:
        a = spec.optimal_score(g)
        loss_slope = spec.loss(a, jnp.ones_like(a)) - spec.loss(a, jnp.zeros_like(a))
        return -loss_slope + lam * (jnp.log1p(-g) - jnp.log(g))

    def tangency(g: Array, lo: Array, hi: Array, other: Array, sign: float) -> Array:
        def condition(x: Array) -> Array:
            return sign * (slope(x) * (x - other) - (concavified(x) - concavified(other)))

        a = jnp.maximum(g - 0.02, 0.5 * (g + lo))
        b = jnp.minimum(g + 0.02, 0.5 * (g + hi))
        brackets = (g > lo) & (g < hi) & (condition(a) > 0) & (condition(b) < 0)

        def halve(_, ab):
            a, b = ab
            m = 0.5 * (a + b)
            up = condition(m) > 0
            return jnp.where(up, m, a), jnp.where(up, b, m)

        a, b = jax.lax.fori_loop(0, 40, halve, (a, b))
        return jnp.where(brackets, 0.5 * (a + b), g)

    for _ in range(2):
        g2 = tangency(g2, pi, 1.0, g1, 1.0)
        g1 = tangency(g1, 0.0, pi, g2, -1.0)
    gap = g2 - g1
    learns = (pi - g1 > 1e-6) & (g2 - pi > 1e-6)  # else one posterior, the prior
    p2 = jnp.where(learns, (pi - g1) / jnp.where(learns, gap, 1.0), 0.0)
    posterior = jnp.where(learns, jnp.stack([g1, g2]), jnp.stack([pi, pi]))
    return RevealedExperiments(jnp.stack([1.0 - p2, p2]), posterior, pi)
