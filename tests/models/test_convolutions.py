"""Tests of iml.models.convolutions: the convolutions and max-pooling by matrix products and
by taps, with their own gradients, against XLA's."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml.models import (
    Conv,
)


def _images(shape: tuple[int, ...], seed: int = 0) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


@pytest.mark.parametrize(
    ("kernel_size", "stride", "padding", "cin", "cout", "size"),
    [(1, 1, 0, 16, 8, 9), (3, 1, 1, 16, 4, 9), (3, 1, 1, 3, 16, 8), (7, 2, 3, 3, 16, 11)],
)
def test_matmul_conv_equals_xla_conv(kernel_size, stride, padding, cin, cout, size):
    x = _images((2, size, size, cin))
    xla = Conv(cout, kernel_size, stride, padding, impl="xla")
    params = jax.jit(xla.init)(jax.random.key(0), x)
    mm = Conv(cout, kernel_size, stride, padding, impl="matmul")
    y_xla, y_mm = jax.jit(lambda p, x: (xla.apply(p, x), mm.apply(p, x)))(params, x)
    assert y_mm.shape == y_xla.shape
    np.testing.assert_allclose(y_mm, y_xla, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    ("kernel_size", "stride", "padding", "cin", "cout", "size"),
    [
        (1, 1, 0, 16, 8, 9),  # a matrix product with its own gradient
        (1, 2, 0, 8, 4, 9),  # the same on every other pixel
        (3, 1, 1, 16, 4, 9),  # "same", small map: forward by taps, gradients from shifted taps
        (3, 1, 1, 16, 4, 29),  # "same", large map (> 28 x 28): lax.conv forward
        (5, 1, 2, 6, 3, 7),
        (7, 2, 3, 3, 16, 11),  # few input channels: patches times the kernel
        (3, 2, 1, 8, 4, 9),  # none of those: lax.conv
    ],
)
def test_mixed_conv_gives_xla_outputs_and_gradients(kernel_size, stride, padding, cin, cout, size):
    x = _images((2, size, size, cin))
    xla = Conv(cout, kernel_size, stride, padding, impl="xla")
    mixed = Conv(cout, kernel_size, stride, padding, impl="mixed")
    params = jax.jit(xla.init)(jax.random.key(0), x)
    probe = _images(xla.apply(params, x).shape, seed=5)  # a generic output gradient

    def outputs_and_grads(conv):
        def loss(p, x):
            return jnp.sum(probe * conv.apply(p, x))

        return conv.apply(params, x), jax.grad(loss, argnums=(0, 1))(params, x)

    (y_xla, g_xla), (y_mixed, g_mixed) = jax.jit(
        lambda: (outputs_and_grads(xla), outputs_and_grads(mixed))
    )()
    np.testing.assert_allclose(y_mixed, y_xla, atol=1e-4, rtol=1e-4)
    for a, b in zip(jax.tree.leaves(g_mixed), jax.tree.leaves(g_xla), strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=2e-4, rtol=1e-4)


def test_mixed_conv_gradients_vmap_over_members():
    # the custom gradients of 'mixed' under the ensemble's vmap over stacked parameters
    x = _images((2, 8, 8, 16))
    keys = jax.random.split(jax.random.key(0), 3)
    for k in (1, 3):
        xla = Conv(4, k, 1, k // 2, impl="xla")
        mixed = Conv(4, k, 1, k // 2, impl="mixed")
        members = jax.vmap(xla.init, in_axes=(0, None))(keys, x)

        def grad(conv, p):
            return jax.grad(lambda p: jnp.sum(jnp.sin(conv.apply(p, x))))(p)

        stacked = jax.jit(jax.vmap(functools.partial(grad, mixed)))(members)
        for m in range(3):
            one = jax.tree.map(lambda a, m=m: a[m], members)
            want = jax.jit(functools.partial(grad, xla))(one)
            got = jax.tree.map(lambda a, m=m: a[m], stacked)
            np.testing.assert_allclose(
                got["params"]["kernel"], want["params"]["kernel"], atol=2e-4, rtol=1e-4
            )


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(2, 9, 12, 3), (3, 16, 16, 8), (1, 7, 5, 2)])
def test_max_pool_gradient_goes_to_flax_max_pool_first_maximum(shape):
    import flax.linen as nn

    from iml.models.convolutions import _max_pool

    # ReLU'd, rounded values: most windows hold several maxima (ties), as after the stem's ReLU
    rng = np.random.default_rng(sum(shape))
    x = jnp.asarray(np.maximum(rng.normal(size=shape), 0).round(1).astype(np.float32))

    def flax_pool(x):
        return nn.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))

    y_ref, vjp_ref = jax.vjp(flax_pool, x)
    y, vjp = jax.jit(lambda x: jax.vjp(lambda x: _max_pool(x, 3, 2, 1), x))(x)
    np.testing.assert_array_equal(y, y_ref)
    dy = jnp.asarray(rng.normal(size=y.shape).astype(np.float32))
    (want,), (got,) = vjp_ref(dy), vjp(dy)
    np.testing.assert_array_equal(got != 0, want != 0)  # the same (first) maxima are chosen
    np.testing.assert_allclose(got, want, atol=1e-6)
    # under the ensemble's vmap over members
    stacked = jnp.stack([x, 2.0 - x])
    got_v = jax.jit(jax.vmap(jax.grad(lambda x: jnp.sum(jnp.sin(_max_pool(x, 3, 2, 1))))))(stacked)
    want_grad = jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(flax_pool(x)))))
    for m in range(2):
        np.testing.assert_allclose(got_v[m], want_grad(stacked[m]), atol=1e-6)


def test_materialised_is_the_identity_bit_for_bit():
    from iml.models.convolutions import _materialised

    x = _images((3, 5, 7, 64)) * 1e3 + 1e-30
    np.testing.assert_array_equal(jax.jit(_materialised)(x), x)
    np.testing.assert_array_equal(jax.jit(jax.vmap(_materialised))(x), x)
    xb = x.astype(jnp.bfloat16)
    np.testing.assert_array_equal(jax.jit(_materialised)(xb), xb)


@pytest.mark.slow
def test_max_pool_gradient_with_more_window_positions_than_int8_holds():
    import flax.linen as nn

    from iml.models.convolutions import _max_pool

    x = jnp.maximum(_images((1, 20, 20, 2)), 0).round(1)  # 13x13 = 169 positions per window

    def flax_pool(x):
        return nn.max_pool(x, (13, 13), strides=(4, 4), padding=((6, 6), (6, 6)))

    want = jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(flax_pool(x)))))(x)
    got = jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(_max_pool(x, 13, 4, 6)))))(x)
    np.testing.assert_array_equal(got != 0, want != 0)
    np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize(
    ("kh", "kw", "stride", "padding"), [(7, 5, 2, 3), (3, 3, 1, 1), (2, 4, 3, 0)]
)
def test_patches_are_the_convolution_windows_in_kernel_order(kh, kw, stride, padding):
    from jax import lax

    from iml.models.convolutions import _patches

    x = _images((2, 9, 13, 3))  # not square: rows and columns are not mixed up
    got = _patches(x, kh, kw, stride, padding)
    # lax orders each window (channel, row, column); _patches orders it like an HWIO kernel
    ref = lax.conv_general_dilated_patches(
        x,
        (kh, kw),
        (stride, stride),
        ((padding, padding),) * 2,
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )
    ref = ref.reshape(*ref.shape[:3], 3, kh, kw).transpose(0, 1, 2, 4, 5, 3)
    np.testing.assert_array_equal(got, ref.reshape(got.shape))


def test_matmul_conv_vmaps_over_parameters_like_separate_convs():
    # ensembles vmap the model over stacked members' parameters
    x = _images((2, 8, 8, 16))
    conv = Conv(4, 3, 1, 1, impl="matmul")
    keys = jax.random.split(jax.random.key(0), 3)
    members = jax.vmap(conv.init, in_axes=(0, None))(keys, x)
    stacked = jax.jit(jax.vmap(conv.apply, in_axes=(0, None)))(members, x)
    xla = Conv(4, 3, 1, 1, impl="xla")

    @jax.jit
    def one_by_one(members):
        return [xla.apply(jax.tree.map(lambda a, k=k: a[k], members), x) for k in range(3)]

    for k, single in enumerate(one_by_one(members)):
        np.testing.assert_allclose(stacked[k], single, atol=1e-4, rtol=1e-4)
