"""Digits builder package (see :mod:`.digits_dataset_builder`)."""

from iml.data.builders.digits.digits_dataset_builder import NATIVE_SIZE, Digits, digits_images

__all__ = ["NATIVE_SIZE", "Digits", "digits_images"]
