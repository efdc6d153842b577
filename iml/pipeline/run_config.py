"""An experiment's config (:data:`iml.pipeline.defaults.SCHEMA`): read, and checked before any
work starts, for either kind of run.

:func:`as_config` reads a config (nested dicts or a ``ConfigDict``) so that a value of the wrong
type is an error naming its key. :func:`check_config` checks every key of a run of the kind its
model makes (:func:`experiment_kind`: images fed from the host, or a table held on the device)
and returns what the config stands for (:class:`CheckedConfig`): the loss's grid, the training
settings and, for a table, the data source that :func:`load_table` reads. The datasets a table
run takes are a live view of the dataset registry (:data:`TABLE_DATASETS`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import ml_collections

from iml import _validation as V
from iml import config as config_lib
from iml.data.errors import ArgumentError
from iml.data.tabular import UCI_FILES, check_uci_folder
from iml.grids import RegistryView
from iml.losses import lookup
from iml.models import CONV_IMPLS, DenseNet, min_input_size
from iml.models.registry import build_model, model_record
from iml.pipeline.defaults import (
    KeyNames,
    check_eval_settings,
    check_loss_section,
    check_read_keys,
    default_config,
    sweep_config,
    train_fields,
)
from iml.training.tabular import TABULAR_DEFAULTS, table_solver
from iml.training.train_config import L2_CHOICES, L2_SCALES, SOLVERS, TrainConfig

if TYPE_CHECKING:
    from iml.data import Dataset

__all__ = [
    "TABLE_DATASETS",
    "CheckedConfig",
    "as_config",
    "check_config",
    "experiment_kind",
    "load_table",
]


def as_config(
    config: Mapping[str, Any], defaults: ml_collections.ConfigDict | None = None
) -> ml_collections.ConfigDict:
    """``config`` (nested dicts or a ``ConfigDict``) in a locked config, so that a value of the
    wrong type is an error naming its key: ``defaults`` (a new :func:`default_config` where
    None), filled in place with ``config``'s values and returned."""
    c = default_config() if defaults is None else defaults
    for key, value in config_lib.flatten(config).items():
        config_lib.override(c, key, value)
    return c


def experiment_kind(
    config: Mapping[str, Any] | ml_collections.ConfigDict, names: Mapping[str, str] | None = None
) -> str:
    """``"table"`` where ``config.model.name`` takes rows (its data held whole on the device),
    ``"images"`` where it takes images only (fed from the host).

    Raises:
      ValueError: naming ``config.model.name`` (or its name in ``names``) for an unknown model.
    """
    try:
        record = model_record(config_lib.lookup(config, "model.name"))
    except ValueError as err:
        raise ValueError(f"{(names or {}).get('model.name', 'config.model.name')}: {err}") from None
    return "table" if "rows" in record.inputs else "images"


def _registered_datasets() -> dict[str, Any]:
    # imported here: the dataset registry loads tensorflow-datasets, which a run on a CSV file
    # does without
    from iml.data.datasets import DATASETS

    return {name: source for name, source in sorted(DATASETS.items()) if name != "csv"}


#: The datasets ``config.data.name`` names in a run on a table: every dataset of
#: :data:`iml.data.DATASETS`, images flattened into features (a delimited file is
#: ``config.data.csv`` instead). A live view of the registry: a dataset registered later is a
#: table run's dataset too.
TABLE_DATASETS: Mapping[str, Any] = RegistryView(_registered_datasets)

# Built-in datasets of a table run that need no files; images are flattened into features.
_BUILT_IN = ("digits",)


class CheckedConfig(NamedTuple):
    """A checked config and what it stands for (:func:`check_config`)."""

    config: ml_collections.ConfigDict
    kind: str  # "images" or "table" (experiment_kind)
    grid: Any  # betas (log, squared), alphas (focal) or parsed weights (multiclass)
    train: TrainConfig
    source: dict[str, Any]  # a table's load_dataset arguments, as the store records them
    name: KeyNames


