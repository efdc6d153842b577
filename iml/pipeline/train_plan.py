"""Training an experiment: every member batch not yet stored is trained and stored, one after
another.

:func:`run` trains an :class:`Experiment` (:func:`iml.pipeline.experiment.build`) into its
store: process 0 records the manifest and the folds, each process trains its share of the
batches, and every batch is checked to be stored. :func:`train_plan` is its loop, the one loop of
every run: each batch of a :class:`~iml.pipeline.plan.Plan` is trained through
:func:`iml.training.train` and stored as one atomic entry in the one member layout
(:func:`iml.pipeline.store.member_entry`, ``batches/batch-NNNN``), so a run killed at any moment
and started again skips the stored batches, resumes the interrupted one from its checkpoint
where it keeps them, and ends with the results of an uninterrupted run.

A batch may be trained in parts: consecutive members ``members_per_call`` at a time, and, where
asked, a call too large for the device (out of memory, or a GPU failure of
:func:`iml.training.is_gpu_kernel_failure`) again in two halves, down to one member. Each member
keeps its position in the whole batch (:attr:`iml.training.MemberSpec.position`: its data order
and flips), and the parts' members, joined in member order, are stored as the batch's one entry,
whose ``split_sizes`` gives the members of each part. The entry's other arrays are those of the
batch trained whole, bit for bit where each call spreads a member's batches over the devices as
the whole batch's call does (on one device; on a mesh whose data axis does not change with the
members, :func:`iml.training.make_mesh`), else up to the rounding of those sums.
"""

from __future__ import annotations

import dataclasses
import gc
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from tqdm.auto import tqdm

from iml.pipeline import distributed
from iml.pipeline.plan import MemberBatch, Plan
from iml.pipeline.store import RunStore, member_entry
from iml.spec import LossSpec
from iml.training import DataSource, TrainConfig, is_gpu_kernel_failure, is_out_of_memory
from iml.training.train import Trained, train

__all__ = ["Experiment", "StoredBatch", "run", "train_plan"]


class StoredBatch(NamedTuple):
    """One batch of a plan with its stored entry (:func:`iml.pipeline.store.member_entry`), and
    whether this call trained it (False: it was read from the store)."""

    batch: MemberBatch
    entry: dict[str, np.ndarray]
    trained: bool


def _too_large(err: Exception, batch: MemberBatch, n: int, config: TrainConfig) -> Exception | None:
    """The error to raise where ``n`` members of ``batch`` in one call were too large for the
    device, or None for any other error."""
    if is_out_of_memory(err):
        error, what = MemoryError, "ran out of device memory"
    elif is_gpu_kernel_failure(err) and n > 1:
        error, what = RuntimeError, "failed on the GPU (XLA's autotuner or a CUDA illegal address)"
    else:
        return None
    fewer = f"fewer at a time, e.g. --config.plan.members_per_batch={n // 2}, or with " * (n > 1)
    return error(
        f"batch {batch.index}: {n} member{'s' * (n > 1)} trained in one program {what}; run "
        f"again with {fewer}fewer validation images per member and step "
        f"(--config.train.eval_batch_size, now {config.eval_batch_size}), in a new output "
        "directory"
    )


def _joined(parts: Sequence[Trained]) -> Trained:
    """The members of ``parts`` as one :class:`~iml.training.Trained`, in order."""

    def listed(name: str) -> list | None:
        return None if getattr(parts[0], name) is None else [
            x for p in parts for x in getattr(p, name)]  # fmt: skip

    def stacked(name: str) -> Any:
        return None if getattr(parts[0], name) is None else np.concatenate(
            [np.asarray(getattr(p, name)) for p in parts])  # fmt: skip

    return parts[0]._replace(
        test_scores=listed("test_scores"), test_logits=listed("test_logits"),
        history=listed("history"), best_val_loss=stacked("best_val_loss"),
        best_epoch=stacked("best_epoch"), l2=stacked("l2"),
        epochs_run=max(p.epochs_run for p in parts),
    )  # fmt: skip


