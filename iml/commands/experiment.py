"""``iml reproduce`` and ``iml sweep``: one command over two default configs. Check the config,
the data and ``--out``; then train the experiment (:func:`iml.pipeline.experiment.run`), report
it (:func:`iml.pipeline.report.report_run`) and summarize the report.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from iml import config as config_lib
from iml.commands.config import load_config_with_names
from iml.commands.figures import say_loss_calibration

__all__ = ["experiment_command"]

#: The keys of the config that only minibatch Adam reads, which an exact fit leaves unread.
_ADAM_KEYS = ("train.learning_rate", "train.batch_size", "train.max_epochs", "train.patience")


def _note_unread_adam_keys(config: Any, names: Mapping[str, str], solver: str) -> None:
    """Say on stderr which Adam keys, set away from their defaults, a fit made exactly leaves
    unread."""
    # imported here: as in experiment_command
    from iml.pipeline.defaults import sweep_config

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
            f"iml: note: {', '.join(unread)} not used: the logistic model under this loss is "
            "fitted exactly (--config.train.solver=adam trains it by Adam)",
            file=sys.stderr,
        )


def experiment_command(args: argparse.Namespace) -> Callable[[], int]:
    """Check the config, the data and ``--out``; return the work (train, report, summarize)."""
    # imported here: the pipeline loads JAX, the data and the models (seconds), which `iml
    # --help` does without
    from iml.pipeline import distributed
    from iml.pipeline.experiment import build, check_resumable
    from iml.pipeline.report import report_run
    from iml.pipeline.run_config import experiment_kind
    from iml.pipeline.store import RunStore
    from iml.pipeline.train_plan import run
    from iml.training.host import keep_step_memory

    config, names = load_config_with_names(args)
    out = Path(args.out)
    try:  # a run of an earlier schema is refused before the data is read
        if out.is_dir():
            RunStore(out).manifest()
    except ValueError as err:
        raise ValueError(f"--out: {err}") from None
    # before JAX's first computation: join the other processes where config.distributed says so
    here = distributed.initialize(config)
    # before JAX's first computation: every program run on the host (a training step, an exact
    # solver's Newton steps, a bootstrap) reuses the memory of the last instead of faulting in
    # fresh pages; a table's run (no images to decode on many threads) keeps one heap for all
    keep_step_memory(shared_heap=experiment_kind(config) == "table")
    experiment = build(config, names)
    check_resumable(experiment, out)
    record = {"kind": experiment.kind, "config": experiment.record}
    distributed.check_same_run(config, record, "config")
    distributed.check_shared_folder(config, out)
    _note_unread_adam_keys(config, names, experiment.train.solver)  # once every check passed

    def work() -> int:
        start = time.perf_counter()
        trained = run(experiment, RunStore(out), progress=not args.no_progress)
        done = [b.batch.index for b in trained]
        if not here.main:  # process 0 writes the results
            distributed.finish()
            print(f"process {here.index} of {here.count}: trained batches {done}")
            return 0
        if getattr(args, "train_only", False):
            elapsed = time.perf_counter() - start
            print(f"members stored in {out} ({elapsed:.0f} s); iml figures --run {out}")
            distributed.finish()
            return 0
        table = report_run(out, out, formats=tuple(config.eval.figures),
                           progress=not args.no_progress)  # fmt: skip
        elapsed = time.perf_counter() - start
        print(_summary(experiment, table, done))
        print(f"results in {out}: table.json, table.md, figures/ ({elapsed:.0f} s)")
        say_loss_calibration(table, "beta")  # a multiclass grid reads "loss"
        distributed.finish()
        return 0

    return work


def _summary(experiment: Any, table: Mapping[str, Any], trained: list[int]) -> str:
    """One line: the data, the range of the raw and corrected ECE's point estimates over the
    grid (their intervals and tests are in the table), the batches trained."""
    dataset = experiment.dataset
    first = next(iter(table.values()))["raw"]
    metric, shown = ("ece", "ECE") if "ece" in first else ("top_label_ece", "top-label ECE")
    worst = max(row["raw"][metric] for row in table.values())
    corrected = [row["loss_corrected"][metric] for row in table.values()]
    where = (
        f"{len(dataset.class_names)} classes" if metric != "ece"
        else f"prevalence {dataset.prevalence:.4f}"
    )  # fmt: skip
    return (
        f"{dataset.name}: N={dataset.num_examples}, {where}; raw {shown} up to {worst:.4f}; "
        f"loss-corrected {shown} {min(corrected):.4f}..{max(corrected):.4f} (point estimates; "
        f"intervals and tests in table.md); trained batches {trained}"
    )
