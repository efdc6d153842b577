"""The host process set up for programs that allocate the same memory at every run.

XLA's CPU runtime allocates a compiled program's temporaries afresh at every execution:
gigabytes for a DenseNet-121 step at batch 16 and 224 px, and hundreds of megabytes for each
batched Newton step of an exact sweep's members (a ``[members, rows]`` array each). glibc's
``malloc`` serves a block that large with a new memory mapping and unmaps it when it is freed, so
the kernel faults in and zeroes every page again at the next run, in system CPU time that the run
waits for. On a virtual machine that hands freed memory back to its host, each of those faults
can cost more again.

:func:`keep_step_memory` makes the next step reuse the last step's pages:

- glibc serves blocks of any size from its heap and keeps freed memory there
  (``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` at their largest); with ``shared_heap``,
  threads that start allocating from then on share the main thread's heap (``M_ARENA_MAX`` 1),
  so that blocks which XLA's worker threads allocate are kept there too (``iml sweep`` on a
  table, whose exact solver's programs still met fresh pages without it; not an image run, whose
  data preparation decodes images on many threads, and where one heap has not been measured);
- JAX runs CPU computations on the calling thread (``jax_cpu_enable_async_dispatch = False``).
  glibc gives each thread its own heap ("arena"), and only the main thread's can grow past
  64 MB; with asynchronous dispatch, a step's temporaries are allocated on one of XLA's worker
  threads, whose heap cannot hold them, and glibc maps them anew in spite of the threshold.

This is the setting ``iml reproduce``, ``iml sweep`` and the benchmarks in
``experiments/benchmarks`` run under. It is not a default of the library because it is
process-wide: every ``malloc`` in the process (NumPy's, PyTorch's) keeps its freed memory too, so
the resident memory stays at its peak until the process exits, and a computation launched on the
CPU no longer returns before it has run.
"""

from __future__ import annotations

import ctypes
import dataclasses
import threading
import warnings

import jax
from jax._src import xla_bridge

# mallopt parameters, from glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

_lock = threading.Lock()
_state: HostMemory | None = None


@dataclasses.dataclass(frozen=True)
class HostMemory:
    """What :func:`keep_step_memory` put in force.

    Attributes:
      freed_memory_kept: glibc keeps freed memory in its heap (False where the C library is not
        glibc; nothing was changed there).
      synchronous_cpu_dispatch: JAX's CPU computations run, and allocate, on the calling thread
        (False when JAX's CPU backend had started before the call).
      shared_heap: threads that start allocating after the call share the main thread's heap.
    """

    freed_memory_kept: bool
    synchronous_cpu_dispatch: bool
    shared_heap: bool = False


def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (it has ``mallopt``), else None."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:  # pragma: no cover - platforms without dlopen(NULL)
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    return libc


def keep_step_memory(shared_heap: bool = False) -> HostMemory:
    """Makes every training step reuse the memory of the step before, instead of faulting it in.

    Call it once, early, before JAX's first computation: JAX reads its dispatch mode when its CPU
    backend starts. Called later, the allocator is still set, a warning says that the dispatch
    mode could not be, and ``synchronous_cpu_dispatch`` is False. Calling it again returns what
    the first call did. ``docs/results/cpu_train_step`` times the DenseNet-121 step with and
    without it.

    Args:
      shared_heap: also let threads that start allocating from now on share the main thread's
        heap (glibc's ``M_ARENA_MAX`` 1).

    Returns:
      What is in force, as a :class:`HostMemory`.

    Raises:
      RuntimeError: glibc refused one of the settings.
    """
    global _state
    with _lock:
        if _state is not None:
            return _state
        libc = _glibc()
        if libc is not None:
            # an int of -1 is read by glibc as the largest size_t: "never"
            for name, param in (
                ("M_MMAP_THRESHOLD", M_MMAP_THRESHOLD),
                ("M_TRIM_THRESHOLD", M_TRIM_THRESHOLD),
            ):
                if libc.mallopt(ctypes.c_int(param), ctypes.c_int(-1)) != 1:
                    raise RuntimeError(f"glibc refused mallopt({name}, -1)")
            if shared_heap and libc.mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(1)) != 1:
                raise RuntimeError("glibc refused mallopt(M_ARENA_MAX, 1)")
        synchronous = not jax.config.values["jax_cpu_enable_async_dispatch"]
        if not synchronous:
            if xla_bridge.backends_are_initialized():  # the dispatch mode is fixed
                warnings.warn(
                    "keep_step_memory: JAX's CPU backend has started already, so CPU computations "
                    "stay asynchronous and their temporaries are still mapped afresh at every "
                    "step; call it before the first JAX computation",
                    RuntimeWarning,
                    stacklevel=2,
                )
            else:
                jax.config.update("jax_cpu_enable_async_dispatch", False)
                synchronous = True
        _state = HostMemory(
            freed_memory_kept=libc is not None,
            synchronous_cpu_dispatch=synchronous,
            shared_heap=shared_heap and libc is not None,
        )
        return _state


def host_memory_record() -> dict[str, bool] | str:
    """What :func:`keep_step_memory` put in force in this process, for a manifest or a report.

    The fields of its :class:`HostMemory`, or ``"system"`` where it was not called.
    """
    return "system" if _state is None else dataclasses.asdict(_state)
