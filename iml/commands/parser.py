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
from iml.commands.reproduce import reproduce_command
from iml.commands.reveal import reveal_command
from iml.commands.sweep import sweep_command
from iml.config import flatten, keys_help, split_overrides
from iml.pipeline.defaults import default_config, experiment_config
from iml.pipeline.store import ENSEMBLE_AVERAGES
from iml.pipeline.sweep import sweep_config
from iml.training import L2_SCALES, SOLVERS

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


#: Each named option's help, its argparse settings and its group in ``--help``; the config key
#: it sets is :data:`iml.commands.config.SHORTCUTS`'s.
_OPTIONS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "csv": ("data", "a delimited text file with a header row (comma, semicolon, tab or | "
            "separated; quotes, a UTF-8 byte-order mark and Windows line ends are fine)",
            {"metavar": "PATH"}),
    "dataset": ("data", "a dataset of iml.data.DATASETS: digits (8 x 8 pixels; label 1 for the "
                "digit 8, or all 10 classes with --classes all), pneumoniamnist and chestxray14 "
                "(--manual-dir), or the UCI tables adult and letter (--data-dir; rows only)",
                {}),
    "classes": ("data", "binary: the positive class against the rest; all: every class of a "
                "dataset with classes (digits, letter), for the multiclass losses",
                {"choices": ("binary", "all")}),
    "target": ("data", "target column of --csv", {"metavar": "COLUMN"}),
    "positive": ("data", "positive target value of --csv (default: the target is 0/1 or "
                 "true/false), the positive letter(s) of --dataset letter (default O, a ~4%% "
                 "class) or digit of digits (default 8)", {"metavar": "VALUE"}),
    "delimiter": ("data", "field separator of --csv: one character, or tab (default: detected "
                  "among comma, semicolon, tab and |)", {"metavar": "CHAR"}),
    "data_dir": ("data", "where prepared image data is kept; for adult and letter, the folder of "
                 "the UCI files as downloaded from the UCI Machine Learning Repository: "
                 "letter-recognition.data, or adult.data, adult.test and adult.names",
                 {"metavar": "DIR"}),
    "manual_dir": ("data", "folder with the raw files of an image dataset", {"metavar": "DIR"}),
    "image_size": ("data", "side of the square images in pixels; 0: the dataset's own",
                   {"type": int}),
    "n_folds": ("data", "cross-validation folds", {"type": int}),
    "fold_seed": ("data", "seed of the fold assignment", {"type": int}),
    "loss": ("loss", "log (the beta-weighted cross-entropy), squared (beta-weighted), focal "
             "(--gamma, with the betas as its weight alpha), or the multiclass matrix (the "
             "B-weighted log loss, one sigmoid per class) and class_weighted_softmax "
             "(--loss-weights)", {}),
    "gamma": ("loss", "focal loss's gamma", {"type": float}),
    "loss_weights": ("loss", "the grid of a multiclass loss, ';'-separated, one ensemble each: "
                     "'ones' (unweighted) or the entries that differ from 1, e.g. "
                     "'ones;B[8,8]=10;B[3,8]=10' (matrix) or 'ones;w[8]=10' "
                     "(class_weighted_softmax), classes counted from 0",
                     {"metavar": "W1;W2;..."}),
    "betas": ("loss", "explicit class weights in (0, 1), space- or comma-separated (alpha for "
              "the focal loss)", {"nargs": "+", "metavar": "BETA"}),
    "n_betas": ("loss", "size of the grid of betas, evenly spaced in logit (without --betas)",
                {"type": int}),
    "beta_min": ("loss", "the grid's smallest beta", {"type": float}),
    "beta_max": ("loss", "the grid's largest beta", {"type": float}),
    "model": ("training", "a model of iml.models.MODELS that takes the run's inputs: a DenseNet "
              "(densenet_small, densenet121, densenet_tiny; images), logistic, mlp, or one "
              "registered", {}),
    "hidden": ("training", "MLP hidden units", {"type": int}),
    "weights": ("training", "starting weights: a torchvision DenseNet .pth (e.g. "
                "densenet121-a639ec97.pth)", {"metavar": "PTH"}),
    "seeds": ("training", "member seeds per loss: one number N for the seeds 0..N-1, or several "
              "seeds themselves", {"type": int, "nargs": "+"}),
    "epochs": ("training", "most epochs per member", {"type": int}),
    "batch_size": ("training", "examples per member and step", {"type": int}),
    "lr": ("training", "Adam learning rate", {"type": float}),
    "patience": ("training", "early-stopping patience", {"type": int}),
    "l2": ("training", "ridge penalty on the weights: a number, or auto (for each loss and "
           "rotation, the one of --l2-grid with the lowest loss of its own on the validation "
           "folds)", {"type": _ridge, "metavar": "L2|auto"}),
    "l2_grid": ("training", "the penalties --l2 auto chooses among",
                {"nargs": "+", "metavar": "L2"}),
    "l2_scale": ("training", "what --l2 is measured against: paper (the loss itself: a fixed "
                 "cost in the paper's units at every class weight, as costly learning assumes) "
                 "or per_weight (the member's total sample weight: the same trade-off against "
                 "the data at every weight)", {"choices": L2_SCALES}),
    "no_standardize": ("training", "fit on the features as they are, not standardised on each "
                       "rotation's training folds", {"action": "store_const", "const": False}),
    "solver": ("training", "exact: full-batch Newton to the optimum (logistic under --loss log, "
               "matrix or class_weighted_softmax; seeds then coincide); adam: minibatch Adam "
               "with early stopping; auto: exact where it applies, adam otherwise",
               {"choices": SOLVERS}),
    "betas_per_chunk": ("training", "losses per chunk, the unit of memory and of resumption (0: "
                        "the whole grid where the fit is exact, 16 where Adam trains)",
                        {"type": int}),
    "n_bins": ("report", "bins of the ECE", {"type": int}),
    "average": ("report", "how the members of a loss pool: score (their mean score, the "
                "paper's ensemble) or logit (the score of their mean logit)",
                {"choices": ENSEMBLE_AVERAGES}),
    "distributed": ("processes", "run as one of several processes (jax.distributed), each "
                    "training its share of the members into the shared --out, process 0 "
                    "writing the results; under Slurm, Open MPI or on a Cloud TPU the processes "
                    "are detected, elsewhere set config.distributed.coordinator_address, "
                    "num_processes and process_id", {"action": "store_const", "const": True}),
}  # fmt: skip
_GROUPS = {
    "data": "data",
    "loss": "the loss and its grid of class weights",
    "training": "training",
    "report": "the report",
    "processes": "several processes",
}


