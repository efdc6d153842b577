"""ChestX-ray14 pneumonia, the paper's setup: DenseNet-121 at 224 px, beta 0.5 / 0.9 / 0.99.

Run it with (an accelerator is strongly advised)::

    iml reproduce --config experiments/configs/chestxray14.py \\
        --config.data.manual_dir=/path/to/chestxray14 \\
        --config.model.weights=/path/to/densenet121-a639ec97.pth \\
        --out runs/chestxray14

``--config.data.manual_dir`` is the NIH Clinical Center's ChestX-ray14 release
(https://nihcc.app.box.com/v/ChestXray-NIHCC) in its official layout
(``Data_Entry_2017_v2020.csv``, ``train_val_list.txt``, ``test_list.txt`` and ``images/``; see
``iml.data.builders.chestxray14``). ``--config.model.weights`` is torchvision's ImageNet
densenet121 file, which nothing here downloads
(``torchvision.models.DenseNet121_Weights.IMAGENET1K_V1`` names it, with its address). Its first
convolution is summed over the RGB channels for the grayscale X-rays and its classifier replaced by
a fresh one-logit head. As in the paper (Section 5 and appendix "Technical Details"): ImageNet
initialisation, folds grouped by patient, 10 folds rotated 70/20/10, Adam at 1e-4 with batches of
16, learning rate divided by 10 on a validation plateau, early stopping, random horizontal flips,
ImageNet normalisation. Without ``--config.model.weights`` the DenseNet-121 starts from random
weights. On a CPU the trainer's default convolutions are ``mixed``, measured against ``xla`` in
``docs/results/cpu_train_step``; ``--config.model.conv_impl=xla`` chooses XLA's own. Any other
key is set the same way, e.g. ``--config.train.max_epochs=1`` for a smoke run.
"""

import ml_collections

from iml.pipeline.defaults import default_config


def get_config() -> ml_collections.ConfigDict:
    """The paper's ChestX-ray14 experiment."""
    c = default_config()
    c.data.name = "chestxray14"
    c.data.image_size = 224
    c.model.name = "densenet121"
    c.train.max_epochs = 100
    c.train.patience = 5
    c.train.plateau_patience = 1
    c.train.learning_rate = 1e-4
    c.train.batch_size = 16
    c.train.flip = True
    c.plan.members_per_batch = 3
    return c
