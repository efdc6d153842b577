"""The small models of the sweeps: logistic regression and a one-hidden-layer MLP, registered as
``"logistic"`` and ``"mlp"`` (:mod:`iml.models.registry`).

Both are Flax modules called like the DenseNets (``model.apply(variables, x, train=...)``), so
one trainer (:mod:`iml.training`) trains all of them; images ``[B, H, W, C]`` are taken as rows of
their pixels. They return one logit per row, ``[B]``, for
the binary losses (``n_outputs=1``) and ``[B, n]`` for the multiclass ones. Their parameters are
named ``w`` (weights, penalised by an L2 term: :func:`weight_norm`) and ``b`` (biases), with the
layer's number for the MLP (``w1, b1, w2, b2``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import linen as nn

from iml import _validation as V
from iml.models.registry import register_model

Array = jax.Array

__all__ = ["MLP", "LogisticRegression", "weight_norm"]


def _shape(n_outputs: int) -> tuple[int, ...]:
    return () if n_outputs == 1 else (n_outputs,)


def _rows(x: Array) -> Array:
    """Images ``[n, H, W, C]`` as rows ``[n, H * W * C]``; rows as they are."""
    return x.reshape(x.shape[0], -1) if x.ndim > 2 else x


class LogisticRegression(nn.Module):
    """``x @ w + b``: initial weights ``0.01 N(0, 1)``, biases 0."""

    n_outputs: int = 1

    @nn.compact
    def __call__(self, x: Array, train: bool = False) -> Array:
        x, out = _rows(x), _shape(self.n_outputs)
        w = self.param("w", lambda key: 0.01 * jax.random.normal(key, (x.shape[-1], *out)))
        b = self.param("b", lambda key: jnp.zeros(out))
        return x @ w + b


class MLP(nn.Module):
    """One ReLU hidden layer of ``hidden`` units, He-initialised; biases start at 0."""

    hidden: int = 32
    n_outputs: int = 1

    @nn.compact
    def __call__(self, x: Array, train: bool = False) -> Array:
        x = _rows(x)
        d, out = x.shape[-1], _shape(self.n_outputs)
        w1 = self.param("w1", lambda k: jax.random.normal(k, (d, self.hidden)) * jnp.sqrt(2 / d))
        b1 = self.param("b1", lambda key: jnp.zeros((self.hidden,)))
        w2 = self.param(
            "w2", lambda k: jax.random.normal(k, (self.hidden, *out)) * jnp.sqrt(1 / self.hidden)
        )
        b2 = self.param("b2", lambda key: jnp.zeros(out))
        return jax.nn.relu(x @ w1 + b1) @ w2 + b2


def _mlp(num_outputs: int, hidden: int = 32) -> MLP:
    V.check_count("hidden", hidden)
    return MLP(hidden=hidden, n_outputs=num_outputs)


# Both take rows, and images as rows of their pixels.
register_model("logistic", lambda num_outputs: LogisticRegression(n_outputs=num_outputs))
register_model("mlp", _mlp, options=("hidden",))


def weight_norm(params: dict[str, Array]) -> Array:
    """``||W||^2`` of the weights: the parameters whose name starts with ``w`` or is ``kernel``
    (Flax's dense and convolution weights); biases and BatchNorm scales are not penalised."""
    total = jnp.zeros(())
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        name = str(getattr(path[-1], "key", path[-1]))
        if name == "kernel" or name.startswith("w"):
            total = total + jnp.sum(jnp.square(leaf))
    return total