def _in_parts(
    fit: Callable[[int, int], Trained],
    lo: int,
    hi: int,
    halve: bool,
    batch: MemberBatch,
    config: TrainConfig,
) -> list[tuple[int, Trained]]:
    """Members ``lo:hi`` of ``batch`` trained by ``fit(lo, hi)``, or with ``halve`` in two halves
    (each in turn so) where that call is too large for the device; ``(members, trained)`` of
    each call that ran. A failure not tried again is raised as :func:`_too_large` names it."""
    try:
        return [(hi - lo, fit(lo, hi))]
    except Exception as err:
        if not (halve and hi - lo > 1 and (is_out_of_memory(err) or is_gpu_kernel_failure(err))):
            if (error := _too_large(err, batch, hi - lo, config)) is None:
                raise
            raise error from err
        mid = (lo + hi + 1) // 2
        warnings.warn(
            f"batch {batch.index}: {hi - lo} members in one program were too large for the device "
            f"({str(err)[:120]}); training them as {mid - lo} and {hi - mid}",
            RuntimeWarning,
            stacklevel=2,
        )
    gc.collect()  # the failed call's arrays, held by its traceback's frames, leave the device
    halves = ((lo, mid), (mid, hi))
    return [part for a, b in halves for part in _in_parts(fit, a, b, halve, batch, config)]


def train_plan(
    plan: Plan,
    losses: Callable[[MemberBatch], Sequence[LossSpec | None]],
    model: Any,
    data: DataSource,
    config: TrainConfig,
    *,
    store: RunStore | None = None,
    read_stored: bool = True,
    checkpoint: bool = False,
    init_variables: Mapping[str, Any] | None = None,
    progress: bool = True,
    members_per_call: int | None = None,
    halve_too_large: bool = False,
    share: Callable[[int], bool] | None = None,
    devices: Sequence[Any] | None = None,
) -> Iterator[StoredBatch]:
    """Every batch of ``plan`` in order: read from ``store`` where stored, else trained and stored.

    Args:
      losses: each member's loss, batch by batch (``None``: the unweighted log loss).
      model: the Flax module of every member.
      store: where each trained batch is stored (and stored batches are read); None keeps the
        entries in memory only.
      read_stored: read the stored batches (False: skip them, yielding only the trained ones).
      checkpoint: keep a checkpoint of the batch in training under ``store``'s ``checkpoints/``
        (the host's feed), removed once the batch is stored.
      init_variables: the members' starting variables (None: random).
      progress: a bar of members over the plan, and one of epochs within each batch.
      members_per_call: the most members trained in one call of the trainer (None: a whole
        batch); a larger batch is trained in consecutive parts of that many and stored whole.
      halve_too_large: a call too large for the device (out of memory, or a GPU failure of
        :func:`iml.training.is_gpu_kernel_failure`) is made again in two halves, each in turn so
        down to one member, instead of raising.
      share: which batches this call trains, by index (None: every one): one process's share
        of a run on several (:meth:`iml.pipeline.distributed.Processes.owns`); a batch of
        another share is left to its process, neither trained nor yielded unless stored.
      devices: the devices members train on (:func:`iml.training.train`'s; None: every
        process's), e.g. ``jax.local_devices()`` where each process trains its own share.

    Yields:
      A :class:`StoredBatch` per batch (of ``share``, or stored).

    Raises:
      MemoryError, RuntimeError: for a call too large for the device (with ``halve_too_large``:
        of one member), naming the settings that make calls smaller.
    """

    def train_batch(batch: MemberBatch) -> dict[str, np.ndarray]:
        specs = batch.member_specs(losses(batch))
        ckpt = None if store is None else store.root / "checkpoints" / batch.key.split("/")[1]
        desc = f"batch {batch.index + 1}/{len(plan.batches)} epochs" if progress else False
        dirs: list[Path] = []

        def fit(lo: int, hi: int) -> Trained:
            part, where = specs, ckpt  # the whole batch: its checkpoints where they always were
            if (lo, hi) != (0, len(specs)):
                part = [dataclasses.replace(s, position=k) for k, s in enumerate(specs)][lo:hi]
                where = None if ckpt is None else ckpt.with_name(f"{ckpt.name}-{lo}-{hi}")
            if checkpoint and where is not None:
                dirs.append(where)
            return train(
                model, part, data, config,
                checkpoint_dir=str(where) if checkpoint and where is not None else None,
                init_variables=init_variables, progress=desc, devices=devices,
            )  # fmt: skip

        per = members_per_call or len(specs)
        parts = [part for lo in range(0, len(specs), per)
                 for part in _in_parts(fit, lo, min(lo + per, len(specs)), halve_too_large, batch,
                                       config)]  # fmt: skip
        entry = member_entry(_joined([t for _, t in parts]), batch.described(),
                             [s.test_idx for s in specs], config.max_epochs)  # fmt: skip
        if len(parts) > 1:
            entry["split_sizes"] = np.asarray([n for n, _ in parts])
        if store is not None:
            store.save_arrays(batch.key, **entry)
            for where in dirs:
                shutil.rmtree(where, ignore_errors=True)
        return entry

    stored = {b.key for b in plan.batches if store is not None and store.has(b.key)}
    mine = [b for b in plan.batches if share is None or share(b.index)]
    done = sum(len(b.members) for b in mine if b.key in stored)
    total = sum(len(b.members) for b in mine)
    bar = None
    if progress and done < total and len(mine) > 1:
        bar = tqdm(total=total, initial=done, desc="members", unit="member",
                   file=sys.stderr)  # fmt: skip
    try:
        for batch in plan.batches:
            if batch.key in stored:
                if read_stored:
                    yield StoredBatch(batch, store.load_arrays(batch.key), False)
                continue
            if share is not None and not share(batch.index):
                continue
            entry = train_batch(batch)
            if bar is not None:
                bar.update(len(batch.members))
            yield StoredBatch(batch, entry, True)
    finally:
        if bar is not None:
            bar.close()
    if store is not None and share is None:  # other shares' checkpoints are their processes'
        shutil.rmtree(store.root / "checkpoints", ignore_errors=True)


