"""Training a beta ensemble as one program: K members in one jitted, sharded step.

Each member (:class:`MemberSpec`) has its own loss (a positive-class weight ``beta``, eq.
``b-loss-bin`` of the paper, or any :class:`iml.LossSpec`), seed, data fold, parameters,
BatchNorm statistics, Adam state, learning-rate schedule and early stopping; all of them advance
together in one compiled step over a ``('ensemble', 'data')`` device mesh
(:mod:`iml.training.sharding`). The recipe follows the
paper's Section 5 (after CheXNet): Adam (0.9, 0.999) at learning rate 1e-4, divided by 10 when the
validation loss plateaus, early stopping on the validation loss keeping the best parameters,
mini-batches of 16, random horizontal flips, ImageNet normalisation, BatchNorm in eval mode at
test time.

Everything random in training comes from ``(seed, member, epoch)``: the order of each member's
training examples and its flips are drawn on the host from ``numpy.random.default_rng((seed,
member, epoch))``, and the initial parameters from ``jax.random.key(seed)``. A run restarted from a
checkpoint (:class:`EnsembleCheckpointer`, crash-safe through orbax) therefore replays exactly
what the interrupted run would have done.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import linen as nn
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm.auto import tqdm

from iml import _validation as V
from iml.spec import LossSpec, loss_spec
from iml.training.member import (
    MemberState,
    adam,
    batch_members,
    end_of_epoch,
    init_member_state,
    member_eval_step,
    member_in_place,
    member_predict,
    member_train_step,
    skip_idle_members,
)
from iml.training.sharding import (
    DATA_AXIS,
    ENSEMBLE_AXIS,
    global_batch,
    make_mesh,
    per_device_member_loop,
    per_device_members,
    replicated,
)

__all__ = [
    "DEFAULT_MEMBER_BATCHING",
    "L2_GRID",
    "L2_SCALES",
    "SOLVERS",
    "DataSource",
    "EnsembleCheckpointer",
    "MemberHistory",
    "MemberSpec",
    "TrainConfig",
    "epoch_order",
    "init_ensemble",
    "is_out_of_memory",
    "member_losses",
    "predict_ensemble",
    "resolve_member_batching",
    "train_ensemble",
]

logger = logging.getLogger(__name__)

# How members are batched, per backend. Chosen by measurement with
# `python -m experiments.benchmarks.ensemble` (K=8 small DenseNets, 28x28x1, batch 16 per member;
# ratio of member-images/s over 8 single-model steps in a row with the same convolutions).
# CPU (2 cores; docs/results/cpu_ensemble): 'map' with 'mixed' convolutions on the trainer's mesh
# of one CPU device per core (each device maps over its own members inside one shard_map program:
# per_device_members) is the fastest in every recorded run, 1.57-1.81x; on one device 'map' gives
# 1.15-1.38x and 'loop' 1.00-1.03x, and 'map' with 'xla' convolutions is slow (0.10-0.12), so the
# CPU default is map (the models' default convolutions per backend are
# iml.models.DEFAULT_CONV_IMPL).
# GPU (one H200, docs/results/gpu_h200): vmap/xla, 7.28x. TPU has no measurement; vmap is the
# usual choice there.
DEFAULT_MEMBER_BATCHING: dict[str, str] = {"cpu": "map", "gpu": "vmap", "tpu": "vmap"}

_NORMALIZATIONS = ("imagenet", "none")

#: The solvers of :attr:`TrainConfig.solver`.
SOLVERS = ("auto", "exact", "adam")
#: What a ridge coefficient ``l2`` is measured against (``TrainConfig.l2_scale``): ``"paper"``,
#: the loss itself, so that ``l2 / 2 ||W||^2`` is a fixed cost in the paper's units at every
#: class weight (the costly-learning model's assumption); ``"per_weight"``, the loss's total
#: weight over the member's training rows, so that the penalty trades off against the data
#: alike at every beta, ``B`` or ``w`` (multiplying every sample weight by a constant leaves the
#: fit unchanged).
L2_SCALES = ("paper", "per_weight")
#: The ridge coefficients ``TrainConfig.l2 = "auto"`` chooses among (per loss and rotation, on
#: the validation folds): decades from 1e-6 to 1.
L2_GRID = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)


# ----------------------------------------------------------------------------------------------
# Specifications: members, data, configuration, history
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MemberSpec:
    """One ensemble member.

    Attributes:
      beta: weight of the positive class in the loss, in ``(0, 1)`` (eq. ``b-loss-bin``); the
        member's class weight in messages and results. ``None`` for a member whose ``loss`` has
        no single class weight (a multiclass loss).
      seed: non-negative seed of its initial parameters and of its data order and flips.
      train_idx: indices into the shared data source of its training examples.
      val_idx: indices of its validation examples (early stopping, learning-rate decay).
      test_idx: optional indices of its test examples (for :func:`predict_ensemble`).
      fold: optional name of its data fold, used in messages.
      lr: optional initial learning rate overriding ``TrainConfig.learning_rate``.
      loss: optional loss replacing the beta-weighted log loss of ``beta``: anything
        :func:`iml.loss_spec` reads (focal, squared, a weight matrix ``B`` for a multiclass model,
        ...). All members of an ensemble take losses of one kind.
    """

    beta: float | None
    seed: int
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray | None = None
    fold: int | str | None = None
    lr: float | None = None
    loss: Any = None

    def loss_spec(self) -> LossSpec:
        """The member's loss as a :class:`iml.LossSpec`."""
        return loss_spec(self.beta if self.loss is None else self.loss)

    def describe(self, index: int) -> str:
        """A short name for messages: index, beta, seed and fold."""
        weight = f"beta={self.beta}" if self.beta is not None else self.loss_spec().describe()
        return f"member {index} ({weight}, seed={self.seed}, fold={self.fold})"


