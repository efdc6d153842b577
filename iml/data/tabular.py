"""Tabular data from CSV files (csv module + numpy), and the UCI Adult and Letter files.

:func:`encode_table` turns rows of strings into a float32 feature matrix and binary labels:

* The target column gives the label: 1 where its value is one of ``positive`` (one value, or a
  collection of values: e.g. one letter against the rest, or ``"ABCDEFGHIJKLM"`` split into
  letters by the Letter loader), 0 elsewhere. Without ``positive`` the target must already be
  0/1. A missing target value is an error.
* A feature column is *numeric* when all its non-missing values parse as finite numbers, and
  *categorical* otherwise. Categorical columns are one-hot encoded over their sorted values.
* Missing values (fields equal to one of ``missing_values``, by default ``""``, ``"?"``,
  ``"NA"``, ``"N/A"``, ``"NaN"``, ``"nan"``): in a numeric column they are replaced by the
  column's median and flagged in an added 0/1 column ``"<name>=<missing>"``; in a categorical
  column "missing" is a category of its own (its one-hot column is ``"<name>=<missing>"``).
  Columns without missing values get no such column.
* With ``standardize`` (default) numeric columns are z-scored with the mean and standard
  deviation of the whole file (label-free statistics, so no label information crosses folds);
  one-hot and missing-indicator columns stay 0/1.
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = [
    "DEFAULT_MISSING",
    "LETTER_COLUMNS",
    "Table",
    "adult_column_names",
    "encode_table",
    "read_adult",
    "read_csv_rows",
    "read_letter",
]

DEFAULT_MISSING = ("", "?", "NA", "N/A", "NaN", "nan")
MISSING_SUFFIX = "=<missing>"

# Attribute names of UCI's letter-recognition.names, the class first.
LETTER_COLUMNS = (
    "lettr", "x-box", "y-box", "width", "high", "onpix", "x-bar", "y-bar", "x2bar", "y2bar",
    "xybar", "x2ybr", "xy2br", "x-ege", "xegvy", "y-ege", "yegvx",
)  # fmt: skip


class Table(NamedTuple):
    """An encoded table: ``features`` float32 ``[N, d]`` and binary ``labels`` int32 ``[N]``."""

    features: np.ndarray
    labels: np.ndarray
    feature_names: tuple[str, ...]
    target_values: np.ndarray  # the raw target strings, [N]


def read_csv_rows(
    path: str | os.PathLike[str], *, delimiter: str = ",", comment: str | None = None
) -> list[list[str]]:
    """All non-blank rows of a delimited text file, fields stripped of surrounding spaces.

    Args:
      path: the file.
      delimiter: field separator.
      comment: rows whose first field starts with this string are skipped (UCI's ``"|"``).

    Raises:
      FileNotFoundError: if the file does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"CSV file not found: {path}")
    rows = []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.reader(f, delimiter=delimiter, skipinitialspace=True):
            row = [field.strip() for field in row]
            if not any(row) or (comment and row[0].startswith(comment)):
                continue
            rows.append(row)
    return rows


def _as_float(value: str) -> float | None:
    try:
        x = float(value)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _parse_numeric(values: np.ndarray) -> np.ndarray | None:
    """``values`` as float64 when every one is a finite number (and there is one), else None."""
    if values.size == 0:
        return None
    try:
        numbers = values.astype(np.float64)
    except ValueError:
        return None
    return numbers if np.isfinite(numbers).all() else None


def _positive_set(positive: object) -> set[str]:
    if isinstance(positive, str | int | float | np.integer | np.floating):
        return {str(positive)}
    if isinstance(positive, Collection):
        return {str(p) for p in positive}
    raise ValueError(f"positive must be a value or a collection of values, got {positive!r}")


