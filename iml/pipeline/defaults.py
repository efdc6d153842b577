"""The experiment's one config schema, and its two named defaults.

:data:`SCHEMA` is the schema: every key of an experiment (``data``, ``model``, ``loss``,
``train``, ``plan``, ``eval``; and ``distributed``, the processes that run it) with its default
and its meaning, which ``--help`` prints; :func:`experiment_config` makes it a config. ``train``
holds fields of :class:`iml.training.TrainConfig` under their own names (:func:`train_fields`),
``plan`` how the members are laid out: their seeds, how many train together, and checkpoints.
An experiment trains its models either on images, fed to the devices in batches from the host (``iml
reproduce``: :mod:`iml.pipeline.runner`), or on rows of a table held whole on the device (``iml
sweep``: :mod:`iml.pipeline.sweep`); a few keys are read by one of the two only
(:data:`READ_BY`), and setting one of them for the other is an error (:func:`check_read_keys`)
rather than a setting silently ignored. The loss's parameters (``loss.params``) are whatever
the loss takes, so that a registered loss with any parameter needs no edit here.
:func:`default_config` (the image ensemble of ``iml reproduce``) and :func:`sweep_config` (the
small-model sweep of ``iml sweep``) are the schema with their own defaults;
``experiments/configs/`` ships them as files to copy and edit. Kept apart from the runners, so
that reading it loads no training code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import ml_collections
from ml_collections import config_dict

from iml import _validation as V
from iml import config as config_lib
from iml.grids import (
    CLASS_WEIGHTS,
    WEIGHT_GRIDS,
    config_betas,
    config_parameters,
    loss_family,
    parse_weight_grid,
)
from iml.pipeline.store import ENSEMBLE_AVERAGES

__all__ = [
    "ADAM_CHUNK",
    "ADAM_SEEDS",
    "EXACT_SEEDS",
    "INPUTS",
    "PARAMS",
    "READ_BY",
    "SCHEMA",
    "Key",
    "KeyNames",
    "check_eval_settings",
    "check_loss_params",
    "check_loss_section",
    "check_read_keys",
    "default_config",
    "experiment_config",
    "key_help",
    "sweep_config",
    "train_fields",
]

#: Where a config leaves the seeds or the batches to the solver (``plan.seeds = ()``,
#: ``plan.losses_per_batch = 0``): the seeds of a fit made exactly (its members' optimum does
#: not depend on a seed) and of one trained by Adam, and the losses of a batch by Adam (an exact
#: fit takes the whole grid as one batch).
EXACT_SEEDS, ADAM_SEEDS, ADAM_CHUNK = (0,), tuple(range(8)), 16

#: The ridge coefficients that ``train.l2 = "auto"`` chooses from (:data:`iml.training.L2_GRID`).
_L2_GRID = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)


class Key(NamedTuple):
    """One key of the schema: its default, what it means (``--help`` prints it), and which runs
    read it (:data:`INPUTS`; ``"both"``)."""

    default: Any
    help: str
    read_by: str = "both"


I, R = "images", "rows"  # the keys runs of one kind of input only read

#: The schema of an experiment, section by section: every key with its default (that of
#: ``iml reproduce`` where the two commands differ), its meaning and which runs read it.
#: ``loss.params`` is an open section: any parameter of the loss (:func:`loss_params`).
SCHEMA: dict[str, dict[str, Key]] = {
    "data": {
        "name": Key("digits", "a dataset of iml.data.DATASETS: images (digits, pneumoniamnist, "
                    "chestxray14; a sweep reads their pixels as features) or tables (adult, "
                    "letter; a sweep only); '' with data.csv"),
        "csv": Key("", "a delimited text file with a header row, read as a table", R),
        "target": Key("", "the target column of the csv file", R),
        "positive": Key("", "csv: the positive target value ('' = the target is 0/1 or "
                        "true/false); letter: the positive letter(s) ('' = O); digits: the "
                        "positive digit ('' = 8)", R),
        "delimiter": Key("", "the csv file's field separator, one character or 'tab'", R),
        "data_dir": Key("", "prepared image data ('' = iml.data.default_data_dir()); in a sweep "
                        "of adult or letter, the folder of the UCI files"),
        "manual_dir": Key("", "an image dataset's raw files, to prepare it from", I),
        "max_examples": Key(0, "0 = all; else a random subset of this many", I),
        "classes": Key("binary", "'binary': the dataset's binary labels (digits: 8 against the "
                       "rest); 'all': every class of a dataset that has classes, for the "
                       "multiclass losses"),
        "image_size": Key(4, "side of the images in px; 0 = the dataset's own (digits: 8)"),
        "n_folds": Key(10, "cross-validation folds, rotated train/validation/test (7-2-1 of 10)"),
        "n_val_folds": Key(2, "validation folds per rotation", I),
        "n_test_folds": Key(1, "test folds per rotation", I),
        "rotations": Key((), "the rotations to train; () = one full cycle", I),
        "fold_seed": Key(0, "seed of the fold assignment"),
    },
    "model": {
        "name": Key("densenet_small", "a model of iml.models.MODELS: a DenseNet (images), or "
                    "logistic regression and the MLP, which take rows and images as rows of "
                    "pixels"),
        "hidden": Key(32, "the MLP's hidden units"),
        "weights": Key("", "'' = random initial weights; else a torchvision DenseNet .pth file "
                       "(the paper starts from torchvision's ImageNet densenet121), adapted to "
                       "the images' channels, with a fresh head", I),
        "conv_impl": Key("", "'' = the backend's default (iml.models.DEFAULT_CONV_IMPL)", I),
    },
    "loss": {
        "name": Key("log", "the loss: by its class weight (iml.grids.CLASS_WEIGHTS: 'log', the "
                    "beta-weighted cross-entropy, eq. 7; 'squared', the beta-weighted Brier "
                    "score; 'focal', its weight alpha), or a multiclass loss over the grid "
                    "loss.weights ('matrix', 'class_weighted_softmax')"),
        "betas": Key((0.5, 0.9, 0.99), "one ensemble per class weight; () = the logit grid of "
                     "n_betas"),
        "n_betas": Key(64, "the size of the grid of betas, evenly spaced in logit"),
        "beta_min": Key(0.01, "the grid's lowest beta"),
        "beta_max": Key(0.99, "the grid's highest beta"),
        "weights": Key("", "the grid of a multiclass loss, one ensemble per ';'-separated entry, "
                       "e.g. 'ones;B[8,8]=10' (iml.grids.parse_weight_grid)"),
    },
    "train": {
        "max_epochs": Key(3, "Adam's most epochs per member"),
        "batch_size": Key(16, "Adam's examples per member and step"),
        "eval_batch_size": Key(64, "validation and test examples per member and step"),
        "learning_rate": Key(1e-3, "Adam's learning rate"),
        "patience": Key(5, "epochs without validation gain before a member stops"),
        "plateau_patience": Key(1, "epochs without gain before the learning rate is cut"),
        "min_lr": Key(0.0, "the floor of the plateau decay (0: none, the paper's)"),
        "l2": Key("auto", "the ridge: a number, or 'auto': chosen per loss and rotation on the "
                  "validation folds from l2_grid, by the loss's own validation loss", R),
        "l2_grid": Key(_L2_GRID, "the penalties 'auto' chooses from", R),
        "l2_choice": Key("least_penalty", "how 'auto' chooses (iml.training.L2_CHOICES): "
                         "'least_penalty', the smallest penalty whose validation loss is within "
                         "half a standard error of the lowest (a larger one shrinks the scores "
                         "with no evidence that it helps); 'lowest_loss', the lowest, as "
                         "scikit-learn's LogisticRegressionCV", R),
        "l2_scale": Key("paper", "what the ridge is measured against (iml.training.L2_SCALES): "
                        "'paper', the loss itself, or 'per_weight', the member's total sample "
                        "weight", R),
        "standardize": Key(True, "standardise the features on each rotation's training folds", R),
        "solver": Key("auto", "exact: full-batch Newton steps to the optimum (logistic "
                      "regression under a loss with an exact form); adam: early-stopped "
                      "minibatch Adam; auto: exact where it can", R),
        "flip": Key(False, "random horizontal flips of the training images", I),
        "normalize": Key("imagenet", "'imagenet' (torchvision's statistics) or 'none'", I),
    },
    "plan": {
        "seeds": Key((0,), "member seeds of every loss (--seeds N: 0..N-1); () = one where the "
                     "fit is exact, 8 where Adam trains"),
        "losses_per_batch": Key(0, "losses trained together, with all their seeds and "
                                "rotations; 0 = all where the fit is exact, 16 where Adam "
                                "trains", R),
        "members_per_batch": Key(0, "members trained together; 0 = those of one rotation", I),
        "memory_budget_bytes": Key(0, "device bytes the members of one program may take where "
                                   "members_per_batch is 0 (0 = 0.9 of the free memory; a CPU "
                                   "reports none: no limit)", I),
        "checkpoint": Key(True, "store each member batch as it finishes, so that a run resumes "
                          "mid-batch", I),
    },
    "eval": {
        "n_bins": Key(10, "bins of the calibration errors (the paper's deciles)"),
        "n_bootstrap": Key(200, "bootstrap replicates of the table's intervals and tests, one "
                           "per ECE of every loss and method (iml reveal takes 1,000: its "
                           "tests' p-values cannot fall below 1/(replicates + 1))"),
        "report_seed": Key(0, "seed of those replicates"),
        "average": Key("score", "how each loss's ensemble pools its members "
                       "(iml.pipeline.ENSEMBLE_AVERAGES): 'score', the mean raw score (the "
                       "paper's), or 'logit', the score of the members' mean logit"),
        "figures": Key(("png", "pdf"), "formats of the report's figures (png, pdf, svg); () = "
                       "none"),
    },
    "distributed": {
        "enabled": Key(False, "run as one of several processes on JAX's multi-controller "
                       "runtime: each trains its share of the member batches into the one "
                       "shared output folder; process 0 writes the results"),
        "coordinator_address": Key("", "host:port of process 0's coordinator; '' = detected "
                                   "(Slurm, Open MPI, Cloud TPU)"),
        "num_processes": Key(0, "processes in all; 0 = detected"),
        "process_id": Key(-1, "this process's index, 0 .. num_processes - 1; -1 = detected"),
        "initialization_timeout": Key(300, "seconds to wait for every process to connect"),
    },
}  # fmt: skip

#: The open section of the loss's parameters (besides the weight its grid varies).
PARAMS = "loss.params"


def experiment_config() -> ml_collections.ConfigDict:
    """The schema (:data:`SCHEMA`) as a config at its defaults, locked: its sections take no new
    keys, so a misspelled one is an error; ``loss.params`` alone takes any key."""
    c = ml_collections.ConfigDict()
    for section, keys in SCHEMA.items():
        c[section] = ml_collections.ConfigDict()
        for name, key in keys.items():
            c[section][name] = (
                config_dict.FieldReference(key.default, field_type=object)
                if (section, name) == ("train", "l2")  # a number or 'auto'
                else key.default
            )
    c.loss.params = ml_collections.ConfigDict()
    c.lock()
    c.loss.params.unlock()
    return c


def key_help(key: str) -> str:
    """What the dotted ``key`` means (:data:`SCHEMA`); ``''`` for a loss parameter."""
    section, _, name = key.partition(".")
    entry = SCHEMA.get(section, {}).get(name)
    return entry.help if entry is not None else ""


#: What an experiment's models take: images fed from the host (``iml reproduce``) or rows of a
#: table held on the device (``iml sweep``).
INPUTS = ("images", "rows")

#: The keys that runs of one kind of input only read; each other key both read.
READ_BY: Mapping[str, str] = {
    f"{section}.{name}": key.read_by
    for section, keys in SCHEMA.items()
    for name, key in keys.items()
    if key.read_by != "both"
}

_COMMANDS = {"images": "iml reproduce", "rows": "iml sweep"}


def train_fields(
    config: Mapping[str, Any] | ml_collections.ConfigDict, inputs: str
) -> dict[str, Any]:
    """The :class:`iml.training.TrainConfig` fields of ``config.train`` that runs on ``inputs``
    (:data:`INPUTS`) read, under the fields' own names: ``TrainConfig(**train_fields(c, i))``."""
    fields = {}
    for name, value in config["train"].items():
        if READ_BY.get(f"train.{name}", inputs) == inputs:
            fields[name] = tuple(value) if isinstance(value, list | tuple) else value
    return fields


