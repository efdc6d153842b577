"""Resampling: rows and seeds, percentile intervals.

The nonparametric bootstrap of the calibration analysis (:mod:`iml.calibration`): the rows
(observations) are resampled with replacement as multinomial multiplicities drawn from a
``jax.random`` key (:func:`bootstrap_counts`), which enter as observation weights, so that a batch
of replicates is one weighted sum with the bins and every other fixed quantity held (or, for a
statistic that indexes its rows, as the row indices themselves, :func:`bootstrap_rows`);
:func:`percentile_interval` reads a percentile interval off the replicates, and
:func:`check_bootstrap` validates the options of every function that bootstraps.

The paired bootstrap of the revealed experiments (:mod:`iml.revealed`) draws Poisson(1)-like
multiplicities as well (:func:`poisson_counts`, :func:`paired_bootstrap_weights`), resamples each
model's training seeds (:func:`resampled_seeds`), and reads percentile intervals off by order
statistics, rounded outward (:func:`order_statistic_interval`).
"""

from __future__ import annotations

import atexit
import functools
import os
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import DTypeLike

from iml import _ffi
from iml import _validation as V
from iml._device import usable_cores

Array = jax.Array


def bootstrap_counts(key: Array, n: int, n_bootstrap: int) -> Array:
    """Multinomial resampling multiplicities: ``(n_bootstrap, n)`` counts, each row summing to n.

    Indices are random 32-bit integers modulo ``n`` (a relative bias below ``n / 2**32``), which
    compiles much faster on CPU than ``jax.random.randint``.
    """
    idx = (jax.random.bits(key, (n_bootstrap, n), jnp.uint32) % jnp.uint32(n)).astype(jnp.int32)
    rows = jnp.arange(n_bootstrap)[:, None]
    return jnp.zeros((n_bootstrap, n), jnp.float32).at[rows, idx].add(1.0)


def bootstrap_rows(key: Array, n: int, n_bootstrap: int) -> Array:
    """The row indices of ``n_bootstrap`` replicates of ``n`` rows drawn with replacement,
    ``[n_bootstrap, n]`` (``jax.random.randint``): for statistics that index their rows, as a
    paired comparison of two statistics of the same rows does."""
    return jax.random.randint(key, (n_bootstrap, n), 0, n)


def percentile_interval(samples: Array, confidence: float, axis: int = 0) -> Array:
    """Percentile bootstrap interval along ``axis``, NaNs (empty bins) ignored: ``(2, ...)``."""
    lo = (1.0 - confidence) / 2.0
    return jnp.nanquantile(samples, jnp.array([lo, 1.0 - lo]), axis=axis)


def check_bootstrap(n_bootstrap: int, key: Array | None, confidence: float) -> None:
    V.check_count("n_bootstrap", n_bootstrap, 0)
    if n_bootstrap > 0 and key is None:
        raise ValueError("key (a jax.random key) is required when n_bootstrap > 0")
    V.check_open_unit("confidence", confidence)


RESAMPLINGS = ("poisson", "multinomial")


# Poisson(1) multiplicities quantised to multiples of 1/256, four per 32 random bits:
# P(0..5) = (94, 95, 46, 16, 4, 1) / 256 keeps the mean and the variance at exactly 1 (what the
# bootstrap's validity rests on) and lies within 0.6% of Poisson(1) in total variation.
_POISSON_COUNTS = np.repeat(np.arange(6), [94, 95, 46, 16, 4, 1]).astype(np.float32)
# The byte values from which the count is at least 1, 2, ..., 5.
_POISSON_STEPS = tuple(int(v) for v in np.cumsum([94, 95, 46, 16, 4]))


