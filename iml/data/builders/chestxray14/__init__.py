"""ChestX-ray14 builder package (see :mod:`.chestxray14_dataset_builder`)."""

from iml.data.builders.chestxray14.chestxray14_dataset_builder import (
    LABEL_FILE_NAMES,
    PNEUMONIA,
    Chestxray14,
    ChestXray14Labels,
    chestxray14_labels,
    find_label_file,
    index_images,
    read_image_list,
    read_label_file,
    read_release,
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