class Experiment(NamedTuple):
    """A config built into what a run trains (:func:`build`).

    Attributes:
      kind: ``"images"`` (fed from the host) or ``"table"`` (held on the device).
      record: the config as the manifest records it (JSON types).
      plan: the members, in batches.
      losses: each member's loss, batch by batch (None: the unweighted log loss).
      model: the Flax module of every member.
      source: the data.
      train: the trainer's settings.
      options: :func:`iml.pipeline.train_plan.train_plan`'s other keywords for this kind
        (``checkpoint``, ``init_variables``, ``halve_too_large``).
      extra: the manifest's other facts (seeds, sizes).
      members_per_call: where given, ``members_per_call(store)`` is how many members one call
        trains and the manifest's ``memory`` record (:func:`iml.pipeline.runner.members_per_call`).
      dataset: the dataset read, where the config names one (for a command's summary).
    """

    kind: str
    record: dict[str, Any]
    plan: Plan
    losses: Callable[[MemberBatch], list]
    model: Any
    source: DataSource
    train: TrainConfig
    options: dict[str, Any]
    extra: dict[str, Any]
    members_per_call: Callable[[RunStore], tuple[int | None, dict[str, Any]]] | None = None
    dataset: Any = None


def run(
    experiment: Experiment, store: RunStore | None, *, progress: bool = True
) -> list[StoredBatch]:
    """Train and store every member batch of ``experiment`` not yet in ``store``.

    Process 0 records the run (the manifest, the folds). On several processes
    (:mod:`iml.pipeline.distributed`) each one trains its share of the batches on its own
    devices, and every process returns once all batches are stored. Without a store, every
    batch is trained and held in memory.

    Returns:
      The batches trained by this call (with their entries).

    Raises:
      ValueError: for a store holding another run (:meth:`RunStore.check_resumable`).
      RuntimeError: on several processes, for batches missing once every process has stored its
        share (a folder that the processes do not share).
    """
    plan = experiment.plan
    here = distributed.processes() if store is not None else distributed.Processes(0, 1)
    stored = store is not None and all(store.has(b.key) for b in plan.batches)
    per_call, memory = None, {}
    if store is not None and experiment.members_per_call is not None and not stored:
        per_call, memory = experiment.members_per_call(store)
    if store is not None and here.main:
        store.open_run(
            experiment.record,
            kind=experiment.kind,
            devices=[str(d) for d in jax.devices()],
            extra={**experiment.extra, **({"memory": memory} if memory else {}),
                   **({"processes": here.count} if here.count > 1 else {})},
        )  # fmt: skip
        if not store.has("data/folds"):
            labels = experiment.source.labels
            store.save_arrays("data/folds", labels=labels, fold_ids=plan.fold_ids)
    if here.count > 1:
        distributed.barrier("opened")  # batches are stored into a recorded run only
    elif stored:
        return []
    shared = {"share": here.owns, "devices": jax.local_devices()} if here.count > 1 else {}
    trained = list(
        train_plan(
            plan, experiment.losses, experiment.model, experiment.source, experiment.train,
            store=store, read_stored=False, progress=progress, members_per_call=per_call,
            **experiment.options, **shared,
        )
    )  # fmt: skip
    if here.count > 1:
        distributed.barrier("trained")
        missing = [b.index for b in plan.batches if not store.has(b.key)]
        if missing:
            raise RuntimeError(
                f"process {here.index}: batches {missing} are not in {store.root} once every "
                "process stored its share; every process must write to the same folder"
            )
    if store is not None and here.main:
        shutil.rmtree(store.root / "checkpoints", ignore_errors=True)
    return trained
