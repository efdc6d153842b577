"""Training a plan: every member batch not yet stored is trained and stored, one after another.

This is the one loop of every run (``iml reproduce``, ``iml sweep``, :func:`iml.run_sweep`): each
batch of a :class:`~iml.pipeline.plan.Plan` is trained through :func:`iml.training.train` and
stored as one atomic entry in the one member layout (:func:`iml.pipeline.store.member_entry`,
``batches/batch-NNNN``), so a run killed at any moment and started again skips the stored
batches, resumes the interrupted one from its checkpoint where it keeps them, and ends with the
results of an uninterrupted run.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from tqdm.auto import tqdm

from iml.pipeline.plan import MemberBatch, Plan
from iml.pipeline.store import RunStore, member_entry
from iml.spec import LossSpec
from iml.training import DataSource, TrainConfig, is_gpu_kernel_failure, is_out_of_memory
from iml.training.train import train

__all__ = ["StoredBatch", "train_plan"]


class StoredBatch(NamedTuple):
    """One batch of a plan with its stored entry (:func:`iml.pipeline.store.member_entry`), and
    whether this call trained it (False: it was read from the store)."""

    batch: MemberBatch
    entry: dict[str, np.ndarray]
    trained: bool


def _too_large(err: Exception, batch: MemberBatch, config: TrainConfig) -> Exception | None:
    """The error to raise for a batch too large for the device, or None for any other error."""
    if is_out_of_memory(err):
        error, what = MemoryError, "ran out of device memory"
    elif is_gpu_kernel_failure(err) and len(batch.members) > 1:
        error, what = RuntimeError, "failed on the GPU (XLA's autotuner or a CUDA illegal address)"
    else:
        return None
    return error(
        f"batch {batch.index}: {len(batch.members)} members trained in one program {what}; run "
        "again with fewer at a time, e.g. "
        f"--config.train.members_per_batch={max(1, len(batch.members) // 2)}, or with fewer "
        "validation images per member and step (--config.train.eval_batch_size, now "
        f"{config.eval_batch_size}), in a new output directory"
    )


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
) -> Iterator[StoredBatch]:
    """Every batch of ``plan`` in order: read from ``store`` where stored, else trained and stored.

    Args:
      plan: the members (:func:`iml.pipeline.plan.make_plan`).
      losses: each member's loss, batch by batch (``None``: the unweighted log loss).
      model: the Flax module of every member.
      data: the data every member reads (:class:`iml.training.DataSource`).
      config: the trainer's configuration.
      store: where each trained batch is stored (and stored batches are read); None keeps the
        entries in memory only.
      read_stored: read the stored batches (False: skip them, yielding only the trained ones).
      checkpoint: keep a checkpoint of the batch in training under ``store``'s ``checkpoints/``
        (the host's feed), removed once the batch is stored.
      init_variables: the members' starting variables (None: random).
      progress: a bar of members over the plan, and one of epochs within each batch.

    Yields:
      A :class:`StoredBatch` per batch.

    Raises:
      MemoryError, RuntimeError: for a batch too large for the device, naming the setting that
        makes batches smaller.
    """
    stored = {b.key for b in plan.batches if store is not None and store.has(b.key)}
    done = sum(len(b.members) for b in plan.batches if b.key in stored)
    bar = None
    if progress and done < len(plan.members) and len(plan.batches) > 1:
        bar = tqdm(total=len(plan.members), initial=done, desc="members", unit="member",
                   file=sys.stderr)  # fmt: skip
    try:
        for batch in plan.batches:
            if batch.key in stored:
                if read_stored:
                    yield StoredBatch(batch, store.load_arrays(batch.key), False)
                continue
            specs = batch.member_specs(losses(batch))
            ckpt = None if store is None else store.root / "checkpoints" / batch.key.split("/")[1]
            desc = f"batch {batch.index + 1}/{len(plan.batches)} epochs" if progress else False
            try:
                trained = train(
                    model,
                    specs,
                    data,
                    config,
                    checkpoint_dir=str(ckpt) if checkpoint and ckpt is not None else None,
                    init_variables=init_variables,
                    progress=desc,
                )
            except Exception as err:
                if (error := _too_large(err, batch, config)) is None:
                    raise
                raise error from err
            tests = [s.test_idx for s in specs]
            entry = member_entry(trained, batch.described(), tests, config.max_epochs)
            if store is not None:
                store.save_arrays(batch.key, **entry)
                shutil.rmtree(ckpt, ignore_errors=True)
            if bar is not None:
                bar.update(len(batch.members))
            yield StoredBatch(batch, entry, True)
    finally:
        if bar is not None:
            bar.close()
    if store is not None:
        shutil.rmtree(store.root / "checkpoints", ignore_errors=True)
