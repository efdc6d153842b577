"""What every benchmark shares: ours and its baseline timed in interleaved runs, the headline
taken from them, and the machine read into the record.

**Runs.** :func:`interleaved` calls each side once first (its cold call: compiling, loading,
first touches of memory), then ``runs`` rounds of one call each, in the same order every round
(ours, baseline, ours, baseline, ...), so that a slow spell of a shared machine meets both sides.
Each round gives one ratio, the baseline's seconds over ours (a speed-up: higher is better); the
headline ``ratio`` is the median of the rounds' ratios, with their range. A headline needs at
least :data:`MIN_RUNS` rounds (:func:`add_runs_argument` refuses fewer).

**Equal work.** A side whose call does a known fraction of the work (a slice of the baseline's
loop, timed and scaled; one PyTorch model's step against K members') is given a ``scale``: its
measured seconds times the scale are its seconds for the whole work. The record keeps the measured
seconds and the scales apart.

**Cold and warm.** The cold calls' seconds (``cold_s``) are kept apart from the warm rounds'
(``warm_s``); a benchmark that measures the part of ours spent making programs adds it as
``compile_s`` (:class:`CompileSeconds`). ``cold_ratio`` is the first run's figure: the baseline's
median warm seconds over ours' cold call (each scaled), so ours pays its compiling and loading
and the baseline pays none of its own start (a first run after a fresh install, with an empty
compilation cache, is the run whose ``compile_cache`` recorded no entries before).

**The process's own account.** Each warm call also records what this process spent in it
(``warm_process``: user and system CPU seconds, and minor page faults, from ``getrusage``; work
done in other processes, such as joblib's workers, is not counted): on a machine where the kernel
is slow to hand out fresh memory, system seconds and page faults show where a side's wall time
went beyond its arithmetic.

**The machine** (:func:`machine`): the CPU's model name as ``/proc/cpuinfo`` gives it, the logical
cores and those this process may use, and the GPU's name where JAX's default backend is a GPU.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

#: The fewest interleaved runs a headline is the median of.
MIN_RUNS = 3
#: Where Linux names the CPU.
CPUINFO = Path("/proc/cpuinfo")


# ----------------------------------------------------------------------------------------------
# The machine
# ----------------------------------------------------------------------------------------------


def cpu_model(cpuinfo: Path | str | None = None) -> str | None:
    """The CPU's model name: the first ``model name`` line of ``cpuinfo`` (default
    :data:`CPUINFO`); elsewhere the platform's processor name; ``None`` where neither says."""
    try:
        for line in Path(cpuinfo or CPUINFO).read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def gpu_name() -> str | None:
    """The first device's name where JAX's default backend is a GPU, else ``None``."""
    import jax

    if jax.default_backend() != "gpu":
        return None
    return str(jax.devices()[0].device_kind)


#: The environment variables that change how a process gets memory (glibc's ``MALLOC_*`` too).
MEMORY_ENVIRONMENT = ("GLIBC_TUNABLES", "LD_PRELOAD")


def memory_environment() -> dict[str, str]:
    """The variables of :data:`MEMORY_ENVIRONMENT`, and glibc's ``MALLOC_*``, that are set."""
    return {
        key: value
        for key, value in sorted(os.environ.items())
        if key in MEMORY_ENVIRONMENT or key.startswith("MALLOC_")
    }


def machine(*, gpu: bool = True) -> dict[str, Any]:
    """The record's ``cpu`` (model, logical cores, cores usable by this process) and ``gpu``
    (``gpu=False``: not asked, for a process that leaves JAX to its children)."""
    return {
        "cpu": {
            "model": cpu_model(),
            "logical_cores": os.cpu_count(),
            "usable_cores": usable_cores(),
        },
        "gpu": gpu_name() if gpu else None,
    }


# ----------------------------------------------------------------------------------------------
# Interleaved runs
# ----------------------------------------------------------------------------------------------


