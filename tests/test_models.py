"""Tests for iml.models: the Flax DenseNets and the torchvision weight import."""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml.models import (
    BatchNorm,
    Conv,
    batch_moments,
    densenet121,
    densenet_small,
    densenet_variables_from_state_dict,
    load_torchvision_densenet,
    normalize_legacy_keys,
    variables_to_torchvision_state_dict,
)


def _images(shape: tuple[int, ...], seed: int = 0) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


@pytest.fixture(scope="module")
def small_model_and_vars():
    model = densenet_small(num_outputs=2, block_config=(2, 2), growth_rate=8)
    x = _images((4, 16, 16, 1))
    variables = jax.jit(model.init)(jax.random.key(1), x)
    return model, variables, x


# ----------------------------------------------------------------------------------------------
# Convolutions and batch norm
# ----------------------------------------------------------------------------------------------


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


def test_imagenet_stem_mixed_gives_xla_outputs_and_gradients():
    # the torchvision stem (7x7/2 conv, max-pool) and a transition, with every 'mixed' path
    model = densenet121(num_outputs=1).clone(block_config=(2, 1), num_init_features=8)
    x = jnp.maximum(_images((2, 37, 37, 3)), -0.5)
    variables = jax.jit(model.init)(jax.random.key(2), x)
    _assert_impl_matches_xla(model, variables, x, "mixed")


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


def test_batch_moments_are_the_float64_mean_and_biased_variance():
    x = _images((3, 5, 4, 6)) * 3.0 + 2.0
    mean, var = batch_moments(x)
    ref = np.asarray(x, np.float64).reshape(-1, 6)
    np.testing.assert_allclose(mean, ref.mean(0), rtol=1e-6)
    np.testing.assert_allclose(var, ref.var(0), rtol=1e-5)


def test_batchnorm_given_its_moments_equals_batchnorm_computing_them():
    x = _images((4, 3, 3, 5)) + 1.0
    bn = BatchNorm(relu=True)
    variables = bn.init(jax.random.key(0), x, train=False)
    variables = {
        "params": {"scale": jnp.arange(1.0, 6.0), "bias": jnp.linspace(-1, 1, 5)},
        "batch_stats": variables["batch_stats"],
    }
    run = functools.partial(bn.apply, train=True, mutable=["batch_stats"])
    y, stats = run(variables, x)
    y_given, stats_given = run(variables, x, moments=batch_moments(x))
    np.testing.assert_array_equal(y_given, y)
    jax.tree.map(np.testing.assert_array_equal, stats_given, stats)
    # other moments are really used, in training only
    y_other, _ = run(variables, x, moments=(jnp.zeros(5), jnp.ones(5)))
    assert not np.allclose(y_other, y)
    np.testing.assert_array_equal(
        bn.apply(variables, x, train=False, moments=(jnp.zeros(5), jnp.ones(5))),
        bn.apply(variables, x, train=False),
    )


def test_batchnorm_running_stats_match_torch():
    import torch

    rng = np.random.default_rng(0)
    x = (rng.normal(size=(6, 5, 4, 3)) * 2.0 + 1.5).astype(np.float32)
    bn = torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([0.5, 1.0, 2.0]))
        bn.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
        bn.running_mean.copy_(torch.tensor([0.2, -0.1, 0.0]))
        bn.running_var.copy_(torch.tensor([1.5, 0.7, 1.0]))
    bn.train()
    expected = bn(torch.from_numpy(x).permute(0, 3, 1, 2)).detach().permute(0, 2, 3, 1).numpy()
    variables = {
        "params": {"scale": jnp.array([0.5, 1.0, 2.0]), "bias": jnp.array([0.1, -0.2, 0.3])},
        "batch_stats": {"mean": jnp.array([0.2, -0.1, 0.0]), "var": jnp.array([1.5, 0.7, 1.0])},
    }
    y, updates = BatchNorm().apply(variables, x, train=True, mutable=["batch_stats"])
    np.testing.assert_allclose(y, expected, atol=1e-5)
    np.testing.assert_allclose(updates["batch_stats"]["mean"], bn.running_mean.numpy(), atol=1e-5)
    np.testing.assert_allclose(updates["batch_stats"]["var"], bn.running_var.numpy(), atol=1e-5)
    bn.eval()
    expected_eval = bn(torch.from_numpy(x).permute(0, 3, 1, 2)).detach().permute(0, 2, 3, 1)
    y_eval = BatchNorm().apply({**variables, **updates}, x, train=False)
    np.testing.assert_allclose(y_eval, expected_eval.numpy(), atol=1e-5)


