"""The small models of the sweeps: logistic regression and a one-hidden-layer MLP.

Each is a pair of pure functions on a dict of arrays: :func:`init_small_model` gives one member's
initial parameters and :func:`small_model_logits` its logits, ``[B]`` for the binary losses and
``[B, n]`` for the multiclass ones. A sweep stacks members on leading axes and ``jax.vmap``s
these functions (:mod:`iml.training.tabular`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

Array = jax.Array

__all__ = ["SMALL_MODELS", "init_small_model", "small_model_logits", "weight_norm"]


def _init_logistic(key: Array, n_features: int, hidden: int, out: tuple[int, ...]) -> dict:
    return {"w": 0.01 * jax.random.normal(key, (n_features, *out)), "b": jnp.zeros(out)}


def _init_mlp(key: Array, n_features: int, hidden: int, out: tuple[int, ...]) -> dict:
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (n_features, hidden)) * jnp.sqrt(2.0 / n_features),
        "b1": jnp.zeros((hidden,)),
        "w2": jax.random.normal(k2, (hidden, *out)) * jnp.sqrt(1.0 / hidden),
        "b2": jnp.zeros(out),
    }


#: The small models by name, each its initialiser (small Gaussian weights; He for the hidden
#: layer): ``"logistic"`` (logistic regression) and ``"mlp"`` (one ReLU hidden layer). A new
#: model is one entry here and its branch of :func:`small_model_logits`.
SMALL_MODELS: dict[str, Callable[..., dict[str, Array]]] = {
    "logistic": _init_logistic,
    "mlp": _init_mlp,
}


def init_small_model(
    key: Array, model: str, n_features: int, hidden: int, n_outputs: int = 1
) -> dict[str, Array]:
    """Initial parameters of one member of :data:`SMALL_MODELS`.

    ``n_outputs = 1`` gives one logit per row (binary losses); ``n`` gives ``n`` logits (the
    multiclass losses).
    """
    return SMALL_MODELS[model](key, n_features, hidden, () if n_outputs == 1 else (n_outputs,))


def small_model_logits(params: dict[str, Array], x: Array) -> Array:
    """Logits ``[B]`` (or ``[B, n]``) of one member on rows ``x`` ``[B, d]`` (logistic or
    one-hidden-layer MLP)."""
    if "w1" in params:
        h = jax.nn.relu(x @ params["w1"] + params["b1"])
        return h @ params["w2"] + params["b2"]
    return x @ params["w"] + params["b"]


def weight_norm(params: dict[str, Array]) -> Array:
    """``||W||^2`` of the weight matrices (the biases are not penalised)."""
    return sum(jnp.sum(jnp.square(v)) for k, v in params.items() if k.startswith("w"))
