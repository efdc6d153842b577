"""The ensemble trainer on one in-memory table: thousands of small members as one program.

This is how the sweeps (:mod:`iml.pipeline.sweep`) train: for every loss of a grid
(:func:`iml.loss_grid`), every seed and every rotation of the nested cross-validation
(:mod:`iml.data.folds`), one member of a Flax model (:mod:`iml.models.small`: logistic regression
or a one-hidden-layer MLP) is trained on the rotation's training rows under its own loss
(:meth:`iml.LossSpec.logits_loss`). It is the ensemble trainer configured for a table
(:data:`TABULAR_DEFAULTS`, a :class:`~iml.training.TrainConfig`): every member is the trainer's
:class:`~iml.training.member.MemberState` (its own Adam moments, learning rate and best
parameters), steps by the trainer's :func:`~iml.training.member.member_train_step`, is validated by
:func:`~iml.training.member.member_eval_step`, and ends each epoch with
:func:`~iml.training.member.end_of_epoch` (plateau decay, early stopping on its own
validation loss, the paper's rule).

What differs from the image ensembles of :mod:`iml.training.trainer` is only where batches come
from. There every member streams its own image batches from the host; here the whole table lives
on the device, an epoch is one jitted ``lax.scan`` over minibatches, and the
``K = n_seeds x n_losses x n_rotations`` members, on axes ``[seed, loss, rotation]``, share each
minibatch's rows: all members of a seed share the minibatch order and initialisation (common
random numbers across losses and rotations), and a rotation's training mask weights the rows
that count for its members. Nested ``jax.vmap`` then turns small dense models into batched
matrix products, which is what makes thousands of members cheap.

Under the beta-weighted log loss the logistic members are convex problems, and the default solver
fits each to its optimum instead (:func:`fit_weighted_logistic`). Early-stopped minibatch Adam
stops where the validation loss stops falling, and where the weighted loss is nearly flat (a small
``beta`` on a rare class) that can be far from the optimum: the scores are then not
loss-calibrated (Definition 2) and no correction can make them calibrated. The exact solver runs
Newton's method (:func:`iml.recalibration.logistic_newton`) on the full batch, for every member at
once, until the gradient's largest entry is below a tolerance. Member ``k`` minimises

    f_k(w, b) = sum_i s_ki l(y_i, x_i . w + b) + (l2 / 2) ||w||^2,

with ``l`` the log loss on logits and ``s_ki >= 0`` its sample weights: for the beta-weighted
cross-entropy of eq. ``b-loss-bin`` over a member's training rows, ``s_ki = beta_k`` for a
positive and ``1 - beta_k`` for a negative training row, ``0`` elsewhere, divided by the number of
training rows (:func:`beta_weighted_sample_weights`). Members share the design ``x``, and with it
the table of products of feature pairs (``N`` floats for each of the ``(d+1)(d+2)/2`` pairs that
is nonzero in some row, made once where it takes at most 2 GiB): the ``[d+1, d+1]`` Hessians of a
chunk of members are then one matrix product with that table, and without it are formed from the
design (memory ``chunk x N x d``). A sweep's betas form a path: each member starts from the
solution at the neighbouring beta, its intercept moved by the difference of ``logit(beta)``, and
needs a third as many Newton steps as from a cold start (:func:`fit_weighted_logistic`).

The B-weighted log loss of eq. ``b-loss-multi`` (one sigmoid per class) is convex in a logistic
model's parameters too, and splits by class: output ``c`` is the logistic regression of ``1{y =
c}`` in which row ``i`` weighs ``B[y_i, c]``, so the same solver fits it, one class at a time for
every loss and rotation at once. The class-weighted softmax cross-entropy of a logistic model is
multinomial logistic regression with row ``i`` weighted ``w[y_i]``, also convex: each member is
one multinomial Newton fit (:func:`iml.recalibration.softmax_newton`), whose ``[(d+1) n, (d+1)
n]`` Hessian for ``n`` classes is formed from the design at every step.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from numpy.typing import ArrayLike

from iml import _validation as V
from iml.data.folds import FoldSplit
from iml.models.small import LogisticRegression
from iml.recalibration import NewtonFit, logistic_newton, softmax_newton
from iml.spec import LossGrid, LossLike, LossSpec, loss_grid
from iml.training.member import (
    MemberState,
    adam,
    init_member_state,
    member_eval_step,
    member_train_step,
)
from iml.training.trainer import TrainConfig

Array = jax.Array

__all__ = [
    "TABULAR_DEFAULTS",
    "LogisticFit",
    "MemberFit",
    "beta_weighted_sample_weights",
    "check_labels",
    "check_table_config",
    "exact_solver_applies",
    "fit_weighted_logistic",
    "out_of_fold_logits",
    "train_tabular",
]

TABULAR_DEFAULTS = TrainConfig(
    learning_rate=0.01,
    batch_size=512,
    eval_batch_size=1024,
    plateau_patience=2,
    min_rel_delta=1e-4,
    flip=False,
    normalize="none",
)
"""The trainer's configuration for a table's small models: Adam at 0.01 on minibatches of 512 rows
shared by the members of a seed, the learning rate divided by 10 after 2 epochs without a relative
improvement of 1e-4, early stopping after 5, validation in blocks of 1,024 rows; no image flips or
normalisation. The default of :func:`train_tabular` and of the sweeps."""


# Member axes are [seed, loss, rotation] (along the loss axis, the losses of a batched LossSpec).
# Minibatch rows are shared by the members of a seed; rows and labels are shared across losses
# and rotations, training masks differ per rotation. The functions vmapped are the trainer's own
# one-member steps (iml.training.member), with every argument but the state and the loss shared
# where the members share it.
def _vmap_train(f: Callable) -> Callable:
    f = jax.vmap(f, in_axes=(0, None, None, 0, None))  # rotation
    f = jax.vmap(f, in_axes=(0, None, None, None, 0))  # loss
    return jax.vmap(f, in_axes=(0, 0, 0, 0, None))  # seed


# Validation and test rows are gathered per rotation and shared across seeds and losses.
def _vmap_eval(f: Callable) -> Callable:
    f = jax.vmap(f, in_axes=(0, 0, 0, 0, None))  # rotation
    f = jax.vmap(f, in_axes=(0, None, None, None, 0))  # loss
    return jax.vmap(f, in_axes=(0, None, None, None, None))  # seed


def _vmap_predict(f: Callable) -> Callable:
    return jax.vmap(jax.vmap(jax.vmap(f, in_axes=(0, 0)), in_axes=(0, None)), in_axes=(0, None))


# ----------------------------------------------------------------------------------------------
# The vectorized program
# ----------------------------------------------------------------------------------------------


class _Data(NamedTuple):
    x: Array  # [N, d] float32
    y: Array  # [N] float32 (binary) or int32 class indices
    train_mask: Array  # [R, N] float32
    val_idx: Array  # [R, n_blocks, block] int32
    val_weight: Array  # [R, n_blocks, block] float32 (0 for padding)
    losses: LossSpec  # batched: batch_shape [nb]
    seeds: Array  # [S] uint32


def _init_state(model: nn.Module, config: TrainConfig, data: _Data) -> MemberState:
    """Every member's :class:`~iml.training.member.MemberState`, on axes ``[S, nb, R]``."""
    n_seeds, n_rot = data.seeds.shape[0], data.train_mask.shape[0]
    (n_losses,) = data.losses.batch_shape
    optimizer = adam(config.b1, config.b2, config.eps)

    def per_seed(seed: Array) -> MemberState:
        # The key of train_ensemble's member of this seed: the same initial parameters.
        variables = model.init(jax.random.key(seed), data.x[:1], train=False)
        return init_member_state(variables, optimizer, config.learning_rate)

    # Common random numbers: all losses and rotations of a seed start from the same point.
    states = jax.vmap(per_seed)(data.seeds)
    return jax.tree.map(
        lambda a: jnp.broadcast_to(a[:, None, None], (n_seeds, n_losses, n_rot, *a.shape[1:])),
        states,
    )


