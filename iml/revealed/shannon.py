"""Shannon cost ``C_k = lambda I_k``: the interval of ``lambda`` that fits a value matrix, and
the Shannon agent, the learner with that cost (the concave envelope of
``-l*(gamma) + lambda H(gamma)`` at the prior), for binary losses and for losses of ``n``
classes."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp, xlogy

from iml import _validation as V
from iml.calibration._checks import as_float
from iml.revealed.experiments import RevealedExperiments
from iml.revealed.learning_tests import check_value_matrix, switch_gains
from iml.spec import LossLike, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["LambdaInterval", "shannon_agent", "shannon_class_agent", "shannon_lambda_interval"]


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
    ``pi``.

    *Binary losses.* Two posteriors ``g_1 <= pi <= g_2`` suffice, so the envelope is the best
    chord ``max [(g_2 - pi) N(g_1) + (pi - g_1) N(g_2)] / (g_2 - g_1)``: found on a grid of
    pairs, refined by zooming ``n_refine`` times (each a fourth of the previous spacing), and an
    interior posterior is then placed exactly by bisection on the tangency condition
    ``N'(g)(g_2 - g_1) = N(g_2) - N(g_1)``. Under the beta-weighted log loss
    ``gamma (1 - gamma) N''(gamma) = beta (1 - beta) / Z(gamma) - lambda``, so ``N`` is convex
    then concave (``lambda < beta (1 - beta) / Z``, small ``gamma`` first, where ``beta > 1/2``)
    and the agent uses at most two posteriors.

    *Losses of n classes* (:func:`shannon_class_agent`). The same problem as rational
    inattention with Shannon cost over the optimal scores: the Blahut-Arimoto iteration of
    Matejka and McKay (2015) over a finite set of scores, each then moved to the optimal score
    of the posterior it induces; posteriors closer than ``merge_tol`` are one signal.

    Args:
      loss: a binary loss or one of ``n`` classes (anything :func:`iml.loss_spec` reads), or a
        batched specification (e.g. an array of betas ``[K]``): one agent per loss.
      prior: ``pi`` in ``(0, 1)`` for a binary loss; ``[n]`` on the open simplex for ``n``
        classes.
      lam: ``lambda >= 0``, the cost of a nat of mutual information.
      n_grid: grid points per posterior for the first search (binary losses).
      n_refine: zoom rounds (binary losses).

    Returns:
      :class:`RevealedExperiments`: for a binary loss ``[K, 2]`` (``K = 1`` for one loss), the
      posteriors ``g_1 <= g_2`` and their probabilities, both ``pi`` without learning; for ``n``
      classes as :func:`shannon_class_agent` returns.
    """
    spec = loss_spec(loss)
    if spec.record.multiclass:  # scores with a class axis (two classes included)
        return shannon_class_agent(spec, prior, lam)
    V.check_interval("prior", prior, 0.0, 1.0, open_low=True, open_high=True)
    V.check_interval("lam", lam, 0.0, np.inf, open_low=False, open_high=True)
    if np.ndim(prior) or np.ndim(lam):
        raise ValueError("prior and lam must be scalars; map over them with jax.vmap")
    V.check_count("n_grid", n_grid, 2)
    V.check_count("n_refine", n_refine, 0)
    agent = functools.partial(
        _shannon_agent, prior=prior, lam=lam, n_grid=n_grid, n_refine=n_refine
    )
    return _per_loss(agent, spec)


