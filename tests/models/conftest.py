"""Fixtures shared by the tests of iml.models."""

import jax
import jax.numpy as jnp
import pytest

from iml.models import densenet_small


def _images(shape: tuple[int, ...], seed: int = 0) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


@pytest.fixture(scope="module")
def small_model_and_vars():
    model = densenet_small(num_outputs=2, block_config=(2, 2), growth_rate=8)
    x = _images((4, 16, 16, 1))
    variables = jax.jit(model.init)(jax.random.key(1), x)
    return model, variables, x
