"""A sweep with `iml sweep`'s defaults on the built-in digits, all ten classes, under three
class-weighted softmax cross-entropies (weights 1; w[8] = 10; w[8] = 100): multinomial logistic
regression fitted exactly, its ridge chosen per loss and rotation on the validation folds, 10
folds rotated 7/2/1.

Run it with::

    iml sweep --config experiments/configs/sweep_digits_softmax.py --out runs/digits_softmax

(the same as ``iml sweep --dataset digits --config.data.classes=all --loss
class_weighted_softmax --config.loss.weights='ones;w[8]=10;w[8]=100'``). Its stored run is
``docs/results/sweep_defaults/digits_softmax``; copy this file and edit it for another sweep.
"""

import ml_collections

from iml.pipeline.defaults import sweep_config


def get_config() -> ml_collections.ConfigDict:
    """The config of this sweep (see :func:`iml.pipeline.defaults.sweep_config`)."""
    c = sweep_config()
    c.data.name = "digits"
    c.data.classes = "all"
    c.loss.name = "class_weighted_softmax"
    c.loss.weights = "ones;w[8]=10;w[8]=100"
    return c
