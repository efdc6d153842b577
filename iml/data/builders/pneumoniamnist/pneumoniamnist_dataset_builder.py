"""PneumoniaMNIST (MedMNIST v2; Kermany et al., Cell 2018): child chest X-rays, 1 = pneumonia.

The official file for users is MedMNIST's ``pneumoniamnist.npz`` (28 x 28; MedMNIST+ adds
``pneumoniamnist_64.npz``, ``_128`` and ``_224``), with keys ``train_images``/``train_labels``,
``val_...`` and ``test_...``: 4,708 / 524 / 624 images. Put it in a folder and pass that folder
as ``manual_dir``; the builder copies the three splits, in file order, into ``array_record``.

When the official file is not at hand, :func:`assemble_pneumoniamnist` rebuilds its content from
two partial public copies of it: a class-balanced one (``pneumoniamnist.npz`` of the GitHub
repository aksufatih/snn-medmnist) and a Kaggle one (``data/pneumoniamnist.npz`` of
varun19424/pneumonia_mnist, from the Kaggle dataset rijulshr/pneumoniamnist).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import numpy as np
import tensorflow_datasets as tfds

from iml.data.builders._common import ImageBuilder, ImageSizeConfig, image_size_config

__all__ = [
    "NATIVE_SIZES",
    "SPLITS",
    "Pneumoniamnist",
    "assemble_pneumoniamnist",
    "npz_file_name",
    "read_pneumoniamnist_npz",
]

SPLITS = ("train", "val", "test")
NATIVE_SIZES = (28, 64, 128, 224)  # MedMNIST / MedMNIST+ file sizes
_URL = "https://zenodo.org/records/10519652"


def npz_file_name(image_size: int) -> str:
    """MedMNIST's file at ``image_size``: ``pneumoniamnist.npz``, ``pneumoniamnist_64.npz``, ..."""
    if image_size not in NATIVE_SIZES:
        raise ValueError(
            f"image_size for pneumoniamnist must be one of {NATIVE_SIZES}, got {image_size}"
        )
    return "pneumoniamnist.npz" if image_size == 28 else f"pneumoniamnist_{image_size}.npz"


