"""Tabular data: delimited text files read by pandas, encoded with scikit-learn, and UCI's files.

:func:`read_csv_frame` reads a delimited file as people have it: comma, semicolon, tab or ``|``
separated (detected from the first lines by :class:`csv.Sniffer`, or named), quoted names and
fields, a UTF-8 byte-order mark, Windows line ends. Every field is kept as a stripped string.

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

Bad input raises :class:`ArgumentError`, a ``ValueError`` that knows which argument was at fault,
so that a command line can word the same message with its own flag.
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

__all__ = [
    "DEFAULT_MISSING",
    "DELIMITERS",
    "LETTER_COLUMNS",
    "UCI_FILES",
    "ArgumentError",
    "ArgumentFileNotFoundError",
    "Table",
    "adult_column_names",
    "check_uci_folder",
    "detect_delimiter",
    "encode_table",
    "read_adult",
    "read_csv_frame",
    "read_letter",
]

DEFAULT_MISSING = ("", "?", "NA", "N/A", "NaN", "nan")
MISSING_SUFFIX = "=<missing>"
# Field separators that are detected; any other single character can be named.
DELIMITERS = (",", ";", "\t", "|")
# Bytes read to detect the delimiter: enough for the header and a few hundred rows.
_SNIFF_BYTES = 64 * 1024

# Attribute names of UCI's letter-recognition.names, the class first.
LETTER_COLUMNS = (
    "lettr", "x-box", "y-box", "width", "high", "onpix", "x-bar", "y-bar", "x2bar", "y2bar",
    "xybar", "x2ybr", "xy2br", "x-ege", "xegvy", "y-ege", "yegvx",
)  # fmt: skip

#: The files each UCI table is read from, in its folder (``adult.names`` gives Adult's columns).
UCI_FILES = {
    "adult": ("adult.data", "adult.test", "adult.names"),
    "letter": ("letter-recognition.data",),
}


def check_uci_folder(dataset: str, folder: str | os.PathLike[str], argument: str) -> Path:
    """The folder of the UCI table ``dataset``, checked to hold each of its :data:`UCI_FILES`.

    Raises:
      FileNotFoundError: naming ``argument`` and the missing folder or file.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"{argument}: folder not found: {root}")
    for file_name in UCI_FILES[dataset]:
        if not (root / file_name).is_file():
            raise FileNotFoundError(
                f"{argument}: {root / file_name} not found (needed by {dataset})"
            )
    return root


# ----------------------------------------------------------------------------------------------
# Errors that name the argument as the caller wrote it
# ----------------------------------------------------------------------------------------------


def _shown(value: object) -> str:
    """A short, unambiguous rendering of an argument's value for a message."""
    if isinstance(value, pd.DataFrame):
        return f"<DataFrame of {value.shape[0]} rows x {value.shape[1]} columns>"
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return repr(value)


class ArgumentError(ValueError):
    """Bad input traced to one argument, with a message that names it as the caller wrote it.

    The message is ``template.format(arg=..., given=..., **details)``. ``{arg}`` is the
    argument's name and ``{given}`` the name with the value passed, spelled for a library call
    (``positive=``, ``positive='q'``) unless :meth:`for_flags` maps the argument to the flag of
    a command line (``--positive``, ``--positive 'q'``). The details are inserted as values, so
    data in them (braces included) never changes the template.

    Attributes:
      argument: the library argument at fault (``"target"``, ``"positive"``, ``"path"``, ...).
      value: the value it was given.
      flag: the command-line flag standing for it, or None for a library call.
    """

    def __init__(
        self, argument: str, value: object, template: str, *, flag: str | None = None, **details
    ) -> None:
        self.argument = argument
        self.value = value
        self.template = template
        self.details = details
        self.flag = flag
        super().__init__(self._message())

    def _message(self) -> str:
        if self.flag is None:
            arg, given = f"{self.argument}=", f"{self.argument}={_shown(self.value)}"
        else:
            arg = self.flag
            given = self.flag if self.value is None else f"{self.flag} {_shown(self.value)}"
        return self.template.format(arg=arg, given=given, **self.details)

    def renamed(self, argument: str, value: object) -> ArgumentError:
        """The same error, charged to ``argument`` of a caller that passed ``value`` for it."""
        return type(self)(argument, value, self.template, flag=self.flag, **self.details)

    def for_flags(self, flags: Mapping[str, str]) -> ArgumentError:
        """The same error worded with the command-line flag that ``flags`` maps its argument to
        (itself when ``flags`` does not name that argument)."""
        if self.argument not in flags:
            return self
        return type(self)(
            self.argument, self.value, self.template, flag=flags[self.argument], **self.details
        )


