"""Reading prepared TFDS data: where it lives, preparing a builder once, and its data sources.

Image sources are TFDS builders prepared once into ``data_dir`` (``array_record`` files; default
``~/.cache/iml/tfds`` or ``$IML_DATA_DIR``: :func:`default_data_dir`). :func:`prepared_builder`
prepares a builder unless that was done before, :func:`read_prepared` opens the data sources of
its splits with their metadata, and :class:`DataSourceReader` reads images at global indices from
them with random access.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from iml.data.builders import builder_config

__all__ = [
    "ENV_DATA_DIR",
    "DataSourceReader",
    "default_data_dir",
    "prepared_builder",
    "read_prepared",
]

ENV_DATA_DIR = "IML_DATA_DIR"


def default_data_dir() -> Path:
    """Where prepared TFDS data lives: ``$IML_DATA_DIR`` if set, else ``~/.cache/iml/tfds``."""
    return Path(os.environ.get(ENV_DATA_DIR) or Path.home() / ".cache" / "iml" / "tfds")


class DataSourceReader:
    """Reads images at global indices from the data sources of consecutive splits."""

    def __init__(self, sources: Sequence[Any], input_shape: tuple[int, ...]) -> None:
        self._sources = list(sources)
        self._offsets = np.cumsum([0] + [len(s) for s in self._sources])
        self._input_shape = input_shape

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        out = np.empty((len(indices), *self._input_shape), dtype=np.uint8)
        which = np.searchsorted(self._offsets, indices, side="right") - 1
        for k, source in enumerate(self._sources):
            positions = np.flatnonzero(which == k)
            if positions.size == 0:
                continue
            local = (indices[positions] - self._offsets[k]).tolist()
            if hasattr(source, "__getitems__"):
                examples = source.__getitems__(local)
            else:
                examples = [source[i] for i in local]
            out[positions] = np.stack([ex["image"] for ex in examples])
        return out


def prepared_builder(
    builder_cls: type[tfds.core.GeneratorBasedBuilder],
    *,
    name: str,
    image_size: int | None,
    data_dir: str | os.PathLike[str] | None,
    manual_dir: Path | None,
    check_manual: Callable[[Path], None] | None = None,
) -> tfds.core.DatasetBuilder:
    """The builder at ``image_size``, prepared into ``data_dir`` unless that was done before."""
    root = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    builder = builder_cls(
        data_dir=os.fspath(root),
        config=builder_config(builder_cls, image_size),
        file_format="array_record",
    )
    # Look for dataset_info.json first: is_prepared() logs a warning when the folder is absent.
    if (Path(builder.data_path) / "dataset_info.json").is_file() and builder.is_prepared():
        return builder
    download_config = None
    if check_manual is not None:
        if manual_dir is None:
            raise ValueError(
                f"{name} is not prepared in {root} yet: pass manual_dir= (the folder with the "
                f"raw files). {builder_cls.MANUAL_DOWNLOAD_INSTRUCTIONS.strip()}"
            )
        check_manual(manual_dir)
        download_config = tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir))
    root.mkdir(parents=True, exist_ok=True)
    builder.download_and_prepare(download_config=download_config)
    return builder


def read_prepared(
    builder: tfds.core.DatasetBuilder, splits: Sequence[str], check: Sequence[str]
) -> tuple[list[Any], dict[str, np.ndarray], np.ndarray]:
    """Data sources and metadata columns of ``splits`` (concatenated), checked for agreement.

    The per-example scalars come from the dataset's metadata (no image is decoded); the first and
    last example of every split are read to check that the metadata matches the stored order.
    """
    sources_by_split = builder.as_data_source()
    meta = builder.info.metadata["splits"]
    sources, columns, split_names = [], {}, []
    for split in splits:
        source = sources_by_split[split]
        meta_split = meta[split]
        n = len(next(iter(meta_split.values())))
        if len(source) != n:
            raise ValueError(
                f"prepared data at {builder.data_path} is inconsistent ({split}: {len(source)} "
                f"examples, metadata {n}); delete that folder to prepare it again"
            )
        for i in sorted({0, n - 1}) if n else []:
            example = source[i]
            for key in check:
                stored = example[key]
                stored = stored.decode() if isinstance(stored, bytes) else stored
                if stored != meta_split[key][i]:
                    raise ValueError(
                        f"prepared data at {builder.data_path} does not match its metadata "
                        f"({split}[{i}].{key}); delete that folder to prepare it again"
                    )
        sources.append(source)
        split_names += [split] * n
        for key, values in meta_split.items():
            columns.setdefault(key, []).extend(values)
    return sources, {k: np.asarray(v) for k, v in columns.items()}, np.asarray(split_names)
