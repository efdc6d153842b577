"""Fixtures shared by the tests of iml.data: the sample images of the shared data folder and
prepared TFDS datasets, in a temporary folder kept for the whole test run so that each (source,
size) is prepared once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from iml.data import Dataset, load_dataset

SharedData = Callable[[str], Path]


@pytest.fixture(scope="session")
def tfds_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tfds")


@pytest.fixture(scope="session")
def sample_images(shared_data_path: SharedData) -> Path:
    return shared_data_path("nih-chestxray14-sample-images/images")


@pytest.fixture(scope="session")
def digits_dataset(tfds_dir) -> Dataset:
    return load_dataset(data_dir=tfds_dir)  # "digits" is the default
