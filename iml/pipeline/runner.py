"""An experiment on images (:func:`build_images`): its data read from the host in batches, its
member grid, each member's loss and the DenseNets that train on it; :func:`iml.pipeline.
train_plan.run` trains and stores it.

Where ``config.plan.members_per_batch`` is 0 (the default), a batch that needs more than the
device's free memory (or ``config.plan.memory_budget_bytes``) is trained in parts that fit
(:func:`members_per_call`, recorded in the manifest under ``memory``) and stored as one entry.
The config's checks live in :mod:`iml.pipeline.run_config`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ml_collections
import numpy as np

from iml import config as config_lib
from iml.data import Dataset, load_dataset
from iml.grids import (
    WEIGHT_GRIDS,
    LossFamily,
    check_rules_invertible,
    config_betas,
    config_grid,
    config_parameters,
    loss_family,
)
from iml.losses import lookup
from iml.models import (
    build_model,
    load_torchvision_densenet,
    with_conv_impl,
)
from iml.pipeline.defaults import ADAM_SEEDS
from iml.pipeline.plan import MemberBatch, Plan, make_plan
from iml.pipeline.run_config import CheckedConfig, as_config
from iml.pipeline.store import RunStore
from iml.pipeline.train_plan import Experiment
from iml.training import DataSource, TrainConfig
from iml.training.host import host_memory_record
from iml.training.memory import estimate_member_memory, memory_budget

__all__ = [
    "build_images",
    "config_model",
    "is_multiclass",
    "members_per_call",
    "plan_run",
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
        grid = {"losses": config_grid(c.loss, len(dataset.class_names)).keys}
    else:
        grid = {"betas": tuple(float(b) for b in config_betas(c.loss))}
    return make_plan(
        dataset.num_examples,
        **grid,
        seeds=tuple(c.plan.seeds) or ADAM_SEEDS,
        labels=labels,
        groups=groups if has_groups else None,
        n_folds=int(c.data.n_folds),
        n_val_folds=int(c.data.n_val_folds),
        n_test_folds=int(c.data.n_test_folds),
        rotations=list(c.data.rotations) or None,
        fold_seed=int(c.data.fold_seed),
        members_per_batch=int(c.plan.members_per_batch) or None,
    )


def members_per_call(
    model: Any,
    loss: Any,
    image_shape: tuple[int, ...],
    train_config: TrainConfig,
    largest: int,
    budget_bytes: int = 0,
) -> tuple[int | None, dict[str, Any]]:
    """How many members of a run whose ``config.plan.members_per_batch`` is 0 the trainer takes
    in one call: the most that fit ``budget_bytes`` (``config.plan.memory_budget_bytes``; 0: the
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


def build_images(checked: CheckedConfig) -> Experiment:
    """The experiment of a checked config whose model takes images
    (:func:`iml.pipeline.experiment.build`): its dataset read, its members planned, each batch's
    losses and the members' model, starting variables and training settings."""
    config = checked.config
    record = config_lib.to_dict(config)
    del record["distributed"]  # how many processes run it changes no result
    dataset = _dataset(config)
    plan = plan_run(config, dataset)
    labels = run_labels(config, dataset)
    grid = config_grid(config.loss, len(dataset.class_names) if is_multiclass(config) else 2)
    model = config_model(config, grid.spec.n_classes if grid.spec.multiclass else 1)
    train_config = checked.train
    if not grid.spec.multiclass:  # a binary loss, one class weight per member
        loss = run_loss(config)
        loss_record = lookup(config.loss.name)
        if loss_record.optimal_score is None or loss_record.inverse is None:
            # Proposition 4's premise at each beta, before any training (a closed form is the
            # record's own statement)
            check_rules_invertible(grid)

        def losses(batch: MemberBatch) -> list:
            return [loss(m.beta) for m in batch.members]
    else:

        def losses(batch: MemberBatch) -> list:
            return [grid.spec[m.loss] for m in batch.members]

    def per_call(store: RunStore) -> tuple[int | None, dict[str, Any]]:
        if config.plan.members_per_batch:
            return None, {}
        first = plan.batches[0].member_specs(losses(plan.batches[0]))[0]
        largest = max(len(b.members) for b in plan.batches)
        return members_per_call(
            model, first.loss_spec(), dataset.input_shape, train_config, largest,
            int(config.plan.memory_budget_bytes),
        )  # fmt: skip

    return Experiment(
        kind="images",
        record=record,
        plan=plan,
        losses=losses,
        model=model,
        source=_source(dataset, labels),
        train=train_config,
        options={
            "checkpoint": bool(config.plan.checkpoint),
            "init_variables": initial_variables(config, model, dataset.input_shape[-1]),
            "halve_too_large": not config.plan.members_per_batch,
        },
        extra={
            "seeds": {"members": list(plan.seeds), "folds": int(config.data.fold_seed)},
            "num_examples": dataset.num_examples,
            "num_members": len(plan.members),
            "num_batches": len(plan.batches),
            "host_memory": host_memory_record(),
        },
        members_per_call=per_call,
        dataset=dataset,
    )
