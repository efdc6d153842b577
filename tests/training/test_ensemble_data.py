"""The data of an ensemble's members (``iml.training.ensemble_data``): the order of each member's
epochs, and bad input refused before training."""

from __future__ import annotations

import dataclasses

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
    MemberSpec,
    epoch_order,
    train_ensemble,
)


@pytest.fixture(scope="module")
def tiny_data() -> DataSource:
    images, labels = tiny_images()
    return DataSource.from_arrays(images, labels)


def test_epoch_order_is_a_function_of_seed_member_and_epoch():
    train = np.arange(5, 45)
    a, fa = epoch_order(3, 1, 2, train, 8, True)
    b, fb = epoch_order(3, 1, 2, train, 8, True)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fa, fb)
    assert a.shape == (5, 8) and len(np.unique(a)) == 40 and set(a.ravel()) <= set(train)
    for other in [(4, 1, 2), (3, 0, 2), (3, 1, 3)]:
        assert not np.array_equal(epoch_order(*other, train, 8, True)[0], a)
    many_flips = epoch_order(3, 1, 2, np.arange(4000), 8, True)[1]
    assert abs(many_flips.mean() - 0.5) < 0.05
    assert not epoch_order(3, 1, 2, train, 8, False)[1].any()


def test_a_member_s_position_numbers_its_data_order_in_place_of_its_place_among_the_members():
    from iml.training.ensemble_data import epoch_plan

    members = tiny_members(k=3)
    whole = epoch_plan(members, 1, tiny_config(flip=True))
    alone = epoch_plan([dataclasses.replace(members[2], position=2)], 1, tiny_config(flip=True))
    for a, b in zip(whole, alone, strict=True):
        np.testing.assert_array_equal(a[:, 2], b[:, 0])
    first = epoch_plan(members[2:], 1, tiny_config(flip=True))  # without: the member numbered 0
    assert not np.array_equal(first[0][:, 0], whole[0][:, 2])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(images=np.zeros((96, 8, 8), np.uint8)), "images \\[n, H, W, C\\]"),
        (dict(images=np.zeros((96, 8, 8, 1), np.int32)), "uint8 or floating"),
        (dict(labels=np.full(96, 2.0)), "labels must be finite and in \\[0, 1\\]"),
        (dict(labels=np.full(96, np.nan)), "labels must be finite"),
        (dict(beta=1.5), "beta must lie in \\(0, 1\\)"),
        (dict(train_idx=np.arange(90, 100)), "train_idx must index"),
        (dict(train_idx=np.arange(4)), "fewer than one batch"),
        (dict(val_idx=np.array([], np.int64)), "val_idx must be a non-empty"),
        (dict(beta=None), "neither a beta nor a loss"),
        (dict(position=-1), "position"),
        (
            dict(images=np.zeros((96, 64), np.float32), config=dict(flip=True)),
            "flip and config.normalize apply to images",
        ),
    ],
)
def test_bad_input_raises_before_training(change, match, tiny_data):
    images, labels = tiny_images()
    images = change.pop("images", images)
    labels = change.pop("labels", labels)
    config = tiny_config(**change.pop("config", {}))
    member = MemberSpec(**{**tiny_members(k=1)[0].__dict__, **change})
    data = DataSource(images.__getitem__, labels)
    with pytest.raises(ValueError, match=match):
        train_ensemble(TinyCNN(), [member], data, config, progress=False)