def poisson_counts(key: Array, n: int, n_bootstrap: int, dtype: DTypeLike = jnp.float32) -> Array:
    """Independent Poisson(1)-like multiplicities ``[n_bootstrap, n]`` (see above) in ``dtype``
    (float32, or int8 for products in integers: the same counts): observation ``j`` of a row
    takes byte ``j // w`` of the row's word ``j % w`` (``w = ceil(n / 4)`` words), and its count
    is the number of steps (:data:`_POISSON_STEPS`) that byte reaches: one elementwise pass over
    the words repeated four times, in place of a lookup in the table of the four bytes' rows
    concatenated (docs/results/sweep_train, "Resampling counts and the indicator's blocks").
    Int8 counts are compared and summed in bytes."""
    w = (n + 3) // 4
    words = jax.random.bits(key, (n_bootstrap, w), jnp.uint32)
    repeated = jnp.tile(words, (1, 4))[:, :n]
    shift = (jnp.arange(n, dtype=jnp.uint32) // w) * 8
    u = (repeated >> shift) & 0xFF
    if jnp.dtype(dtype) == jnp.int8:
        u = u.astype(jnp.uint8)
    return sum((u >= step).astype(dtype) for step in _POISSON_STEPS)


def resampling_counts(key: Array, n: int, n_bootstrap: int, resampling: str) -> Array:
    if resampling == "poisson":
        return poisson_counts(key, n, n_bootstrap)
    return bootstrap_counts(key, n, n_bootstrap)


def check_resampling(resampling: str) -> None:
    V.check_choice("resampling", resampling, RESAMPLINGS)


def paired_bootstrap_weights(
    key: Array, n: int, n_bootstrap: int, resampling: str = "poisson"
) -> Array:
    """Resampling multiplicities ``[n_bootstrap, n]``: one paired bootstrap replicate per row.

    Used as observation weights for every model at once
    (:func:`iml.revealed.experiments_from_signals`), a row resamples the same observations for
    every ``k``, without gathering the data.

    Args:
      key: ``jax.random`` key.
      n: observations.
      n_bootstrap: replicates.
      resampling: ``"multinomial"``, the classical bootstrap's counts (each row sums to ``n``), or
        ``"poisson"``, independent Poisson(1) counts (the Poisson bootstrap, the multinomial's
        large-``n`` limit; rows sum to ``n`` on average), quantised to probabilities in
        multiples of 1/256 with mean and variance exactly 1. Both are exchangeable weights of
        mean 1 and variance 1 (to ``O(1/n)``), which is what the bootstrap's validity rests on
        (Praestgaard & Wellner 1993); the Poisson counts are the cheaper to draw.

    Returns:
      ``[n_bootstrap, n]`` float32 multiplicities.
    """
    V.check_count("n", n)
    V.check_count("n_bootstrap", n_bootstrap)
    check_resampling(resampling)
    return jax.jit(resampling_counts, static_argnums=(1, 2, 3))(
        key, int(n), int(n_bootstrap), resampling
    )


def ordered_keys(x: Array) -> Array:
    """float32 -> int32 keys in the same order (sign-magnitude to two's complement)."""
    bits = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)
    return jnp.where(bits >= 0, bits, bits ^ jnp.int32(0x7FFFFFFF))


def from_ordered_keys(keys: Array) -> Array:
    """The inverse of :func:`ordered_keys`."""
    bits = jnp.where(keys >= 0, keys, keys ^ jnp.int32(0x7FFFFFFF))
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def wait_for_running_programs() -> None:
    """Block until every live array of JAX's default backend is ready, so that the programs
    still computing them have finished.

    Runs at interpreter exit once :func:`host_or_device` has been called (so that a process
    that never ran JAX starts no backend at exit): a host function that starts after Python has
    begun to finalize cannot take the interpreter lock, and the process aborts (exit status 134)
    after the script's own work is done. Arrays whose computation failed are left to report
    their error where they are read."""
    for array in jax.live_arrays():
        try:
            if not array.is_deleted():
                array.block_until_ready()
        except Exception:  # its error belongs to the code that reads the array
            pass


@functools.cache
def _wait_at_exit() -> None:
    atexit.register(wait_for_running_programs)


#: The shortest rows sorted by NumPy on the host, on the CPU. Shorter rows are sorted by XLA
#: everywhere, which costs little more than NumPy's sort of such rows in absolute terms
#: (``docs/results/sweep_train/README.md``, "Short rows sorted by XLA"), in a program that calls
#: no host function.
HOST_SORT_MIN_LENGTH = 1024


#: A host function's batch of at least this many values is split by rows over the threads of
#: :func:`_row_threads` (NumPy's sorts release the interpreter lock; XLA's own threads wait on
#: the host function meanwhile).
THREAD_MIN_ELEMENTS = 2**16


@functools.cache
def _row_threads() -> tuple[ThreadPoolExecutor | None, int]:
    """A pool of one thread per core this process may use (at most 8), and their number; no
    pool on one core."""
    cores = min(usable_cores(), 8)
    pool = ThreadPoolExecutor(cores, thread_name_prefix="iml-rows") if cores > 1 else None
    return pool, cores


# A forked child has none of its parent's threads: it makes its own pool when it needs one.
os.register_at_fork(after_in_child=_row_threads.cache_clear)


def by_rows(host_fn, a: np.ndarray) -> np.ndarray:
    """``host_fn(a)`` for a function of each row of ``a`` (along its last axis) on its own: the
    rows split over :func:`_row_threads` where ``a`` holds several rows and at least
    :data:`THREAD_MIN_ELEMENTS` values, the parts' results put back in order (the same values
    as one call)."""
    pool, threads = _row_threads()
    if pool is None or a.ndim < 2 or a.size < THREAD_MIN_ELEMENTS:
        return host_fn(a)
    rows = a.reshape(-1, a.shape[-1])
    if rows.shape[0] < 2:
        return host_fn(a)
    parts = np.array_split(rows, min(threads, rows.shape[0]))
    out = np.concatenate(list(pool.map(host_fn, parts)))
    return out.reshape(*a.shape[:-1], *out.shape[1:])


