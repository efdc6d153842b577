"""The ``K`` binary losses of the models compared: read from anything :func:`iml.loss_spec`
reads (one batched :class:`iml.LossSpec` where they stack, else a list), and evaluated for every
model at once: the minimised expected loss ``l*_k`` and the loss-corrected scores
``(c^{L_k})^{-1}``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from iml.calibration._checks import as_float
from iml.spec import LossLike, LossSpec, loss_spec

Array = jax.Array


def as_losses(losses: LossLike | Sequence[LossLike], n_models: int) -> LossSpec | list[LossSpec]:
    """``K`` binary losses: one batched :class:`LossSpec` where they stack, else a list."""
    if _is_one_loss(losses):
        specs = loss_spec(losses)
        if specs.multiclass:
            raise ValueError(f"losses must be binary losses; got the {specs.describe()}")
        if specs.batch_shape != (n_models,):
            raise ValueError(
                f"losses must give one loss per model (batch shape ({n_models},)); got batch "
                f"shape {specs.batch_shape}"
            )
        return specs
    if isinstance(losses, np.ndarray | jax.Array):
        return as_losses(loss_spec(losses), n_models)
    specs = [loss_spec(loss) for loss in losses]
    if len(specs) != n_models:
        raise ValueError(f"losses must give one loss per model ({n_models}); got {len(specs)}")
    for k, spec in enumerate(specs):
        if spec.multiclass or spec.batch_shape:
            raise ValueError(f"losses[{k}] must be one binary loss; got the {spec.describe()}")
    structures = {jax.tree.structure(spec) for spec in specs}
    if len(structures) == 1:
        return jax.tree.map(lambda *x: jnp.stack([jnp.asarray(v) for v in x]), *specs)
    return specs


def _is_one_loss(losses: object) -> bool:
    """Whether ``losses`` is one :func:`iml.loss_spec` argument rather than a sequence of them."""
    return isinstance(losses, LossSpec | str | Mapping) or not isinstance(
        losses, Sequence | np.ndarray | jax.Array
    )


def loss_count(losses: object) -> int | None:
    """How many losses ``losses`` gives, or ``None`` for one unbatched loss."""
    if isinstance(losses, np.ndarray | jax.Array):
        return np.shape(losses)[0] if np.ndim(losses) == 1 else None
    if not _is_one_loss(losses):
        return len(losses)
    shape = loss_spec(losses).batch_shape
    return shape[0] if len(shape) == 1 else None


def minimised_losses(losses: LossSpec | list[LossSpec], gamma: Array) -> Array:
    """``l*_k(gamma)`` for every loss ``k``, on a new last axis: ``[*gamma.shape, K]``."""
    if isinstance(losses, LossSpec):
        return jax.vmap(LossSpec.minimised_expected_loss, in_axes=(0, None), out_axes=-1)(
            losses, gamma
        )
    return jnp.stack([spec.minimised_expected_loss(gamma) for spec in losses], axis=-1)


def loss_corrected(losses: LossSpec | list[LossSpec], scores: Array) -> Array:
    """``(c^{L_k})^{-1}(a_k)`` for every model ``[K, N]``; the score itself where not invertible."""
    a = as_float(scores)
    if isinstance(losses, LossSpec):
        g = jax.vmap(LossSpec.loss_corrected_score)(losses, a)
    else:
        g = jnp.stack([spec.loss_corrected_score(x) for spec, x in zip(losses, a, strict=True)])
    return jnp.clip(jnp.where(jnp.isnan(g), a, g), 0.0, 1.0)