@dataclasses.dataclass(frozen=True)
class DataSource:
    """Random access to a labelled dataset shared by all members: images, or a table's rows.

    Attributes:
      get_batch: maps an integer index array ``[n]`` to images ``[n, H, W, C]``, ``uint8`` in
        ``[0, 255]`` or floating point in ``[0, 1]`` (an in-memory array's ``__getitem__``, or a
        reader of a random-access file format), or to floating-point feature rows ``[n, d]``
        (trained with ``flip=False, normalize='none'``; :func:`train_tabular` trains many members
        of one table faster, sharing its minibatches on the device).
      labels: ``[N]`` binary labels in ``{0, 1}`` (soft labels in ``[0, 1]`` are accepted), or
        class indices for members with a multiclass loss.
    """

    get_batch: Callable[[np.ndarray], np.ndarray]
    labels: np.ndarray

    @classmethod
    def from_arrays(cls, images: np.ndarray, labels: np.ndarray) -> DataSource:
        """A source over in-memory arrays ``images [N, H, W, C]`` and ``labels [N]``."""
        images = np.asarray(images)
        labels = np.asarray(labels)
        if images.shape[:1] != labels.shape[:1]:
            raise ValueError(
                f"images and labels must have the same length, got {images.shape} and "
                f"{labels.shape}"
            )
        return cls(get_batch=images.__getitem__, labels=labels)

    def __len__(self) -> int:
        return int(np.shape(self.labels)[0])


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of ensemble training (defaults: the paper's recipe, Section 5).

    Attributes:
      learning_rate: initial Adam learning rate of every member (1e-4).
      b1, b2, eps: Adam's parameters (0.9, 0.999, 1e-8).
      batch_size: training examples per member and step (16).
      eval_batch_size: validation/prediction examples per member and step.
      max_epochs: the most epochs a member trains.
      patience: epochs without validation improvement before a member stops early.
      plateau_patience: epochs without improvement before its learning rate is decayed.
      lr_factor: the decay factor (0.1: "decayed by a factor of 10").
      min_lr: the floor of the decayed learning rate (0: none, as in the paper).
      min_delta: the least decrease of the validation loss that counts as an improvement.
      min_rel_delta: the least decrease, as a fraction of the best validation loss, that counts.
      l2: coefficient of ``l2 / 2 * ||W||^2`` added to the training loss (weights only:
        :func:`iml.models.weight_norm`); for a table's small models also ``"auto"``: each
        member's coefficient is chosen from ``l2_grid`` as the one whose fit has the lowest
        loss of its own on its validation folds (:func:`iml.training.train_tabular`).
      l2_grid: the coefficients ``l2 = "auto"`` chooses among (:data:`L2_GRID`).
      l2_scale: what ``l2`` is measured against (:data:`L2_SCALES`): ``"paper"``, the loss, a
        fixed cost in the paper's units; ``"per_weight"``, the member's total sample weight.
      standardize: a table's features are standardised on each rotation's training rows (as
        scikit-learn's ``StandardScaler`` in a pipeline would), which makes the ridge that of
        standardised features; the fitted coefficients stay in the features' own units.
      flip: random horizontal flips of training images.
      normalize: ``'imagenet'`` or ``'none'``.
      solver: ``'adam'`` (minibatch Adam with the schedule above), ``'exact'`` (a table's
        logistic regression under the beta-weighted or B-weighted log loss or the class-weighted
        softmax cross-entropy fitted to its optimum by full-batch Newton steps:
        :func:`iml.training.exact_solver_applies`), or ``'auto'``:
        exact where it applies, Adam otherwise (:func:`iml.training.train_tabular`). Image models
        train by Adam.
      tol: the exact solver's gradient tolerance (largest absolute entry).
      max_newton_steps: the exact solver's most Newton steps.
      member_batching: ``'vmap'``, ``'map'`` or ``'loop'`` (see :mod:`iml.training.member`);
        ``None`` takes the backend's measured default (:data:`DEFAULT_MEMBER_BATCHING`). With
        ``'map'`` or ``'loop'`` on a mesh whose data axis is 1, each device steps its own members.
      checkpoint_every_steps: also checkpoint every this many steps within an epoch (always at
        the end of each epoch when a checkpoint directory is given).
    """

    learning_rate: float = 1e-4
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    batch_size: int = 16
    eval_batch_size: int = 64
    max_epochs: int = 100
    patience: int = 5
    plateau_patience: int = 1
    lr_factor: float = 0.1
    min_lr: float = 0.0
    min_delta: float = 0.0
    min_rel_delta: float = 0.0
    l2: float | str = 0.0
    l2_grid: tuple[float, ...] = L2_GRID
    l2_scale: str = "paper"
    standardize: bool = False
    flip: bool = True
    normalize: str = "imagenet"
    member_batching: str | None = None
    checkpoint_every_steps: int | None = None
    solver: str = "auto"
    tol: float = 1e-6
    max_newton_steps: int = 50

    def epoch_end_rule(self) -> Callable[..., MemberState]:
        """:func:`~iml.training.member.end_of_epoch` with this configuration's early
        stopping and plateau decay: ``rule(state, val_loss, epoch)`` for one member."""
        return functools.partial(
            end_of_epoch,
            patience=self.patience,
            plateau_patience=self.plateau_patience,
            lr_factor=self.lr_factor,
            min_lr=self.min_lr,
            min_delta=self.min_delta,
            min_rel_delta=self.min_rel_delta,
        )

    def __post_init__(self) -> None:
        for name in ("learning_rate", "eps", "tol"):
            V.check_positive(f"TrainConfig.{name}", getattr(self, name))
        counts = ("batch_size", "eval_batch_size", "max_epochs", "patience", "plateau_patience",
                  "max_newton_steps")  # fmt: skip
        for name in counts:
            V.check_count(f"TrainConfig.{name}", getattr(self, name))
        for name in ("min_lr", "min_delta", "min_rel_delta"):
            V.check_non_negative(f"TrainConfig.{name}", getattr(self, name))
        if self.l2 != "auto":
            if isinstance(self.l2, str | bool):
                raise ValueError(f"TrainConfig.l2 must be a number >= 0 or 'auto', got {self.l2!r}")
            V.check_non_negative("TrainConfig.l2", self.l2)
        grid = self.l2_grid
        if not isinstance(grid, tuple) or not grid:
            raise ValueError(f"TrainConfig.l2_grid must be a non-empty tuple, got {grid!r}")
        for value in grid:
            V.check_positive("TrainConfig.l2_grid", value)
        if len(set(grid)) != len(grid):
            raise ValueError(f"TrainConfig.l2_grid repeats a value: {grid!r}")
        V.check_choice("TrainConfig.l2_scale", self.l2_scale, L2_SCALES)
        V.check_choice("TrainConfig.solver", self.solver, SOLVERS)
        if not (0.0 <= self.b1 < 1.0 and 0.0 <= self.b2 < 1.0):
            raise ValueError(f"TrainConfig.b1 and b2 must be in [0, 1), got {self.b1}, {self.b2}")
        if not 0.0 < self.lr_factor <= 1.0:
            raise ValueError(f"TrainConfig.lr_factor must be in (0, 1], got {self.lr_factor!r}")
        V.check_choice("TrainConfig.normalize", self.normalize, _NORMALIZATIONS)
        if self.member_batching not in (None, "vmap", "map", "loop"):
            raise ValueError(
                "TrainConfig.member_batching must be 'vmap', 'map', 'loop' or None, "
                f"got {self.member_batching!r}"
            )
        if self.checkpoint_every_steps is not None:
            V.check_count("TrainConfig.checkpoint_every_steps", self.checkpoint_every_steps)


@dataclasses.dataclass
class MemberHistory:
    """What happened to one member, epoch by epoch.

    Attributes:
      train_loss: mean training loss of each epoch (``nan`` for epochs after it stopped).
      val_loss: validation loss after each epoch (current parameters, BatchNorm in eval mode).
      lr: learning rate used in each epoch.
      stopped_epoch: the epoch in which it stopped (early stopping or divergence), else ``None``.
      diverged: whether it was stopped for a non-finite loss.
      best_val_loss: the validation loss of the parameters it keeps.
    """

    train_loss: list[float] = dataclasses.field(default_factory=list)
    val_loss: list[float] = dataclasses.field(default_factory=list)
    lr: list[float] = dataclasses.field(default_factory=list)
    stopped_epoch: int | None = None
    diverged: bool = False
    best_val_loss: float = math.inf


# ----------------------------------------------------------------------------------------------
# Validation of inputs
# ----------------------------------------------------------------------------------------------


def _check_indices(name: str, idx: Any, n: int) -> np.ndarray:
    arr = np.asarray(idx)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{name} must be a non-empty 1-D integer array, got {arr.dtype} {arr.shape}"
        )
    if arr.min() < 0 or arr.max() >= n:
        raise ValueError(
            f"{name} must index the {n} examples, got values in [{arr.min()}, {arr.max()}]"
        )
    return arr.astype(np.int64)


def _check_images(images: Any, n: int, where: str) -> tuple[int, ...]:
    if not isinstance(images, np.ndarray | jax.Array):
        raise ValueError(f"get_batch must return an array, got {type(images).__name__} ({where})")
    if images.ndim not in (2, 4) or images.shape[0] != n:
        raise ValueError(
            f"get_batch must return images [n, H, W, C] or feature rows [n, d] with n={n}, got "
            f"shape {images.shape} ({where})"
        )
    if not (images.dtype == np.uint8 or np.issubdtype(images.dtype, np.floating)):
        raise ValueError(
            f"get_batch must return uint8 or floating-point images, got {images.dtype} ({where})"
        )
    return tuple(images.shape[1:])


def _check_inputs(
    members: Sequence[MemberSpec], data: DataSource, config: TrainConfig
) -> tuple[list[MemberSpec], np.ndarray, tuple[int, ...], Any]:
    if not isinstance(config, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(config).__name__}")
    if config.solver == "exact":
        raise ValueError(
            "TrainConfig.solver 'exact' fits a table's logistic regression "
            "(iml.training.train_tabular); image models train by Adam"
        )
    members = list(members)
    if not members or not all(isinstance(m, MemberSpec) for m in members):
        raise ValueError("members must be a non-empty sequence of MemberSpec")
    labels = np.asarray(data.labels)
    n = len(labels)
    if labels.ndim != 1 or n == 0:
        raise ValueError(f"data.labels must be a non-empty 1-D array, got shape {labels.shape}")
    specs = []
    for k, m in enumerate(members):
        if m.beta is not None:
            V.check_beta(f"members[{k}].beta", m.beta)
        elif m.loss is None:
            raise ValueError(f"members[{k}] has neither a beta nor a loss")
        try:
            specs.append(m.loss_spec())
        except ValueError as err:
            raise ValueError(f"members[{k}].loss: {err}") from None
        if jax.tree.structure(specs[k]) != jax.tree.structure(specs[0]):
            raise ValueError(
                f"members[{k}].loss is a {specs[k].describe()}, members[0].loss a "
                f"{specs[0].describe()}: the members of an ensemble take losses of one kind"
            )
    if specs[0].multiclass:
        n_classes = specs[0].n_classes
        if not np.all(labels == np.round(labels)) or labels.min() < 0 or labels.max() >= n_classes:
            raise ValueError(f"data.labels must be class indices in [0, {n_classes})")
    elif not np.all(np.isfinite(labels)) or labels.min() < 0 or labels.max() > 1:
        raise ValueError("data.labels must be finite and in [0, 1]")
    checked = []
    for k, m in enumerate(members):
        V.check_count(f"members[{k}].seed", m.seed, 0)
        if m.lr is not None:
            V.check_positive(f"members[{k}].lr", m.lr)
        train = _check_indices(f"members[{k}].train_idx", m.train_idx, n)
        if len(train) < config.batch_size:
            raise ValueError(
                f"members[{k}].train_idx has {len(train)} examples, fewer than one batch of "
                f"{config.batch_size}"
            )
        val = _check_indices(f"members[{k}].val_idx", m.val_idx, n)
        test = (
            None if m.test_idx is None else _check_indices(f"members[{k}].test_idx", m.test_idx, n)
        )
        checked.append(dataclasses.replace(m, train_idx=train, val_idx=val, test_idx=test))
    probe_idx = checked[0].train_idx[:2]
    probe = data.get_batch(probe_idx)
    image_shape = _check_images(probe, len(probe_idx), "probe batch")
    if len(image_shape) == 1 and (config.flip or config.normalize != "none"):
        raise ValueError(
            "config.flip and config.normalize apply to images; for feature rows set "
            "flip=False, normalize='none' (as iml.training.TABULAR_DEFAULTS does)"
        )
    return checked, labels.astype(np.float32), image_shape, np.asarray(probe).dtype


def _check_mesh(mesh: Mesh, k: int, config: TrainConfig) -> None:
    if tuple(mesh.axis_names) != (ENSEMBLE_AXIS, DATA_AXIS):
        raise ValueError(f"mesh must have axes {(ENSEMBLE_AXIS, DATA_AXIS)}, got {mesh.axis_names}")
    e, d = mesh.shape[ENSEMBLE_AXIS], mesh.shape[DATA_AXIS]
    if k % e:
        raise ValueError(f"the mesh's ensemble axis ({e}) must divide the {k} members")
    if config.batch_size % d or config.eval_batch_size % d:
        raise ValueError(
            f"the mesh's data axis ({d}) must divide batch_size={config.batch_size} and "
            f"eval_batch_size={config.eval_batch_size}"
        )


# ----------------------------------------------------------------------------------------------
# Member batching and the compiled programs
# ----------------------------------------------------------------------------------------------


def is_out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` says a device ran out of memory (XLA's ``RESOURCE_EXHAUSTED``, or an
    allocator's "out of memory")."""
    text = str(err)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def is_gpu_kernel_failure(err: BaseException) -> bool:
    """Whether ``err`` says a GPU program failed other than for memory, in one of two ways: XLA's
    autotuner found no working kernel configuration for some instructions while compiling
    ("Failed to get configs for ...", after a CUDA illegal address while timing grouped
    convolutions), or a kernel of the compiled program made an illegal memory access
    (``CUDA_ERROR_ILLEGAL_ADDRESS``). A process whose CUDA context has seen an illegal address
    cannot go on.

    The trainer's DenseNet-121 step at 224 px fails these ways on one H200 with the software
    versions of ``docs/results/gpu_h200/``, where 32 members run: at 48 and 62 members in the
    autotuner, and at 48 members with the autotuner off in the compiled program.
    """
    text = str(err)
    return (
        "Failed to get configs for" in text
        or "autotuning failed" in text.lower()
        or "CUDA_ERROR_ILLEGAL_ADDRESS" in text
    )


def resolve_member_batching(config: TrainConfig, backend: str | None = None) -> str:
    """The member batching a run uses: ``config.member_batching``, or the backend's measured
    default (:data:`DEFAULT_MEMBER_BATCHING`).

    Args:
      config: the training configuration.
      backend: ``'cpu'``, ``'gpu'`` or ``'tpu'`` (default ``jax.default_backend()``).
    """
    backend = backend or jax.default_backend()
    return config.member_batching or DEFAULT_MEMBER_BATCHING.get(backend, "vmap")


@functools.lru_cache(maxsize=32)
def _programs(
    model: nn.Module, batching: str, mesh: Mesh, config: TrainConfig
) -> dict[str, Callable[..., Any]]:
    """The jitted programs of one (model, batching, mesh, config); cached so reruns reuse them."""
    if config.l2 == "auto":
        raise ValueError(
            "TrainConfig.l2='auto' chooses the ridge of a table's small models "
            "(iml.training.train_tabular); give image ensembles a number"
        )
    optimizer = adam(config.b1, config.b2, config.eps)
    members = NamedSharding(mesh, PartitionSpec(ENSEMBLE_AXIS))
    whole = replicated(mesh)

    one_step = functools.partial(
        member_train_step, model, optimizer, normalize=config.normalize, l2=config.l2
    )
    # 'loop' steps members one by one (see member_in_place); evaluation, forward only, is vmapped.
    batched = "vmap" if batching == "loop" else batching
    # One after another, a stopped or idle member's step is skipped (under vmap it would not be).
    train = batch_members(skip_idle_members(one_step) if batched == "map" else one_step, batched)
    evaluate = batch_members(
        functools.partial(member_eval_step, model, normalize=config.normalize), batched
    )
    predict = batch_members(
        functools.partial(member_predict, model, normalize=config.normalize), batched
    )
    if batched == "map" and mesh.shape[DATA_AXIS] == 1 and mesh.shape[ENSEMBLE_AXIS] > 1:
        # Whole members on each device: each one maps over its own members, all side by side.
        train, evaluate, predict = (per_device_members(f, mesh) for f in (train, evaluate, predict))
    epoch_end = jax.vmap(config.epoch_end_rule(), in_axes=(0, 0, None))

    def train_fn(state, images, labels, flips, active, losses):
        return train(state, images, labels, flips, active, losses)

    def eval_fn(state, images, labels, weights, losses, acc):
        loss_sum, weight_sum = evaluate(state, images, labels, weights, losses)
        return acc[0] + loss_sum, acc[1] + weight_sum

    def epoch_end_fn(state, acc, epoch):
        val_loss = acc[0] / jnp.maximum(acc[1], 1e-12)
        train_loss = state.loss_sum / jnp.maximum(state.loss_count, 1)
        train_loss = jnp.where(state.loss_count > 0, train_loss, jnp.nan)
        lr_used = state.lr
        new = epoch_end(state, val_loss, epoch)
        summary = {
            "train_loss": train_loss,
            "val_loss": val_loss,
            "lr": lr_used,
            "stopped": new.stopped,
            "diverged": new.diverged,
            "stop_epoch": new.stop_epoch,
            "best_val_loss": new.best_val_loss,
        }
        return new, summary

    def init_fn(keys, variables, lrs, sample):
        def one(key, lr):
            v = variables if variables is not None else model.init(key, sample, train=False)
            return init_member_state(v, optimizer, lr)

        return jax.vmap(one)(keys, lrs)

    train_jit = jax.jit(train_fn, out_shardings=members, donate_argnums=0)
    eval_jit = jax.jit(eval_fn, out_shardings=(whole, whole))
    if batching == "loop" and mesh.shape[DATA_AXIS] == 1:
        # Every device steps its own members one by one, the devices side by side.
        train_jit = per_device_member_loop(member_in_place(one_step))
        eval_loop = per_device_member_loop(_eval_in_place(model, config.normalize))

        def eval_jit(state, images, labels, weights, losses, acc):
            return eval_loop(acc, state, images, labels, weights, losses)

    elif batching == "loop":  # a member's batch is split over devices: one global program each
        member_jit = jax.jit(member_in_place(one_step), out_shardings=members, donate_argnums=0)

        def train_jit(state, *batch, live=None):
            for i in range(int(batch[-1].shape[0])):
                if live is None or live[i]:
                    state = member_jit(state, *batch, i)
            return state

    return {
        "train": train_jit,
        "eval": eval_jit,
        "epoch_end": jax.jit(epoch_end_fn, out_shardings=(members, whole), donate_argnums=0),
        "predict": jax.jit(predict, out_shardings=whole),
        "init": jax.jit(init_fn, out_shardings=members, static_argnums=()),
    }


def _eval_in_place(model: nn.Module, normalize: str) -> Callable[..., Any]:
    """``f(acc, states, images, labels, weights, losses, i) -> acc``: member ``i``'s validation
    sums (:func:`member_eval_step`) added to entry ``i`` of the member-stacked ``acc``."""

    def one(acc, state, images, labels, weights, loss):
        loss_sum, weight_sum = member_eval_step(
            model, state, images, labels, weights, loss, normalize=normalize
        )
        return acc[0] + loss_sum, acc[1] + weight_sum

    return member_in_place(one)


# Fields of TrainConfig that the compiled programs do not depend on (they enter as array shapes,
# arguments, or only on the host); resetting them lets runs that differ only there share programs.
_HOST_FIELDS = (
    "learning_rate",
    "batch_size",
    "eval_batch_size",
    "max_epochs",
    "flip",
    "member_batching",
    "checkpoint_every_steps",
    "solver",
    "tol",
    "max_newton_steps",
)


def ensemble_programs(
    model: nn.Module, batching: str, mesh: Mesh, config: TrainConfig
) -> dict[str, Callable[..., Any]]:
    """The jitted programs that :func:`train_ensemble` runs for ``model`` under ``batching`` on
    ``mesh`` (``'train'``, ``'evaluate'``, ``'predict'``, ...), compiled once per setting of the
    fields that change them, so that benchmarks time what the trainer runs."""
    defaults = TrainConfig()
    key = dataclasses.replace(config, **{f: getattr(defaults, f) for f in _HOST_FIELDS})
    return _programs(model, batching, mesh, key)


def member_losses(members: Sequence[MemberSpec], mesh: Mesh) -> LossSpec:
    """The members' losses stacked into one :class:`iml.LossSpec` (leading axis: the member),
    sharded along the ensemble axis of ``mesh``."""
    specs = [m.loss_spec() for m in members]
    stacked = jax.tree.map(lambda *leaves: np.stack([np.asarray(x) for x in leaves]), *specs)
    return jax.tree.map(lambda leaf: _put(mesh, leaf, ENSEMBLE_AXIS), stacked)


def _put(mesh: Mesh, array: np.ndarray, *axes: str | None) -> jax.Array:
    """A host array (the same on every process) as a global array sharded by ``axes``."""
    array = np.asarray(array)
    sharding = NamedSharding(mesh, PartitionSpec(*axes))
    return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])