def check_read_keys(
    config: Mapping[str, Any] | ml_collections.ConfigDict,
    inputs: str,
    name: Callable[[str], str] = lambda key: f"config.{key}",
) -> None:
    """Refuse a key that runs on ``inputs`` do not read, set away from the schema's default.

    Raises:
      ValueError: naming the first such key (as ``name`` gives it) and the runs that read it.
    """
    for key, reader in READ_BY.items():
        section, _, field = key.partition(".")
        default = SCHEMA[section][field].default
        if reader != inputs and config_lib.lookup(config, key) != default:
            raise ValueError(
                f"{name(key)} is read by runs on {reader} ({_COMMANDS[reader]}) only, not by "
                f"this run on {inputs} ({_COMMANDS[inputs]}); leave it at its default "
                f"{default!r}"
            )


def default_config() -> ml_collections.ConfigDict:
    """The default experiment of ``iml reproduce``: digits (8 vs rest) at 4 px, a small DenseNet,
    beta 0.5/0.9/0.99 (the schema's defaults, :func:`experiment_config`).

    Chosen so that ``iml reproduce`` finishes in minutes on a CPU: 10 folds rotated
    7/2/1 (30 members; the 3 of a rotation trained together), 3 epochs at learning rate 1e-3.

    The digits are shrunk from their native 8 px to 4 px so that the task is uncertain: at 8 px
    the eights are almost separable, nearly every score lies at 0 or 1 and most
    deciles hold no eight, so Figures 3 and 4 have two or three points per curve. At 4 px (9.7%
    positive) the classes overlap and the upper deciles hold a range of rates, along which the raw
    curves fan out by beta (``docs/results/reproduce_digits``).
    """
    return experiment_config()


