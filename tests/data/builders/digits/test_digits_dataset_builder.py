"""Tests of iml.data.builders.digits: scikit-learn's digits, the built-in default dataset, prepared
once and resized."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

from iml.data import (
    ENV_DATA_DIR,
    Dataset,
    default_data_dir,
    load_dataset,
)
from iml.data.builders.digits.digits_dataset_builder import Digits


def test_digits_default_matches_scikit_learn(digits_dataset: Dataset):
    bunch = load_digits()
    ds = digits_dataset
    assert ds.name == "digits" and ds.num_examples == 1797 and ds.input_shape == (8, 8, 1)
    np.testing.assert_array_equal(ds.classes, bunch.target)
    np.testing.assert_array_equal(ds.labels, (bunch.target == 8).astype(np.int32))
    assert int(ds.labels.sum()) == 174 and ds.split is None
    expected = np.rint(bunch.images * 255.0 / 16.0).astype(np.uint8)
    np.testing.assert_array_equal(ds.get_batch(np.arange(1797))[..., 0], expected)


def test_digits_positive_digit_and_reuse(digits_dataset, tfds_dir, monkeypatch):
    # Preparation must not run again: a second load only reads what the first one wrote.
    monkeypatch.setattr(Digits, "_split_generators", lambda *a: pytest.fail("prepared again"))
    zeros = load_dataset("digits", data_dir=tfds_dir, positive_digit=0)
    np.testing.assert_array_equal(zeros.labels, (digits_dataset.classes == 0).astype(np.int32))
    assert int(zeros.labels.sum()) == 178
    with pytest.raises(ValueError, match="positive_digit"):
        load_dataset("digits", data_dir=tfds_dir, positive_digit=10)


def test_digits_resized_and_data_dir_from_environment(tmp_path, monkeypatch, digits_dataset):
    monkeypatch.setenv(ENV_DATA_DIR, str(tmp_path / "env"))
    assert default_data_dir() == tmp_path / "env"
    big = load_dataset("digits", image_size=16)
    assert big.input_shape == (16, 16, 1)
    assert list((tmp_path / "env").rglob("dataset_info.json"))
    small = digits_dataset.get_batch(np.arange(50))[..., 0].astype(np.float32)
    reference = F.interpolate(
        torch.from_numpy(small)[:, None], size=(16, 16), mode="bilinear", antialias=True
    )[:, 0].numpy()
    assert np.abs(big.get_batch(np.arange(50))[..., 0] - reference).max() <= 1.0
