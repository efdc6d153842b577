"""The binned calibration curve of binary scores (Definition 1; the paper's Figures 1 and 4):
per bin, the mean score against the event rate, with the event rate's Clopper-Pearson ("exact")
interval of a binomial rate and optional bootstrap intervals of both."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml._bootstrap import bootstrap_counts, check_bootstrap, percentile_interval
from iml.calibration._checks import (
    as_float,
    as_weights,
    check_binary,
    check_bins,
)
from iml.calibration.binning import assign_bins, bin_edges, binned_statistics, safe_div

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["CalibrationCurve", "calibration_curve", "clopper_pearson_interval"]


@functools.partial(jax.jit, static_argnames="n_steps")
def _beta_quantile(q: Array, a: Array, b: Array, n_steps: int = 64) -> Array:
    """The ``q`` quantile of ``Beta(a, b)``: the root of ``I_x(a, b) = q`` by bisection on [0, 1].

    JAX has the regularized incomplete beta function ``I_x(a, b)`` (``betainc``) but no beta
    quantile; ``I_x`` increases in ``x``, so bisection converges, to float resolution after 64
    halvings. Broadcasts over its arguments; ``a, b > 0``.
    """
    q, a, b = jnp.broadcast_arrays(q, a, b)

    def halve(_, bounds: tuple[Array, Array]) -> tuple[Array, Array]:
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        below = jax.scipy.special.betainc(a, b, mid) < q
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = jax.lax.fori_loop(0, n_steps, halve, (jnp.zeros_like(q), jnp.ones_like(q)))
    return 0.5 * (lo + hi)


def clopper_pearson_interval(
    events: ArrayLike, count: ArrayLike, confidence: ArrayLike = 0.95
) -> Array:
    """Clopper-Pearson ("exact") confidence interval of a binomial rate ``events / count``.

    With ``k`` events out of ``n`` and ``alpha = 1 - confidence``, the interval is the pair of
    beta quantiles (Clopper & Pearson, Biometrika 26(4), 1934; Brown, Cai & DasGupta,
    Statistical Science 16(2), 2001, eq. 4)::

        lower = Beta^{-1}(alpha / 2; k, n - k + 1)      (0 when k = 0),
        upper = Beta^{-1}(1 - alpha / 2; k + 1, n - k)  (1 when k = n),

    whose coverage is at least ``confidence`` for every true rate. With no event the upper bound
    has the closed form ``1 - (alpha / 2)^(1 / n)`` (used as such), and with every trial an event
    the lower bound is ``(alpha / 2)^(1 / n)``. Non-integer ``k`` and ``n`` (effective counts of
    weighted data, see :class:`CalibrationCurve`) enter the same beta quantiles.

    Pure and elementwise: works under ``jax.jit`` and ``jax.vmap`` (the bounds are found by
    bisection, so they carry no gradient).

    Args:
      events: number of events ``k``, any shape.
      count: number of trials ``n`` (broadcast against ``events``); ``n = 0`` (an empty bin)
        gives NaN bounds.
      confidence: coverage in ``(0, 1)``.

    Returns:
      ``(2, *shape)``: row 0 the lower bounds, row 1 the upper bounds.

    Raises:
      ValueError: on concrete input with ``events < 0``, ``count < events``, NaN, or
        ``confidence`` outside ``(0, 1)`` (under jit those entries give NaN).
    """
    k_np, n_np = V.concrete_value(events), V.concrete_value(count)
    V.check_open_unit("confidence", confidence)
    V.check_interval("events", events, 0.0, np.inf, open_low=False, open_high=False)
    V.check_interval("count", count, 0.0, np.inf, open_low=False, open_high=False)
    if k_np is not None and n_np is not None and np.any(k_np > n_np):
        raise ValueError("events exceeds count")
    k = as_float(events)
    n = jnp.asarray(count, k.dtype)
    k, n = jnp.broadcast_arrays(k, n)
    half_alpha = 0.5 * (1.0 - jnp.asarray(confidence, k.dtype))
    valid = (k >= 0) & (k <= n) & (n > 0) & (half_alpha > 0) & (half_alpha < 0.5)
    none, every = k <= 0, k >= n
    # Placeholder shape parameters where a bound has a closed form (betainc needs a, b > 0).
    lower = _beta_quantile(half_alpha, jnp.where(none, 1.0, k), jnp.where(none, 1.0, n - k + 1))
    upper = _beta_quantile(
        1.0 - half_alpha, jnp.where(every, 1.0, k + 1), jnp.where(every, 1.0, n - k)
    )
    safe_n = jnp.where(n > 0, n, 1.0)
    lower = jnp.where(none, 0.0, jnp.where(every, half_alpha ** (1.0 / safe_n), lower))
    upper = jnp.where(every, 1.0, jnp.where(none, 1.0 - half_alpha ** (1.0 / safe_n), upper))
    return jnp.where(valid, jnp.stack([lower, upper]), jnp.nan)


class CalibrationCurve(NamedTuple):
    """A binned calibration curve (a pytree).

    Attributes:
      mean_score: weighted mean score per bin, ``(n_bins,)``; NaN in an empty bin.
      event_rate: weighted rate of label 1 per bin (the empirical ``P(y = 1 | a)`` of
        Definition 1); NaN in an empty bin.
      count: sum of weights per bin (the number of observations when unweighted); 0 if empty.
      edges: bin edges, ``(n_bins + 1,)``.
      event_rate_binomial_interval: :func:`clopper_pearson_interval` of ``event_rate``,
        ``(2, n_bins)``, always computed. Unweighted, from the bin's events and count; weighted,
        from Kish's effective count ``n_eff = count^2 / sum(w^2)`` and ``event_rate * n_eff``
        events. A bin without events gets ``[0, 1 - (alpha / 2)^(1 / n_eff)]``; NaN if empty.
      mean_score_interval: bootstrap percentile interval of ``mean_score``, ``(2, n_bins)``
        (row 0 lower, row 1 upper), or ``None`` without bootstrap. NaN where the bin is empty in
        every replicate.
      event_rate_interval: the same for ``event_rate``.
    """

    mean_score: Array
    event_rate: Array
    count: Array
    edges: Array
    event_rate_binomial_interval: Array
    mean_score_interval: Array | None = None
    event_rate_interval: Array | None = None


def calibration_curve(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    sample_weight: ArrayLike | None = None,
    *,
    n_bootstrap: int = 0,
    key: Array | None = None,
    confidence: float = 0.95,
) -> CalibrationCurve:
    """The binned calibration curve of binary scores (Definition 1; the paper's Figures 1, 4).

    Scores are calibrated when the curve lies on the diagonal: ``event_rate == mean_score``.
    Unlike scikit-learn, empty bins are kept (with ``count == 0`` and NaN means) so that the
    output has a fixed shape and can be jitted and vmapped.

    Args:
      scores: positive-class scores in ``[0, 1]``, shape ``(n,)``.
      labels: labels in ``{0, 1}``, shape ``(n,)``.
      confidence: coverage of the intervals (the binomial one, always computed, and the
        bootstrap ones, percentile intervals).

    Raises:
      ValueError: on concrete bad input (see :mod:`iml.calibration` for traced input).
    """
    check_bins(n_bins, strategy)
    check_binary(scores, labels, sample_weight, n_bins)
    check_bootstrap(n_bootstrap, key, confidence)
    return _calibration_curve(
        scores, labels, sample_weight, key, n_bins, strategy, n_bootstrap, confidence
    )


@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7))
def _calibration_curve(
    scores, labels, sample_weight, key, n_bins, strategy, n_bootstrap, confidence
) -> CalibrationCurve:
    s = as_float(scores)
    w = as_weights(sample_weight, s)
    edges = bin_edges(s, n_bins, strategy)
    bins = assign_bins(s, edges)
    st = binned_statistics(s, labels, bins, n_bins, w)
    mean_score = safe_div(st.score_sum, st.count)
    event_rate = safe_div(st.label_sum, st.count)
    # Kish's effective count n_eff = count^2 / sum(w^2); exactly the count when unweighted.
    design = safe_div(st.count, st.weight_sq_sum)
    n_eff = jnp.where(st.count > 0, st.count * design, 0.0)
    events = jnp.minimum(jnp.where(st.count > 0, st.label_sum * design, 0.0), n_eff)
    binomial = clopper_pearson_interval(events, n_eff, confidence)
    if n_bootstrap == 0:
        return CalibrationCurve(mean_score, event_rate, st.count, edges, binomial)
    counts = bootstrap_counts(key, s.shape[0], n_bootstrap)
    boot = binned_statistics(s, labels, bins, n_bins, w * counts)  # one product for all
    return CalibrationCurve(
        mean_score,
        event_rate,
        st.count,
        edges,
        binomial,
        percentile_interval(safe_div(boot.score_sum, boot.count), confidence),
        percentile_interval(safe_div(boot.label_sum, boot.count), confidence),
    )
