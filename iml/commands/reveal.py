"""``iml reveal``: check the settings and the run, then reveal what its models learned."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iml import _validation as V
from iml.commands.config import report_overrides

__all__ = ["REVEAL_SETTINGS", "reveal_command", "reveal_settings"]

#: The report's settings (``config.eval``) that ``iml reveal`` reads, at its defaults: deciles of
#: signals, 1,000 paired bootstrap replicates, seed 0, figures as PNG and PDF. NIS's and NIAC's
#: p-values are bootstrap fractions ``(1 + #{T* >= T}) / (1 + n)``, so none falls below
#: ``1 / (n + 1)``: 0.001 at 1,000, where the tables' 200 (``config.eval.n_bootstrap``, one
#: interval per ECE of every loss and method) would stop at 0.005.
REVEAL_SETTINGS: dict[str, Any] = {
    "n_bins": 10,
    "n_bootstrap": 1000,
    "report_seed": 0,
    "figures": ("png", "pdf"),
}


def reveal_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of ``iml reveal`` (:data:`REVEAL_SETTINGS`): its ``--config.eval.KEY=VALUE``
    items, then its named options, each checked; any other ``--config.KEY`` is refused.

    Raises:
      ValueError: naming the flag or key: another key, fewer than 2 bins or replicates, a
        negative seed, an unknown figure format.
    """
    overrides, names = report_overrides(args, REVEAL_SETTINGS)
    settings = {**REVEAL_SETTINGS, **overrides}
    names = {key: names.get(key, f"config.eval.{key}") for key in REVEAL_SETTINGS}
    V.check_count(names["n_bins"], settings["n_bins"], 2)
    V.check_count(names["n_bootstrap"], settings["n_bootstrap"], 2)
    V.check_count(names["report_seed"], settings["report_seed"], 0)
    settings["figures"] = V.check_figure_formats(names["figures"], settings["figures"])
    return settings


def reveal_command(args: argparse.Namespace) -> Callable[[], int]:
    """Check the settings, read the run and check it; return the work (reveal, write, print)."""
    # imported here: the revealed experiments' pipeline loads their simulator and figures
    from iml.pipeline.reveal import figure_names, reveal_run, revealed_summary
    from iml.pipeline.reveal_input import check_reveal_input, load_reveal_input
    from iml.training.host import keep_step_memory

    # before JAX's first computation: each run of the report's programs (its bootstraps and
    # simulations) reuses the memory of the last instead of faulting in fresh pages
    keep_step_memory(shared_heap=True)
    settings = reveal_settings(args)
    if args.power_datasets < 0:
        raise ValueError(f"--power-datasets must be an integer >= 0, got {args.power_datasets}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} is a file, not a folder")
    try:
        inputs = load_reveal_input(args.run)
        check_reveal_input(inputs, settings["n_bins"])
    except (ValueError, FileNotFoundError) as err:
        raise type(err)(f"--run: {err}") from None

    def work() -> int:

        if not args.no_progress:
            K, n = inputs.scores.shape[:2]
            print(f"revealing {K} models on {n} observations ({settings['n_bootstrap']} paired "
                  "bootstrap replicates) ...", file=sys.stderr)  # fmt: skip
        record = reveal_run(
            inputs,
            out,
            n_bins=settings["n_bins"],
            n_bootstrap=settings["n_bootstrap"],
            seed=settings["report_seed"],
            formats=settings["figures"],
            power_datasets=args.power_datasets,
            progress=not args.no_progress,
        )
        print(revealed_summary(record))
        figures, formats = ",".join(figure_names(record)), ",".join(settings["figures"])
        drawn = f", {out / 'figures'}/{{{figures}}}.{{{formats}}}" if formats else ""
        print(f"wrote {out / 'revealed.json'}{drawn}")
        return 0

    return work
