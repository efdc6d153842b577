"""The ``iml`` command line: ``reproduce`` the paper's experiment, redraw ``figures``, ``sweep``,
``reveal`` what a run's models learned.

Examples::

    iml reproduce --out runs/reproduce              # digits, small DenseNet, beta 0.5/0.9/0.99
    iml reproduce --config experiments/configs/pneumoniamnist.py --manual-dir DIR --out runs/pmn
    iml reproduce --config experiments/configs/chestxray14.py --config.train.epochs=1 \\
        --config.model.conv_impl=xla --manual-dir NIH_RELEASE --out runs/cxr-smoke
    iml figures --run runs/reproduce --out runs/reproduce-figures
    iml figures --run runs/reproduce --out runs/reproduce-20-bins --config.eval.n_bins=20
    iml sweep --dataset digits --lr 0.05 --seeds 4 --out runs/sweep-digits
    iml reveal --run runs/reproduce --out runs/reproduce-revealed
    python -m iml.cli reproduce --epochs 1 --n-folds 3 --config.train.members_per_batch=6

``reproduce`` and ``sweep`` read their config (nested: ``config.data``, ``config.model``,
``config.loss``, ``config.train``, ``config.eval``; :func:`iml.pipeline.runner.default_config`,
:func:`iml.pipeline.sweep.sweep_config`) from ``--config FILE``, then set any key as
``--config.SECTION.KEY=VALUE``, then the named options (``--epochs`` sets
``config.train.epochs``; :data:`SHORTCUTS`, :data:`SWEEP_SHORTCUTS`). ``figures`` trains
nothing: it reports a stored run with the run's config, and takes ``--config.eval.KEY=VALUE``
for the report's own settings.

Bad input (an unknown dataset, a misspelled config key, beta outside (0, 1), missing directories
or CSV columns) is reported before any work starts, in one line, with exit status 2. A failure
during the work exits with status 1 and its traceback, and leaves every finished result in place.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax

from iml import config as config_lib
from iml.config import apply_overrides, flatten, keys_help, parse_value, split_overrides
from iml.pipeline.defaults import default_config
from iml.pipeline.store import ENSEMBLE_AVERAGES, RunStore
from iml.pipeline.sweep import (
    SWEEP_DATASETS,
    SWEEP_LOSSES,
    execute_sweep,
    prepare_sweep,
    sweep_config,
    write_sweep_outputs,
)
from iml.training import L2_SCALES, SOLVERS, use_cpu_cores_as_devices

if TYPE_CHECKING:
    import ml_collections

__all__ = [
    "SHORTCUTS",
    "SWEEP_SHORTCUTS",
    "add_sweep_arguments",
    "build_parser",
    "keep_compiled_programs",
    "load_config",
    "main",
    "parse_args",
]

#: The named options of ``iml reproduce`` and the config key each sets.
SHORTCUTS = {
    "dataset": "data.name",
    "data_dir": "data.data_dir",
    "manual_dir": "data.manual_dir",
    "model": "model.name",
    "weights": "model.weights",
    "image_size": "data.image_size",
    "classes": "data.classes",
    "loss": "loss.name",
    "gamma": "loss.gamma",
    "betas": "loss.betas",
    "loss_weights": "loss.weights",
    "n_folds": "data.n_folds",
    "seeds": "train.seeds",
    "epochs": "train.epochs",
}


#: The named options of ``iml sweep`` and the config key each sets
#: (:func:`iml.pipeline.sweep.sweep_config`); ``--out`` and ``--no-progress`` are no keys.
SWEEP_SHORTCUTS = {
    "csv": "data.csv",
    "dataset": "data.name",
    "classes": "data.classes",
    "target": "data.target",
    "positive": "data.positive",
    "delimiter": "data.delimiter",
    "data_dir": "data.data_dir",
    "loss": "loss.name",
    "gamma": "loss.gamma",
    "loss_weights": "loss.weights",
    "betas": "loss.betas",
    "n_betas": "loss.n_betas",
    "beta_min": "loss.beta_min",
    "beta_max": "loss.beta_max",
    "seeds": "train.seeds",
    "model": "model.name",
    "hidden": "model.hidden",
    "epochs": "train.epochs",
    "batch_size": "train.batch_size",
    "lr": "train.learning_rate",
    "l2": "train.l2",
    "l2_grid": "train.l2_grid",
    "l2_scale": "train.l2_scale",
    "no_standardize": "train.standardize",
    "patience": "train.patience",
    "solver": "train.solver",
    "n_folds": "data.n_folds",
    "fold_seed": "data.fold_seed",
    "betas_per_chunk": "train.betas_per_chunk",
    "n_bins": "eval.n_bins",
    "average": "eval.average",
}


def load_config(args: argparse.Namespace) -> ml_collections.ConfigDict:
    """The config of ``iml reproduce`` or ``iml sweep``, locked: the default (or ``--config
    FILE``), then the ``--config.KEY=VALUE`` overrides in order, then the named options
    (:data:`SHORTCUTS`, :data:`SWEEP_SHORTCUTS`).

    Raises:
      FileNotFoundError: for a ``--config`` file that does not exist.
      ValueError: naming the flag, for a key that the config does not have (with the nearest
        ones) or a value of another type than the key's.
    """
    return _load_config(args)[0]


def _load_config(args: argparse.Namespace) -> tuple[ml_collections.ConfigDict, dict[str, str]]:
    """The config (see :func:`load_config`), and how messages name its keys: the flag of a key
    that a flag set, or that nothing did; ``config.KEY`` where a file or ``--config.KEY`` did."""

    if getattr(args, "command", "reproduce") == "sweep":
        default, shortcuts = sweep_config, SWEEP_SHORTCUTS
    else:
        default, shortcuts = default_config, SHORTCUTS
    if getattr(args, "renamed_weights", None) is not None:
        raise ValueError(
            "--weights: the grid of a multiclass loss is --loss-weights, as in iml reproduce "
            "(where --weights is a model's starting weights)"
        )
    overrides = list(getattr(args, "overrides", ()))
    for key, text in overrides:
        if key == "train.seeds":
            _check_seeds_literal(text)
    config = config_lib.load_config(args.config, overrides, default=default)
    overridden = {key for key, _ in overrides}
    names = {}
    for option, key in shortcuts.items():
        flag = "--" + option.replace("_", "-")
        value = getattr(args, option)
        if value is not None:
            if key in ("loss.betas", "train.l2_grid"):
                value = _numbers(flag, value)
            elif key == "train.seeds":
                value = _member_seeds(flag, value)
            config_lib.override(config, key, value, flag=flag)
        if value is not None or not (args.config or key in overridden):
            names[key] = flag
    return config, names


def _ridge(text: str) -> float | str:
    """``--l2``: ``auto`` or a number."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, got {text!r}") from None


