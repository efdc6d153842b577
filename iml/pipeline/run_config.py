"""A run's config for ``iml reproduce`` (nested as :func:`default_config`): read into that
locked form, and checked before any work starts.

:func:`as_config` reads a config (nested dicts or a ``ConfigDict``) so that a value of the wrong
type is an error naming its key. :func:`check_config` checks every key: the dataset, model and
loss names, the counts, the paths, the loss's grid (betas in ``(0, 1)`` for a binary loss,
``config.loss.weights`` for the multiclass losses of :data:`iml.grids.WEIGHT_GRIDS`) and the
report's settings. :mod:`iml.pipeline.runner` imports these names, and they stay importable
from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ml_collections

from iml import _validation as V
from iml import config as config_lib
from iml.data import DATASETS
from iml.models import CONV_IMPLS, DenseNet, build_model, min_input_size
from iml.pipeline.defaults import (
    check_eval_settings,
    check_loss_section,
    check_read_keys,
    default_config,
)

__all__ = [
    "as_config",
    "check_config",
    "from_dotted",
]


def as_config(config: Mapping[str, Any]) -> ml_collections.ConfigDict:
    """``config`` (nested dicts or a ``ConfigDict``) as a locked copy of :func:`default_config`
    holding its values, so that a value of the wrong type is an error naming its key."""
    return from_dotted(config_lib.flatten(config))


def from_dotted(values: Mapping[str, Any]) -> ml_collections.ConfigDict:
    config = default_config()
    for key, value in values.items():
        config_lib.override(config, key, value)
    return config


# Keys holding a count of at least one, and of at least zero.
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
    "data.image_size",
    "data.max_examples",
    "data.n_val_folds",
    "data.fold_seed",
    "plan.members_per_batch",
    "plan.memory_budget_bytes",
)


def check_config(config: Mapping[str, Any]) -> None:
    """Check a run's config (nested, as :func:`default_config`) before any work starts.

    Raises:
      ValueError: naming the first bad key as ``config.SECTION.KEY``: an unknown or missing key,
        an unknown dataset, model or loss, a beta outside ``(0, 1)``, a non-positive count.
      FileNotFoundError: for a data, manual or weights path that does not exist.
    """
    config_lib.check_keys(config, default_config())
    c = as_config(config)
    check_read_keys(c, "images")
    if c.data.name not in DATASETS:
        raise ValueError(
            f"config.data.name: unknown dataset {c.data.name!r}; expected one of {list(DATASETS)}"
        )
    if c.data.classes == "all" and not DATASETS[c.data.name].classes:
        with_classes = [n for n, s in DATASETS.items() if s.classes and s.kind == "image"]
        raise ValueError(
            f"config.data.classes='all': dataset {c.data.name!r} has no classes beyond its "
            f"binary label; the image datasets with classes are {with_classes}"
        )
    if DATASETS[c.data.name].kind == "tabular":
        raise ValueError(
            f"config.data.name: dataset {c.data.name!r} is tabular; `iml reproduce` trains "
            "DenseNets on images (digits, pneumoniamnist, chestxray14); `iml sweep` takes tables"
        )
    try:
        model = build_model(c.model.name, 1, "images")  # JAX's backend starts later
    except ValueError as err:
        raise ValueError(f"config.model.name: {err}") from None
    check_loss_section(c, default_config())
    for keys, minimum in ((_COUNTS, 1), (_COUNTS_OR_ZERO, 0)):
        for key in keys:
            V.check_count(f"config.{key}", config_lib.lookup(c, key), minimum)
    if c.plan.members_per_batch and c.plan.memory_budget_bytes:
        raise ValueError(
            "config.plan.memory_budget_bytes applies where config.plan.members_per_batch is 0 "
            f"(the default), not {c.plan.members_per_batch}; set only one of them"
        )
    if c.data.n_folds - c.data.n_val_folds - c.data.n_test_folds < 1:
        raise ValueError(
            f"config.data.n_folds={c.data.n_folds} leaves no training fold after "
            f"n_val_folds={c.data.n_val_folds} and n_test_folds={c.data.n_test_folds}"
        )
    V.check_positive("config.train.learning_rate", c.train.learning_rate)
    V.check_non_negative("config.train.min_lr", c.train.min_lr)
    if tuple(c.plan.seeds):  # () = the seeds of a fit by Adam (ADAM_SEEDS)
        V.check_seeds("config.plan.seeds", tuple(c.plan.seeds))
    check_eval_settings(c.eval)
    for key in ("data_dir", "manual_dir"):
        if c.data[key] and not Path(c.data[key]).expanduser().is_dir():
            raise FileNotFoundError(f"config.data.{key}: directory not found: {c.data[key]}")
    if c.model.weights and not isinstance(model, DenseNet):
        raise ValueError(
            f"config.model.weights: torchvision's weights fit the DenseNets, not {c.model.name!r}"
        )
    if c.model.weights and not Path(c.model.weights).expanduser().is_file():
        raise FileNotFoundError(f"config.model.weights: file not found: {c.model.weights}")
    if c.model.conv_impl and c.model.conv_impl not in CONV_IMPLS:
        raise ValueError(
            f"config.model.conv_impl must be '' (the backend's default) or one of {CONV_IMPLS}, "
            f"got {c.model.conv_impl!r}"
        )
    if c.data.image_size and c.data.image_size < min_input_size(model):
        raise ValueError(
            f"config.data.image_size={c.data.image_size} is too small for {c.model.name} "
            f"(at least {min_input_size(model)} px)"
        )