class ArgumentFileNotFoundError(ArgumentError, FileNotFoundError):
    """A file named by an argument does not exist (also a ``FileNotFoundError``)."""


# ----------------------------------------------------------------------------------------------
# Reading delimited text
# ----------------------------------------------------------------------------------------------


def _sample_lines(path: Path, comment: str | None) -> list[str]:
    """The first whole, non-blank, non-comment lines of ``path`` (at most ``_SNIFF_BYTES``)."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        text = f.read(_SNIFF_BYTES)
        complete = len(text) < _SNIFF_BYTES
    lines = text.splitlines()
    if not complete and len(lines) > 1:
        lines = lines[:-1]  # cut inside a line
    return [s for s in lines if s.strip() and not (comment and s.lstrip().startswith(comment))]


def detect_delimiter(lines: Sequence[str]) -> csv.Dialect:
    """The dialect (delimiter, quote character) of the first lines of a delimited file.

    :class:`csv.Sniffer` looks for the one of :data:`DELIMITERS` that splits every line into the
    same number of fields (quoted fields taken into account); when a ragged line defeats that, the
    header line alone decides.

    Raises:
      csv.Error: if no delimiter fits.
    """
    sniffer = csv.Sniffer()
    try:
        return sniffer.sniff("\n".join(lines), delimiters="".join(DELIMITERS))
    except csv.Error:
        if not lines:
            raise
        return sniffer.sniff(lines[0], delimiters="".join(DELIMITERS))


def _check_delimiter(delimiter: str | None) -> str | None:
    if delimiter is None:
        return None
    named = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "space": " "}
    value = named.get(delimiter.lower(), delimiter) if isinstance(delimiter, str) else delimiter
    if not isinstance(value, str) or len(value) != 1 or value in "\"'\r\n":
        raise ArgumentError(
            "delimiter",
            delimiter,
            "{given}: the delimiter must be one character other than a quote or a line end "
            "(or tab, comma, semicolon, space)",
        )
    return value


def read_csv_frame(
    path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    header: bool = True,
    comment: str | None = None,
) -> pd.DataFrame:
    """All non-blank rows of a delimited text file, every field a string stripped of spaces.

    Args:
      path: the file (UTF-8, with or without a byte-order mark; any line ends).
      delimiter: the field separator (one character; ``"tab"`` for a tab). ``None``: detected
        among :data:`DELIMITERS` by :func:`detect_delimiter`.
      header: the first row holds the column names (else columns are numbered from 0).
      comment: lines starting with this character are skipped (UCI's ``"|"``).

    Returns:
      A frame of ``str`` fields (empty fields are ``""``, not NaN).

    Raises:
      ArgumentFileNotFoundError: if the file does not exist (argument ``path``).
      ArgumentError: naming ``delimiter`` when it is malformed or cannot be detected, or
        ``path`` when the file is not UTF-8 text, is empty, has a row with too few or too many
        fields, or (with ``header``) repeats a column name.
    """
    delimiter = _check_delimiter(delimiter)
    if not Path(path).is_file():
        raise ArgumentFileNotFoundError("path", path, "{given}: file not found")
    try:
        lines = _sample_lines(Path(path), comment)
    except UnicodeDecodeError as err:
        raise ArgumentError(
            "path", path, "{given}: not UTF-8 text ({reason}); save it as UTF-8", reason=str(err)
        ) from None
    if not lines:
        raise ArgumentError("path", path, "{given}: the file holds no rows")
    quotechar = '"'
    skip = None
    if comment:
        # Skipped by line number: pandas' comment= option would also cut lines at a comment
        # character inside them, and is slow in the python engine.
        with open(path, encoding="utf-8-sig", newline="") as f:
            skip = [i for i, line in enumerate(f) if line.lstrip().startswith(comment)]
    if delimiter is None:
        try:
            dialect = detect_delimiter(lines)
        except csv.Error:
            raise ArgumentError(
                "delimiter",
                None,
                "could not detect the field delimiter of {path} (none of {choices} splits its "
                "first line {first!r} into columns); pass {arg} naming it",
                path=os.fspath(path),
                choices=", ".join(map(repr, DELIMITERS)),
                first=lines[0][:120],
            ) from None
        delimiter, quotechar = dialect.delimiter, dialect.quotechar or '"'
    try:
        frame = pd.read_csv(
            path,
            sep=delimiter,
            quotechar=quotechar,
            header=None,
            dtype=str,
            na_filter=False,
            skipinitialspace=True,
            skip_blank_lines=True,
            skiprows=skip,
            encoding="utf-8-sig",
            # The python engine marks the fields a short row lacks as NaN (the C engine gives "").
            engine="python",
        )
    except pd.errors.ParserError as err:
        raise ArgumentError(
            "path",
            path,
            "{given}: rows differ in their number of fields with delimiter {delimiter!r} "
            "({reason})",
            delimiter=delimiter,
            reason=str(err).strip(),
        ) from None
    except UnicodeDecodeError as err:
        raise ArgumentError(
            "path", path, "{given}: not UTF-8 text ({reason}); save it as UTF-8", reason=str(err)
        ) from None
    except pd.errors.EmptyDataError:
        raise ArgumentError("path", path, "{given}: the file holds no rows") from None
    values = frame.to_numpy(dtype=object)
    short = pd.isna(values)
    if short.any():
        row = int(np.flatnonzero(short.any(axis=1))[0])
        fields = int((~short[row]).sum())
        raise ArgumentError(
            "path",
            path,
            "{given}: {which} has {fields} field(s), the {first} has {expected} "
            "(delimiter {delimiter!r})",
            which=f"data row {row}" if header else f"row {row + 1}",
            fields=fields,
            first="header" if header else "first row",
            expected=values.shape[1],
            delimiter=delimiter,
        )
    values = np.char.strip(values.astype(str)).astype(object)
    if not header:
        return pd.DataFrame(values, dtype=object)
    names = [str(n) for n in values[0]]
    _check_unique_names(names, "path", path)
    return pd.DataFrame(values[1:], columns=names, dtype=object)


def _check_unique_names(names: Sequence[object], argument: str, value: object) -> None:
    seen, repeated = set(), []
    for name in names:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    if repeated:
        raise ArgumentError(
            argument, value, "{given}: column names repeat: {repeated}", repeated=repeated
        )


# ----------------------------------------------------------------------------------------------
# Encoding
# ----------------------------------------------------------------------------------------------


class Table(NamedTuple):
    """An encoded table: ``features`` float32 ``[N, d]`` and binary ``labels`` int32 ``[N]``."""

    features: np.ndarray
    labels: np.ndarray
    feature_names: tuple[str, ...]
    target_values: np.ndarray  # the raw target values as strings, [N]


def _as_float(value: str) -> float | None:
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
    x = _as_float(value)
    return int(x) if x in (0.0, 1.0) else None


def _matches(value: str, wanted: str) -> bool:
    """Whether a target value is the positive value ``wanted``: the same string, number or truth."""
    if value == wanted:
        return True
    x, y = _as_float(value), _as_float(wanted)
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

    Returns:
      A :class:`Table`.

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
    _check_unique_names(names, "frame", frame)
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


def _without_header_line(frame: pd.DataFrame, is_data: Callable[[str], bool]) -> pd.DataFrame:
    """``frame`` without its first row when that row is a header (its first field not data)."""
    if frame.shape[0] and not is_data(frame.iat[0, 0]):
        return frame.iloc[1:]
    return frame


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
    parts, split = [], []
    for part, file_name in (("train", "adult.data"), ("test", "adult.test")):
        frame = read_csv_frame(root / file_name, delimiter=",", header=False, comment="|")
        frame = _without_header_line(frame, lambda v: _as_float(v) is not None)
        if frame.shape[1] != 15:
            raise ValueError(f"{root / file_name}: expected 15 fields a row, got {frame.shape[1]}")
        frame.columns = names
        parts.append(frame)
        split += [part] * frame.shape[0]
    frame = pd.concat(parts, ignore_index=True)
    frame[names[-1]] = frame[names[-1]].str.rstrip(".")
    table = encode_table(
        frame,
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
    frame = read_csv_frame(path, delimiter=",", header=False)
    frame = _without_header_line(frame, lambda v: len(v) == 1)
    if frame.shape[1] != len(LETTER_COLUMNS):
        raise ValueError(
            f"{path}: expected {len(LETTER_COLUMNS)} fields a row, got {frame.shape[1]}"
        )
    frame.columns = LETTER_COLUMNS
    table = encode_table(
        frame,
        LETTER_COLUMNS[0],
        positive=[x.upper() for x in letters],
        standardize=standardize,
        source=str(path),
    )
    return table, table.target_values
