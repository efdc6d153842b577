"""The experiment's one config schema, and its two named defaults.

:func:`experiment_config` is the schema: every key of an experiment (``data``, ``model``,
``loss``, ``train``, ``eval``; and ``distributed``, the processes that run it) with its default
and its meaning (the comment of its line, which ``--help`` prints). An experiment trains its
models either on images, fed to the devices in batches from the host (``iml reproduce``:
:mod:`iml.pipeline.runner`), or on rows of a table held whole on the device (``iml sweep``:
:mod:`iml.pipeline.sweep`); a few keys are read by one of the two only (:data:`READ_BY`), and
setting one of them for the other is an error (:func:`check_read_keys`) rather than a setting
silently ignored. :func:`default_config` (the image ensemble of ``iml reproduce``) and
:func:`sweep_config` (the small-model sweep of ``iml sweep``) are the schema with their own
defaults; ``experiments/configs/`` ships them as files to copy and edit. Kept apart from the
runners, so that reading it loads no training code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ml_collections
from ml_collections import config_dict

from iml import _validation as V
from iml import config as config_lib
from iml.pipeline.store import ENSEMBLE_AVERAGES

__all__ = [
    "INPUTS",
    "READ_BY",
    "check_eval_settings",
    "check_read_keys",
    "default_config",
    "experiment_config",
    "sweep_config",
]

#: The ridge coefficients that ``train.l2 = "auto"`` chooses from (:data:`iml.training.L2_GRID`).
_L2_GRID = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def experiment_config() -> ml_collections.ConfigDict:
    """The schema of an experiment: every key, at the defaults of ``iml reproduce`` where the two
    commands differ. A comment ending in ``(images)`` or ``(rows)`` marks a key that only runs on
    images or on rows read (:data:`READ_BY`).

    Returns:
      The config, locked: its sections take no new keys, so a misspelled one is an error.
    """
    c = ml_collections.ConfigDict()

    c.data = ml_collections.ConfigDict()
    # a dataset of iml.data.DATASETS: images (digits, pneumoniamnist, chestxray14; a sweep reads
    # their pixels as features) or tables (adult, letter; a sweep only); '' with data.csv
    c.data.name = "digits"
    c.data.csv = ""  # a delimited text file with a header row, read as a table (rows)
    c.data.target = ""  # the target column of the csv file (rows)
    # csv: the positive target value ('' = the target is 0/1 or true/false); letter: the positive
    # letter(s) ('' = O, a ~4% class); digits: the positive digit ('' = 8) (rows)
    c.data.positive = ""
    c.data.delimiter = ""  # the csv file's field separator, one character or 'tab' (rows)
    # prepared image data ('' = iml.data.default_data_dir()); in a sweep of adult or letter, the
    # folder of the UCI files
    c.data.data_dir = ""
    c.data.manual_dir = ""  # an image dataset's raw files, to prepare it from (images)
    c.data.max_examples = 0  # 0 = all; else a random subset of this many (images)
    # 'binary': the dataset's binary labels (digits: 8 against the rest); 'all': every class of a
    # dataset that has classes (digits: 10), for the multiclass losses
    c.data.classes = "binary"
    c.data.image_size = 4  # side of the images in px; 0 = the dataset's own (digits: 8)
    c.data.n_folds = 10  # cross-validation folds, rotated train/validation/test (7-2-1 of 10)
    c.data.n_val_folds = 2  # validation folds per rotation, 2 in a sweep (images)
    c.data.n_test_folds = 1  # test folds per rotation, 1 in a sweep (images)
    c.data.rotations = ()  # () = one full cycle, as a sweep runs (images)
    c.data.fold_seed = 0  # seed of the fold assignment

    c.model = ml_collections.ConfigDict()
    # a model of iml.models.MODELS: a DenseNet (images), or logistic regression and the MLP, which
    # take rows and images as rows of pixels
    c.model.name = "densenet_small"
    c.model.hidden = 32  # the MLP's hidden units
    # '' = random initial weights; else a torchvision DenseNet .pth file (the paper starts from
    # torchvision's ImageNet densenet121), adapted to the images' channels, with a fresh head
    # (images)
    c.model.weights = ""
    # '' = the backend's default (iml.models.DEFAULT_CONV_IMPL: 'mixed' on a CPU, where it
    # trains DenseNets faster than 'xla', docs/results/cpu_ensemble) (images)
    c.model.conv_impl = ""

    c.loss = ml_collections.ConfigDict()
    # the loss: by its class weight (iml.grids.CLASS_WEIGHTS: 'log', the beta-weighted
    # cross-entropy, eq. 7; 'squared', the beta-weighted Brier score; 'focal', its weight alpha),
    # or a multiclass loss over the grid loss.weights ('matrix', 'class_weighted_softmax')
    c.loss.name = "log"
    # one ensemble per class weight, space- or comma-separated; () = the logit grid of n_betas
    c.loss.betas = (0.5, 0.9, 0.99)
    c.loss.n_betas = 64  # the size of the grid of betas, evenly spaced in logit (iml.beta_grid)
    c.loss.beta_min = 0.01  # the grid's lowest beta
    c.loss.beta_max = 0.99  # the grid's highest beta
    c.loss.gamma = 2.0  # the focusing parameter of 'focal'; the other losses do not read it
    # the grid of a multiclass loss, one ensemble per ';'-separated entry, e.g. 'ones;B[8,8]=10'
    # (iml.grids.parse_weight_grid); the multiclass losses take it instead of the betas
    c.loss.weights = ""

    c.train = ml_collections.ConfigDict()
    # member seeds of every loss (--seeds N: 0..N-1); () = one where the fit is exact (a convex
    # model's optimum does not depend on a seed), 8 where Adam trains
    c.train.seeds = (0,)
    c.train.epochs = 3  # Adam's most epochs per member
    c.train.batch_size = 16  # Adam's examples per member and step
    # validation and test examples per member and step; on a GPU all members of a batch share one
    # program, so lower it with members_per_batch where that program is too large
    c.train.eval_batch_size = 64
    c.train.learning_rate = 1e-3  # Adam's learning rate
    c.train.patience = 5  # epochs without validation gain before a member stops
    c.train.plateau_patience = 1  # epochs without gain before the learning rate is cut
    c.train.min_learning_rate = 0.0  # the floor of the plateau decay (0: none, the paper's)
    # the ridge: a number, or 'auto': chosen per loss and rotation on the validation folds from
    # l2_grid, by the loss's own validation loss (rows)
    c.train.l2 = config_dict.FieldReference("auto", field_type=object)
    c.train.l2_grid = _L2_GRID  # the penalties 'auto' chooses from (rows)
    # what the ridge is measured against (iml.training.L2_SCALES): 'paper', the loss itself (a fixed
    # cost in the paper's units at every class weight, as costly learning assumes), or
    # 'per_weight', the member's total sample weight (the same trade-off at every weight) (rows)
    c.train.l2_scale = "paper"
    # whether the features are standardised on each rotation's training folds (rows)
    c.train.standardize = True
    # exact: full-batch Newton steps to the optimum (logistic regression under a loss of
    # iml.pipeline.sweep_config.EXACT_LOSSES; its seeds coincide); adam: early-stopped minibatch
    # Adam; auto: exact where it can (rows)
    c.train.solver = "auto"
    # losses per chunk, the unit of memory and of resumption; 0 = all where the fit is exact,
    # 16 where Adam trains (rows)
    c.train.betas_per_chunk = 0
    c.train.members_per_batch = 0  # 0 = len(betas) * len(seeds): one rotation per batch (images)
    # device bytes the members trained in one program may take where members_per_batch is 0
    # (0 = 0.9 of the device's free memory; a CPU reports none: no limit); a batch that needs
    # more by XLA's memory analysis is trained in parts that fit and stored as one (images)
    c.train.memory_budget_bytes = 0
    c.train.flip = False  # random horizontal flips of the training images (images)
    c.train.normalize = "imagenet"  # 'imagenet' (torchvision's statistics) or 'none' (images)
    # store each member batch as it finishes, so that a run resumes mid-batch (images)
    c.train.checkpoint = True

    c.eval = ml_collections.ConfigDict()
    c.eval.n_bins = 10  # bins of the calibration errors (the paper's deciles)
    c.eval.n_bootstrap = 200  # bootstrap replicates of the intervals and tests
    c.eval.report_seed = 0  # seed of those replicates
    # how each loss's ensemble pools its members (iml.pipeline.ENSEMBLE_AVERAGES): 'score', the
    # mean raw score (the paper's), or 'logit', the score of the members' mean logit
    c.eval.average = "score"
    c.eval.figures = ("png", "pdf")  # formats of the report's figures (png, pdf, svg); () = none

    c.distributed = ml_collections.ConfigDict()
    # whether to run as one of several processes on JAX's multi-controller runtime
    # (jax.distributed): every process runs the same command, trains its share of the member
    # batches on its own devices and stores them in the one shared output folder; process 0
    # writes the results
    c.distributed.enabled = False
    # host:port of process 0's coordinator; '' = detected (Slurm, Open MPI, Cloud TPU)
    c.distributed.coordinator_address = ""
    c.distributed.num_processes = 0  # processes in all; 0 = detected
    c.distributed.process_id = -1  # this process's index, 0 .. num_processes - 1; -1 = detected
    # seconds to wait for every process to connect, and to reach the checks before any work
    c.distributed.initialization_timeout = 300

    c.lock()
    return c


#: What an experiment's models take: images fed from the host (``iml reproduce``) or rows of a
#: table held on the device (``iml sweep``).
INPUTS = ("images", "rows")

#: The keys that runs of one kind of input only read (the comments ending in ``(images)`` or
#: ``(rows)`` of :func:`experiment_config`): each other key both read.
READ_BY: Mapping[str, str] = {
    **dict.fromkeys(("data.csv", "data.target", "data.positive", "data.delimiter"), "rows"),
    **dict.fromkeys(("train.l2", "train.l2_grid", "train.l2_scale", "train.standardize"), "rows"),
    **dict.fromkeys(("train.solver", "train.betas_per_chunk"), "rows"),
    **dict.fromkeys(("data.manual_dir", "data.max_examples", "data.n_val_folds"), "images"),
    **dict.fromkeys(("data.n_test_folds", "data.rotations"), "images"),
    **dict.fromkeys(("model.weights", "model.conv_impl", "train.members_per_batch"), "images"),
    **dict.fromkeys(("train.memory_budget_bytes",), "images"),
    **dict.fromkeys(("train.flip", "train.normalize", "train.checkpoint"), "images"),
}

_COMMANDS = {"images": "iml reproduce", "rows": "iml sweep"}


def check_read_keys(
    config: Mapping[str, Any] | ml_collections.ConfigDict,
    inputs: str,
    name: Callable[[str], str] = lambda key: f"config.{key}",
) -> None:
    """Refuse a key that runs on ``inputs`` do not read, set away from the schema's default.

    Raises:
      ValueError: naming the first such key (as ``name`` gives it) and the runs that read it.
    """
    schema = experiment_config()
    for key, reader in READ_BY.items():
        if reader != inputs and config_lib.lookup(config, key) != config_lib.lookup(schema, key):
            raise ValueError(
                f"{name(key)} is read by runs on {reader} ({_COMMANDS[reader]}) only, not by "
                f"this run on {inputs} ({_COMMANDS[inputs]}); leave it at its default "
                f"{config_lib.lookup(schema, key)!r}"
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
    curves fan out by beta as ``c^beta`` predicts and the loss-corrected ones meet the diagonal
    (``docs/results/reproduce_digits``).
    """
    return experiment_config()


