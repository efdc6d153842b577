"""Pieces shared by the builders: their base class, the image-size config, an ordered parallel
map, and the decoding and resizing of grayscale images (Pillow, numpy).

Every image source ends up as ``uint8`` arrays of shape ``[size, size, 1]``. Conversions:

* 8-bit grayscale (``L``) is used as is; ``LA``, ``RGB``, ``RGBA``, palette (``P``) and 1-bit
  images are converted with Pillow's ITU-R 601-2 luma transform ``L = 0.299 R + 0.587 G +
  0.114 B``, ignoring alpha (the NIH release has a few RGBA files whose channels are equal).
* 16-bit (and 32-bit integer) grayscale is mapped linearly from ``[0, 65535]`` onto ``[0, 255]``
  (``round(x / 257)``, values above 65535 clipped), so a full-range 16-bit image keeps its contrast.
* Resizing uses Pillow's bilinear filter, which low-pass filters when shrinking (like
  ``torchvision.transforms.Resize`` with antialiasing). Non-square images are resized to a square
  without cropping.
"""

from __future__ import annotations

import abc
import concurrent.futures
import dataclasses
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, TypeVar

import numpy as np
import tensorflow_datasets as tfds
from PIL import Image, UnidentifiedImageError

from iml import _validation as V

__all__ = [
    "ImageBuilder",
    "ImageSizeConfig",
    "builder_config",
    "image_size_config",
    "load_grayscale",
    "ordered_map",
    "resize_grayscale",
]

T = TypeVar("T")
R = TypeVar("R")


@dataclasses.dataclass(eq=False)
class ImageSizeConfig(tfds.core.BuilderConfig):
    """A builder config that fixes the side (pixels) of the stored square images."""

    image_size: int = 0


def image_size_config(image_size: int) -> ImageSizeConfig:
    """The config named ``f"{image_size}px"`` storing ``image_size`` x ``image_size`` images."""
    V.check_count("image_size", image_size)
    return ImageSizeConfig(
        name=f"{image_size}px",
        image_size=image_size,
        description=f"{image_size}x{image_size} 8-bit grayscale images",
    )


class LocalDatasetInfo(tfds.core.DatasetInfo):
    """A dataset's description that TFDS never looks for on Google Cloud Storage.

    Before a dataset is prepared, :class:`tfds.core.DatasetBuilder` asks its info for TFDS's
    published copy (``initialize_from_bucket``), which makes a temporary folder first and leaves
    it behind, empty, when there is no copy (always here: these datasets are built from the
    user's own files, and TFDS's access to the bucket is off).
    """

    def initialize_from_bucket(self) -> None:
        """Nothing to read: the description comes from the builder and its prepared folder."""


class ImageBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """A builder of ``uint8 [S, S, 1]`` images (``"image"``) beside per-example scalars.

    A builder names its scalars' dtypes in ``SCALARS``, the scalars also kept in
    ``metadata.json`` in ``METADATA``, and returns ``{split: (columns, images)}`` from
    :meth:`_read_splits`: every scalar's values as a list, and the images, in generation order.
    """

    SCALARS: ClassVar[dict[str, Any]] = {}
    METADATA: ClassVar[tuple[str, ...]] = ()
    DESCRIPTION: ClassVar[str] = ""
    HOMEPAGE: ClassVar[str] = ""
    CITATION: ClassVar[str] = ""

    @abc.abstractmethod
    def _read_splits(
        self, dl_manager: tfds.download.DownloadManager
    ) -> dict[str, tuple[dict[str, list], Iterable[np.ndarray]]]:
        """Each split's scalar columns and images."""

    def _info(self) -> tfds.core.DatasetInfo:
        size = self.builder_config.image_size
        features = {"image": tfds.features.Tensor(shape=(size, size, 1), dtype=np.uint8)}
        for name, dtype in self.SCALARS.items():
            features[name] = tfds.features.Tensor(shape=(), dtype=dtype)
        return LocalDatasetInfo(
            builder=self,
            description=self.DESCRIPTION,
            features=tfds.features.FeaturesDict(features),
            homepage=self.HOMEPAGE,
            citation=self.CITATION,
            disable_shuffling=True,
            metadata=tfds.core.MetadataDict(),
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict:
        splits = self._read_splits(dl_manager)
        self.info.metadata["splits"] = {
            split: {name: columns[name] for name in self.METADATA}
            for split, (columns, _) in splits.items()
        }
        return {split: self._generate_examples(*data) for split, data in splits.items()}

    def _generate_examples(
        self, columns: dict[str, list], images: Iterable[np.ndarray]
    ) -> Iterator[tuple[int, dict]]:
        for i, image in enumerate(images):
            yield i, {"image": image, **{name: values[i] for name, values in columns.items()}}


def builder_config(
    builder_cls: type[tfds.core.DatasetBuilder], image_size: int | None
) -> str | ImageSizeConfig | None:
    """The ``config`` argument for ``builder_cls`` at ``image_size`` (``None``: its default).

    Predefined configs are named (TFDS refuses a custom config with a predefined name); any
    other size gets a custom :class:`ImageSizeConfig`.
    """
    if image_size is None:
        return None
    config = image_size_config(image_size)
    return config.name if config.name in builder_cls.builder_configs else config


def ordered_map(
    fn: Callable[[T], R], items: Iterable[T], *, num_workers: int | None = None, chunk: int = 256
) -> Iterator[R]:
    """``map(fn, items)`` on a thread pool, in order, holding at most ``chunk`` results at a time.

    Pillow releases the GIL while decoding and resizing, so threads give a real speed-up for
    image preparation without the cost of processes. An exception in ``fn`` is raised here, for
    the first failing item in order.
    """
    workers = num_workers or min(8, os.cpu_count() or 1)
    iterator = iter(items)
    if workers <= 1:
        yield from map(fn, iterator)
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        while batch := list(itertools.islice(iterator, chunk)):
            yield from pool.map(fn, batch)


# ----------------------------------------------------------------------------------------------
# Grayscale images
# ----------------------------------------------------------------------------------------------

_LUMA_MODES = frozenset({"1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "La"})


def _to_luma(image: Image.Image, path: str) -> Image.Image:
    mode = image.mode
    if mode == "L":
        return image
    if mode in _LUMA_MODES:
        return image.convert("L")
    if mode.startswith("I"):  # I;16, I;16B, I;16L, I (32-bit signed)
        values = np.asarray(image).astype(np.float64)
        values = np.clip(values, 0.0, 65535.0)
        return Image.fromarray(np.rint(values / 257.0).astype(np.uint8))
    raise ValueError(f"image {path} has unsupported mode {mode!r}")


def load_grayscale(path: str | os.PathLike[str], image_size: int) -> np.ndarray:
    """Read an image file as 8-bit grayscale resized to ``image_size`` x ``image_size``.

    Args:
      path: image file (any format Pillow reads; PNG for ChestX-ray14).
      image_size: side of the square output in pixels.

    Returns:
      ``uint8`` array of shape ``[image_size, image_size, 1]``.

    Raises:
      FileNotFoundError: if the file does not exist (the message names it).
      ValueError: if the file is corrupt or truncated, or of an unsupported mode (names it).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"image file not found: {path}")
    try:
        with Image.open(path) as image:
            image.load()  # decodes fully: a truncated file fails here, not later
            gray = _to_luma(image, path)
            if gray.size != (image_size, image_size):
                gray = gray.resize((image_size, image_size), Image.Resampling.BILINEAR)
            array = np.asarray(gray, dtype=np.uint8)
    except (OSError, SyntaxError, UnidentifiedImageError, Image.DecompressionBombError) as e:
        raise ValueError(f"cannot decode image {path}: {e}") from e
    return array[:, :, None]


def resize_grayscale(images: np.ndarray, image_size: int) -> np.ndarray:
    """Resize a batch of ``uint8`` grayscale images ``[N, H, W]`` or ``[N, H, W, 1]`` (bilinear).

    Returns:
      ``uint8`` array ``[N, image_size, image_size, 1]``; the input itself when already that size.

    Raises:
      ValueError: if ``images`` is not a ``uint8`` array of that shape.
    """
    images = np.asarray(images)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(
            f"images must be uint8 [N, H, W] or [N, H, W, 1], got {images.dtype} {images.shape}"
        )
    if images.shape[1:] == (image_size, image_size):
        return images[..., None]
    out = np.empty((images.shape[0], image_size, image_size, 1), dtype=np.uint8)
    for i, image in enumerate(images):
        resized = Image.fromarray(image).resize((image_size, image_size), Image.Resampling.BILINEAR)
        out[i, :, :, 0] = np.asarray(resized)
    return out
