"""Many small models on one in-memory table, trained as one vectorized program.

This is the trainer of the sweeps (:mod:`iml.pipeline.sweep`): for every loss of a grid
(:func:`iml.loss_grid`), every seed and every rotation of the nested cross-validation
(:mod:`iml.data.folds`), one member (:mod:`iml.models.small`: logistic regression or a
one-hidden-layer MLP) is trained on the rotation's training rows under its own loss
(:meth:`iml.LossSpec.logits_loss`). All ``K = n_seeds x n_losses x n_rotations`` members train
together:

* parameters are stacked on leading member axes ``[seed, loss, rotation, ...]``;
* one jitted epoch is a ``lax.scan`` over minibatch steps; a step computes every member's loss by
  nested ``jax.vmap`` (small dense models become batched matrix products), one gradient of their
  sum (members are independent, so it is every member's own gradient), and an Adam update per
  member;
* members differ in their loss, seed (initialisation and minibatch order: all members of a seed
  share both, common random numbers across losses and rotations) and rotation (which rows count
  as training rows of a minibatch; validation and test rows are gathered per rotation);
* every member carries the DenseNet trainer's :class:`~iml.training.train_state.MemberState`
  (its own learning rate and best parameters), and after each epoch its validation loss (its own
  loss on its validation folds) goes through the same
  :func:`~iml.training.train_state.end_of_epoch`: the best parameters are kept, the learning rate
  of a member whose validation loss plateaus is divided by 10, and a member stops after
  ``patience`` epochs without improvement, as in the paper. The Python loop over epochs ends
  when every member has stopped.

Under the beta-weighted log loss the logistic members are convex problems, and the default solver
fits each to its optimum by full-batch Newton steps instead (:mod:`iml.training.full_batch`).

The DenseNet ensembles of :mod:`iml.training.trainer` stream image batches from the host, one
member's batch per member; here the whole table lives on the device and members share each
minibatch's rows, which is what makes thousands of small members cheap.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from numpy.typing import ArrayLike

from iml.data.folds import FoldSplit
from iml.models.small import SMALL_MODELS, init_small_model, small_model_logits, weight_norm
from iml.spec import LossGrid, LossLike, LossSpec, loss_grid, loss_spec
from iml.training.full_batch import beta_weighted_sample_weights, fit_weighted_logistic
from iml.training.step import adam
from iml.training.train_state import MemberState, end_of_epoch, init_member_state

Array = jax.Array

__all__ = [
    "SOLVERS",
    "MemberFit",
    "TabularConfig",
    "check_labels",
    "check_seeds",
    "exact_solver_applies",
    "out_of_fold_logits",
    "train_tabular",
]

SOLVERS = ("auto", "exact", "adam")


@dataclasses.dataclass(frozen=True)
class TabularConfig:
    """How every member is trained (hashable: one compiled program per config and shapes).

    Attributes:
      model: ``"logistic"`` (logistic regression) or ``"mlp"`` (one ReLU hidden layer).
      hidden: hidden units of the MLP.
      max_epochs: most epochs (passes over the rows; each member sees its training rows once).
      batch_size: rows per minibatch (shared by all members of a seed; each member's loss is the
        mean over the rows of the minibatch that are in its training folds).
      learning_rate: Adam's initial learning rate (Adam's standard 0.9, 0.999 otherwise).
      l2: coefficient of ``l2 / 2 * ||weights||^2`` added to the training loss (biases excluded).
      patience: a member stops after this many epochs without a better validation loss.
      lr_patience: a member's learning rate is multiplied by ``lr_decay`` after this many epochs
        without improvement since the last improvement or decay (the paper divides by 10).
      lr_decay: that factor.
      min_rel_improvement: an epoch improves when the validation loss falls by more than this
        fraction of the best one.
      eval_rows: rows per block when validation and test rows are scored (bounds memory).
      solver: ``"exact"`` fits each logistic member to its optimum by full-batch Newton steps
        (:func:`iml.training.fit_weighted_logistic`; seeds then give identical members and
        early stopping does not apply), ``"adam"`` trains by minibatch Adam with early stopping;
        ``"auto"`` (the default) is ``"exact"`` for the convex logistic model and ``"adam"`` for
        the MLP.
      tol: the exact solver's gradient tolerance (largest absolute entry).
      max_newton_steps: the exact solver's most Newton steps.
    """

    model: str = "logistic"
    hidden: int = 32
    max_epochs: int = 100
    batch_size: int = 512
    learning_rate: float = 0.01
    l2: float = 0.0
    patience: int = 5
    lr_patience: int = 2
    lr_decay: float = 0.1
    min_rel_improvement: float = 1e-4
    eval_rows: int = 1024
    solver: str = "auto"
    tol: float = 1e-6
    max_newton_steps: int = 50

    def __post_init__(self) -> None:
        if self.model not in SMALL_MODELS:
            raise ValueError(f"model must be one of {list(SMALL_MODELS)}, got {self.model!r}")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        if self.solver == "exact" and self.model != "logistic":
            raise ValueError("solver 'exact' fits the convex logistic model only; use 'adam'")
        if not (math.isfinite(self.tol) and self.tol > 0):
            raise ValueError(f"tol must be positive, got {self.tol!r}")
        names = ("hidden", "max_epochs", "batch_size", "patience", "lr_patience", "eval_rows",
                 "max_newton_steps")  # fmt: skip
        for name in names:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate!r}")
        if not (math.isfinite(self.l2) and self.l2 >= 0):
            raise ValueError(f"l2 must be non-negative, got {self.l2!r}")
        if not 0 < self.lr_decay <= 1:
            raise ValueError(f"lr_decay must lie in (0, 1], got {self.lr_decay!r}")
        if not self.min_rel_improvement >= 0:
            raise ValueError(
                f"min_rel_improvement must be non-negative, got {self.min_rel_improvement!r}"
            )

    @property
    def exact(self) -> bool:
        """Whether members are fitted exactly (full-batch Newton) rather than by Adam."""
        return self.solver == "exact" or (self.solver == "auto" and self.model == "logistic")


def check_seeds(seeds: int | Sequence[int]) -> np.ndarray:
    if isinstance(seeds, int | np.integer) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive count or a list of seeds, got {seeds}")
        return np.arange(int(seeds), dtype=np.int64)
    s = np.asarray(seeds)
    if s.ndim != 1 or s.size == 0 or s.dtype.kind not in "iu" or (s < 0).any():
        raise ValueError(f"seeds must be a non-empty list of non-negative integers, got {seeds!r}")
    if np.unique(s).size != s.size:
        raise ValueError("seeds must not repeat")
    return s.astype(np.int64)


def _member_loss_sum(
    params: dict[str, Array], x: Array, y: Array, weight: Array, loss: LossSpec
) -> Array:
    """``sum_i weight_i L(a_i, y_i)`` of one member: its own loss on logits
    (:meth:`iml.LossSpec.logits_loss`; eq. ``b-loss-bin`` for a beta)."""
    return jnp.sum(weight * loss.logits_loss(small_model_logits(params, x), y))


def _member_train_loss(
    params: dict[str, Array], x: Array, y: Array, weight: Array, loss: LossSpec, l2: float
) -> Array:
    """Mean loss over the member's training rows of a minibatch, plus L2."""
    mean = _member_loss_sum(params, x, y, weight, loss) / jnp.maximum(jnp.sum(weight), 1.0)
    return mean + 0.5 * l2 * weight_norm(params)