def add_config_arguments(
    parser: argparse.ArgumentParser, inputs: str, defaults: ml_collections.ConfigDict
) -> None:
    """Add ``--config FILE`` and the named options of the keys that runs on ``inputs`` read
    (:func:`iml.commands.config.shortcuts`), each named as in every command, its help ending
    with the key it sets and its default in ``defaults``."""
    flat = flatten(defaults)
    groups = {name: parser.add_argument_group(title) for name, title in _GROUPS.items()}
    for option, key in shortcuts(inputs).items():
        group, text, kwargs = _OPTIONS[option]
        default = flat[key]
        if default not in ("", ()) and "default" not in text and "const" not in kwargs:
            text = f"{text}; default {default}"
        flag = "--" + option.replace("_", "-")
        groups[group].add_argument(flag, help=f"{text} (config.{key})", **kwargs)


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
    rep.set_defaults(func=reproduce_command)

    fig = sub.add_parser(
        "figures",
        help="redraw the figures and table of a stored run",
        description="Report a stored run without training: its table, ensemble scores and "
        "figures (a sweep's: its table, scores and ECE figures). --config.eval.KEY=VALUE sets "
        "the report's settings (n_bins, n_bootstrap, "
        "report_seed, average) in place of the run's.",
    )
    fig.add_argument(
        "--run", required=True, help="a run directory written by `iml reproduce` or `iml sweep`"
    )
    fig.add_argument("--out", help="where to write (default: the run directory)")
    fig.add_argument(
        "--average",
        choices=ENSEMBLE_AVERAGES,
        default=None,
        help="how each ensemble pools its members: 'score' (the mean score, the paper's) or "
        "'logit' (the mean logit); default: the run's config.eval.average",
    )
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
    swp.add_argument("--weights", dest="renamed_weights", help=argparse.SUPPRESS)
    swp.set_defaults(func=sweep_command)

    rev = sub.add_parser(
        "reveal",
        help="revealed experiments of a stored run: what the models learned across class "
        "weights, and tests of capacity-constrained and costly learning",
        description="Read the scores of the models of an `iml reproduce` run or of an `iml "
        "sweep` over class weights, recover each model's experiment, test NIS "
        "(capacity-constrained learning) and NIAC (costly learning) with paired bootstrap "
        "inference, bound the costs of learning; write revealed.json and three figures.",
    )
    rev.add_argument("--run", required=True, metavar="DIR", nargs="+",
                     help="a run folder written by `iml reproduce` or `iml sweep`, or several "
                     "reproduce runs on the same observations (their class weights and seeds "
                     "pooled)")  # fmt: skip
    rev.add_argument("--out", required=True, metavar="DIR", help="where to write")
    rev.add_argument(
        "--n-bins",
        type=int,
        default=10,
        help="signals per model: deciles merged until each bin holds 10 expected positives and "
        "negatives; default 10 (the verdicts are also reached at 5, 10 and 20 quantile bins)",
    )
    rev.add_argument(
        "--power-datasets",
        type=int,
        default=100,
        help="simulated data sets per scenario for each test's size and power at the run's N, "
        "K and prior; 0 for none; default 100",
    )
    rev.add_argument("--n-bootstrap", type=int, default=1000,
                     help="paired bootstrap replicates; default 1000")  # fmt: skip
    rev.add_argument("--seed", type=int, default=0, help="seed of the bootstrap; default 0")
    rev.add_argument("--no-progress", action="store_true", help="print only the summary")
    rev.set_defaults(func=reveal_command)
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` (without the program name) parsed; ``overrides`` holds its ``--config.KEY=VALUE``
    items as ``(KEY, VALUE)`` pairs, in order (:func:`iml.config.split_overrides`)."""

    argv, overrides = split_overrides(argv)
    args = build_parser().parse_args(argv)
    args.overrides = overrides
    return args
