"""PneumoniaMNIST builder package (the builder is :mod:`.pneumoniamnist_dataset_builder`)."""

from iml.data.builders.pneumoniamnist.pneumoniamnist_dataset_builder import NATIVE_SIZES

__all__ = ["NATIVE_SIZES"]