def _numbers(flag: str, values: Sequence[str]) -> tuple[float, ...]:
    """The numbers of an option that takes several, each given alone or comma-separated
    (``--betas 0.5 0.9``, ``--betas 0.5,0.9``)."""
    text = " ".join(values)
    try:
        return tuple(float(v) for v in text.replace(",", " ").split())
    except ValueError:
        raise ValueError(
            f"{flag} must be numbers, space- or comma-separated, got {text!r}"
        ) from None


def _member_seeds(flag: str, values: Sequence[int]) -> tuple[int, ...]:
    """The seeds of ``--seeds``: one value ``N`` counts them (``0..N-1``), several are the seeds
    themselves."""
    if len(values) == 1:
        if values[0] < 1:
            raise ValueError(
                f"{flag} {values[0]}: one value is a number of seeds (0..N-1) and must be at "
                "least 1; to name the seeds themselves, give several"
            )
        return tuple(range(values[0]))
    return tuple(values)


def _check_seeds_literal(text: str | None) -> None:
    """``--config.train.seeds=N`` with one number: a count on ``--seeds``, but the key holds the
    seeds themselves, so the number alone is refused rather than read as the one seed ``N``."""

    value = parse_value(text or "")
    if isinstance(value, int) and not isinstance(value, bool):
        count = f"--seeds {value} for the seeds 0..{value - 1}, or " if value >= 1 else ""
        raise ValueError(
            f"--config.train.seeds={text}: the key holds the seeds themselves; use {count}"
            f"--config.train.seeds='({value},)' for the seed {value} alone"
        )


