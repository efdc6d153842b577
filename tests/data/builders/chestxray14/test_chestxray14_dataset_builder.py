"""Tests of iml.data.builders.chestxray14: the NIH ChestX-ray14 label file and release, prepared
as a TFDS dataset without TensorFlow.

The label file and 64 sample images come from the project's shared data folder (read-only;
``shared_data_path`` in tests/conftest.py finds it, and skips a test that needs it where it is
absent)."""

from __future__ import annotations

import csv
import gzip
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from iml.data import (
    Dataset,
    chestxray14_labels,
    load_dataset,
)
from iml.data.builders import load_grayscale
from iml.data.builders.chestxray14.chestxray14_dataset_builder import index_images

SharedData = Callable[[str], Path]


@pytest.fixture(scope="session")
def meta(shared_data_path: SharedData) -> Path:
    return shared_data_path("nih-chestxray14-meta")


@pytest.fixture(scope="session")
def cxr_table(meta: Path):
    return chestxray14_labels(meta / "Data_Entry_2017_v2020.csv.gz")


@pytest.fixture(scope="session")
def train_val_names(meta: Path) -> set[str]:
    return set((meta / "train_val_list.txt").read_text().split())


def make_cxr_manual_dir(
    root: Path, meta: Path, images: dict[str, Path], train_val: set[str], listed: list[str]
) -> Path:
    """An official-layout manual_dir: symlinked label file and images, restricted list files."""
    (root / "images").mkdir(parents=True)
    os.symlink(meta / "Data_Entry_2017_v2020.csv.gz", root / "Data_Entry_2017_v2020.csv.gz")
    for name, path in images.items():
        os.symlink(path, root / "images" / name)
    (root / "train_val_list.txt").write_text("\n".join(n for n in listed if n in train_val))
    (root / "test_list.txt").write_text("\n".join(n for n in listed if n not in train_val))
    return root


@pytest.fixture(scope="session")
def cxr_names(sample_images: Path) -> list[str]:
    return sorted(p.name for p in sample_images.glob("*.png"))


@pytest.fixture(scope="session")
def cxr_dataset(tmp_path_factory, tfds_dir, meta, sample_images, cxr_names, train_val_names):
    manual = make_cxr_manual_dir(
        tmp_path_factory.mktemp("cxr") / "release",
        meta,
        {n: sample_images / n for n in cxr_names},
        train_val_names,
        cxr_names,
    )
    return load_dataset("chestxray14", data_dir=tfds_dir, manual_dir=manual, image_size=28)


