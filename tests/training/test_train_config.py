"""The trainer's settings (``iml.training.train_config``): bad settings, and meshes that do not fit
them, refused."""

from __future__ import annotations

import jax
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
