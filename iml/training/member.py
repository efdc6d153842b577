"""One ensemble member: its train state, its pure train and evaluation steps, its epoch-end
bookkeeping, and the member-batched forms of its steps.

A :class:`MemberState` holds everything one member needs to train, be checkpointed and be
stopped; an ensemble is the same pytree with a leading member axis of size ``K`` on every leaf, so
it can be vmapped, sharded along a mesh axis and saved as one checkpoint. A member's step is a
pure function of its state and a batch (:func:`member_train_step`); :func:`end_of_epoch` applies
early stopping and plateau decay from the epoch's validation loss.

``K`` members step at once in one of three ways: :func:`batch_members` with ``jax.vmap`` (one
program in which every operation carries a member axis) or ``jax.lax.map`` (a loop over members
inside one compiled program), or :func:`member_in_place`, ``'loop'``: one compiled one-member
program called ``K`` times, each call updating its member of the stacked state in place. Which is
faster depends on the backend and on how the model lowers its convolutions under ``vmap``
(:data:`~iml.training.DEFAULT_MEMBER_BATCHING`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from flax import struct

from iml.models.small import weight_norm
from iml.spec import LossLike, LossSpec, loss_spec

Array = jax.Array
PyTree = Any

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "MemberState",
    "adam",
    "batch_members",
    "end_of_epoch",
    "init_member_state",
    "member_eval_step",
    "member_in_place",
    "member_predict",
    "member_train_step",
    "preprocess",
    "skip_idle_members",
    "tree_where",
]

# ImageNet channel statistics (RGB) on the [0, 1] scale; grayscale images use their means.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@struct.dataclass
class MemberState:
    """Train state of one ensemble member (or of ``K`` members, stacked on a leading axis).

    Attributes:
      params: model parameters being trained.
      batch_stats: BatchNorm running statistics that go with ``params``.
      opt_state: Adam's state (``optax.scale_by_adam``: count, first and second moments).
      lr: the member's current learning rate.
      best_params: parameters at the epoch of lowest validation loss (returned by early stopping).
      best_batch_stats: BatchNorm statistics at that epoch.
      best_val_loss: the lowest validation loss so far (``inf`` before the first epoch).
      best_epoch: the epoch (1-based) of ``best_val_loss``; 0 before the first improvement.
      bad_epochs: epochs since the validation loss last improved (early stopping counter).
      plateau_epochs: the same counter, reset when the learning rate is decayed.
      stopped: the member no longer changes (early-stopped or diverged).
      diverged: the member was stopped because its loss or gradients were not finite.
      stop_epoch: the epoch in which the member stopped, ``-1`` while it trains.
      step: optimiser steps taken.
      loss_sum: sum of the training losses of the current epoch's steps.
      loss_count: number of steps summed in ``loss_sum``.
    """

    params: PyTree
    batch_stats: PyTree
    opt_state: PyTree
    lr: Array
    best_params: PyTree
    best_batch_stats: PyTree
    best_val_loss: Array
    best_epoch: Array
    bad_epochs: Array
    plateau_epochs: Array
    stopped: Array
    diverged: Array
    stop_epoch: Array
    step: Array
    loss_sum: Array
    loss_count: Array


def tree_where(cond: Array, x: PyTree, y: PyTree) -> PyTree:
    """``jnp.where(cond, x, y)`` on every leaf of two pytrees of the same structure."""
    return jax.tree.map(lambda a, b: jnp.where(cond, a, b), x, y)


def init_member_state(
    variables: PyTree, optimizer: optax.GradientTransformation, lr: float
) -> MemberState:
    """The state of one member before its first step, from ``model.init``'s ``variables``
    (``'params'`` and optionally ``'batch_stats'``), the optimizer whose state it keeps (Adam
    without the learning rate) and its initial learning rate; its best parameters are these."""
    params = variables["params"]
    batch_stats = variables.get("batch_stats", {})
    return MemberState(
        params=params,
        batch_stats=batch_stats,
        opt_state=optimizer.init(params),
        lr=jnp.asarray(lr, jnp.float32),
        best_params=params,
        best_batch_stats=batch_stats,
        best_val_loss=jnp.asarray(jnp.inf, jnp.float32),
        best_epoch=jnp.asarray(0, jnp.int32),
        bad_epochs=jnp.asarray(0, jnp.int32),
        plateau_epochs=jnp.asarray(0, jnp.int32),
        stopped=jnp.asarray(False),
        diverged=jnp.asarray(False),
        stop_epoch=jnp.asarray(-1, jnp.int32),
        step=jnp.asarray(0, jnp.int32),
        loss_sum=jnp.asarray(0.0, jnp.float32),
        loss_count=jnp.asarray(0, jnp.int32),
    )


def end_of_epoch(
    state: MemberState,
    val_loss: Array,
    epoch: Array,
    *,
    patience: int,
    plateau_patience: int,
    lr_factor: float,
    min_delta: float = 0.0,
    min_rel_delta: float = 0.0,
    min_lr: float = 0.0,
) -> MemberState:
    """Early stopping and learning-rate decay of one member after an epoch's validation.

    The validation loss improves when it falls below ``best_val_loss - min_delta -
    min_rel_delta * |best_val_loss|`` (any finite loss improves on the first epoch); the member
    then keeps its current parameters as its best. After ``plateau_patience`` epochs without
    improvement its learning rate is multiplied by ``lr_factor`` (0.1 in the paper: "decayed by a
    factor of 10 each time the validation loss plateaus"), but not below ``min_lr``; after
    ``patience`` epochs without improvement it stops. A non-finite validation loss stops it as
    diverged. A stopped member is returned unchanged.

    Args:
      state: the member's state after the epoch's training steps.
      val_loss: its mean validation loss (scalar).
      epoch: the index of the epoch just finished (scalar int).
      patience: epochs without improvement before early stopping.
      plateau_patience: epochs without improvement before the learning rate is decayed.
      lr_factor: multiplier of the learning rate on a plateau.
      min_delta: the least decrease that counts as an improvement.
      min_rel_delta: the least decrease, as a fraction of the best loss, that counts as one.
      min_lr: the floor of the decayed learning rate (0: none, the paper's schedule); a rate
        already below it is left as it is.

    Returns:
      The updated state, with the epoch's training-loss accumulators reset.
    """
    val_loss = jnp.asarray(val_loss, jnp.float32)
    live = ~state.stopped
    finite = jnp.isfinite(val_loss)
    best = state.best_val_loss
    threshold = jnp.where(
        jnp.isfinite(best), best - min_delta - min_rel_delta * jnp.abs(best), jnp.inf
    )
    improved = live & finite & (val_loss < threshold)
    bad = jnp.where(improved, 0, state.bad_epochs + 1)
    plateau = jnp.where(improved, 0, state.plateau_epochs + 1)
    decay = plateau >= plateau_patience
    diverged = state.diverged | (live & ~finite)
    stopped = state.stopped | diverged | (live & (bad >= patience))
    updated = state.replace(
        best_params=tree_where(improved, state.params, state.best_params),
        best_batch_stats=tree_where(improved, state.batch_stats, state.best_batch_stats),
        best_val_loss=jnp.where(improved, val_loss, state.best_val_loss),
        best_epoch=jnp.where(improved, jnp.asarray(epoch, jnp.int32) + 1, state.best_epoch),
        bad_epochs=bad,
        plateau_epochs=jnp.where(decay, 0, plateau),
        lr=jnp.where(
            decay, jnp.maximum(state.lr * lr_factor, jnp.minimum(min_lr, state.lr)), state.lr
        ),
        diverged=diverged,
        stopped=stopped,
    )
    updated = tree_where(live, updated, state)
    # A member stopped during the epoch's steps (diverged) is dated here too.
    newly_stopped = updated.stopped & (state.stop_epoch < 0)
    return updated.replace(
        stop_epoch=jnp.where(newly_stopped, jnp.asarray(epoch, jnp.int32), state.stop_epoch),
        loss_sum=jnp.zeros_like(state.loss_sum),
        loss_count=jnp.zeros_like(state.loss_count),
    )


def adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> optax.GradientTransformation:
    """Adam's moment scaling without the learning rate, which each member holds in its state."""
    return optax.scale_by_adam(b1=b1, b2=b2, eps=eps)


def preprocess(images: Array, flips: Array | None, normalize: str) -> Array:
    """Scales images to ``[0, 1]``, flips the marked ones horizontally, and normalises them.

    Args:
      images: ``[n, H, W, C]``, ``uint8`` in ``[0, 255]`` or floating point in ``[0, 1]``; or
        feature rows ``[n, d]`` (floating point, taken as they are with ``normalize='none'``).
      flips: ``[n]`` booleans, ``True`` where an image is mirrored left-right; ``None`` for none.
      normalize: ``'imagenet'`` (subtract the ImageNet channel means, divide by the standard
        deviations; a one-channel image uses their averages) or ``'none'``.

    Returns:
      ``float32`` images ``[n, H, W, C]``.
    """
    x = images.astype(jnp.float32)
    if images.dtype == jnp.uint8:
        x = x / 255.0
    if flips is not None and x.ndim == 4:  # feature rows [n, d] have nothing to flip
        x = jnp.where(flips[:, None, None, None], x[:, :, ::-1, :], x)
    if normalize == "imagenet":
        channels = x.shape[-1]
        mean = jnp.asarray(IMAGENET_MEAN, jnp.float32)
        std = jnp.asarray(IMAGENET_STD, jnp.float32)
        if channels != 3:
            mean, std = jnp.full((channels,), mean.mean()), jnp.full((channels,), std.mean())
        x = (x - mean) / std
    return x


def _logits(out: Array) -> Array:
    # A binary head has one output per image; drop that axis so logits align with labels.
    return out[..., 0] if out.ndim == 2 and out.shape[-1] == 1 else out


def _labels(labels: Array, loss: LossSpec) -> Array:
    # Batches of labels arrive as float32; a multiclass loss indexes by class.
    return labels.astype(jnp.int32) if loss.multiclass else labels


def _all_finite(tree: Any) -> Array:
    leaves = jax.tree.leaves(tree)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in leaves]))