def check_config(
    config: Mapping[str, Any] | ml_collections.ConfigDict, names: Mapping[str, str] | None = None
) -> CheckedConfig:
    """Check a config (nested, as :func:`default_config`) before any file is read, for the kind
    of run its model makes, and return what it stands for.

    Args:
      config: the config.
      names: how the messages name a key (``{"loss.name": "--loss"}``: a command line names the
        flag that set it); a key not in it is named ``config.SECTION.KEY``.

    Raises:
      ValueError: naming the first bad key: an unknown or missing key, an unknown dataset, loss,
        model or solver, a beta outside ``(0, 1)``, an unreadable weight grid, a key that this
        kind of run or the chosen loss and data do not read, a count below its minimum.
      FileNotFoundError: for a data, manual or weights path that does not exist.
    """
    config_lib.check_keys(config, default_config())  # the schema's, which both kinds share
    kind = experiment_kind(config, names)
    defaults = default_config if kind == "images" else sweep_config  # the kind's command's
    c = as_config(config, defaults())
    name = KeyNames(c, names)
    inputs = "images" if kind == "images" else "rows"
    check_read_keys(c, inputs, name)
    (_check_dataset if kind == "images" else _check_choices)(c, name)
    grid = check_loss_section(c, defaults(), name)
    if tuple(c.plan.seeds):  # () = the seeds the solver takes (EXACT_SEEDS, ADAM_SEEDS)
        V.check_seeds(name("plan.seeds"), tuple(c.plan.seeds))
    check_eval_settings(c.eval, lambda key: name(f"eval.{key}"), int(kind == "images"))
    for key in ("data.fold_seed", "data.image_size"):
        V.check_count(name(key), config_lib.lookup(c, key), 0)
    try:
        model = build_model(c.model.name, 1, inputs, **c.model)
    except ValueError as err:
        key = "model.hidden" if str(err).startswith("hidden") else "model.name"
        raise ValueError(f"{name(key)}: {err}") from None
    if kind == "images":
        fields, source = _check_images(c, name, model), {}
    else:
        fields, source = _check_table(c, name, model), _source(c, name)
    base = TABULAR_DEFAULTS if kind == "table" else TrainConfig()
    try:
        train = dataclasses.replace(base, **fields)
    except ValueError as err:
        field = str(err).split()[0].removeprefix("TrainConfig.")
        key = f"train.{field}" if field in fields else None
        raise ValueError(f"{name(key) if key else 'training option'}: {err}") from None
    return CheckedConfig(c, kind, grid, train, source, name)


# Keys of a run on images holding a count of at least one, and of at least zero.
_COUNTS = (
    "data.n_folds",
    "data.n_test_folds",
    "train.max_epochs",
    "train.batch_size",
    "train.eval_batch_size",
    "train.patience",
    "train.plateau_patience",
)
_COUNTS_OR_ZERO = (
    "data.max_examples",
    "data.n_val_folds",
    "plan.members_per_batch",
    "plan.memory_budget_bytes",
)


def _check_dataset(c: ml_collections.ConfigDict, name: KeyNames) -> None:
    """A run on images: its dataset."""
    # imported here: the dataset registry loads tensorflow-datasets
    from iml.data import DATASETS

    data = c.data
    if data.name not in DATASETS:
        raise ValueError(
            f"{name('data.name')}: unknown dataset {data.name!r}; expected one of {list(DATASETS)}"
        )
    if data.classes == "all" and not DATASETS[data.name].classes:
        with_classes = [n for n, s in DATASETS.items() if s.classes and s.kind == "image"]
        raise ValueError(
            f"{name.said('data.classes')}: dataset {data.name!r} has no classes beyond its "
            f"binary label; the image datasets with classes are {with_classes}"
        )
    if DATASETS[data.name].kind == "tabular":
        raise ValueError(
            f"{name('data.name')}: dataset {data.name!r} is tabular; `iml reproduce` trains "
            "DenseNets on images (digits, pneumoniamnist, chestxray14); `iml sweep` takes tables"
        )


