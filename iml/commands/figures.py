"""``iml figures``: report a stored run without training, with the report's own settings
(``--config.eval.KEY=VALUE``, ``--config.eval.average``) in place of the run's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from iml.commands.config import report_overrides
from iml.pipeline.defaults import check_eval_settings, default_config

__all__ = ["eval_overrides", "figures_command"]


def figures_command(args: argparse.Namespace) -> Callable[[], int]:
    # imported here: the report loads JAX, the plots and the recalibration baselines (seconds),
    # which `iml --help` does without
    from iml.pipeline.report import report_run, report_settings
    from iml.training.host import keep_step_memory

    # before JAX's first computation: each run of the report's programs (its bootstraps and
    # simulations) reuses the memory of the last instead of faulting in fresh pages
    keep_step_memory(shared_heap=True)
    overrides = eval_overrides(args)
    out = args.out or args.run
    report_settings(args.run, overrides)

    def work() -> int:
        table = report_run(args.run, out, eval_overrides=overrides,
                           progress=not args.no_progress)  # fmt: skip
        print(json.dumps({"out": str(out), "losses": list(table)}))
        say_loss_calibration(table, "beta")  # a multiclass grid reads "loss"
        return 0

    return work


def say_loss_calibration(table: dict, key_name: str) -> None:
    """The run's last word, on stderr (stdout carries what a script reads): where loss
    calibration is rejected, as a warning ranked by the size of the miss, or that it is rejected
    nowhere, with the least power; and, as a warning too, the losses whose corrected scores hold
    NaN (a rule with no inverse there), with how many
    (:func:`iml.calibration.loss_calibration_summary`)."""
    # imported here: the calibration package loads JAX, which `iml figures --help` does without
    from iml.calibration.tables import loss_calibration_summary, table_tests

    if any(which for _, which, _ in table_tests(table)):  # a multiclass grid: losses, not betas
        key_name = "loss"
    summary = loss_calibration_summary(table, key_name)
    if any(record.get("rejected") or "nan_scores" in record for _, _, record in table_tests(table)):
        summary = "warning: " + summary
    if summary:
        print(summary, file=sys.stderr)


def eval_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``config.eval`` keys that ``iml figures`` reports with: its ``--config.eval.KEY=VALUE``
    items; any other ``--config.KEY`` is refused (it trains nothing). Each is checked here, named
    as it was given. See
    :func:`iml.commands.config.report_overrides`."""
    defaults = default_config().eval
    overrides, names = report_overrides(args, defaults)
    settings = {**defaults.to_dict(), **overrides}
    check_eval_settings(settings, lambda key: names.get(key, f"config.eval.{key}"), 0)
    return overrides
