"""The config of `iml sweep`: its defaults, and the one check that reads no file.

:func:`sweep_config` is the default config (the experiment's schema with the sweep's defaults,
:mod:`iml.pipeline.defaults`); :func:`check_sweep_config` checks
one before any file is read, naming the first bad key as the command line or the config names
it; :func:`checked_sweep_config` also returns what the config stands for (the data source, the
grid of weights, the training settings), from which :func:`load_sweep_data` reads the data and
:func:`iml.grids.config_grid` makes the grid of losses. The datasets, losses and models a sweep
takes are live views of their registries.
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
from iml.grids import (
    RegistryView,
)
from iml.losses import lookup
from iml.models.registry import build_model
from iml.pipeline.defaults import (
    KeyNames,
    check_eval_settings,
    check_loss_section,
    check_read_keys,
    sweep_config,
    train_fields,
)
from iml.training.tabular import TABULAR_DEFAULTS, table_solver
from iml.training.train_config import L2_CHOICES, L2_SCALES, SOLVERS, TrainConfig

if TYPE_CHECKING:
    from iml.data import Dataset

__all__ = [
    "SWEEP_DATASETS",
    "CheckedSweep",
    "check_sweep_config",
    "checked_sweep_config",
    "load_sweep_data",
]


# Built-in datasets of the sweep that need no files; images are flattened into features.
_BUILT_IN = ("digits",)


def _registered_datasets() -> dict[str, Any]:
    # imported here: the dataset registry loads tensorflow-datasets, which a sweep of a CSV file
    # does without
    from iml.data.datasets import DATASETS

    return {name: source for name, source in sorted(DATASETS.items()) if name != "csv"}


#: The datasets ``config.data.name`` names: every dataset of :data:`iml.data.DATASETS`, images
#: flattened into features (a delimited file is ``config.data.csv`` instead). A live view of the
#: registry: a dataset registered later is a sweep's dataset too.
SWEEP_DATASETS: Mapping[str, Any] = RegistryView(_registered_datasets)


def _given(c: ml_collections.ConfigDict, key: str) -> bool:
    """Whether ``key`` of ``c`` differs from its default (a key at its default is not set)."""
    return config_lib.lookup(c, key) != config_lib.lookup(sweep_config(), key)


class CheckedSweep(NamedTuple):
    """A checked sweep config and what it stands for (:func:`checked_sweep_config`)."""

    config: ml_collections.ConfigDict
    source: dict[str, Any]  # the load_dataset arguments, as the store records them
    grid: Any  # betas (log, squared), alphas (focal) or parsed weights (multiclass)
    train: TrainConfig
    name: KeyNames


# The config key that stands for each argument of iml.data.load_csv.
_CSV_KEYS = {
    "path": "data.csv",
    "frame": "data.csv",
    "target": "data.target",
    "positive": "data.positive",
    "delimiter": "data.delimiter",
}


def check_sweep_config(
    config: Mapping[str, Any] | ml_collections.ConfigDict, names: Mapping[str, str] | None = None
) -> None:
    """Check a sweep's config (nested, as :func:`sweep_config`) before any file is read.

    Args:
      config: the config.
      names: how the messages name a key (``{"loss.name": "--loss"}``: a command line names the
        flag that set it); a key not in it is named ``config.SECTION.KEY``.

    Raises:
      ValueError: naming the first bad key: an unknown or missing key, an unknown dataset, loss,
        model or solver, a beta outside ``(0, 1)``, an unreadable weight grid, a key that does
        not apply to the chosen loss or data, a count below its minimum.
      FileNotFoundError: for a data folder, or a UCI file in it, that does not exist.
    """
    checked_sweep_config(config, names)


def checked_sweep_config(
    config: Mapping[str, Any] | ml_collections.ConfigDict, names: Mapping[str, str] | None = None
) -> CheckedSweep:
    """:func:`check_sweep_config`, returning the checked config with the data source, the grid
    of weights and the training settings it stands for."""
    config_lib.check_keys(config, sweep_config())
    c = sweep_config()
    for key, value in config_lib.flatten(config).items():
        config_lib.override(c, key, value)
    name = KeyNames(c, names)
    said = name.said
    check_read_keys(c, "rows", name)
    for key, known in (
        ("data.name", ["", "csv", *(SWEEP_DATASETS if c.data.name not in ("", "csv") else ())]),
        ("train.solver", list(SOLVERS)),
        ("train.l2_scale", list(L2_SCALES)),
        ("train.l2_choice", list(L2_CHOICES)),
    ):
        if config_lib.lookup(c, key) not in known:
            value = config_lib.lookup(c, key)
            raise ValueError(f"{name(key)}: unknown value {value!r}; expected one of {known}")
    grid = check_loss_section(c, sweep_config(), name)
    loss = c.loss.name
    if c.plan.seeds != ():
        V.check_seeds(name("plan.seeds"), c.plan.seeds)
    V.check_count(name("plan.losses_per_batch"), c.plan.losses_per_batch, 0)
    check_eval_settings(c.eval, lambda key: name(f"eval.{key}"), min_bootstrap=0)
    V.check_count(name("data.fold_seed"), c.data.fold_seed, 0)
    V.check_count(name("data.image_size"), c.data.image_size, 0)
    n_folds = c.data.n_folds
    if isinstance(n_folds, bool) or not isinstance(n_folds, int) or n_folds < 4:
        raise ValueError(
            f"{name('data.n_folds')} must be an integer >= 4 (train/2 val/1 test), got {n_folds!r}"
        )
    try:
        model = build_model(c.model.name, 1, "rows", **c.model)
    except ValueError as err:
        key = "model.hidden" if str(err).startswith("hidden") else "model.name"
        raise ValueError(f"{name(key)}: {err}") from None
    try:
        solver = table_solver(model, lookup(loss), c.train.solver)
    except ValueError as err:
        raise ValueError(f"{said('train.solver')}: {err}") from None
    fields = train_fields(c, "rows") | {"solver": solver}
    try:
        train = dataclasses.replace(TABULAR_DEFAULTS, **fields)
    except ValueError as err:
        field = str(err).split()[0].removeprefix("TrainConfig.")
        key = f"train.{field}" if field in fields else None
        raise ValueError(f"{name(key) if key else 'training option'}: {err}") from None
    source = _source(c, name)
    return CheckedSweep(c, source, grid, train, name)


def _source(c: ml_collections.ConfigDict, name: KeyNames) -> dict[str, Any]:
    """The checked ``load_dataset`` arguments of ``c.data``; no file is read."""
    data = c.data
    said, wanted = name.said, name.wanted
    if (data.csv and data.name not in ("", "csv")) or not (data.csv or data.name):
        raise ValueError(
            f"give exactly one of {wanted('data.csv', 'PATH')} or "
            f"{wanted('data.name', '|'.join(SWEEP_DATASETS))}"
        )
    if data.name == "csv" and not data.csv:
        raise ValueError(f"{said('data.name')} needs {wanted('data.csv', 'PATH')}")
    dataset = data.name or "csv"
    if data.classes == "all" and (dataset == "csv" or not SWEEP_DATASETS[dataset].classes):
        with_classes = [n for n, source in SWEEP_DATASETS.items() if source.classes]
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


def load_sweep_data(checked: CheckedSweep) -> Dataset:
    """The dataset of a checked config; errors name the key (or flag) of each argument."""
    names = {arg: checked.name(key) for arg, key in _CSV_KEYS.items()}
    # imported here: iml.data's dataset registry loads tensorflow-datasets, which a sweep of a
    # table or a CSV file does without
    from iml.data import load_dataset

    options = dict(checked.source)
    name = options.pop("name")
    try:
        return load_dataset(name, **options)
    except ArgumentError as err:
        raise err.for_flags(names) from None
