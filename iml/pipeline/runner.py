"""Running an experiment on images: load the data, plan the grid, train and store every member
batch (:func:`run_experiment`).

A run is a directory managed by :class:`~iml.pipeline.store.RunStore`: ``manifest.json`` (config,
package versions, seeds, devices), ``data/folds.npz`` (labels and fold of every observation) and
one ``batches/batch-NNNN.npz`` per finished member batch, trained and stored by the one loop of
every run (:func:`iml.pipeline.train_plan.train_plan`: resumable after ``kill -9``). Where
``config.train.members_per_batch`` is 0 (the default), a batch that needs more than the device's
free memory (or ``config.train.memory_budget_bytes``) is trained in parts that fit
(:func:`members_per_call`, recorded in the manifest under ``memory``) and stored as one entry.

The config's checks live in :mod:`iml.pipeline.run_config`; their public names are imported here.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from iml import config as config_lib
from iml.data import Dataset, load_dataset
from iml.grids import (
    WEIGHT_GRIDS,
    LossFamily,
    LossGrid,
    config_parameters,
    loss_family,
    loss_grid,
    parse_weight_grid,
    weight_grid,
)
from iml.models import (
    build_model,
    load_torchvision_densenet,
    with_conv_impl,
)
from iml.pipeline import distributed
from iml.pipeline.plan import MemberBatch, Plan, make_plan
from iml.pipeline.run_config import (
    as_config,
    check_config,
    run_betas,
)
from iml.pipeline.store import RunStore
from iml.pipeline.train_plan import train_plan
from iml.training import DataSource, TrainConfig
from iml.training.host import host_memory_record
from iml.training.memory import estimate_member_memory, memory_budget

__all__ = [
    "check_resumable",
    "config_model",
    "is_multiclass",
    "load_run_data",
    "members_per_call",
    "plan_run",
    "run_experiment",
    "run_grid",
    "run_labels",
    "run_loss",
]

# Image datasets up to this many bytes are read into memory once (digits, PneumoniaMNIST).
_IN_MEMORY_BYTES = 1 << 30


def run_loss(config: Mapping[str, Any]) -> LossFamily:
    """The loss of a run as a function of the members' class weight: ``config.loss.name``
    (:data:`iml.grids.CLASS_WEIGHTS`), with the parameters ``config.loss.params`` sets
    (:func:`iml.grids.config_parameters`).

    Raises:
      ValueError: naming ``config.loss.params.KEY`` for a parameter the loss does not take.
    """
    c = as_config(config)
    try:
        return loss_family(c.loss.name, **config_parameters(c.loss.name, c.loss))
    except ValueError as err:
        raise ValueError(f"config.loss.{err}") from None


def is_multiclass(config: Mapping[str, Any]) -> bool:
    """Whether the run trains multiclass losses (``config.loss.name`` in
    :data:`iml.grids.WEIGHT_GRIDS`) on every class of its dataset."""
    return as_config(config).loss.name in WEIGHT_GRIDS


def run_grid(config: Mapping[str, Any], n_classes: int) -> LossGrid:
    """The grid of a multiclass run's losses (``config.loss.weights`` over ``n_classes``).

    Raises:
      ValueError: naming ``config.loss.weights`` for an entry it cannot read or a class out of
        range.
    """
    c = as_config(config)
    entries = parse_weight_grid(c.loss.weights, c.loss.name, name="config.loss.weights")
    try:
        params = config_parameters(c.loss.name, c.loss)
        return loss_grid(weight_grid(entries, c.loss.name, n_classes, **params))
    except ValueError as err:
        raise ValueError(f"config.loss.{err}") from None


def config_model(config: Mapping[str, Any], num_outputs: int = 1) -> Any:
    """The (unbound) Flax model named by ``config.model.name`` (a model of
    :data:`iml.models.MODELS` that takes images), with ``num_outputs`` logits (1: a binary task;
    the classes of a multiclass one), and the convolutions of ``config.model.conv_impl`` or the
    backend's default (:func:`iml.models.with_conv_impl`)."""
    c = as_config(config)
    try:
        model = build_model(c.model.name, num_outputs, "images", **c.model)
    except ValueError as err:
        raise ValueError(f"config.model.name: {err}") from None
    return with_conv_impl(model, str(c.model.conv_impl) or None)