# Member axes are [seed, loss, rotation] (along the loss axis, the losses of a batched LossSpec).
# Minibatch rows are shared by the members of a seed; rows and labels are shared across losses
# and rotations, training masks differ per rotation.
def _vmap_train(f: Callable) -> Callable:
    f = jax.vmap(f, in_axes=(0, None, None, 0, None))  # rotation
    f = jax.vmap(f, in_axes=(0, None, None, None, 0))  # loss
    return jax.vmap(f, in_axes=(0, 0, 0, 0, None))  # seed


# Validation and test rows are gathered per rotation and shared across seeds and betas.
def _vmap_eval_loss(f: Callable) -> Callable:
    f = jax.vmap(f, in_axes=(0, 0, 0, 0, None))  # rotation
    f = jax.vmap(f, in_axes=(0, None, None, None, 0))  # loss
    return jax.vmap(f, in_axes=(0, None, None, None, None))  # seed


def _vmap_eval_logits(f: Callable) -> Callable:
    return jax.vmap(jax.vmap(jax.vmap(f, in_axes=(0, 0)), in_axes=(0, None)), in_axes=(0, None))


def _vmap3(f: Callable) -> Callable:
    return jax.vmap(jax.vmap(jax.vmap(f)))


# ----------------------------------------------------------------------------------------------
# The vectorized program
# ----------------------------------------------------------------------------------------------


