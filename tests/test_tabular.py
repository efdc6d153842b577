"""Tests of iml.data.tabular: delimited files as people have them, DataFrames, and errors that
name the argument (library) or the flag (``iml sweep``) together with the column and its values."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from iml import cli
from iml.data import load_csv, load_dataset
from iml.data.tabular import (
    ArgumentError,
    ArgumentFileNotFoundError,
    encode_table,
    read_csv_frame,
)
from iml.pipeline import sweep as S

# A small table with a numeric column holding a missing value, a categorical column whose values
# contain the comma and the semicolon, and a yes/no target.
NAMES = ["age", "income (k)", "colour", "y"]
ROWS = [
    ["39", "52.5", "red", "yes"],
    ["50", "?", "blue, dark", "no"],
    ["38", "61.0", "red", "no"],
    ["53", "40.25", "green; light", "yes"],
    ["28", "33.0", "blue, dark", "no"],
]


def _quoted(field: str) -> str:
    return '"' + field.replace('"', '""') + '"'


def _write(path, text: str, *, bom: bool = False, crlf: bool = False) -> None:
    if crlf:
        text = text.replace("\n", "\r\n")
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))


def _dialect_text(delimiter: str, quote_all: bool) -> str:
    def line(fields):
        return delimiter.join(
            _quoted(f) if quote_all or delimiter in f or "," in f or ";" in f else f for f in fields
        )

    return "\n".join(line(row) for row in [NAMES, *ROWS]) + "\n"


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
    _write(tmp_path / "t.csv", _dialect_text(delimiter, quote_all), bom=bom, crlf=crlf)
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
    _write(tmp_path / "t.txt", "a;b;y\n1,5;x,y;1\n2,5;z;0\n")
    frame = read_csv_frame(tmp_path / "t.txt", delimiter="semicolon")
    assert frame.to_numpy().tolist() == [["1,5", "x,y", "1"], ["2,5", "z", "0"]]
    _write(tmp_path / "tab.txt", "a\ty\n1\t0\n2\t1\n")
    assert read_csv_frame(tmp_path / "tab.txt", delimiter="tab").shape == (2, 2)


@pytest.mark.parametrize(
    ("values", "positive", "labels"),
    [
        (["0", "1", "1", "0"], None, [0, 1, 1, 0]),
        (["0.0", "1.0", "1", "0"], None, [0, 1, 1, 0]),
        (["True", "false", "TRUE", "False"], None, [1, 0, 1, 0]),
        (["yes", "no", "yes", "no"], "yes", [1, 0, 1, 0]),
        (["TRUE", "FALSE", "TRUE", "FALSE"], "true", [1, 0, 1, 0]),
        (["1", "2", "3", "2"], 2, [0, 1, 0, 1]),
        (["a", "b", "c", "b"], ["a", "c"], [1, 0, 1, 0]),
    ],
)
def test_target_as_bits_truth_values_or_named_strings(tmp_path, values, positive, labels):
    lines = ["x,y"] + [f"{i},{v}" for i, v in enumerate(values)]
    _write(tmp_path / "t.csv", "\n".join(lines) + "\n")
    ds = load_csv(tmp_path / "t.csv", "y", positive=positive)
    np.testing.assert_array_equal(ds.labels, labels)


def test_a_dataframe_encodes_like_its_csv_file(tmp_path):
    _write(tmp_path / "t.csv", _dialect_text(";", True), bom=True, crlf=True)
    frame = pd.DataFrame(
        {
            "age": [39, 50, 38, 53, 28],
            "income (k)": [52.5, None, 61.0, 40.25, 33.0],
            "colour": ["red", "blue, dark", "red", "green; light", "blue, dark"],
            "y": [True, False, False, True, False],
        }
    )
    from_file = load_dataset("csv", path=tmp_path / "t.csv", target="y", positive="yes")
    from_frame = load_dataset("csv", frame=frame, target="y")  # a bool target needs no positive
    assert from_frame.feature_names == from_file.feature_names
    np.testing.assert_array_equal(from_frame.labels, from_file.labels)
    np.testing.assert_allclose(
        from_frame.get_batch(np.arange(5)), from_file.get_batch(np.arange(5)), atol=1e-6
    )
    table = encode_table(frame, "y")
    np.testing.assert_array_equal(table.features, from_frame.get_batch(np.arange(5)))
    with pytest.raises(ArgumentError, match=re.escape("delimiter=';': applies to files only")):
        load_csv(frame=frame, target="y", delimiter=";")


def test_argument_error_words_the_same_problem_for_a_call_and_a_command():
    err = ArgumentError("positive", "{x}", "{given} never occurs in {column!r}", column="a{b}")
    assert str(err) == "positive='{x}' never occurs in 'a{b}'"  # braces in data stay data
    flagged = err.for_flags({"positive": "--positive"})
    assert str(flagged) == "--positive '{x}' never occurs in 'a{b}'"
    assert isinstance(flagged, ValueError) and flagged.argument == "positive"
    assert err.for_flags({"target": "--target"}) is err
    missing = ArgumentFileNotFoundError("path", "x.csv", "{given}: file not found")
    assert isinstance(missing.renamed("file", "y.csv"), FileNotFoundError)
    assert str(missing.renamed("file", "y.csv")) == "file='y.csv': file not found"


# ----------------------------------------------------------------------------------------------
# Bad input: the library names the argument, `iml sweep` the flag; both the column and values
# ----------------------------------------------------------------------------------------------

GOOD = "a,b,y\n1,x,yes\n2,z,no\n3,x,no\n"

# (file text, extra flags, load_csv keywords, message of the command, message of the library)
BAD_INPUT = {
    "positive never occurs": (
        GOOD,
        ["--target", "y", "--positive", "maybe"],
        {"target": "y", "positive": "maybe"},
        r"--positive 'maybe' never occurs in target column 'y' .*values found: 'no', 'yes'",
        r"positive='maybe' never occurs in target column 'y' .*values found: 'no', 'yes'",
    ),
    "positive needed": (
        GOOD,
        ["--target", "y"],
        {"target": "y"},
        r"target column 'y' .* not 0/1 or true/false \(values found: 'no', 'yes'\); "
        r"pass --positive",
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
        ["--target", "y", "--positive", "yes"],
        {"target": "y", "positive": "yes"},
        r"--positive 'yes': every row of target column 'y' .* is positive \(values found: 'yes'\)",
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
        ["--target", "y", "--positive", "yes"],
        {"target": "y", "positive": "yes"},
        r"could not detect the field delimiter of .*'a y'.*; pass --delimiter",
        r"could not detect the field delimiter .*; pass delimiter=",
    ),
    "malformed delimiter": (
        GOOD,
        ["--target", "y", "--delimiter", "::"],
        {"target": "y", "delimiter": "::"},
        r"--delimiter '::': the delimiter must be one character",
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

    monkeypatch.setattr(S, "_train_chunk", no_work)
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
