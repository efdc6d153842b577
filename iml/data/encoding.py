"""Encoding a table into a float32 feature matrix and binary labels (scikit-learn).

:func:`encode_table` turns a table (a :class:`pandas.DataFrame`: read from a file, or built by
the caller) into a float32 feature matrix and binary labels:

* The target column gives the label: 1 where its value is one of ``positive`` (one value, or a
  collection of values: e.g. one letter against the rest, or ``"ABCDEFGHIJKLM"`` split into
  letters by the Letter loader), 0 elsewhere. A value matches ``positive`` when both are the
  same string, the same number (``"1"`` and ``1.0``) or the same truth value (``true``/``false``
  in any case). Without ``positive`` every target value must read as 0/1 or true/false. A
  missing target value, or labels of one class only, is an error.
* A feature column is *numeric* when all its non-missing values parse as finite numbers, and
  *categorical* otherwise. Categorical columns are one-hot encoded over their sorted values
  (:class:`sklearn.preprocessing.OneHotEncoder`).
* Missing values (NaN/None in a frame, or fields equal to one of ``missing_values``, by default
  ``""``, ``"?"``, ``"NA"``, ``"N/A"``, ``"NaN"``, ``"nan"``): in a numeric column they are
  replaced by the column's median and flagged in an added 0/1 column ``"<name>=<missing>"``; in
  a categorical column "missing" is a category of its own (its one-hot column is
  ``"<name>=<missing>"``). Columns without missing values get no such column.
* With ``standardize`` (default) numeric columns are z-scored with the mean and standard
  deviation of the whole table (:class:`sklearn.preprocessing.StandardScaler`: label-free
  statistics, so no label information crosses folds; a constant column becomes 0); one-hot and
  missing-indicator columns stay 0/1.

Bad input raises :class:`~iml.data.errors.ArgumentError`, naming the argument at fault.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from iml.data.errors import ArgumentError, check_unique_names

__all__ = ["DEFAULT_MISSING", "MISSING_SUFFIX", "Table", "as_float", "encode_table"]

DEFAULT_MISSING = ("", "?", "NA", "N/A", "NaN", "nan")
MISSING_SUFFIX = "=<missing>"


class Table(NamedTuple):
    """An encoded table: ``features`` float32 ``[N, d]`` and binary ``labels`` int32 ``[N]``."""

    features: np.ndarray
    labels: np.ndarray
    feature_names: tuple[str, ...]
    target_values: np.ndarray  # the raw target values as strings, [N]


def as_float(value: str) -> float | None:
    try:
        x = float(value)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _truth(value: str) -> bool | None:
    """``True``/``False`` for ``true``/``false`` in any case, else None."""
    return {"true": True, "false": False}.get(value.strip().lower())


def _as_bit(value: str) -> int | None:
    """1/0 for a value that reads as 1/0 or true/false, else None."""
    truth = _truth(value)
    if truth is not None:
        return int(truth)
    x = as_float(value)
    return int(x) if x in (0.0, 1.0) else None


def _matches(value: str, wanted: str) -> bool:
    """Whether a target value is the positive value ``wanted``: the same string, number or truth."""
    if value == wanted:
        return True
    x, y = as_float(value), as_float(wanted)
    if x is not None and y is not None:
        return x == y
    t, u = _truth(value), _truth(wanted)
    return t is not None and t == u


def _found(uniques: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(map(repr, uniques[:limit]))
    return shown + (f", ... ({len(uniques)} values)" if len(uniques) > limit else "")


def _positive_values(positive: object) -> list[str]:
    if isinstance(positive, str | int | float | bool | np.integer | np.floating | np.bool_):
        return [str(positive)]
    if isinstance(positive, Collection) and len(positive) > 0:
        return [str(p) for p in positive]
    raise ArgumentError(
        "positive", positive, "{given}: expected a target value or a collection of values"
    )


def _binary_labels(values: np.ndarray, target: str, positive: object, source: str) -> np.ndarray:
    """Labels from the target's values (rules in the module docstring)."""
    uniques, inverse = np.unique(values, return_inverse=True)
    uniques = uniques.tolist()
    if positive is None:
        bits = [_as_bit(v) for v in uniques]
        if None in bits:
            raise ArgumentError(
                "positive",
                None,
                "target column {column!r} of {source} is not 0/1 or true/false "
                "(values found: {found}); pass {arg} naming its positive value",
                column=target,
                source=source,
                found=_found(uniques),
            )
    else:
        wanted = _positive_values(positive)
        bits = [int(any(_matches(v, w) for w in wanted)) for v in uniques]
        if not any(bits):
            raise ArgumentError(
                "positive",
                positive,
                "{given} never occurs in target column {column!r} of {source} "
                "(values found: {found})",
                column=target,
                source=source,
                found=_found(uniques),
            )
    return np.asarray(bits, dtype=np.int32)[inverse.reshape(-1)]