# ----------------------------------------------------------------------------------------------
# The network
# ----------------------------------------------------------------------------------------------


def _assert_impl_matches_xla(model, variables, x, impl):
    """``model`` with ``conv_impl=impl`` gives ``model``'s (xla) outputs, training gradients and
    running averages."""
    other = model.clone(conv_impl=impl)

    def loss(params, m):
        logits, updates = m.apply(
            {"params": params, "batch_stats": variables["batch_stats"]},
            x,
            train=True,
            mutable=["batch_stats"],
        )
        return jnp.sum(jnp.sin(logits)), updates

    np.testing.assert_allclose(
        jax.jit(other.apply)(variables, x), jax.jit(model.apply)(variables, x), atol=1e-4
    )
    grad = jax.jit(jax.grad(loss, has_aux=True), static_argnums=1)
    (g_xla, s_xla), (g_other, s_other) = (
        grad(variables["params"], model),
        grad(variables["params"], other),
    )
    for a, b in zip(jax.tree.leaves(g_xla), jax.tree.leaves(g_other), strict=True):
        np.testing.assert_allclose(b, a, atol=1e-4, rtol=1e-3)
    # the same batch statistics move the same running averages
    for a, b in zip(jax.tree.leaves(s_xla), jax.tree.leaves(s_other), strict=True):
        np.testing.assert_allclose(b, a, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("impl", ["matmul", "mixed"])
def test_conv_impls_give_same_outputs_and_gradients(small_model_and_vars, impl):
    _assert_impl_matches_xla(*small_model_and_vars, impl)


def test_training_mode_updates_batch_stats_and_eval_is_deterministic(small_model_and_vars):
    model, variables, x = small_model_and_vars
    train_step = jax.jit(functools.partial(model.apply, train=True, mutable=["batch_stats"]))
    logits, updates = train_step(variables, x)
    assert logits.shape == (4, 2) and logits.dtype == jnp.float32
    before = jax.tree.leaves(variables["batch_stats"])
    after = jax.tree.leaves(updates["batch_stats"])
    assert any(not np.allclose(a, b) for a, b in zip(before, after, strict=True))
    # eval mode uses running statistics: one image's logits do not depend on the rest of the batch
    full = jax.jit(model.apply)(variables, x)
    single = jax.jit(model.apply)(variables, x[:1])
    np.testing.assert_allclose(single, full[:1], atol=1e-5)


@pytest.mark.parametrize("impl", ["xla", "mixed"])
def test_remat_gives_same_outputs_and_gradients(small_model_and_vars, impl):
    model, variables, x = small_model_and_vars
    model = model.clone(conv_impl=impl)

    def loss(params, m):
        logits, _ = m.apply(
            {"params": params, "batch_stats": variables["batch_stats"]},
            x,
            train=True,
            mutable=["batch_stats"],
        )
        return jnp.mean(logits**2)

    grad = jax.jit(jax.grad(loss), static_argnums=1)
    g = grad(variables["params"], model)
    g_remat = grad(variables["params"], model.clone(remat=True))
    assert jax.tree.structure(g) == jax.tree.structure(g_remat)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_remat), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5)


def test_multilabel_head_gives_one_logit_per_label():
    model = densenet_small(num_outputs=14, block_config=(1, 1), growth_rate=4)
    x = jax.ShapeDtypeStruct((3, 32, 32, 3), jnp.float32)
    variables = jax.eval_shape(model.init, jax.random.key(0), x)
    assert jax.eval_shape(model.apply, variables, x).shape == (3, 14)
    assert variables["params"]["classifier"]["kernel"].shape == (18, 14)  # (24 + 4) // 2 + 4


def test_bfloat16_forward_has_right_shape_dtype_and_is_finite():
    model = densenet_small(num_outputs=3, block_config=(1, 1), growth_rate=4, dtype=jnp.bfloat16)
    x = _images((2, 16, 16, 3))
    variables = jax.jit(model.init)(jax.random.key(0), x)
    assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(variables["params"]))

    @jax.jit
    def forward(variables, x):
        bf16 = model.apply(variables, x, train=True, mutable=["batch_stats"])[0]
        fp32 = model.clone(dtype=jnp.float32).apply(
            variables, x, train=True, mutable=["batch_stats"]
        )[0]
        return bf16, fp32

    logits, reference = forward(variables, x)
    assert logits.shape == (2, 3) and logits.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(logits)))
    np.testing.assert_allclose(logits, reference, atol=0.2, rtol=0.1)


