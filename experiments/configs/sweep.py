"""`iml sweep`'s defaults on the built-in digits (8 against the rest, 64 features): 64 betas of
the beta-weighted log loss, evenly spaced in logit from 0.01 to 0.99, of logistic regression
fitted exactly, its ridge chosen per beta and rotation on the validation folds, 10 folds rotated
7/2/1.

Run it with::

    iml sweep --config experiments/configs/sweep.py --out runs/sweep

(the same as ``iml sweep --dataset digits --out runs/sweep``). Copy this file and edit it for
another sweep: every key is in :func:`iml.pipeline.defaults.experiment_config`, with its meaning.
"""

import ml_collections

from iml.pipeline.defaults import sweep_config


def get_config() -> ml_collections.ConfigDict:
    """The config of this sweep (see :func:`iml.pipeline.defaults.sweep_config`)."""
    c = sweep_config()
    c.data.name = "digits"
    return c