def host_rows(name: str, fn) -> str:
    """Register ``fn`` (NumPy, of each row of its first argument along the last axis, on its
    own; any further arguments are passed as they are) as the host function ``name``
    (:func:`iml._ffi.register`), its rows split over threads (:func:`by_rows`); returns
    ``name``."""
    return _ffi.register(name, lambda a, *rest: by_rows(lambda rows: fn(rows, *rest), a))


def host_or_device(x: Array, name: str, device_fn, dtype, out_shape=None, operands=()) -> Array:
    """The host function ``name`` (:func:`host_rows`) of ``x`` and ``operands`` on the CPU,
    where NumPy's sorts are several times faster than XLA's for rows of tens of thousands;
    ``device_fn(x)`` (JAX) elsewhere, everywhere for rows shorter than
    :data:`HOST_SORT_MIN_LENGTH`, and where XLA refused the host function. Both return ``x``'s
    shape in ``dtype`` (or ``out_shape`` of ``x``'s shape); under vmap the host function takes
    the batch at once. The program refers to the host function by name (:mod:`iml._ffi`), so
    JAX's persistent compilation cache keeps it. A script may end while such a program runs:
    :func:`wait_for_running_programs` waits for it at exit.

    Programs calling the host must not run at once from two threads of one process: a report
    that did so through ``jax.pure_callback`` hung on a 2-core host, with XLA's CPU threads each
    inside a callback."""
    if np.ndim(x) == 0 or np.shape(x)[-1] < HOST_SORT_MIN_LENGTH or not _ffi.registered(name):
        return device_fn(x)
    _wait_at_exit()

    def host(v: Array) -> Array:
        shape = v.shape if out_shape is None else out_shape(v.shape)
        return _ffi.call(name, jax.ShapeDtypeStruct(shape, dtype), v, *operands)

    return jax.lax.platform_dependent(x, cpu=host, default=device_fn)


SORTED_ROWS = host_rows("iml_sorted_rows", lambda a: np.sort(a, axis=-1))


def sorted_rows(x: Array) -> Array:
    """``x`` sorted along its last axis, NaN last: NumPy's sort on the CPU for rows of
    :data:`HOST_SORT_MIN_LENGTH` or more, otherwise XLA's sort of the ordered integer keys
    (:func:`ordered_keys`). Both give the same values in the same order."""

    def device(v: Array) -> Array:
        keys = jax.lax.sort(ordered_keys(v), dimension=v.ndim - 1, is_stable=False)
        return from_ordered_keys(keys)

    return host_or_device(jnp.asarray(x, jnp.float32), SORTED_ROWS, device, jnp.float32)


def stable_order(a: np.ndarray) -> np.ndarray:
    """``np.argsort(a, axis=-1, kind="stable")`` (NaN last, ties in their order), for float32
    rows of fewer than ``2**32`` values by one sort of distinct 64-bit keys: each value's bits in
    order (:func:`ordered_keys`' order, ``-0.0`` as ``+0.0`` and every NaN above every number)
    above its position. NumPy's stable sort of floats is a merge sort, several times slower
    than its sort of integers; other rows are sorted by it."""
    if a.dtype != np.float32 or a.shape[-1] >= 2**32:
        return np.argsort(a, axis=-1, kind="stable")
    bits = (a + np.float32(0.0)).view(np.uint32)  # -0.0 + 0.0 is +0.0
    key = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(0x80000000))
    key = np.where(np.isnan(a), np.uint32(0xFFFFFFFF), key).astype(np.uint64)
    key = (key << np.uint64(32)) | np.arange(a.shape[-1], dtype=np.uint64)
    return (np.sort(key, axis=-1) & np.uint64(0xFFFFFFFF)).astype(np.int64)


STABLE_ORDER = host_rows("iml_stable_order", stable_order)
ORDER = host_rows("iml_order", lambda a: np.argsort(a, axis=-1, kind="quicksort"))


def sort_order(x: Array, stable: bool = True) -> Array:
    """The order that sorts ``x`` along its last axis, NaN last: int32 indices, the same shape.
    NumPy on the CPU for rows of :data:`HOST_SORT_MIN_LENGTH` or more (:func:`stable_order`),
    ``jnp.argsort`` otherwise. Stable (the default), both give the same order; with
    ``stable=False`` ties may come in any order (NumPy's quicksort), for a caller whose result
    does not depend on the order within ties."""
    return host_or_device(
        jnp.asarray(x),
        STABLE_ORDER if stable else ORDER,
        lambda v: jnp.argsort(v, axis=-1, stable=stable).astype(jnp.int32),
        jnp.int32,
    )


