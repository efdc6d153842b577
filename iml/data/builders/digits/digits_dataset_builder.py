"""scikit-learn's handwritten digits as a TFDS dataset: real data that needs no download.

``sklearn.datasets.load_digits`` ships the test set of the UCI "Optical Recognition of
Handwritten Digits" data (1,797 images of 8 x 8 pixels with 17 grey levels, 0..16) inside
scikit-learn, so a fresh machine can run the whole pipeline at once. Grey levels are stored as
8-bit pixels ``round(v * 255 / 16)``; other sizes than the native 8 px are bilinear resizes of
those. One split, ``train``, in scikit-learn's order; each example holds ``image`` and ``digit``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import tensorflow_datasets as tfds

from iml.data.builders._common import (
    ImageBuilder,
    ImageSizeConfig,
    image_size_config,
    resize_grayscale,
)

__all__ = ["NATIVE_SIZE", "Digits", "digits_images"]

NATIVE_SIZE = 8


def digits_images(image_size: int = NATIVE_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as ``(uint8 images [1797, S, S, 1], int32 digits [1797])``."""
    from sklearn.datasets import load_digits  # imported here: only this builder needs it

    bunch = load_digits()
    images = np.rint(np.asarray(bunch.images) * (255.0 / 16.0)).astype(np.uint8)
    return resize_grayscale(images, image_size), np.asarray(bunch.target, dtype=np.int32)


class Digits(ImageBuilder):
    """Handwritten digits 0-9 from scikit-learn, at 8 px (native) or a bilinear resize."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES: ClassVar[dict[str, str]] = {"1.0.0": "scikit-learn load_digits, one split."}
    BUILDER_CONFIGS: ClassVar[list[ImageSizeConfig]] = [
        # 4 px: the default task of `iml reproduce`; the first entry stays the default config.
        image_size_config(s)
        for s in (NATIVE_SIZE, 4, 28, 32)
    ]
    SCALARS: ClassVar[dict[str, type]] = {"digit": np.int32}
    METADATA = ("digit",)
    DESCRIPTION = "scikit-learn load_digits: 1,797 8x8 handwritten digits."
    HOMEPAGE = "https://archive.ics.uci.edu/dataset/80"
    CITATION = "Alpaydin & Kaynak, Optical Recognition of Handwritten Digits, UCI 1998."

    def _read_splits(self, dl_manager: tfds.download.DownloadManager) -> dict:
        images, digits = digits_images(self.builder_config.image_size)
        return {"train": ({"digit": digits.tolist()}, images)}
