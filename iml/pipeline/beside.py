"""A call made in a second Python process beside this one (:func:`call_beside`), for a part of a
report that needs nothing the rest computes: its revealed experiments and their simulated size and
power, while this process makes the table and the figures.

On the CPU much of a report is one thread of Python driving small programs, so a second process
finds an idle core where a second thread of this one would wait for the interpreter's lock (and
threads that call back into Python from XLA's own threads can deadlock). The process is a fresh
interpreter (``python -m iml.pipeline.beside``), never a fork of this one nor a re-import of its
``__main__``: the call's function and arguments are pickled to a folder of its own, the result
pickled back. JAX's settings that change what a program computes or where it is kept
(:data:`JAX_SETTINGS`) are those of this process, but for its persistent compilation cache: the
process keeps its programs in a folder of its own inside this process's (``beside``), as JAX
writes an entry in place, and a process that reads an entry the other is still writing can crash.
matplotlib's settings that differ from its defaults go with the call too. The environment is
this process's, with its module path and matplotlib's file-only backend. The process reads its
standard input from this one and ends when that closes, so that it does not outlive its caller
(killed or not) to write files for a report that is gone.

A call that cannot be made beside (its function or arguments do not pickle) runs here at once;
one whose process fails for any reason (an import it cannot make, an exception, a crash) runs
again here when its result is asked for (:meth:`Beside.result`), so that an error is raised here
with its own traceback, and what the caller gets is what the call made here would have given.
"""

from __future__ import annotations

import codecs
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

__all__ = ["JAX_SETTINGS", "Beside", "call_beside"]

logger = logging.getLogger(__name__)

#: JAX's settings copied into the process beside: the persistent compilation cache (so that the
#: process loads the programs this one keeps), the dtypes, the precision of products and the
#: random keys' implementation (the draws of ``jax.random.key(seed)``).
JAX_SETTINGS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
    "jax_enable_x64",
    "jax_default_matmul_precision",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
    "jax_platforms",
)


