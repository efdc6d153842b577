"""NIH ChestX-ray14 (Wang et al., CVPR 2017) for the paper's pneumonia task, from a local release.

The paper (Section 2 and appendix "Technical Details") replicates the pneumonia detection task of
CheXNet: 112,120 frontal chest X-rays, label ``y = 1`` when the image's 'Finding Labels' contain
``Pneumonia``, images downscaled to 224 x 224. This builder reads the official release from a
local folder (``manual_dir``) laid out as NIH distributes it:

* ``Data_Entry_2017_v2020.csv`` or ``Data_Entry_2017.csv`` (optionally gzipped): the label file;
* ``train_val_list.txt`` and ``test_list.txt``: the official split, one image name per line;
* the PNG images, in ``images/`` (what every ``images_NNN.tar.gz`` extracts to) or in
  ``images_NNN/images/`` folders (the Kaggle layout).

Splits: ``train`` (the images of ``train_val_list.txt``) and ``test`` (``test_list.txt``), in
list order. Each example holds the grayscale image (``uint8 [S, S, 1]``), the pneumonia ``label``,
the ``patient_id``, the ``image_id`` (file name) and the raw ``finding_labels``.

Every image named in the lists must be present (the official lists name only images of the
release), so a missing image is an error, raised before any image is decoded; a corrupt or
truncated image stops preparation with an error naming it.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from pathlib import Path
from typing import ClassVar, NamedTuple

import numpy as np
import tensorflow_datasets as tfds

from iml.data.builders._common import (
    ImageBuilder,
    ImageSizeConfig,
    image_size_config,
    load_grayscale,
    ordered_map,
)

__all__ = [
    "LABEL_FILE_NAMES",
    "PNEUMONIA",
    "ChestXray14Labels",
    "Chestxray14",
    "chestxray14_labels",
    "find_label_file",
    "index_images",
    "read_image_list",
    "read_label_file",
    "read_release",
]

PNEUMONIA = "Pneumonia"
# Searched in this order: the corrected 2020 labels first.
LABEL_FILE_NAMES = (
    "Data_Entry_2017_v2020.csv",
    "Data_Entry_2017_v2020.csv.gz",
    "Data_Entry_2017.csv",
    "Data_Entry_2017.csv.gz",
)
LIST_FILES = {"train": "train_val_list.txt", "test": "test_list.txt"}


class ChestXray14Labels(NamedTuple):
    """Per-image labels of the ChestX-ray14 label file, in file order."""

    image_ids: np.ndarray  # str file names, e.g. "00000013_005.png"
    labels: np.ndarray  # int32, 1 where 'Finding Labels' contains Pneumonia
    patient_ids: np.ndarray  # int32


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def read_label_file(csv_path: str | os.PathLike[str]) -> tuple[ChestXray14Labels, np.ndarray]:
    """:func:`chestxray14_labels` and the raw '|'-separated 'Finding Labels' of every row."""
    path = Path(csv_path)
    if not path.is_file():
        raise FileNotFoundError(f"ChestX-ray14 label file not found: {path}")
    needed = ("Image Index", "Finding Labels", "Patient ID")
    with _open_text(path) as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        missing = [c for c in needed if c not in header]
        if missing:
            raise ValueError(f"label file {path} lacks column(s) {missing}; header is {header}")
        rows = [row for row in reader if row]
    width = max(header.index(c) for c in needed) + 1
    short = next((i for i, row in enumerate(rows) if len(row) < width), None)
    if short is not None:
        raise ValueError(f"label file {path}, data row {short + 1}: too few fields")
    columns = list(zip(*rows, strict=False)) if rows else [()] * len(header)
    ids = np.asarray(columns[header.index("Image Index")], dtype=str)
    findings = np.asarray(columns[header.index("Finding Labels")], dtype=str)
    try:
        patients = np.asarray(columns[header.index("Patient ID")], dtype=str).astype(np.int64)
    except ValueError as e:
        raise ValueError(f"label file {path}: a 'Patient ID' is not an integer ({e})") from e
    if len(np.unique(ids)) != len(ids):
        raise ValueError(f"label file {path} names some image more than once")
    labels = np.asarray([PNEUMONIA in f.split("|") for f in findings.tolist()], dtype=np.int32)
    table = ChestXray14Labels(image_ids=ids, labels=labels, patient_ids=patients.astype(np.int32))
    return table, findings


def chestxray14_labels(csv_path: str | os.PathLike[str]) -> ChestXray14Labels:
    """Read a ChestX-ray14 label file (``Data_Entry_2017[_v2020].csv[.gz]``).

    The pneumonia label is 1 when ``Pneumonia`` is one of the '|'-separated 'Finding Labels'
    (the paper's binary task, ``y = 1`` for pneumonia).

    Args:
      csv_path: the label file; ``.gz`` files are decompressed on the fly.

    Returns:
      :class:`ChestXray14Labels` ``(image_ids, labels, patient_ids)``: str file names, int32
      pneumonia labels and int32 patient ids, in file order.

    Raises:
      FileNotFoundError: if the file does not exist.
      ValueError: if a needed column is missing, a patient id is not an integer, or an image
        name repeats.
    """
    return read_label_file(csv_path)[0]


def find_label_file(manual_dir: str | os.PathLike[str]) -> Path:
    """The first of :data:`LABEL_FILE_NAMES` present in ``manual_dir``.

    Raises:
      FileNotFoundError: if none is present (the message lists the names looked for).
    """
    for name in LABEL_FILE_NAMES:
        candidate = Path(manual_dir) / name
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"no ChestX-ray14 label file in {manual_dir}: expected one of {list(LABEL_FILE_NAMES)}"
    )


def read_image_list(path: str | os.PathLike[str]) -> list[str]:
    """Image names of an official list file (one per line, blank lines ignored).

    Raises:
      FileNotFoundError: if the file does not exist.
      ValueError: if a name repeats.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"ChestX-ray14 split list not found: {path}")
    names = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    names = [n for n in names if n]
    if len(set(names)) != len(names):
        raise ValueError(f"split list {path} names some image more than once")
    return names


