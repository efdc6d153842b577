"""One interface to every data source: ``load_dataset(name, ...) -> Dataset``.

Image sources (``digits``, ``pneumoniamnist``, ``chestxray14``) are TFDS builders prepared once
into ``data_dir`` (``array_record`` files; default ``~/.cache/iml/tfds`` or ``$IML_DATA_DIR``)
and then read with random access through ``builder.as_data_source()`` (:mod:`iml.data.prepared`,
whose :data:`ENV_DATA_DIR` and :func:`default_data_dir` are imported from here too). Tabular
sources (``csv``, ``adult``, ``letter``) are read with pandas and encoded with scikit-learn into
arrays held in memory.

A :class:`Dataset` concatenates the official splits (where there are any) in a fixed order and
records them in ``split``; the experiment pipeline makes its own nested cross-validation folds
(:mod:`iml.data.folds`) over all examples, grouped by ``groups``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from iml import _validation as V
from iml.data.builders.chestxray14.chestxray14_dataset_builder import (
    Chestxray14,
    find_label_file,
)
from iml.data.builders.digits.digits_dataset_builder import Digits
from iml.data.builders.pneumoniamnist.pneumoniamnist_dataset_builder import (
    Pneumoniamnist,
    npz_file_name,
)
from iml.data.encoding import DEFAULT_MISSING, Table, encode_table
from iml.data.errors import ArgumentError
from iml.data.prepared import (
    DataSourceReader,
    prepared_builder,
    read_prepared,
)
from iml.data.tabular import UCI_FILES, read_adult, read_csv_frame
from iml.data.tabular import read_letter as _read_letter

__all__ = [
    "DATASETS",
    "DEFAULT_POSITIVE_DIGIT",
    "Dataset",
    "Source",
    "load_csv",
    "load_dataset",
    "register_dataset",
    "unregister_dataset",
]

# Digit 8 is one of the digits most often confused with others (3, 1, 9), so a classifier's
# scores spread over (0, 1) instead of collapsing onto 0 and 1 as they do for an easy digit such
# as 0; 174 of the 1,797 images (9.7%) are eights.
DEFAULT_POSITIVE_DIGIT = 8


# ----------------------------------------------------------------------------------------------
# The Dataset
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """A binary classification dataset with per-example metadata and random access to inputs.

    Attributes:
      name: the source name (``"digits"``, ``"chestxray14"``, ...).
      labels: int32 ``[N]`` binary labels (1 = the positive, usually rare, class).
      groups: ``[N]`` group of each example for grouped folds: patient ids where the source has
        them (ChestX-ray14), else ``np.arange(N)``.
      ids: ``[N]`` identifiers (image file names, ``"split/index"`` strings or row numbers).
      input_shape: shape of one input: ``(H, W, 1)`` images or ``(d,)`` features.
      kind: ``"image"`` (uint8 NHWC batches) or ``"tabular"`` (float32 batches).
      reader: ``indices -> batch``; use :meth:`get_batch`, which validates the indices.
      split: ``[N]`` official split of each example (``"train"``, ``"val"``, ``"test"``) where the
        source defines one, else None.
      classes: int32 ``[N]`` original class of each example for multiclass sources (digit,
        letter index), else None.
      class_names: names of those classes, else None.
      feature_names: names of the tabular feature columns, else None.
    """

    name: str
    labels: np.ndarray
    groups: np.ndarray
    ids: np.ndarray
    input_shape: tuple[int, ...]
    kind: Literal["image", "tabular"]
    reader: Callable[[np.ndarray], np.ndarray] = dataclasses.field(repr=False)
    split: np.ndarray | None = None
    classes: np.ndarray | None = None
    class_names: tuple[str, ...] | None = None
    feature_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        labels = np.asarray(self.labels)
        if labels.ndim != 1 or not np.isin(labels, (0, 1)).all():
            raise ValueError(f"labels must be a 1-D array of 0/1, got shape {labels.shape}")
        n = labels.shape[0]
        object.__setattr__(self, "labels", labels.astype(np.int32))
        for field in ("groups", "ids", "split", "classes"):
            value = getattr(self, field)
            if value is not None:
                V.check_shape(field, value, (n,))
        if self.kind not in ("image", "tabular"):
            raise ValueError(f"kind must be 'image' or 'tabular', got {self.kind!r}")

    @property
    def num_examples(self) -> int:
        """Number of examples ``N``."""
        return int(self.labels.shape[0])

    @property
    def prevalence(self) -> float:
        """Fraction of positive labels, ``P(y = 1)``."""
        return float(self.labels.mean()) if self.num_examples else float("nan")

    def feature_matrix(self) -> np.ndarray:
        """All inputs as one ``float32 [N, d]`` table, for the small models of the sweeps:
        tabular rows as loaded, images flattened and z-scored pixel by pixel (pixels constant
        over the data stay 0)."""
        x = self.get_batch(np.arange(self.num_examples))
        if self.kind == "tabular":
            return x
        x = x.reshape(len(x), -1).astype(np.float32)
        sd = x.std(axis=0)
        return ((x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)).astype(np.float32)

    def get_batch(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Inputs of the examples at ``indices`` (random access, any order, repeats allowed).

        Returns:
          ``uint8 [B, H, W, 1]`` for images, ``float32 [B, d]`` for tabular data.

        Raises:
          ValueError: if ``indices`` is not a 1-D integer array within ``[0, N)``.
        """
        idx = np.asarray(indices)
        if idx.size == 0:
            idx = idx.astype(np.int64).reshape(0)
        if idx.ndim != 1 or idx.dtype.kind not in "iu":
            raise ValueError(
                f"indices must be a 1-D integer array, got shape {idx.shape} dtype {idx.dtype}"
            )
        if idx.size and (idx.min() < 0 or idx.max() >= self.num_examples):
            raise ValueError(
                f"indices must lie in [0, {self.num_examples}), got [{idx.min()}, {idx.max()}]"
            )
        return self.reader(idx.astype(np.int64))


