"""Digits builder package (the builder is :mod:`.digits_dataset_builder`)."""