def order_statistic_interval(samples: Array, confidence: float) -> Array:
    """Percentile interval over axis 0 by order statistics, NaN ignored: ``[2, ...]``.

    The ends are the order statistics of ranks ``floor(a (n - 1))`` and
    ``ceil((1 - a) (n - 1))`` (``a = (1 - confidence) / 2``, ``n`` the non-NaN replicates),
    rounded outward. Each is found by bisection on the floats' ordered integer keys (32 rounds
    of counting): XLA's CPU sort of a ``[B, K, K]`` stack is several times slower.
    """
    valid = ~jnp.isnan(samples)
    n = jnp.sum(valid, axis=0)
    tail = (1.0 - confidence) / 2.0
    ranks = jnp.stack([jnp.floor(tail * (n - 1)), jnp.ceil((1.0 - tail) * (n - 1))])
    ranks = ranks.astype(jnp.int32)
    keys = ordered_keys(samples)
    big = jnp.iinfo(jnp.int32).max
    # Invariant: fewer than rank + 1 keys <= lo, at least rank + 1 keys <= hi.
    hi = jnp.broadcast_to(jnp.max(jnp.where(valid, keys, -big), axis=0), ranks.shape)
    lo = jnp.broadcast_to(jnp.min(jnp.where(valid, keys, big), axis=0) - 1, ranks.shape)

    def halve(bounds: tuple[Array, Array]) -> tuple[Array, Array]:
        lo, hi = bounds
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)  # no int32 overflow
        below = jnp.sum(valid[None] & (keys[None] <= mid[:, None]), axis=1)
        enough = below >= ranks + 1
        return jnp.where(enough, lo, mid), jnp.where(enough, mid, hi)

    _, hi = jax.lax.while_loop(lambda b: jnp.any(b[1] - b[0] > 1), halve, (lo, hi))
    return jnp.where(n > 0, from_ordered_keys(hi), jnp.nan)


def basic_interval(estimate: Array, percentile: Array, floor: float | None = None) -> Array:
    """The basic (reverse percentile) interval ``2 theta - [upper, lower]`` ``[2, ...]`` from an
    estimate ``[...]`` and its percentile interval ``[2, ...]`` over the same replicates: the
    percentile interval reflected about the estimate, which moves it against the estimator's
    bias (Davison & Hinkley 1997, eq. 5.6). ``floor`` clips both ends to the parameter's range
    (for example 0 for a mutual information); a clipped end covers whatever the unclipped one
    did, as the parameter lies above the floor.
    """
    out = 2.0 * estimate - percentile[::-1]
    return out if floor is None else jnp.maximum(out, floor)


_INSIDE = (
    float(np.nextafter(np.float32(0), np.float32(1))),
    float(1 - np.finfo(np.float32).epsneg),
)


def resampled_seeds(key: Array, seed_scores: Array, average: str) -> Array:
    """One draw of each model's seeds with replacement (as many as it has), pooled: ``[K, N]``
    from ``[M, K, N]``, or class scores ``[K, N, n]`` from ``[M, K, N, n]``.

    ``average``: ``"score"`` (the mean score) or ``"logit"`` (the sigmoid of the mean logit;
    for class scores the softmax of the mean log score, as the run's ensembles pool members).
    """
    valid = jnp.all(jnp.isfinite(seed_scores), axis=tuple(range(2, seed_scores.ndim)))  # [M, K]
    M = seed_scores.shape[0]
    logits = jnp.where(valid, 0.0, -jnp.inf).T  # [K, M]
    draws = jax.random.categorical(key, logits, shape=(M, logits.shape[0]))  # [M draws, K]
    used = jnp.arange(M)[:, None] < jnp.sum(valid, axis=0)[None, :]  # the first M_k draws
    counts = jnp.sum(jax.nn.one_hot(draws, M) * used[..., None], axis=0).T  # [M, K]
    classes = seed_scores.ndim == 4
    x = seed_scores
    if average == "logit":
        a = jnp.clip(x, _INSIDE[0], _INSIDE[1])
        x = jnp.log(a) if classes else jnp.log(a) - jnp.log1p(-a)
    # A seed a model lacks weighs zero; its NaN must not reach the sum (0 x NaN is NaN).
    x = jnp.where(valid.reshape(*valid.shape, *(1,) * (x.ndim - 2)), x, 0.0)
    total = jnp.sum(counts, axis=0)
    pooled = jnp.einsum("mk,mk...->k...", counts, x) / total.reshape(-1, *(1,) * (x.ndim - 2))
    if average == "score":
        return pooled
    return jax.nn.softmax(pooled, axis=-1) if classes else jax.nn.sigmoid(pooled)