def _validation_losses(model: nn.Module, state: MemberState, data: _Data) -> Array:
    """Every member's mean loss on its rotation's validation rows: ``[S, nb, R]``."""
    evaluate = _vmap_eval(functools.partial(member_eval_step, model, normalize="none"))

    def body(total: tuple[Array, Array], block: tuple[Array, Array]):
        i, w = block  # [R, block]
        loss_sum, weight_sum = evaluate(state, data.x[i], data.y[i], w, data.losses)
        return (total[0] + loss_sum, total[1] + weight_sum), None

    zeros = jnp.zeros(state.lr.shape)
    blocks = (jnp.swapaxes(data.val_idx, 0, 1), jnp.swapaxes(data.val_weight, 0, 1))
    (loss_sum, weight_sum), _ = jax.lax.scan(body, (zeros, zeros), blocks)
    return loss_sum / jnp.maximum(weight_sum, 1.0)


@functools.lru_cache(maxsize=16)
def _epoch_fn(
    model: nn.Module, config: TrainConfig, n_rows: int
) -> Callable[[MemberState, _Data, Array], MemberState]:
    """The jitted epoch: a scan over minibatch steps of the trainer's
    :func:`~iml.training.member.member_train_step`, every member's validation by its
    :func:`~iml.training.member.member_eval_step`, then its
    :func:`~iml.training.member.end_of_epoch` (early stopping and plateau decay)."""
    optimizer = adam(config.b1, config.b2, config.eps)
    steps = -(-n_rows // config.batch_size)
    padded = steps * config.batch_size

    def one_step(state: MemberState, x: Array, y: Array, weights: Array, loss: LossSpec):
        # A minibatch holding none of the member's training rows is no step for it.
        active = jnp.sum(weights) > 0
        return member_train_step(
            model, optimizer, state, x, y, None, active, loss, weights,
            normalize="none", l2=config.l2,
        )  # fmt: skip

    train = _vmap_train(one_step)
    finish = config.epoch_end_rule()
    for _ in range(3):  # member axes [seed, loss, rotation]; the epoch is shared
        finish = jax.vmap(finish, in_axes=(0, 0, None))

    def step(state: MemberState, batch: tuple[Array, Array], data: _Data):
        idx, valid = batch  # [S, B]
        # weights[s, r, b]: row idx[s, b] is a (real) training row of rotation r.
        weights = jnp.swapaxes(data.train_mask[:, idx], 0, 1) * valid[:, None, :]
        return train(state, data.x[idx], data.y[idx], weights, data.losses), None

    @jax.jit
    def epoch(state: MemberState, data: _Data, epoch_index: Array) -> MemberState:
        def order(seed: Array) -> Array:
            key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), 1), epoch_index)
            return jax.random.permutation(key, n_rows)

        perm = jax.vmap(order)(data.seeds)  # [S, N]
        perm = jnp.pad(perm, ((0, 0), (0, padded - n_rows)))
        valid = jnp.broadcast_to(jnp.arange(padded) < n_rows, perm.shape).astype(jnp.float32)
        batches = (
            jnp.swapaxes(perm.reshape(-1, steps, config.batch_size), 0, 1),
            jnp.swapaxes(valid.reshape(-1, steps, config.batch_size), 0, 1),
        )
        state, _ = jax.lax.scan(functools.partial(step, data=data), state, batches)
        return finish(state, _validation_losses(model, state, data), epoch_index)

    return epoch