class Beside:
    """A call running in a process beside this one (or, where it could not be started, to be made
    here): :meth:`result` waits for it; :meth:`close` ends a process whose result is not wanted."""

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple,
        kwargs: dict[str, Any],
        process: subprocess.Popen | None,
        folder: Path | None,
    ) -> None:
        self._call = (fn, args, kwargs)
        self._process, self._folder = process, folder
        self._value: tuple[Any] | None = None  # the value, once given
        self._relay = None
        if process is not None:  # its output, as it comes, on this process's sys.stderr
            self._relay = threading.Thread(target=_relay, args=(process.stdout,), daemon=True)
            self._relay.start()

    @property
    def beside(self) -> bool:
        """Whether the call runs in a process beside this one (False: it will run here)."""
        return self._process is not None

    def result(self) -> Any:
        """The call's return value, once its process has ended, with each warning it gave given
        again here (``warnings.warn_explicit``, under this process's filters); the call made here
        where it ran nowhere else or its process failed (logged at INFO, with the reason)."""
        if self._value is not None:
            return self._value[0]
        fn, args, kwargs = self._call
        if self._process is None:
            self._value = (fn(*args, **kwargs),)
            return self._value[0]
        try:
            code = self._process.wait()
            outcome = self._outcome(code)
        finally:
            self.close()
        if isinstance(outcome, str):
            logger.info("%s ran in this process: the process beside it %s", _name(fn), outcome)
            self._value = (fn(*args, **kwargs),)
            return self._value[0]
        value, said = outcome
        for message, category, filename, lineno, module in said:
            # as warnings.warn would: under the module's filters, once per place where shown once
            home = sys.modules.get(module or "")
            registry = home.__dict__.setdefault("__warningregistry__", {}) if home else None
            warnings.warn_explicit(message, category, filename, lineno, module, registry)
        self._value = (value,)
        return value

    def _outcome(self, code: int) -> tuple[Any, list] | str:
        """``(value, warnings)`` of a process that finished the call, or why it did not."""
        path, error = self._folder / "result.pkl", self._folder / "error.txt"
        if code != 0 or not path.exists():
            reason = error.read_text() if error.exists() else ""
            return f"ended with status {code}" + (f" ({reason})" if reason else "")
        try:
            with open(path, "rb") as f:
                return pickle.load(f)
        except Exception as err:  # whatever does not load is made here again
            return f"returned a result that does not load ({type(err).__name__}: {err})"

    def close(self) -> None:
        """End the process if it still runs, and remove its folder. Safe to call again."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        if self._process is not None and self._process.stdin is not None:
            self._process.stdin.close()
        if self._relay is not None:  # a process it started may hold the output open: not long
            self._relay.join(timeout=10.0)
            self._relay = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def __enter__(self) -> Beside:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call_beside(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Beside:
    """Start ``fn(*args, **kwargs)`` in a fresh Python process beside this one.

    ``fn`` must be importable by name (a module's function); it runs in the process with
    this one's :data:`JAX_SETTINGS` (its compilation cache in the folder ``beside`` of this
    process's), its output (standard output and error) copied to this process's
    ``sys.stderr`` as it comes, and the warnings it gives recorded for :meth:`Beside.result`.
    Where the call does not pickle, or the process cannot start, nothing is started and
    :meth:`Beside.result` makes the call here.

    Returns:
      The :class:`Beside` whose :meth:`~Beside.result` gives the call's value; use it as a
      context manager (or call :meth:`~Beside.close`) so that a process whose result is not
      asked for does not outlive the caller's work.
    """
    folder = None
    try:
        call = pickle.dumps((_settings(), fn, args, kwargs))
        folder = Path(tempfile.mkdtemp(prefix="iml-beside-"))
        (folder / "call.pkl").write_bytes(call)
        paths = [p for p in sys.path if p] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(p for p in paths if p)),
                   MPLBACKEND="Agg", PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")  # fmt: skip
        process = subprocess.Popen(
            [sys.executable, "-m", "iml.pipeline.beside", str(folder)],
            env=env,
            stdin=subprocess.PIPE,  # closed when this process ends: the process beside ends too
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except Exception as err:  # it does not pickle, no room for it, no interpreter to start
        logger.info("%s will run in this process: %s: %s", _name(fn), type(err).__name__, err)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        return Beside(fn, args, kwargs, None, None)
    return Beside(fn, args, kwargs, process, folder)


def _settings() -> dict[str, Any]:
    """What the process beside sets before the call: :data:`JAX_SETTINGS` as they are here
    (the compilation cache in its folder ``beside``; a setting this JAX lacks is left out), and
    matplotlib's settings that differ from its defaults, where matplotlib is loaded here."""
    jax_settings = {name: getattr(jax.config, name) for name in JAX_SETTINGS
                    if hasattr(jax.config, name)}  # fmt: skip
    if jax_settings.get("jax_compilation_cache_dir"):
        jax_settings["jax_compilation_cache_dir"] = os.path.join(
            jax_settings["jax_compilation_cache_dir"], "beside"
        )
    rc = {}
    if "matplotlib" in sys.modules:
        mpl = sys.modules["matplotlib"]
        with warnings.catch_warnings():  # deprecated keys, read and set alike
            warnings.simplefilter("ignore")
            rc = {key: value for key, value in mpl.rcParams.items()
                  if key != "backend" and mpl.rcParamsDefault.get(key) != value}  # fmt: skip
    return {"jax": jax_settings, "matplotlib": rc}


def _relay(stream: Any) -> None:
    """Copy a process's output to this process's ``sys.stderr`` as it comes (a notebook's cell
    shows it; a progress bar's carriage returns pass unbroken), until the process ends."""
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        chunk = stream.read1(4096)
        try:  # a stream that cannot take it (closed, a broken pipe) drops it: the pipe still
            # drains, so that the process never waits on a full pipe
            if sys.stderr is not None:  # None where Python runs without a console
                sys.stderr.write(text.decode(chunk, final=not chunk))
                sys.stderr.flush()
        except Exception:
            pass
        if not chunk:
            break
    stream.close()


def _name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _end_with_caller(folder: Path) -> None:
    """End this process, and remove the call's ``folder``, once its caller's end of standard
    input closes (the caller ended, however), so that it never writes files for a caller that
    is gone."""
    while os.read(0, 4096):  # the descriptor itself: no lock of sys.stdin held at exit
        pass
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(1)


def _main(folder: Path) -> int:
    """The process beside: load the call, set JAX's and matplotlib's settings, make the call,
    and write its ``(value, warnings)`` to ``result.pkl`` (status 0), or the exception's last
    line to ``error.txt`` (status 1); it ends at once where its caller does."""
    threading.Thread(target=_end_with_caller, args=(folder,), daemon=True).start()
    try:
        settings, fn, args, kwargs = pickle.loads((folder / "call.pkl").read_bytes())
        for name, value in settings["jax"].items():
            if value is not None:
                jax.config.update(name, value)
        if settings["matplotlib"]:
            import matplotlib  # imported here: only where the caller had loaded it

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                matplotlib.rcParams.update(settings["matplotlib"])
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            value = fn(*args, **kwargs)
        files = {getattr(m, "__file__", None): name for name, m in list(sys.modules.items())}
        given = [(str(w.message), w.category, w.filename, w.lineno, files.get(w.filename))
                 for w in said]  # fmt: skip
        result = pickle.dumps((value, given))
    except Exception as err:  # the caller makes the call again, and raises it
        (folder / "error.txt").write_text(f"{type(err).__name__}: {err}"[:2000])
        return 1
    partial = folder / "result.pkl.partial"
    partial.write_bytes(result)
    partial.replace(folder / "result.pkl")
    return 0


if __name__ == "__main__":
    sys.exit(_main(Path(sys.argv[1])))
