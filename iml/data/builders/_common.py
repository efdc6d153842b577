"""Pieces shared by the builders: the image-size config and an ordered parallel map."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import tensorflow_datasets as tfds

__all__ = ["ImageSizeConfig", "builder_config", "image_size_config", "ordered_map"]

T = TypeVar("T")
R = TypeVar("R")


@dataclasses.dataclass(eq=False)
class ImageSizeConfig(tfds.core.BuilderConfig):
    """A builder config that fixes the side (pixels) of the stored square images."""

    image_size: int = 0


def image_size_config(image_size: int) -> ImageSizeConfig:
    """The config named ``f"{image_size}px"`` storing ``image_size`` x ``image_size`` images."""
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1:
        raise ValueError(f"image_size must be a positive integer, got {image_size!r}")
    return ImageSizeConfig(
        name=f"{image_size}px",
        image_size=image_size,
        description=f"{image_size}x{image_size} 8-bit grayscale images",
    )


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