def _binary_labels(values: np.ndarray, target: str, positive: object, source: str) -> np.ndarray:
    uniques, inverse = np.unique(values, return_inverse=True)
    numbers = [_as_float(v) for v in uniques.tolist()]
    if positive is None:
        if any(x not in (0.0, 1.0) for x in numbers):
            raise ValueError(
                f"{source}: target column {target!r} is not 0/1 (values "
                f"{uniques[:10].tolist()}); pass positive= naming the positive value(s)"
            )
        is_positive = [x == 1.0 for x in numbers]
    else:
        wanted = _positive_set(positive)
        wanted_numbers = {x for x in map(_as_float, wanted) if x is not None}
        is_positive = [
            v in wanted or x in wanted_numbers
            for v, x in zip(uniques.tolist(), numbers, strict=True)
        ]
        if not any(is_positive):
            raise ValueError(
                f"{source}: positive={positive!r} never occurs in target column {target!r} "
                f"(values {uniques[:10].tolist()})"
            )
    return np.asarray(is_positive, dtype=np.int32)[inverse.reshape(-1)]


def encode_table(
    rows: Sequence[Sequence[str]],
    names: Sequence[str],
    target: str,
    *,
    positive: object = None,
    missing_values: Collection[str] = DEFAULT_MISSING,
    standardize: bool = True,
    source: str = "table",
) -> Table:
    """Encode rows of strings into features and binary labels (rules in the module docstring).

    Args:
      rows: data rows, each with ``len(names)`` fields.
      names: column names.
      target: the target column's name.
      positive: the positive target value(s); ``None`` when the target is 0/1 already.
      missing_values: field values that mean "missing".
      standardize: z-score numeric columns.
      source: a name for the data used in error messages (e.g. the file path).

    Returns:
      A :class:`Table`.

    Raises:
      ValueError: if ``target`` is not a column, names repeat, a row has the wrong length, a
        target value is missing, there are no rows, or ``positive`` is absent/needed.
    """
    names = [str(n) for n in names]
    if len(set(names)) != len(names):
        raise ValueError(f"{source}: column names repeat: {names}")
    if target not in names:
        raise ValueError(f"{source}: no target column {target!r}; columns are {names}")
    if not rows:
        raise ValueError(f"{source}: no data rows")
    for i, row in enumerate(rows):
        if len(row) != len(names):
            raise ValueError(
                f"{source}: data row {i + 1} has {len(row)} fields, expected {len(names)}"
            )
    columns = np.asarray(rows, dtype=str).T
    missing = set(missing_values)
    t = names.index(target)
    target_values = columns[t]
    bad = np.flatnonzero(np.isin(target_values, list(missing)))
    if bad.size:
        raise ValueError(f"{source}: target {target!r} is missing in data row {bad[0] + 1}")
    labels = _binary_labels(target_values, target, positive, source)

    blocks, feature_names = [], []
    for j, name in enumerate(names):
        if j == t:
            continue
        col = columns[j]
        is_missing = np.isin(col, list(missing))
        numbers = _parse_numeric(col[~is_missing])
        if numbers is not None:
            x = np.full(col.shape, np.nan)
            x[~is_missing] = numbers
            x[is_missing] = np.median(x[~is_missing])
            if standardize:
                std = x.std()
                x = (x - x.mean()) / (std if std > 0 else 1.0)
            blocks.append(x[:, None])
            feature_names.append(name)
            if is_missing.any():
                blocks.append(is_missing[:, None].astype(np.float64))
                feature_names.append(name + MISSING_SUFFIX)
        else:
            col = np.where(is_missing, MISSING_SUFFIX, col)
            categories, inverse = np.unique(col, return_inverse=True)
            one_hot = np.zeros((col.shape[0], categories.shape[0]))
            one_hot[np.arange(col.shape[0]), inverse.reshape(-1)] = 1.0
            blocks.append(one_hot)
            feature_names += [
                name + (c if c == MISSING_SUFFIX else f"={c}") for c in categories.tolist()
            ]
    features = (
        np.concatenate(blocks, axis=1) if blocks else np.zeros((len(rows), 0), dtype=np.float64)
    )
    return Table(
        features=features.astype(np.float32),
        labels=labels,
        feature_names=tuple(feature_names),
        target_values=target_values,
    )


# ----------------------------------------------------------------------------------------------
# UCI Adult
# ----------------------------------------------------------------------------------------------

ADULT_TARGET = "income"