def test_densenet121_has_torchvision_parameter_count():
    model = densenet121(num_outputs=1000)
    shapes = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 64, 64, 3)))
    n_params = sum(int(np.prod(a.shape)) for a in jax.tree.leaves(shapes["params"]))
    assert n_params == 7_978_856  # torchvision.models.densenet121().parameters()
    assert set(shapes["params"]) == {
        "conv0",
        "norm0",
        "norm5",
        "classifier",
        *(f"denseblock{i}" for i in range(1, 5)),
        *(f"transition{i}" for i in range(1, 4)),
    }
    assert len(shapes["params"]["denseblock3"]) == 24


# ----------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.zeros((2, 28, 28, 1), np.uint8), "floating"),
        (np.zeros((28, 28, 1), np.float32), r"\[N, H, W, C\]"),
        (np.zeros((2, 3, 28, 28), np.float32), "NHWC"),
        (np.zeros((2, 1, 1, 1), np.float32), "at least"),
    ],
)
def test_bad_images_raise_clear_error(small_model_and_vars, x, match):
    model, variables, _ = small_model_and_vars
    with pytest.raises(ValueError, match=match):
        model.apply(variables, x)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"num_outputs": 0}, "num_outputs"), ({"conv_impl": "fft"}, "conv_impl")],
)
def test_bad_configuration_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        densenet_small(**kwargs)
    with pytest.raises(ValueError, match=match):
        densenet121(**kwargs)


# ----------------------------------------------------------------------------------------------
# torchvision weights
# ----------------------------------------------------------------------------------------------


def _legacy_name(key: str) -> str:
    # the published ImageNet checkpoint spells "denselayer1.norm1.weight" as "...norm.1.weight"
    return re.sub(r"(denselayer\d+\.(?:norm|conv))([12])\.", r"\1.\2.", key)


@pytest.fixture(scope="module")
def torchvision_densenet121_file(tmp_path_factory):
    """A random torchvision densenet121 (one logit, random BN statistics) saved with legacy keys."""
    import torch
    import torchvision

    torch.manual_seed(0)
    net = torchvision.models.densenet121(weights=None, num_classes=1)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.3, 0.3)
    net.eval()
    state = {_legacy_name(k): v for k, v in net.state_dict().items()}
    assert "features.denseblock1.denselayer1.norm.1.weight" in state
    path = tmp_path_factory.mktemp("weights") / "densenet121_legacy.pth"
    torch.save(state, path)
    return net, path