@functools.partial(jax.jit, static_argnums=0)
def _test_logits(model: nn.Module, variables: Any, x: Array, idx: Array) -> Array:
    """Logits of every member (``variables`` stacked on ``[S, nb, R]``) on its rotation's
    (padded) test rows: ``[S, nb, R, T(, n)]``."""

    def one(v: Any, rows: Array) -> Array:
        return model.apply(v, rows, train=False)

    logits = _vmap_predict(one)

    def body(carry: None, i: Array) -> tuple[None, Array]:
        return None, logits(variables, x[i])  # [S, nb, R, block]

    _, out = jax.lax.scan(body, None, jnp.swapaxes(idx, 0, 1))
    return jnp.moveaxis(out, 0, 3).reshape(*out.shape[1:4], -1, *out.shape[5:])


def _blocked(indices: Sequence[np.ndarray], block: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-rotation index lists padded to a multiple of ``block``: ``[R, n_blocks, block]``."""
    longest = max(len(i) for i in indices)
    # A power of two at least as long as the longest list (up to ``block``), so that nearby
    # fold sizes share one compiled program.
    block = max(1, min(block, 1 << max(0, longest - 1).bit_length()))
    n_blocks = max(1, -(-longest // block))
    idx = np.zeros((len(indices), n_blocks * block), np.int32)
    weight = np.zeros(idx.shape, np.float32)
    for r, i in enumerate(indices):
        idx[r, : len(i)] = i
        weight[r, : len(i)] = 1.0
    return idx.reshape(len(indices), n_blocks, block), weight.reshape(len(indices), n_blocks, block)


class MemberFit(NamedTuple):
    """Members trained together, on axes ``[seed, loss, rotation]``.

    Attributes:
      params: the best parameters of every member (a dict of stacked arrays).
      best_val: each member's best validation loss.
      best_epoch: the epoch (1-based) of that loss (Newton steps, for the exact solver).
      epochs_run: epochs the program ran (until every member stopped or ``max_epochs``; the
        most Newton steps of any member, for the exact solver).
      test_logits: logits of each member on its rotation's test rows, ``[S, nb, R, T]``
        (rotation ``r``'s rows are ``splits[r].test``; entries past its length are padding).
    """

    params: dict[str, np.ndarray]
    best_val: np.ndarray
    best_epoch: np.ndarray
    epochs_run: int
    test_logits: np.ndarray


def check_labels(labels: ArrayLike, n: int, losses: LossSpec) -> np.ndarray:
    y = np.asarray(labels)
    V.check_shape("labels", y, (n,))
    if not losses.multiclass:
        if not np.isin(y, (0, 1)).all():
            raise ValueError("labels must be 0 or 1 (the losses are binary)")
        if y.min() == y.max():
            raise ValueError("labels hold a single class; both 0 and 1 are needed")
        return y.astype(np.int32)
    k = losses.n_classes
    if y.dtype.kind not in "iu" and not np.array_equal(y, np.round(y)):
        raise ValueError("labels must be class indices (integers)")
    if y.size and (y.min() < 0 or y.max() >= k):
        raise ValueError(f"labels must be class indices in [0, {k}) for the {k}-class losses")
    return y.astype(np.int32)


def check_table_config(config: TrainConfig, name: str = "config") -> None:
    """Check that ``config`` (the argument ``name``) is a :class:`TrainConfig` a table can take:
    no image flips or normalisation.

    Raises:
      ValueError: naming ``name`` and what is wrong.
    """
    if not isinstance(config, TrainConfig):
        raise ValueError(f"{name} must be a TrainConfig, got {type(config).__name__}")
    if config.flip or config.normalize != "none":
        raise ValueError(
            f"{name}.flip and {name}.normalize apply to images; a table's config sets "
            "flip=False, normalize='none' (as TABULAR_DEFAULTS does)"
        )


def exact_solver_applies(model: nn.Module, losses: LossSpec) -> bool:
    """Whether the exact solver fits ``model`` under ``losses``: logistic regression under the
    beta-weighted log loss, under the B-weighted log loss (one sigmoid per class, eq.
    ``b-loss-multi``), which splits into one weighted logistic regression per class, or under the
    class-weighted softmax cross-entropy (multinomial logistic regression). All are convex
    problems."""
    if not isinstance(model, LogisticRegression):
        return False
    if losses.kind == "weighted":
        return losses.base == "log"
    return losses.kind in ("matrix", "class_weighted")


def _check_model(model: nn.Module, x: np.ndarray, losses: LossSpec) -> None:
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a Flax module, got {type(model).__name__}")
    want = (2, losses.n_classes) if losses.multiclass else (2,)

    def logits(rows: Array) -> Array:
        return model.init_with_output(jax.random.key(0), rows, train=False)[0]

    got = jax.eval_shape(logits, jax.ShapeDtypeStruct((2, x.shape[1]), jnp.float32)).shape
    if got != want:
        raise ValueError(
            f"model returns logits of shape {got} on 2 rows; the {losses.describe()} needs "
            f"{want} (a small model's n_outputs: 1 for a binary loss, the classes otherwise)"
        )


def train_tabular(
    model: nn.Module,
    features: ArrayLike,
    labels: ArrayLike,
    splits: Sequence[FoldSplit],
    losses: LossLike | LossGrid,
    seeds: ArrayLike,
    config: TrainConfig = TABULAR_DEFAULTS,
    *,
    progress: bool | str = False,
) -> MemberFit:
    """Train ``len(seeds) x len(losses) x len(splits)`` members of ``model`` on one table.

    Member ``(s, b, r)`` minimises loss ``b`` of the grid (for a beta, the beta-weighted
    cross-entropy, eq. ``b-loss-bin``) over the training rows of ``splits[r]``. With the exact
    solver (by default where it applies: logistic regression under the beta-weighted or the
    B-weighted log loss or the class-weighted softmax cross-entropy,
    :func:`exact_solver_applies`) every member is fitted to its optimum by
    full-batch Newton steps, and all seeds share it.
    Otherwise the members train by the ensemble trainer's steps
    (:func:`~iml.training.member.member_train_step`, each member's own Adam state and learning
    rate, :func:`~iml.training.member.end_of_epoch`'s plateau decay and early stopping on
    its validation rows): member ``(s, b, r)`` starts from the initialisation and follows the
    minibatch order of ``seeds[s]``. Members are independent: training one alone (one loss, seed
    and split) gives the same parameters.

    Args:
      model: a Flax module on rows ``[n, d]``, e.g. :func:`iml.models.build_small_model`;
        ``[n]`` logits for a binary loss, ``[n, classes]`` for a multiclass one.
      features: ``[N, d]`` inputs.
      labels: ``[N]`` labels in ``{0, 1}``, or class indices for multiclass losses.
      splits: rotations of the nested cross-validation (:func:`iml.data.nested_cv_splits`).
      losses: ``[nb]`` class weights in ``(0, 1)``, or any grid :func:`loss_grid` reads.
      seeds: ``[S]`` non-negative integer seeds.
      config: the trainer's configuration (default :data:`TABULAR_DEFAULTS`); ``eval_batch_size``
        is the block of validation and test rows scored at once. Tables take no image flips or
        normalisation.
      progress: show a tqdm bar over epochs (a string is used as its description).

    Returns:
      A :class:`MemberFit` (NumPy arrays).
    """
    check_table_config(config)
    x = np.asarray(features, dtype=np.float32)
    grid = loss_grid(losses)
    spec = grid.spec
    s = np.asarray(V.check_seeds("seeds", seeds), np.int64)
    if x.ndim != 2:
        raise ValueError(f"features must be [N, d]; got shape {x.shape}")
    y = check_labels(labels, x.shape[0], spec)
    _check_model(model, x, spec)
    if not splits:
        raise ValueError("splits is empty")
    n = x.shape[0]
    train_mask = np.zeros((len(splits), n), np.float32)
    for r, split in enumerate(splits):
        train_mask[r, split.train] = 1.0
        if split.val.size == 0:
            raise ValueError(f"rotation {split.rotation} has no validation rows (early stopping)")
    exact = exact_solver_applies(model, spec)
    if config.solver == "exact" and not exact:
        raise ValueError(
            f"the exact solver fits logistic regression under the beta-weighted or B-weighted "
            f"log loss or the class-weighted softmax cross-entropy, not "
            f"{type(model).__name__} under the {spec.describe()}; use solver='adam'"
        )
    if exact and config.solver != "adam":
        return _fit_exactly(model, x, y, splits, grid, s, train_mask, config)
    val_idx, val_weight = _blocked([split.val for split in splits], config.eval_batch_size)
    data = _Data(
        x=jnp.asarray(x),
        y=jnp.asarray(y, jnp.int32 if spec.multiclass else jnp.float32),
        train_mask=jnp.asarray(train_mask),
        val_idx=jnp.asarray(val_idx),
        val_weight=jnp.asarray(val_weight),
        losses=spec,
        seeds=jnp.asarray(s, jnp.uint32),
    )
    state = _init_state(model, config, data)
    epoch = _epoch_fn(model, config, n)
    bar = _progress(config.max_epochs, progress)
    epochs_run = 0
    try:
        for e in range(config.max_epochs):
            state = epoch(state, data, jnp.asarray(e, jnp.int32))
            epochs_run = e + 1
            n_active = int(jnp.sum(~state.stopped))
            if bar is not None:
                bar.update(1)
                bar.set_postfix(active=n_active)
            if n_active == 0:
                break
    finally:
        if bar is not None:
            bar.close()
    _warn_diverged(np.asarray(state.diverged))
    test_idx, _ = _blocked([split.test for split in splits], config.eval_batch_size)
    best = {"params": state.best_params, "batch_stats": state.best_batch_stats}
    logits = _test_logits(model, best, data.x, jnp.asarray(test_idx))
    return MemberFit(
        params=jax.tree.map(np.asarray, state.best_params),
        best_val=np.asarray(state.best_val_loss),
        best_epoch=np.asarray(state.best_epoch),
        epochs_run=epochs_run,
        test_logits=np.asarray(logits),
    )


def _warn_diverged(diverged: np.ndarray) -> None:
    if diverged.any():
        warnings.warn(
            f"{int(diverged.sum())} of {diverged.size} members stopped for a non-finite loss or "
            "gradient; they keep their best parameters (lower the learning rate)",
            RuntimeWarning,
            stacklevel=3,
        )


def _fit_exactly(
    model: nn.Module,
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[FoldSplit],
    grid: LossGrid,
    seeds: np.ndarray,
    train_mask: np.ndarray,
    config: TrainConfig,
) -> MemberFit:
    """Every (loss, rotation) member at its optimum, shared by all seeds (a convex problem)."""
    if grid.spec.kind == "matrix":
        coef, intercept, steps, fits = _fit_matrix_weighted(x, y, grid.spec, train_mask, config)
    elif grid.spec.kind == "class_weighted":
        fit = _fit_class_weighted(x, y, grid.spec, train_mask, config)
        coef, intercept, steps, fits = fit.coef, fit.intercept, fit.iterations, [fit]
    else:
        weights = beta_weighted_sample_weights(y, grid.weights, train_mask)  # [nb, R, N]
        b = np.asarray(grid.weights, np.float64)
        fit = fit_weighted_logistic(
            x,
            y,
            weights,
            l2=config.l2,
            tol=config.tol,
            max_iter=config.max_newton_steps,
            path=np.log(b) - np.log1p(-b),  # a path in logit(beta): warm starts
        )
        coef, intercept, steps, fits = fit.coef, fit.intercept, fit.iterations, [fit]
    stopped = np.concatenate([~np.asarray(f.converged).ravel() for f in fits])
    if stopped.any():
        gradients = np.concatenate([np.asarray(f.grad_norm).ravel() for f in fits])
        warnings.warn(
            f"{int(stopped.sum())} of {stopped.size} members stopped with a gradient of up to "
            f"{float(np.max(gradients[stopped])):.2g} (tol {config.tol:g}): "
            "raise max_newton_steps, or l2 if classes separate",
            RuntimeWarning,
            stacklevel=3,
        )
    n_seeds = len(seeds)
    params = {
        "w": np.broadcast_to(np.asarray(coef), (n_seeds, *coef.shape)),
        "b": np.broadcast_to(np.asarray(intercept), (n_seeds, *intercept.shape)),
    }
    test_idx, _ = _blocked([split.test for split in splits], config.eval_batch_size)
    one_seed = {"params": jax.tree.map(lambda a: jnp.asarray(a[:1]), params)}
    logits = np.asarray(_test_logits(model, one_seed, jnp.asarray(x), jnp.asarray(test_idx)))
    # Each member's validation loss: the mean of its own loss on its validation rows.
    mean_loss = jax.jit(
        jax.vmap(
            lambda spec, z, labels: jnp.mean(spec.logits_loss(z, labels)), in_axes=(0, 0, None)
        )
    )
    val = np.stack(
        [
            np.asarray(
                mean_loss(
                    grid.spec,
                    jnp.einsum("nd,bd...->bn...", x[split.val], coef[:, r]) + intercept[:, r, None],
                    jnp.asarray(y[split.val], jnp.int32 if grid.spec.multiclass else jnp.float32),
                )
            )
            for r, split in enumerate(splits)
        ],
        axis=-1,
    )
    steps = np.asarray(steps)
    return MemberFit(
        params=params,
        best_val=np.broadcast_to(val, (n_seeds, *val.shape)).astype(np.float32),
        best_epoch=np.broadcast_to(steps, (n_seeds, *steps.shape)),
        epochs_run=int(steps.max()),
        test_logits=np.broadcast_to(logits, (n_seeds, *logits.shape[1:])),
    )


def _fit_matrix_weighted(
    x: np.ndarray, y: np.ndarray, spec: LossSpec, train_mask: np.ndarray, config: TrainConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[LogisticFit]]:
    """Logistic regressions with one output per class at the optimum of each B-weighted log loss.

    ``L^B(a, y) = sum_c B[y, c] L(a_c, 1{y = c})`` (eq. ``b-loss-multi``) with ``a_c =
    sigmoid(w_c . x + b_c)`` is a sum over the classes ``c`` of weighted log losses, each of its
    own output's parameters: output ``c`` is the logistic regression of ``1{y = c}`` whose row
    ``i`` weighs ``B[y_i, c]``. The ridge on ``w`` splits the same way. So each class is one call
    of :func:`fit_weighted_logistic` for all losses and rotations at once.

    Returns ``coef [m, R, d, n]``, ``intercept [m, R, n]``, the most Newton steps of each
    member's classes ``[m, R]``, and each class's fit.
    """
    B = np.asarray(spec.params["B"], np.float64)  # [m, n, n]
    mask = np.asarray(train_mask, np.float64)
    count = mask.sum(axis=1)
    design = _Design.of(x)  # shared by every class's fits
    coefs, intercepts, fits = [], [], []
    for c in range(spec.n_classes):
        # [m, R, N]: row i weighs B[y_i, c] on the rotation's training rows, over their count.
        weights = B[:, y, c][:, None, :] * (mask / count[:, None])[None]
        fit = _fit_design(
            design,
            (y == c).astype(np.int32),
            weights.astype(np.float32),
            l2=config.l2,
            tol=config.tol,
            max_iter=config.max_newton_steps,
            chunk=None,
            offsets=None,
        )
        coefs.append(np.asarray(fit.coef))
        intercepts.append(np.asarray(fit.intercept))
        fits.append(fit)
    steps = np.max([np.asarray(f.iterations) for f in fits], axis=0)
    return np.stack(coefs, axis=-1), np.stack(intercepts, axis=-1), steps, fits


def _fit_class_weighted(
    x: np.ndarray, y: np.ndarray, spec: LossSpec, train_mask: np.ndarray, config: TrainConfig
) -> LogisticFit:
    """Multinomial logistic regressions at the optimum of each class-weighted softmax
    cross-entropy ``-w[y] log softmax(z)_y``: row ``i`` of a rotation's training rows weighs
    ``w[y_i]`` over their count, and the ridge ``l2 / 2 ||W||^2`` takes every class's weights.
    Each member is one :func:`iml.recalibration.softmax_newton` fit, started from the
    optimum of the intercepts alone (the log of each class's weighted share).

    Returns a :class:`LogisticFit` with ``coef [m, R, d, n]`` and ``intercept [m, R, n]``.
    """
    w = np.asarray(spec.params["class_weights"], np.float64)  # [m, n]
    mask = np.asarray(train_mask, np.float64)
    weights = w[:, y][:, None, :] * (mask / mask.sum(axis=1)[:, None])[None]  # [m, R, N]
    design = np.concatenate([x, np.ones((x.shape[0], 1), np.float32)], axis=1)
    fit = _fit_softmax_members(
        jnp.asarray(design),
        jnp.asarray(y, jnp.int32),
        jnp.asarray(weights.reshape(-1, x.shape[0]), jnp.float32),
        jnp.float32(config.l2),
        jnp.float32(config.tol),
        max_iter=config.max_newton_steps,
        n_classes=spec.n_classes,
    )
    return jax.tree.map(lambda a: np.asarray(a).reshape(weights.shape[:2] + a.shape[1:]), fit)


@functools.partial(jax.jit, static_argnames=("max_iter", "n_classes"))
def _fit_softmax_members(
    X: Array, y: Array, S: Array, l2: Array, tol: Array, *, max_iter: int, n_classes: int
) -> LogisticFit:
    """:func:`~iml.recalibration.softmax_newton` for each member's weights ``S [K, N]``, one
    member after another (each one's Hessian is already a large matrix product)."""
    d1 = X.shape[1]
    penalty = l2 * jnp.ones(d1, X.dtype).at[-1].set(0.0)  # the intercepts are not penalised
    onehot = jax.nn.one_hot(y, n_classes, dtype=X.dtype)

    def solve_one(s: Array) -> LogisticFit:
        share = s @ onehot / jnp.sum(s)
        start = jnp.zeros((d1, n_classes), X.dtype).at[-1].set(jnp.log(jnp.maximum(share, 1e-12)))
        fit = softmax_newton(X, y, s, start, max_iter=max_iter, tol=tol, penalty=penalty)
        return _member_fit(fit, tol)

    return jax.lax.map(solve_one, S)


def _progress(total: int, progress: bool | str) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    desc = progress if isinstance(progress, str) else "epochs"
    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr)


def out_of_fold_logits(fit_logits: np.ndarray, splits: Sequence[FoldSplit], n: int) -> np.ndarray:
    """Each observation's test logit per (seed, loss): ``[S, nb, N(, n_classes)]``, NaN where
    never tested.

    Observation ``i`` takes the logit of the rotation whose test fold holds it; with the default
    rotations (one full cycle) that rotation is unique.

    Raises:
      ValueError: if an observation is in the test fold of more than one rotation.
    """
    out = np.full((*fit_logits.shape[:2], n, *fit_logits.shape[4:]), np.nan, dtype=np.float32)
    times = np.zeros(n, np.int64)
    for r, split in enumerate(splits):
        out[:, :, split.test] = fit_logits[:, :, r, : len(split.test)]
        times[split.test] += 1
    if (times > 1).any():
        raise ValueError("an observation is in the test fold of several rotations")
    return out


# ----------------------------------------------------------------------------------------------
# The exact solver: weighted logistic regression by Newton's method, every member at once
# ----------------------------------------------------------------------------------------------


class LogisticFit(NamedTuple):
    """Fitted members (a pytree of arrays with a leading member axis ``K``).

    Attributes:
      coef: ``[K, d]`` weights (``[K, d, n]`` for a multinomial fit of ``n`` classes).
      intercept: ``[K]`` biases (``[K, n]``).
      objective: ``[K]`` the minimised ``f_k``.
      grad_norm: ``[K]`` the largest absolute entry of the gradient at the fit.
      iterations: ``[K]`` Newton steps taken.
      converged: ``[K]`` whether ``grad_norm <= tol``.
    """

    coef: Array
    intercept: Array
    objective: Array
    grad_norm: Array
    iterations: Array
    converged: Array


def _member_fit(fit: NewtonFit, tol: Array) -> LogisticFit:
    """A member's :class:`LogisticFit` from its Newton fit on the design with a last column of
    ones (the intercepts' row of ``theta``)."""
    norm = jnp.max(jnp.abs(fit.grad))
    return LogisticFit(
        coef=fit.theta[:-1],
        intercept=fit.theta[-1],
        objective=fit.objective,
        grad_norm=norm,
        iterations=fit.iterations,
        converged=norm <= tol,
    )


def beta_weighted_sample_weights(
    labels: ArrayLike, betas: ArrayLike, train_mask: ArrayLike
) -> np.ndarray:
    """Sample weights ``[B, R, N]`` of the beta-weighted mean cross-entropy per member.

    Args:
      labels: ``[N]`` labels in ``{0, 1}``.
      betas: ``[B]`` class weights in ``(0, 1)``.
      train_mask: ``[R, N]`` 1 on each rotation's training rows, 0 elsewhere.

    Returns:
      ``beta`` (positives) or ``1 - beta`` (negatives) on training rows, over the rotation's
      number of training rows.
    """
    y = np.asarray(labels, np.float64)
    b = V.check_betas("betas", betas, distinct=False)
    mask = np.asarray(train_mask, np.float64)
    if mask.ndim != 2 or mask.shape[1] != y.shape[0]:
        raise ValueError(f"train_mask must be [R, {y.shape[0]}]; got shape {mask.shape}")
    count = mask.sum(axis=1)
    if (count == 0).any():
        raise ValueError(f"rotations {np.flatnonzero(count == 0).tolist()} have no training rows")
    per_class = np.where(y[None, :] == 1, b[:, None], 1.0 - b[:, None])  # [B, N]
    return (per_class[:, None, :] * mask[None, :, :] / count[None, :, None]).astype(np.float32)


def fit_weighted_logistic(
    features: ArrayLike,
    labels: ArrayLike,
    sample_weights: ArrayLike,
    *,
    l2: float = 0.0,
    tol: float = 1e-6,
    max_iter: int = 50,
    chunk: int | None = None,
    path: ArrayLike | None = None,
) -> LogisticFit:
    """Minimise every member's weighted log loss exactly, by Newton's method (see the module).

    Each step solves the Newton system with the Hessian's eigenvalues raised to at least ``1e-6`` of
    the largest (so a feature no training row uses, or one-hot columns that sum to the
    intercept's, leave the step finite) and backtracks, halving, until the objective does not
    increase. A member stops when the largest entry of its gradient is at most
    ``tol`` or after ``max_iter`` steps. Without ``l2``, separable data has no minimiser: the
    weights grow until the gradient of the vanishing loss falls below ``tol``, which is reported
    as converged; give ``l2 > 0`` where classes may separate.

    Members start from the optimum of an intercept alone (the logit of the weighted share of
    positives), unless ``path`` makes the first axis of ``sample_weights`` a
    solution path (as a regularisation path is fitted with warm starts): the steps are solved in
    the order of their ``path`` values, outwards from the middle one, and each starts from its
    neighbour's solutions with the intercept moved by the difference of their ``path`` values.
    For a grid of betas, ``path = logit(beta)`` is that move's exact size where the model is well
    specified (the weighted optimum's logit is the posterior's plus ``logit(beta)``). Newton's
    method then needs about a third of the steps it takes from a cold start (the optimum of the
    intercept alone), and it reaches the same optimum: the path changes where a member starts, not
    what it solves.

    Args:
      features: ``[N, d]`` design shared by all members.
      labels: ``[N]`` labels in ``{0, 1}``.
      sample_weights: ``[K, N]`` non-negative weights per member (or ``[..., N]``: the leading
        axes are flattened and restored); ``[P, ..., N]`` with ``path``.
      l2: ridge penalty on the weights (not the intercept).
      tol: gradient tolerance (largest absolute entry).
      max_iter: most Newton steps.
      chunk: members solved at once (default 64 where the table of pair products is made, else
        16, whose Hessians take memory ``chunk x N x d``); with ``path``, whole path steps.
      path: optional ``[P]`` finite values along the first axis of ``sample_weights``.

    Returns:
      A :class:`LogisticFit` whose arrays lead with the weights' leading axes.
    """
    x = np.asarray(features, np.float32)
    y = np.asarray(labels)
    s = np.asarray(sample_weights, np.float32)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"features must be [N, d] and labels [N]; got {x.shape} and {y.shape}")
    if s.ndim < 1 or s.shape[-1] != x.shape[0]:
        raise ValueError(f"sample_weights must be [..., {x.shape[0]}]; got shape {s.shape}")
    V.check_finite("features", x)
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    V.check_interval("sample_weights", s, 0.0, np.inf, open_low=False, open_high=True)
    V.check_non_negative("l2", l2)
    V.check_count("max_iter", max_iter)
    if chunk is not None:
        V.check_count("chunk", chunk)
    V.check_positive("tol", tol)
    offsets = None
    if path is not None:
        if s.ndim < 2:
            raise ValueError(f"sample_weights must be [P, ..., N] with a path; got shape {s.shape}")
        offsets = np.asarray(path, np.float32)
        V.check_shape("path", offsets, (s.shape[0],))
        V.check_finite("path", offsets)
    return _fit_design(
        _Design.of(x), y, s, l2=l2, tol=tol, max_iter=max_iter, chunk=chunk, offsets=offsets
    )


class _Design(NamedTuple):
    """The features with a last column of ones, and the table of their nonzero pair products
    (None where it would take more than ``_PAIR_BYTES``): what every member of a table shares."""

    X: Array
    pairs: tuple[np.ndarray, np.ndarray, Array] | None

    @classmethod
    def of(cls, x: np.ndarray) -> _Design:
        design = jnp.asarray(np.concatenate([x, np.ones((x.shape[0], 1), np.float32)], axis=1))
        rows, cols = _nonzero_pairs(x)
        pairs = None
        if design.shape[0] * len(rows) * 4 <= _PAIR_BYTES:
            pairs = (rows, cols, _pair_products(design, rows, cols))
        return cls(design, pairs)


def _fit_design(
    design: _Design,
    y: np.ndarray,
    s: np.ndarray,
    *,
    l2: float,
    tol: float,
    max_iter: int,
    chunk: int | None,
    offsets: np.ndarray | None,
) -> LogisticFit:
    """:func:`fit_weighted_logistic` of checked arrays on a prepared design."""
    lead, n = s.shape[:-1], s.shape[-1]
    if offsets is None:
        steps = s.reshape(-1, 1, n)  # each member its own step, started cold
        offsets, warm = np.zeros(steps.shape[0], np.float32), False
    else:
        steps, warm = s.reshape(s.shape[0], -1, n), True
    pairs = design.pairs
    size = chunk or (_CHUNK_DIRECT if pairs is None else _CHUNK_PAIRS)
    first, chunks, parents = _path_schedule(offsets, max(1, size // steps.shape[1]), warm)
    fit = _fit_path(
        design.X,
        jnp.asarray(y, jnp.float32),
        jnp.asarray(steps),
        jnp.asarray(offsets),
        jnp.float32(l2),
        jnp.float32(tol),
        pairs,
        jnp.asarray(chunks),
        jnp.asarray(parents),
        max_iter=max_iter,
        first=first,
    )
    return jax.tree.map(lambda a: np.asarray(a).reshape(lead + a.shape[2:]), fit)


# The nonzero products of feature pairs take N floats each; above this many bytes the Hessians
# are formed from the design itself instead (more arithmetic, no extra memory).
_PAIR_BYTES = 2**31
# Members solved at once by default: with the pair table they cost only their weights' memory;
# without it, each chunk's Hessians take ``chunk x N x d`` floats.
_CHUNK_PAIRS, _CHUNK_DIRECT = 64, 16


@jax.jit
def _pair_products(X: Array, rows: Array, cols: Array) -> Array:
    """``Z [N, p]``: row ``i`` holds the listed entries of ``x_i x_i^T``'s upper triangle, so a
    member's Hessian is one row-vector times ``Z`` and a chunk's is one matrix product. (Made in
    its own program: built inside the solver's, it took several times longer to fill on the
    CPU.)"""
    return X[:, rows] * X[:, cols]


def _nonzero_pairs(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The upper-triangle pairs ``(j, k)`` of the design (the features and a last column of
    ones) whose product ``x_ij x_ik`` is nonzero in some row.

    Two one-hot columns of one category are never both 1, so their pair's products are all zero
    and need no column in the table (about a third of UCI Adult's pairs).
    """
    used = np.concatenate([features != 0, np.ones((features.shape[0], 1), bool)], axis=1)
    used = used.astype(np.float32)
    rows, cols = np.triu_indices(used.shape[1])
    keep = (used.T @ used)[rows, cols] > 0
    return rows[keep], cols[keep]


def _path_schedule(
    offsets: np.ndarray, most: int, warm: bool
) -> tuple[int, np.ndarray, np.ndarray]:
    """The order in which :func:`_fit_path` solves the steps of a path.

    Returns the step solved alone first from a cold start (``-1``: none), then chunks ``[C, c]``
    of step indices (at most ``most`` a chunk; a short chunk repeats its last step) with the step
    each starts from (``-1``: a cold start, the optimum of an intercept alone). On a path
    (``warm``) the first is the middle value's step, from which the chunks go outwards in both
    directions, each from its inner neighbour.
    """
    n = offsets.shape[0]

    def split(steps: np.ndarray, size: int) -> np.ndarray:
        count = -(-len(steps) // size)
        padded = np.concatenate([steps, np.repeat(steps[-1:], count * size - len(steps))])
        return padded.reshape(count, size)

    if not warm:
        chunks = split(np.arange(n), min(most, n))
        return -1, chunks, np.full(len(chunks), -1)
    order = np.argsort(offsets, kind="stable")
    middle = n // 2
    sides = [order[middle + 1 :], order[:middle][::-1]]  # outwards from the middle
    sides = [side for side in sides if len(side)]
    if not sides:
        return int(order[middle]), np.zeros((0, 1), np.int64), np.zeros(0, np.int64)
    size = max(-(-len(side) // -(-len(side) // most)) for side in sides)  # balanced chunks
    chunks, parents = [], []
    for side in sides:
        part = split(side, size)
        chunks.append(part)
        parents.append(np.concatenate([[order[middle]], part[:-1, -1]]))
    return int(order[middle]), np.concatenate(chunks), np.concatenate(parents)


@functools.partial(jax.jit, static_argnames=("max_iter", "first"))
def _fit_path(
    X: Array,
    y: Array,
    S: Array,
    offsets: Array,
    l2: Array,
    tol: Array,
    pairs: tuple[Array, Array, Array] | None,
    chunks: Array,
    parents: Array,
    *,
    max_iter: int,
    first: int,
) -> LogisticFit:
    """Members ``S [P, M, N]``, solved in the order of :func:`_path_schedule`: a step started
    from another step's solutions has its intercept moved by the difference of their
    ``offsets``."""
    d1 = X.shape[1]
    n_steps, n_members = S.shape[:2]
    penalty = l2 * jnp.ones(d1, X.dtype).at[-1].set(0.0)  # the intercept is not penalised
    hessian = None
    if pairs is not None:
        rows, cols, Z = pairs

        def hessian(v: Array) -> Array:
            products = jnp.dot(v, Z, precision=jax.lax.Precision.HIGHEST)
            upper = jnp.zeros((d1, d1), X.dtype).at[rows, cols].set(products)
            return upper + upper.T - jnp.diag(jnp.diagonal(upper))

    def solve_one(s: Array, theta: Array) -> LogisticFit:
        fit = logistic_newton(
            X, y, s, theta, max_iter=max_iter, tol=tol, penalty=penalty, hessian=hessian
        )
        return _member_fit(fit, tol)

    solve = jax.vmap(jax.vmap(solve_one))  # [steps, members]

    def store(fits: LogisticFit, steps: Array, fit: LogisticFit) -> LogisticFit:
        return jax.tree.map(lambda a, b: a.at[steps].set(b), fits, fit)

    def cold(s: Array) -> Array:
        """The optimum of an intercept alone: ``logit`` of the weighted share of positives."""
        positive = s @ y
        negative = jnp.sum(s, axis=-1) - positive
        ok = (positive > 0) & (negative > 0)
        intercept = jnp.where(ok, jnp.log(jnp.where(ok, positive / negative, 1.0)), 0.0)
        return jnp.zeros((*s.shape[:-1], d1), X.dtype).at[..., -1].set(intercept)

    shapes = jax.eval_shape(solve, S[:1], jnp.zeros((1, n_members, d1), X.dtype))
    fits = jax.tree.map(lambda a: jnp.zeros((n_steps, *a.shape[1:]), a.dtype), shapes)
    if first >= 0:
        fits = store(fits, jnp.array([first]), solve(S[first][None], cold(S[first][None])))

    def body(fits: LogisticFit, job: tuple[Array, Array]) -> tuple[LogisticFit, None]:
        steps, parent = job
        solved = jnp.concatenate([fits.coef[parent], fits.intercept[parent][:, None]], axis=-1)
        start = jnp.broadcast_to(solved, (steps.shape[0], n_members, d1))
        start = start.at[..., -1].add((offsets[steps] - offsets[parent])[:, None])
        start = jnp.where(parent >= 0, start, cold(S[steps]))
        return store(fits, steps, solve(S[steps], start)), None

    fits, _ = jax.lax.scan(body, fits, (chunks, parents))
    return fits