def member_train_step(
    model: nn.Module,
    optimizer: optax.GradientTransformation,
    state: MemberState,
    images: Array,
    labels: Array,
    flips: Array,
    active: Array,
    loss: LossLike,
    weights: Array | None = None,
    *,
    normalize: str = "imagenet",
    l2: float | Array = 0.0,
) -> MemberState:
    """One Adam step of one member on its loss (the beta-weighted cross-entropy, eq.
    ``b-loss-bin``, for a beta: :meth:`iml.LossSpec.logits_loss`).

    Args:
      model: a linen module called as ``model.apply(variables, x, train=True,
        mutable=['batch_stats'])`` and returning logits ``[n, 1]`` or ``[n]`` (binary losses) or
        ``[n, classes]`` (multiclass losses).
      optimizer: :func:`adam`, whose update is scaled by ``-state.lr``.
      images: ``[n, H, W, C]`` batch.
      labels: ``[n]`` labels in ``{0, 1}`` (or soft labels in ``[0, 1]``), or class indices for
        a multiclass loss.
      flips: ``[n]`` booleans for horizontal flips.
      active: scalar; ``False`` leaves the state unchanged (a member out of batches this epoch).
      loss: the member's loss: a :class:`iml.LossSpec` (under :func:`batch_members`, the
        members' specifications stacked) or anything :func:`iml.loss_spec` reads.
      weights: optional ``[n]`` non-negative row weights; the step's loss is then
        ``sum w_i L_i / max(sum w_i, 1)``, else the mean over the batch.
      normalize: see :func:`preprocess`.
      l2: coefficient of ``l2 / 2 * ||W||^2`` added to the loss (:func:`iml.models.weight_norm`:
        the weights, not the biases); a number, or the member's own (a scalar array under
        ``vmap``).

    Returns:
      The new state. Unchanged where the member is stopped or inactive; marked diverged and
      stopped, parameters unchanged, where the loss or a gradient is not finite.
    """
    x = preprocess(images, flips, normalize)
    loss = loss_spec(loss)

    def loss_fn(params):
        out, updates = model.apply(
            {"params": params, "batch_stats": state.batch_stats},
            x,
            train=True,
            mutable=["batch_stats"],
        )
        values = loss.logits_loss(_logits(out), _labels(labels, loss))
        if weights is None:
            value = jnp.mean(values)
        else:
            value = jnp.sum(weights * values) / jnp.maximum(jnp.sum(weights), 1.0)
        if not (isinstance(l2, int | float) and l2 == 0):  # a number, or each member's array
            value = value + 0.5 * l2 * weight_norm(params)
        return value, updates.get("batch_stats", {})

    (value, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    live = active & ~state.stopped
    finite = jnp.isfinite(value) & _all_finite(grads)

    def apply() -> MemberState:
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(
            params=state.params, updates=jax.tree.map(lambda u: -state.lr * u, updates)
        )
        return state.replace(
            params=params,
            batch_stats=batch_stats,
            opt_state=opt_state,
            step=state.step + 1,
            loss_sum=state.loss_sum + value,
            loss_count=state.loss_count + 1,
        )

    # The Adam step is inside a cond on live & finite rather than a select of every leaf: XLA
    # compiles DenseNet-121's step several times faster that way on the CPU, and the step runs
    # as fast.
    new = jax.lax.cond(live & finite, apply, lambda: state)
    diverged = live & ~finite
    return new.replace(diverged=new.diverged | diverged, stopped=new.stopped | diverged)


def member_eval_step(
    model: nn.Module,
    state: MemberState,
    images: Array,
    labels: Array,
    weights: Array,
    loss: LossLike,
    *,
    normalize: str = "imagenet",
) -> tuple[Array, Array]:
    """The weighted sum of one member's validation losses on a batch, BatchNorm in eval mode.

    Args:
      model: as in :func:`member_train_step`.
      state: the member's state; its current ``params`` and ``batch_stats`` are evaluated.
      images: ``[n, H, W, C]`` batch (not flipped).
      labels: ``[n]`` labels.
      weights: ``[n]`` weights, 0 on the padding that fills the last batch.
      normalize: see :func:`preprocess`.

    Returns:
      ``(sum of weight * loss, sum of weights)``, to be summed over batches and divided.
    """
    x = preprocess(images, None, normalize)
    out = model.apply({"params": state.params, "batch_stats": state.batch_stats}, x, train=False)
    loss = loss_spec(loss)
    values = loss.logits_loss(_logits(out), _labels(labels, loss))
    # Padding may hold any image; where() keeps a non-finite padded loss out of the sum.
    return jnp.sum(jnp.where(weights > 0, weights * values, 0.0)), jnp.sum(weights)


def member_predict(
    model: nn.Module, state: MemberState, images: Array, *, normalize: str = "imagenet"
) -> Array:
    """Logits of one member's best parameters (early stopping's), BatchNorm in eval mode."""
    x = preprocess(images, None, normalize)
    variables = {"params": state.best_params, "batch_stats": state.best_batch_stats}
    return _logits(model.apply(variables, x, train=False))


def batch_members(step: Callable[..., Any], member_batching: str) -> Callable[..., Any]:
    """Turns a one-member function into a function of ``K`` members stacked on axis 0.

    Args:
      step: a function whose positional arguments all carry the member (state, batch arrays,
        loss), e.g. :func:`member_train_step` with the model bound.
      member_batching: ``'vmap'`` (``jax.vmap``: one program over all members at once) or
        ``'map'`` (``jax.lax.map``: members one after another inside one compiled program).

    Returns:
      The member-batched function; every argument and output gains a leading member axis.
    """
    if member_batching == "vmap":
        return jax.vmap(step)
    if member_batching == "map":
        return lambda *args: jax.lax.map(lambda a: step(*a), args)
    raise ValueError(f"member_batching must be 'vmap' or 'map', got {member_batching!r}")


def skip_idle_members(step: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`member_train_step` (model and optimiser bound) that skips the work of idle members.

    A member that is stopped or inactive (no batch this step) comes back unchanged, as from
    ``step`` itself, but through ``jax.lax.cond``, so its forward and backward passes are not
    computed. Worth it where members run one after another (``'map'``, ``'loop'``); under
    ``jax.vmap`` the condition becomes a select that computes both branches.
    """

    def stepped(state: MemberState, *batch: Any) -> MemberState:
        _, _, _, active, _ = batch  # images, labels, flips, active, loss
        return jax.lax.cond(active & ~state.stopped, step, lambda state, *_: state, state, *batch)

    return stepped


def member_in_place(step: Callable[..., Any]) -> Callable[..., Any]:
    """A one-member step applied to member ``i`` of member-stacked arguments, in place.

    Args:
      step: a function ``step(state, *batch) -> state`` of one member.

    Returns:
      ``f(states, *batches, i) -> states``: member ``i`` of every argument (leading axis) is
      taken, stepped, and written back into ``states``. Jitted with ``states`` donated, the
      write-back reuses the buffers, so ``K`` calls cost about ``K`` one-member steps.
    """

    def take(tree: Any, i: Array) -> Any:
        return jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, i, keepdims=False), tree)

    def stepped(states: Any, *args: Any) -> Any:
        *batch, i = args
        new = step(take(states, i), *take(tuple(batch), i))
        return jax.tree.map(
            lambda a, n: jax.lax.dynamic_update_index_in_dim(a, n, i, 0), states, new
        )

    return stepped
