"""Tabular data: delimited text files read by pandas, and UCI's Adult and Letter files.

:func:`read_csv_frame` reads a delimited file as people have it: comma, semicolon, tab or ``|``
separated (detected from the first lines by :class:`csv.Sniffer`, or named), quoted names and
fields, a UTF-8 byte-order mark, Windows line ends. Every field is kept as a stripped string.
:func:`read_adult` and :func:`read_letter` read UCI's tables from their folder
(:data:`UCI_FILES`, checked by :func:`check_uci_folder`).

Encoding a table into features and labels is :mod:`iml.data.encoding` (:func:`encode_table`,
:class:`Table`, :data:`DEFAULT_MISSING`), and the errors are :mod:`iml.data.errors`
(:class:`ArgumentError`, a ``ValueError`` that knows which argument was at fault, so that a
command line can word the same message with its own flag); both are imported from here too.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from iml.data.encoding import Table, as_float, encode_table
from iml.data.errors import ArgumentError, ArgumentFileNotFoundError, check_unique_names

__all__ = [
    "DELIMITERS",
    "LETTER_COLUMNS",
    "UCI_FILES",
    "adult_column_names",
    "check_uci_folder",
    "detect_delimiter",
    "read_adult",
    "read_csv_frame",
    "read_letter",
]

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
    check_unique_names(names, "path", path)
    return pd.DataFrame(values[1:], columns=names, dtype=object)


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
        frame = _without_header_line(frame, lambda v: as_float(v) is not None)
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
