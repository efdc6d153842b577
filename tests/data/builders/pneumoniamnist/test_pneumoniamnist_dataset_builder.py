"""Tests of iml.data.builders.pneumoniamnist: PneumoniaMNIST assembled from two public partial
copies (in the project's shared data folder) and prepared as a TFDS dataset."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from iml.data import (
    Dataset,
    assemble_pneumoniamnist,
    load_dataset,
)
from iml.data.builders.pneumoniamnist.pneumoniamnist_dataset_builder import (
    read_pneumoniamnist_npz,
)

SharedData = Callable[[str], Path]


@pytest.fixture(scope="session")
def pneumonia_arrays(shared_data_path: SharedData) -> dict[str, np.ndarray]:
    folder = shared_data_path("pneumoniamnist")
    return assemble_pneumoniamnist(
        folder / "pneumoniamnist_balanced_aksufatih.npz",
        folder / "pneumoniamnist_kaggle_rijulshr_varun19424.npz",
    )


@pytest.fixture(scope="session")
def pneumonia_manual(tmp_path_factory, pneumonia_arrays) -> Path:
    folder = tmp_path_factory.mktemp("pneumoniamnist")
    np.savez(folder / "pneumoniamnist.npz", **pneumonia_arrays)
    return folder


@pytest.fixture(scope="session")
def pneumonia_dataset(tfds_dir, pneumonia_manual) -> Dataset:
    return load_dataset("pneumoniamnist", data_dir=tfds_dir, manual_dir=pneumonia_manual)


def test_assembled_pneumoniamnist_has_official_counts(pneumonia_arrays):
    counts = {s: pneumonia_arrays[f"{s}_labels"].reshape(-1) for s in ("train", "val", "test")}
    assert {s: len(v) for s, v in counts.items()} == {"train": 4708, "val": 524, "test": 624}
    # Class balance from SOURCE.md: normals / pneumonia per split.
    assert [(int((v == 0).sum()), int((v == 1).sum())) for v in counts.values()] == [
        (1214, 3494),
        (135, 389),
        (234, 390),
    ]
    for s in counts:
        assert pneumonia_arrays[f"{s}_images"].dtype == np.uint8
        assert pneumonia_arrays[f"{s}_images"].shape[1:] == (28, 28)
        assert pneumonia_arrays[f"{s}_labels"].shape == (len(counts[s]), 1)


def test_assemble_pneumoniamnist_rejects_swapped_copies(shared_data_path: SharedData):
    folder = shared_data_path("pneumoniamnist")
    with pytest.raises(ValueError, match="not all in"):
        assemble_pneumoniamnist(
            folder / "pneumoniamnist_kaggle_rijulshr_varun19424.npz",
            folder / "pneumoniamnist_balanced_aksufatih.npz",
        )


def test_pneumoniamnist_dataset_round_trips_the_arrays(pneumonia_dataset, pneumonia_arrays):
    ds = pneumonia_dataset
    assert ds.num_examples == 5856 and ds.input_shape == (28, 28, 1) and ds.kind == "image"
    images = np.concatenate([pneumonia_arrays[f"{s}_images"] for s in ("train", "val", "test")])
    labels = np.concatenate(
        [pneumonia_arrays[f"{s}_labels"][:, 0] for s in ("train", "val", "test")]
    )
    np.testing.assert_array_equal(ds.labels, labels)
    assert ds.prevalence == pytest.approx((3494 + 389 + 390) / 5856)
    assert [int((ds.split == s).sum()) for s in ("train", "val", "test")] == [4708, 524, 624]
    assert ds.ids[4708] == "val/0" and ds.ids[-1] == "test/623"
    np.testing.assert_array_equal(ds.groups, np.arange(5856))
    picks = np.random.default_rng(0).integers(0, 5856, size=300)
    np.testing.assert_array_equal(ds.get_batch(picks)[..., 0], images[picks])


def test_pneumoniamnist_sizes_and_files_are_checked(tmp_path, pneumonia_manual, pneumonia_arrays):
    with pytest.raises(FileNotFoundError, match=re.escape("pneumoniamnist_64.npz")):
        load_dataset(
            "pneumoniamnist", data_dir=tmp_path, manual_dir=pneumonia_manual, image_size=64
        )
    with pytest.raises(ValueError, match="image_size"):
        load_dataset(
            "pneumoniamnist", data_dir=tmp_path, manual_dir=pneumonia_manual, image_size=32
        )
    partial = {k: v for k, v in pneumonia_arrays.items() if k != "val_labels"}
    np.savez(tmp_path / "partial.npz", **partial)
    with pytest.raises(ValueError, match="val_labels"):
        read_pneumoniamnist_npz(tmp_path / "partial.npz")
    bad = dict(pneumonia_arrays, test_labels=pneumonia_arrays["test_labels"] + 1)
    np.savez(tmp_path / "bad.npz", **bad)
    with pytest.raises(ValueError, match="0 or 1"):
        read_pneumoniamnist_npz(tmp_path / "bad.npz")
