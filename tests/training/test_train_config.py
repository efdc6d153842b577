"""The trainer's settings (``iml.training.train_config``): bad settings, and meshes that do not fit
them, refused."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _training_helpers import (
    TinyCNN,
    tiny_config,
    tiny_images,
    tiny_members,
)

from iml.training import (
    DataSource,
    TrainConfig,
    make_mesh,
    per_device_members,
    train_ensemble,
)


def test_bad_config_and_mesh_raise():
    with pytest.raises(ValueError, match="batch_size"):
        TrainConfig(batch_size=0)
    with pytest.raises(ValueError, match=r"TrainConfig\.batch_size must be an integer"):
        TrainConfig(batch_size=16.5)
    with pytest.raises(ValueError, match=r"TrainConfig\.l2 must be a finite number >= 0"):
        TrainConfig(l2=-1.0)
    with pytest.raises(ValueError, match=r"TrainConfig\.solver must be one of"):
        TrainConfig(solver="lbfgs")
    with pytest.raises(ValueError, match="solver 'exact' fits a table's logistic regression"):
        images, labels = tiny_images()
        train_ensemble(
            TinyCNN(), tiny_members(k=1), DataSource.from_arrays(images, labels),
            tiny_config(solver="exact"), progress=False,
        )  # fmt: skip
    with pytest.raises(ValueError, match="member_batching"):
        TrainConfig(member_batching="pmap")
    with pytest.raises(ValueError, match="normalize"):
        TrainConfig(normalize="cifar")
    split = make_mesh(2, 8, devices=jax.devices()[:4])  # members' batches split over devices
    with pytest.raises(ValueError, match=r"whole members on each device \(data axis 1\)"):
        per_device_members(lambda x: x, split)
    images, labels = tiny_images()
    with pytest.raises(ValueError, match="ensemble axis"):
        train_ensemble(
            TinyCNN(),
            tiny_members(k=3),
            DataSource.from_arrays(images, labels),
            tiny_config(),
            mesh=make_mesh(4, 8, ensemble_size=4),
            progress=False,
        )


def test_image_settings_left_unset_take_the_inputs_own():
    from iml.training import TrainConfig

    unset = TrainConfig(max_epochs=3)
    assert unset.flip is None and unset.normalize is None
    images, rows = unset.for_inputs(images=True), unset.for_inputs(images=False)
    assert (images.flip, images.normalize) == (True, "imagenet")
    assert (rows.flip, rows.normalize) == (False, "none")
    assert images.max_epochs == rows.max_epochs == 3
    chosen = TrainConfig(flip=False, normalize="none").for_inputs(images=True)
    assert (chosen.flip, chosen.normalize) == (False, "none")  # set values stay
    with pytest.raises(ValueError, match=r"TrainConfig\.flip must be True, False or None"):
        TrainConfig(flip="yes")
    with pytest.raises(ValueError, match=r"TrainConfig\.normalize"):
        TrainConfig(normalize="unit")


@pytest.mark.slow
def test_a_hand_made_config_fits_a_table_as_the_tabular_defaults_do():
    import dataclasses

    from iml.pipeline.sweep import run_sweep
    from iml.training import TABULAR_DEFAULTS, TrainConfig

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3)).astype(np.float32)
    y = (rng.random(300) < 1 / (1 + np.exp(-x[:, 0]))).astype(np.int32)
    fields = {f.name: getattr(TABULAR_DEFAULTS, f.name) for f in dataclasses.fields(TrainConfig)}
    hand_made = TrainConfig(**{**fields, "flip": None, "normalize": None})
    ours = run_sweep(x, y, None, [0.5, 0.9], seeds=1, train=hand_made, progress=False)
    theirs = run_sweep(x, y, None, [0.5, 0.9], seeds=1, train=TABULAR_DEFAULTS, progress=False)
    np.testing.assert_array_equal(ours.scores, theirs.scores)