def _reproduce(args: argparse.Namespace) -> Callable[[], int]:
    # imported here: the image pipeline loads tensorflow-datasets, Flax's DenseNets and the
    # report (seconds), which `iml sweep`, `iml reveal` and `--help` do without
    from iml.pipeline.report import report_run
    from iml.pipeline.runner import check_config, check_resumable, is_multiclass, run_experiment
    from iml.training.host import keep_step_memory

    config = load_config(args)
    check_config(config)
    try:
        check_resumable(config, args.out)
    except ValueError as err:
        raise ValueError(f"--out: {err}") from None

    def work() -> int:

        # before JAX's first computation: every training step reuses the last step's memory
        keep_step_memory()
        start = time.perf_counter()
        run_experiment(config, args.out, progress=not args.no_progress)
        if args.train_only:
            elapsed = time.perf_counter() - start
            print(f"members stored in {args.out} ({elapsed:.0f} s); iml figures --run {args.out}")
            return 0
        report_run(args.out, args.out)
        elapsed = time.perf_counter() - start
        revealed = "" if is_multiclass(config) else "revealed.json, "
        print(f"results in {args.out}: table.json, table.md, {revealed}figures/ ({elapsed:.0f} s)")
        return 0

    return work


def _figures(args: argparse.Namespace) -> Callable[[], int]:
    # imported here: the image pipeline loads tensorflow-datasets, Flax's DenseNets and the
    # report (seconds), which `iml sweep`, `iml reveal` and `--help` do without
    from iml.pipeline.report import report_config, report_run

    overrides = _eval_overrides(args)
    report_config(args.run, overrides)
    out = args.out or args.run

    def work() -> int:
        table = report_run(args.run, out, eval_overrides=overrides)
        print(json.dumps({"out": str(out), "betas": list(table)}))
        return 0

    return work


