"""Tests of iml.data.encoding: a table's features encoded (standardised numbers, one-hot
categories, imputed missing values) and its target read as labels."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _csv_tables import dialect_text, write_csv

from iml.data import (
    load_csv,
    load_dataset,
)
from iml.data.encoding import encode_table
from iml.data.errors import ArgumentError


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
    write_csv(tmp_path / "t.csv", "\n".join(lines) + "\n")
    ds = load_csv(tmp_path / "t.csv", "y", positive=positive)
    np.testing.assert_array_equal(ds.labels, labels)


def test_a_dataframe_encodes_like_its_csv_file(tmp_path):
    write_csv(tmp_path / "t.csv", dialect_text(";", True), bom=True, crlf=True)
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