def test_torchvision_parity_densenet121_from_legacy_pth(torchvision_densenet121_file):
    import torch

    net, path = torchvision_densenet121_file
    x = np.random.default_rng(0).normal(size=(2, 3, 64, 64)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    model = densenet121(num_outputs=1)
    variables = load_torchvision_densenet(path, model)
    logits = jax.jit(model.apply)(variables, jnp.asarray(x.transpose(0, 2, 3, 1)))
    assert logits.shape == (2, 1)
    assert np.max(np.abs(np.asarray(logits) - expected)) <= 1e-4


def test_torchvision_imagenet_head_converts_and_can_be_replaced(torchvision_densenet121_file):
    net, _ = torchvision_densenet121_file
    state = {k: v.numpy() for k, v in net.state_dict().items()}
    rng = np.random.default_rng(1)
    state["classifier.weight"] = rng.normal(size=(1000, 1024)).astype(np.float32)
    state["classifier.bias"] = rng.normal(size=(1000,)).astype(np.float32)
    imagenet = densenet_variables_from_state_dict(state, densenet121(num_outputs=1000))
    np.testing.assert_array_equal(
        imagenet["params"]["classifier"]["kernel"], state["classifier.weight"].T
    )
    # a 1000-class file into a one-logit model: only with a fresh head
    with pytest.raises(ValueError, match=r"classifier\.weight"):
        densenet_variables_from_state_dict(state, densenet121(num_outputs=1))
    fresh = densenet_variables_from_state_dict(state, densenet121(num_outputs=1), head="init")
    assert fresh["params"]["classifier"]["kernel"].shape == (1024, 1)
    np.testing.assert_array_equal(
        fresh["params"]["transition2"]["conv"]["kernel"],
        imagenet["params"]["transition2"]["conv"]["kernel"],
    )
    # round trip back to torchvision names and layouts
    back = variables_to_torchvision_state_dict(imagenet)
    expected = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
    assert set(back) == set(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(back[key], value)


def test_weights_file_for_other_architecture_names_first_bad_key(torchvision_densenet121_file):
    _, path = torchvision_densenet121_file
    with pytest.raises(ValueError, match=r"'features\.conv0\.weight' has shape \(64, 3, 7, 7\)"):
        load_torchvision_densenet(path, densenet_small(num_outputs=1))


def test_state_dict_mismatches_name_the_key(small_model_and_vars):
    model, variables, _ = small_model_and_vars
    state = variables_to_torchvision_state_dict(variables)
    state["features.denseblock1.denselayer2.num_batches_tracked"] = np.array(3)
    converted = densenet_variables_from_state_dict(state, model)
    for a, b in zip(jax.tree.leaves(converted), jax.tree.leaves(variables), strict=True):
        np.testing.assert_array_equal(a, b)

    extra = {**state, "features.denseblock9.denselayer1.conv1.weight": np.zeros((1, 1, 1, 1))}
    with pytest.raises(ValueError, match=r"'features\.denseblock9\.denselayer1\.conv1\.weight'"):
        densenet_variables_from_state_dict(extra, model)
    missing = dict(state)
    del missing["features.transition1.norm.running_var"]
    with pytest.raises(ValueError, match=r"lacks key 'features\.transition1\.norm\.running_var'"):
        densenet_variables_from_state_dict(missing, model)
    with pytest.raises(ValueError, match="head"):
        densenet_variables_from_state_dict(state, model, head="keep")


def test_rgb_weights_adapted_to_grayscale_give_the_rgb_model_on_a_gray_copy():
    # ImageNet weights take 3 channels; X-rays have 1. Summing conv0's kernel over its input
    # channels makes the model on a gray image equal the RGB model on its 3-channel copy (and 6
    # channels, cyclic and scaled by 3/6, do too).
    model = densenet_small(num_outputs=1, block_config=(1, 1), growth_rate=4, num_init_features=8)
    gray = _images((2, 16, 16, 1))
    rgb_vars = jax.jit(model.init)(jax.random.key(2), jnp.repeat(gray, 3, axis=-1))
    state = variables_to_torchvision_state_dict(rgb_vars)
    want = model.apply(rgb_vars, jnp.repeat(gray, 3, axis=-1), train=False)
    for channels in (1, 6):
        adapted = densenet_variables_from_state_dict(state, model, in_channels=channels)
        kernel = adapted["params"]["conv0"]["kernel"]
        assert kernel.shape[2] == channels
        got = model.apply(adapted, jnp.repeat(gray, channels, axis=-1), train=False)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    same = densenet_variables_from_state_dict(state, model, in_channels=3)
    np.testing.assert_array_equal(
        same["params"]["conv0"]["kernel"], rgb_vars["params"]["conv0"]["kernel"]
    )
    with pytest.raises(ValueError, match="in_channels"):
        densenet_variables_from_state_dict(state, model, in_channels=0)


def test_normalize_legacy_keys_matches_torchvision_rule():
    legacy = {
        "module.features.denseblock2.denselayer11.norm.2.running_var": 1,
        "features.denseblock1.denselayer1.conv.1.weight": 2,
        "features.transition1.norm.weight": 3,
    }
    assert list(normalize_legacy_keys(legacy)) == [
        "features.denseblock2.denselayer11.norm2.running_var",
        "features.denseblock1.denselayer1.conv1.weight",
        "features.transition1.norm.weight",
    ]


def test_missing_weights_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_torchvision_densenet(tmp_path / "nope.pth", densenet_small())


def test_with_conv_impl_sets_the_backends_default_or_the_chosen_convolutions():
    import flax.linen as nn

    from iml.models import DEFAULT_CONV_IMPL, with_conv_impl

    model = densenet_small(block_config=(1,), growth_rate=4)
    assert with_conv_impl(model, backend="cpu").conv_impl == DEFAULT_CONV_IMPL["cpu"] == "mixed"
    assert with_conv_impl(model, backend="gpu").conv_impl == "xla"
    assert with_conv_impl(model, "matmul", backend="gpu").conv_impl == "matmul"
    with pytest.raises(ValueError, match=r"conv_impl must be one of .*'mixed'"):
        with_conv_impl(model, "im2col")

    class NoConv(nn.Module):
        @nn.compact
        def __call__(self, x):
            return x

    assert isinstance(with_conv_impl(NoConv(), backend="cpu"), NoConv)
    with pytest.raises(ValueError, match="NoConv has no conv_impl"):
        with_conv_impl(NoConv(), "matmul")