def sweep_config() -> ml_collections.ConfigDict:
    """The default sweep of ``iml sweep``: 64 betas of the beta-weighted log loss of logistic
    regression, fitted exactly (one seed: the optimum depends on none) with the ridge chosen per
    beta and rotation on the validation folds, on features standardised on the training folds.

    The data has no default: ``config.data.name`` names a dataset (``"adult"`` and ``"letter"``
    read the UCI files in ``config.data.data_dir``; ``"digits"`` needs none) or
    ``config.data.csv`` a delimited text file. ``iml sweep`` reads this config (or ``--config
    FILE``), sets any key as ``--config.SECTION.KEY=VALUE``, and has a few named options
    (:data:`iml.commands.config.SHORTCUTS`).
    """
    c = experiment_config()
    # a dataset of iml.pipeline.run_config.TABLE_DATASETS, or 'csv' ('' too where data.csv is set)
    c.data.name = ""
    c.data.image_size = 0  # an image dataset's pixels as features at its own size
    c.model.name = "logistic"  # or 'mlp', or any model of iml.models.MODELS that takes rows
    c.loss.betas = ()  # the logit grid of n_betas betas
    c.plan.seeds = ()  # one where the fit is exact, 8 where Adam trains
    c.train.max_epochs = 100  # Adam's most epochs per member
    c.train.batch_size = 512  # Adam's rows per step, shared by the members of a seed
    c.train.eval_batch_size = 1024  # validation rows per step
    c.train.learning_rate = 0.01  # Adam's learning rate
    c.train.plateau_patience = 2  # epochs without gain before Adam's learning rate is cut
    return c


