"""The ``iml`` command line: ``reproduce`` the paper's experiment, redraw ``figures``, ``sweep``.

Examples::

    iml reproduce --out runs/reproduce              # digits, small DenseNet, beta 0.5/0.9/0.99
    iml reproduce --config experiments/configs/pneumoniamnist.py --manual-dir DIR --out runs/pmn
    iml reproduce --config experiments/configs/chestxray14.py --config.train.epochs=1 \\
        --config.model.conv_impl=xla --manual-dir NIH_RELEASE --out runs/cxr-smoke
    iml figures --run runs/reproduce --out runs/reproduce-figures
    python -m iml.cli reproduce --epochs 1 --folds 3 --config.train.members_per_batch=6

``reproduce`` reads its config (nested: ``config.data``, ``config.model``, ``config.loss``,
``config.train``, ``config.eval``; :func:`iml.pipeline.runner.default_config`) from
``--config FILE``, then sets any key as ``--config.SECTION.KEY=VALUE``, then the named options
(``--epochs`` sets ``config.train.epochs``; :data:`SHORTCUTS`).

Bad input (an unknown dataset, a misspelled config key, beta outside (0, 1), missing directories
or CSV columns) is reported before any work starts, in one line, with exit status 2. A failure
during the work exits with status 1 and its traceback, and leaves every finished result in place.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ml_collections

__all__ = ["SHORTCUTS", "build_parser", "load_config", "main"]

#: The named options of ``iml reproduce`` and the config key each sets.
SHORTCUTS = {
    "dataset": "data.name",
    "data_dir": "data.data_dir",
    "manual_dir": "data.manual_dir",
    "model": "model.name",
    "weights": "model.weights",
    "image_size": "data.image_size",
    "betas": "loss.betas",
    "folds": "data.n_folds",
    "seeds": "train.seeds",
    "epochs": "train.epochs",
}


def load_config(args: argparse.Namespace) -> ml_collections.ConfigDict:
    """The run config, locked: the default (or ``--config FILE``), then the
    ``--config.KEY=VALUE`` overrides in order, then the named options (:data:`SHORTCUTS`).

    Raises:
      FileNotFoundError: for a ``--config`` file that does not exist.
      ValueError: naming the flag, for a key that the config does not have (with the nearest
        ones) or a value of another type than the key's.
    """
    from iml import config as config_lib
    from iml.pipeline.runner import default_config

    config = config_lib.load_config(
        args.config, getattr(args, "overrides", ()), default=default_config
    )
    for option, key in SHORTCUTS.items():
        value = getattr(args, option)
        if value is not None:
            flag = "--" + option.replace("_", "-")
            config_lib.override(config, key, value, flag=flag)
    return config


def _reproduce(args: argparse.Namespace) -> Callable[[], int]:
    from iml.pipeline.runner import check_config, check_resumable

    config = load_config(args)
    check_config(config)
    try:
        check_resumable(config, args.out)
    except ValueError as err:
        raise ValueError(f"--out: {err}") from None

    def work() -> int:
        import time

        from iml.pipeline.report import report_run
        from iml.pipeline.runner import run_experiment
        from iml.training.host import keep_step_memory

        # before JAX's first computation: every training step reuses the last step's memory
        keep_step_memory()
        start = time.perf_counter()
        run_experiment(config, args.out, progress=not args.no_progress)
        report_run(args.out, args.out)
        elapsed = time.perf_counter() - start
        print(f"results in {args.out}: table.json, table.md, figures/ ({elapsed:.0f} s)")
        return 0

    return work


def _figures(args: argparse.Namespace) -> Callable[[], int]:
    from iml.pipeline.report import check_stored_run, report_run

    check_stored_run(args.run)
    out = args.out or args.run

    def work() -> int:
        table = report_run(args.run, out)
        print(json.dumps({"out": str(out), "betas": list(table)}))
        return 0

    return work


def _sweep(args: argparse.Namespace) -> Callable[[], int]:
    from iml.pipeline.sweep import prepare_sweep_command

    return prepare_sweep_command(args)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``iml`` and its subcommands."""
    parser = argparse.ArgumentParser(prog="iml", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    rep = sub.add_parser(
        "reproduce", help="train the beta ensembles and write Figures 1-4 and the table"
    )
    rep.add_argument(
        "--config",
        help="a config file defining get_config() (experiments/configs/); then "
        "--config.SECTION.KEY=VALUE sets any key, e.g. --config.train.learning_rate=1e-4",
    )

    def shortcut(option: str, text: str, **kwargs: Any) -> None:
        flag = "--" + option.replace("_", "-")
        rep.add_argument(flag, help=f"{text} (config.{SHORTCUTS[option]})", **kwargs)

    shortcut("dataset", "digits (default), pneumoniamnist or chestxray14")
    shortcut("data_dir", "where prepared TFDS data is kept")
    shortcut("manual_dir", "folder with the raw files of the dataset")
    shortcut("model", "densenet_small (default), densenet121 or densenet_tiny")
    shortcut(
        "weights",
        "starting weights: a torchvision DenseNet .pth (e.g. densenet121-a639ec97.pth)",
    )
    shortcut("image_size", "side of the square images in pixels", type=int)
    shortcut("betas", "class weights in (0, 1)", type=float, nargs="+")
    shortcut("folds", "number of cross-validation folds", type=int)
    shortcut("seeds", "member seeds", type=int, nargs="+")
    shortcut("epochs", "most epochs per member", type=int)
    rep.add_argument("--out", default="runs/reproduce", help="run directory (resumed if present)")
    rep.add_argument("--no-progress", action="store_true", help="hide progress bars")
    rep.set_defaults(func=_reproduce)

    fig = sub.add_parser("figures", help="redraw the figures and table of a stored run")
    fig.add_argument("--run", required=True, help="a run directory written by `iml reproduce`")
    fig.add_argument("--out", help="where to write (default: the run directory)")
    fig.set_defaults(func=_figures)

    from iml.pipeline.sweep import add_sweep_arguments

    swp = sub.add_parser("sweep", help="parameter sweeps (iml.pipeline.sweep)")
    add_sweep_arguments(swp)
    swp.set_defaults(func=_sweep)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``iml``; returns its exit status.

    Each command first checks its input (arguments, config, files). Bad input found there is
    printed as one line, ``iml COMMAND: error: ...``, and gives exit status 2 before any work
    starts. A failure during the work itself (an error inside training, a full disk) is not bad
    input: its exception propagates with its traceback (exit status 1 from the ``iml`` script),
    and every result finished before it stays in place.
    """
    from iml.config import split_overrides

    argv, overrides = split_overrides(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.overrides = overrides
    if overrides and args.command != "reproduce":
        flag = "--config." + overrides[0][0]
        print(f"iml {args.command}: error: {flag}: only `iml reproduce` takes it", file=sys.stderr)
        return 2
    if args.command == "reproduce":
        # on the CPU, one device per core lets ensemble members train side by side
        from iml.training import use_cpu_cores_as_devices

        use_cpu_cores_as_devices()
    try:
        work = args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"iml {args.command}: error: {err}", file=sys.stderr)
        return 2
    return int(work())


if __name__ == "__main__":
    sys.exit(main())
