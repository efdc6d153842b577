"""The default config of ``iml reproduce``: the experiment's schema, with each key's default and
meaning (the comment of its line, which ``iml reproduce --help`` prints). Kept apart from the
runner, so that reading it loads no training code."""

from __future__ import annotations

import ml_collections

__all__ = ["default_config"]


def default_config() -> ml_collections.ConfigDict:
    """The default experiment: digits (8 vs rest) at 4 px, a small DenseNet, beta 0.5/0.9/0.99.

    Chosen so that ``iml reproduce`` finishes within 10 minutes on a 2-core CPU: 10 folds rotated
    7/2/1 (30 members; the 3 of a rotation trained together), 3 epochs at learning rate 1e-3.

    The digits are shrunk from their native 8 px to 4 px so that the task is uncertain: at 8 px
    the eights are almost separable (AUROC 0.995), nearly every score lies at 0 or 1 and most
    deciles hold no eight, so Figures 3 and 4 have two or three points per curve. At 4 px (AUROC
    about 0.98, 9.7% positive) the upper deciles hold rates from 0.6% to 84%, along which the raw
    curves fan out by beta as ``c^beta`` predicts and the loss-corrected ones meet the diagonal
    (``docs/results/reproduce_digits``).

    Returns:
      The config, locked: its sections ``data``, ``model``, ``loss``, ``train`` and ``eval`` take
      no new keys, so a misspelled one is an error.
    """
    c = ml_collections.ConfigDict()

    c.data = ml_collections.ConfigDict()
    c.data.name = "digits"  # an image dataset of iml.data: digits, pneumoniamnist, chestxray14
    c.data.data_dir = ""  # '' = iml.data.default_data_dir()
    c.data.manual_dir = ""  # the dataset's raw files, where it has to be prepared from them
    c.data.max_examples = 0  # 0 = all; else a random subset of this many (quick runs, tests)
    # 'binary': the dataset's binary labels (digits: 8 against the rest); 'all': every class of a
    # dataset that has classes (digits: 10), for the multiclass losses
    c.data.classes = "binary"
    c.data.image_size = 4  # digits shrunk from their native 8 px: an uncertain task (see above)
    c.data.n_folds = 10  # cross-validation folds
    c.data.n_val_folds = 2  # validation folds per rotation (early stopping, plateau decay)
    c.data.n_test_folds = 1  # test folds per rotation
    c.data.rotations = ()  # () = one full cycle
    c.data.fold_seed = 0  # seed of the fold assignment
    c.model = ml_collections.ConfigDict()
    c.model.name = "densenet_small"  # a model of iml.models.MODELS that takes images
    # '' = random initial weights; else a torchvision DenseNet .pth file (the paper starts from
    # torchvision's ImageNet densenet121), adapted to the images' channels, with a fresh head
    c.model.weights = ""
    # '' = the backend's default (iml.models.DEFAULT_CONV_IMPL: 'mixed' on a CPU, where it
    # trains a DenseNet-121 about 1.5-2x faster than 'xla', docs/results/cpu_train_step)
    c.model.conv_impl = ""

    c.loss = ml_collections.ConfigDict()
    # the loss, by its class weight (iml.grids.CLASS_WEIGHTS): 'log' (the beta-weighted
    # cross-entropy, eq. 7), 'squared' (the beta-weighted Brier score) or 'focal' (its weight alpha)
    c.loss.name = "log"
    c.loss.betas = (0.5, 0.9, 0.99)  # one ensemble per class weight (alpha for 'focal')
    c.loss.gamma = 2.0  # the focusing parameter of 'focal'; the other losses do not read it
    # the grid of a multiclass loss ('matrix': the B-weighted log loss, 'class_weighted_softmax'),
    # one ensemble per ';'-separated entry, e.g. 'ones;B[8,8]=10' (iml sweep's syntax); the
    # multiclass losses take it instead of the betas
    c.loss.weights = ""

    c.train = ml_collections.ConfigDict()
    c.train.seeds = (0,)  # member seeds of every loss (--seeds N: 0..N-1)
    c.train.members_per_batch = 0  # 0 = len(betas) * len(seeds): one rotation per batch
    c.train.epochs = 3  # most epochs per member
    c.train.batch_size = 16  # images per member and step
    # validation and test images per member and step; on a GPU all members of a batch share one
    # program, so lower it with members_per_batch where that program is too large
    c.train.eval_batch_size = 64
    c.train.learning_rate = 1e-3  # Adam's
    c.train.patience = 5  # epochs without validation gain before a member stops
    c.train.plateau_patience = 1  # epochs without gain before the learning rate is cut
    c.train.min_learning_rate = 0.0  # the floor of the plateau decay (0: none, the paper's)
    c.train.flip = False  # random horizontal flips of the training images
    c.train.normalize = "imagenet"  # 'imagenet' (torchvision's statistics) or 'none'
    c.train.checkpoint = True  # store each member batch as it finishes, so that a run resumes
    c.eval = ml_collections.ConfigDict()
    c.eval.n_bins = 10  # bins of the calibration errors (the paper's deciles)
    c.eval.n_bootstrap = 200  # bootstrap replicates of the report's intervals and tests
    c.eval.report_seed = 0  # seed of those replicates
    # how each loss's ensemble pools its members (iml.pipeline.ENSEMBLE_AVERAGES): 'score', the
    # mean raw score (the paper's), or 'logit', the score of the members' mean logit
    c.eval.average = "score"

    c.lock()
    return c
