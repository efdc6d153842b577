"""Tests of iml.data.tabular: delimited files as people have them, and the UCI Adult and Letter
files (from the project's shared data folder) read and encoded."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _csv_tables import NAMES, ROWS, dialect_text, write_csv
from sklearn.preprocessing import OneHotEncoder

from iml.data import (
    Dataset,
    load_dataset,
)
from iml.data.tabular import (
    read_csv_frame,
)

SharedData = Callable[[str], Path]


@pytest.fixture(scope="session")
def adult_dataset(shared_data_path: SharedData) -> Dataset:
    return load_dataset("adult", manual_dir=shared_data_path("uci-adult"))


def _raw_adult_rows(folder: Path) -> list[list[str]]:
    rows = []
    for name in ("adult.data", "adult.test"):
        for line in (folder / name).read_text().splitlines():
            fields = line.split(", ")
            if len(fields) == 15 and fields[0].isdigit():
                rows.append(fields)
    return rows


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.parametrize(
    ("delimiter", "quote_all", "bom", "crlf"),
    [
        (";", True, True, True),  # a spreadsheet export: quoted, BOM, Windows line ends
        (";", False, False, False),
        ("\t", False, True, False),
        ("|", True, False, True),
        (",", False, False, True),
    ],
)
def test_every_dialect_reads_as_the_same_table(tmp_path, delimiter, quote_all, bom, crlf):
    write_csv(tmp_path / "t.csv", dialect_text(delimiter, quote_all), bom=bom, crlf=crlf)
    frame = read_csv_frame(tmp_path / "t.csv")
    assert list(frame.columns) == NAMES  # no BOM left on the first name, no quotes
    assert frame.to_numpy().tolist() == ROWS  # no "\r" left on the last field
    ds = load_dataset("csv", path=tmp_path / "t.csv", target="y", positive="yes")
    np.testing.assert_array_equal(ds.labels, [1, 0, 0, 1, 0])
    assert ds.feature_names == (
        "age",
        "income (k)",
        "income (k)=<missing>",
        "colour=blue, dark",
        "colour=green; light",
        "colour=red",
    )
    income = np.asarray([52.5, 46.375, 61.0, 40.25, 33.0])  # missing: the median, 46.375
    x = ds.get_batch(np.arange(5))
    np.testing.assert_allclose(x[:, 1], (income - income.mean()) / income.std(), atol=1e-6)
    np.testing.assert_array_equal(x[:, 2:], [[0, 0, 0, 1], [1, 1, 0, 0], [0, 0, 0, 1],
                                             [0, 0, 1, 0], [0, 1, 0, 0]])  # fmt: skip


def test_named_delimiter_overrides_detection(tmp_path):
    # Commas inside the fields of a semicolon file: detection is not needed when it is named.
    write_csv(tmp_path / "t.txt", "a;b;y\n1,5;x,y;1\n2,5;z;0\n")
    frame = read_csv_frame(tmp_path / "t.txt", delimiter="semicolon")
    assert frame.to_numpy().tolist() == [["1,5", "x,y", "1"], ["2,5", "z", "0"]]
    write_csv(tmp_path / "tab.txt", "a\ty\n1\t0\n2\t1\n")
    assert read_csv_frame(tmp_path / "tab.txt", delimiter="tab").shape == (2, 2)