def adult_column_names(names_path: str | os.PathLike[str]) -> list[str]:
    """Column names from UCI's ``adult.names``: its 14 ``attribute: ...`` lines, then ``income``.

    Raises:
      FileNotFoundError: if the file does not exist.
      ValueError: if it does not describe 14 attributes.
    """
    path = Path(names_path)
    if not path.is_file():
        raise FileNotFoundError(f"adult.names not found: {path} (or pass names=)")
    pattern = re.compile(r"^([A-Za-z][\w-]*):\s*\S")
    names = [m.group(1) for line in path.read_text().splitlines() if (m := pattern.match(line))]
    if len(names) != 14:
        raise ValueError(f"{path}: expected 14 attribute lines, found {len(names)}: {names}")
    return [*names, ADULT_TARGET]


def read_adult(
    folder: str | os.PathLike[str],
    *,
    names: Sequence[str] | None = None,
    standardize: bool = True,
) -> tuple[Table, np.ndarray]:
    """UCI Adult from ``adult.data`` (split ``train``) and ``adult.test`` (split ``test``).

    Label 1 = income ``>50K`` (the test file's trailing ``'.'`` is dropped). Fields are
    separated by ``", "`` and ``'?'`` marks missing values (handled as in :func:`encode_table`,
    over both files together). A header line (first field not a number) and UCI's ``'|'``
    comment line are skipped, so both the UCI originals and copies with a header line work.

    Args:
      folder: the folder holding ``adult.data``, ``adult.test`` and (unless ``names`` is given)
        ``adult.names``.
      names: the 15 column names, the target last (default: from ``adult.names``).
      standardize: z-score numeric columns.

    Returns:
      ``(table, split)`` with ``split`` ``"train"``/``"test"`` per row.

    Raises:
      FileNotFoundError: if the folder or a file is missing.
      ValueError: if ``names`` does not have 15 entries or a row is malformed.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"UCI Adult folder not found: {root}")
    names = list(names) if names is not None else adult_column_names(root / "adult.names")
    if len(names) != 15:
        raise ValueError(f"names must have 15 entries (14 attributes + target), got {len(names)}")
    rows, split = [], []
    for part, file_name in (("train", "adult.data"), ("test", "adult.test")):
        part_rows = read_csv_rows(root / file_name, comment="|")
        if part_rows and _as_float(part_rows[0][0]) is None:
            part_rows = part_rows[1:]  # header line
        for row in part_rows:
            if row:
                row[-1] = row[-1].rstrip(".")
        rows += part_rows
        split += [part] * len(part_rows)
    table = encode_table(
        rows,
        names,
        names[-1],
        positive=">50K",
        missing_values=("?",),
        standardize=standardize,
        source=str(root),
    )
    return table, np.asarray(split)


# ----------------------------------------------------------------------------------------------
# UCI Letter
# ----------------------------------------------------------------------------------------------


def read_letter(
    path: str | os.PathLike[str],
    *,
    positive_letter: str | Collection[str] = "O",
    standardize: bool = True,
) -> tuple[Table, np.ndarray]:
    """UCI Letter Recognition: 16 integer features, label 1 for ``positive_letter``.

    The default ``'O'`` against the rest is Caruana's LETTER.p1 (about 4% positive);
    ``positive_letter="ABCDEFGHIJKLM"`` (each character a positive letter) is LETTER.p2. A header
    line (first field longer than one character) is skipped.

    Args:
      path: ``letter-recognition.data``, or the folder holding it.
      positive_letter: one letter, a string of letters, or a collection of letters.
      standardize: z-score the features.

    Returns:
      ``(table, letters)``: the table and each row's letter (for multiclass use).

    Raises:
      FileNotFoundError: if the file is missing.
      ValueError: if ``positive_letter`` holds anything but single letters A-Z.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "letter-recognition.data"
    letters = (
        list(positive_letter)
        if isinstance(positive_letter, str)
        else [str(x) for x in positive_letter]
    )
    if not letters or any(len(x) != 1 or not ("A" <= x.upper() <= "Z") for x in letters):
        raise ValueError(f"positive_letter must be letters A-Z, got {positive_letter!r}")
    rows = read_csv_rows(path)
    if rows and len(rows[0][0]) != 1:
        rows = rows[1:]  # header line
    table = encode_table(
        rows,
        LETTER_COLUMNS,
        LETTER_COLUMNS[0],
        positive=[x.upper() for x in letters],
        standardize=standardize,
        source=str(path),
    )
    return table, table.target_values
