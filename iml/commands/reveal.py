"""``iml reveal``: check the settings and the run, then reveal what its models learned."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["reveal_command"]


def reveal_command(args: argparse.Namespace) -> Callable[[], int]:
    """Check the settings, read the run and check it; return the work (reveal, write, print)."""
    # imported here: the revealed experiments' pipeline loads their simulator and figures
    from iml.pipeline.reveal import (
        FIGURES,
        check_reveal_input,
        load_reveal_input,
        reveal_run,
        revealed_summary,
    )

    for flag, value, least in (("--n-bins", args.n_bins, 2), ("--n-bootstrap", args.n_bootstrap, 2),
                               ("--seed", args.seed, 0),
                               ("--power-datasets", args.power_datasets, 0)):  # fmt: skip
        if value < least:
            raise ValueError(f"{flag} must be at least {least}, got {value}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} is a file, not a folder")
    try:
        inputs = load_reveal_input(args.run)
        check_reveal_input(inputs, args.n_bins)
    except (ValueError, FileNotFoundError) as err:
        raise type(err)(f"--run: {err}") from None

    def work() -> int:

        if not args.no_progress:
            K, n = inputs.scores.shape
            print(f"revealing {K} models on {n} observations ({args.n_bootstrap} paired "
                  "bootstrap replicates) ...", file=sys.stderr)  # fmt: skip
        record = reveal_run(
            inputs,
            out,
            n_bins=args.n_bins,
            n_bootstrap=args.n_bootstrap,
            seed=args.seed,
            power_datasets=args.power_datasets,
            progress=not args.no_progress,
        )
        print(revealed_summary(record))
        figures = ",".join(FIGURES)
        print(f"wrote {out / 'revealed.json'}, {out / 'figures'}/{{{figures}}}.{{png,pdf}}")
        return 0

    return work