# ----------------------------------------------------------------------------------------------
# Data order
# ----------------------------------------------------------------------------------------------


def epoch_order(
    seed: int, member: int, epoch: int, train_idx: np.ndarray, batch_size: int, flip: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The batches and flips of one member in one epoch, a function of ``(seed, member, epoch)``.

    The training indices are shuffled and cut into ``len(train_idx) // batch_size`` full batches
    (the remainder is dropped; it changes every epoch); each image is flipped with probability 1/2.

    Returns:
      ``(indices [steps, batch_size], flips [steps, batch_size])``.
    """
    rng = np.random.default_rng((int(seed), int(member), int(epoch)))
    order = rng.permutation(np.asarray(train_idx))
    steps = len(order) // batch_size
    batches = order[: steps * batch_size].reshape(steps, batch_size)
    flips = rng.random(batches.shape) < 0.5 if flip else np.zeros(batches.shape, bool)
    return batches, flips


def _epoch_plan(
    members: Sequence[MemberSpec], epoch: int, config: TrainConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stacked ``[steps, K, B]`` indices and flips and ``[steps, K]`` activity of one epoch."""
    orders = [
        epoch_order(m.seed, k, epoch, m.train_idx, config.batch_size, config.flip)
        for k, m in enumerate(members)
    ]
    steps = max(len(b) for b, _ in orders)
    idx = np.zeros((steps, len(members), config.batch_size), np.int64)
    flips = np.zeros(idx.shape, bool)
    active = np.zeros((steps, len(members)), bool)
    for k, (b, f) in enumerate(orders):
        n = len(b)
        idx[:n, k], flips[:n, k], active[:n, k] = b, f, True
        idx[n:, k] = b[0]  # a member with fewer batches idles (inactive) on a copy of its first
    return idx, flips, active


def _padded(index_sets: Sequence[np.ndarray], batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Index sets of different lengths as ``[steps, K, batch]`` indices and 0/1 weights."""
    steps = max(math.ceil(len(s) / batch) for s in index_sets)
    idx = np.zeros((steps * batch, len(index_sets)), np.int64)
    weights = np.zeros(idx.shape, np.float32)
    for k, s in enumerate(index_sets):
        idx[:, k] = s[0]
        idx[: len(s), k] = s
        weights[: len(s), k] = 1.0
    shape = (steps, batch, len(index_sets))
    return idx.reshape(shape).transpose(0, 2, 1), weights.reshape(shape).transpose(0, 2, 1)


# ----------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------

# Orbax writes each checkpoint into a temporary directory and renames it only once every file is
# written, and its manager lists only finalized steps: a run killed during a save leaves nothing a
# restart would trust, and the next manager of the folder removes the leftover.


class EnsembleCheckpointer:
    """Saves and restores ``(state, metadata)`` pairs under numbered steps of one directory.

    Args:
      directory: the checkpoint folder (created if missing).
      max_to_keep: how many of the newest checkpoints to keep.
    """

    def __init__(self, directory: str | os.PathLike, max_to_keep: int = 2) -> None:
        V.check_count("max_to_keep", max_to_keep)
        self.directory = os.path.abspath(os.fspath(directory))
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True, enable_async_checkpointing=False
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        """The newest finalized step, or ``None`` when there is none."""
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        """Every finalized step kept in the directory, oldest first."""
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any, metadata: dict[str, Any]) -> None:
        """Writes ``state`` (a pytree of arrays) and JSON ``metadata`` as ``step``, then waits."""
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(state), metadata=ocp.args.JsonSave(metadata)
        )
        self._manager.save(step, args=args, force=True)
        self._manager.wait_until_finished()

    def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict[str, Any]]:
        """Reads ``step`` into the structure, shapes and shardings of ``abstract_state``.

        Args:
          step: a finalized step (see :meth:`latest_step`).
          abstract_state: a pytree of ``jax.ShapeDtypeStruct`` with shardings, or of arrays.

        Returns:
          ``(state, metadata)``.
        """
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract_state)
        args = ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), metadata=ocp.args.JsonRestore()
        )
        restored = self._manager.restore(step, args=args)
        return restored["state"], restored["metadata"]

    def close(self) -> None:
        """Waits for pending writes and releases the manager."""
        self._manager.wait_until_finished()
        self._manager.close()


# ----------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------


class _Fetcher:
    """Reads images through ``get_batch``, checking every batch's shape and dtype."""

    def __init__(self, get_batch: Callable[[np.ndarray], np.ndarray], image_shape, dtype):
        self.get_batch, self.image_shape, self.dtype = get_batch, image_shape, dtype

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        images = np.asarray(self.get_batch(idx))
        shape = _check_images(images, len(idx), "during training")
        if shape != self.image_shape or images.dtype != self.dtype:
            raise ValueError(
                f"get_batch returned images {images.dtype} {shape}, but the first batch was "
                f"{self.dtype} {self.image_shape}"
            )
        return images


def init_ensemble(
    model: nn.Module,
    members: Sequence[MemberSpec],
    image_shape: tuple[int, ...],
    config: TrainConfig,
    mesh: Mesh,
    *,
    init_variables: Mapping[str, Any] | None = None,
) -> MemberState:
    """The stacked, sharded state of all members before training.

    Args:
      model: the linen module (a DenseNet with its convolutions chosen:
        :func:`iml.models.with_conv_impl`).
      members: the member specifications (seed and learning rate are used).
      image_shape: ``(H, W, C)``.
      config: the training configuration.
      mesh: the ``('ensemble', 'data')`` mesh.
      init_variables: optional variables (``{'params', 'batch_stats'}``, e.g. ImageNet weights)
        every member starts from; by default each member is initialised from its own seed.

    Returns:
      A :class:`MemberState` whose leaves have a leading member axis, sharded over ``'ensemble'``.
    """
    programs = ensemble_programs(model, "vmap", mesh, config)
    keys = jnp.stack([jax.random.key_data(jax.random.key(int(m.seed))) for m in members])
    lrs = np.asarray([m.lr or config.learning_rate for m in members], np.float32)
    sample = jnp.zeros((1, *image_shape), jnp.float32)  # the model sees preprocessed floats

    def init(keys_data, lrs):
        return programs["init"](
            jax.vmap(jax.random.wrap_key_data)(keys_data), init_variables, lrs, sample
        )

    return init(_put(mesh, np.asarray(keys), ENSEMBLE_AXIS), _put(mesh, lrs, ENSEMBLE_AXIS))


def train_ensemble(
    model: nn.Module,
    members: Sequence[MemberSpec],
    data: DataSource,
    config: TrainConfig | None = None,
    *,
    checkpoint_dir: str | None = None,
    mesh: Mesh | None = None,
    init_variables: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> tuple[MemberState, list[MemberHistory]]:
    """Trains ``K`` members of a beta ensemble together, each on its own fold.

    Every step updates all live members at once (one jitted program over the mesh); after each
    epoch every member is validated on its own ``val_idx`` (BatchNorm in eval mode), keeps its
    best parameters, decays its learning rate on a plateau, and stops early on its own. A member
    whose loss or gradients become non-finite is stopped with a ``RuntimeWarning`` naming it,
    while the others go on. With ``checkpoint_dir`` the run saves its state after every epoch (and
    every ``config.checkpoint_every_steps`` steps) and resumes from the newest checkpoint there,
    ending with the same parameters as an uninterrupted run.

    Args:
      model: a linen module with BatchNorm statistics in ``'batch_stats'``, called as
        ``model.apply(variables, x, train=bool, mutable=['batch_stats'])`` on NHWC images and
        returning one logit per image (``[n, 1]`` or ``[n]``).
      members: the member specifications.
      data: the shared data source.
      config: hyperparameters (default :class:`TrainConfig()`).
      checkpoint_dir: folder of orbax checkpoints; ``None`` for none.
      mesh: a ``('ensemble', 'data')`` mesh (default :func:`~iml.training.sharding.make_mesh`
        over all devices).
      init_variables: optional starting variables shared by every member (pretrained weights).
      progress: show a tqdm progress bar over epochs (on process 0 only).

    Returns:
      ``(states, history)``: the final member-stacked :class:`MemberState` (its ``best_params``
      and ``best_batch_stats`` are the early-stopped model of each member) and one
      :class:`MemberHistory` per member.

    Raises:
      ValueError: on malformed members, labels, images (wrong rank, batch size or dtype) or mesh.
    """
    config = TrainConfig() if config is None else config
    members, labels, image_shape, image_dtype = _check_inputs(members, data, config)
    k = len(members)
    batching = resolve_member_batching(config)
    if mesh is None:
        # 'loop' keeps each member whole on one device; the others also split its batch
        split = 1 if batching == "loop" else math.gcd(config.batch_size, config.eval_batch_size)
        mesh = make_mesh(k, split)
    _check_mesh(mesh, k, config)
    programs = ensemble_programs(model, batching, mesh, config)
    fetch_images = _Fetcher(data.get_batch, image_shape, image_dtype)
    fetch_labels = labels.__getitem__
    losses = member_losses(members, mesh)

    state = init_ensemble(
        model,
        members,
        image_shape,
        config,
        mesh,
        init_variables=init_variables,
    )
    history = [MemberHistory() for _ in members]
    steps_per_epoch = max(len(m.train_idx) // config.batch_size for m in members)
    start_epoch, start_step = 0, 0
    checkpointer = None
    if checkpoint_dir is not None:
        checkpointer = EnsembleCheckpointer(checkpoint_dir)
        latest = checkpointer.latest_step()
        if latest is not None:
            state, meta = checkpointer.restore(latest, state)
            start_epoch, start_step = int(meta["epoch"]), int(meta["step_in_epoch"])
            history = [MemberHistory(**h) for h in meta["history"]]
            if int(meta["steps_per_epoch"]) != steps_per_epoch or int(meta["members"]) != k:
                raise ValueError(
                    f"checkpoint_dir {checkpoint_dir!r} holds a run with other members or data"
                )

    def save(epoch: int, step_in_epoch: int) -> None:
        meta = {
            "epoch": epoch,
            "step_in_epoch": step_in_epoch,
            "steps_per_epoch": steps_per_epoch,
            "members": k,
            "history": [dataclasses.asdict(h) for h in history],
        }
        checkpointer.save(epoch * steps_per_epoch + step_in_epoch, state, meta)

    val_idx, val_weights = _padded([m.val_idx for m in members], config.eval_batch_size)
    bar = None
    if progress and jax.process_index() == 0:
        bar = tqdm(total=config.max_epochs, initial=start_epoch, desc="ensemble", unit="epoch")
    try:
        stopped = np.array([h.stopped_epoch is not None for h in history])
        for epoch in range(start_epoch, config.max_epochs):
            if stopped.all():
                break
            idx, flips, active = _epoch_plan(members, epoch, config)
            for s in range(start_step if epoch == start_epoch else 0, steps_per_epoch):
                # 'loop' skips members that would not change (stopped, or out of batches)
                skip = {"live": active[s] & ~stopped} if batching == "loop" else {}
                state = programs["train"](
                    state,
                    global_batch(mesh, idx[s], fetch_images, image_shape),
                    global_batch(mesh, idx[s], fetch_labels),
                    _put(mesh, flips[s], ENSEMBLE_AXIS, DATA_AXIS),
                    _put(mesh, active[s], ENSEMBLE_AXIS),
                    losses,
                    **skip,
                )
                every = config.checkpoint_every_steps
                if checkpointer and every and (s + 1) % every == 0 and s + 1 < steps_per_epoch:
                    save(epoch, s + 1)
            acc = tuple(_put(mesh, np.zeros(k, np.float32), ENSEMBLE_AXIS) for _ in range(2))
            for s in range(len(val_idx)):
                acc = programs["eval"](
                    state,
                    global_batch(mesh, val_idx[s], fetch_images, image_shape),
                    global_batch(mesh, val_idx[s], fetch_labels),
                    _put(mesh, val_weights[s], ENSEMBLE_AXIS, DATA_AXIS),
                    losses,
                    acc,
                )
            state, summary = programs["epoch_end"](state, acc, epoch)
            summary = jax.tree.map(np.asarray, summary)
            stopped = _record(history, summary, stopped, members, epoch)
            if checkpointer:
                save(epoch + 1, 0)
            if bar is not None:
                live = ~stopped
                mean_val = float(np.mean(summary["val_loss"][live])) if live.any() else math.nan
                bar.set_postfix(members=int(live.sum()), val_loss=f"{mean_val:.4f}")
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if checkpointer is not None:
            checkpointer.close()
    return state, history


def _record(
    history: list[MemberHistory],
    summary: dict[str, np.ndarray],
    was_stopped: np.ndarray,
    members: Sequence[MemberSpec],
    epoch: int,
) -> np.ndarray:
    """Appends one epoch to each live member's history; warns about members that diverged."""
    for k, h in enumerate(history):
        if was_stopped[k]:
            continue
        h.train_loss.append(float(summary["train_loss"][k]))
        h.val_loss.append(float(summary["val_loss"][k]))
        h.lr.append(float(summary["lr"][k]))
        h.best_val_loss = float(summary["best_val_loss"][k])
        if summary["stopped"][k]:
            h.stopped_epoch = int(summary["stop_epoch"][k])
            h.diverged = bool(summary["diverged"][k])
            if h.diverged:
                message = (
                    f"{members[k].describe(k)} stopped in epoch {epoch}: its training or "
                    "validation loss is not finite; it keeps its best parameters and the other "
                    "members go on"
                )
                logger.warning(message)
                warnings.warn(message, RuntimeWarning, stacklevel=3)
            else:
                logger.info("%s stopped early in epoch %d", members[k].describe(k), epoch)
    return np.asarray(summary["stopped"], bool)


# ----------------------------------------------------------------------------------------------
# Prediction
# ----------------------------------------------------------------------------------------------


def predict_ensemble(
    model: nn.Module,
    states: MemberState,
    data: DataSource,
    indices: Sequence[np.ndarray] | np.ndarray,
    config: TrainConfig | None = None,
    *,
    mesh: Mesh | None = None,
    loss: Any = None,
) -> list[np.ndarray]:
    """Scores of each member's best parameters, BatchNorm in eval mode: ``sigmoid(logit)``, or
    the link of the members' loss (:meth:`iml.LossSpec.link`: softmax scores ``[n, classes]``
    for the class-weighted softmax cross-entropy, ...).

    Args:
      model: the module the states were trained with.
      states: the member-stacked states returned by :func:`train_ensemble`.
      data: the data source.
      indices: one index array per member (e.g. each member's ``test_idx``), or one array that
        every member scores.
      config: the training configuration (its normalisation, batching and ``eval_batch_size``).
      mesh: the mesh the states live on (default: the one of the states' sharding).
      loss: the members' loss (one of them, e.g. ``members[0].loss_spec()``): its link turns
        logits into scores; default the sigmoid of one logit.

    Returns:
      One ``float32`` score array per member, aligned with its indices (``[n]``, or
      ``[n, classes]`` for a multiclass loss).
    """
    config = TrainConfig() if config is None else config
    k = int(jax.tree.leaves(states.lr)[0].shape[0])
    if isinstance(indices, np.ndarray) and indices.ndim == 1:
        indices = [indices] * k
    n = len(data)
    index_sets = [_check_indices(f"indices[{i}]", ix, n) for i, ix in enumerate(indices)]
    if len(index_sets) != k:
        raise ValueError(f"indices must hold one array per member ({k}), got {len(index_sets)}")
    if mesh is None:
        mesh = states.lr.sharding.mesh
    _check_mesh(mesh, k, config)
    batching = resolve_member_batching(config)
    programs = ensemble_programs(model, batching, mesh, config)
    probe = data.get_batch(index_sets[0][:1])
    image_shape = _check_images(probe, 1, "probe batch")
    fetch = _Fetcher(data.get_batch, image_shape, np.asarray(probe).dtype)
    idx, _ = _padded(index_sets, config.eval_batch_size)
    logits = [
        np.asarray(programs["predict"](states, global_batch(mesh, idx[s], fetch, image_shape)))
        for s in range(len(idx))
    ]
    flat = np.concatenate(logits, axis=1)  # [K, steps * batch(, classes)]
    if loss is None or not loss_spec(loss).multiclass:
        scores = 1.0 / (1.0 + np.exp(-flat.astype(np.float64)))
    else:
        scores = np.asarray(loss_spec(loss).link(jnp.asarray(flat, jnp.float32)))
    return [scores[i, : len(s)].astype(np.float32) for i, s in enumerate(index_sets)]