def add_runs_argument(
    parser: argparse.ArgumentParser, default: int | None = MIN_RUNS, what: str = ""
) -> None:
    """``--runs N`` (also spelled ``--repeats``, its name before): interleaved runs of ours and
    the baseline, at least :data:`MIN_RUNS`; ``what`` adds to the help (e.g. the default where
    it depends on other options, ``default`` then ``None``)."""
    said = f" (default {default})" if default is not None else ""
    parser.add_argument(
        "--runs",
        "--repeats",
        dest="runs",
        type=int,
        default=default,
        help=f"interleaved runs of ours and the baseline, at least {MIN_RUNS}; the headline is "
        f"their median ratio{said}{what}",
    )


def check_runs(parser: argparse.ArgumentParser, runs: int) -> None:
    """A parser error for fewer than :data:`MIN_RUNS` runs."""
    if runs < MIN_RUNS:
        parser.error(f"--runs must be at least {MIN_RUNS} (a headline is their median), got {runs}")


def per_run_ratios(
    baseline_s: Sequence[float],
    ours_s: Sequence[float],
    baseline_scale: float = 1.0,
    ours_scale: float = 1.0,
) -> list[float]:
    """Each run's speed-up: the baseline's seconds over ours, each times its scale."""
    if len(baseline_s) != len(ours_s) or not ours_s:
        raise ValueError("one time of each side per run, and at least one run")
    return [
        (b * baseline_scale) / (o * ours_scale) for b, o in zip(baseline_s, ours_s, strict=True)
    ]


def summarise(ratios: Sequence[float]) -> dict[str, Any]:
    """``ratio`` (the median of ``ratios``), ``ratio_range`` (their minimum and maximum) and
    ``ratios`` themselves."""
    ratios = [float(r) for r in ratios]
    return {
        "ratio": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "ratios": ratios,
    }


def _seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def process_account(before: resource.struct_rusage) -> dict[str, float]:
    """User and system CPU seconds and minor page faults of this process since ``before``."""
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "user_s": round(after.ru_utime - before.ru_utime, 3),
        "sys_s": round(after.ru_stime - before.ru_stime, 3),
        "minor_faults": int(after.ru_minflt - before.ru_minflt),
    }


def say(line: str) -> None:
    """One progress line on stderr, so that a run stopped at a time limit shows how far it got
    (the JSON record goes to stdout, last)."""
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def interleaved(
    sides: Mapping[str, Callable[[], object]],
    runs: int,
    *,
    ours: str = "ours",
    baseline: str = "baseline",
    scale: Mapping[str, float] | None = None,
    cold: bool = True,
    timer: Callable[[Callable[[], object]], float] | None = None,
) -> dict[str, Any]:
    """Times ``sides`` (each a callable that does its side's work once and returns when done):
    with ``cold``, one call of each first; then ``runs`` rounds of one call of each, in the
    order of ``sides``.

    Args:
      sides: the callables by name, ``ours`` and ``baseline`` among them; any others are timed
        in the same rounds (e.g. other strategies or references).
      runs: rounds; at least :data:`MIN_RUNS` for a headline.
      scale: per side, the factor from a call's seconds to the whole work's (default 1).
      timer: how a call is timed (default: its wall seconds here); sides that time their own
        work (e.g. from the start of the processes they launch to the exit of the last)
        return their seconds, and pass ``timer=lambda call: call()``.

    Returns:
      ``runs``; ``order`` (the sides of one round, in call order); ``warm_s`` (per side, each
      round's measured seconds); ``warm_process`` (per side, each round's
      :func:`process_account`); ``cold_s`` (per side, the cold call's seconds, with ``cold``)
      and ``cold_ratio`` (the baseline's median warm seconds over ours' cold call, each scaled);
      ``scale`` (the factors other than 1); and :func:`summarise` of the rounds' ratios of
      ``baseline`` over ``ours``.
    """
    if ours not in sides or baseline not in sides or ours == baseline:
        raise ValueError(f"sides must hold {ours!r} and {baseline!r}, got {list(sides)}")
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    scale = {name: float(factor) for name, factor in (scale or {}).items() if factor != 1}
    timer = timer or _seconds
    out: dict[str, Any] = {"runs": runs, "order": list(sides)}
    if cold:
        cold_s = {}
        for name, fn in sides.items():
            cold_s[name] = float(timer(fn))
            say(f"{name}: cold call {cold_s[name]:.2f} s")
        out["cold_s"] = cold_s
    warm_s: dict[str, list[float]] = {name: [] for name in sides}
    account: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for k in range(runs):
        for name, fn in sides.items():
            before = resource.getrusage(resource.RUSAGE_SELF)
            warm_s[name].append(float(timer(fn)))
            account[name].append(process_account(before))
            say(f"{name}: round {k + 1} of {runs} {warm_s[name][-1]:.2f} s")
    out["warm_s"] = warm_s
    out["warm_process"] = account
    if scale:
        out["scale"] = scale
    ratios = per_run_ratios(
        warm_s[baseline], warm_s[ours], scale.get(baseline, 1.0), scale.get(ours, 1.0)
    )
    if cold:
        (out["cold_ratio"],) = per_run_ratios(
            [statistics.median(warm_s[baseline])], [cold_s[ours]],
            scale.get(baseline, 1.0), scale.get(ours, 1.0),
        )  # fmt: skip
    return {**summarise(ratios), **out}