class _Data(NamedTuple):
    x: Array  # [N, d] float32
    y: Array  # [N] float32 (binary) or int32 class indices
    train_mask: Array  # [R, N] float32
    val_idx: Array  # [R, n_blocks, block] int32
    val_weight: Array  # [R, n_blocks, block] float32 (0 for padding)
    val_count: Array  # [R]
    losses: LossSpec  # batched: batch_shape [nb]
    seeds: Array  # [S] uint32


def _scale_members(tree: Any, scale: Array) -> Any:
    return jax.tree.map(lambda u: u * scale.reshape(scale.shape + (1,) * (u.ndim - 3)), tree)


def _init_state(config: TabularConfig, data: _Data, n_features: int) -> MemberState:
    """Every member's :class:`MemberState` (the DenseNet trainer's), on axes ``[S, nb, R]``."""
    n_seeds, n_rot = data.seeds.shape[0], data.train_mask.shape[0]
    (n_betas,) = data.losses.batch_shape
    n_outputs = data.losses.n_classes if data.losses.multiclass else 1

    def per_seed(seed: Array) -> dict[str, Array]:
        key = jax.random.fold_in(jax.random.key(seed), 0)
        return init_small_model(key, config.model, n_features, config.hidden, n_outputs)

    # Common random numbers: all betas and rotations of a seed start from the same point.
    seed_params = jax.vmap(per_seed)(data.seeds)
    params = jax.tree.map(
        lambda p: jnp.broadcast_to(p[:, None, None], (n_seeds, n_betas, n_rot, *p.shape[1:])),
        seed_params,
    )
    return _vmap3(lambda p: init_member_state({"params": p}, adam(), config.learning_rate))(params)


def _block_sums(
    params: Any, x: Array, idx: Array, y: Array, weight: Array, losses: LossSpec
) -> Array:
    """Sum of the weighted losses over blocks of per-rotation rows: ``[S, nb, R]``."""
    loss_sum = _vmap_eval_loss(_member_loss_sum)

    def body(total: Array, block: tuple[Array, Array]) -> tuple[Array, None]:
        i, w = block  # [R, block]
        return total + loss_sum(params, x[i], y[i], w, losses), None

    shape = jax.tree.leaves(params)[0].shape[:3]
    total, _ = jax.lax.scan(
        body, jnp.zeros(shape), (jnp.swapaxes(idx, 0, 1), jnp.swapaxes(weight, 0, 1))
    )
    return total


