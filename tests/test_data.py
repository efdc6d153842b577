"""Tests of iml.data: TFDS builders without TensorFlow, tabular loaders, the Dataset interface.

Real data comes from the project's shared data folder (read-only; ``shared_data_path`` in
conftest.py finds it, and skips a test that needs it where it is absent); prepared TFDS data goes
to a temporary folder kept for the whole test run, so that each (source, size) is prepared once.
"""

from __future__ import annotations

import csv
import gzip
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from sklearn.datasets import load_digits
from sklearn.preprocessing import OneHotEncoder

from iml.data import (
    ENV_DATA_DIR,
    Dataset,
    assemble_pneumoniamnist,
    chestxray14_labels,
    default_data_dir,
    load_csv,
    load_dataset,
)
from iml.data.builders import load_grayscale, resize_grayscale
from iml.data.builders.chestxray14 import index_images
from iml.data.builders.digits import Digits
from iml.data.builders.pneumoniamnist import read_pneumoniamnist_npz

# ----------------------------------------------------------------------------------------------
# Fixtures: real data folders and prepared datasets (once per test run)
# ----------------------------------------------------------------------------------------------

SharedData = Callable[[str], Path]


@pytest.fixture(scope="session")
def tfds_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tfds")


@pytest.fixture(scope="session")
def meta(shared_data_path: SharedData) -> Path:
    return shared_data_path("nih-chestxray14-meta")


@pytest.fixture(scope="session")
def sample_images(shared_data_path: SharedData) -> Path:
    return shared_data_path("nih-chestxray14-sample-images/images")


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


@pytest.fixture(scope="session")
def digits_dataset(tfds_dir) -> Dataset:
    return load_dataset(data_dir=tfds_dir)  # "digits" is the default


@pytest.fixture(scope="session")
def adult_dataset(shared_data_path: SharedData) -> Dataset:
    return load_dataset("adult", manual_dir=shared_data_path("uci-adult"))


# ----------------------------------------------------------------------------------------------
# Image decoding
# ----------------------------------------------------------------------------------------------


def test_rgba_png_becomes_its_gray_channel_and_resizes_like_torch(sample_images: Path):
    path = sample_images / "00004934_000.png"  # one of the two RGBA files of the sample
    raw = np.asarray(Image.open(path))
    assert raw.shape == (1024, 1024, 4)
    full = load_grayscale(path, 1024)
    np.testing.assert_array_equal(full[..., 0], raw[..., 0])
    small = load_grayscale(path, 28)[..., 0].astype(np.float32)
    reference = F.interpolate(
        torch.from_numpy(raw[..., 0].astype(np.float32))[None, None],
        size=(28, 28),
        mode="bilinear",
        antialias=True,
        align_corners=False,
    )[0, 0].numpy()
    assert np.abs(small - reference).max() <= 1.0


def test_16bit_png_is_scaled_linearly_to_8bit(tmp_path: Path):
    values = (np.arange(32 * 32, dtype=np.uint32).reshape(32, 32) * 64).astype(np.uint16)
    Image.fromarray(values).save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")
    loaded = load_grayscale(tmp_path / "deep.png", 32)[..., 0]
    np.testing.assert_array_equal(loaded, np.rint(values / 257.0).astype(np.uint8))


