"""``iml reproduce``: check the config and ``--out``, then train the beta ensembles and report
the run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from iml.commands.config import load_config
from iml.commands.figures import say_loss_calibration

__all__ = ["reproduce_command"]


def reproduce_command(args: argparse.Namespace) -> Callable[[], int]:
    # imported here: the image pipeline loads tensorflow-datasets, Flax's DenseNets and the
    # report (seconds), which `iml sweep`, `iml reveal` and `--help` do without
    from iml import config as config_lib
    from iml.grids import check_rules_invertible
    from iml.losses import lookup
    from iml.pipeline import distributed
    from iml.pipeline.report import report_run
    from iml.pipeline.run_config import check_config, run_betas
    from iml.pipeline.runner import check_resumable, is_multiclass, run_experiment, run_loss
    from iml.training.host import keep_step_memory

    config = load_config(args)
    # before JAX's first computation: join the other processes where config.distributed says so
    here = distributed.initialize(config)
    # before JAX's first computation (a loss's parameters are checked by building it): every
    # training step reuses the last step's memory
    keep_step_memory()
    check_config(config)
    record = lookup(config.loss.name)
    generic = record.optimal_score is None or record.inverse is None
    if generic and not is_multiclass(config):
        # Proposition 4's premise at each beta, before any training (a closed form is the
        # record's own statement)
        check_rules_invertible(run_loss(config)(list(run_betas(config))))
    try:
        check_resumable(config, args.out)
    except ValueError as err:
        raise ValueError(f"--out: {err}") from None
    run = {k: v for k, v in config_lib.to_dict(config).items() if k != "distributed"}
    distributed.check_same_run(config, {"command": "reproduce", "config": run}, "config")
    distributed.check_shared_folder(config, args.out)

    def work() -> int:
        start = time.perf_counter()
        run_experiment(config, args.out, progress=not args.no_progress)
        if not here.main:  # process 0 writes the results
            distributed.finish()
            print(f"process {here.index} of {here.count}: its share stored in {args.out}")
            return 0
        if args.train_only:
            elapsed = time.perf_counter() - start
            print(f"members stored in {args.out} ({elapsed:.0f} s); iml figures --run {args.out}")
        else:
            table = report_run(args.out, args.out)
            say_loss_calibration(table, "loss" if is_multiclass(config) else "beta")
            elapsed = time.perf_counter() - start
            revealed = "" if is_multiclass(config) else "revealed.json, "
            print(f"results in {args.out}: table.json, table.md, {revealed}figures/ "
                  f"({elapsed:.0f} s)")  # fmt: skip
        distributed.finish()
        return 0

    return work
