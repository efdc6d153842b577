"""The ``K`` losses of the models compared, binary or of ``n`` classes: read from anything
:func:`iml.loss_spec` reads (one batched :class:`iml.LossSpec` where they stack, else a list),
and evaluated for every model at once: the minimised expected loss ``l*_k`` and the
loss-corrected scores ``(c^{L_k})^{-1}`` (Proposition 4), one posterior per class for a
multiclass loss."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from iml.calibration._checks import as_float
from iml.spec import LossLike, LossSpec, loss_spec

Array = jax.Array


def as_losses(
    losses: LossLike | Sequence[LossLike], n_models: int, n_classes: int | None = None
) -> LossSpec | list[LossSpec]:
    """``K`` losses: one batched :class:`LossSpec` where they stack, else a list.

    Binary losses (positive-class scores ``[...]``) by default; with ``n_classes``, losses of
    class scores ``[..., n_classes]`` (classes last), which includes two-class losses of a
    class axis such as the class-weighted softmax with two weights.

    Raises:
      ValueError: naming ``losses``, for a count other than ``n_models`` or a loss of the
        wrong kind.
    """
    if _is_one_loss(losses):
        specs = loss_spec(losses)
        _check_kind("losses", specs, n_classes)
        if specs.batch_shape != (n_models,):
            raise ValueError(
                f"losses must give one loss per model (batch shape ({n_models},)); got batch "
                f"shape {specs.batch_shape}"
            )
        return specs
    if isinstance(losses, np.ndarray | jax.Array):
        return as_losses(loss_spec(losses), n_models, n_classes)
    specs = [loss_spec(loss) for loss in losses]
    if len(specs) != n_models:
        raise ValueError(f"losses must give one loss per model ({n_models}); got {len(specs)}")
    for k, spec in enumerate(specs):
        if spec.batch_shape:
            raise ValueError(f"losses[{k}] must be one loss; got the {spec.describe()}")
        _check_kind(f"losses[{k}]", spec, n_classes)
    structures = {jax.tree.structure(spec) for spec in specs}
    if len(structures) == 1:
        return jax.tree.map(lambda *x: jnp.stack([jnp.asarray(v) for v in x]), *specs)
    return specs


def has_class_axis(spec: LossSpec) -> bool:
    """Whether ``spec``'s scores and posteriors carry a class axis (``[..., n]``)."""
    return spec.record.multiclass


def _check_kind(name: str, spec: LossSpec, n_classes: int | None) -> None:
    if n_classes is None and has_class_axis(spec):
        raise ValueError(f"{name} must be binary losses; got the {spec.describe()}")
    if n_classes is not None and (not has_class_axis(spec) or spec.n_classes != n_classes):
        raise ValueError(
            f"{name} must be losses of {n_classes} class scores [..., {n_classes}]; got the "
            f"{spec.describe()}"
        )


def _is_one_loss(losses: object) -> bool:
    """Whether ``losses`` is one :func:`iml.loss_spec` argument rather than a sequence of them."""
    return isinstance(losses, LossSpec | str | Mapping) or not isinstance(
        losses, Sequence | np.ndarray | jax.Array
    )


def loss_count(losses: object) -> int | None:
    """How many losses ``losses`` gives, or ``None`` for one unbatched loss."""
    if isinstance(losses, np.ndarray | jax.Array) and np.ndim(losses) <= 1:
        return np.shape(losses)[0] if np.ndim(losses) == 1 else None
    if isinstance(losses, np.ndarray | jax.Array):  # a matrix B, or a stack of them
        shape = loss_spec(losses).batch_shape
        return shape[0] if len(shape) == 1 else None
    if not _is_one_loss(losses):
        return len(losses)
    shape = loss_spec(losses).batch_shape
    return shape[0] if len(shape) == 1 else None


def minimised_losses(losses: LossSpec | list[LossSpec], gamma: Array) -> Array:
    """``l*_k(gamma)`` for every loss ``k``, on a new last axis: ``[*gamma.shape, K]`` for
    binary posteriors, ``[*gamma.shape[:-1], K]`` for class posteriors ``[..., n]``."""
    if isinstance(losses, LossSpec):
        return jax.vmap(LossSpec.minimised_expected_loss, in_axes=(0, None), out_axes=-1)(
            losses, gamma
        )
    return jnp.stack([spec.minimised_expected_loss(gamma) for spec in losses], axis=-1)


def loss_corrected(losses: LossSpec | list[LossSpec], scores: Array) -> Array:
    """``(c^{L_k})^{-1}(a_k)`` for every model, ``[K, N]`` (binary) or ``[K, N, n]`` (one
    posterior per class, not renormalised: the B-weighted loss's need not sum to one); the
    score itself where not invertible, clipped to ``[0, 1]``."""
    a = as_float(scores)
    if isinstance(losses, LossSpec):
        g = jax.vmap(LossSpec.loss_corrected_score)(losses, a)
    else:
        g = jnp.stack([spec.loss_corrected_score(x) for spec, x in zip(losses, a, strict=True)])
    return jnp.clip(jnp.where(jnp.isnan(g), a, g), 0.0, 1.0)
