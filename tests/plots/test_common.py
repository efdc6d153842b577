"""Tests of iml.plots._common: saving a figure."""

import matplotlib.image

from iml.plots import (
    figure3_loss_calibration,
    save_figure,
)


def test_save_figure_writes_readable_png_and_pdf(data, tmp_path):
    scores, labels = data
    paths = save_figure(figure3_loss_calibration(scores, labels), tmp_path / "sub" / "fig3")
    png, pdf = paths
    assert png.name == "fig3.png" and pdf.name == "fig3.pdf"
    assert png.stat().st_size > 20_000
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] > 500 and image.shape[1] > 500
    assert image.std() > 0.05  # not a blank canvas
    assert pdf.read_bytes()[:4] == b"%PDF"