@functools.lru_cache(maxsize=16)
def _epoch_fn(
    config: TabularConfig, n_rows: int
) -> Callable[[MemberState, _Data, Array], MemberState]:
    """The jitted epoch of ``config``: a scan over minibatch steps, then every member's
    :func:`~iml.training.train_state.end_of_epoch` (the DenseNet trainer's early stopping and
    plateau decay)."""
    optimizer = adam()
    steps = -(-n_rows // config.batch_size)
    padded = steps * config.batch_size
    train_loss = _vmap_train(functools.partial(_member_train_loss, l2=config.l2))
    finish = functools.partial(
        end_of_epoch,
        patience=config.patience,
        plateau_patience=config.lr_patience,
        lr_factor=config.lr_decay,
        min_rel_delta=config.min_rel_improvement,
    )
    for _ in range(3):  # member axes [seed, loss, rotation]; the epoch is shared
        finish = jax.vmap(finish, in_axes=(0, 0, None))

    def step(carry: tuple[Any, Any, Array], batch: tuple[Array, Array], data: _Data):
        params, opt_state, lr = carry
        idx, valid = batch  # [S, B]
        x, y = data.x[idx], data.y[idx]
        # weight[s, r, b]: row idx[s, b] is a (real) training row of rotation r.
        weight = jnp.swapaxes(data.train_mask[:, idx], 0, 1) * valid[:, None, :]
        grads = jax.grad(lambda p: jnp.sum(train_loss(p, x, y, weight, data.losses)))(params)
        updates, opt_state = _vmap3(optimizer.update)(grads, opt_state, params)
        params = optax.apply_updates(params, _scale_members(updates, -lr))
        return (params, opt_state, lr), None

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
        lr = jnp.where(state.stopped, 0.0, state.lr)  # a stopped member no longer moves
        (params, opt_state, _), _ = jax.lax.scan(
            functools.partial(step, data=data), (state.params, state.opt_state, lr), batches
        )
        val = _block_sums(params, data.x, data.val_idx, data.y, data.val_weight, data.losses)
        stepped = state.replace(params=params, opt_state=opt_state)
        return finish(stepped, val / data.val_count, epoch_index)

    return epoch


@jax.jit
def _test_logits(params: Any, x: Array, idx: Array) -> Array:
    """Logits of every member on its rotation's (padded) test rows: ``[S, nb, R, T(, n)]``."""
    logits = _vmap_eval_logits(small_model_logits)

    def body(carry: None, i: Array) -> tuple[None, Array]:
        return None, logits(params, x[i])  # [S, nb, R, block]

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
    if y.shape != (n,):
        raise ValueError(f"labels must have shape ({n},), got {y.shape}")
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


def exact_solver_applies(losses: LossSpec) -> bool:
    return losses.kind == "weighted" and losses.base == "log"


def train_tabular(
    features: ArrayLike,
    labels: ArrayLike,
    splits: Sequence[FoldSplit],
    losses: LossLike | LossGrid,
    seeds: ArrayLike,
    config: TabularConfig = TabularConfig(),
    *,
    progress: bool | str = False,
) -> MemberFit:
    """Train ``len(seeds) x len(losses) x len(splits)`` members as one vectorized program.

    Member ``(s, b, r)`` minimises loss ``b`` of the grid (for a beta, the beta-weighted
    cross-entropy, eq. ``b-loss-bin``) over the training rows of ``splits[r]``. With the exact
    solver (the default for the logistic model under the beta-weighted log loss) every member is
    fitted to its optimum by full-batch Newton steps, and all seeds share it. With Adam, member
    ``(s, b, r)`` starts from the initialisation and follows the minibatch order of
    ``seeds[s]``, early-stopped on its validation rows. Members are independent: training one
    alone (one loss, seed and split) gives the same parameters.

    Args:
      features: ``[N, d]`` inputs.
      labels: ``[N]`` labels in ``{0, 1}``, or class indices for multiclass losses.
      splits: rotations of the nested cross-validation (:func:`iml.data.nested_cv_splits`).
      losses: ``[nb]`` class weights in ``(0, 1)``, or any grid :func:`loss_grid` reads.
      seeds: ``[S]`` non-negative integer seeds.
      config: the training configuration.
      progress: show a tqdm bar over epochs (a string is used as its description).

    Returns:
      A :class:`MemberFit` (NumPy arrays).
    """
    x = np.asarray(features, dtype=np.float32)
    grid = loss_grid(losses)
    spec = grid.spec
    s = check_seeds(np.asarray(seeds))
    if x.ndim != 2:
        raise ValueError(f"features must be [N, d]; got shape {x.shape}")
    y = check_labels(labels, x.shape[0], spec)
    if not splits:
        raise ValueError("splits is empty")
    n = x.shape[0]
    train_mask = np.zeros((len(splits), n), np.float32)
    for r, split in enumerate(splits):
        train_mask[r, split.train] = 1.0
        if split.val.size == 0:
            raise ValueError(f"rotation {split.rotation} has no validation rows (early stopping)")
    if config.exact:
        if not exact_solver_applies(spec):
            raise ValueError(
                f"the exact solver fits the beta-weighted log loss only, not the "
                f"{spec.describe()}; use solver='adam'"
            )
        return _fit_exactly(x, y, splits, grid.weights, s, train_mask, config)
    val_idx, val_weight = _blocked([split.val for split in splits], config.eval_rows)
    data = _Data(
        x=jnp.asarray(x),
        y=jnp.asarray(y, jnp.int32 if spec.multiclass else jnp.float32),
        train_mask=jnp.asarray(train_mask),
        val_idx=jnp.asarray(val_idx),
        val_weight=jnp.asarray(val_weight),
        val_count=jnp.asarray([len(split.val) for split in splits], jnp.float32),
        losses=spec,
        seeds=jnp.asarray(s, jnp.uint32),
    )
    state = _init_state(config, data, x.shape[1])
    epoch = _epoch_fn(config, n)
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
    test_idx, _ = _blocked([split.test for split in splits], config.eval_rows)
    logits = _test_logits(state.best_params, data.x, jnp.asarray(test_idx))
    return MemberFit(
        params=jax.tree.map(np.asarray, state.best_params),
        best_val=np.asarray(state.best_val_loss),
        best_epoch=np.asarray(state.best_epoch),
        epochs_run=epochs_run,
        test_logits=np.asarray(logits),
    )


def _fit_exactly(
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[FoldSplit],
    betas: np.ndarray,
    seeds: np.ndarray,
    train_mask: np.ndarray,
    config: TabularConfig,
) -> MemberFit:
    """Every (beta, rotation) member at its optimum, shared by all seeds (a convex problem)."""
    weights = beta_weighted_sample_weights(y, betas, train_mask)  # [nb, R, N]
    fit = fit_weighted_logistic(
        x, y, weights, l2=config.l2, tol=config.tol, max_iter=config.max_newton_steps
    )
    stopped = ~np.asarray(fit.converged)
    if stopped.any():
        warnings.warn(
            f"{int(stopped.sum())} of {stopped.size} members stopped with a gradient of up to "
            f"{float(np.max(np.asarray(fit.grad_norm)[stopped])):.2g} (tol {config.tol:g}): "
            "raise max_newton_steps, or l2 if classes separate",
            RuntimeWarning,
            stacklevel=3,
        )
    n_seeds = len(seeds)
    params = {
        "w": np.broadcast_to(np.asarray(fit.coef), (n_seeds, *fit.coef.shape)),
        "b": np.broadcast_to(np.asarray(fit.intercept), (n_seeds, *fit.intercept.shape)),
    }
    test_idx, _ = _blocked([split.test for split in splits], config.eval_rows)
    one_seed = jax.tree.map(lambda a: jnp.asarray(a[:1]), params)
    logits = np.asarray(_test_logits(one_seed, jnp.asarray(x), jnp.asarray(test_idx)))
    # Each member's validation loss: the mean beta-weighted cross-entropy on its validation rows.
    column = loss_spec("log", beta=np.asarray(betas, np.float32)[:, None])
    val = np.stack(
        [
            np.asarray(
                jnp.mean(
                    column.logits_loss(
                        fit.coef[:, r] @ x[split.val].T + fit.intercept[:, r, None],
                        y[split.val].astype(np.float32),
                    ),
                    axis=-1,
                )
            )
            for r, split in enumerate(splits)
        ],
        axis=-1,
    )
    steps = np.asarray(fit.iterations)
    return MemberFit(
        params=params,
        best_val=np.broadcast_to(val, (n_seeds, *val.shape)).astype(np.float32),
        best_epoch=np.broadcast_to(steps, (n_seeds, *steps.shape)),
        epochs_run=int(steps.max()),
        test_logits=np.broadcast_to(logits, (n_seeds, *logits.shape[1:])),
    )


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
