"""Tests of iml.data.prepared: where prepared TFDS data lives, a builder prepared once, and
images read at global indices from the data sources of consecutive splits."""

from __future__ import annotations

import numpy as np
import pytest

from iml.data.builders.chestxray14.chestxray14_dataset_builder import Chestxray14
from iml.data.prepared import ENV_DATA_DIR, DataSourceReader, default_data_dir, prepared_builder


def test_the_data_dir_is_the_environments_else_the_users_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_DATA_DIR, str(tmp_path / "prepared"))
    assert default_data_dir() == tmp_path / "prepared"
    monkeypatch.setenv(ENV_DATA_DIR, "")  # set but empty: the default
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_data_dir() == tmp_path / ".cache" / "iml" / "tfds"


class _Batched(list):
    """A data source that reads several examples at once, as array_record sources do."""

    def __getitems__(self, indices):
        return [self[i] for i in indices]


def test_the_reader_finds_each_global_index_in_its_split_in_the_order_asked():
    def examples(start, n):
        return [{"image": np.full((2, 2, 1), start + i, np.uint8)} for i in range(n)]

    read = DataSourceReader([examples(0, 3), _Batched(examples(3, 2)), examples(5, 4)], (2, 2, 1))
    indices = np.array([8, 0, 3, 4, 2, 5, 3])
    images = read(indices)
    assert images.shape == (7, 2, 2, 1) and images.dtype == np.uint8
    np.testing.assert_array_equal(images[:, 0, 0, 0], indices)
    assert read(np.array([], int)).shape == (0, 2, 2, 1)


def test_a_builder_that_is_not_prepared_needs_its_manual_dir(tmp_path):
    with pytest.raises(ValueError, match=r"chestxray14 is not prepared in .* pass manual_dir="):
        prepared_builder(
            Chestxray14,
            name="chestxray14",
            image_size=28,
            data_dir=tmp_path,
            manual_dir=None,
            check_manual=lambda folder: None,
        )
    assert not any(tmp_path.iterdir())  # nothing was written