def _eval_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``config.eval`` keys that ``iml figures`` reports with: its ``--config.eval.KEY=VALUE``
    items, then ``--average``; any other ``--config.KEY`` is refused (it trains nothing)."""

    config = default_config()
    names = []
    for key, _ in args.overrides:
        section, _, name = key.partition(".")
        names.append(name)
        if section != "eval" or not name:
            keys = ", ".join(f"config.eval.{k}" for k in config.eval)
            raise ValueError(
                f"--config.{key}: `iml figures` trains nothing and takes only the report's "
                f"settings ({keys}); `iml reproduce` and `iml sweep` take the other keys"
            )
    # read and typed as `iml reproduce` reads them; the stored run's own values come later
    apply_overrides(config, args.overrides)
    overrides: dict[str, Any] = {name: config.eval[name] for name in names}
    if args.average is not None:
        overrides["average"] = args.average
    return overrides


def _reveal(args: argparse.Namespace) -> Callable[[], int]:
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


#: The keys of ``iml sweep``'s config that only minibatch Adam reads.
_ADAM_KEYS = ("train.learning_rate", "train.batch_size", "train.epochs", "train.patience")


def _note_unused_adam_options(
    config: ml_collections.ConfigDict, names: Mapping[str, str], solver: str
) -> None:
    """Say on stderr which Adam options a sweep fitted exactly leaves unread."""

    if solver != "exact":
        return
    default = sweep_config()
    unread = [
        names.get(key, f"config.{key}")
        for key in _ADAM_KEYS
        if config_lib.lookup(config, key) != config_lib.lookup(default, key)
    ]
    if unread:
        print(
            f"iml sweep: note: {', '.join(unread)} not used: the logistic model under this loss "
            "is fitted exactly (--solver adam trains it by Adam)",
            file=sys.stderr,
        )


def _sweep(args: argparse.Namespace) -> Callable[[], int]:
    """Check the config, the data and ``--out``; return the work (train, write, summarize)."""

    config, names = _load_config(args)
    plan, dataset = prepare_sweep(config, names)
    out = Path(args.out)
    store = RunStore(out)
    try:
        store.check_resumable(plan.run_config)
    except ValueError as err:
        raise ValueError(f"--out: {err}") from None
    _note_unused_adam_options(config, names, plan.config.solver)  # once every check has passed

    def work() -> int:

        result = execute_sweep(plan, store, progress=not args.no_progress)
        multiclass = config.data.classes == "all"
        loss = config.loss.name
        what = "" if loss == "log" else f"{loss} loss, "
        title = (
            f"{dataset.name}: {what}{len(result.keys)} losses x {len(result.seeds)} seeds, "
            f"{config.model.name}"
        )
        class_names = dataset.class_names if multiclass else None
        prevalence = None if multiclass else dataset.prevalence
        paths = write_sweep_outputs(out, result, prevalence, title, class_names)
        metric, shown = ("top_label_ece", "top-label ECE") if multiclass else ("ece", "ECE")
        worst = max(row["raw"][metric] for row in result.table.values())
        corrected = [row["loss_corrected"][metric] for row in result.table.values()]
        where = (
            f"{len(class_names)} classes" if multiclass else f"prevalence {dataset.prevalence:.4f}"
        )
        print(
            f"{dataset.name}: N={dataset.num_examples}, {where}; raw {shown} up to {worst:.4f}; "
            f"loss-corrected {shown} {min(corrected):.4f}..{max(corrected):.4f}; "
            f"trained chunks {result.chunks_trained}"
        )
        written = [out / "sweep_table.json", out / "sweep_table.md", out / "scores.npz", *paths]
        print("wrote " + ", ".join(map(str, written)))
        return 0

    return work


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
        epilog=keys_help(default_config(), default_config),
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
    rep.set_defaults(func=_reproduce)

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
    fig.set_defaults(func=_figures)

    swp = sub.add_parser(
        "sweep",
        help="a fine grid of losses (class weights beta by default) of small models on a table",
        description="Train a fine grid of losses (class weights beta by default) of small "
        "models as one vectorized program; plot ECE against the loss for raw and "
        "loss-corrected scores.",
        epilog=keys_help(sweep_config(), sweep_config),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_sweep_arguments(swp)
    swp.set_defaults(func=_sweep)

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
    rev.set_defaults(func=_reveal)
    return parser


# The commands that read a config, and so take --config.KEY=VALUE (`iml figures` its
# config.eval keys only).
_CONFIGURED = ("reproduce", "sweep", "figures")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` (without the program name) parsed; ``overrides`` holds its ``--config.KEY=VALUE``
    items as ``(KEY, VALUE)`` pairs, in order (:func:`iml.config.split_overrides`)."""

    argv, overrides = split_overrides(argv)
    args = build_parser().parse_args(argv)
    args.overrides = overrides
    return args


def keep_compiled_programs() -> Path | None:
    """Keep the programs JAX compiles on disk, so that a command run again loads them instead of
    compiling them anew (seconds of every sweep): in ``JAX_COMPILATION_CACHE_DIR`` where it is
    set, else in ``$XDG_CACHE_HOME/iml/jax`` (``~/.cache/iml/jax``); ``IML_JAX_CACHE=off`` keeps
    none. Returns the folder, or None."""

    if os.environ.get("IML_JAX_CACHE", "").lower() == "off":
        return None
    folder = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if not folder:
        home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(home, "iml", "jax")
        jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    return Path(folder)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``iml``; returns its exit status.

    Each command first checks its input (arguments, config, files). Bad input found there is
    printed as one line, ``iml COMMAND: error: ...``, and gives exit status 2 before any work
    starts. A failure during the work itself (an error inside training, a full disk) is not bad
    input: its exception propagates with its traceback (exit status 1 from the ``iml`` script),
    and every result finished before it stays in place.
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.overrides and args.command not in _CONFIGURED:
        flag = "--config." + args.overrides[0][0]
        takes = ", ".join(f"`iml {c}`" for c in _CONFIGURED)
        print(f"iml {args.command}: error: {flag}: only {takes} take it", file=sys.stderr)
        return 2
    if args.command == "reproduce":
        # on the CPU, one device per core lets ensemble members train side by side
        use_cpu_cores_as_devices()
    keep_compiled_programs()
    try:
        work = args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"iml {args.command}: error: {err}", file=sys.stderr)
        return 2
    return int(work())


if __name__ == "__main__":
    sys.exit(main())
