"""The ``iml`` command line: ``reproduce`` the paper's experiment, redraw ``figures``, ``sweep``,
``reveal`` what a run's models learned. This module parses it: the subcommands, their options and
the named options that set config keys (:data:`iml.commands.config.SHORTCUTS`,
:data:`iml.commands.config.SWEEP_SHORTCUTS`). ``iml --help`` shows this docstring's first line.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from iml.commands.config import SHORTCUTS, SWEEP_SHORTCUTS
from iml.commands.figures import figures_command
from iml.commands.reproduce import reproduce_command
from iml.commands.reveal import reveal_command
from iml.commands.sweep import sweep_command
from iml.config import flatten, keys_help, split_overrides
from iml.pipeline.defaults import default_config, experiment_config
from iml.pipeline.store import ENSEMBLE_AVERAGES
from iml.pipeline.sweep import SWEEP_DATASETS, SWEEP_LOSSES, sweep_config
from iml.training import L2_SCALES, SOLVERS

__all__ = ["add_sweep_arguments", "build_parser", "parse_args"]


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


def _shortcut(
    parser: Any, shortcuts: Mapping[str, str], option: str, text: str, **kwargs: Any
) -> None:
    flag = "--" + option.replace("_", "-")
    parser.add_argument(flag, help=f"{text} (config.{shortcuts[option]})", **kwargs)


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``iml sweep`` to ``parser``: ``--config``, ``--out``, ``--no-progress``
    and a named option for every config key (:data:`SWEEP_SHORTCUTS`), defaults in the config."""

    defaults = flatten(sweep_config())

    def shortcut(group: Any, option: str, text: str, **kwargs: Any) -> None:
        default = defaults[SWEEP_SHORTCUTS[option]]
        text = f"{text}; default {default}" if default not in ("", ()) else text
        _shortcut(group, SWEEP_SHORTCUTS, option, text, **kwargs)

    _config_argument(parser)
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (resumable)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    source = parser.add_argument_group("data (one of --csv or --dataset)")
    which = source.add_mutually_exclusive_group()
    shortcut(
        which,
        "csv",
        "a delimited text file with a header row (comma, semicolon, tab or | separated; "
        "quotes, a UTF-8 byte-order mark and Windows line ends are fine)",
        metavar="PATH",
    )
    shortcut(
        which,
        "dataset",
        "a UCI dataset (adult, letter: --data-dir) or the built-in digits (8 x 8 pixels as "
        "64 features; label 1 for the digit 8, or all 10 classes with --classes all)",
        choices=SWEEP_DATASETS,
    )
    shortcut(
        source,
        "classes",
        "binary: the positive class against the rest; all: every class of "
        "--dataset digits or letter, for the multiclass losses",
        choices=("binary", "all"),
    )
    shortcut(source, "target", "target column of --csv", metavar="COLUMN")
    shortcut(
        source,
        "positive",
        "positive target value of --csv (default: the target is 0/1 or true/false), the "
        "positive letter(s) of --dataset letter (default O, a ~4%% class) or digit of digits "
        "(default 8)",
        metavar="VALUE",
    )
    shortcut(
        source,
        "delimiter",
        "field separator of --csv: one character, or tab (default: detected among comma, "
        "semicolon, tab and |)",
        metavar="CHAR",
    )
    shortcut(
        source,
        "data_dir",
        "folder of the UCI files, as downloaded from the UCI Machine Learning Repository: "
        "letter-recognition.data (Letter Recognition) or adult.data, adult.test and adult.names "
        "(Adult)",
        metavar="DIR",
    )
    grid = parser.add_argument_group("the loss and its grid of class weights")
    shortcut(
        grid,
        "loss",
        "log (the beta-weighted cross-entropy), squared (beta-weighted), focal "
        "(--gamma, with the beta grid as its weight alpha), or the multiclass matrix (the "
        "B-weighted log loss, one sigmoid per class) and class_weighted_softmax "
        "(--loss-weights)",
        choices=sorted(SWEEP_LOSSES),
    )
    shortcut(grid, "gamma", "focal loss's gamma", type=float)
    shortcut(
        grid,
        "loss_weights",
        "the grid of a multiclass loss, ';'-separated: 'ones' (unweighted) or the entries "
        "that differ from 1, e.g. 'ones;B[8,8]=10;B[3,8]=10' (matrix) or 'ones;w[8]=10' "
        "(class_weighted_softmax), classes counted from 0",
        metavar="W1;W2;...",
    )
    # --weights was this option's earlier name; in `iml reproduce` it names a model's starting
    # weights. Given here, it is answered with the new name rather than read.
    grid.add_argument("--weights", dest="renamed_weights", help=argparse.SUPPRESS)
    shortcut(
        grid,
        "betas",
        "explicit betas in (0, 1), space- or comma-separated",
        nargs="+",
        metavar="BETA",
    )
    shortcut(grid, "n_betas", "grid size", type=int)
    shortcut(grid, "beta_min", "smallest beta", type=float)
    shortcut(grid, "beta_max", "largest beta", type=float)
    train = parser.add_argument_group("training")
    shortcut(
        train,
        "seeds",
        "member seeds per loss: one number N for the seeds 0..N-1, or several seeds themselves "
        "(default: one where the fit is exact, which no seed changes; 0..7 where Adam trains)",
        type=int,
        nargs="+",
    )
    shortcut(train, "model", "a model that takes rows: logistic, mlp or one registered")
    shortcut(train, "hidden", "MLP hidden units", type=int)
    shortcut(train, "epochs", "most epochs", type=int)
    shortcut(train, "batch_size", "rows per minibatch", type=int)
    shortcut(train, "lr", "Adam learning rate", type=float)
    shortcut(
        train,
        "l2",
        "ridge penalty on the weights: a number, or auto (for each loss and rotation, the one of "
        "--l2-grid with the lowest loss of its own on the validation folds)",
        type=_ridge,
        metavar="L2|auto",
    )
    shortcut(train, "l2_grid", "the penalties --l2 auto chooses among", nargs="+", metavar="L2")
    shortcut(
        train,
        "l2_scale",
        "what --l2 is measured against: paper (the loss itself: a fixed cost in the paper's "
        "units at every class weight, as costly learning assumes) or per_weight (the member's "
        "total sample weight: the same trade-off against the data at every weight)",
        choices=L2_SCALES,
    )
    train.add_argument(
        "--no-standardize",
        action="store_const",
        const=False,
        help="fit on the features as they are, not standardised on each rotation's training "
        "folds (config.train.standardize)",
    )
    shortcut(train, "patience", "early-stopping patience", type=int)
    shortcut(
        train,
        "solver",
        "exact: full-batch Newton to the optimum (logistic under --loss log, matrix or "
        "class_weighted_softmax; seeds then coincide); adam: minibatch Adam with early stopping; "
        "auto: exact where it applies, adam otherwise",
        choices=SOLVERS,
    )
    shortcut(train, "n_folds", "cross-validation folds", type=int)
    shortcut(train, "fold_seed", "seed of the fold assignment", type=int)
    shortcut(
        train,
        "betas_per_chunk",
        "losses per chunk, the unit of memory and of resumption (0: the whole grid where the "
        "fit is exact, 16 where Adam trains)",
        type=int,
    )
    shortcut(parser, "n_bins", "bins of the ECE", type=int)
    shortcut(
        parser,
        "average",
        "how the seeds of a loss pool: score (their mean score, the paper's ensemble) or logit "
        "(the score of their mean logit)",
        choices=ENSEMBLE_AVERAGES,
    )


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

    def shortcut(option: str, text: str, **kwargs: Any) -> None:
        _shortcut(rep, SHORTCUTS, option, text, **kwargs)

    shortcut("dataset", "digits (default), pneumoniamnist or chestxray14")
    shortcut("data_dir", "where prepared TFDS data is kept")
    shortcut("manual_dir", "folder with the raw files of the dataset")
    shortcut(
        "model",
        "a model that takes images: densenet_small (default), densenet121, densenet_tiny, "
        "logistic, mlp or one registered",
    )
    shortcut(
        "weights",
        "starting weights: a torchvision DenseNet .pth (e.g. densenet121-a639ec97.pth)",
    )
    shortcut("image_size", "side of the square images in pixels", type=int)
    shortcut(
        "classes",
        "binary (default: the dataset's binary label) or all (every class of digits, for the "
        "multiclass losses)",
        choices=("binary", "all"),
    )
    shortcut(
        "loss",
        "log (default: the beta-weighted cross-entropy), squared or focal; or the multiclass "
        "matrix (the B-weighted log loss) and class_weighted_softmax, over --loss-weights",
    )
    shortcut("gamma", "the focal loss's gamma (default 2)", type=float)
    shortcut(
        "betas",
        "class weights in (0, 1), space- or comma-separated (alpha for the focal loss)",
        nargs="+",
        metavar="BETA",
    )
    shortcut(
        "loss_weights",
        "the grid of a multiclass loss, ';'-separated, one ensemble each: 'ones' or the entries "
        "that differ from 1, e.g. 'ones;B[8,8]=10' (matrix) or 'ones;w[8]=10'",
        metavar="W1;W2;...",
    )
    shortcut("n_folds", "number of cross-validation folds", type=int)
    shortcut(
        "seeds",
        "member seeds per loss: one number N for the seeds 0..N-1, or several seeds themselves",
        type=int,
        nargs="+",
    )
    shortcut("epochs", "most epochs per member", type=int)
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
        "figures. --config.eval.KEY=VALUE sets the report's settings (n_bins, n_bootstrap, "
        "report_seed, average) in place of the run's.",
    )
    fig.add_argument("--run", required=True, help="a run directory written by `iml reproduce`")
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
    add_sweep_arguments(swp)
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
