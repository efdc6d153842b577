"""The default experiment: digits (8 vs rest) at 4 px, small DenseNet, beta 0.5/0.9/0.99.

Run it with::

    iml reproduce --config experiments/configs/default.py --out runs/reproduce

(the same as plain ``iml reproduce``). 10 folds rotated 7/2/1, one seed: 30 members, trained
one rotation (3 members, one per beta) per batch, 3 epochs each; sized to finish within 10
minutes on a 2-core CPU.
"""

import ml_collections

from iml.pipeline.defaults import default_config


def get_config() -> ml_collections.ConfigDict:
    """The config of ``iml reproduce`` (see :func:`iml.pipeline.defaults.default_config`)."""
    return default_config()
