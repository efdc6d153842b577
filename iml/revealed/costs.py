"""Revealed cost bounds: costly learning implies ``C_k - C_j <= G[k, k] - G[k, j]``, difference
constraints on the costs of the models' experiments that bound each ``C_k``, relative to a
reference model, by shortest paths."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.calibration._checks import as_float
from iml.revealed.learning_tests import check_value_matrix, edge_weights, floyd_warshall

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["CostBounds", "revealed_cost_bounds"]


class CostBounds(NamedTuple):
    """Revealed bounds on the cost of each model's experiment, relative to a reference model.

    Attributes:
      lower, upper: ``[..., K]`` bounds on ``C_k - C_ref`` (NaN where infeasible).
      feasible: whether the difference constraints admit a solution (NIAC holds), ``[...]``.
    """

    lower: Array
    upper: Array
    feasible: Array


def revealed_cost_bounds(G: ArrayLike, reference: int = 0) -> CostBounds:
    """Costly learning implies ``C_k - C_j <= G[k, k] - G[k, j] = w(j -> k)``: bounds on ``C_k``.

    These difference constraints are feasible exactly when NIAC holds (no negative cycle). With
    ``C_ref = 0``, shortest paths ``d`` give the sharpest interval for each model:
    ``-d(k -> ref) <= C_k <= d(ref -> k)`` (Floyd-Warshall).

    Args:
      G: value matrix ``[..., K, K]``.
      reference: the model whose cost is set to 0.
    """
    check_value_matrix(G)
    K = np.shape(G)[-1]
    if not isinstance(reference, int | np.integer) or not 0 <= reference < K:
        raise ValueError(f"reference must be a model index in [0, {K}); got {reference!r}")
    return revealed_cost_bounds_of(G, int(reference))


@functools.partial(jax.jit, static_argnums=(1,))
def revealed_cost_bounds_of(G: ArrayLike, reference: int) -> CostBounds:
    d = floyd_warshall(edge_weights(as_float(G)))
    feasible = jnp.all(jnp.diagonal(d, axis1=-2, axis2=-1) >= 0, axis=-1)
    lower = V.nan_unless(feasible[..., None], -d[..., :, reference])
    upper = V.nan_unless(feasible[..., None], d[..., reference, :])
    return CostBounds(lower, upper, feasible)
