"""The ``iml`` command line: ``reproduce`` the paper's experiment, redraw ``figures``, ``sweep``,
``reveal`` what a run's models learned. This module parses it: the subcommands, their options and
the named options that set config keys (:data:`iml.commands.config.SHORTCUTS`: one name per
key in every command). ``iml --help`` shows this docstring's first line.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from iml.commands.config import shortcuts
from iml.commands.experiment import experiment_command
from iml.commands.figures import figures_command
from iml.commands.plugins import add_import_argument
from iml.commands.reveal import REVEAL_SETTINGS, reveal_command
from iml.config import flatten, keys_help, split_overrides
from iml.pipeline.defaults import READ_BY, default_config, key_help, sweep_config

if TYPE_CHECKING:
    import ml_collections

__all__ = ["add_config_arguments", "build_parser", "parse_args"]


def _epilog(config: ml_collections.ConfigDict, inputs: str) -> str:
    """``--help``'s list of the config keys that runs on ``inputs`` read, with their defaults
    and meanings, and the loss's open section of parameters."""
    readable = {
        section: {k: v for k, v in keys.items() if READ_BY.get(f"{section}.{k}", inputs) == inputs}
        for section, keys in config.to_dict().items()
    }
    params = "a parameter of the loss other than the weight its grid varies (gamma of 'focal', "
    params += "or any parameter of a registered loss); unset: the loss's own default"
    lines = textwrap.wrap(params, 92, initial_indent="      ", subsequent_indent="      ")
    return "\n".join([keys_help(readable, key_help), "  loss.params.NAME = VALUE", *lines])


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
    "target": {"metavar": "COLUMN"},
    "betas": {"nargs": "+", "metavar": "BETA"},
    "seeds": {"type": int, "nargs": "+", "metavar": "N"},
}
#: ``--help``'s group of each section of the config, in its order.
_SECTIONS = {
    "data": "data (config.data)",
    "model": "the model (config.model)",
    "loss": "the loss and its grid of class weights (config.loss)",
    "train": "training (config.train)",
    "plan": "the members and their batches (config.plan)",
    "eval": "the report (config.eval)",
    "distributed": "several processes (config.distributed)",
}


def add_config_arguments(
    parser: argparse.ArgumentParser, inputs: str, defaults: ml_collections.ConfigDict
) -> None:
    """Add the named options of the keys that runs on ``inputs`` read
    (:func:`iml.commands.config.shortcuts`), each named as in every command, grouped by the
    config's sections; an option's help is its key's meaning in the schema
    (:data:`iml.pipeline.defaults.SCHEMA`), its default in ``defaults`` and the key it sets."""
    flat = flatten(defaults)
    options = shortcuts(inputs)
    used = [s for s in _SECTIONS if any(k.startswith(f"{s}.") for k in options.values())]
    groups = {section: parser.add_argument_group(_SECTIONS[section]) for section in used}
    for option, key in options.items():
        kwargs = dict(_ARGUMENTS.get(option, {}))
        default = flat[key]
        if isinstance(default, bool):  # a switch: the option sets the other value
            kwargs.update(action="store_const", const=not default)
            text = f"sets config.{key} = {not default}; the key: {key_help(key)}"
        else:
            if type(default) in (int, float):
                kwargs.setdefault("type", type(default))
            shown = f"; default {default}" if default not in ("", ()) else ""
            text = f"{key_help(key)}{shown} (config.{key})"
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
        epilog=_epilog(default_config(), "images"),
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
    rep.set_defaults(func=experiment_command)

    fig = sub.add_parser(
        "figures",
        help="redraw the figures and table of a stored run",
        description="Report a stored run without training: its table, ensemble scores, "
        "figures and revealed experiments, each stage said on stderr as it starts. "
        "--config.eval.KEY=VALUE sets "
        "the report's settings (n_bins, n_bootstrap, "
        "report_seed, average, figures) in place of the run's.",
        epilog=keys_help(
            {"eval": default_config().eval.to_dict()},
            key_help,
            "config keys (set with --config.eval.KEY=VALUE; default: the run's own), with "
            "the defaults of a new run:",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fig.add_argument(
        "--run", required=True, help="a run directory written by `iml reproduce` or `iml sweep`"
    )
    fig.add_argument("--out", help="where to write (default: the run directory)")
    fig.add_argument("--no-progress", action="store_true", help="print only the summary")
    add_import_argument(fig)
    fig.set_defaults(func=figures_command)

    swp = sub.add_parser(
        "sweep",
        help="a fine grid of losses (class weights beta by default) of small models on a table",
        description="Train a fine grid of losses (class weights beta by default) of small "
        "models as one vectorized program; plot ECE against the loss for raw and "
        "loss-corrected scores.",
        epilog=_epilog(sweep_config(), "rows"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _config_argument(swp, " (experiments/configs/sweep*.py)")
    swp.add_argument("--out", required=True, metavar="DIR", help="output folder (resumable)")
    swp.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_config_arguments(swp, "rows", sweep_config())
    add_import_argument(swp)
    swp.set_defaults(func=experiment_command)

    rev = sub.add_parser(
        "reveal",
        help="revealed experiments of a stored run: what the models learned across class "
        "weights, and tests of capacity-constrained and costly learning",
        description="Read the scores of the models of an `iml reproduce` run or of an `iml "
        "sweep` over class weights, recover each model's experiment, test NIS "
        "(capacity-constrained learning) and NIAC (costly learning) with paired bootstrap "
        "inference, bound the costs of learning; write revealed.json and three figures. "
        "A multiclass run (a grid of class weightings) is read by its class scores: its "
        "signals are cells of loss-corrected posteriors (top class, n_bins confidence "
        "quantiles per class) and NIAS a multinomial chi-square per model. "
        "--config.eval.KEY=VALUE sets n_bins, n_bootstrap, report_seed and figures (the "
        "formats, png,pdf by default; none with --config.eval.figures=).",
        epilog=keys_help({"eval": REVEAL_SETTINGS}, key_help),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rev.add_argument("--run", required=True, metavar="DIR", nargs="+",
                     help="a run folder written by `iml reproduce` or `iml sweep`, or several "
                     "runs of one kind on the same observations (their losses and seeds "
                     "pooled)")  # fmt: skip
    rev.add_argument("--out", required=True, metavar="DIR", help="where to write")
    rev.add_argument(
        "--power-datasets",
        type=int,
        default=100,
        help="simulated data sets per scenario for each test's size at the run's N, K and "
        "prior, and the power of each test not rejected; 0 for none; default 100",
    )
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
