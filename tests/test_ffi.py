"""Host functions called by name from XLA programs (iml._ffi): values, dtypes, errors, vmap, and
programs kept in JAX's persistent compilation cache."""

import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml import _bootstrap as B
from iml import _ffi

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="host functions: CPU only")


def _twice_plus_first(a, b):
    return a * 2 + b.reshape(-1)[0]


_ffi.register("iml_test_twice_plus_first", _twice_plus_first)


def _raises(a):
    if a.dtype == np.int32:
        raise ZeroDivisionError("integers fail here")
    return np.sort(a)[:3]  # of another shape


_ffi.register("iml_test_raises", _raises)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.uint32, np.float16,
                                   np.float32])  # fmt: skip
def test_a_host_function_reads_and_writes_each_dtype_in_place(dtype):
    x = np.arange(-6, 6, dtype=np.float64).reshape(3, 4).astype(dtype)
    first = np.array([3], dtype)
    out = jax.jit(
        lambda a, b: _ffi.call(
            "iml_test_twice_plus_first", jax.ShapeDtypeStruct(a.shape, a.dtype), a, b
        )
    )(x, first)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, x * 2 + first[0])


def test_under_vmap_the_host_function_takes_the_batch_and_an_unbatched_argument_of_one():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    first = np.array([5.0], np.float32)
    seen = []

    def spy(a, b):
        seen.append((a.shape, b.shape))
        return _twice_plus_first(a, b)

    _ffi.register("iml_test_spy", spy)
    call = lambda a: _ffi.call("iml_test_spy", jax.ShapeDtypeStruct(a.shape, a.dtype), a,  # noqa: E731
                               jnp.asarray(first))  # fmt: skip
    np.testing.assert_array_equal(jax.jit(jax.vmap(call))(x), x * 2 + 5)
    assert seen == [((2, 3, 4), (1, 1))]


def test_an_exception_or_a_result_of_another_shape_is_an_error_naming_the_host_function():
    call = jax.jit(lambda a: _ffi.call("iml_test_raises",
                                       jax.ShapeDtypeStruct(a.shape, a.dtype), a))  # fmt: skip
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"iml_test_raises.*ZeroDivisionError"):
        np.asarray(call(np.arange(5, dtype=np.int32)))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"iml_test_raises.*shape \(3,\)"):
        np.asarray(call(np.arange(5, dtype=np.float32)))


def _writes_its_argument(a):
    a[0] = 1.0
    return a


_ffi.register("iml_test_writes", _writes_its_argument)


def test_the_arguments_are_read_only_and_a_cast_of_another_kind_is_an_error():
    x = np.zeros(4, np.float32)
    writes = jax.jit(lambda a: _ffi.call("iml_test_writes", jax.ShapeDtypeStruct((4,), a.dtype), a))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"iml_test_writes.*read-only"):
        np.asarray(writes(x))
    np.testing.assert_array_equal(x, 0.0)
    # floats into an integer output: not the same kind of cast, an error (not a garbled value)
    to_int = jax.jit(lambda a: _ffi.call("iml_test_twice_plus_first",
                                         jax.ShapeDtypeStruct((4,), jnp.int32), a, a))  # fmt: skip
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"iml_test_twice_plus_first.*cast"):
        np.asarray(to_int(np.full(4, np.nan, np.float32)))


def test_a_name_registered_again_calls_its_new_function_and_unknown_ones_are_refused():
    _ffi.register("iml_test_again", lambda a: a + 1)
    call = jax.jit(lambda a: _ffi.call("iml_test_again", jax.ShapeDtypeStruct((3,), a.dtype), a))
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(call(x), x + 1)
    _ffi.register("iml_test_again", lambda a: a * 10)  # a module reloaded
    np.testing.assert_array_equal(call(x), x * 10)  # the same compiled program
    assert _ffi.registered("iml_test_again") and not _ffi.registered("iml_test_unknown")
    with pytest.raises(ValueError, match="iml_test_unknown"):
        _ffi.call("iml_test_unknown", jax.ShapeDtypeStruct((2,), jnp.float32), jnp.zeros(2))
    with pytest.raises(ValueError, match=r"iml_test_again.*complex64"):
        _ffi.call("iml_test_again", jax.ShapeDtypeStruct((2,), jnp.float32),
                  jnp.zeros(2, jnp.complex64))  # fmt: skip


def test_the_handler_claims_the_api_version_of_the_header_jaxlib_ships():
    header = Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h"
    minor = int(re.search(r"#define XLA_FFI_API_MINOR (\d+)", header.read_text()).group(1))
    assert _ffi._API_VERSION == (0, minor)


#: A program with a host sort in a fresh process with a compilation cache: its values, and how
#: often JAX's persistent cache answered.
KEPT = """
import sys
import jax
import numpy as np
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
hits = []
HIT = "/jax/compilation_cache/cache_hits"
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(event) if event == HIT else None)
from iml import _bootstrap as B
x = np.random.default_rng(0).normal(size=(3, 5000)).astype(np.float32)
got = jax.jit(lambda v: B.sorted_rows(v * 2.0) + 1.0)(x)
print(np.array_equal(np.asarray(got), np.sort(x * 2.0, axis=-1) + 1.0), len(hits))
"""


@pytest.mark.slow
def test_a_program_calling_a_host_function_is_kept_in_the_cache_and_runs_from_it(tmp_path):
    assert B.HOST_SORT_MIN_LENGTH <= 5000  # the script's rows are sorted by the host
    root = Path(__file__).resolve().parents[1]
    said = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", KEPT, str(tmp_path)], cwd=root,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        said.append(done.stdout.split())
    assert said == [["True", "0"], ["True", "1"]]