def headline(
    timing: Mapping[str, Any], *, compile_s: float | None = None, gpu: bool = True
) -> dict[str, Any]:
    """The fields a benchmark's record and last line carry: :func:`interleaved`'s ``timing``,
    ``compile_s`` (the part of ours spent making programs, measured apart; ``None`` where it
    was not), the machine, the variables of the environment that change how the process gets
    memory (:func:`memory_environment`) and the date."""
    return {
        **timing,
        "compile_s": compile_s,
        **machine(gpu=gpu),
        "memory_environment": memory_environment(),
        "date": time.strftime("%Y-%m-%d"),
    }


# ----------------------------------------------------------------------------------------------
# Meters: memory and JAX's making of programs
# ----------------------------------------------------------------------------------------------


class PeakRSS:
    """Samples this process's resident set size in a thread; ``peak`` in bytes."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(self.interval)

    def __enter__(self) -> PeakRSS:
        self.peak = self._rss()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


class _Meter:
    """Counts what ``jax.monitoring`` reports while the context is open. Each subclass listens
    once (``jax.monitoring`` cannot drop a listener) and hears for every open meter of its kind."""

    _open: ClassVar[list[_Meter]]
    _listening: ClassVar[bool]
    _listen: ClassVar[str]  # the jax.monitoring function that registers the listener

    def __enter__(self) -> _Meter:
        import jax

        kind = type(self)
        if not kind._listening:
            getattr(jax.monitoring, kind._listen)(kind._hear)
            kind._listening = True
        kind._open.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        type(self)._open.remove(self)


class CompileSeconds(_Meter):
    """Seconds JAX spends making programs (tracing, lowering to MLIR, XLA's compile) while the
    context is open, as ``jax.monitoring`` reports them; ``seconds`` after exit. The events are
    summed: a trace nested in another, or a compile on another thread, counts on its own, so the
    sum can exceed the wall time of the call that made them."""

    EVENTS = (
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    )
    _open: ClassVar[list[CompileSeconds]] = []
    _listening: ClassVar[bool] = False
    _listen = "register_event_duration_secs_listener"

    def __init__(self) -> None:
        self.seconds = 0.0

    @classmethod
    def _hear(cls, event: str, duration: float, *args: object, **kwargs: object) -> None:
        if event in cls.EVENTS:
            for meter in cls._open:
                meter.seconds += duration


class CacheHits(_Meter):
    """Persistent compilation cache hits and misses while the context is open
    (``jax.monitoring``'s events)."""

    _open: ClassVar[list[CacheHits]] = []
    _listening: ClassVar[bool] = False
    _listen = "register_event_listener"

    def __init__(self) -> None:
        self.hits = self.misses = 0

    @classmethod
    def _hear(cls, event: str, **kwargs: object) -> None:
        for meter in cls._open:
            if event == "/jax/compilation_cache/cache_hits":
                meter.hits += 1
            elif event == "/jax/compilation_cache/cache_misses":
                meter.misses += 1
