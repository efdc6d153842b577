"""The ``iml`` command line: ``reproduce`` the paper's experiment, redraw ``figures``, ``sweep``,
``reveal`` what a run's models learned. This module parses it: the subcommands, their options and
the named options that set config keys (:data:`iml.commands.config.SHORTCUTS`: one name per
key in every command). ``iml --help`` shows this docstring's first line.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from iml.commands.config import shortcuts
from iml.commands.figures import figures_command
from iml.commands.plugins import add_import_argument
from iml.commands.reproduce import reproduce_command
from iml.commands.reveal import REVEAL_SETTINGS, reveal_command
from iml.commands.sweep import sweep_command
from iml.config import flatten, key_meanings, keys_help, split_overrides
from iml.pipeline.defaults import default_config, experiment_config, sweep_config
from iml.pipeline.store import ENSEMBLE_AVERAGES

if TYPE_CHECKING:
    import ml_collections

__all__ = ["add_config_arguments", "build_parser", "parse_args"]


def _ridge(text: str) -> float | str:
    """``--l2``: ``auto`` or a number."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, got {text!r}") from None


def _config_argument(parser: argparse.ArgumentParser, where: str = "") -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=f"a config file defining get_config(){where}; then --config.SECTION.KEY=VALUE sets "
        "any key, e.g. --config.train.learning_rate=1e-4",
    )


#: The argparse settings of the named options that differ from what their key's default implies
#: (a number's type, several values for a tuple, a switch for a bool): what ``--help`` shows of
#: the values each takes. What an option means is its key's meaning in the config schema.
_ARGUMENTS: dict[str, dict[str, Any]] = {
    "csv": {"metavar": "PATH"},
    "classes": {"choices": ("binary", "all")},
    "target": {"metavar": "COLUMN"},
    "positive": {"metavar": "VALUE"},
    "delimiter": {"metavar": "CHAR"},
    "data_dir": {"metavar": "DIR"},
    "manual_dir": {"metavar": "DIR"},
    "loss_weights": {"metavar": "W1;W2;..."},
    "betas": {"nargs": "+", "metavar": "BETA"},
    "weights": {"metavar": "PTH"},
    "seeds": {"type": int, "nargs": "+", "metavar": "N"},
    "l2": {"type": _ridge, "metavar": "L2|auto"},
    "l2_grid": {"nargs": "+", "metavar": "L2"},
    "average": {"choices": ENSEMBLE_AVERAGES},
}
#: ``--help``'s group of each section of the config, in its order.
_SECTIONS = {
    "data": "data (config.data)",
    "model": "the model (config.model)",
    "loss": "the loss and its grid of class weights (config.loss)",
    "train": "training (config.train)",
    "eval": "the report (config.eval)",
    "distributed": "several processes (config.distributed)",
}


