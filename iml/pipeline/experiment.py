"""One experiment: a config built into its parts (:func:`build`), trained and stored
(:func:`iml.pipeline.train_plan.run`), then reported (:func:`iml.pipeline.report.report_run`).

The kind of run follows from the model and the data
(:func:`iml.pipeline.run_config.experiment_kind`): a model that
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

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ml_collections

from iml import config as config_lib
from iml.pipeline.run_config import check_config
from iml.pipeline.runner import build_images
from iml.pipeline.store import RunStore
from iml.pipeline.sweep import prepare_sweep, sweep_experiment
from iml.pipeline.train_plan import Experiment

__all__ = ["build", "check_resumable"]


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
    checked = check_config(config, names)
    if checked.kind == "images":
        return build_images(checked)
    plan, dataset = prepare_sweep(checked)
    return sweep_experiment(plan)._replace(dataset=dataset)


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
        old = (manifest or {}).get("config", {})
        new = json.loads(json.dumps(experiment.record))  # as the manifest records it
        if manifest and "eval" in old and "eval" in new and old["eval"] != new["eval"]:
            if config_lib.first_difference({**old, "eval": new["eval"]}, new) is None:
                flags = " ".join(f"--config.eval.{k}={v}" for k, v in new["eval"].items()
                                 if old["eval"].get(k) != v)  # fmt: skip
                hint = (f", or report the stored members so: iml figures --run {out} --out DIR "
                        f"{flags}")  # fmt: skip
        raise ValueError(f"--out: {err}{hint}") from None
