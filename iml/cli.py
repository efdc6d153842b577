"""The ``iml`` command line: ``reproduce`` the paper's experiment, redraw ``figures``, ``sweep``.

Examples::

    iml reproduce --out runs/reproduce              # digits, small DenseNet, beta 0.5/0.9/0.99
    iml reproduce --config experiments/configs/pneumoniamnist.py --manual-dir DIR --out runs/pmn
    iml figures --run runs/reproduce --out runs/reproduce-figures
    python -m iml.cli reproduce --epochs 1 --folds 3 --set members_per_batch=6

Bad input (unknown dataset or config key, beta outside (0, 1), missing directories or CSV
columns) is reported before any work starts, in one line, with exit status 2. A failure during
the work exits with status 1 and its traceback, and leaves every finished result in place.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["build_parser", "load_config", "main"]


def _import_config(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"--config: file not found: {path}")
    spec = importlib.util.spec_from_file_location(f"_iml_config_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
        raise ValueError(f"--config: {path} defines no get_config()")
    return module.get_config()


def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def load_config(args: argparse.Namespace) -> dict[str, Any]:
    """The run config: the default (or ``--config``), then ``--set``, then the named options.

    Raises:
      ValueError: for a ``--set`` key that the config does not have, or a malformed ``--set``.
    """
    from iml.pipeline.runner import default_config

    config = dict(_import_config(args.config) if args.config else default_config())
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        if key not in config:
            raise ValueError(f"--set: config key {key!r} does not exist; known: {sorted(config)}")
        config[key] = _parse_value(value)
    options = {
        "dataset": args.dataset,
        "data_dir": args.data_dir,
        "manual_dir": args.manual_dir,
        "model": args.model,
        "weights": args.weights,
        "image_size": args.image_size,
        "betas": tuple(args.betas) if args.betas else None,
        "n_folds": args.folds,
        "seeds": tuple(args.seeds) if args.seeds else None,
        "epochs": args.epochs,
    }
    for key, value in options.items():
        if value is not None:
            config[key] = value
    for key in ("betas", "seeds", "rotations"):
        if isinstance(config.get(key), list):
            config[key] = tuple(config[key])
    return config


def _reproduce(args: argparse.Namespace) -> Callable[[], int]:
    from iml.pipeline.runner import check_config

    config = load_config(args)
    check_config(config)

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
    rep.add_argument("--config", help="a config file defining get_config() (experiments/configs/)")
    rep.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    rep.add_argument("--dataset", help="digits (default), pneumoniamnist or chestxray14")
    rep.add_argument("--data-dir", help="where prepared TFDS data is kept")
    rep.add_argument("--manual-dir", help="folder with the raw files of the dataset")
    rep.add_argument("--model", help="densenet_small (default), densenet121 or densenet_tiny")
    rep.add_argument(
        "--weights",
        help="starting weights: a torchvision DenseNet .pth (e.g. densenet121-a639ec97.pth)",
    )
    rep.add_argument("--image-size", type=int, help="side of the square images in pixels")
    rep.add_argument("--betas", type=float, nargs="+", help="class weights in (0, 1)")
    rep.add_argument("--folds", type=int, help="number of cross-validation folds")
    rep.add_argument("--seeds", type=int, nargs="+", help="member seeds")
    rep.add_argument("--epochs", type=int, help="most epochs per member")
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
    parser = build_parser()
    args = parser.parse_args(argv)
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
