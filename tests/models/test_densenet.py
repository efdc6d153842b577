"""Tests of iml.models.densenet: the Flax DenseNets laid out like torchvision's, their batch norm,
convolution backends, precision and input checks."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml.models import (
    BatchNorm,
    batch_moments,
    densenet121,
    densenet_small,
)


def _images(shape: tuple[int, ...], seed: int = 0) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


@pytest.mark.slow
def test_imagenet_stem_mixed_gives_xla_outputs_and_gradients():
    # the torchvision stem (7x7/2 conv, max-pool) and a transition, with every 'mixed' path
    model = densenet121(num_outputs=1).clone(block_config=(2, 1), num_init_features=8)
    x = jnp.maximum(_images((2, 37, 37, 3)), -0.5)
    variables = jax.jit(model.init)(jax.random.key(2), x)
    _assert_impl_matches_xla(model, variables, x, "mixed")


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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("impl", ["matmul", "mixed"])
def test_conv_impls_give_same_outputs_and_gradients(small_model_and_vars, impl):
    _assert_impl_matches_xla(*small_model_and_vars, impl)


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
