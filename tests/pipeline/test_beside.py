"""A call in a second process (``iml.pipeline.beside``): its value and warnings come back, JAX's
settings go with it, and whatever cannot run there runs here, raising here what it raises."""

import logging
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import jax
import matplotlib
import pytest

from iml.pipeline.beside import JAX_SETTINGS, call_beside


def process_and_settings(message: str) -> tuple[int, dict, float]:
    """The process's id, its JAX settings and matplotlib's line width, after a warning of
    ``message``, given three times at one place, and a line on each of standard output and
    error."""
    for _ in range(3):
        warnings.warn(message, RuntimeWarning, stacklevel=1)
    print("a line on standard output", flush=True)
    print("a line on standard error", file=sys.stderr, flush=True)
    jax_settings = {name: getattr(jax.config, name) for name in JAX_SETTINGS}
    return os.getpid(), jax_settings, matplotlib.rcParams["lines.linewidth"]


def test_a_call_beside_returns_its_value_output_and_warnings_with_this_process_jax_settings(
    tmp_path, capsys
):
    # but for its compilation cache, a folder of its own: JAX writes an entry in place
    cache = str(tmp_path / "cache")
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", cache)
    try:
        with matplotlib.rc_context({"lines.linewidth": 3.25}):  # a notebook's setting
            call = call_beside(process_and_settings, "said beside")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    assert call.beside
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("default")
        pid, settings, linewidth = call.result()
    assert [str(w.message) for w in said] == ["said beside"]  # once, as here at one place
    assert said[0].category is RuntimeWarning and said[0].filename == __file__
    assert pid != os.getpid()  # it ran in another process
    printed = capsys.readouterr()
    assert "a line on standard output\n" in printed.err and "a line on standard error\n" in (
        printed.err
    )
    assert printed.out == ""
    assert settings["jax_compilation_cache_dir"] == os.path.join(cache, "beside")  # its own
    assert settings["jax_enable_x64"] is jax.config.jax_enable_x64
    assert settings["jax_default_prng_impl"] == jax.config.jax_default_prng_impl
    assert linewidth == 3.25
    assert call.result()[0] == pid  # given again, not made again
    assert not call._folder  # its folder is removed


def test_a_call_that_fails_beside_runs_here_and_raises_here(caplog):
    call = call_beside(int, "not a number")
    assert call.beside
    with caplog.at_level(logging.INFO, logger="iml.pipeline.beside"):
        with pytest.raises(ValueError, match="invalid literal"):
            call.result()
    assert "builtins.int ran in this process: the process beside it ended with status 1" in (
        caplog.text
    )
    assert "ValueError: invalid literal" in caplog.text


def test_a_process_that_ends_without_a_word_makes_the_call_here(caplog):
    call = call_beside(sys.exit, 3)
    with caplog.at_level(logging.INFO, logger="iml.pipeline.beside"):
        with pytest.raises(SystemExit):  # made here again
            call.result()
    assert "the process beside it ended with status 3" in caplog.text


def test_a_call_that_does_not_pickle_runs_here(caplog):
    with caplog.at_level(logging.INFO, logger="iml.pipeline.beside"):
        call = call_beside(lambda x: (os.getpid(), x + 1), 1)
    assert not call.beside and "will run in this process: AttributeError: Can't pickle" in (
        caplog.text
    )
    assert call.result() == (os.getpid(), 2)


def test_a_process_whose_result_is_not_wanted_ends_with_its_caller():
    with call_beside(time.sleep, 600) as call:
        process = call._process
        assert process.poll() is None
    assert process.poll() is not None  # killed on leaving the block
    assert call._folder is None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_a_process_beside_ends_when_its_caller_is_killed(tmp_path):
    caller = textwrap.dedent("""
        import os, time
        from iml.pipeline.beside import call_beside
        call = call_beside(time.sleep, 600)
        print(call._process.pid, call._folder, flush=True)
        os._exit(0)  # gone without a word: no close, no finally
    """)
    done = subprocess.run([sys.executable, "-c", caller], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))  # fmt: skip
    pid, folder = int(done.stdout.split()[0]), Path(done.stdout.split()[1])
    for _ in range(200):  # ended (or a zombie no one has reaped yet)
        stat = Path(f"/proc/{pid}/stat")
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail("the process beside outlived its caller")
    assert not folder.exists()  # and took its call's folder with it
