"""Decoding and resizing of grayscale images for dataset preparation (Pillow, numpy).

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

import os

import numpy as np
from PIL import Image, UnidentifiedImageError

__all__ = ["load_grayscale", "resize_grayscale"]

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