def shannon_class_agent(
    loss: LossLike,
    prior: ArrayLike,
    lam: ArrayLike,
    n_steps: int = 41,
    n_rounds: int = 12,
    n_iterations: int = 400,
    merge_tol: float = 0.02,
) -> RevealedExperiments:
    """The Shannon agent of a loss of ``n`` classes: its experiment maximises
    ``E[-l*(gamma)] - lambda I`` over Bayes-plausible posteriors ``E[gamma] = pi``.

    With the scores restricted to a finite set ``a_1..a_m`` the problem is rational inattention
    with Shannon cost (Matejka and McKay 2015), concave in the choice probabilities
    ``P(a | y)``, whose optimum satisfies ``P(a | y) = p(a) exp(-L(a, y) / lambda) /
    sum_b p(b) exp(-L(b, y) / lambda)`` with ``p(a) = sum_y pi_y P(a | y)``: the Blahut-Arimoto
    iteration reaches it (``n_iterations`` steps a round, in log space). Each round then moves
    every score to the optimal score ``c(gamma_a)`` of the posterior
    ``gamma_a(y) = pi_y P(a | y) / p(a)`` it induces, which cannot lower the objective. The
    first scores are the optimal scores of the prior and of posteriors on the rays from ``pi``
    to each vertex of the simplex and to the middle of each edge (``n_steps - 1`` a ray, the
    last within ``1e-5`` of its end). The posteriors of the scores that carry probability are
    then merged, those within ``merge_tol`` (the largest difference of a
    class's posterior) into their probability-weighted mean, which keeps ``E[gamma] = pi``. At
    the optimum every score ``b`` satisfies ``sum_y pi_y exp(-L(b, y) / lambda) / sum_a p(a)
    exp(-L(a, y) / lambda) <= 1``, with equality where ``p(b) > 0`` (Caplin, Dean and Leahy
    2022): the tests check it on random posteriors.

    Args:
      loss: a loss of ``n`` classes, or a batched one ``[K]``: one agent per loss.
      prior: ``pi`` ``[n]``, every class's probability in ``(0, 1)``, summing to one.
      lam: ``lambda >= 0``; at ``0`` the agent learns the class (posteriors at the vertices).
      n_steps: one more than the posteriors a ray for the first scores (at least 7).
      n_rounds: rounds of moving the scores.
      n_iterations: Blahut-Arimoto steps a round.
      merge_tol: posteriors this close are one signal.

    Returns:
      :class:`RevealedExperiments` with ``probability [K, S]``, ``posterior [K, S, n]`` (signals
      in decreasing probability; ``S`` the most any agent uses, the others padded with
      probability 0 at the prior) and ``prior [K, n]``.

    Raises:
      ValueError: naming the argument (a binary loss, a prior off the simplex, ``lam < 0``).
    """
    spec = loss_spec(loss)
    if not spec.record.multiclass:
        raise ValueError(f"loss must be a loss of n classes; got the {spec.describe()}")
    n = spec.n_classes
    if np.shape(prior) != (n,):
        raise ValueError(f"prior must have shape ({n},) (one per class); got {np.shape(prior)}")
    V.check_interval("prior", prior, 0.0, 1.0, open_low=True, open_high=True)
    V.check_simplex("prior", prior, atol=1e-6)
    V.check_interval("lam", lam, 0.0, np.inf, open_low=False, open_high=True)
    if np.ndim(lam):
        raise ValueError("lam must be a scalar; map over it with jax.vmap")
    V.check_count("n_steps", n_steps, 7)
    V.check_count("n_rounds", n_rounds, 0)
    V.check_count("n_iterations", n_iterations, 1)
    V.check_interval("merge_tol", merge_tol, 0.0, 1.0, open_low=False, open_high=True)
    pi = np.asarray(prior, np.float64)
    if float(lam) == 0.0:  # free information: the class itself
        K = int(np.prod(spec.batch_shape)) if spec.batch_shape else 1
        eye = np.broadcast_to(np.eye(n, dtype=np.float32), (K, n, n))
        return RevealedExperiments(
            jnp.asarray(np.broadcast_to(pi, (K, n)), jnp.float32),
            jnp.asarray(eye),
            jnp.asarray(np.broadcast_to(pi, (K, n)), jnp.float32),
        )
    agent = functools.partial(
        _class_agent, prior=jnp.asarray(pi, jnp.float32), lam=float(lam), n_steps=int(n_steps),
        n_rounds=int(n_rounds), n_iterations=int(n_iterations),
    )  # fmt: skip
    p, posterior = _per_loss(agent, spec)
    merged = [_merged_signals(pk, gk, pi, merge_tol) for pk, gk in zip(
        np.asarray(p, np.float64), np.asarray(posterior, np.float64), strict=True)]  # fmt: skip
    S = max(len(pk) for pk, _ in merged)
    probability = np.zeros((len(merged), S))
    posteriors = np.broadcast_to(pi, (len(merged), S, n)).copy()
    for k, (pk, gk) in enumerate(merged):
        probability[k, : len(pk)], posteriors[k, : len(pk)] = pk, gk
    return RevealedExperiments(
        jnp.asarray(probability, jnp.float32),
        jnp.asarray(posteriors, jnp.float32),
        jnp.asarray(np.broadcast_to(pi, (len(merged), n)), jnp.float32),
    )


def _per_loss(agent, spec):
    """``agent`` mapped over the losses of ``spec`` (one loss: ``K = 1``)."""
    if not spec.batch_shape:  # one model: K = 1
        spec = jax.tree.map(lambda x: jnp.asarray(x)[None], spec)
    for _ in spec.batch_shape:
        agent = jax.vmap(agent)
    return agent(spec)