# ----------------------------------------------------------------------------------------------
# TFDS-backed image sources
# ----------------------------------------------------------------------------------------------


def _image_dataset(builder: Any, sources: list[Any], **fields: Any) -> Dataset:
    """The :class:`Dataset` of a prepared builder's ``sources``, named as the builder."""
    size = builder.builder_config.image_size
    shape = (size, size, 1)
    return Dataset(
        name=builder.name,
        input_shape=shape,
        kind="image",
        reader=DataSourceReader(sources, shape),
        **fields,
    )


def _load_digits(
    data_dir: str | os.PathLike[str] | None,
    manual_dir: Path | None,  # digits needs no raw files
    image_size: int | None,
    positive_digit: int = DEFAULT_POSITIVE_DIGIT,
) -> Dataset:
    if (
        isinstance(positive_digit, bool)
        or not isinstance(positive_digit, int | np.integer)
        or not 0 <= positive_digit <= 9
    ):
        raise ValueError(f"positive_digit must be an integer 0-9, got {positive_digit!r}")
    builder = prepared_builder(
        Digits, name="digits", image_size=image_size, data_dir=data_dir, manual_dir=None
    )
    sources, columns, _ = read_prepared(builder, ["train"], check=["digit"])
    digits = columns["digit"].astype(np.int32)
    return _image_dataset(
        builder,
        sources,
        labels=(digits == positive_digit).astype(np.int32),
        groups=np.arange(len(digits)),
        ids=np.arange(len(digits)),
        classes=digits,
        class_names=tuple(str(d) for d in range(10)),
    )


def _check_pneumoniamnist_file(file_name: str, manual_dir: Path) -> None:
    if not (manual_dir / file_name).is_file():
        raise FileNotFoundError(
            f"pneumoniamnist: {manual_dir / file_name} not found (MedMNIST's file; "
            "iml.data.assemble_pneumoniamnist can rebuild it from the partial copies)"
        )


