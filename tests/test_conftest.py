"""The suite's own configuration (``tests/conftest.py``): what its fixtures rely on."""

import gc

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