def _dataset(config: ml_collections.ConfigDict) -> Dataset:
    data = config.data
    dataset = load_dataset(
        data.name,
        data_dir=data.data_dir or None,
        manual_dir=data.manual_dir or None,
        image_size=int(data.image_size) or None,
    )
    n = int(data.max_examples)
    if not n or n >= dataset.num_examples:
        return dataset
    # A fixed random subset (a deterministic function of fold_seed), re-indexed from 0.
    rng = np.random.default_rng(np.random.SeedSequence([int(data.fold_seed), n]))
    keep = np.sort(rng.choice(dataset.num_examples, size=n, replace=False))
    return dataclasses.replace(
        dataset,
        labels=dataset.labels[keep],
        groups=np.asarray(dataset.groups)[keep],
        ids=np.asarray(dataset.ids)[keep],
        reader=lambda idx: dataset.get_batch(keep[idx]),
        split=None if dataset.split is None else dataset.split[keep],
        classes=None if dataset.classes is None else dataset.classes[keep],
    )


def run_labels(config: Mapping[str, Any], dataset: Dataset) -> np.ndarray:
    """The targets a run trains on: the dataset's binary labels, or its classes (``[N]`` class
    indices) where ``config.data.classes`` is ``'all'``.

    Raises:
      ValueError: for ``'all'`` on a dataset without classes.
    """
    if as_config(config).data.classes == "binary":
        return dataset.labels
    if dataset.classes is None:
        raise ValueError(
            f"config.data.classes='all': dataset {dataset.name!r} has no classes beyond its "
            "binary label"
        )
    return np.asarray(dataset.classes)


def plan_run(config: Mapping[str, Any], dataset: Dataset) -> Plan:
    """The member grid of ``config`` over ``dataset`` (folds grouped by patient, stratified by
    the run's labels): its betas, or the keys of its multiclass grid."""
    c = as_config(config)
    groups = dataset.groups
    has_groups = len(np.unique(groups)) < dataset.num_examples
    labels = run_labels(c, dataset)
    if is_multiclass(c):
        grid = {"losses": run_grid(c, len(dataset.class_names)).keys}
    else:
        grid = {"betas": run_betas(c)}
    return make_plan(
        dataset.num_examples,
        **grid,
        seeds=c.train.seeds,
        labels=labels,
        groups=groups if has_groups else None,
        n_folds=int(c.data.n_folds),
        n_val_folds=int(c.data.n_val_folds),
        n_test_folds=int(c.data.n_test_folds),
        rotations=list(c.data.rotations) or None,
        fold_seed=int(c.data.fold_seed),
        members_per_batch=int(c.train.members_per_batch) or None,
    )


def _train_config(config: Mapping[str, Any]) -> TrainConfig:
    c = as_config(config)
    return TrainConfig(
        learning_rate=float(c.train.learning_rate),
        batch_size=int(c.train.batch_size),
        eval_batch_size=int(c.train.eval_batch_size),
        max_epochs=int(c.train.max_epochs),
        patience=int(c.train.patience),
        plateau_patience=int(c.train.plateau_patience),
        min_lr=float(c.train.min_lr),
        flip=bool(c.train.flip),
        normalize=str(c.train.normalize),
    )


