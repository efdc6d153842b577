"""``iml sweep``: check the config, the data and ``--out``, then train the grid of losses, write
its table and figures and summarize them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from iml import config as config_lib
from iml.commands.config import load_config_with_names
from iml.commands.figures import say_loss_calibration
from iml.pipeline.defaults import sweep_config

if TYPE_CHECKING:
    import ml_collections

__all__ = ["sweep_command"]

#: The keys of ``iml sweep``'s config that only minibatch Adam reads.
_ADAM_KEYS = ("train.learning_rate", "train.batch_size", "train.max_epochs", "train.patience")


def _note_unused_adam_options(
    config: ml_collections.ConfigDict, names: Mapping[str, str], solver: str
) -> None:
    """Say on stderr which Adam options a sweep fitted exactly leaves unread."""

    if solver != "exact":
        return
    default = sweep_config()
    unread = [
        names.get(key, f"config.{key}")
        for key in _ADAM_KEYS
        if config_lib.lookup(config, key) != config_lib.lookup(default, key)
    ]
    if unread:
        print(
            f"iml sweep: note: {', '.join(unread)} not used: the logistic model under this loss "
            "is fitted exactly (--config.train.solver=adam trains it by Adam)",
            file=sys.stderr,
        )


def sweep_command(args: argparse.Namespace) -> Callable[[], int]:
    """Check the config, the data and ``--out``; return the work (train, write, summarize)."""
    # imported here: the sweep's pipeline loads the trainer, the data and the report (seconds),
    # which `iml --help` and the other commands' checks do without
    from iml.pipeline import distributed
    from iml.pipeline.report import sweep_title, write_sweep_outputs
    from iml.pipeline.store import RunStore
    from iml.pipeline.sweep import execute_sweep, prepare_sweep

    config, names = load_config_with_names(args)
    out = Path(args.out)
    try:  # a run of an earlier schema is refused before the data is read
        if out.is_dir():
            RunStore(out).manifest()
    except ValueError as err:
        raise ValueError(f"--out: {err}") from None
    # before JAX's first computation: join the other processes where config.distributed says so
    here = distributed.initialize(config)
    plan, dataset = prepare_sweep(config, names)
    store = RunStore(out)
    try:
        store.check_resumable(plan.run_config, "table")
    except ValueError as err:
        raise ValueError(f"--out: {err}") from None
    distributed.check_same_run(config, {"command": "sweep", "run": plan.run_config}, "sweep")
    distributed.check_shared_folder(config, out)
    _note_unused_adam_options(config, names, plan.config.solver)  # once every check has passed

    def work() -> int:

        result = execute_sweep(plan, store, progress=not args.no_progress)
        if not here.main:  # process 0 writes the results
            distributed.finish()
            print(f"process {here.index} of {here.count}: trained batches {result.batches_trained}")
            return 0
        multiclass = config.data.classes == "all"
        title = sweep_title(dataset.name, config.loss.name, len(result.keys), len(result.seeds),
                            config.model.name)  # fmt: skip
        class_names = dataset.class_names if multiclass else None
        prevalence = None if multiclass else dataset.prevalence
        paths = write_sweep_outputs(out, result, prevalence, title, class_names,
                                    formats=config.eval.figures)  # fmt: skip
        metric, shown = ("top_label_ece", "top-label ECE") if multiclass else ("ece", "ECE")
        worst = max(row["raw"][metric] for row in result.table.values())
        corrected = [row["loss_corrected"][metric] for row in result.table.values()]
        where = (
            f"{len(class_names)} classes" if multiclass else f"prevalence {dataset.prevalence:.4f}"
        )
        print(
            f"{dataset.name}: N={dataset.num_examples}, {where}; raw {shown} up to {worst:.4f}; "
            f"loss-corrected {shown} {min(corrected):.4f}..{max(corrected):.4f}; "
            f"trained batches {result.batches_trained}"
        )
        written = [out / "table.json", out / "table.md", out / "ensemble_scores.npz", *paths]
        print("wrote " + ", ".join(map(str, written)))
        key_name = "beta" if result.betas is not None else "loss"
        say_loss_calibration(result.table, key_name)
        distributed.finish()
        return 0

    return work