def _load_pneumoniamnist(
    data_dir: str | os.PathLike[str] | None, manual_dir: Path | None, image_size: int | None
) -> Dataset:
    file_name = npz_file_name(28 if image_size is None else image_size)  # checks the size
    builder = prepared_builder(
        Pneumoniamnist,
        name="pneumoniamnist",
        image_size=image_size,
        data_dir=data_dir,
        manual_dir=manual_dir,
        check_manual=functools.partial(_check_pneumoniamnist_file, file_name),
    )
    splits = ("train", "val", "test")
    sources, columns, split = read_prepared(builder, splits, check=["label"])
    within = np.concatenate([np.arange(np.sum(split == s)) for s in splits])
    return _image_dataset(
        builder,
        sources,
        labels=columns["label"].astype(np.int32),
        groups=np.arange(len(split)),
        ids=np.char.add(np.char.add(split.astype(str), "/"), within.astype(str)),
        split=split,
    )


def _check_chestxray14_dir(manual_dir: Path) -> None:
    find_label_file(manual_dir)
    for name in ("train_val_list.txt", "test_list.txt"):
        if not (manual_dir / name).is_file():
            raise FileNotFoundError(f"chestxray14: split list {manual_dir / name} not found")


def _load_chestxray14(
    data_dir: str | os.PathLike[str] | None, manual_dir: Path | None, image_size: int | None
) -> Dataset:
    builder = prepared_builder(
        Chestxray14,
        name="chestxray14",
        image_size=image_size,
        data_dir=data_dir,
        manual_dir=manual_dir,
        check_manual=_check_chestxray14_dir,
    )
    sources, columns, split = read_prepared(
        builder, ["train", "test"], check=["image_id", "label", "patient_id"]
    )
    return _image_dataset(
        builder,
        sources,
        labels=columns["label"].astype(np.int32),
        groups=columns["patient_id"].astype(np.int32),
        ids=columns["image_id"].astype(str),
        split=split,
    )


# ----------------------------------------------------------------------------------------------
# Tabular sources
# ----------------------------------------------------------------------------------------------


def _tabular_dataset(
    name: str,
    table: Table,
    *,
    split: np.ndarray | None = None,
    classes: np.ndarray | None = None,
    class_names: tuple[str, ...] | None = None,
) -> Dataset:
    features = np.ascontiguousarray(table.features, dtype=np.float32)
    n = features.shape[0]
    return Dataset(
        name=name,
        labels=table.labels,
        groups=np.arange(n),
        ids=np.arange(n),
        input_shape=(features.shape[1],),
        kind="tabular",
        reader=features.__getitem__,
        split=split,
        classes=classes,
        class_names=class_names,
        feature_names=table.feature_names,
    )