def _column_strings(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A column's values as stripped strings, and where they are NaN/None."""
    raw = column.to_numpy(dtype=object)
    absent = pd.isna(raw)
    return np.char.strip(np.where(absent, "", raw).astype(str)), absent


def _numeric(column: pd.Series, text: np.ndarray, missing: np.ndarray) -> np.ndarray | None:
    """The non-missing values as float64 when every one is a finite number (and there is one)."""
    if missing.all():
        return None
    if pd.api.types.is_numeric_dtype(column.dtype):
        numbers = column.to_numpy()[~missing].astype(np.float64)
    else:
        try:
            numbers = pd.to_numeric(text[~missing].astype(object)).astype(np.float64)
        except (ValueError, TypeError):
            return None
    return np.asarray(numbers) if np.isfinite(numbers).all() else None


def encode_table(
    frame: pd.DataFrame,
    target: str,
    *,
    positive: object = None,
    missing_values: Collection[str] = DEFAULT_MISSING,
    standardize: bool = True,
    source: str = "the frame",
) -> Table:
    """Encode a table into features and binary labels (rules in the module docstring).

    Example: ``table = encode_table(frame, "y", positive="yes")``, then
    ``iml.pipeline.sweep.run_sweep(table.features, table.labels, None, betas)``.

    Args:
      frame: the table, one column per variable (any dtypes; NaN/None are missing).
      target: the target column's name.
      positive: the positive target value(s); ``None`` when the target is 0/1 or true/false.
      missing_values: field values that mean "missing".
      standardize: z-score numeric columns.
      source: a name for the data used in error messages (e.g. the file path).

    Raises:
      ArgumentError: naming ``frame`` when it is not a DataFrame, has no rows or repeats a
        column name; ``target`` when it is not a column or a target value is missing;
        ``positive`` when it is needed or matches no target value; and ``positive`` (or
        ``target`` without it) when the labels hold one class only.
    """
    # Imported here: scikit-learn is slow to import, and only encoding a table needs it.
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    if not isinstance(frame, pd.DataFrame):
        raise ArgumentError("frame", type(frame).__name__, "{given}: expected a pandas DataFrame")
    names = [str(n) for n in frame.columns]
    check_unique_names(names, "frame", frame)
    if target not in names:
        raise ArgumentError(
            "target",
            target,
            "{given}: no such column in {source}; columns are {columns}",
            source=source,
            columns=names,
        )
    if frame.shape[0] == 0:
        raise ArgumentError("frame", frame, "{given}: {source} holds no data rows", source=source)
    missing_set = {str(m) for m in missing_values}
    t = names.index(target)
    target_values, absent = _column_strings(frame.iloc[:, t])
    bad = np.flatnonzero(absent | np.isin(target_values, list(missing_set)))
    if bad.size:
        raise ArgumentError(
            "target",
            target,
            "{given}: the target is missing in data row {row} of {source} ({count} row(s) in "
            "all); remove those rows",
            row=int(bad[0]) + 1,
            source=source,
            count=bad.size,
        )
    labels = _binary_labels(target_values, target, positive, source)
    if labels.min() == labels.max():
        raise ArgumentError(
            "target" if positive is None else "positive",
            target if positive is None else positive,
            "{given}: every row of target column {column!r} of {source} is {label} (values "
            "found: {found}); both classes are needed",
            column=target,
            source=source,
            label="positive" if labels[0] else "negative",
            found=_found(np.unique(target_values).tolist()),
        )

    blocks, feature_names = [], []
    for j, name in enumerate(names):
        if j == t:
            continue
        column = frame.iloc[:, j]
        text, absent = _column_strings(column)
        missing = absent | np.isin(text, list(missing_set))
        numbers = _numeric(column, text, missing)
        if numbers is not None:
            x = np.empty(text.shape, np.float64)
            x[~missing] = numbers
            x[missing] = np.median(numbers)
            if standardize:
                x = StandardScaler().fit_transform(x[:, None])[:, 0]
            blocks.append(x[:, None])
            feature_names.append(name)
            if missing.any():
                blocks.append(missing[:, None].astype(np.float64))
                feature_names.append(name + MISSING_SUFFIX)
        else:
            values = np.where(missing, MISSING_SUFFIX, text)
            encoder = OneHotEncoder(sparse_output=False, dtype=np.float64)
            blocks.append(encoder.fit_transform(values[:, None]))
            feature_names += [
                name + (c if c == MISSING_SUFFIX else f"={c}") for c in encoder.categories_[0]
            ]
    n = frame.shape[0]
    features = np.concatenate(blocks, axis=1) if blocks else np.zeros((n, 0))
    return Table(
        features=features.astype(np.float32),
        labels=labels,
        feature_names=tuple(feature_names),
        target_values=target_values,
    )
