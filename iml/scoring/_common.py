"""What the modules of :mod:`iml.scoring` share: the array and loss-function types, one
floating dtype for all arguments, the logit and its inverse, and the odds tilt
``w p / (w p + (1 - w)(1 - p))`` that is both Proposition 2's rule (eq. ``choice-b1``) and
Corollary 1's inverse (eq. ``loss-c-bin``), binary and per output of the multiclass rule.

The names here are public so that the rule modules can share them; the package re-exports only
the loss-function types.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

Array = jax.Array
ArrayLike = jax.typing.ArrayLike
BinaryLossFn = Callable[..., Array]
MulticlassLossFn = Callable[..., Array]


def as_float(*xs: ArrayLike) -> list[Array]:
    """The arguments as arrays of one floating dtype: theirs if floating, else float32."""
    arrays = [jnp.asarray(x) for x in xs]
    dtype = jnp.result_type(*arrays)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.promote_types(dtype, jnp.float32)
    return [x.astype(dtype) for x in arrays]


def logit(p: Array) -> Array:
    return jnp.log(p) - jnp.log1p(-p)


def expit(z: Array) -> Array:
    """The score of logit ``z``, ``1 / (1 + exp(-z))``, rounded to the nearest float near 1 too
    (``jax.nn.sigmoid`` returns 1 from logit 16.64 in float32, skipping ``1 - 2^-24``)."""
    small = jax.nn.sigmoid(-jnp.abs(z))
    return jnp.where(z < 0, small, 1.0 - small)


def tilt(p: Array, w: Array, w_complement: Array) -> Array:
    """``w p / (w p + (1 - w)(1 - p))`` given ``w`` and ``1 - w`` each to full precision (a
    small ``1 - w`` recomputed from ``w`` would lose its relative precision)."""
    num = w * p
    return num / (num + w_complement * (1.0 - p))
