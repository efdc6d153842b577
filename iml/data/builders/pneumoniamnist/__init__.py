"""PneumoniaMNIST builder package (see :mod:`.pneumoniamnist_dataset_builder`)."""

from iml.data.builders.pneumoniamnist.pneumoniamnist_dataset_builder import (
    NATIVE_SIZES,
    SPLITS,
    Pneumoniamnist,
    assemble_pneumoniamnist,
    npz_file_name,
    read_pneumoniamnist_npz,
)

__all__ = [
    "NATIVE_SIZES",
    "SPLITS",
    "Pneumoniamnist",
    "assemble_pneumoniamnist",
    "npz_file_name",
    "read_pneumoniamnist_npz",
]