def load_csv(
    path: str | os.PathLike[str] | None = None,
    target: str | None = None,
    *,
    frame: pd.DataFrame | None = None,
    positive: object = None,
    names: Sequence[str] | None = None,
    header: bool | None = None,
    delimiter: str | None = None,
    missing_values: Collection[str] = DEFAULT_MISSING,
    standardize: bool = True,
) -> Dataset:
    """A delimited text file, or a pandas DataFrame, with a named target column as a tabular
    :class:`Dataset`.

    The file is read by :func:`iml.data.tabular.read_csv_frame` (comma, semicolon, tab or ``|``
    detected; quotes, a byte-order mark and Windows line ends handled). Encoding and missing
    values as in :mod:`iml.data.encoding`: numeric columns (median-imputed, with a missing
    indicator where needed, z-scored when ``standardize``), categorical columns one-hot (missing
    as a category of its own).

    Args:
      path: the file; or None with ``frame``.
      target: name of the target column.
      frame: the table itself instead of ``path`` (``names``, ``header`` and ``delimiter``
        apply to files only).
      positive: the positive target value, or a collection of them (e.g. one letter against
        the rest); may be omitted when the target is 0/1 or true/false.
      names: column names; default: the file's first row.
      header: whether the first row is a header (default: ``names is None``). With ``names``
        and ``header=True`` the file's header row is skipped and ``names`` used instead.
      delimiter: field separator (one character, or ``"tab"``); default: detected.
      missing_values: field values meaning "missing".
      standardize: z-score numeric columns.

    Raises:
      ArgumentFileNotFoundError: if ``path`` does not exist (also a ``FileNotFoundError``).
      ArgumentError: a ``ValueError`` naming the argument at fault (``path``, ``frame``,
        ``target``, ``positive``, ``delimiter``, ``names``), the column and the values found:
        see :func:`~iml.data.tabular.read_csv_frame` and :func:`~iml.data.encoding.encode_table`.
    """
    if (path is None) == (frame is None):
        raise ArgumentError("path", path, "{given}: give exactly one of path= or frame=")
    if target is None:
        raise ArgumentError("target", None, "{given}: name the target column")
    if frame is not None:
        for argument, value in (("names", names), ("header", header), ("delimiter", delimiter)):
            if value is not None:
                raise ArgumentError(argument, value, "{given}: applies to files only, not frame=")
        return _tabular_dataset(
            "csv",
            encode_table(
                frame,
                target,
                positive=positive,
                missing_values=missing_values,
                standardize=standardize,
            ),
        )
    header = names is None if header is None else header
    if names is None and not header:
        raise ArgumentError("names", None, "{given}: column names are needed when header=False")
    table = read_csv_frame(path, delimiter=delimiter, header=header)
    if names is not None:
        if len(names) != table.shape[1]:
            raise ArgumentError(
                "names",
                list(names),
                "{given}: {count} names for {fields} columns in {path}",
                count=len(names),
                fields=table.shape[1],
                path=os.fspath(path),
            )
        table.columns = [str(n) for n in names]
    try:
        encoded = encode_table(
            table,
            target,
            positive=positive,
            missing_values=missing_values,
            standardize=standardize,
            source=os.fspath(path),
        )
    except ArgumentError as err:
        # The frame that encode_table was given is the file this function was given.
        if err.argument == "frame":
            raise err.renamed("path", path) from None
        raise
    return _tabular_dataset("csv", encoded)


def _load_letter(
    manual_dir: Path | None, positive_letter: str | Collection[str] = "O", standardize: bool = True
) -> Dataset:
    if manual_dir is None:
        raise ValueError(f"letter needs manual_dir= (the folder holding {UCI_FILES['letter'][0]})")
    table, letters = _read_letter(
        manual_dir, positive_letter=positive_letter, standardize=standardize
    )
    alphabet = tuple(chr(ord("A") + k) for k in range(26))
    classes = np.searchsorted(np.asarray(alphabet), letters).astype(np.int32)
    return _tabular_dataset("letter", table, classes=classes, class_names=alphabet)


def _load_adult(
    manual_dir: Path | None, names: Sequence[str] | None = None, standardize: bool = True
) -> Dataset:
    if manual_dir is None:
        raise ValueError(
            "adult needs manual_dir= (the folder holding " + ", ".join(UCI_FILES["adult"]) + ")"
        )
    table, split = read_adult(manual_dir, names=names, standardize=standardize)
    return _tabular_dataset("adult", table, split=split)


# ----------------------------------------------------------------------------------------------
# The registry
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Source:
    """A dataset by name: what it is, the options it takes and how it loads.

    Attributes:
      kind: ``"image"`` or ``"tabular"``.
      options: the keyword options :func:`load_dataset` passes on (besides ``data_dir``,
        ``manual_dir`` and ``image_size``).
      load: ``(data_dir, manual_dir, image_size, **options) -> Dataset`` for image sources,
        ``(manual_dir, **options) -> Dataset`` for tables (``manual_dir`` checked to exist).
      classes: whether the source has classes beyond its binary label (``Dataset.classes``),
        for multiclass losses.
    """

    kind: Literal["image", "tabular"]
    options: frozenset[str]
    load: Callable[..., Dataset]
    classes: bool = False


