"""Tests of iml.models.small: the sweeps' logistic regression and one-hidden-layer MLP, and the
weight norm of their L2 penalty."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml.models import MLP, LogisticRegression, build_model, weight_norm


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_the_small_models_take_rows_or_images_as_rows_and_give_one_logit_per_output(n_outputs):
    rows = jax.random.normal(jax.random.key(0), (5, 12))
    images = rows.reshape(5, 2, 3, 2)
    want = (5,) if n_outputs == 1 else (5, n_outputs)
    for model in (LogisticRegression(n_outputs=n_outputs), MLP(hidden=4, n_outputs=n_outputs)):
        variables = model.init(jax.random.key(1), rows)
        logits = model.apply(variables, rows)
        chex.assert_shape(logits, want)
        chex.assert_type(logits, jnp.float32)
        # images are the rows of their pixels: the same logits
        chex.assert_trees_all_close(model.apply(variables, images), logits, rtol=1e-6)


def test_logistic_regression_is_the_affine_map_of_its_parameters_and_starts_small():
    model = LogisticRegression()
    x = jax.random.normal(jax.random.key(2), (4, 3))
    variables = model.init(jax.random.key(3), x)
    w, b = variables["params"]["w"], variables["params"]["b"]
    chex.assert_shape((w, b), ((3,), ()))
    assert float(jnp.max(jnp.abs(w))) < 0.1 and float(b) == 0.0
    chex.assert_trees_all_close(model.apply(variables, x), x @ w + b, rtol=1e-6)


def test_mlp_parameters_are_named_by_layer_and_biases_start_at_zero():
    variables = MLP(hidden=6, n_outputs=2).init(jax.random.key(4), jnp.ones((3, 5)))
    chex.assert_tree_shape_prefix(variables["params"]["w1"], (5, 6))
    assert {k: v.shape for k, v in variables["params"].items()} == {
        "w1": (5, 6), "b1": (6,), "w2": (6, 2), "b2": (2,)
    }  # fmt: skip
    np.testing.assert_array_equal(variables["params"]["b1"], 0.0)


def test_weight_norm_sums_the_squared_weights_and_leaves_biases_and_scales_out():
    params = {
        "w1": jnp.array([[1.0, 2.0]]),
        "b1": jnp.array([10.0]),
        "dense": {"kernel": jnp.array([3.0]), "bias": jnp.array([10.0])},
        "norm": {"scale": jnp.array([10.0])},
    }
    np.testing.assert_allclose(weight_norm(params), 1.0 + 4.0 + 9.0)
    np.testing.assert_allclose(jax.jit(weight_norm)(params), 14.0)


def test_the_registry_builds_the_small_models_with_their_options():
    assert isinstance(build_model("logistic", 1), LogisticRegression)
    mlp = build_model("mlp", 3, hidden=7)
    assert isinstance(mlp, MLP) and (mlp.hidden, mlp.n_outputs) == (7, 3)
    with pytest.raises(ValueError, match="hidden"):
        build_model("mlp", 1, hidden=0)
