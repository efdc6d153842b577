"""The Clopper-Pearson ("exact") confidence interval of a binomial rate, such as the event rate
of a bin of a calibration curve (:class:`iml.calibration.curves.CalibrationCurve`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.calibration._checks import as_float

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["clopper_pearson_interval"]


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