def _split_arrays(
    arrays: Mapping[str, np.ndarray], split: str, source: str, image_size: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(images [N, S, S] uint8, labels [N] int32)`` of one split."""
    for key in (f"{split}_images", f"{split}_labels"):
        if key not in arrays:
            raise ValueError(f"{source} lacks key {key!r}; it has {sorted(arrays)}")
    images = np.asarray(arrays[f"{split}_images"])
    labels = np.asarray(arrays[f"{split}_labels"])
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    if images.ndim != 3 or images.dtype != np.uint8 or images.shape[1] != images.shape[2]:
        raise ValueError(
            f"{source}: {split}_images must be uint8 [N, S, S], got {images.dtype} {images.shape}"
        )
    if image_size is not None and images.shape[1] != image_size:
        raise ValueError(
            f"{source}: {split}_images are {images.shape[1]} px, expected {image_size} px"
        )
    labels = labels.reshape(-1) if labels.ndim == 2 and labels.shape[1] == 1 else labels
    if labels.shape != (images.shape[0],):
        raise ValueError(
            f"{source}: {split}_labels must have shape ({images.shape[0]},) or "
            f"({images.shape[0]}, 1), got {np.asarray(arrays[f'{split}_labels']).shape}"
        )
    if not np.isin(labels, (0, 1)).all():
        raise ValueError(f"{source}: {split}_labels must be 0 or 1, got {np.unique(labels)}")
    return images, labels.astype(np.int32)


def read_pneumoniamnist_npz(
    path: str | os.PathLike[str], image_size: int | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Read and check a MedMNIST-layout npz file: ``{split: (images [N, S, S], labels [N])}``.

    Raises:
      FileNotFoundError: if the file does not exist.
      ValueError: if a key is missing, or images/labels have the wrong dtype, shape or values.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"PneumoniaMNIST file not found: {path} (the official file is at {_URL})"
        )
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    return {s: _split_arrays(arrays, s, str(path), image_size) for s in SPLITS}


def assemble_pneumoniamnist(
    balanced_path: str | os.PathLike[str], kaggle_path: str | os.PathLike[str]
) -> dict[str, np.ndarray]:
    """Rebuild the official PneumoniaMNIST arrays from the two partial public copies.

    The class-balanced copy keeps all 1,214 official normal training images, the Kaggle copy all
    3,494 pneumonia training images and the official val and test splits (found by comparing the
    copies image by image; every call checks that their training images nest this way). Hence
    train = balanced train normals + Kaggle train pneumonias (4,708), val = Kaggle val (524),
    test = Kaggle test (624). Image order differs from the official file (normals first in train).

    Args:
      balanced_path: the class-balanced copy, ``pneumoniamnist.npz`` of GitHub's
        aksufatih/snn-medmnist (2,428 / 270 / 468 images, half of them pneumonia).
      kaggle_path: the Kaggle copy, ``data/pneumoniamnist.npz`` of GitHub's
        varun19424/pneumonia_mnist (3,882 / 524 / 624 images).

    Returns:
      The official keys: ``{train,val,test}_images`` (uint8 ``[N, 28, 28]``) and
      ``{train,val,test}_labels`` (uint8 ``[N, 1]``); ``np.savez(dir / "pneumoniamnist.npz",
      **arrays)`` makes a ``manual_dir`` for the builder.

    Raises:
      FileNotFoundError: if a file is missing.
      ValueError: if the files are not the copies described (their normal/pneumonia training
        images do not nest as documented).
    """
    balanced = read_pneumoniamnist_npz(balanced_path, 28)
    kaggle = read_pneumoniamnist_npz(kaggle_path, 28)
    b_images, b_labels = balanced["train"]
    k_images, k_labels = kaggle["train"]
    normals, pneumonias = b_images[b_labels == 0], k_images[k_labels == 1]

    def fingerprints(images: np.ndarray) -> set[bytes]:
        return {image.tobytes() for image in images}

    # The documented nesting: every normal the Kaggle copy kept is among the balanced copy's,
    # and every pneumonia the balanced copy kept is among the Kaggle copy's.
    if not fingerprints(k_images[k_labels == 0]) <= fingerprints(normals):
        raise ValueError(f"{kaggle_path}: its training normals are not all in {balanced_path}")
    if not fingerprints(b_images[b_labels == 1]) <= fingerprints(pneumonias):
        raise ValueError(f"{balanced_path}: its training pneumonias are not all in {kaggle_path}")
    train_images = np.concatenate([normals, pneumonias])
    train_labels = np.concatenate([np.zeros(len(normals)), np.ones(len(pneumonias))])
    out = {"train_images": train_images, "train_labels": train_labels}
    for split in ("val", "test"):
        out[f"{split}_images"], out[f"{split}_labels"] = kaggle[split]
    for split in SPLITS:
        out[f"{split}_labels"] = out[f"{split}_labels"].astype(np.uint8).reshape(-1, 1)
    return out


class Pneumoniamnist(ImageBuilder):
    """PneumoniaMNIST from MedMNIST's npz file at one of its native sizes (28 px by default)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES: ClassVar[dict[str, str]] = {
        "1.0.0": "Official train/val/test splits in file order."
    }
    BUILDER_CONFIGS: ClassVar[list[ImageSizeConfig]] = [image_size_config(s) for s in NATIVE_SIZES]
    MANUAL_DOWNLOAD_INSTRUCTIONS = f"""
    Download pneumoniamnist.npz (or pneumoniamnist_64/_128/_224.npz) from MedMNIST ({_URL})
    into a folder and pass that folder as manual_dir. From two partial public copies (GitHub's
    aksufatih/snn-medmnist and varun19424/pneumonia_mnist), iml.data.assemble_pneumoniamnist
    rebuilds the same arrays.
    """

    SCALARS: ClassVar[dict[str, type]] = {"label": np.int32}
    METADATA = ("label",)
    DESCRIPTION = "PneumoniaMNIST (MedMNIST v2): 0 = normal, 1 = pneumonia."
    HOMEPAGE = "https://medmnist.com/"
    CITATION = "Yang et al., MedMNIST v2, Scientific Data 2023; Kermany et al., Cell 2018."

    def _read_splits(self, dl_manager: tfds.download.DownloadManager) -> dict:
        size = self.builder_config.image_size
        path = Path(dl_manager.manual_dir) / npz_file_name(size)
        splits = read_pneumoniamnist_npz(path, size)
        return {
            s: ({"label": labels.tolist()}, images[..., None])
            for s, (images, labels) in splits.items()
        }