def check_loss_params(loss: Mapping[str, Any]) -> dict[str, float]:
    """The parameters of ``loss.params`` (a config's loss section) the loss takes, checked as
    the loss checks them (a negative focusing parameter, say).

    Raises:
      ValueError: naming ``config.loss.params`` or its key.
    """
    try:
        params = config_parameters(loss["name"], loss)
    except ValueError as err:
        raise ValueError(f"config.loss.{err}") from None
    if params and loss["name"] in CLASS_WEIGHTS:  # built, so that the loss checks them
        try:
            loss_family(loss["name"], **params)
        except (ValueError, TypeError) as err:
            raise ValueError(f"config.loss.params: {err}") from None
    return params


class KeyNames:
    """How messages name the keys of the config ``c``: as ``names`` gives them (a command line
    gives the flags, ``{"loss.name": "--loss"}``), else ``config.SECTION.KEY``."""

    def __init__(self, c: ml_collections.ConfigDict, names: Mapping[str, str] | None) -> None:
        self.c, self.names = c, dict(names or {})

    def __call__(self, key: str) -> str:
        return self.names.get(key, f"config.{key}")

    def said(self, key: str, value: Any = None) -> str:
        """``--loss focal`` or ``config.loss.name='focal'``: the key with its (or a) value."""
        value = config_lib.lookup(self.c, key) if value is None else value
        name = self(key)
        return f"{name} {value}" if name.startswith("--") else f"{name}={value!r}"

    def wanted(self, key: str, placeholder: str) -> str:
        """``--target COLUMN`` or ``config.data.target``: a key to set."""
        name = self(key)
        return f"{name} {placeholder}" if name.startswith("--") else name