def members_per_call(
    model: Any,
    loss: Any,
    image_shape: tuple[int, ...],
    train_config: TrainConfig,
    largest: int,
    budget_bytes: int = 0,
) -> tuple[int | None, dict[str, Any]]:
    """How many members of a run whose ``config.train.members_per_batch`` is 0 the trainer takes
    in one call: the most that fit ``budget_bytes`` (``config.train.memory_budget_bytes``; 0: the
    device's free memory, :func:`iml.training.memory.memory_budget`) by XLA's memory analysis of
    their programs (:func:`iml.training.memory.estimate_member_memory`), at least one.

    Args:
      model, loss: the members' model and one member's loss.
      image_shape: one image's ``(H, W, C)``.
      largest: the members of the plan's largest batch.

    Returns:
      ``(members, record)``: None where every batch fits whole (or nothing limits the memory: a
      CPU without a budget), and what the manifest records of the choice under ``memory``: the
      ``budget_bytes`` (None: no limit), the estimate
      (:meth:`iml.training.memory.MemoryEstimate.record`) and the ``members_per_call`` that fit.
    """
    budget = memory_budget(int(budget_bytes))
    if budget is None:
        return None, {"budget_bytes": None, "members_per_call": None}
    estimate = estimate_member_memory(model, loss, image_shape, train_config)
    fit = max(1, min(estimate.members_within(budget), largest))
    record = {"budget_bytes": budget, **estimate.record(), "members_per_call": fit}
    return (None if fit >= largest else fit), record


def _as_float(images: np.ndarray) -> np.ndarray:
    # The trainer accepts uint8 or [0, 1] floats; floats keep model initialisation on one path.
    return np.asarray(images, np.float32) / np.float32(255.0)


def initial_variables(config: Mapping[str, Any], model: Any, channels: int) -> dict | None:
    """The members' starting variables: ``None`` (random) or ``config.model.weights`` converted.

    The torchvision file's first convolution is adapted to ``channels`` image channels and its
    classifier replaced by a fresh one-logit head
    (:func:`iml.models.load_torchvision_densenet`); a file that does not fit ``model`` raises a
    ``ValueError`` naming the first key that does not match.
    """
    weights = as_config(config).model.weights
    if not weights:
        return None
    path = Path(weights).expanduser()
    return load_torchvision_densenet(path, model, head="init", in_channels=int(channels))


def _source(dataset: Dataset, labels: np.ndarray) -> DataSource:
    n = dataset.num_examples
    if n * int(np.prod(dataset.input_shape)) <= _IN_MEMORY_BYTES:
        images = _as_float(dataset.get_batch(np.arange(n)))
        return DataSource.from_arrays(images, labels)
    return DataSource(get_batch=lambda idx: _as_float(dataset.get_batch(idx)), labels=labels)


def load_run_data(config: Mapping[str, Any]) -> tuple[Dataset, Plan]:
    """Check ``config``, load its dataset and plan its grid (no training)."""
    check_config(config)
    c = as_config(config)
    dataset = _dataset(c)
    return dataset, plan_run(c, dataset)


def check_resumable(config: Mapping[str, Any], out: str | Path) -> dict[str, Any]:
    """The config that :func:`run_experiment` stores in ``out``, checked there; writes nothing.

    ``config`` as nested dicts of JSON types, without ``config.distributed`` (how many processes
    run it, which changes no result).

    Raises:
      ValueError: if ``out`` holds a run with another config, naming the first differing key (and,
        where only the report's settings differ, the ``iml figures`` command that reports the
        stored members so), a sweep, or a run of an earlier schema.
    """
    current = config_lib.to_dict(as_config(config))
    del current["distributed"]
    manifest = RunStore(out).manifest() if Path(out).is_dir() else None
    if manifest is None:
        return current
    if manifest["kind"] != "images":
        raise ValueError(
            f"{out} holds an `iml sweep` run, not an `iml reproduce` run; choose another output "
            "directory"
        )
    old = manifest["config"]
    key = config_lib.first_difference(old, current)
    if key is None:
        return old
    was, now = config_lib.lookup(old, key), config_lib.lookup(current, key)
    hint = ""
    if config_lib.first_difference({**old, "eval": current["eval"]}, current) is None:
        # only the report's settings differ: it can be made from the stored members
        flags = " ".join(
            f"--config.eval.{k}={v}" for k, v in current["eval"].items() if old["eval"][k] != v
        )
        hint = f", or report the stored members so: iml figures --run {out} --out DIR {flags}"
    raise ValueError(
        f"{out} holds a run with a different config (first difference: config.{key}: {was!r} "
        f"stored, {now!r} now); choose another output directory{hint}"
    )


