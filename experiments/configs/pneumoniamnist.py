"""PneumoniaMNIST (28x28 chest X-rays, pneumonia vs normal): small DenseNet, beta 0.5/0.9/0.99.

Run it with::

    iml reproduce --config experiments/configs/pneumoniamnist.py \\
        --config.data.manual_dir=DIR --out runs/pneumoniamnist

``DIR`` holds MedMNIST's ``pneumoniamnist.npz`` (https://zenodo.org/records/10519652). From the
two partial public copies that ``iml.data.assemble_pneumoniamnist`` names, it is made by
``np.savez(DIR / "pneumoniamnist.npz", **iml.data.assemble_pneumoniamnist(balanced_npz,
kaggle_npz))``. All 5,856 images are pooled and split into 10 folds rotated 7/2/1 (30 members,
one seed); members train for up to 6 epochs with early stopping on the validation loss (patience
2). docs/results/pneumoniamnist holds this run, with the time it took on a 2-core CPU. The paper
trains longer: trained to early stopping (``--config.train.max_epochs=40``), with a patience of
6, or with 4 seeds, the experiment is in docs/results/pneumoniamnist_early_stopping,
pneumoniamnist_patience and pneumoniamnist_seeds. At beta 0.99 the corrected ECE is 3.3 to 3.6
times that at beta 0.5 under the paper's schedule, with or without early stopping, and 2.3
[0.9, 4.3] times with a floor on the learning rate (``--config.train.min_lr=1e-4``:
docs/results/pneumoniamnist_schedules, pneumoniamnist_lr_floor and
pneumoniamnist_lr_floor_other_betas). The config keeps the paper's schedule.
"""

import ml_collections

from iml.pipeline.defaults import default_config


def get_config() -> ml_collections.ConfigDict:
    """PneumoniaMNIST at its native 28 px."""
    c = default_config()
    c.data.name = "pneumoniamnist"
    c.data.image_size = 28
    c.model.name = "densenet_small"
    c.train.max_epochs = 6
    c.train.patience = 2
    c.train.flip = True
    return c
