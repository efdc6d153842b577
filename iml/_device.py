"""Host arrays onto the device without compiling a program, what the device multiplies
fastest, and XLA's options for the programs a first run waits on.

``jnp.asarray`` of a NumPy array compiles a one-operation program for every new shape and dtype
(``stage``, or ``convert_element_type`` where the dtype changes), again in every process.
:func:`to_device` converts on the host and copies with ``jax.device_put``, which compiles
nothing (``docs/results/sweep_train``, "One Newton program and no program for a host array").
Inside a traced function use ``jnp.asarray`` as usual.
"""

from __future__ import annotations

import functools
import os

import jax
import numpy as np
from numpy.typing import ArrayLike, DTypeLike

__all__ = [
    "ELEMENTAL_EMITTERS",
    "integer_products",
    "library_products_only",
    "to_device",
    "usable_cores",
]

#: XLA's compiler options for a program that a first run waits on to compile (``jax.jit(...,
#: compiler_options=ELEMENTAL_EMITTERS)``): on the CPU, the elemental IR emitters in place of
#: the MLIR fusion emitters, which compiled the exact solver's Newton program and its validation
#: losses' program more slowly, with their warm calls not separated
#: (``docs/results/sweep_train``). Other backends ignore it.
ELEMENTAL_EMITTERS = {"xla_cpu_use_fusion_emitters": False}


# XLA's CPU option naming the operations it hands to its kernel library (YNNPACK): the matrix
# products alone, where its reductions are left to XLA's own loops.
_PRODUCTS_ONLY = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}


@functools.cache
def library_products_only() -> dict[str, str]:
    """XLA's compiler options that leave its CPU kernel library (YNNPACK) only the matrix
    products of a program, its sums over an axis made by XLA's own loops, which summed the
    validation losses' rows faster (``docs/results/sweep_train``, "Around the Newton steps");
    ``{}`` off the CPU, and where this jaxlib's XLA has no such option (no YNNPACK fusions to
    leave out). Decided once a process, by compiling a one-operation program.

    Raises:
      RuntimeError: XLA's own, where the probe fails for another reason than the option."""
    if jax.default_backend() != "cpu":
        return {}
    try:
        probe = jax.jit(lambda a: a + 1, compiler_options=_PRODUCTS_ONLY)
        probe.lower(jax.ShapeDtypeStruct((), np.float32)).compile()
    except RuntimeError as error:
        if not any(name in str(error) for name in _PRODUCTS_ONLY):
            raise
        return {}  # XLA refuses an option, or a value, that it does not know
    return dict(_PRODUCTS_ONLY)


def to_device(a: ArrayLike, dtype: DTypeLike | None = None) -> jax.Array:
    """``a`` as a device array of ``dtype`` (default: its own, as JAX stores it: 64-bit types as
    32-bit unless ``jax_enable_x64``); a device array of that dtype is returned as it is."""
    if isinstance(a, jax.Array) and (dtype is None or a.dtype == np.dtype(dtype)):
        return a
    host = np.asarray(a, dtype)
    return jax.device_put(host.astype(jax.dtypes.canonicalize_dtype(host.dtype), copy=False))


@functools.cache
def integer_products() -> bool:
    """Whether JAX's default backend is a CPU with AVX-512 VNNI, whose int8 matrix products
    (int32 sums) XLA runs several times faster than float32 ones: products of small integers
    (resampling counts against 0/1 indicators) are then made in int8, with the same exact sums
    (``docs/results/reveal``, "Resampling sums in int8"). False elsewhere, and where NumPy does
    not report the CPU's features."""
    if jax.default_backend() != "cpu":
        return False
    try:
        # imported here: NumPy's record of the CPU's features (what numpy.show_runtime prints)
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:
        return False
    return bool(__cpu_features__.get("AVX512VNNI", False))


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity on Linux, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