def _check_images(c: ml_collections.ConfigDict, name: KeyNames, model: Any) -> dict[str, Any]:
    """The other checks of a run on images; returns its :class:`TrainConfig` fields."""
    data = c.data
    for keys, minimum in ((_COUNTS, 1), (_COUNTS_OR_ZERO, 0)):
        for key in keys:
            V.check_count(name(key), config_lib.lookup(c, key), minimum)
    if c.plan.members_per_batch and c.plan.memory_budget_bytes:
        raise ValueError(
            f"{name('plan.memory_budget_bytes')} applies where {name('plan.members_per_batch')} "
            f"is 0 (the default), not {c.plan.members_per_batch}; set only one of them"
        )
    if data.n_folds - data.n_val_folds - data.n_test_folds < 1:
        raise ValueError(
            f"{name('data.n_folds')}={data.n_folds} leaves no training fold after "
            f"n_val_folds={data.n_val_folds} and n_test_folds={data.n_test_folds}"
        )
    V.check_positive(name("train.learning_rate"), c.train.learning_rate)
    V.check_non_negative(name("train.min_lr"), c.train.min_lr)
    for key in ("data_dir", "manual_dir"):
        if data[key] and not Path(data[key]).expanduser().is_dir():
            raise FileNotFoundError(f"{name(f'data.{key}')}: directory not found: {data[key]}")
    if c.model.weights and not isinstance(model, DenseNet):
        raise ValueError(
            f"{name('model.weights')}: torchvision's weights fit the DenseNets, not "
            f"{c.model.name!r}"
        )
    if c.model.weights and not Path(c.model.weights).expanduser().is_file():
        raise FileNotFoundError(f"{name('model.weights')}: file not found: {c.model.weights}")
    if c.model.conv_impl and c.model.conv_impl not in CONV_IMPLS:
        raise ValueError(
            f"{name('model.conv_impl')} must be '' (the backend's default) or one of "
            f"{CONV_IMPLS}, got {c.model.conv_impl!r}"
        )
    if data.image_size and data.image_size < min_input_size(model):
        raise ValueError(
            f"{name('data.image_size')}={data.image_size} is too small for {c.model.name} "
            f"(at least {min_input_size(model)} px)"
        )
    return train_fields(c, "images")


def _check_choices(c: ml_collections.ConfigDict, name: KeyNames) -> None:
    """A run on a table: the keys that take one of a few values."""
    for key, known in (
        ("data.name", ["", "csv", *(TABLE_DATASETS if c.data.name not in ("", "csv") else ())]),
        ("train.solver", list(SOLVERS)),
        ("train.l2_scale", list(L2_SCALES)),
        ("train.l2_choice", list(L2_CHOICES)),
    ):
        if config_lib.lookup(c, key) not in known:
            value = config_lib.lookup(c, key)
            raise ValueError(f"{name(key)}: unknown value {value!r}; expected one of {known}")


def _check_table(c: ml_collections.ConfigDict, name: KeyNames, model: Any) -> dict[str, Any]:
    """The other checks of a run on a table, but for its data source; returns its
    :class:`TrainConfig` fields, the solver decided."""
    V.check_count(name("plan.losses_per_batch"), c.plan.losses_per_batch, 0)
    n_folds = c.data.n_folds
    if isinstance(n_folds, bool) or not isinstance(n_folds, int) or n_folds < 4:
        raise ValueError(
            f"{name('data.n_folds')} must be an integer >= 4 (train/2 val/1 test), got {n_folds!r}"
        )
    try:
        solver = table_solver(model, lookup(c.loss.name), c.train.solver)
    except ValueError as err:
        raise ValueError(f"{name.said('train.solver')}: {err}") from None
    return train_fields(c, "rows") | {"solver": solver}


# The config key that stands for each argument of iml.data.load_csv.
_CSV_KEYS = {
    "path": "data.csv",
    "frame": "data.csv",
    "target": "data.target",
    "positive": "data.positive",
    "delimiter": "data.delimiter",
}


def _given(c: ml_collections.ConfigDict, key: str) -> bool:
    """Whether ``key`` of ``c`` differs from a table run's default."""
    return config_lib.lookup(c, key) != config_lib.lookup(sweep_config(), key)


