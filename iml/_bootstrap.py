"""Resampling: rows and seeds, percentile intervals.

The nonparametric bootstrap of the calibration analysis (:mod:`iml.calibration`): the rows
(observations) are resampled with replacement as multinomial multiplicities drawn from a
``jax.random`` key (:func:`bootstrap_counts`), which enter as observation weights, so that a batch
of replicates is one weighted sum with the bins and every other fixed quantity held;
:func:`percentile_interval` reads a percentile interval off the replicates, and
:func:`check_bootstrap` validates the options of every function that bootstraps.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iml import _validation as V

Array = jax.Array


def bootstrap_counts(key: Array, n: int, n_bootstrap: int) -> Array:
    """Multinomial resampling multiplicities: ``(n_bootstrap, n)`` counts, each row summing to n.

    Indices are random 32-bit integers modulo ``n`` (a relative bias below ``n / 2**32``), which
    compiles much faster on CPU than ``jax.random.randint``.
    """
    idx = (jax.random.bits(key, (n_bootstrap, n), jnp.uint32) % jnp.uint32(n)).astype(jnp.int32)
    rows = jnp.arange(n_bootstrap)[:, None]
    return jnp.zeros((n_bootstrap, n), jnp.float32).at[rows, idx].add(1.0)


def percentile_interval(samples: Array, confidence: float, axis: int = 0) -> Array:
    """Percentile bootstrap interval along ``axis``, NaNs (empty bins) ignored: ``(2, ...)``."""
    lo = (1.0 - confidence) / 2.0
    return jnp.nanquantile(samples, jnp.array([lo, 1.0 - lo]), axis=axis)


def check_bootstrap(n_bootstrap: int, key: Array | None, confidence: float) -> None:
    V.check_count("n_bootstrap", n_bootstrap, 0)
    if n_bootstrap > 0 and key is None:
        raise ValueError("key (a jax.random key) is required when n_bootstrap > 0")
    V.check_open_unit("confidence", confidence)