def _load_csv_source(manual_dir: Path | None, **options: Any) -> Dataset:
    if "target" not in options or ("path" in options) == ("frame" in options):
        raise ValueError("dataset 'csv' needs option target= and one of path= or frame=")
    return load_csv(**options)


_CSV_OPTIONS = ("path", "frame", "target", "positive", "names", "header", "delimiter",
                "missing_values", "standardize")  # fmt: skip

#: Every dataset :func:`load_dataset` knows, by name. A new source is one entry here (and its
#: loader), or, from outside the package, one call of :func:`register_dataset`.
DATASETS: dict[str, Source] = {
    "digits": Source("image", frozenset({"positive_digit"}), _load_digits, classes=True),
    "pneumoniamnist": Source("image", frozenset(), _load_pneumoniamnist),
    "chestxray14": Source("image", frozenset(), _load_chestxray14),
    "csv": Source("tabular", frozenset(_CSV_OPTIONS), _load_csv_source),
    "adult": Source("tabular", frozenset({"names", "standardize"}), _load_adult),
    "letter": Source(
        "tabular", frozenset({"positive_letter", "standardize"}), _load_letter, classes=True
    ),
}


#: The keywords :func:`load_dataset` takes itself; a source's options must not repeat them.
_LOADER_KEYWORDS = frozenset({"name", "data_dir", "manual_dir", "image_size"})


