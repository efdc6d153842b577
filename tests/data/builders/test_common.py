"""Tests of iml.data.builders._common: image files decoded to 8-bit gray and resized as torch
resizes them."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from iml.data.builders import load_grayscale, resize_grayscale
from iml.data.builders._common import builder_config
from iml.data.builders.digits.digits_dataset_builder import Digits


def test_rgba_png_becomes_its_gray_channel_and_resizes_like_torch(sample_images: Path):
    path = sample_images / "00004934_000.png"  # one of the two RGBA files of the sample
    raw = np.asarray(Image.open(path))
    assert raw.shape == (1024, 1024, 4)
    full = load_grayscale(path, 1024)
    np.testing.assert_array_equal(full[..., 0], raw[..., 0])
    small = load_grayscale(path, 28)[..., 0].astype(np.float32)
    reference = F.interpolate(
        torch.from_numpy(raw[..., 0].astype(np.float32))[None, None],
        size=(28, 28),
        mode="bilinear",
        antialias=True,
        align_corners=False,
    )[0, 0].numpy()
    assert np.abs(small - reference).max() <= 1.0


def test_16bit_png_is_scaled_linearly_to_8bit(tmp_path: Path):
    values = (np.arange(32 * 32, dtype=np.uint32).reshape(32, 32) * 64).astype(np.uint16)
    Image.fromarray(values).save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")
    loaded = load_grayscale(tmp_path / "deep.png", 32)[..., 0]
    np.testing.assert_array_equal(loaded, np.rint(values / 257.0).astype(np.uint8))


def test_truncated_and_missing_image_files_raise_naming_the_file(tmp_path, sample_images):
    data = (sample_images / "00000129_000.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match=re.escape("cut.png")):
        load_grayscale(tmp_path / "cut.png", 28)
    with pytest.raises(FileNotFoundError, match=re.escape("absent.png")):
        load_grayscale(tmp_path / "absent.png", 28)


def test_resize_grayscale_rejects_non_uint8():
    with pytest.raises(ValueError, match="uint8"):
        resize_grayscale(np.zeros((2, 8, 8), np.float32), 16)


def test_a_builder_of_an_unprepared_dataset_leaves_no_temporary_folder(tmp_path, monkeypatch):
    # TFDS's own info makes an empty folder in the temporary directory for each such builder
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    builder = Digits(data_dir=str(tmp_path / "data"), config=builder_config(Digits, 8))
    assert not builder.is_prepared() and builder.info.features["image"].shape == (8, 8, 1)
    assert list(scratch.iterdir()) == []
