"""The suite's own configuration (``tests/conftest.py``, pyproject's pytest options): what its
fixtures rely on, and the two tiers."""

import gc
import re
import shlex
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from conftest import MAPS, mapping_count


@pytest.mark.slow
@pytest.mark.skipif(not MAPS.exists(), reason="needs /proc/self/maps (Linux)")
def test_emptying_jax_caches_unmaps_the_programs_of_functions_gone():
    """The worker fixture empties JAX's caches to stay under vm.max_map_count: each program
    compiled adds mappings that outlive its function, and emptying the caches removes them."""
    jax.clear_caches()
    gc.collect()
    before = mapping_count()
    for i in range(30):
        program = jax.jit(lambda x, i=i: jnp.cumsum(x) * i)  # a new function, a new program
        program(jnp.ones(i + 1)).block_until_ready()
    del program
    gc.collect()
    grown = mapping_count()
    assert grown - before >= 30  # at least one mapping per program, kept after its function
    jax.clear_caches()
    gc.collect()
    assert grown - mapping_count() >= 30  # at least one mapping per program released


def test_a_plain_run_includes_the_slow_tests_and_not_slow_is_the_fast_tier():
    """`pytest` and `.ci/run` run every test: nothing leaves the slow ones out unless asked
    (`-m "not slow"`, the fast tier of tests/README.md)."""
    root = Path(__file__).resolve().parents[1]
    options = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]
    options = options["ini_options"]
    assert not {"-m", "-k"} & set(shlex.split(options["addopts"]))
    assert [m for m in options["markers"] if m.startswith("slow:")]
    ci = (root / ".ci" / "run").read_text()
    commands = "\n".join(line.split("#")[0] for line in ci.splitlines()).replace("python -m ", "")
    assert "pytest" in commands and not re.search(r"\s-m\s|slow", commands)
    assert 'pytest -m "not slow"' in (root / "tests" / "README.md").read_text()


def test_files_sharing_the_reproduce_run_go_to_one_worker():
    """Under --dist loadfile the files of SAME_WORKER form one unit of work (one worker builds
    their shared fixture once); any other file is its own unit."""
    from conftest import SAME_WORKER, TESTS, work_unit

    assert len({work_unit(f"{path}::test_x") for path in SAME_WORKER}) == 1
    assert work_unit("tests/test_io.py::test_x[a::b]") == "tests/test_io.py"
    for path in SAME_WORKER:
        assert "tiny_reproduce_run" in (TESTS.parent / path).read_text(), path
