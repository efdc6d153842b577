"""ChestX-ray14 pneumonia, the paper's setup: DenseNet-121 at 224 px, beta 0.5 / 0.9 / 0.99.

Run it with (an accelerator is strongly advised)::

    iml reproduce --config experiments/configs/chestxray14.py \\
        --manual-dir /path/to/chestxray14 --out runs/chestxray14

``--manual-dir`` is the NIH release in its official layout (``Data_Entry_2017_v2020.csv`` and the
image folders). As in the paper (Section 5 and appendix "Technical Details"): folds grouped by
patient, 10 folds rotated 70/20/10, Adam at 1e-4 with batches of 16, learning rate divided by 10
on a validation plateau, early stopping, random horizontal flips, ImageNet normalisation.
Difference from the paper: the DenseNet-121 starts from random weights (the paper starts from
ImageNet weights).
"""

import ml_collections

from iml.pipeline.runner import default_config


def get_config() -> ml_collections.ConfigDict:
    """The paper's ChestX-ray14 experiment."""
    c = default_config()
    c.dataset = "chestxray14"
    c.image_size = 224
    c.model = "densenet121"
    c.epochs = 100
    c.patience = 5
    c.plateau_patience = 1
    c.learning_rate = 1e-4
    c.batch_size = 16
    c.flip = True
    c.members_per_batch = 3
    return c
