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
The environment is this process's, with its module path and matplotlib's file-only backend.

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
#: process loads the programs this one keeps), the dtypes and the precision of products.
JAX_SETTINGS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
    "jax_enable_x64",
    "jax_default_matmul_precision",
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
        fn, args, kwargs = self._call
        if self._process is None:
            return fn(*args, **kwargs)
        try:
            code = self._process.wait()
            outcome = self._outcome(code)
        finally:
            self.close()
        if isinstance(outcome, str):
            logger.info("%s ran in this process: the process beside it %s", _name(fn), outcome)
            return fn(*args, **kwargs)
        value, said = outcome
        given: dict = {}  # each warning once per place, as the default filter shows them
        for message, category, filename, lineno in said:
            warnings.warn_explicit(message, category, filename, lineno, registry=given)
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
        if self._relay is not None:
            self._relay.join()
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
    settings = {name: getattr(jax.config, name) for name in JAX_SETTINGS}
    if settings["jax_compilation_cache_dir"]:
        settings["jax_compilation_cache_dir"] = os.path.join(
            settings["jax_compilation_cache_dir"], "beside"
        )
    try:
        call = pickle.dumps((settings, fn, args, kwargs))
    except Exception as err:  # whatever does not pickle is called here
        logger.info("%s will run in this process: it does not pickle (%s)", _name(fn), err)
        return Beside(fn, args, kwargs, None, None)
    folder = Path(tempfile.mkdtemp(prefix="iml-beside-"))
    (folder / "call.pkl").write_bytes(call)
    paths = [p for p in sys.path if p] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(p for p in paths if p)),
               MPLBACKEND="Agg")  # fmt: skip
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "iml.pipeline.beside", str(folder)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except OSError as err:
        logger.info("%s will run in this process: no process started (%s)", _name(fn), err)
        shutil.rmtree(folder, ignore_errors=True)
        return Beside(fn, args, kwargs, None, None)
    return Beside(fn, args, kwargs, process, folder)


def _relay(stream: Any) -> None:
    """Copy a process's output to this process's ``sys.stderr`` as it comes (a notebook's cell
    shows it; a progress bar's carriage returns pass unbroken), until the process ends."""
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := stream.read1(4096):
        if sys.stderr is not None:  # None where Python runs without a console
            sys.stderr.write(text.decode(chunk))
            sys.stderr.flush()
    stream.close()


def _name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _main(folder: Path) -> int:
    """The process beside: load the call, set JAX's settings, make the call, and write its
    ``(value, warnings)`` to ``result.pkl`` (status 0), or the exception's last line to
    ``error.txt`` (status 1)."""
    try:
        settings, fn, args, kwargs = pickle.loads((folder / "call.pkl").read_bytes())
        for name, value in settings.items():
            if value is not None:
                jax.config.update(name, value)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            value = fn(*args, **kwargs)
        given = [(str(w.message), w.category, w.filename, w.lineno) for w in said]
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
