"""Digits with all 10 classes: DenseNets trained under the class-weighted softmax cross-entropy.

Two ensembles, one per entry of the grid ``config.loss.weights``: unweighted (``ones``) and with
the digit 8 weighted 10x (``w[8]=10``). Each is corrected by the inverse of its own optimal
scoring rule (Proposition 4) and scored by top-label and class-wise ECE, Brier score, log loss
and accuracy, with one reliability figure per loss and a panel per class::

    iml reproduce --config experiments/configs/digits_multiclass.py --out runs/digits_multiclass

The digits are shrunk to 4 px, as in the default binary run, so that the task stays uncertain
(``--config.data.image_size=8`` keeps their native size, where nearly every score is at an extreme);
members train to early stopping (at most 20 epochs). Results:
``docs/results/reproduce_digits_multiclass``.
``--config.loss.name=matrix --config.loss.weights='ones;B[8,8]=10'`` trains the B-weighted log
loss instead (one sigmoid per class).
"""

import ml_collections

from iml.pipeline.defaults import default_config


def get_config() -> ml_collections.ConfigDict:
    """Digits, 10 classes, class-weighted softmax cross-entropy over 'ones;w[8]=10'."""
    c = default_config()
    c.data.classes = "all"
    c.loss.name = "class_weighted_softmax"
    c.loss.weights = "ones;w[8]=10"
    c.train.max_epochs = 20
    c.train.patience = 3
    return c
