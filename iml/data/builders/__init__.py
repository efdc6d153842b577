"""TensorFlow Datasets builders that need no TensorFlow.

Each builder lives in its own package directory (TFDS looks for builder resources next to the
module), stores ``tfds.features.Tensor`` features only (``Image`` would need TensorFlow), is
written as ``array_record`` and read back with ``builder.as_data_source()`` for random access.
Every builder has one config per image size (``"28px"``, ``"224px"``, ...); sizes not listed in
``BUILDER_CONFIGS`` are made on the fly with :func:`image_size_config`.

Examples are written in generation order (shuffling disabled), and the per-example scalars
(labels, patient ids, image names) are also stored in the dataset's ``metadata.json`` so that a
loader gets them without decoding any image.
"""

from iml.data.builders._common import (
    ImageSizeConfig,
    builder_config,
    image_size_config,
    load_grayscale,
    resize_grayscale,
)

__all__ = [
    "ImageSizeConfig",
    "builder_config",
    "image_size_config",
    "load_grayscale",
    "resize_grayscale",
]
