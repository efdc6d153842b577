"""One experiment: a config built into its parts (:func:`build`), trained and stored
(:func:`run`), then reported (:func:`iml.pipeline.report.report_run`).

The kind of run follows from the model and the data (:func:`experiment_kind`): a model that
takes rows trains on a table held whole on the device (a tabular dataset, or an image dataset's
pixels as features), a model that takes images only on images fed from the host in batches.
``iml reproduce`` and ``iml sweep`` are two default configs of this one experiment
(:func:`iml.pipeline.defaults.default_config`, :func:`~iml.pipeline.defaults.sweep_config`).

A run is a directory managed by :class:`~iml.pipeline.store.RunStore`: ``manifest.json`` (the
record of the config, its ``kind`` and ``schema``, package versions, devices), ``data/folds.npz``
(labels and fold of every observation) and one ``batches/batch-NNNN.npz`` per finished member
batch, trained and stored by the one loop of every run
(:func:`iml.pipeline.train_plan.train_plan`: resumable after ``kill -9``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import ml_collections

from iml import config as config_lib
from iml.models.registry import model_record
from iml.pipeline import distributed
from iml.pipeline.plan import MemberBatch, Plan
from iml.pipeline.store import RunStore
from iml.pipeline.train_plan import StoredBatch, train_plan
from iml.training import DataSource, TrainConfig

__all__ = ["Experiment", "build", "check_resumable", "experiment_kind", "run"]


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


def experiment_kind(config: Mapping[str, Any] | ml_collections.ConfigDict) -> str:
    """``"table"`` where ``config.model.name`` takes rows (its data held whole on the device),
    ``"images"`` where it takes images only (fed from the host).

    Raises:
      ValueError: naming ``config.model.name`` for an unknown model.
    """
    try:
        record = model_record(config_lib.lookup(config, "model.name"))
    except ValueError as err:
        raise ValueError(f"config.model.name: {err}") from None
    return "table" if "rows" in record.inputs else "images"


def build(
    config: Mapping[str, Any] | ml_collections.ConfigDict, names: Mapping[str, str] | None = None
) -> Experiment:
    """Check ``config``, read its data and lay out its members: everything a run trains, with
    nothing trained.

    Args:
      config: an experiment's config (:data:`iml.pipeline.defaults.SCHEMA`).
      names: how errors name a key (``{"loss.name": "--loss"}``: the flag that set it).

    Raises:
      ValueError: for a bad config or bad data, naming the key (or its name in ``names``).
      FileNotFoundError: for a missing file or folder, naming the key.
    """
    # imported here: each kind's builder loads its own data and models
    if experiment_kind(config) == "images":
        from iml.pipeline.runner import build_images

        return build_images(config)
    from iml.pipeline.sweep import build_table

    return build_table(config, names)


def check_resumable(experiment: Experiment, out: str | Path) -> dict[str, Any]:
    """The record :func:`run` stores in ``out``, checked against a run there; writes nothing.

    Raises:
      ValueError: naming ``out``, if it holds a run of the other kind or another config (the
        first differing key; where only the report's settings differ, also the ``iml figures``
        command that reports the stored members so), or one of an earlier schema.
    """
    store = RunStore(out)
    try:
        return store.check_resumable(experiment.record, experiment.kind)
    except ValueError as err:
        manifest = store.manifest()
        hint = ""
        old, new = (manifest or {}).get("config", {}), experiment.record
        if manifest and "eval" in old and "eval" in new and old["eval"] != new["eval"]:
            if config_lib.first_difference({**old, "eval": new["eval"]}, new) is None:
                flags = " ".join(f"--config.eval.{k}={v}" for k, v in new["eval"].items()
                                 if old["eval"].get(k) != v)  # fmt: skip
                hint = (f", or report the stored members so: iml figures --run {out} --out DIR "
                        f"{flags}")  # fmt: skip
        raise ValueError(f"--out: {err}{hint}") from None


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
