"""`iml sweep`: a fine grid of class weights, many small models trained as one vectorized program.

For every class weight ``beta`` of a grid, every seed and every rotation of the nested
cross-validation (:mod:`iml.data.folds`: 10 folds, 7-2-1 train/validation/test rotations, as in
the paper's appendix "Technical Details"), a small model (logistic regression or a one-hidden-layer
MLP) is trained with the beta-weighted cross-entropy (eq. ``b-loss-bin``,
:func:`iml.losses.beta_weighted_sigmoid_cross_entropy`). All ``K = n_betas x n_seeds x
n_rotations`` members are trained together:

* parameters are stacked on leading member axes ``[seed, beta, rotation, ...]``;
* one jitted epoch is a ``lax.scan`` over minibatch steps; a step computes every member's loss by
  nested ``jax.vmap`` (small dense models become batched matrix products), one gradient of their
  sum (members are independent, so it is every member's own gradient), and an Adam update per
  member;
* members differ in ``beta`` (the loss weight), seed (initialisation and minibatch order: all
  members of a seed share both, common random numbers across betas and rotations) and rotation
  (which rows count as training rows of a minibatch; validation and test rows are gathered per
  rotation);
* after each epoch every member's validation loss (its own beta-weighted loss on its validation
  folds) is measured; the best parameters are kept per member by masks, the learning rate of a
  member whose validation loss plateaus is divided by 10, and a member stops (its updates are
  masked) after ``patience`` epochs without improvement, as in the paper. The Python loop over
  epochs ends when every member has stopped.

Each observation is in the test fold of exactly one rotation, so each (beta, seed) gives it one
out-of-fold score; the scores of the seeds are averaged (the paper's ensemble), corrected with
the loss-corrected score ``(c^beta)^{-1}`` (Cor. 1, :func:`iml.scoring.loss_corrected_score`) and
both are scored with :mod:`iml.calibration`'s metrics. Work is split into chunks of betas; each
finished chunk is one atomic :class:`~iml.pipeline.store.RunStore` entry, so a killed sweep resumes
where it stopped.

Entry points: :func:`run_sweep` (library, notebooks: arrays, e.g. from a pandas DataFrame by
:func:`iml.data.tabular.encode_table`), :func:`add_sweep_arguments` and
:func:`prepare_sweep_command` (the ``iml sweep`` command; also ``python -m iml.pipeline.sweep``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import io
import math
import re
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

from iml import _validation as V
from iml._io import atomic_write_bytes, atomic_write_text
from iml.calibration import (
    METRICS,
    MULTICLASS_METRICS,
    beta_key,
    multiclass_score_metrics,
    score_metrics,
)
from iml.data.folds import FoldSplit, assign_folds, nested_cv_splits
from iml.data.tabular import ArgumentError
from iml.pipeline.store import RunStore
from iml.spec import LossLike, LossSpec, loss_spec
from iml.training.full_batch import beta_weighted_sample_weights, fit_weighted_logistic

Array = jax.Array

__all__ = [
    "METHODS",
    "METRICS",
    "MODELS",
    "MemberFit",
    "SweepPlan",
    "SweepResult",
    "TrainConfig",
    "add_sweep_arguments",
    "beta_grid",
    "ece_figure",
    "execute_sweep",
    "member_logits",
    "plan_sweep",
    "prepare_sweep_command",
    "run_sweep",
    "run_sweep_command",
    "sweep_table",
    "table_markdown",
    "train_members",
]

MODELS = ("logistic", "mlp")
SOLVERS = ("auto", "exact", "adam")
METHODS = ("raw", "loss_corrected")


# ----------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TrainConfig:
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
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
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


def beta_grid(n_betas: int = 64, beta_min: float = 0.01, beta_max: float = 0.99) -> np.ndarray:
    """``n_betas`` class weights evenly spaced in ``logit(beta)`` from ``beta_min`` to ``beta_max``.

    Raises:
      ValueError: if ``n_betas < 1`` or the bounds are not ``0 < beta_min <= beta_max < 1``.
    """
    if isinstance(n_betas, bool) or not isinstance(n_betas, int) or n_betas < 1:
        raise ValueError(f"n_betas must be a positive integer, got {n_betas!r}")
    for name, b in (("beta_min", beta_min), ("beta_max", beta_max)):
        if not 0.0 < b < 1.0:
            raise ValueError(f"{name} must lie in (0, 1), got {b!r}")
    if beta_min > beta_max:
        raise ValueError(f"beta_min = {beta_min} exceeds beta_max = {beta_max}")
    if n_betas == 1:
        return np.asarray([beta_min], dtype=np.float64)
    logits = np.linspace(_logit(beta_min), _logit(beta_max), n_betas)
    grid = 1.0 / (1.0 + np.exp(-logits))
    # The round trip through logit drifts the ends by an ulp (0.010000000000000002): pin them,
    # so that the table's exact keys show the bounds asked for.
    grid[0], grid[-1] = beta_min, beta_max
    return grid


def _logit(p: float | np.ndarray) -> Any:
    return np.log(p) - np.log1p(-np.asarray(p))


def _check_betas(betas: ArrayLike) -> np.ndarray:
    return V.check_betas("betas", betas)


class LossGrid(NamedTuple):
    """A sweep's grid of ``m`` losses (:func:`loss_grid`).

    Attributes:
      spec: the losses, a :class:`iml.LossSpec` with batch shape ``(m,)``.
      weights: ``[m]`` float64 class weights where one number says which loss it is (beta, or
        a focal grid's alpha; as given, before the specification rounds them to float32), else
        None.
      keys: each loss's key in the tables (:func:`grid_keys`).
    """

    spec: LossSpec
    weights: np.ndarray | None
    keys: list[str]


def loss_grid(losses: LossLike | LossGrid) -> LossGrid:
    """A sweep's grid of losses.

    ``losses`` is anything :func:`iml.loss_spec` reads: an array of betas (the default sweep), a
    stack of weight matrices ``B`` ``[m, n, n]``, ``loss_spec("focal", gamma=2.0, alpha=alphas)``,
    ... A single (unbatched) loss is a grid of one.

    Raises:
      ValueError: for a specification batched over more than one axis, repeated betas, or two
        losses of the grid that are equal (their rows of the table would share a key).
    """
    if isinstance(losses, LossGrid):
        return losses
    exact = None
    if isinstance(losses, LossSpec):
        spec = losses
    elif isinstance(losses, str | Mapping) or callable(losses):
        spec = loss_spec(losses)
    else:
        values = np.asarray(losses, np.float64)
        if values.ndim == 1:
            exact = values = _check_betas(values)
        spec = loss_spec(values)
    if not spec.batch_shape:
        spec = jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], spec)
    if len(spec.batch_shape) != 1:
        raise ValueError(
            f"losses must be a grid along one axis; got batch shape {spec.batch_shape}"
        )
    weights = grid_weights(spec)
    if exact is not None:
        weights = exact
    elif weights is not None:
        # float32 parameters: keyed by their shortest float32 decimal (0.01, not 0.0099999998)
        weights = np.asarray([float(str(w)) for w in weights.astype(np.float32)])
    if spec.kind == "weighted":
        _check_betas(weights)
    keys = grid_keys(spec, weights)
    if len(set(keys)) != len(keys):
        raise ValueError(f"losses repeat: the grid's keys are {keys}")
    return LossGrid(spec, weights, keys)


def grid_weights(losses: LossSpec) -> np.ndarray | None:
    """The grid's class weight per loss, where one number says it: ``beta`` of the weighted
    losses, ``alpha`` of a focal grid of one ``gamma``; else None."""
    p = {k: np.asarray(v, np.float64) for k, v in losses.params.items() if k != "args"}
    if losses.kind == "weighted":
        return p["beta"]
    if losses.kind == "focal" and np.unique(p["gamma"]).size == 1:
        return p["alpha"]
    return None


def _entries_key(name: str, values: np.ndarray, default: float = 1.0) -> str | None:
    """``"B[3,8]=10"``: the entries that differ from ``default`` (``"ones"`` if none)."""
    changed = np.argwhere(values != default)
    if len(changed) > 4:
        return None
    parts = [f"{name}[{','.join(map(str, idx))}]={values[tuple(idx)]:g}" for idx in changed]
    return ",".join(parts) or "ones"


def grid_keys(losses: LossSpec, weights: np.ndarray | None = None) -> list[str]:
    """The row key of every loss of a grid: the exact weight (:func:`iml.calibration.beta_key`)
    where :func:`grid_weights` gives one, the entries of ``B`` (or of the class weights) that
    differ from 1 (``"B[8,8]=10"``; ``"ones"`` for the unweighted loss), else the parameters."""
    (m,) = losses.batch_shape
    weights = grid_weights(losses) if weights is None else weights
    if weights is not None:
        return [beta_key(w) for w in weights]
    keys = []
    for i in range(m):
        p = {k: np.asarray(v[i], np.float64) for k, v in losses.params.items() if k != "args"}
        key = None
        if losses.kind == "matrix":
            key = _entries_key("B", p["B"])
        elif "class_weights" in p:
            key = _entries_key("w", p["class_weights"])
            if key is not None and "gamma" in p:
                key = f"gamma={p['gamma']:g},{key}"
        elif losses.kind == "focal":
            key = f"gamma={p['gamma']:g},alpha={beta_key(p['alpha'])}"
        keys.append(key if key is not None else f"#{i}")
    return keys


def _check_seeds(seeds: int | Sequence[int]) -> np.ndarray:
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


# ----------------------------------------------------------------------------------------------
# One member: the model and its loss (pure functions; the sweep vmaps them)
# ----------------------------------------------------------------------------------------------


def init_member(
    key: Array, model: str, n_features: int, hidden: int, n_outputs: int = 1
) -> dict[str, Array]:
    """Initial parameters of one member: small Gaussian weights (He for the hidden layer).

    ``n_outputs = 1`` gives one logit per row (binary losses); ``n`` gives ``n`` logits (the
    multiclass losses).
    """
    out = () if n_outputs == 1 else (n_outputs,)
    if model == "logistic":
        return {"w": 0.01 * jax.random.normal(key, (n_features, *out)), "b": jnp.zeros(out)}
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (n_features, hidden)) * jnp.sqrt(2.0 / n_features),
        "b1": jnp.zeros((hidden,)),
        "w2": jax.random.normal(k2, (hidden, *out)) * jnp.sqrt(1.0 / hidden),
        "b2": jnp.zeros(out),
    }


def member_logits(params: dict[str, Array], x: Array) -> Array:
    """Logits ``[B]`` (or ``[B, n]``) of one member on rows ``x`` ``[B, d]`` (logistic or
    one-hidden-layer MLP)."""
    if "w1" in params:
        h = jax.nn.relu(x @ params["w1"] + params["b1"])
        return h @ params["w2"] + params["b2"]
    return x @ params["w"] + params["b"]


def _weight_norm(params: dict[str, Array]) -> Array:
    return sum(jnp.sum(jnp.square(v)) for k, v in params.items() if k.startswith("w"))


def _member_loss_sum(
    params: dict[str, Array], x: Array, y: Array, weight: Array, loss: LossSpec
) -> Array:
    """``sum_i weight_i L(a_i, y_i)`` of one member: its own loss on logits
    (:meth:`iml.LossSpec.logits_loss`; eq. ``b-loss-bin`` for a beta)."""
    return jnp.sum(weight * loss.logits_loss(member_logits(params, x), y))


def _member_train_loss(
    params: dict[str, Array], x: Array, y: Array, weight: Array, loss: LossSpec, l2: float
) -> Array:
    """Mean loss over the member's training rows of a minibatch, plus L2."""
    mean = _member_loss_sum(params, x, y, weight, loss) / jnp.maximum(jnp.sum(weight), 1.0)
    return mean + 0.5 * l2 * _weight_norm(params)


# Member axes are [seed, loss, rotation] (along the loss axis, the losses of a batched LossSpec).
# Minibatch rows are shared by the members of a seed; rows and labels are shared across losses
# and rotations, training masks differ per rotation.
def _vmap_train(f: Callable) -> Callable:
    f = jax.vmap(f, in_axes=(0, None, None, 0, None))  # rotation
    f = jax.vmap(f, in_axes=(0, None, None, None, 0))  # beta
    return jax.vmap(f, in_axes=(0, 0, 0, 0, None))  # seed


# Validation and test rows are gathered per rotation and shared across seeds and betas.
def _vmap_eval_loss(f: Callable) -> Callable:
    f = jax.vmap(f, in_axes=(0, 0, 0, 0, None))  # rotation
    f = jax.vmap(f, in_axes=(0, None, None, None, 0))  # beta
    return jax.vmap(f, in_axes=(0, None, None, None, None))  # seed


def _vmap_eval_logits(f: Callable) -> Callable:
    return jax.vmap(jax.vmap(jax.vmap(f, in_axes=(0, 0)), in_axes=(0, None)), in_axes=(0, None))


def _vmap3(f: Callable) -> Callable:
    return jax.vmap(jax.vmap(jax.vmap(f)))


# ----------------------------------------------------------------------------------------------
# The vectorized program
# ----------------------------------------------------------------------------------------------


class _State(NamedTuple):
    params: Any
    opt_state: Any
    best_params: Any
    best_val: Array  # [S, nb, R]
    best_epoch: Array
    bad_epochs: Array
    stale_epochs: Array
    lr_scale: Array
    active: Array


class _Data(NamedTuple):
    x: Array  # [N, d] float32
    y: Array  # [N] float32 (binary) or int32 class indices
    train_mask: Array  # [R, N] float32
    val_idx: Array  # [R, n_blocks, block] int32
    val_weight: Array  # [R, n_blocks, block] float32 (0 for padding)
    val_count: Array  # [R]
    losses: LossSpec  # batched: batch_shape [nb]
    seeds: Array  # [S] uint32


def _optimizer(config: TrainConfig) -> optax.GradientTransformation:
    return optax.adam(config.learning_rate, b1=0.9, b2=0.999)


def _scale_members(tree: Any, scale: Array) -> Any:
    return jax.tree.map(lambda u: u * scale.reshape(scale.shape + (1,) * (u.ndim - 3)), tree)


def _where_members(mask: Array, a: Any, b: Any) -> Any:
    return jax.tree.map(
        lambda u, v: jnp.where(mask.reshape(mask.shape + (1,) * (u.ndim - 3)), u, v), a, b
    )


def _init_state(config: TrainConfig, data: _Data, n_features: int) -> _State:
    n_seeds, n_rot = data.seeds.shape[0], data.train_mask.shape[0]
    (n_betas,) = data.losses.batch_shape
    n_outputs = data.losses.n_classes if data.losses.multiclass else 1

    def per_seed(seed: Array) -> dict[str, Array]:
        key = jax.random.fold_in(jax.random.key(seed), 0)
        return init_member(key, config.model, n_features, config.hidden, n_outputs)

    # Common random numbers: all betas and rotations of a seed start from the same point.
    seed_params = jax.vmap(per_seed)(data.seeds)
    params = jax.tree.map(
        lambda p: jnp.broadcast_to(p[:, None, None], (n_seeds, n_betas, n_rot, *p.shape[1:])),
        seed_params,
    )
    shape = (n_seeds, n_betas, n_rot)
    return _State(
        params=params,
        opt_state=_vmap3(_optimizer(config).init)(params),
        best_params=params,
        best_val=jnp.full(shape, jnp.inf),
        best_epoch=jnp.zeros(shape, jnp.int32),
        bad_epochs=jnp.zeros(shape, jnp.int32),
        stale_epochs=jnp.zeros(shape, jnp.int32),
        lr_scale=jnp.ones(shape),
        active=jnp.ones(shape, bool),
    )


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
def _epoch_fn(config: TrainConfig, n_rows: int) -> Callable[[_State, _Data, Array], _State]:
    """The jitted epoch of ``config``: a scan over minibatch steps, then validation and masks."""
    optimizer = _optimizer(config)
    steps = -(-n_rows // config.batch_size)
    padded = steps * config.batch_size
    train_loss = _vmap_train(functools.partial(_member_train_loss, l2=config.l2))

    def step(carry: tuple[Any, Any, Array], batch: tuple[Array, Array], data: _Data):
        params, opt_state, scale = carry
        idx, valid = batch  # [S, B]
        x, y = data.x[idx], data.y[idx]
        # weight[s, r, b]: row idx[s, b] is a (real) training row of rotation r.
        weight = jnp.swapaxes(data.train_mask[:, idx], 0, 1) * valid[:, None, :]
        grads = jax.grad(lambda p: jnp.sum(train_loss(p, x, y, weight, data.losses)))(params)
        updates, opt_state = _vmap3(optimizer.update)(grads, opt_state, params)
        params = optax.apply_updates(params, _scale_members(updates, scale))
        return (params, opt_state, scale), None

    @jax.jit
    def epoch(state: _State, data: _Data, epoch_index: Array) -> _State:
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
        scale = state.lr_scale * state.active
        (params, opt_state, _), _ = jax.lax.scan(
            functools.partial(step, data=data), (state.params, state.opt_state, scale), batches
        )
        val = _block_sums(params, data.x, data.val_idx, data.y, data.val_weight, data.losses)
        val = val / data.val_count
        best = state.best_val
        threshold = jnp.where(
            jnp.isfinite(best), best - config.min_rel_improvement * jnp.abs(best), jnp.inf
        )
        improved = state.active & (val < threshold)
        stale = jnp.where(improved, 0, state.stale_epochs + 1)
        decay = stale >= config.lr_patience
        bad = jnp.where(improved, 0, state.bad_epochs + 1)
        return _State(
            params=params,
            opt_state=opt_state,
            best_params=_where_members(improved, params, state.best_params),
            best_val=jnp.where(improved, val, best),
            best_epoch=jnp.where(improved, epoch_index + 1, state.best_epoch),
            bad_epochs=bad,
            stale_epochs=jnp.where(decay, 0, stale),
            lr_scale=jnp.where(decay, state.lr_scale * config.lr_decay, state.lr_scale),
            active=state.active & (bad < config.patience),
        )

    return epoch


@jax.jit
def _test_logits(params: Any, x: Array, idx: Array) -> Array:
    """Logits of every member on its rotation's (padded) test rows: ``[S, nb, R, T(, n)]``."""
    logits = _vmap_eval_logits(member_logits)

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
    """Members trained together, on axes ``[seed, beta, rotation]``.

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


def _check_labels(labels: ArrayLike, n: int, losses: LossSpec) -> np.ndarray:
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


def _exact_solver_applies(losses: LossSpec) -> bool:
    return losses.kind == "weighted" and losses.base == "log"


def train_members(
    features: ArrayLike,
    labels: ArrayLike,
    splits: Sequence[FoldSplit],
    losses: LossLike,
    seeds: ArrayLike,
    config: TrainConfig = TrainConfig(),
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
    s = _check_seeds(np.asarray(seeds))
    if x.ndim != 2:
        raise ValueError(f"features must be [N, d]; got shape {x.shape}")
    y = _check_labels(labels, x.shape[0], spec)
    if not splits:
        raise ValueError("splits is empty")
    n = x.shape[0]
    train_mask = np.zeros((len(splits), n), np.float32)
    for r, split in enumerate(splits):
        train_mask[r, split.train] = 1.0
        if split.val.size == 0:
            raise ValueError(f"rotation {split.rotation} has no validation rows (early stopping)")
    if config.exact:
        if not _exact_solver_applies(spec):
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
            n_active = int(jnp.sum(state.active))
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
        best_val=np.asarray(state.best_val),
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
    config: TrainConfig,
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


# ----------------------------------------------------------------------------------------------
# Metrics, the table and the figure
# ----------------------------------------------------------------------------------------------


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, np.float64)))


def scores_from_logits(losses: LossSpec, logits: ArrayLike) -> np.ndarray:
    """The scores ``[m, ...]`` that logits ``[m, ...]`` of a grid's members stand for
    (:meth:`iml.LossSpec.link` of each loss), in float64."""
    if not losses.multiclass:  # every binary loss reads its logit through the sigmoid
        return _sigmoid(logits)
    z = jnp.asarray(logits, jnp.float32)
    spec = jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.float32), losses)
    return np.asarray(jax.vmap(LossSpec.link)(spec, z), np.float64)


def loss_corrected_scores(losses: LossSpec, scores: ArrayLike) -> np.ndarray:
    """The loss-corrected scores ``(c^L)^{-1}(a)`` of every loss of a grid (Proposition 4;
    Corollary 1 for a beta): ``scores [m, N(, n)]``, row ``i`` corrected by loss ``i``."""
    a = jnp.asarray(np.clip(np.asarray(scores, np.float64), 0.0, 1.0), jnp.float32)
    return np.asarray(jax.vmap(LossSpec.loss_corrected_score)(losses, a), np.float64)


def sweep_table(
    losses: LossLike, scores: ArrayLike, labels: ArrayLike, n_bins: int = 10
) -> dict[str, dict[str, dict[str, float]]]:
    """Metrics of the raw and loss-corrected scores of every loss: ``table[key][method][metric]``.

    Keys are :func:`grid_keys` (for a beta grid, the exact betas). Methods: ``"raw"`` (the
    ensemble's scores ``a``) and ``"loss_corrected"`` (``(c^L)^{-1}(a)``, Proposition 4;
    ``g^beta(a)``, Corollary 1, for a beta). Metrics: :data:`iml.calibration.METRICS` for binary
    losses (``"ece"`` over ``n_bins`` quantile bins, the paper's deciles, ...) and
    :data:`iml.calibration.MULTICLASS_METRICS` for multiclass ones (top-label and class-wise
    ECE, Brier score, log loss, accuracy).

    Args:
      losses: the grid of ``m`` losses (:func:`loss_grid`: e.g. an array of betas).
      scores: ``[m, N]`` raw scores per loss, or ``[m, N, n]`` class scores.
      labels: ``[N]`` labels.
      n_bins: bins of the calibration errors.
    """
    grid = loss_grid(losses)
    spec = grid.spec
    (m,) = spec.batch_shape
    a = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    shape = (m, y.shape[0], *((spec.n_classes,) if spec.multiclass else ()))
    if a.shape != shape:
        raise ValueError(f"scores must have shape {shape}, got {a.shape}")
    metrics = multiclass_score_metrics if spec.multiclass else score_metrics
    corrected = loss_corrected_scores(spec, a)
    return {
        key: {"raw": metrics(raw, y, n_bins), "loss_corrected": metrics(fixed, y, n_bins)}
        for key, raw, fixed in zip(grid.keys, a, corrected, strict=True)
    }


def _table_metrics(table: Mapping[str, Mapping[str, Mapping[str, float]]]) -> tuple[str, ...]:
    first = next(iter(table.values()))["raw"]
    return METRICS if "auroc" in first else MULTICLASS_METRICS


def table_markdown(table: dict[str, dict[str, dict[str, float]]], key_name: str = "beta") -> str:
    """The table as Markdown: one row per loss (its exact key), raw and loss-corrected metrics."""
    metrics = _table_metrics(table)
    header = [key_name] + [f"{m} {k}" for k in metrics for m in ("raw", "corr.")]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, row in table.items():
        cells = [key]  # the exact key (iml.calibration.beta_key): close betas stay apart
        for metric in metrics:
            cells += [f"{row['raw'][metric]:.4f}", f"{row['loss_corrected'][metric]:.4f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _numeric_keys(keys: Sequence[str]) -> np.ndarray | None:
    try:
        values = np.asarray([float(k) for k in keys])
    except ValueError:
        return None
    return values if ((values > 0) & (values < 1)).all() else None


def ece_figure(
    table: dict[str, dict[str, dict[str, float]]],
    prevalence: float | None = None,
    title: str = "",
    weight_name: str = "beta",
) -> Figure:
    """Calibration error against the loss of each row, raw and loss-corrected.

    For a grid of class weights (numeric keys) the x axis is ``logit(weight)`` with weight ticks,
    and a dotted vertical line marks the inverse-frequency weight ``1 - prevalence`` when given;
    other grids (weight matrices ``B``, ...) are placed side by side, labelled by their keys.
    Binary tables: solid lines the decile ECE, dashed the debiased l2 error. Multiclass tables:
    solid the top-label ECE, dashed the class-wise ECE.
    """
    if not table:
        raise ValueError("table is empty")
    keys = list(table)
    weights = _numeric_keys(keys)
    z = _logit(weights) if weights is not None else np.arange(len(keys), dtype=np.float64)
    binary = _table_metrics(table) is METRICS
    solid, dashed = ("ece", "ece_debiased") if binary else ("top_label_ece", "classwise_ece")
    names = ("ECE (deciles)", "debiased l2 error")
    if not binary:
        names = ("top-label ECE", "class-wise ECE")
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    styles = {
        "raw": ("tab:blue", "raw weighted scores"),
        "loss_corrected": ("tab:red", "loss-corrected scores"),
    }
    for method, (color, label) in styles.items():
        first = [row[method][solid] for row in table.values()]
        second = [row[method][dashed] for row in table.values()]
        ax.plot(z, first, "-", marker="o", ms=2.5, color=color, label=f"{label}: {names[0]}",
                gid=f"ece-{method}")  # fmt: skip
        ax.plot(z, second, "--", marker="o" if weights is None else None, ms=2.5, color=color,
                lw=1.0, label=f"{label}: {names[1]}", gid=f"debiased-{method}")  # fmt: skip
    if weights is None:
        ax.set_xticks(z, keys, rotation=30 if len(keys) > 3 else 0, fontsize="small")
        ax.set_xlabel("loss")
    else:
        if prevalence is not None and 0 < prevalence < 1:
            ax.axvline(_logit(1 - prevalence), color="gray", ls=":", lw=1.0,
                       label=f"{weight_name} = 1 - prevalence")  # fmt: skip
        ticks = [
            t
            for t in (0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99)
            if weights.min() - 1e-9 <= t <= weights.max() + 1e-9
        ]
        ax.set_xticks(_logit(np.asarray(ticks)), [f"{t:g}" for t in ticks])
        ax.set_xlabel(f"class weight {weight_name} (logit scale)")
    ax.set_yscale("log")
    ax.set_ylabel("calibration error")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return fig


# ----------------------------------------------------------------------------------------------
# The sweep: chunks of betas, out-of-fold scores, the ensemble and the table
# ----------------------------------------------------------------------------------------------


class SweepResult(NamedTuple):
    """Out-of-fold scores of a sweep over a grid of ``m`` losses and their metrics.

    Attributes:
      betas: ``[m]`` class weights (:func:`grid_weights`: beta, or a focal grid's alpha), or
        None for grids that one weight does not describe (weight matrices ``B``, ...).
      seeds: ``[S]`` seeds.
      labels: ``[N]`` labels (class indices for multiclass losses).
      fold_ids: ``[N]`` fold of every observation.
      member_scores: ``[m, S, N(, n)]`` each (loss, seed)'s out-of-fold score of every
        observation (from the rotation whose test fold holds it).
      scores: ``[m, N(, n)]`` the ensemble: the mean over seeds of ``member_scores``.
      corrected: ``[m, N(, n)]`` the loss-corrected ensemble scores ``(c^L)^{-1}(scores)``
        (Proposition 4; ``g^beta``, Corollary 1, for a beta).
      best_epoch: ``[m, S, R]`` each member's early-stopping epoch.
      table: ``table[key][method][metric]`` (see :func:`sweep_table`).
      chunks_trained: indices of the chunks trained by this call (the others came from the store).
      losses: the grid (a :class:`iml.LossSpec` with batch shape ``(m,)``).
      keys: the table's key of each loss (:func:`grid_keys`).
    """

    betas: np.ndarray
    seeds: np.ndarray
    labels: np.ndarray
    fold_ids: np.ndarray
    member_scores: np.ndarray
    scores: np.ndarray
    corrected: np.ndarray
    best_epoch: np.ndarray
    table: dict[str, dict[str, dict[str, float]]]
    chunks_trained: list[int]
    losses: LossSpec | None = None
    keys: list[str] | None = None


def _train_chunk(
    features: np.ndarray,
    labels: np.ndarray,
    splits: Sequence[FoldSplit],
    losses: LossGrid,
    seeds: np.ndarray,
    config: TrainConfig,
    progress: bool | str,
) -> dict[str, np.ndarray]:
    """Train one chunk of losses (all seeds and rotations); its out-of-fold logits and epochs."""
    fit = train_members(features, labels, splits, losses, seeds, config, progress=progress)
    return {
        "oof_logits": out_of_fold_logits(fit.test_logits, splits, features.shape[0]),
        "best_epoch": fit.best_epoch,
        "best_val": fit.best_val,
        "epochs_run": np.asarray(fit.epochs_run),
    }


def data_fingerprint(features: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> str:
    """sha256 of the features, labels and groups: a resumed run must see the same data."""
    h = hashlib.sha256()
    for a in (features, labels, groups):
        a = np.ascontiguousarray(a)
        h.update(str((a.shape, a.dtype.str)).encode())
        h.update(a.tobytes() if a.dtype.kind != "O" else repr(a.tolist()).encode())
    return h.hexdigest()


class SweepPlan(NamedTuple):
    """A checked sweep, ready to train (:func:`plan_sweep`)."""

    features: np.ndarray
    labels: np.ndarray
    losses: LossGrid
    seeds: np.ndarray
    config: TrainConfig
    fold_ids: np.ndarray
    splits: list[FoldSplit]
    chunks: list[np.ndarray]  # indices into the grid of losses
    n_bins: int
    run_config: dict[str, Any]


def plan_sweep(
    features: ArrayLike,
    labels: ArrayLike,
    groups: ArrayLike | None,
    losses: LossLike,
    *,
    seeds: int | Sequence[int] = 8,
    model: str = "logistic",
    hidden: int = 32,
    max_epochs: int = 100,
    batch_size: int = 512,
    learning_rate: float = 0.01,
    l2: float = 0.0,
    patience: int = 5,
    solver: str = "auto",
    n_folds: int = 10,
    fold_seed: int = 0,
    betas_per_chunk: int = 16,
    n_bins: int = 10,
    run_info: dict[str, Any] | None = None,
) -> SweepPlan:
    """Check a sweep's data and settings and lay out its work, training nothing.

    Takes the arguments of :func:`run_sweep` but ``store`` and ``progress``. The plan's
    ``run_config`` is what a results store records, so that
    ``RunStore(out).check_resumable(plan.run_config)`` tells before any work whether ``out`` can
    hold (or resume) this sweep.

    Raises:
      ValueError: for bad arrays or settings, naming the argument.
    """
    x = np.asarray(features, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"features must be a non-empty [N, d] array, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("features contain NaN or infinite values")
    grid = loss_grid(losses)
    spec = grid.spec
    y = _check_labels(labels, x.shape[0], spec)
    g = np.arange(x.shape[0]) if groups is None else np.asarray(groups)
    if g.shape != (x.shape[0],):
        raise ValueError(f"groups must have shape ({x.shape[0]},), got {g.shape}")
    s = _check_seeds(seeds)
    config = TrainConfig(
        model=model,
        hidden=hidden,
        max_epochs=max_epochs,
        batch_size=batch_size,
        learning_rate=float(learning_rate),
        l2=float(l2),
        patience=patience,
        solver=solver,
    )
    if config.exact and not _exact_solver_applies(spec):
        if solver == "exact":
            raise ValueError(
                f"solver 'exact' fits the beta-weighted log loss only, not the "
                f"{spec.describe()}; use 'adam'"
            )
        config = dataclasses.replace(config, solver="adam")
    if (
        isinstance(betas_per_chunk, bool)
        or not isinstance(betas_per_chunk, int)
        or betas_per_chunk < 1
    ):
        raise ValueError(f"betas_per_chunk must be a positive integer, got {betas_per_chunk!r}")
    fold_ids = assign_folds(x.shape[0], n_folds=n_folds, groups=g, labels=y, seed=fold_seed)
    splits = nested_cv_splits(fold_ids, n_folds=n_folds)
    (m,) = spec.batch_shape
    chunks = [np.arange(i, min(i + betas_per_chunk, m)) for i in range(0, m, betas_per_chunk)]
    if _exact_solver_applies(spec):  # the default grid keeps the layout of earlier runs
        recorded: dict[str, Any] = {"betas": grid.weights.tolist()}
    else:  # a callable cannot be written down: its name stands for it
        recorded = {"loss": spec.describe() if spec.kind == "callable" else spec.to_config()}
    run_config = {
        **recorded,
        "seeds": s.tolist(),
        "train": dataclasses.asdict(config),
        "n_folds": n_folds,
        "fold_seed": fold_seed,
        "betas_per_chunk": betas_per_chunk,
        "n_bins": n_bins,
        "data_sha256": data_fingerprint(x, y, g),
        **(run_info or {}),
    }
    return SweepPlan(x, y, grid, s, config, fold_ids, splits, chunks, n_bins, run_config)


def run_sweep(
    features: ArrayLike,
    labels: ArrayLike,
    groups: ArrayLike | None,
    losses: LossLike,
    *,
    seeds: int | Sequence[int] = 8,
    model: str = "logistic",
    hidden: int = 32,
    max_epochs: int = 100,
    batch_size: int = 512,
    learning_rate: float = 0.01,
    l2: float = 0.0,
    patience: int = 5,
    solver: str = "auto",
    n_folds: int = 10,
    fold_seed: int = 0,
    betas_per_chunk: int = 16,
    n_bins: int = 10,
    store: RunStore | None = None,
    progress: bool = True,
    run_info: dict[str, Any] | None = None,
) -> SweepResult:
    """Train a grid of losses (by default of class weights beta) of small models by nested
    cross-validation and score their calibration.

    Folds are :func:`iml.data.assign_folds` (grouped by ``groups``, stratified by label) and the
    rotations the paper's 7-2-1 (with 10 folds; otherwise 2 validation folds, 1 test fold and
    the rest for training). For every loss, seed and rotation one member is trained
    (:func:`train_members`); every observation gets one out-of-fold score per (loss, seed),
    averaged over seeds into the ensemble score, whose raw and loss-corrected versions are scored
    by :func:`sweep_table`.

    Any loss :func:`iml.loss_spec` reads makes a grid (:func:`loss_grid`)::

        run_sweep(x, y, None, beta_grid(64))                               # beta-weighted log loss
        run_sweep(x, y, None, loss_spec("focal", gamma=2.0, alpha=alphas))  # focal, alpha grid
        run_sweep(x, classes, None, np.stack([ones, upweighted]))          # B matrices [m, n, n]

    Multiclass losses take class indices as labels and train ``n`` outputs per member.

    A pandas DataFrame is encoded first (one-hot categories, z-scored numbers, missing values
    imputed and flagged: :func:`iml.data.tabular.encode_table`)::

        table = encode_table(frame, "y", positive="yes")
        result = run_sweep(table.features, table.labels, None, beta_grid(16), seeds=4)

    Args:
      features: ``[N, d]`` finite inputs (standardised columns train best).
      labels: ``[N]`` labels in ``{0, 1}``, or class indices for multiclass losses.
      groups: ``[N]`` group ids kept within one fold (e.g. patients), or None.
      losses: ``[m]`` class weights in ``(0, 1)``, no repeats, or any grid of losses
        (:func:`loss_grid`).
      seeds: number of seeds (``0..seeds-1``) or the seeds themselves.
      model: ``"logistic"`` or ``"mlp"`` (one ReLU hidden layer of ``hidden`` units).
      hidden, max_epochs, batch_size, learning_rate, l2, patience, solver: see
        :class:`TrainConfig` (by default the logistic model is fitted exactly under the
        beta-weighted log loss; other losses train by Adam).
      n_folds: folds of the nested cross-validation.
      fold_seed: seed of the fold assignment.
      betas_per_chunk: losses trained together (with all seeds and rotations) per chunk; a
        chunk is the unit of memory and of resumption.
      n_bins: bins of the calibration errors.
      store: a :class:`RunStore`: finished chunks and the table are stored there, and chunks
        already stored (by a run with the same configuration and data) are not trained again.
      progress: show tqdm bars (chunks, and epochs within a chunk).
      run_info: extra JSON-able facts recorded in the store's config (e.g. the data source).

    Returns:
      A :class:`SweepResult`.

    Raises:
      ValueError: for bad arrays or settings (naming the argument), or a store holding a run
        with another configuration.
    """
    plan = plan_sweep(
        features,
        labels,
        groups,
        losses,
        seeds=seeds,
        model=model,
        hidden=hidden,
        max_epochs=max_epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        l2=l2,
        patience=patience,
        solver=solver,
        n_folds=n_folds,
        fold_seed=fold_seed,
        betas_per_chunk=betas_per_chunk,
        n_bins=n_bins,
        run_info=run_info,
    )
    return execute_sweep(plan, store, progress)


def execute_sweep(
    plan: SweepPlan, store: RunStore | None = None, progress: bool = True
) -> SweepResult:
    """Train and score the sweep laid out by :func:`plan_sweep` (see :func:`run_sweep`)."""
    x, y, grid, s, config, fold_ids, splits, chunks = plan[:8]
    spec = grid.spec
    if store is not None:
        store.open_run(plan.run_config, devices=[str(d) for d in jax.devices()])
    results, trained = [], []
    for c, chunk in enumerate(_progress_iter(chunks, progress, "chunks")):
        key = f"chunks/{c:04d}"
        if store is not None and store.has(key):
            results.append(store.load_arrays(key))
            continue
        desc = f"chunk {c + 1}/{len(chunks)} epochs" if progress else False
        part = LossGrid(spec[chunk], None if grid.weights is None else grid.weights[chunk],
                        [grid.keys[i] for i in chunk])  # fmt: skip
        arrays = _train_chunk(x, y, splits, part, s, config, desc)
        if store is not None:
            store.save_arrays(key, **arrays)
        results.append(arrays)
        trained.append(c)
    oof = np.concatenate([r["oof_logits"] for r in results], axis=1)  # [S, m, N(, n)]
    member_scores = scores_from_logits(spec, np.swapaxes(oof, 0, 1))  # [m, S, N(, n)]
    scores = member_scores.mean(axis=1)
    corrected = loss_corrected_scores(spec, scores)
    table = sweep_table(grid, scores, y, n_bins=plan.n_bins)
    if store is not None:
        store.save_json("sweep_table", table)
    return SweepResult(
        betas=grid.weights,
        seeds=s,
        labels=y,
        fold_ids=fold_ids,
        member_scores=member_scores,
        scores=scores,
        corrected=corrected,
        best_epoch=np.swapaxes(np.concatenate([r["best_epoch"] for r in results], axis=1), 0, 1),
        table=table,
        chunks_trained=trained,
        losses=spec,
        keys=grid.keys,
    )


def _progress_iter(items: Sequence[Any], progress: bool, desc: str) -> Any:
    if not progress or len(items) <= 1:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, file=sys.stderr)


# ----------------------------------------------------------------------------------------------
# The command: `iml sweep` (and `python -m iml.pipeline.sweep`)
# ----------------------------------------------------------------------------------------------

_UCI_FILES = {
    "adult": ("adult.data", "adult.test", "adult.names"),
    "letter": ("letter-recognition.data",),
}
# Built-in datasets of the sweep that need no files; images are flattened into features.
_BUILT_IN = ("digits",)
# The losses `iml sweep --loss` trains, and what each one's grid is made of.
SWEEP_LOSSES = {
    "log": "betas",
    "squared": "betas",
    "focal": "alphas",
    "matrix": "weights",
    "class_weighted_softmax": "weights",
}


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``iml sweep`` to ``parser``."""
    source = parser.add_argument_group("data (one of --csv or --dataset)")
    which = source.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--csv",
        metavar="PATH",
        help="a delimited text file with a header row (comma, semicolon, tab or | separated; "
        "quotes, a UTF-8 byte-order mark and Windows line ends are fine)",
    )
    which.add_argument(
        "--dataset",
        choices=sorted([*_UCI_FILES, *_BUILT_IN]),
        help="a UCI dataset (adult, letter: --data-dir) or the built-in digits (8 x 8 pixels as "
        "64 features; label 1 for the digit 8, or all 10 classes with --classes all)",
    )
    source.add_argument(
        "--classes",
        choices=("binary", "all"),
        default="binary",
        help="binary (default): the positive class against the rest; all: every class of "
        "--dataset digits or letter, for the multiclass losses",
    )
    source.add_argument("--target", metavar="COLUMN", help="target column of --csv")
    source.add_argument(
        "--positive",
        metavar="VALUE",
        help="positive target value of --csv (default: the target is 0/1 or true/false), or "
        "the positive letter(s) of --dataset letter (default O, a ~4%% class)",
    )
    source.add_argument(
        "--delimiter",
        metavar="CHAR",
        help="field separator of --csv: one character, or tab (default: detected among "
        "comma, semicolon, tab and |)",
    )
    source.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder of the UCI files, as downloaded from the UCI Machine Learning Repository: "
        "letter-recognition.data (Letter Recognition) or adult.data, adult.test and adult.names "
        "(Adult)",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (resumable)")
    grid = parser.add_argument_group("the loss and its grid of class weights")
    grid.add_argument(
        "--loss",
        choices=sorted(SWEEP_LOSSES),
        default="log",
        help="log (default: the beta-weighted cross-entropy), squared (beta-weighted), focal "
        "(--gamma, with the beta grid as its weight alpha), or the multiclass matrix (the "
        "B-weighted log loss, one sigmoid per class) and class_weighted_softmax (--weights)",
    )
    grid.add_argument("--gamma", type=float, help="focal loss's gamma (default 2)")
    grid.add_argument(
        "--weights",
        metavar="W1;W2;...",
        help="the grid of a multiclass loss, ';'-separated: 'ones' (unweighted) or the entries "
        "that differ from 1, e.g. 'ones;B[8,8]=10;B[3,8]=10' (matrix) or 'ones;w[8]=10' "
        "(class_weighted_softmax), classes counted from 0",
    )
    grid.add_argument("--betas", metavar="B1,B2,...", help="explicit betas in (0, 1)")
    grid.add_argument("--n-betas", type=int, default=64, help="grid size (default 64)")
    grid.add_argument("--beta-min", type=float, default=0.01, help="smallest beta (default 0.01)")
    grid.add_argument("--beta-max", type=float, default=0.99, help="largest beta (default 0.99)")
    train = parser.add_argument_group("training")
    train.add_argument("--seeds", type=int, default=8, help="seeds per beta (default 8)")
    train.add_argument("--model", choices=MODELS, default="logistic")
    train.add_argument("--hidden", type=int, default=32, help="MLP hidden units")
    train.add_argument("--epochs", type=int, default=100, help="most epochs")
    train.add_argument("--batch-size", type=int, default=512)
    train.add_argument("--lr", type=float, default=0.01, help="Adam learning rate")
    train.add_argument("--l2", type=float, default=0.0, help="L2 penalty on the weights")
    train.add_argument("--patience", type=int, default=5, help="early-stopping patience")
    train.add_argument(
        "--solver",
        choices=SOLVERS,
        default="auto",
        help="exact: full-batch Newton to the optimum (logistic only; seeds then coincide); "
        "adam: minibatch Adam with early stopping; auto (default): exact for logistic, adam for "
        "mlp",
    )
    train.add_argument("--n-folds", type=int, default=10)
    train.add_argument("--fold-seed", type=int, default=0)
    train.add_argument("--betas-per-chunk", type=int, default=16, help="betas per chunk")
    parser.add_argument("--n-bins", type=int, default=10, help="bins of the ECE (deciles)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


# The flag of `iml sweep` that stands for each argument of iml.data.load_csv.
_CSV_FLAGS = {
    "path": "--csv",
    "frame": "--csv",
    "target": "--target",
    "positive": "--positive",
    "delimiter": "--delimiter",
}


def _parse_betas(args: argparse.Namespace) -> np.ndarray:
    if args.betas:
        try:
            values = [float(v) for v in str(args.betas).split(",") if v.strip()]
        except ValueError as err:
            raise ValueError(
                f"--betas must be comma-separated numbers, got {args.betas!r}"
            ) from err
        return V.check_betas("--betas", values)
    try:
        return beta_grid(args.n_betas, args.beta_min, args.beta_max)
    except ValueError as err:
        raise ValueError(f"--n-betas/--beta-min/--beta-max: {err}") from err


_ENTRY = re.compile(r"^\s*(\w+)\[([\d,\s]+)\]\s*=\s*([^,\s]+)\s*$")


def parse_weight_grid(text: str, loss: str) -> list[dict[tuple[int, ...], float]]:
    """The grid of ``--weights``: per loss, the entries of ``B`` (``matrix``) or of the class
    weights ``w`` (``class_weighted_softmax``) that differ from 1.

    ``"ones;B[8,8]=10;B[3,8]=10,B[8,3]=10"`` gives three losses: unweighted, one diagonal entry
    10, two off-diagonal entries 10 (the syntax of :func:`grid_keys`).

    Raises:
      ValueError: naming ``--weights`` and the part it cannot read.
    """
    name, rank = ("B", 2) if loss == "matrix" else ("w", 1)
    grid = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        entries: dict[tuple[int, ...], float] = {}
        if part != "ones":
            for item in re.split(r",(?=\s*\w+\[)", part):
                match = _ENTRY.match(item)
                if match is None or match[1] != name:
                    raise ValueError(
                        f"--weights: cannot read {item.strip()!r}; the {loss} loss's entries "
                        f"read like {name}[{','.join(['3'] * rank)}]=10 (or 'ones')"
                    )
                index = tuple(int(i) for i in match[2].split(","))
                try:
                    value = float(match[3])
                except ValueError:
                    raise ValueError(f"--weights: {match[3]!r} is not a number") from None
                if len(index) != rank:
                    raise ValueError(
                        f"--weights: {name} takes {rank} indices, got {item.strip()!r}"
                    )
                if not (math.isfinite(value) and value > 0):
                    raise ValueError(f"--weights: weights must be positive, got {item.strip()!r}")
                entries[index] = value
        grid.append(entries)
    if not grid:
        raise ValueError("--weights is empty")
    return grid


def weight_grid(entries: Sequence[Mapping[tuple[int, ...], float]], loss: str, n: int) -> Any:
    """The grid of ``n``-class losses :func:`parse_weight_grid` describes: a batched
    :class:`iml.LossSpec`."""
    shape = (n, n) if loss == "matrix" else (n,)
    stack = np.ones((len(entries), *shape))
    for k, changed in enumerate(entries):
        for index, value in changed.items():
            if max(index) >= n:
                raise ValueError(
                    f"--weights: index {list(index)} is out of range for {n} classes "
                    f"(classes count from 0)"
                )
            stack[(k, *index)] = value
    if loss == "matrix":
        return loss_spec("matrix", B=stack)
    return loss_spec("class_weighted_softmax", class_weights=stack)


def _check_uci(name: str, data_dir: str | None) -> Path:
    if not data_dir:
        raise ValueError(f"--dataset {name} needs --data-dir (the folder of {_UCI_FILES[name][0]})")
    folder = Path(data_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"--data-dir: folder not found: {folder}")
    for file_name in _UCI_FILES[name]:
        if not (folder / file_name).is_file():
            raise FileNotFoundError(
                f"--data-dir: {folder / file_name} not found (needed by {name})"
            )
    return folder


class _Command(NamedTuple):
    """``iml sweep``'s checked arguments."""

    source: dict[str, Any]
    loss: str
    grid: Any  # betas (log, squared), alphas (focal) or parsed --weights (multiclass)
    gamma: float
    config: TrainConfig


def _plan(args: argparse.Namespace) -> _Command:
    """Check every argument before any file is read."""
    multiclass = SWEEP_LOSSES[args.loss] == "weights"
    if multiclass:
        if not args.weights:
            raise ValueError(f"--loss {args.loss} needs --weights (e.g. 'ones;B[8,8]=10')")
        grid: Any = parse_weight_grid(args.weights, args.loss)
        if args.betas or args.gamma is not None:
            flag = "--betas" if args.betas else "--gamma"
            raise ValueError(f"{flag} does not apply to --loss {args.loss}; its grid is --weights")
    else:
        if args.weights:
            raise ValueError(f"--weights applies to the multiclass losses, not --loss {args.loss}")
        if args.gamma is not None and args.loss != "focal":
            raise ValueError(f"--gamma applies to --loss focal, not --loss {args.loss}")
        grid = _parse_betas(args)
    gamma = 2.0 if args.gamma is None else args.gamma
    if not (math.isfinite(gamma) and gamma >= 0):
        raise ValueError(f"--gamma must be a non-negative number, got {args.gamma}")
    if args.seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
    for flag, value in (("--n-folds", args.n_folds), ("--betas-per-chunk", args.betas_per_chunk)):
        if value < 1:
            raise ValueError(f"{flag} must be positive, got {value}")
    if args.n_folds < 4:
        raise ValueError(f"--n-folds must be at least 4 (train/2 val/1 test), got {args.n_folds}")
    solver = args.solver
    if args.loss != "log" and solver == "exact":
        raise ValueError(f"--solver exact fits --loss log only, not --loss {args.loss}")
    if args.loss != "log" and solver == "auto":
        solver = "adam"
    try:
        config = TrainConfig(
            model=args.model,
            hidden=args.hidden,
            max_epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.lr,
            l2=args.l2,
            patience=args.patience,
            solver=solver,
        )
    except ValueError as err:
        raise ValueError(f"training option: {err}") from err
    if bool(args.csv) == bool(args.dataset):
        raise ValueError("give exactly one of --csv PATH or --dataset adult|digits|letter")
    if (args.classes == "all") != multiclass:
        if multiclass:
            raise ValueError(f"--loss {args.loss} is multiclass: add --classes all")
        raise ValueError(
            f"--classes all needs a multiclass --loss (matrix, class_weighted_softmax), "
            f"not {args.loss}"
        )
    if args.classes == "all" and args.dataset not in ("digits", "letter"):
        raise ValueError("--classes all applies to --dataset digits and letter")
    if args.csv:
        if not args.target:
            raise ValueError("--csv needs --target COLUMN")
        source = {"name": "csv", "path": args.csv, "target": args.target}
        for option in ("positive", "delimiter"):
            if getattr(args, option) is not None:
                source[option] = getattr(args, option)
        return _Command(source, args.loss, grid, gamma, config)
    for option in ("target", "delimiter"):
        if getattr(args, option) is not None:
            flag = "--" + option
            raise ValueError(f"{flag} applies to --csv only, not --dataset {args.dataset}")
    if args.dataset in _BUILT_IN:
        source = {"name": args.dataset}
        if args.data_dir:
            if not Path(args.data_dir).is_dir():
                raise FileNotFoundError(f"--data-dir: folder not found: {args.data_dir}")
            source["data_dir"] = args.data_dir
        if args.positive is not None:
            if args.classes == "all":
                raise ValueError("--positive does not apply to --classes all")
            if not (args.positive.isdigit() and len(args.positive) == 1):
                raise ValueError(
                    f"--positive of --dataset digits is one digit, got {args.positive!r}"
                )
            source["positive_digit"] = int(args.positive)
        return _Command(source, args.loss, grid, gamma, config)
    folder = _check_uci(args.dataset, args.data_dir)
    source = {"name": args.dataset, "manual_dir": str(folder)}
    if args.positive is not None:
        if args.dataset != "letter":
            raise ValueError("--positive applies to --csv, --dataset letter and digits only")
        if args.classes == "all":
            raise ValueError("--positive does not apply to --classes all")
        source["positive_letter"] = args.positive
    return _Command(source, args.loss, grid, gamma, config)


def _load(source: dict[str, Any]) -> Any:
    """The dataset named by the checked arguments; errors worded with the command's flags."""
    from iml.data import load_dataset

    options = dict(source)
    name = options.pop("name")
    try:
        return load_dataset(name, **options)
    except ArgumentError as err:
        raise err.for_flags(_CSV_FLAGS) from None


def _features(dataset: Any) -> np.ndarray:
    """The sweep's ``[N, d]`` features: tabular rows as loaded; images flattened and z-scored
    pixel by pixel (pixels constant over the data stay 0)."""
    x = dataset.get_batch(np.arange(dataset.num_examples))
    if dataset.kind == "tabular":
        return x
    x = x.reshape(len(x), -1).astype(np.float32)
    sd = x.std(axis=0)
    return ((x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)).astype(np.float32)


def _grid_of(command: _Command, n_classes: int) -> Any:
    if command.loss == "log":
        return command.grid  # the betas themselves: exact keys
    if command.loss == "squared":
        return loss_spec("squared", beta=command.grid)
    if command.loss == "focal":
        return loss_spec("focal", gamma=command.gamma, alpha=command.grid)
    return weight_grid(command.grid, command.loss, n_classes)


def _file_name(key: str) -> str:
    return re.sub(r"[^\w.=-]+", "_", key).strip("_") or "loss"


def _save_outputs(
    out: Path,
    result: SweepResult,
    prevalence: float | None,
    title: str,
    class_names: Sequence[str] | None = None,
) -> list[Path]:
    """Write the Markdown table, the scores and the figures, each file atomically."""
    from iml.plots import reliability_by_class, save_figure

    key_name = "beta" if result.betas is not None else "loss"
    if result.losses is not None and result.losses.kind == "focal" and result.betas is not None:
        key_name = "alpha"
    atomic_write_text(out / "sweep_table.md", table_markdown(result.table, key_name))
    buffer = io.BytesIO()
    arrays = {"keys": np.asarray(result.keys), "labels": result.labels,
              "fold_ids": result.fold_ids, "scores": result.scores.astype(np.float32),
              "corrected": result.corrected.astype(np.float32)}  # fmt: skip
    if result.betas is not None:
        arrays["betas"] = result.betas
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(out / "scores.npz", buffer.getvalue())
    fig = ece_figure(result.table, prevalence=prevalence, title=title, weight_name=key_name)
    paths = save_figure(fig, out / "ece_vs_beta")
    if result.scores.ndim == 3:
        for key, raw, fixed in zip(result.keys, result.scores, result.corrected, strict=True):
            fig = reliability_by_class(raw, result.labels, fixed, class_names,
                                       title=f"{title}: {key}")  # fmt: skip
            paths += save_figure(fig, out / "reliability_by_class" / _file_name(key))
    return paths


def prepare_sweep_command(args: argparse.Namespace) -> Callable[[], int]:
    """Check ``iml sweep``'s arguments and data; return the work, which returns exit status 0.

    Everything that can be wrong with the input is found here, before any model is trained or
    any output written: the options, the files, and the data itself (the CSV is read and
    encoded here, so a missing column, an unknown ``--positive`` value or an undetectable
    delimiter is reported now). The returned function trains, writes the outputs and prints a
    summary; an exception raised there (a failure during the work) propagates.

    Raises:
      ValueError: for bad input, naming the flag (``--target``, ``--positive``, ...), the
        column and the values found.
      FileNotFoundError: for a missing file or folder, naming the flag.
    """
    command = _plan(args)
    dataset = _load(command.source)
    name = command.source["name"]
    x = _features(dataset)
    multiclass = args.classes == "all"
    labels = dataset.classes if multiclass else dataset.labels
    class_names = dataset.class_names if multiclass else None
    losses = _grid_of(command, len(class_names) if multiclass else 2)
    out = Path(args.out)
    config = command.config

    try:
        plan = plan_sweep(
            x,
            labels,
            dataset.groups,
            losses,
            seeds=args.seeds,
            model=config.model,
            hidden=config.hidden,
            max_epochs=config.max_epochs,
            batch_size=config.batch_size,
            learning_rate=config.learning_rate,
            l2=config.l2,
            patience=config.patience,
            solver=config.solver,
            n_folds=args.n_folds,
            fold_seed=args.fold_seed,
            betas_per_chunk=args.betas_per_chunk,
            n_bins=args.n_bins,
            run_info={"data": command.source},
        )
    except ValueError as err:
        raise ValueError(f"--csv/--dataset: {err}") from None
    store = RunStore(out)
    try:
        store.check_resumable(plan.run_config)
    except ValueError as err:
        raise ValueError(f"--out: {err}") from None

    def work() -> int:
        result = execute_sweep(plan, store, progress=not args.no_progress)
        what = "" if command.loss == "log" else f"{command.loss} loss, "
        title = (
            f"{name}: {what}{len(result.keys)} losses x {len(result.seeds)} seeds, {config.model}"
        )
        prevalence = None if multiclass else dataset.prevalence
        paths = _save_outputs(out, result, prevalence, title, class_names)
        metric, shown = ("top_label_ece", "top-label ECE") if multiclass else ("ece", "ECE")
        worst = max(row["raw"][metric] for row in result.table.values())
        corrected = [row["loss_corrected"][metric] for row in result.table.values()]
        where = (
            f"{len(class_names)} classes" if multiclass else f"prevalence {dataset.prevalence:.4f}"
        )
        print(
            f"{name}: N={dataset.num_examples}, {where}; raw {shown} up to {worst:.4f}; "
            f"loss-corrected {shown} {min(corrected):.4f}..{max(corrected):.4f}; "
            f"trained chunks {result.chunks_trained}"
        )
        written = [out / "sweep_table.json", out / "sweep_table.md", out / "scores.npz", *paths]
        print("wrote " + ", ".join(map(str, written)))
        return 0

    return work


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run ``iml sweep`` from parsed arguments; returns the exit status.

    Bad input (:func:`prepare_sweep_command`) is printed as one line, ``iml sweep: error: ...``,
    with status 2 before any work starts; a failure during the work raises.
    """
    try:
        work = prepare_sweep_command(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"iml sweep: error: {err}", file=sys.stderr)
        return 2
    return work()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m iml.pipeline.sweep``: the same options as ``iml sweep``."""
    parser = argparse.ArgumentParser(
        prog="python -m iml.pipeline.sweep",
        description="Train a fine grid of class weights (betas) of small models as one "
        "vectorized program; plot ECE against beta for raw and loss-corrected scores.",
    )
    add_sweep_arguments(parser)
    return run_sweep_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
