"""What an ensemble trains on: its members (:class:`MemberSpec`) and the data source they share
(:class:`DataSource`), the checks of both and of the device mesh, each member's batch order in
each epoch (:func:`epoch_order`, a function of ``(seed, member, epoch)``), and host arrays placed
on the mesh (:func:`put`, :func:`member_losses`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from iml import _validation as V
from iml.spec import LossSpec, loss_spec
from iml.training.sharding import DATA_AXIS, ENSEMBLE_AXIS
from iml.training.train_config import TrainConfig

__all__ = [
    "DataSource",
    "MemberSpec",
    "check_images",
    "check_indices",
    "check_inputs",
    "check_mesh",
    "epoch_order",
    "epoch_plan",
    "member_losses",
    "padded",
    "put",
]


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
      position: optional member number of its data order and flips (:func:`epoch_order`'s
        ``member``); None: its position among the members trained together. Members of a batch
        trained in parts keep their positions in the whole batch, and so train as they would in
        it.
    """

    beta: float | None
    seed: int
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray | None = None
    fold: int | str | None = None
    lr: float | None = None
    loss: Any = None
    position: int | None = None

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


def check_indices(name: str, idx: Any, n: int) -> np.ndarray:
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


def check_images(images: Any, n: int, where: str) -> tuple[int, ...]:
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


def check_inputs(
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
        if m.position is not None:
            V.check_count(f"members[{k}].position", m.position, 0)
        train = check_indices(f"members[{k}].train_idx", m.train_idx, n)
        if len(train) < config.batch_size:
            raise ValueError(
                f"members[{k}].train_idx has {len(train)} examples, fewer than one batch of "
                f"{config.batch_size}"
            )
        val = check_indices(f"members[{k}].val_idx", m.val_idx, n)
        test = (
            None if m.test_idx is None else check_indices(f"members[{k}].test_idx", m.test_idx, n)
        )
        checked.append(dataclasses.replace(m, train_idx=train, val_idx=val, test_idx=test))
    probe_idx = checked[0].train_idx[:2]
    probe = data.get_batch(probe_idx)
    image_shape = check_images(probe, len(probe_idx), "probe batch")
    if len(image_shape) == 1 and (config.flip or config.normalize not in (None, "none")):
        raise ValueError(
            "config.flip and config.normalize apply to images; for feature rows leave them "
            "unset (None) or set flip=False, normalize='none'"
        )
    return checked, labels.astype(np.float32), image_shape, np.asarray(probe).dtype


def check_mesh(mesh: Mesh, k: int, config: TrainConfig) -> None:
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


def member_losses(members: Sequence[MemberSpec], mesh: Mesh) -> LossSpec:
    """The members' losses stacked into one :class:`iml.LossSpec` (leading axis: the member),
    sharded along the ensemble axis of ``mesh``."""
    specs = [m.loss_spec() for m in members]
    stacked = jax.tree.map(lambda *leaves: np.stack([np.asarray(x) for x in leaves]), *specs)
    return jax.tree.map(lambda leaf: put(mesh, leaf, ENSEMBLE_AXIS), stacked)


def put(mesh: Mesh, array: np.ndarray, *axes: str | None) -> jax.Array:
    """A host array (the same on every process) as a global array sharded by ``axes``."""
    array = np.asarray(array)
    sharding = NamedSharding(mesh, PartitionSpec(*axes))
    return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])


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


def epoch_plan(
    members: Sequence[MemberSpec], epoch: int, config: TrainConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stacked ``[steps, K, B]`` indices and flips and ``[steps, K]`` activity of one epoch."""
    size, flip = config.batch_size, config.flip
    orders = [
        epoch_order(m.seed, k if m.position is None else m.position, epoch, m.train_idx, size, flip)
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


def padded(index_sets: Sequence[np.ndarray], batch: int) -> tuple[np.ndarray, np.ndarray]:
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
