"""What an ``iml sweep`` run records as its manifest's ``config``, and the one reading of it.

A sweep records its settings in the sections of every run's config
(:mod:`iml.pipeline.defaults`)::

    {"data": {**source, "n_folds": 10, "fold_seed": 0, "sha256": "<digest>"},
     "model": {"name": "logistic", "hidden": 32},
     "loss": {"name": "log", "betas": [...]},  # or a registered loss's config, or a
                                               # callable loss's description
     "train": {"seeds": [...], "betas_per_chunk": k, **the trainer's settings},
     "eval": {"n_bins": 10, "average": "score", "n_bootstrap": 200, "report_seed": 0},
     "store": "batches"}

``source`` is the data source the command read (``{"name": "digits"}``, a CSV's path and
columns), ``sha256`` the digest of the features, labels and groups, and ``train`` holds the
fields of the :class:`~iml.training.TrainConfig` the members trained with. Other facts a caller
records stay at the top level.

Sweeps stored earlier recorded one flat dict: ``betas`` (the beta-weighted log loss) or
``loss``, ``seeds``, ``train`` (``model``, ``hidden`` and the trainer's settings), ``n_folds``,
``fold_seed``, ``betas_per_chunk``, ``n_bins``, ``average``, ``n_bootstrap`` and
``report_seed`` where they differed from :data:`FLAT_DEFAULTS`, ``data_sha256``, ``store``
(absent for sweeps stored in the layout before ``batches``) and ``data``.
:func:`sweep_record` reads either form into the sections; every reader of a sweep's manifest
reads it through that function.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["FLAT_DEFAULTS", "SECTIONS", "is_sweep", "sweep_record"]

#: The sections of a sweep's record; a caller's other facts may not take their names.
SECTIONS = ("data", "model", "loss", "train", "eval", "store")
#: The report settings a flat record left out at these values (``n_bins`` it always recorded;
#: 10 is what a record without it was scored with).
FLAT_DEFAULTS = {"n_bins": 10, "average": "score", "n_bootstrap": 200, "report_seed": 0}


def is_sweep(config: Mapping[str, Any]) -> bool:
    """Whether a manifest's ``config`` records an ``iml sweep`` run: a sweep records its data's
    digest (``data.sha256``; ``data_sha256`` in the flat form), a run on images none."""
    data = config.get("data")
    return "data_sha256" in config or (isinstance(data, Mapping) and "sha256" in data)


def sweep_record(config: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep's recorded ``config`` in sections, whether stored in sections or flat.

    Returns:
      A new dict of JSON types: the sections ``data``, ``model``, ``loss``, ``train`` and
      ``eval`` (with all four report settings), ``store`` where recorded, and any other facts
      recorded at the top level.

    Raises:
      ValueError: for a config that records no sweep.
    """
    if not is_sweep(config):
        raise ValueError(f"the config records no `iml sweep` run (keys {sorted(config)})")
    record = json.loads(json.dumps(dict(config)))
    if "data_sha256" not in record:
        return record
    return _from_flat(record)


def _from_flat(flat: dict[str, Any]) -> dict[str, Any]:
    source = flat.pop("data", {})
    data = dict(source) if isinstance(source, Mapping) else {"source": source}
    data |= {key: flat.pop(key) for key in ("n_folds", "fold_seed") if key in flat}
    data["sha256"] = flat.pop("data_sha256")
    settings = flat.pop("train", {})
    model = {new: settings.pop(old) for old, new in (("model", "name"), ("hidden", "hidden"))
             if old in settings}  # fmt: skip
    record: dict[str, Any] = {"data": data, "model": model}
    if "betas" in flat:  # the beta-weighted log loss
        record["loss"] = {"name": "log", "betas": flat.pop("betas")}
    elif "loss" in flat:
        record["loss"] = flat.pop("loss")
    train = {key: flat.pop(key) for key in ("seeds", "betas_per_chunk") if key in flat}
    record["train"] = {**train, **settings}
    record["eval"] = {key: flat.pop(key, default) for key, default in FLAT_DEFAULTS.items()}
    if "store" in flat:
        record["store"] = flat.pop("store")
    return {**record, **flat}