@pytest.mark.slow
def test_chestxray14_label_file_counts(cxr_table, meta: Path):
    ids, labels, patients = cxr_table.image_ids, cxr_table.labels, cxr_table.patient_ids
    assert len(ids) == 112_120 and labels.dtype == np.int32
    assert int(labels.sum()) == 1_431
    assert len(np.unique(patients)) == 30_805
    # Independent count of the token in the raw file.
    with gzip.open(meta / "Data_Entry_2017_v2020.csv.gz", "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sum("Pneumonia" in r["Finding Labels"].split("|") for r in rows) == 1_431
    assert [r["Image Index"] for r in rows[:5]] == ids[:5].tolist()

    train_val = (meta / "train_val_list.txt").read_text().split()
    test = (meta / "test_list.txt").read_text().split()
    assert (len(train_val), len(test)) == (86_524, 25_596)
    assert not set(train_val) & set(test)
    assert set(train_val) | set(test) == set(ids.tolist())
    in_test = np.isin(ids, test)
    assert not set(patients[in_test].tolist()) & set(patients[~in_test].tolist())
    assert len(np.unique(patients[in_test])) == 2_797
    assert int(labels[in_test].sum()) == 555 and int(labels[~in_test].sum()) == 876


@pytest.mark.slow
def test_chestxray14_sample_prepared_with_labels_patients_and_split(
    cxr_dataset: Dataset, cxr_table, cxr_names, train_val_names, sample_images
):
    ds = cxr_dataset
    assert ds.name == "chestxray14" and ds.kind == "image"
    assert ds.num_examples == 64 and ds.input_shape == (28, 28, 1)
    assert sorted(ds.ids.tolist()) == cxr_names
    row = {name: i for i, name in enumerate(cxr_table.image_ids.tolist())}
    rows = np.asarray([row[n] for n in ds.ids])
    np.testing.assert_array_equal(ds.labels, cxr_table.labels[rows])
    np.testing.assert_array_equal(ds.groups, cxr_table.patient_ids[rows])
    assert int(ds.labels.sum()) == 32 and ds.prevalence == 0.5
    expected_split = np.where(np.isin(ds.ids, list(train_val_names)), "train", "test")
    np.testing.assert_array_equal(ds.split, expected_split)
    # Random access returns exactly the decoded, resized files (the RGBA ones included).
    rgba = [int(np.flatnonzero(ds.ids == n)[0]) for n in ("00004934_000.png", "00005813_000.png")]
    picks = np.asarray([*rgba, 3, 0])
    batch = ds.get_batch(picks)
    assert batch.shape == (4, 28, 28, 1) and batch.dtype == np.uint8
    for image, i in zip(batch, picks, strict=True):
        np.testing.assert_array_equal(image, load_grayscale(sample_images / ds.ids[i], 28))


@pytest.mark.slow
def test_chestxray14_is_reused_without_manual_dir(cxr_dataset: Dataset, tfds_dir: Path):
    again = load_dataset("chestxray14", data_dir=tfds_dir, image_size=28)
    np.testing.assert_array_equal(again.ids, cxr_dataset.ids)
    np.testing.assert_array_equal(again.get_batch([5, 7]), cxr_dataset.get_batch([5, 7]))


@pytest.mark.slow
def test_chestxray14_truncated_png_stops_preparation(
    tmp_path, meta, sample_images, train_val_names
):
    data = (sample_images / "00000129_000.png").read_bytes()
    (tmp_path / "00000129_000.png").write_bytes(data[: len(data) // 2])
    names = ["00000129_000.png", "00000427_000.png"]
    manual = make_cxr_manual_dir(
        tmp_path / "release",
        meta,
        {names[0]: tmp_path / names[0], names[1]: sample_images / names[1]},
        train_val_names,
        names,
    )
    with pytest.raises(ValueError, match=re.escape("00000129_000.png")):
        load_dataset("chestxray14", data_dir=tmp_path / "tfds", manual_dir=manual, image_size=8)
    assert not list((tmp_path / "tfds").rglob("dataset_info.json"))  # nothing half-prepared


@pytest.mark.slow
def test_chestxray14_listed_but_missing_image_is_an_error(
    tmp_path, meta, sample_images, train_val_names
):
    names = ["00000129_000.png", "00000427_000.png"]
    manual = make_cxr_manual_dir(
        tmp_path / "release", meta, {names[0]: sample_images / names[0]}, train_val_names, names
    )
    with pytest.raises(FileNotFoundError, match=re.escape("00000427_000.png")):
        load_dataset("chestxray14", data_dir=tmp_path / "tfds", manual_dir=manual, image_size=8)


@pytest.mark.slow
def test_chestxray14_bad_release_layouts_raise(tmp_path, meta, sample_images, train_val_names):
    name = "00000129_000.png"
    manual = make_cxr_manual_dir(
        tmp_path / "release", meta, {name: sample_images / name}, train_val_names, [name]
    )
    (manual / "test_list.txt").write_text("not_in_labels.png")
    os.symlink(sample_images / name, manual / "images" / "not_in_labels.png")
    with pytest.raises(ValueError, match=re.escape("not_in_labels.png")):
        load_dataset("chestxray14", data_dir=tmp_path / "tfds", manual_dir=manual, image_size=8)
    (manual / "test_list.txt").unlink()
    with pytest.raises(FileNotFoundError, match=re.escape("test_list.txt")):
        load_dataset("chestxray14", data_dir=tmp_path / "tfds", manual_dir=manual, image_size=8)
    with pytest.raises(ValueError, match="manual_dir"):
        load_dataset("chestxray14", data_dir=tmp_path / "tfds", image_size=8)
    with pytest.raises(FileNotFoundError, match="label file not found"):
        chestxray14_labels(tmp_path / "Data_Entry_2017.csv")
    (tmp_path / "bad.csv").write_text("Image Index,Finding Labels\na.png,Pneumonia\n")
    with pytest.raises(ValueError, match="Patient ID"):
        chestxray14_labels(tmp_path / "bad.csv")


def test_index_images_finds_kaggle_layout(tmp_path, sample_images):
    for k, name in enumerate(["00000129_000.png", "00000427_000.png"]):
        folder = tmp_path / f"images_{k + 1:03d}" / "images"
        folder.mkdir(parents=True)
        os.symlink(sample_images / name, folder / name)
    index = index_images(tmp_path)
    assert sorted(index) == ["00000129_000.png", "00000427_000.png"]
    assert index["00000427_000.png"].parent.parent.name == "images_002"
    with pytest.raises(FileNotFoundError, match="image folder"):
        index_images(tmp_path / "images_001" / "images")
