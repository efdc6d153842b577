"""Tests of iml.data.datasets: the Dataset interface, load_dataset and load_csv; bad input fails
before any work, naming the argument."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from iml import cli
from iml.data import (
    Dataset,
    load_csv,
    load_dataset,
)
from iml.data.errors import ArgumentError
from iml.pipeline import train_plan as TP


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_folds_tabular_readers_and_the_sweep_import_without_tensorflow_datasets():
    import subprocess
    import sys

    code = (
        "import sys, iml.data, iml.data.folds, iml.data.tabular, iml.pipeline.sweep\n"
        "assert 'tensorflow_datasets' not in sys.modules, 'imported eagerly'\n"
        "from iml.data import load_dataset, DATASETS\n"
        "assert 'tensorflow_datasets' in sys.modules and 'digits' in DATASETS\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# ----------------------------------------------------------------------------------------------
# Bad input: the library names the argument, `iml sweep` the flag; both the column and values
# ----------------------------------------------------------------------------------------------

GOOD = "a,b,y\n1,x,yes\n2,z,no\n3,x,no\n"

# (file text, extra flags, load_csv keywords, message of the command, message of the library)
BAD_INPUT = {
    "positive never occurs": (
        GOOD,
        ["--target", "y", "--config.data.positive=maybe"],
        {"target": "y", "positive": "maybe"},
        r"config\.data\.positive='maybe' never occurs in target column 'y' .*values found: "
        r"'no', 'yes'",
        r"positive='maybe' never occurs in target column 'y' .*values found: 'no', 'yes'",
    ),
    "positive needed": (
        GOOD,
        ["--target", "y"],
        {"target": "y"},
        r"target column 'y' .* not 0/1 or true/false \(values found: 'no', 'yes'\); "
        r"pass config\.data\.positive",
        r"target column 'y' .* \(values found: 'no', 'yes'\); pass positive=",
    ),
    "no such target column": (
        GOOD,
        ["--target", "label"],
        {"target": "label"},
        r"--target 'label': no such column .*columns are \['a', 'b', 'y'\]",
        r"target='label': no such column .*columns are \['a', 'b', 'y'\]",
    ),
    "one class only": (
        "a,y\n1,yes\n2,yes\n",
        ["--target", "y", "--config.data.positive=yes"],
        {"target": "y", "positive": "yes"},
        r"config\.data\.positive='yes': every row of target column 'y' .* is positive "
        r"\(values found: 'yes'\)",
        r"positive='yes': every row of target column 'y' .* is positive",
    ),
    "target value missing": (
        "a,y\n1,1\n2,?\n3,0\n",
        ["--target", "y"],
        {"target": "y"},
        r"--target 'y': the target is missing in data row 2",
        r"target='y': the target is missing in data row 2",
    ),
    "undetectable delimiter": (
        "a y\n1 yes\n2 no\n",
        ["--target", "y", "--config.data.positive=yes"],
        {"target": "y", "positive": "yes"},
        r"could not detect the field delimiter of .*'a y'.*; pass config\.data\.delimiter",
        r"could not detect the field delimiter .*; pass delimiter=",
    ),
    "malformed delimiter": (
        GOOD,
        ["--target", "y", "--config.data.delimiter=::"],
        {"target": "y", "delimiter": "::"},
        r"config.data.delimiter='::': the delimiter must be one character",
        r"delimiter='::': the delimiter must be one character",
    ),
    "short row": (
        "a,b,y\n1,x,1\n2,0\n",
        ["--target", "y"],
        {"target": "y"},
        r"--csv '.*data.csv': data row 2 has 2 field\(s\), the header has 3",
        r"path='.*data.csv': data row 2 has 2 field\(s\), the header has 3",
    ),
    "repeated column names": (
        "a,a,y\n1,2,1\n2,3,0\n",
        ["--target", "y"],
        {"target": "y"},
        r"--csv '.*data.csv': column names repeat: \['a'\]",
        r"path='.*data.csv': column names repeat: \['a'\]",
    ),
    "header only": (
        "a,y\n",
        ["--target", "y"],
        {"target": "y"},
        r"--csv '.*data.csv': .*holds no data rows",
        r"path='.*data.csv': .*holds no data rows",
    ),
}


@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_csv_input_names_the_flag_or_argument_column_and_values(
    case, tmp_path, capsys, monkeypatch
):
    text, flags, keywords, command_message, library_message = BAD_INPUT[case]
    (tmp_path / "data.csv").write_text(text)

    def no_work(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(TP, "train", no_work)
    argv = ["sweep", "--csv", str(tmp_path / "data.csv"), "--out", str(tmp_path / "out"), *flags]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("iml sweep: error: ") and err.count("\n") == 1, err
    assert re.search(command_message, err), err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ArgumentError, match=library_message):
        load_csv(tmp_path / "data.csv", **keywords)


def test_missing_file_names_the_flag_or_argument(tmp_path, capsys):
    argv = ["sweep", "--csv", str(tmp_path / "nope.csv"), "--target", "y", "--out", "out"]
    assert cli.main(argv) == 2
    assert re.search(r"--csv '.*nope.csv': file not found", capsys.readouterr().err)
    with pytest.raises(FileNotFoundError, match=r"path='.*nope.csv': file not found"):
        load_csv(tmp_path / "nope.csv", "y")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (dict(name=""), "a dataset's name must be a non-empty string"),
        (dict(load="loader"), "load must be callable, got str"),
        (dict(kind="video"), "kind must be 'image' or 'tabular', got 'video'"),
        (dict(options="n"), "options must be a collection of names, not a string"),
        (dict(options=["n", "bad-name"]), r"options must be identifiers, got \['bad-name'\]"),
        (dict(options=["image_size"]), r"options \['image_size'\] are load_dataset's own"),
        (dict(classes="yes"), "classes must be True or False"),
    ],
)
def test_register_dataset_names_what_is_wrong(arguments, message):
    from iml.data import DATASETS, register_dataset

    before = dict(DATASETS)
    good = dict(name="rows_test", load=lambda manual_dir, **options: None, kind="tabular")
    with pytest.raises(ValueError, match=message):
        register_dataset(**{**good, **arguments})
    assert DATASETS == before  # nothing registered


def test_a_registered_table_loads_by_name_and_is_removed_again():
    from iml.data import DATASETS, Dataset, load_dataset, register_dataset, unregister_dataset

    x = np.arange(12, dtype=np.float32).reshape(6, 2)

    def rows(manual_dir, scale=1.0):
        return Dataset(
            name="rows_test", labels=np.array([0, 1] * 3, np.int32), groups=np.arange(6),
            ids=np.arange(6), input_shape=(2,), kind="tabular",
            reader=lambda i: scale * x[i],
        )  # fmt: skip

    source = register_dataset("rows_test", rows, kind="tabular", options=("scale",))
    try:
        assert DATASETS["rows_test"] is source and source.options == {"scale"}
        data = load_dataset("rows_test", scale=2.0)
        np.testing.assert_array_equal(data.get_batch(np.array([1])), [[4.0, 6.0]])
        with pytest.raises(ValueError, match=r"unknown option\(s\) \['size'\]"):
            load_dataset("rows_test", size=3)
    finally:
        unregister_dataset("rows_test")
    assert "rows_test" not in DATASETS
