"""Training a beta ensemble as one program: K members in one jitted, sharded step.

Each member (:class:`MemberSpec`) has its own loss (a positive-class weight ``beta``, eq.
``b-loss-bin`` of the paper, or any :class:`iml.LossSpec`), seed, data fold, parameters,
BatchNorm statistics, Adam state, learning-rate schedule and early stopping; all of them advance
together in one compiled step (:mod:`iml.training.programs`) over a ``('ensemble', 'data')``
device mesh (:mod:`iml.training.sharding`), by the recipe of the paper's Section 5
(:class:`TrainConfig`).

Everything random in training comes from ``(seed, member, epoch)``: the order of each member's
training examples and its flips are drawn on the host from ``numpy.random.default_rng((seed,
member, epoch))``, and the initial parameters from ``jax.random.key(seed)``. A run restarted from a
checkpoint (:class:`EnsembleCheckpointer`, crash-safe through orbax) therefore replays exactly
what the interrupted run would have done.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import linen as nn
from jax.sharding import Mesh
from tqdm.auto import tqdm

from iml import _validation as V
from iml._io import atomic_write_bytes
from iml.spec import loss_spec
from iml.training.ensemble_data import (
    DataSource,
    MemberSpec,
    check_images,
    check_indices,
    check_inputs,
    check_mesh,
    epoch_plan,
    member_losses,
    padded,
    put,
)
from iml.training.member import MemberState
from iml.training.programs import ensemble_programs
from iml.training.sharding import DATA_AXIS, ENSEMBLE_AXIS, global_batch, make_mesh
from iml.training.train_config import TrainConfig, resolve_member_batching

__all__ = [
    "EnsembleCheckpointer",
    "MemberHistory",
    "init_ensemble",
    "predict_ensemble",
    "train_ensemble",
]

logger = logging.getLogger(__name__)


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


class _Fetcher:
    """Reads images through ``get_batch``, checking every batch's shape and dtype."""

    def __init__(self, get_batch: Callable[[np.ndarray], np.ndarray], image_shape, dtype):
        self.get_batch, self.image_shape, self.dtype = get_batch, image_shape, dtype

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        images = np.asarray(self.get_batch(idx))
        shape = check_images(images, len(idx), "during training")
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
    """The stacked state of all members before training, sharded over the mesh's
    ``'ensemble'`` axis.

    Args:
      model: the linen module (a DenseNet with its convolutions chosen:
        :func:`iml.models.with_conv_impl`).
      members: the member specifications (seed and learning rate are used).
      image_shape: ``(H, W, C)``.
      mesh: the ``('ensemble', 'data')`` mesh.
      init_variables: optional variables (``{'params', 'batch_stats'}``, e.g. ImageNet weights)
        every member starts from; by default each member is initialised from its own seed.
    """
    programs = ensemble_programs(model, "vmap", mesh, config)
    keys = jnp.stack([jax.random.key_data(jax.random.key(int(m.seed))) for m in members])
    lrs = np.asarray([m.lr or config.learning_rate for m in members], np.float32)
    sample = jnp.zeros((1, *image_shape), jnp.float32)  # the model sees preprocessed floats
    keys = jax.vmap(jax.random.wrap_key_data)(put(mesh, np.asarray(keys), ENSEMBLE_AXIS))
    return programs["init"](keys, init_variables, put(mesh, lrs, ENSEMBLE_AXIS), sample)


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
    devices: Sequence[jax.Device] | None = None,
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
      config: hyperparameters (default :class:`TrainConfig()`).
      checkpoint_dir: folder of orbax checkpoints; ``None`` for none.
      mesh: a ``('ensemble', 'data')`` mesh (default :func:`~iml.training.sharding.make_mesh`
        over ``devices``).
      init_variables: optional starting variables shared by every member (pretrained weights).
      progress: show a tqdm progress bar over epochs (on process 0 only).
      devices: the devices of the default mesh (default ``jax.devices()``: those of every
        process; ``jax.local_devices()`` keeps the members on this process's own devices).

    Returns:
      ``(states, history)``: the final member-stacked :class:`MemberState` (its ``best_params``
      and ``best_batch_stats`` are the early-stopped model of each member) and one
      :class:`MemberHistory` per member.

    Raises:
      ValueError: on malformed members, labels, images (wrong rank, batch size or dtype) or mesh.
    """
    config = TrainConfig() if config is None else config
    members, labels, image_shape, image_dtype = check_inputs(members, data, config)
    config = config.for_inputs(images=len(image_shape) > 1)
    k = len(members)
    batching = resolve_member_batching(config)
    if mesh is None:
        # 'loop' keeps each member whole on one device; the others also split its batch
        split = 1 if batching == "loop" else math.gcd(config.batch_size, config.eval_batch_size)
        mesh = make_mesh(k, split, devices)
    check_mesh(mesh, k, config)
    programs = ensemble_programs(model, batching, mesh, config)
    fetch_images = _Fetcher(data.get_batch, image_shape, image_dtype)
    fetch_labels = labels.__getitem__
    losses = member_losses(members, mesh)

    state = init_ensemble(model, members, image_shape, config, mesh, init_variables=init_variables)
    history = [MemberHistory() for _ in members]
    steps_per_epoch = max(len(m.train_idx) // config.batch_size for m in members)
    start_epoch, start_step = 0, 0
    checkpointer = None
    if checkpoint_dir is not None:
        # a mesh of this process's own devices: this process alone saves and restores its state
        local = jax.process_count() > 1 and all(
            d.process_index == jax.process_index() for d in mesh.devices.flat
        )
        checkpointer = EnsembleCheckpointer(checkpoint_dir, local=local)
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

    def batch(idx: np.ndarray, per_row: np.ndarray) -> tuple[jax.Array, ...]:
        """A step's images, labels and ``per_row`` (flips or weights) ``[K, n]`` on the mesh."""
        images = global_batch(mesh, idx, fetch_images, image_shape)
        y = global_batch(mesh, idx, fetch_labels)
        return images, y, put(mesh, per_row, ENSEMBLE_AXIS, DATA_AXIS)

    val_idx, val_weights = padded([m.val_idx for m in members], config.eval_batch_size)
    bar = None
    if progress and jax.process_index() == 0:
        bar = tqdm(total=config.max_epochs, initial=start_epoch, desc="ensemble", unit="epoch")
    try:
        stopped = np.array([h.stopped_epoch is not None for h in history])
        for epoch in range(start_epoch, config.max_epochs):
            if stopped.all():
                break
            idx, flips, active = epoch_plan(members, epoch, config)
            for s in range(start_step if epoch == start_epoch else 0, steps_per_epoch):
                # 'loop' skips members that would not change (stopped, or out of batches)
                skip = {"live": active[s] & ~stopped} if batching == "loop" else {}
                on = put(mesh, active[s], ENSEMBLE_AXIS)
                state = programs["train"](state, *batch(idx[s], flips[s]), on, losses, **skip)
                every = config.checkpoint_every_steps
                if checkpointer and every and (s + 1) % every == 0 and s + 1 < steps_per_epoch:
                    save(epoch, s + 1)
            acc = tuple(put(mesh, np.zeros(k, np.float32), ENSEMBLE_AXIS) for _ in range(2))
            for s in range(len(val_idx)):
                acc = programs["eval"](state, *batch(val_idx[s], val_weights[s]), losses, acc)
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
                spec = members[k].loss_spec()
                if spec.record.logits_loss is None:
                    message += (
                        f". The {spec.record.title} has no logit form: give its LossRecord a "
                        "logits_loss (its loss computed from the model's logits), which stays "
                        "finite where the scores round to 0 or 1"
                    )
                logger.warning(message)
                warnings.warn(message, RuntimeWarning, stacklevel=3)
            else:
                logger.info("%s stopped early in epoch %d", members[k].describe(k), epoch)
    return np.asarray(summary["stopped"], bool)


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
    index_sets = [check_indices(f"indices[{i}]", ix, n) for i, ix in enumerate(indices)]
    if len(index_sets) != k:
        raise ValueError(f"indices must hold one array per member ({k}), got {len(index_sets)}")
    if mesh is None:
        mesh = states.lr.sharding.mesh
    check_mesh(mesh, k, config)
    probe = data.get_batch(index_sets[0][:1])
    image_shape = check_images(probe, 1, "probe batch")
    config = config.for_inputs(images=len(image_shape) > 1)
    batching = resolve_member_batching(config)
    programs = ensemble_programs(model, batching, mesh, config)
    fetch = _Fetcher(data.get_batch, image_shape, np.asarray(probe).dtype)
    idx, _ = padded(index_sets, config.eval_batch_size)
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


# Orbax writes each checkpoint into a temporary directory and renames it only once every file is
# written, and its manager lists only finalized steps: a run killed during a save leaves nothing a
# restart would trust, and the next manager of the folder removes the leftover.


class EnsembleCheckpointer:
    """Saves and restores ``(state, metadata)`` pairs under numbered steps of one directory.

    Args:
      directory: the checkpoint folder (created if missing).
      max_to_keep: how many of the newest checkpoints to keep.
      local: this process alone saves and restores: a state on its own devices, while the other
        processes of a run on several train other states (orbax expects every process at each
        save, and saves no array of one process's devices alone). Each step is then one
        ``STEP.npz`` file of the state's leaves and the metadata, written atomically.
    """

    def __init__(
        self, directory: str | os.PathLike, max_to_keep: int = 2, *, local: bool = False
    ) -> None:
        V.check_count("max_to_keep", max_to_keep)
        self.directory = os.path.abspath(os.fspath(directory))
        self._keep = max_to_keep
        self._manager = None
        if local:
            os.makedirs(self.directory, exist_ok=True)
            return
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True, enable_async_checkpointing=False
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def _file(self, step: int) -> Path:
        return Path(self.directory) / f"{step}.npz"

    def latest_step(self) -> int | None:
        """The newest finalized step, or ``None`` when there is none."""
        if self._manager is None:
            return max(self.all_steps(), default=None)
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        """Every finalized step kept in the directory, oldest first."""
        if self._manager is None:
            return sorted(int(p.stem) for p in Path(self.directory).glob("*.npz")
                          if p.stem.isdigit())  # fmt: skip
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any, metadata: dict[str, Any]) -> None:
        """Writes ``state`` (a pytree of arrays) and JSON ``metadata`` as ``step``, then waits."""
        if self._manager is None:
            buffer = io.BytesIO()
            leaves = {f"leaf_{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(state))}
            np.savez(buffer, metadata=np.asarray(json.dumps(metadata)), **leaves)
            atomic_write_bytes(self._file(step), buffer.getvalue())
            for old in self.all_steps()[: -self._keep]:
                self._file(old).unlink(missing_ok=True)
            return
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
        if self._manager is None:
            leaves, tree = jax.tree.flatten(abstract_state)
            with np.load(self._file(step), allow_pickle=False) as data:
                metadata = json.loads(str(data["metadata"]))
                values = [data[f"leaf_{i}"] for i in range(len(leaves))]
            placed = [jax.device_put(v, a.sharding) for v, a in zip(values, leaves, strict=True)]
            return jax.tree.unflatten(tree, placed), metadata
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract_state)
        args = ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), metadata=ocp.args.JsonRestore()
        )
        restored = self._manager.restore(step, args=args)
        return restored["state"], restored["metadata"]

    def close(self) -> None:
        """Waits for pending writes and releases the manager."""
        if self._manager is None:
            return
        self._manager.wait_until_finished()
        self._manager.close()