def run_experiment(
    config: Mapping[str, Any], out: str | Path, *, progress: bool = True
) -> RunStore:
    """Train and score every member batch of ``config`` not yet stored in ``out``.

    Args:
      config: a run config (nested as :func:`default_config`: a ``ConfigDict`` or dicts).
      out: the run directory; a directory holding a run with another config is refused
        (:func:`check_resumable`).
      progress: show progress bars (members with time left; epochs of the current batch).

    On several processes (:mod:`iml.pipeline.distributed`) each one trains its share of the
    batches on its own devices; process 0 alone records the run (the manifest, the folds), and
    every process returns once all batches are stored.

    Returns:
      The run's :class:`RunStore`, with every batch stored.

    Raises:
      RuntimeError: on several processes, for batches missing once every process has stored its
        share (a folder that the processes do not share).
    """
    check_config(config)
    config = as_config(config)
    stored = check_resumable(config, out)
    dataset = _dataset(config)
    plan = plan_run(config, dataset)
    labels = run_labels(config, dataset)
    grid = run_grid(config, len(dataset.class_names)) if is_multiclass(config) else None
    model = config_model(config, 1 if grid is None else grid.spec.n_classes)
    init_variables = initial_variables(config, model, dataset.input_shape[-1])
    train_config = _train_config(config)
    if grid is None:  # a binary loss, one class weight per member
        loss = run_loss(config)

        def losses(batch: MemberBatch) -> list:
            return [None if loss.name == "log" else loss(m.beta) for m in batch.members]
    else:

        def losses(batch: MemberBatch) -> list:
            return [grid.spec[m.loss] for m in batch.members]

    store = RunStore(out)
    here = distributed.processes()
    per_call, memory = None, {}
    if not config.train.members_per_batch and not all(store.has(b.key) for b in plan.batches):
        first = plan.batches[0].member_specs(losses(plan.batches[0]))[0]
        largest = max(len(b.members) for b in plan.batches)
        per_call, memory = members_per_call(
            model, first.loss_spec(), dataset.input_shape, train_config, largest,
            int(config.train.memory_budget_bytes),
        )  # fmt: skip
    if here.main:
        store.open_run(
            stored,
            kind="images",
            devices=[str(d) for d in jax.devices()],
            extra={
                "seeds": {"members": list(plan.seeds), "folds": int(config.data.fold_seed)},
                "num_examples": dataset.num_examples,
                "num_members": len(plan.members),
                "num_batches": len(plan.batches),
                "host_memory": host_memory_record(),
                **({"memory": memory} if memory else {}),
                **({"processes": here.count} if here.count > 1 else {}),
            },
        )
        store.save_arrays("data/folds", labels=labels, fold_ids=plan.fold_ids)
    distributed.barrier("opened")  # batches are stored into a recorded run only
    if here.count == 1 and all(store.has(b.key) for b in plan.batches):
        return store
    batches = train_plan(
        plan, losses, model, _source(dataset, labels), train_config, store=store,
        read_stored=False, checkpoint=bool(config.train.checkpoint),
        init_variables=init_variables, progress=progress, members_per_call=per_call,
        halve_too_large=not config.train.members_per_batch,
        **({"share": here.owns, "devices": jax.local_devices()} if here.count > 1 else {}),
    )  # fmt: skip
    for _ in batches:
        pass
    if here.count > 1:
        distributed.barrier("trained")
        missing = [b.index for b in plan.batches if not store.has(b.key)]
        if missing:
            raise RuntimeError(
                f"process {here.index}: batches {missing} are not in {out} once every process "
                "stored its share; every process must write to the same folder"
            )
        if here.main:
            shutil.rmtree(store.root / "checkpoints", ignore_errors=True)
    return store