def add_config_arguments(
    parser: argparse.ArgumentParser,
    inputs: str,
    defaults: ml_collections.ConfigDict | None,
    sections: tuple[str, ...] = tuple(_SECTIONS),
) -> None:
    """Add the named options of the keys in ``sections`` that runs on ``inputs`` read
    (:func:`iml.commands.config.shortcuts`), each named as in every command, grouped by the
    config's sections; an option's help is its key's meaning in the schema
    (:func:`iml.config.key_meanings`), its default in ``defaults`` (``None``: the stored run's)
    and the key it sets."""
    flat = flatten(default_config() if defaults is None else defaults)
    meanings = key_meanings(experiment_config)
    groups = {section: parser.add_argument_group(_SECTIONS[section]) for section in sections}
    for option, key in shortcuts(inputs).items():
        if key.split(".")[0] not in sections:
            continue
        kwargs = dict(_ARGUMENTS.get(option, {}))
        default = flat[key]
        if isinstance(default, bool):  # a switch: the option sets the other value
            kwargs.update(action="store_const", const=not default)
            text = f"sets config.{key} = {not default}; the key: {meanings[key]}"
        else:
            if type(default) in (int, float):
                kwargs.setdefault("type", type(default))
            shown = f"; default {default}" if default not in ("", ()) else ""
            if defaults is None:
                shown = "; default: the run's"
            text = f"{meanings[key]}{shown} (config.{key})"
        flag = "--" + option.replace("_", "-")
        groups[key.split(".")[0]].add_argument(flag, help=text.replace("%", "%%"), **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``iml`` and its subcommands."""

    parser = argparse.ArgumentParser(prog="iml", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    rep = sub.add_parser(
        "reproduce",
        help="train the beta ensembles and write Figures 1-4, the table and the revealed "
        "experiments",
        epilog=keys_help(default_config(), (experiment_config, default_config)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _config_argument(rep, " (experiments/configs/)")
    add_config_arguments(rep, "images", default_config())
    rep.add_argument("--out", default="runs/reproduce", help="run directory (resumed if present)")
    rep.add_argument("--no-progress", action="store_true", help="hide progress bars")
    rep.add_argument(
        "--train-only",
        action="store_true",
        help="train and store the members, without the report (e.g. on a GPU machine); "
        "`iml figures --run DIR` makes it later",
    )
    add_import_argument(rep)
    rep.set_defaults(func=reproduce_command)

    fig = sub.add_parser(
        "figures",
        help="redraw the figures and table of a stored run",
        description="Report a stored run without training: its table, ensemble scores and "
        "figures (a sweep's: its table, scores and ECE figures). --config.eval.KEY=VALUE sets "
        "the report's settings (n_bins, n_bootstrap, "
        "report_seed, average, figures) in place of the run's.",
        epilog=keys_help(
            {"eval": default_config().eval.to_dict()},
            experiment_config,
            "config keys (set with --config.eval.KEY=VALUE; default: the run's own), with "
            "the defaults of a new run:",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fig.add_argument(
        "--run", required=True, help="a run directory written by `iml reproduce` or `iml sweep`"
    )
    fig.add_argument("--out", help="where to write (default: the run directory)")
    add_config_arguments(fig, "images", None, sections=("eval",))
    add_import_argument(fig)
    fig.set_defaults(func=figures_command)

    swp = sub.add_parser(
        "sweep",
        help="a fine grid of losses (class weights beta by default) of small models on a table",
        description="Train a fine grid of losses (class weights beta by default) of small "
        "models as one vectorized program; plot ECE against the loss for raw and "
        "loss-corrected scores.",
        epilog=keys_help(sweep_config(), (experiment_config, sweep_config)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _config_argument(swp, " (experiments/configs/sweep*.py)")
    swp.add_argument("--out", required=True, metavar="DIR", help="output folder (resumable)")
    swp.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_config_arguments(swp, "rows", sweep_config())
    # --weights was --loss-weights' earlier name here; in a run on images it names a model's
    # starting weights. Given to a sweep, it is answered with the new name rather than read.
    add_import_argument(swp)
    swp.set_defaults(func=sweep_command)

    rev = sub.add_parser(
        "reveal",
        help="revealed experiments of a stored run: what the models learned across class "
        "weights, and tests of capacity-constrained and costly learning",
        description="Read the scores of the models of an `iml reproduce` run or of an `iml "
        "sweep` over class weights, recover each model's experiment, test NIS "
        "(capacity-constrained learning) and NIAC (costly learning) with paired bootstrap "
        "inference, bound the costs of learning; write revealed.json and three figures. "
        "--config.eval.KEY=VALUE sets n_bins, n_bootstrap, report_seed and figures (the "
        "formats, png,pdf by default; none with --config.eval.figures=).",
        epilog=keys_help({"eval": REVEAL_SETTINGS}, experiment_config),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rev.add_argument("--run", required=True, metavar="DIR", nargs="+",
                     help="a run folder written by `iml reproduce` or `iml sweep`, or several "
                     "reproduce runs on the same observations (their class weights and seeds "
                     "pooled)")  # fmt: skip
    rev.add_argument("--out", required=True, metavar="DIR", help="where to write")
    rev.add_argument(
        "--n-bins",
        type=int,
        help="signals per model: deciles merged until each bin holds 10 expected positives and "
        "negatives (the verdicts are also reached at 5, 10 and 20 quantile bins); default 10 "
        "(config.eval.n_bins)",
    )
    rev.add_argument(
        "--power-datasets",
        type=int,
        default=100,
        help="simulated data sets per scenario for each test's size and power at the run's N, "
        "K and prior; 0 for none; default 100",
    )
    rev.add_argument(
        "--n-bootstrap",
        type=int,
        help="paired bootstrap replicates; default 1000 (config.eval.n_bootstrap)",
    )
    rev.add_argument("--report-seed", "--seed", type=int, dest="report_seed",
                     help="seed of the bootstrap and the simulations; default 0 "
                     "(config.eval.report_seed)")  # fmt: skip
    rev.add_argument("--no-progress", action="store_true", help="print only the summary")
    add_import_argument(rev)
    rev.set_defaults(func=reveal_command)
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` (without the program name) parsed; ``overrides`` holds its ``--config.KEY=VALUE``
    items as ``(KEY, VALUE)`` pairs, in order (:func:`iml.config.split_overrides`)."""

    argv, overrides = split_overrides(argv)
    args = build_parser().parse_args(argv)
    args.overrides = overrides
    return args
