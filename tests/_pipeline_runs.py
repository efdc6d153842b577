"""Configs of runs on images for the pipeline's tests: the default with keys set by dotted name,
and a small multiclass run; and a member batch stored from given scores."""

import numpy as np

from iml.pipeline.defaults import default_config


def run_config(**values):
    """The default config with ``values`` set by dotted key (``"train.max_epochs": 1``)."""
    config = default_config()
    for key, value in values.items():
        *sections, name = key.split(".")
        section = config
        for part in sections:
            section = section[part]
        section[name] = value
    return config


#: A multiclass run of the tiny DenseNet on 400 digits at 8 px, every member in one trainer call.
MULTICLASS = {
    "data.classes": "all",
    "data.image_size": 8,
    "data.max_examples": 400,
    "data.n_folds": 5,
    "data.n_val_folds": 1,
    "model.name": "densenet_tiny",
    "loss.name": "class_weighted_softmax",
    "loss.weights": "ones;w[8]=10",
    "train.max_epochs": 1,
    "train.members_per_batch": 10,  # every member in one call of the trainer
    "train.checkpoint": False,
    "eval.n_bins": 5,
}


def save_batch(store, key, members):
    """A stored member batch of ``(beta, test_idx, test_scores)`` members, in the store's layout
    (:func:`iml.pipeline.store.member_entry`'s arrays that aggregation reads)."""
    tests = [np.asarray(m[1]) for m in members]
    store.save_arrays(
        key,
        beta=np.array([m[0] for m in members]),
        test_idx=np.concatenate(tests),
        test_scores=np.concatenate([np.asarray(m[2], np.float32) for m in members]),
        test_offsets=np.cumsum([0] + [len(t) for t in tests]),
    )