def _source(c: ml_collections.ConfigDict, name: KeyNames) -> dict[str, Any]:
    """The checked ``load_dataset`` arguments of a table run's ``c.data``; no file is read."""
    data = c.data
    said, wanted = name.said, name.wanted
    if (data.csv and data.name not in ("", "csv")) or not (data.csv or data.name):
        raise ValueError(
            f"give exactly one of {wanted('data.csv', 'PATH')} or "
            f"{wanted('data.name', '|'.join(TABLE_DATASETS))}"
        )
    if data.name == "csv" and not data.csv:
        raise ValueError(f"{said('data.name')} needs {wanted('data.csv', 'PATH')}")
    dataset = data.name or "csv"
    if data.classes == "all" and (dataset == "csv" or not TABLE_DATASETS[dataset].classes):
        with_classes = [n for n, source in TABLE_DATASETS.items() if source.classes]
        raise ValueError(
            f"{said('data.classes')} applies to the datasets with classes: {with_classes}"
        )
    image = dataset != "csv" and dataset not in UCI_FILES
    if data.image_size and not image:
        raise ValueError(f"{name('data.image_size')} applies to image datasets, not {dataset}")
    if dataset == "csv":
        if not data.target:
            raise ValueError(f"{name('data.csv')} needs {wanted('data.target', 'COLUMN')}")
        source = {"name": "csv", "path": data.csv, "target": data.target}
        for key in ("positive", "delimiter"):
            if data[key]:
                source[key] = data[key]
        return source
    for key in ("data.target", "data.delimiter"):
        if _given(c, key):
            raise ValueError(
                f"{name(key)} applies to {name('data.csv')} only, not {said('data.name')}"
            )
    if dataset not in UCI_FILES and data.data_dir and not Path(data.data_dir).is_dir():
        raise FileNotFoundError(f"{name('data.data_dir')}: folder not found: {data.data_dir}")
    sized = {"image_size": data.image_size} if data.image_size else {}
    if dataset in _BUILT_IN:
        source = {"name": dataset, **sized}
        if data.data_dir:
            source["data_dir"] = data.data_dir
        if data.positive:
            if data.classes == "all":
                raise ValueError(
                    f"{name('data.positive')} does not apply to {said('data.classes')}"
                )
            if not (data.positive.isdigit() and len(data.positive) == 1):
                raise ValueError(
                    f"{name('data.positive')} of {said('data.name')} is one digit, got "
                    f"{data.positive!r}"
                )
            source["positive_digit"] = int(data.positive)
        return source
    if dataset not in UCI_FILES:  # a registered dataset: its folder, if any, holds its files
        source = {"name": dataset, **sized}
        if data.data_dir:
            source["manual_dir"] = data.data_dir
        if data.positive:
            raise ValueError(
                f"{name('data.positive')} applies to {name('data.csv')}, letter and digits only, "
                f"not {said('data.name')}"
            )
        return source
    if not data.data_dir:
        raise ValueError(
            f"{said('data.name')} needs {wanted('data.data_dir', 'DIR')} (the folder of "
            f"{UCI_FILES[dataset][0]})"
        )
    folder = check_uci_folder(dataset, data.data_dir, name("data.data_dir"))
    source = {"name": dataset, "manual_dir": str(folder)}
    if data.positive:
        if dataset != "letter":
            raise ValueError(
                f"{name('data.positive')} applies to {name('data.csv')}, "
                f"{said('data.name', 'letter')} and digits only"
            )
        if data.classes == "all":
            raise ValueError(f"{name('data.positive')} does not apply to {said('data.classes')}")
        source["positive_letter"] = data.positive
    return source


def load_table(checked: CheckedConfig) -> Dataset:
    """The dataset of a checked table run; errors name the key (or flag) of each argument."""
    names = {arg: checked.name(key) for arg, key in _CSV_KEYS.items()}
    # imported here: iml.data's dataset registry loads tensorflow-datasets, which a run on a
    # table or a CSV file does without
    from iml.data import load_dataset

    options = dict(checked.source)
    dataset = options.pop("name")
    try:
        return load_dataset(dataset, **options)
    except ArgumentError as err:
        raise err.for_flags(names) from None