def test_truncated_and_missing_image_files_raise_naming_the_file(tmp_path, sample_images):
    data = (sample_images / "00000129_000.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match=re.escape("cut.png")):
        load_grayscale(tmp_path / "cut.png", 28)
    with pytest.raises(FileNotFoundError, match=re.escape("absent.png")):
        load_grayscale(tmp_path / "absent.png", 28)


def test_resize_grayscale_rejects_non_uint8():
    with pytest.raises(ValueError, match="uint8"):
        resize_grayscale(np.zeros((2, 8, 8), np.float32), 16)


# ----------------------------------------------------------------------------------------------
# ChestX-ray14
# ----------------------------------------------------------------------------------------------


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


def test_chestxray14_is_reused_without_manual_dir(cxr_dataset: Dataset, tfds_dir: Path):
    again = load_dataset("chestxray14", data_dir=tfds_dir, image_size=28)
    np.testing.assert_array_equal(again.ids, cxr_dataset.ids)
    np.testing.assert_array_equal(again.get_batch([5, 7]), cxr_dataset.get_batch([5, 7]))


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


def test_chestxray14_listed_but_missing_image_is_an_error(
    tmp_path, meta, sample_images, train_val_names
):
    names = ["00000129_000.png", "00000427_000.png"]
    manual = make_cxr_manual_dir(
        tmp_path / "release", meta, {names[0]: sample_images / names[0]}, train_val_names, names
    )
    with pytest.raises(FileNotFoundError, match=re.escape("00000427_000.png")):
        load_dataset("chestxray14", data_dir=tmp_path / "tfds", manual_dir=manual, image_size=8)


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


# ----------------------------------------------------------------------------------------------
# PneumoniaMNIST
# ----------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------
# Digits (the built-in default)
# ----------------------------------------------------------------------------------------------


def test_digits_default_matches_scikit_learn(digits_dataset: Dataset):
    bunch = load_digits()
    ds = digits_dataset
    assert ds.name == "digits" and ds.num_examples == 1797 and ds.input_shape == (8, 8, 1)
    np.testing.assert_array_equal(ds.classes, bunch.target)
    np.testing.assert_array_equal(ds.labels, (bunch.target == 8).astype(np.int32))
    assert int(ds.labels.sum()) == 174 and ds.split is None
    expected = np.rint(bunch.images * 255.0 / 16.0).astype(np.uint8)
    np.testing.assert_array_equal(ds.get_batch(np.arange(1797))[..., 0], expected)


def test_digits_positive_digit_and_reuse(digits_dataset, tfds_dir, monkeypatch):
    # Preparation must not run again: a second load only reads what the first one wrote.
    monkeypatch.setattr(Digits, "_split_generators", lambda *a: pytest.fail("prepared again"))
    zeros = load_dataset("digits", data_dir=tfds_dir, positive_digit=0)
    np.testing.assert_array_equal(zeros.labels, (digits_dataset.classes == 0).astype(np.int32))
    assert int(zeros.labels.sum()) == 178
    with pytest.raises(ValueError, match="positive_digit"):
        load_dataset("digits", data_dir=tfds_dir, positive_digit=10)


def test_digits_resized_and_data_dir_from_environment(tmp_path, monkeypatch, digits_dataset):
    monkeypatch.setenv(ENV_DATA_DIR, str(tmp_path / "env"))
    assert default_data_dir() == tmp_path / "env"
    big = load_dataset("digits", image_size=16)
    assert big.input_shape == (16, 16, 1)
    assert list((tmp_path / "env").rglob("dataset_info.json"))
    small = digits_dataset.get_batch(np.arange(50))[..., 0].astype(np.float32)
    reference = F.interpolate(
        torch.from_numpy(small)[:, None], size=(16, 16), mode="bilinear", antialias=True
    )[:, 0].numpy()
    assert np.abs(big.get_batch(np.arange(50))[..., 0] - reference).max() <= 1.0


# ----------------------------------------------------------------------------------------------
# Tabular sources
# ----------------------------------------------------------------------------------------------


def _raw_adult_rows(folder: Path) -> list[list[str]]:
    rows = []
    for name in ("adult.data", "adult.test"):
        for line in (folder / name).read_text().splitlines():
            fields = line.split(", ")
            if len(fields) == 15 and fields[0].isdigit():
                rows.append(fields)
    return rows


def test_adult_matches_an_independent_encoding(
    adult_dataset: Dataset, shared_data_path: SharedData
):
    ds = adult_dataset
    raw = np.asarray(_raw_adult_rows(shared_data_path("uci-adult")))
    assert ds.num_examples == len(raw) == 32_561 + 16_281
    assert [int((ds.split == s).sum()) for s in ("train", "test")] == [32_561, 16_281]
    np.testing.assert_array_equal(ds.labels, np.char.startswith(raw[:, 14], ">50K"))
    assert int(ds.labels.sum()) == 7_841 + 3_846
    names = list(ds.feature_names)
    x = ds.get_batch(np.arange(ds.num_examples))
    assert x.dtype == np.float32 and x.shape == (48_842, len(names)) == (48_842, *ds.input_shape)
    numeric = [0, 2, 4, 10, 11, 12]
    for j in numeric:
        values = raw[:, j].astype(np.float64)
        column = x[:, names.index(_adult_names()[j])]
        np.testing.assert_allclose(column, (values - values.mean()) / values.std(), atol=1e-5)
    categorical = [j for j in range(14) if j not in numeric]
    encoder = OneHotEncoder(sparse_output=False).fit(raw[:, categorical])
    reference = encoder.transform(raw[:, categorical])
    for k, ref_name in enumerate(encoder.get_feature_names_out(_adult_names(categorical))):
        ours = ref_name.replace("_?", "=<missing>").replace("_", "=", 1)
        np.testing.assert_array_equal(x[:, names.index(ours)], reference[:, k])
    assert len(names) == len(numeric) + reference.shape[1]
    assert int(x[:, names.index("workclass=<missing>")].sum()) == 1_836 + 963


def _adult_names(columns: list[int] | None = None) -> list[str]:
    names = (
        "age workclass fnlwgt education education-num marital-status occupation relationship "
        "race sex capital-gain capital-loss hours-per-week native-country"
    ).split()
    return names if columns is None else [names[j] for j in columns]


def test_adult_reads_uci_original_format_and_names_option(tmp_path, shared_data_path: SharedData):
    # UCI's own files: no header, '|1x3 Cross validator' first in adult.test, empty last line.
    folder = shared_data_path("uci-adult")
    data = (folder / "adult.data").read_text().splitlines()[1:201]
    test = (folder / "adult.test").read_text().splitlines()[1:101]
    (tmp_path / "adult.data").write_text("\n".join(data) + "\n\n")
    (tmp_path / "adult.test").write_text("|1x3 Cross validator\n" + "\n".join(test) + "\n")
    with pytest.raises(FileNotFoundError, match=re.escape("adult.names")):
        load_dataset("adult", manual_dir=tmp_path)
    ds = load_dataset("adult", manual_dir=tmp_path, names=[*_adult_names(), "income"])
    shutil.copy(folder / "adult.names", tmp_path / "adult.names")
    same = load_dataset("adult", manual_dir=tmp_path, standardize=False)
    assert ds.num_examples == same.num_examples == 300
    np.testing.assert_array_equal(ds.labels, same.labels)
    ages = np.asarray([int(line.split(",")[0]) for line in data + test], dtype=np.float32)
    age = same.get_batch(np.arange(300))[:, same.feature_names.index("age")]
    np.testing.assert_array_equal(age, ages)


def test_letter_one_against_rest_and_several_letters(shared_data_path: SharedData):
    folder = shared_data_path("uci-letter")
    raw = (folder / "letter-recognition.data").read_text().splitlines()[1:]
    letters = np.asarray([line.split(",")[0] for line in raw])
    features = np.asarray([line.split(",")[1:] for line in raw], dtype=np.float64)
    ds = load_dataset("letter", manual_dir=folder)
    assert ds.num_examples == 20_000 and ds.input_shape == (16,)
    np.testing.assert_array_equal(ds.labels, letters == "O")
    assert int(ds.labels.sum()) == 753
    np.testing.assert_array_equal(np.asarray(ds.class_names)[ds.classes], letters)
    expected = (features - features.mean(0)) / features.std(0)
    np.testing.assert_allclose(ds.get_batch(np.arange(20_000)), expected, atol=1e-5)
    first_half = load_dataset("letter", manual_dir=folder, positive_letter="ABCDEFGHIJKLM")
    np.testing.assert_array_equal(first_half.labels, letters < "N")
    with pytest.raises(ValueError, match="positive_letter"):
        load_dataset("letter", manual_dir=folder, positive_letter="7")


def test_csv_encoding_imputation_and_positive_value(tmp_path: Path):
    (tmp_path / "t.csv").write_text(
        "size,colour,grade\n1.0,red,a\n?,blue,b\n3.0,,c\n4.0,red,b\n",
    )
    ds = load_dataset("csv", path=tmp_path / "t.csv", target="grade", positive="b")
    assert ds.kind == "tabular" and ds.num_examples == 4
    np.testing.assert_array_equal(ds.labels, [0, 1, 0, 1])
    assert ds.feature_names == (
        "size",
        "size=<missing>",
        "colour=<missing>",
        "colour=blue",
        "colour=red",
    )
    size = np.asarray([1.0, 3.0, 3.0, 4.0])  # the missing size imputed with the median, 3
    expected = np.column_stack(
        [
            (size - size.mean()) / size.std(),
            [0, 1, 0, 0],
            [0, 0, 1, 0],
            [0, 1, 0, 0],
            [1, 0, 0, 1],
        ]
    )
    np.testing.assert_allclose(ds.get_batch(np.arange(4)), expected, atol=1e-6)
    several = load_csv(tmp_path / "t.csv", "grade", positive=["a", "c"], standardize=False)
    np.testing.assert_array_equal(several.labels, [1, 0, 1, 0])
    np.testing.assert_array_equal(several.get_batch([0, 1])[:, 0], [1.0, 3.0])


def test_csv_bad_input_is_named(tmp_path: Path):
    (tmp_path / "t.csv").write_text("a,y\n1,x\n2,z\n")
    with pytest.raises(ValueError, match="'target_col'"):
        load_dataset("csv", path=tmp_path / "t.csv", target="target_col")
    with pytest.raises(ValueError, match="positive="):
        load_dataset("csv", path=tmp_path / "t.csv", target="y")
    with pytest.raises(ValueError, match="never occurs"):
        load_dataset("csv", path=tmp_path / "t.csv", target="y", positive="q")
    with pytest.raises(FileNotFoundError, match=re.escape("nope.csv")):
        load_dataset("csv", path=tmp_path / "nope.csv", target="y")
    with pytest.raises(ValueError, match="target="):
        load_dataset("csv", path=tmp_path / "t.csv")
    (tmp_path / "short.csv").write_text("a,y\n1,0\n2\n")
    with pytest.raises(ValueError, match="row 2"):
        load_dataset("csv", path=tmp_path / "short.csv", target="y")
    (tmp_path / "nolabel.csv").write_text("a,y\n1,0\n2,?\n")
    with pytest.raises(ValueError, match="missing in data row 2"):
        load_dataset("csv", path=tmp_path / "nolabel.csv", target="y")
    binary = load_dataset("csv", path=tmp_path / "nolabel.csv", target="a", positive=2)
    np.testing.assert_array_equal(binary.labels, [0, 1])


# ----------------------------------------------------------------------------------------------
# The common interface: bad input fails before any work
# ----------------------------------------------------------------------------------------------


def test_load_dataset_rejects_bad_names_options_and_paths(tmp_path: Path):
    with pytest.raises(ValueError, match="'mnist'"):
        load_dataset("mnist", data_dir=tmp_path)
    with pytest.raises(ValueError, match="positive_letter"):
        load_dataset("digits", data_dir=tmp_path, positive_letter="A")
    with pytest.raises(FileNotFoundError, match="no_such_release"):
        load_dataset("chestxray14", data_dir=tmp_path, manual_dir=tmp_path / "no_such_release")
    with pytest.raises(FileNotFoundError, match="no_such_folder"):
        load_dataset("adult", manual_dir=tmp_path / "no_such_folder")
    with pytest.raises(ValueError, match="image_size"):
        load_dataset("letter", manual_dir=tmp_path, image_size=28)
    with pytest.raises(ValueError, match="image_size"):
        load_dataset("digits", data_dir=tmp_path, image_size=0)
    assert not any(tmp_path.iterdir())  # nothing was prepared


def test_get_batch_validates_indices(digits_dataset: Dataset):
    assert digits_dataset.get_batch([]).shape == (0, 8, 8, 1)
    np.testing.assert_array_equal(
        digits_dataset.get_batch([3, 3])[0], digits_dataset.get_batch([3])[0]
    )
    with pytest.raises(ValueError, match="indices"):
        digits_dataset.get_batch([1797])
    with pytest.raises(ValueError, match="indices"):
        digits_dataset.get_batch([-1])
    with pytest.raises(ValueError, match="indices"):
        digits_dataset.get_batch(np.zeros((2, 2), int))
    with pytest.raises(ValueError, match="indices"):
        digits_dataset.get_batch([0.5])


def test_folds_tabular_readers_and_the_sweep_import_without_tensorflow_datasets():
    import subprocess
    import sys

    code = (
        "import sys, iml.data, iml.data.folds, iml.data.tabular, iml.pipeline.sweep\n"
        "assert 'tensorflow_datasets' not in sys.modules, 'imported eagerly'\n"
        "from iml.data import load_dataset, DATASETS\n"
        "assert 'tensorflow_datasets' in sys.modules and 'digits' in DATASETS\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_check_uci_folder_names_the_argument_and_the_missing_file(tmp_path):
    from iml.data.tabular import UCI_FILES, check_uci_folder

    with pytest.raises(FileNotFoundError, match=r"--data-dir: folder not found: .*nowhere"):
        check_uci_folder("adult", tmp_path / "nowhere", "--data-dir")
    (tmp_path / "adult.data").write_text("")
    with pytest.raises(FileNotFoundError, match=r"adult\.test not found \(needed by adult\)"):
        check_uci_folder("adult", tmp_path, "config.data.data_dir")
    for file_name in UCI_FILES["adult"]:
        (tmp_path / file_name).write_text("")
    assert check_uci_folder("adult", str(tmp_path), "x") == tmp_path
    with pytest.raises(FileNotFoundError, match=r"letter-recognition\.data not found"):
        check_uci_folder("letter", tmp_path, "x")
