"""iml._device: host arrays reach the device with their values and dtype, and without a program
compiled for their shape; int8 products are chosen on a CPU with AVX-512 VNNI only; the options
that leave XLA's kernel library only the products, where XLA knows them; the cores a process may
use."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml._device import to_device, usable_cores


def test_host_arrays_reach_the_device_equal_and_without_a_compiled_program():
    rng = np.random.default_rng(0)
    cases = [
        (rng.normal(size=(37, 5)).astype(np.float32), None, np.float32),
        (rng.normal(size=(41, 3)), np.float32, np.float32),  # float64 converted on the host
        (np.arange(29), None, np.int32),  # int64 stored as JAX stores it
        (np.arange(31, dtype=np.int32), np.float32, np.float32),
        ([[1, 2], [3, 4]], np.int32, np.int32),
    ]
    # device arrays first made by hand, so that no case below is the first use of the backend
    jnp.zeros(1).block_until_ready()
    compiled = []

    def count(*args, **kwargs):
        compiled.append(args)

    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        for host, dtype, stored in cases:
            out = to_device(host, dtype)
            assert isinstance(out, jax.Array) and out.dtype == stored
            np.testing.assert_array_equal(np.asarray(out), np.asarray(host).astype(stored))
        names = [a[0] for a in compiled if a[0].startswith("/jax/core/compile/")]
        assert names == [], names
        # a device array of the dtype asked for is returned as it is
        same = to_device(out)
        assert same is out
    finally:
        jax.monitoring.unregister_event_duration_listener(count)


def test_integer_products_on_a_cpu_with_avx512_vnni_only(monkeypatch):
    from numpy._core._multiarray_umath import __cpu_features__

    from iml import _device

    _device.integer_products.cache_clear()
    try:
        on_cpu = _device.integer_products()
        assert on_cpu is bool(__cpu_features__.get("AVX512VNNI", False))
        _device.integer_products.cache_clear()
        monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
        assert _device.integer_products() is False
    finally:
        _device.integer_products.cache_clear()


def test_usable_cores_are_this_process_affinity_or_the_machine_cores(monkeypatch):
    if hasattr(os, "sched_getaffinity"):  # Linux
        assert usable_cores() == len(os.sched_getaffinity(0))
        monkeypatch.delattr(os, "sched_getaffinity")  # as elsewhere
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert usable_cores() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert usable_cores() == 1


def test_library_products_only_where_xla_knows_the_option(monkeypatch):
    from iml import _device

    x = jnp.asarray(np.random.default_rng(1).normal(size=(64, 10, 1024)).astype(np.float32))

    def program(a):
        return jnp.sum(jnp.exp(a), axis=-1)

    _device.library_products_only.cache_clear()
    try:
        options = _device.library_products_only()
        if jax.default_backend() != "cpu":
            assert options == {}
        elif options:  # this XLA fuses for YNNPACK: the reduction is left to its own loops
            assert options == _device._PRODUCTS_ONLY
            default = jax.jit(program).lower(x).compile().as_text()
            chosen = jax.jit(program, compiler_options=options).lower(x).compile().as_text()
            assert "__ynn_fusion" not in chosen
            if "__ynn_fusion" in default:  # the library's sums, against XLA's own
                np.testing.assert_allclose(
                    np.asarray(jax.jit(program, compiler_options=options)(x)),
                    np.asarray(jax.jit(program)(x)),
                    rtol=1e-5,
                )
        # an option this XLA does not know: none is given, the program compiles without it
        _device.library_products_only.cache_clear()
        monkeypatch.setattr(_device, "_PRODUCTS_ONLY", {"xla_cpu_no_such_option": "X"})
        assert _device.library_products_only() == {}
        # any other failure of the probe is raised, not taken for an unknown option
        _device.library_products_only.cache_clear()

        def broken(*args, **kwargs):
            raise RuntimeError("INTERNAL: the backend failed")

        monkeypatch.setattr(jax, "jit", broken)
        if jax.default_backend() == "cpu":
            with pytest.raises(RuntimeError, match="backend failed"):
                _device.library_products_only()
    finally:
        _device.library_products_only.cache_clear()
