"""The B-weighted multiclass log loss (eq. ``b-loss-multi``): one sigmoid per class.

``L^B(a, y) = sum_{y'} B[y, y'] L(a_{y'}, 1{y = y'})`` weighs the score of every class by row
``y`` of a positive matrix ``B``. Its optimal scores are one tilted posterior per output
(Proposition 3), which need not sum to one; the loss correction inverts each output at the
weights its positives and negatives carry (:func:`iml.scoring.loss_corrected_score_multiclass`).
The record ``"matrix"`` grids over entries of ``B`` (``"B[8,8]=10"``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml import scoring as S
from iml.losses._registry import GridWeight, LossRecord, as_parameter, entropy_term, register
from iml.losses.beta import BinaryLoss, log_loss

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["entries_key", "matrix_weighted_loss", "matrix_weighted_sigmoid_cross_entropy"]


def matrix_weighted_loss(
    a: ArrayLike, y: ArrayLike, B: ArrayLike, base: BinaryLoss = log_loss
) -> Array:
    """The B-weighted multiclass loss, eq. ``b-loss-multi``.

    ``L^B(a, y) = sum_{y'} B[y, y'] L(a_{y'}, 1{y = y'})``: a one-vs-rest sum of binary losses in
    which row ``y`` of ``B`` weighs the score of every class when the true class is ``y``.

    Args:
      B: positive weight matrix ``[n, n]`` (rows: true class, columns: scored class).
      base: a strictly proper binary loss.
    """
    a = jnp.asarray(a)
    B = jnp.asarray(B, a.dtype)
    n = a.shape[-1]
    onehot = jax.nn.one_hot(jnp.asarray(y), n, dtype=a.dtype)
    return jnp.sum(B[jnp.asarray(y)] * base(a, onehot), axis=-1)


def matrix_weighted_sigmoid_cross_entropy(logits: ArrayLike, y: ArrayLike, B: ArrayLike) -> Array:
    """:func:`matrix_weighted_loss` of ``a = sigmoid(logits)``, one sigmoid per class, computed
    stably for any logit."""
    z = jnp.asarray(logits)
    B = jnp.asarray(B, z.dtype)
    y = jnp.asarray(y)
    onehot = jax.nn.one_hot(y, z.shape[-1], dtype=z.dtype)
    per_class = -(onehot * jax.nn.log_sigmoid(z) + (1.0 - onehot) * jax.nn.log_sigmoid(-z))
    return jnp.sum(B[y] * per_class, axis=-1)


def entries_key(symbol: str, values: np.ndarray, default: float = 1.0) -> str | None:
    """``"B[3,8]=10"``: the entries of a weight that differ from ``default`` (``"ones"`` if
    none), the syntax of a grid's text; None where more than four differ."""
    changed = np.argwhere(values != default)
    if len(changed) > 4:
        return None
    parts = [f"{symbol}[{','.join(map(str, idx))}]={values[tuple(idx)]:g}" for idx in changed]
    return ",".join(parts) or "ones"


# ----------------------------------------------------------------------------------------------
# The registry's record: "matrix"
# ----------------------------------------------------------------------------------------------


def _make(B: ArrayLike) -> tuple[dict[str, Array], int]:
    """``B`` ``[..., n, n]`` (a stack of matrices is a batch of losses)."""
    shape = np.shape(B)
    if len(shape) < 2:
        raise ValueError(f"B must be a square [n, n] matrix; got shape {shape}")
    if V.is_concrete(B):
        for matrix in np.reshape(np.asarray(B, np.float64), (-1, *shape[-2:])):
            V.check_weight_matrix("B", matrix)
    else:
        V.check_weight_matrix("B", np.ones(shape[-2:]))  # the shape, known under tracing too
    return {"B": as_parameter("B", B)}, shape[-1]


def _entropy(gamma: ArrayLike, B: ArrayLike) -> Array:
    """``l*``: the binary form summed over classes, ``Z_j = sum_y gamma_y B[y, j]``."""
    V.check_simplex("gamma", gamma)
    g = jnp.asarray(gamma)
    g = g.astype(jnp.result_type(g.dtype, jnp.float32))
    B = jnp.asarray(B, g.dtype)
    n = B.shape[-1]
    valid = jnp.all(B > 0, axis=(-2, -1)) & jnp.all(g >= 0, axis=-1)
    pos = g * jnp.diagonal(B, axis1=-2, axis2=-1)
    neg = jnp.einsum("...y,...yj->...j", g, B * (1.0 - jnp.eye(n, dtype=g.dtype)))
    value = jnp.sum(entropy_term(pos, neg) + entropy_term(neg, pos), axis=-1)
    return V.nan_unless(valid, value)


register(
    LossRecord(
        name="matrix",
        title="B-weighted log loss",
        make=_make,
        loss=lambda a, y, B: matrix_weighted_loss(a, y, B),
        event_ndims={"B": 2},
        multiclass=True,
        link="sigmoid",
        logits_loss=matrix_weighted_sigmoid_cross_entropy,
        optimal_score=S.optimal_score_multiclass,
        inverse=S.loss_corrected_score_multiclass,
        minimised_expected_loss=_entropy,
        grid_weight=GridWeight("B", 2, "B"),
        row_weight=lambda y, B: np.sum(B, axis=-1)[np.asarray(y)],
        exact="one_vs_rest",
        key=lambda params: entries_key("B", params["B"]),
    )
)