def check_loss_section(
    c: ml_collections.ConfigDict,
    defaults: ml_collections.ConfigDict,
    name: KeyNames | None = None,
) -> Any:
    """Check a config's loss against its data's classes, as runs of either kind read it: a
    binary loss of :data:`iml.grids.CLASS_WEIGHTS` over its class weights, or a multiclass one
    of :data:`iml.grids.WEIGHT_GRIDS` over ``loss.weights`` on every class
    (``data.classes = 'all'``), with parameters the loss takes (:func:`check_loss_params`).

    Args:
      c: the config.
      defaults: the command's default config (a multiclass loss refuses ``loss.betas`` set away
        from its default).
      name: how messages name a key (default ``config.SECTION.KEY``).

    Returns:
      The class weights (:func:`iml.grids.config_betas`), or a multiclass grid's parsed entries
      (:func:`iml.grids.parse_weight_grid`).

    Raises:
      ValueError: naming the first bad key.
    """

    name = KeyNames(c, None) if name is None else name
    said = name.said
    loss, multiclass = c.loss.name, sorted(WEIGHT_GRIDS)
    if loss not in CLASS_WEIGHTS and loss not in WEIGHT_GRIDS:
        raise ValueError(
            f"{name('loss.name')} must be one of {sorted(CLASS_WEIGHTS)} (binary losses weighted "
            f"by one class weight) or {multiclass} (multiclass losses over the grid "
            f"{name('loss.weights')}), got {loss!r}"
        )
    if c.data.classes not in ("binary", "all"):
        raise ValueError(
            f"{name('data.classes')} must be 'binary' or 'all', got {c.data.classes!r}"
        )
    if loss in WEIGHT_GRIDS:
        if not c.loss.weights:
            raise ValueError(
                f"{said('loss.name')} needs {name('loss.weights')} (e.g. 'ones;B[8,8]=10')"
            )
        if tuple(c.loss.betas) != tuple(defaults.loss.betas):
            raise ValueError(
                f"{name('loss.betas')} does not apply to {said('loss.name')}; its grid is "
                f"{name('loss.weights')}"
            )
        grid = parse_weight_grid(c.loss.weights, loss, name=name("loss.weights"))
        if c.data.classes != "all":
            raise ValueError(
                f"{said('loss.name')} is multiclass: set {said('data.classes', 'all')}"
            )
    else:
        if c.loss.weights:
            raise ValueError(
                f"{name('loss.weights')} applies to the multiclass losses {multiclass}, not "
                f"{said('loss.name')}; its grid is {name('loss.betas')}"
            )
        if c.data.classes != "binary":
            raise ValueError(
                f"{said('data.classes')} needs a multiclass {name('loss.name')} "
                f"({', '.join(multiclass)}), not {said('loss.name')}"
            )
        grid = config_betas(c.loss, name)
    check_loss_params(c.loss)
    return grid


def check_eval_settings(
    settings: Mapping[str, Any],
    name: Callable[[str], str] = lambda key: f"config.eval.{key}",
    min_bootstrap: int = 1,
) -> None:
    """Check the report's settings (``config.eval``) of either kind of run, each key present.

    Args:
      settings: ``n_bins``, ``n_bootstrap``, ``report_seed``, ``average`` and, where given,
        ``figures``.
      name: how the messages name a key (``"n_bins"`` -> ``"config.eval.n_bins"``).
      min_bootstrap: the fewest replicates the report takes: 1 for a run on images (its
        loss-calibration tests need one), 0 for a sweep (no intervals).

    Raises:
      ValueError: naming the first bad key: ``n_bins`` below 1, ``n_bootstrap`` below
        ``min_bootstrap``, a negative ``report_seed``, an unknown ``average`` or figure format.
    """
    V.check_count(name("n_bins"), settings["n_bins"], 1)
    V.check_count(name("n_bootstrap"), settings["n_bootstrap"], min_bootstrap)
    V.check_count(name("report_seed"), settings["report_seed"], 0)
    V.check_choice(name("average"), settings["average"], ENSEMBLE_AVERAGES)
    V.check_figure_formats(name("figures"), settings.get("figures", ()))
