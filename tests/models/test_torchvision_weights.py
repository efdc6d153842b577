"""Tests of iml.models.torchvision_weights: torchvision's DenseNet weights read into the Flax
model and written back, with the keys of the legacy checkpoints."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml.models import (
    densenet121,
    densenet_small,
    densenet_variables_from_state_dict,
    load_torchvision_densenet,
    normalize_legacy_keys,
    variables_to_torchvision_state_dict,
)


def _images(shape: tuple[int, ...], seed: int = 0) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_weights_file_for_other_architecture_names_first_bad_key(torchvision_densenet121_file):
    _, path = torchvision_densenet121_file
    with pytest.raises(ValueError, match=r"'features\.conv0\.weight' has shape \(64, 3, 7, 7\)"):
        load_torchvision_densenet(path, densenet_small(num_outputs=1))


@pytest.mark.slow
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


@pytest.mark.slow
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