def sweep_config() -> ml_collections.ConfigDict:
    """The default sweep of ``iml sweep``: 64 betas of the beta-weighted log loss of logistic
    regression, fitted exactly (one seed: the optimum depends on none) with the ridge chosen per
    beta and rotation on the validation folds, on features standardised on the training folds.

    The data has no default: ``config.data.name`` names a dataset (``"adult"`` and ``"letter"``
    read the UCI files in ``config.data.data_dir``; ``"digits"`` needs none) or
    ``config.data.csv`` a delimited text file. ``iml sweep`` reads this config (or ``--config
    FILE``), sets any key as ``--config.SECTION.KEY=VALUE`` and has a named option for many keys
    (``--lr`` sets ``config.train.learning_rate``; :data:`iml.commands.config.SWEEP_SHORTCUTS`).
    """
    c = experiment_config()
    c.data.name = ""  # a dataset of SWEEP_DATASETS, or 'csv' ('' too where data.csv is set)
    c.data.image_size = 0  # an image dataset's pixels as features at its own size
    c.model.name = "logistic"  # or 'mlp', or any model of iml.models.MODELS that takes rows
    c.loss.betas = ()  # the logit grid of n_betas betas
    c.train.seeds = ()  # one where the fit is exact, 8 where Adam trains
    c.train.epochs = 100  # Adam's most epochs per member
    c.train.batch_size = 512  # Adam's rows per step, shared by the members of a seed
    c.train.eval_batch_size = 1024  # validation rows per step
    c.train.learning_rate = 0.01  # Adam's learning rate
    c.train.plateau_patience = 2  # epochs without gain before Adam's learning rate is cut
    return c


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