@functools.partial(jax.jit, static_argnames=("n_steps", "n_rounds", "n_iterations"))
def _class_agent(spec, prior, lam, n_steps, n_rounds, n_iterations) -> tuple[Array, Array]:
    """Blahut-Arimoto with moving scores: each candidate's ``p(a)`` ``[m]`` and the posterior
    it induces ``[m, n]``."""
    n = prior.shape[-1]
    eye = jnp.eye(n, dtype=jnp.float32)
    i, j = np.triu_indices(n, 1)
    ends = jnp.concatenate([eye, 0.5 * (eye[i] + eye[j])])  # vertices, then edge middles
    t = jnp.concatenate([jnp.linspace(0.0, 0.98, n_steps - 5)[1:],
                         1.0 - jnp.logspace(-2.0, -5.0, 5)])  # fmt: skip
    start = (1.0 - t[None, :, None]) * prior + t[None, :, None] * ends[:, None, :]
    start = jnp.concatenate([prior[None], start.reshape(-1, n)])  # the prior: no learning
    log_pi = jnp.log(prior)

    def utility(gamma: Array) -> Array:  # -L(c(gamma), y) / lambda, [m, n]
        # posteriors kept off the simplex's faces: a score of exactly 0 or 1 can make a loss
        # 0 * log 0 (NaN) where it is finite
        gamma = jnp.clip(gamma, 1e-6, 1.0)
        a = spec.optimal_score(gamma / jnp.sum(gamma, axis=-1, keepdims=True))
        per_class = [spec.loss(a, jnp.full(a.shape[:-1], y, jnp.int32)) for y in range(n)]
        return -jnp.stack(per_class, axis=-1) / lam

    def conditional(log_p: Array, u: Array) -> Array:  # log P(a | y), [m, n]
        logits = log_p[:, None] + u
        return logits - logsumexp(logits, axis=0, keepdims=True)

    def blahut_arimoto(log_p: Array, u: Array) -> Array:
        def step(_, log_p):
            return logsumexp(conditional(log_p, u) + log_pi, axis=1)

        return jax.lax.fori_loop(0, n_iterations, step, log_p)

    m = start.shape[0]

    def round_(_, carry):
        log_p, scores = carry
        u = utility(scores)
        log_p = blahut_arimoto(log_p, u)
        log_joint = conditional(log_p, u) + log_pi  # log pi_y P(a | y)
        return log_p, jnp.exp(log_joint - logsumexp(log_joint, axis=1, keepdims=True))

    log_p = jnp.full(m, -jnp.log(1.0 * m), jnp.float32)
    log_p, posterior = jax.lax.fori_loop(0, n_rounds, round_, (log_p, start))
    u = utility(posterior)
    log_joint = conditional(log_p, u) + log_pi
    log_marginal = logsumexp(log_joint, axis=1)  # p(a) consistent with P(a | y): E[gamma] = pi
    return jnp.exp(log_marginal), jnp.exp(log_joint - log_marginal[:, None])


def _merged_signals(p: np.ndarray, posterior: np.ndarray, pi: np.ndarray, tol: float):
    """Signals of probability over ``1e-6`` (largest first) whose posteriors lie within ``tol``
    of a larger one's are merged with it; every candidate's mass then joins its nearest signal,
    so that ``sum_s P(s) gamma_s = pi`` still holds. Returns ``P(s) [S]`` and ``gamma [S, n]``."""
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(posterior))):
        raise FloatingPointError("the Shannon agent's iteration gave a non-finite probability")
    order = np.argsort(-p)
    centres: list[np.ndarray] = []
    for a in order[p[order] > 1e-6 * p.sum()]:
        if all(np.abs(posterior[a] - c).max() > tol for c in centres):
            centres.append(posterior[a])
    if not centres:  # no candidate carries mass: no learning
        return np.ones(1), pi[None]
    nearest = np.argmin(np.abs(posterior[:, None, :] - np.asarray(centres)[None]).max(-1), axis=1)
    mass = np.bincount(nearest, weights=p, minlength=len(centres))
    mean = np.stack([np.bincount(nearest, weights=p * posterior[:, c], minlength=len(centres))
                     for c in range(posterior.shape[1])], axis=-1)  # fmt: skip
    keep = mass > 0
    total = mass[keep].sum()
    return mass[keep] / total, mean[keep] / mass[keep][:, None]


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