def index_images(manual_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Map image file name -> path over ``images/`` and ``images_*/images/`` (or ``images_*/``).

    Raises:
      FileNotFoundError: if none of these folders exists.
    """
    root = Path(manual_dir)
    folders = [root / "images"]
    for sub in sorted(root.glob("images_*")):
        folders += [sub / "images", sub]
    folders = [f for f in folders if f.is_dir()]
    if not folders:
        raise FileNotFoundError(
            f"no ChestX-ray14 image folder in {root}: expected images/ or images_NNN/images/"
        )
    index: dict[str, Path] = {}
    for folder in folders:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.lower().endswith(".png"):
                    index.setdefault(entry.name, Path(entry.path))
    return index


def read_release(manual_dir: str | os.PathLike[str]) -> dict[str, tuple[dict[str, list], list]]:
    """Check a local release and read each split's ``(columns, image paths)``, in list order,
    before decoding any image: the columns ``label``, ``patient_id``, ``image_id`` and
    ``finding_labels``.

    Cheap checks come first: the list files, then that every listed image exists, then the
    label file.

    Raises:
      FileNotFoundError: if the label file, a list file, the image folder or a listed image is
        missing (the message names the missing images, at most ten, and their count).
      ValueError: if the lists overlap or name images absent from the label file.
    """
    root = Path(manual_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"ChestX-ray14 manual_dir not found: {root}")
    label_file = find_label_file(root)
    lists = {split: read_image_list(root / name) for split, name in LIST_FILES.items()}
    overlap = set(lists["train"]) & set(lists["test"])
    if overlap:
        raise ValueError(f"{len(overlap)} image(s) are in both split lists, e.g. {min(overlap)}")
    images = index_images(root)
    for split, names in lists.items():
        missing = [n for n in names if n not in images]
        if missing:
            raise FileNotFoundError(
                f"{len(missing)} image(s) named in {root / LIST_FILES[split]} are missing from "
                f"the image folders of {root}: {missing[:10]}"
            )
    table, findings = read_label_file(label_file)
    row_of = {name: i for i, name in enumerate(table.image_ids.tolist())}
    splits = {}
    for split, names in lists.items():
        unknown = [n for n in names if n not in row_of]
        if unknown:
            raise ValueError(
                f"{len(unknown)} image(s) of {LIST_FILES[split]} are not in the label file "
                f"{label_file}, e.g. {unknown[:10]}"
            )
        rows = [row_of[n] for n in names]
        columns = {
            "label": table.labels[rows].tolist(),
            "patient_id": table.patient_ids[rows].tolist(),
            "image_id": list(names),
            "finding_labels": findings[rows].tolist(),
        }
        splits[split] = (columns, [images[n] for n in names])
    return splits


class Chestxray14(ImageBuilder):
    """ChestX-ray14 pneumonia task at one image size per config (224 px by default)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES: ClassVar[dict[str, str]] = {
        "1.0.0": "Pneumonia label, patient ids and the official split."
    }
    BUILDER_CONFIGS: ClassVar[list[ImageSizeConfig]] = [image_size_config(s) for s in (224, 64, 28)]
    MANUAL_DOWNLOAD_INSTRUCTIONS = """
    Download the NIH ChestX-ray14 release (https://nihcc.app.box.com/v/ChestXray-NIHCC), extract
    the images_NNN.tar.gz archives into one folder (they extract to images/), and put
    Data_Entry_2017_v2020.csv (or Data_Entry_2017.csv), train_val_list.txt and test_list.txt
    beside images/. Pass that folder as manual_dir.
    """

    SCALARS: ClassVar[dict[str, type]] = {
        "label": np.int32,
        "patient_id": np.int32,
        "image_id": np.str_,
        "finding_labels": np.str_,
    }
    METADATA = ("image_id", "label", "patient_id")
    DESCRIPTION = "NIH ChestX-ray14 frontal chest X-rays; label 1 = Pneumonia finding."
    HOMEPAGE = "https://nihcc.app.box.com/v/ChestXray-NIHCC"
    CITATION = "Wang et al., ChestX-ray8, CVPR 2017."

    def _read_splits(self, dl_manager: tfds.download.DownloadManager) -> dict:
        size = self.builder_config.image_size
        return {
            split: (columns, ordered_map(lambda path: load_grayscale(path, size), paths))
            for split, (columns, paths) in read_release(dl_manager.manual_dir).items()
        }