def register_dataset(
    name: str,
    load: Callable[..., Dataset],
    *,
    kind: Literal["image", "tabular"],
    options: Iterable[str] = (),
    classes: bool = False,
) -> Source:
    """Register the dataset ``name`` (replacing one of that name) and return its :class:`Source`.

    ``load`` is called by :func:`load_dataset` as ``load(data_dir, manual_dir, image_size,
    **options)`` for ``kind="image"`` and ``load(manual_dir, **options)`` for
    ``kind="tabular"``, and returns a :class:`Dataset`: ``labels [N]`` of 0 and 1, ``groups``
    and ``ids [N]``, ``input_shape`` (``(H, W, C)`` uint8 images or ``(d,)`` float32 feature
    rows), its ``kind`` and a ``reader`` from indices to a batch; ``classes [N]`` too where
    ``classes`` is True (a multiclass source).

    Raises:
      ValueError: for an empty name, a ``load`` that is not callable, a kind other than
        ``"image"`` or ``"tabular"``, or options that are not identifiers or that repeat
        :func:`load_dataset`'s own keywords.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a dataset's name must be a non-empty string, got {name!r}")
    if not callable(load):
        raise ValueError(f"dataset {name!r}: load must be callable, got {type(load).__name__}")
    if kind not in ("image", "tabular"):
        raise ValueError(f"dataset {name!r}: kind must be 'image' or 'tabular', got {kind!r}")
    if isinstance(options, str):
        raise ValueError(f"dataset {name!r}: options must be a collection of names, not a string")
    taken = frozenset(options)
    bad = sorted(o for o in taken if not (isinstance(o, str) and o.isidentifier()))
    if bad:
        raise ValueError(f"dataset {name!r}: options must be identifiers, got {bad}")
    clash = sorted(taken & _LOADER_KEYWORDS)
    if clash:
        raise ValueError(f"dataset {name!r}: options {clash} are load_dataset's own keywords")
    if not isinstance(classes, bool):
        raise ValueError(f"dataset {name!r}: classes must be True or False, got {classes!r}")
    source = Source(kind, taken, load, classes=classes)
    DATASETS[name] = source
    return source


def unregister_dataset(name: str) -> None:
    """Remove the dataset ``name`` from the registry (a no-op where it is absent)."""
    DATASETS.pop(name, None)


# ----------------------------------------------------------------------------------------------
# The entry point
# ----------------------------------------------------------------------------------------------


def load_dataset(
    name: str = "digits",
    *,
    data_dir: str | os.PathLike[str] | None = None,
    manual_dir: str | os.PathLike[str] | None = None,
    image_size: int | None = None,
    **options: Any,
) -> Dataset:
    """Load a dataset by name, preparing it first if needed (image sources only).

    Sources and their options:

    * ``"digits"`` (default; needs no files): scikit-learn's 1,797 handwritten digits, label 1 for
      ``positive_digit`` (default :data:`DEFAULT_POSITIVE_DIGIT` = 8, 9.7% positive). Native
      size 8 px; other ``image_size`` values are bilinear resizes.
    * ``"pneumoniamnist"``: MedMNIST's ``pneumoniamnist.npz`` in ``manual_dir`` (for
      ``image_size`` 64/128/224: ``pneumoniamnist_64.npz`` etc.; MedMNIST's files are at
      https://zenodo.org/records/10519652); splits train/val/test.
    * ``"chestxray14"``: the NIH Clinical Center's ChestX-ray14 release in ``manual_dir``
      (https://nihcc.app.box.com/v/ChestXray-NIHCC; the layout is in
      :mod:`iml.data.builders.chestxray14.chestxray14_dataset_builder`); ``image_size`` default
      224; ``groups`` are patient ids and ``split`` the official train_val (``"train"``) / test
      lists.
    * ``"csv"``: options ``path`` (a delimited text file) or ``frame`` (a pandas DataFrame),
      ``target``, ``positive`` and the rest of :func:`load_csv`.
    * ``"adult"``: UCI Adult from ``manual_dir`` (``adult.data``, ``adult.test``, ``adult.names``
      from the UCI Machine Learning Repository, https://archive.ics.uci.edu/dataset/2/adult);
      label ``>50K``; options ``names``, ``standardize``.
    * ``"letter"``: UCI Letter Recognition from ``manual_dir`` (``letter-recognition.data`` from
      the UCI Machine Learning Repository, https://archive.ics.uci.edu/dataset/59); option
      ``positive_letter`` (default ``"O"``; a string of several letters makes them all positive),
      ``standardize``.

    Args:
      name: one of :data:`DATASETS`.
      data_dir: where prepared image data is kept (default :func:`default_data_dir`); preparation
        happens on the first load of a (source, image size) and is reused afterwards.
      manual_dir: folder with the raw files, for the sources that need them.
      image_size: side of the square images (image sources only; ``None``: the source's default).
      **options: source-specific options listed above.

    Raises:
      ValueError: for an unknown name or option, a bad option value, or ``image_size`` given to
        a tabular source; all before any file is read.
      FileNotFoundError: for a missing ``manual_dir``, CSV file or raw file, naming it.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset name {name!r}; expected one of {list(DATASETS)}")
    source = DATASETS[name]
    unknown = sorted(set(options) - source.options)
    if unknown:
        raise ValueError(
            f"unknown option(s) {unknown} for dataset {name!r}; "
            f"accepted: {sorted(source.options) or 'none'}"
        )
    if image_size is not None:
        if source.kind == "tabular":
            raise ValueError(f"image_size applies to image datasets only, not {name!r}")
        V.check_count("image_size", image_size)
    if name == "csv":  # a CSV is read from path= or frame=, not from a folder
        return source.load(None, **options)
    manual = None if manual_dir is None else Path(manual_dir).expanduser()
    if manual is not None and not manual.is_dir():
        raise FileNotFoundError(f"manual_dir for {name} not found: {manual}")
    if source.kind == "tabular":
        return source.load(manual, **options)
    return source.load(data_dir, manual, image_size, **options)
