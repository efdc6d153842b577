"""The small models of the sweeps: logistic regression and a one-hidden-layer MLP.

Both are Flax modules called like the DenseNets (``model.apply(variables, x, train=...)``), so
one trainer (:mod:`iml.training`) trains all of them. They return one logit per row, ``[B]``, for
the binary losses (``n_outputs=1``) and ``[B, n]`` for the multiclass ones. Their parameters are
named ``w`` (weights, penalised by an L2 term: :func:`weight_norm`) and ``b`` (biases), with the
layer's number for the MLP (``w1, b1, w2, b2``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import linen as nn

from iml import _validation as V

Array = jax.Array

__all__ = ["MLP", "SMALL_MODELS", "LogisticRegression", "build_small_model", "weight_norm"]


def _shape(n_outputs: int) -> tuple[int, ...]:
    return () if n_outputs == 1 else (n_outputs,)


class LogisticRegression(nn.Module):
    """``x @ w + b``: initial weights ``0.01 N(0, 1)``, biases 0."""

    n_outputs: int = 1

    @nn.compact
    def __call__(self, x: Array, train: bool = False) -> Array:
        out = _shape(self.n_outputs)
        w = self.param("w", lambda key: 0.01 * jax.random.normal(key, (x.shape[-1], *out)))
        b = self.param("b", lambda key: jnp.zeros(out))
        return x @ w + b


class MLP(nn.Module):
    """One ReLU hidden layer of ``hidden`` units, He-initialised; biases start at 0."""

    hidden: int = 32
    n_outputs: int = 1

    @nn.compact
    def __call__(self, x: Array, train: bool = False) -> Array:
        d, out = x.shape[-1], _shape(self.n_outputs)
        w1 = self.param("w1", lambda k: jax.random.normal(k, (d, self.hidden)) * jnp.sqrt(2 / d))
        b1 = self.param("b1", lambda key: jnp.zeros((self.hidden,)))
        w2 = self.param(
            "w2", lambda k: jax.random.normal(k, (self.hidden, *out)) * jnp.sqrt(1 / self.hidden)
        )
        b2 = self.param("b2", lambda key: jnp.zeros(out))
        return jax.nn.relu(x @ w1 + b1) @ w2 + b2


#: The small models by name, each a function ``(hidden, n_outputs) -> module``. A new model is
#: one entry here.
SMALL_MODELS: dict[str, Callable[[int, int], nn.Module]] = {
    "logistic": lambda hidden, n_outputs: LogisticRegression(n_outputs=n_outputs),
    "mlp": lambda hidden, n_outputs: MLP(hidden=hidden, n_outputs=n_outputs),
}


def build_small_model(name: str, *, hidden: int = 32, n_outputs: int = 1) -> nn.Module:
    """The small model ``name`` of :data:`SMALL_MODELS`.

    Raises:
      ValueError: for an unknown name or a count below 1.
    """
    if name not in SMALL_MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {list(SMALL_MODELS)}")
    V.check_count("hidden", hidden)
    V.check_count("n_outputs", n_outputs)
    return SMALL_MODELS[name](hidden, n_outputs)


def weight_norm(params: dict[str, Array]) -> Array:
    """``||W||^2`` of the weights: the parameters whose name starts with ``w`` or is ``kernel``
    (Flax's dense and convolution weights); biases and BatchNorm scales are not penalised."""
    total = jnp.zeros(())
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        name = str(getattr(path[-1], "key", path[-1]))
        if name == "kernel" or name.startswith("w"):
            total = total + jnp.sum(jnp.square(leaf))
    return total
