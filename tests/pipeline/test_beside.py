"""A call in a second process (``iml.pipeline.beside``): its value and warnings come back, JAX's
settings go with it, and whatever cannot run there runs here, raising here what it raises."""

import logging
import os
import sys
import time
import warnings

import jax
import pytest

from iml.pipeline.beside import JAX_SETTINGS, call_beside


def process_and_settings(message: str) -> tuple[int, dict]:
    """The process's id and its JAX settings, after a warning of ``message``, given three times
    at one place, and a line on each of standard output and error."""
    for _ in range(3):
        warnings.warn(message, RuntimeWarning, stacklevel=1)
    print("a line on standard output", flush=True)
    print("a line on standard error", file=sys.stderr, flush=True)
    return os.getpid(), {name: getattr(jax.config, name) for name in JAX_SETTINGS}


def test_a_call_beside_returns_its_value_output_and_warnings_with_this_process_jax_settings(
    tmp_path, capsys
):
    # but for its compilation cache, a folder of its own: JAX writes an entry in place
    cache = str(tmp_path / "cache")
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", cache)
    try:
        call = call_beside(process_and_settings, "said beside")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    assert call.beside
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("default")
        pid, settings = call.result()
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
    assert not call.beside and "does not pickle" in caplog.text
    assert call.result() == (os.getpid(), 2)


def test_a_process_whose_result_is_not_wanted_ends_with_its_caller():
    with call_beside(time.sleep, 600) as call:
        process = call._process
        assert process.poll() is None
    assert process.poll() is not None  # killed on leaving the block
    assert call._folder is None
