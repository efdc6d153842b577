"""Host arrays onto the device without compiling a program.

``jnp.asarray`` of a NumPy array compiles a one-operation program for every new shape and dtype
(``stage``, or ``convert_element_type`` where the dtype changes), again in every process.
:func:`to_device` converts on the host and copies with ``jax.device_put``, which compiles
nothing (``docs/results/sweep_train``, "One Newton program and no program for a host array").
Inside a traced function use ``jnp.asarray`` as usual.
"""

from __future__ import annotations

import jax
import numpy as np
from numpy.typing import ArrayLike, DTypeLike

__all__ = ["to_device"]


def to_device(a: ArrayLike, dtype: DTypeLike | None = None) -> jax.Array:
    """``a`` as a device array of ``dtype`` (default: its own, as JAX stores it: 64-bit types as
    32-bit unless ``jax_enable_x64``); a device array of that dtype is returned as it is."""
    if isinstance(a, jax.Array) and (dtype is None or a.dtype == np.dtype(dtype)):
        return a
    host = np.asarray(a, dtype)
    return jax.device_put(host.astype(jax.dtypes.canonicalize_dtype(host.dtype), copy=False))
