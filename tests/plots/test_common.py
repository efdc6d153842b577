"""Tests of iml.plots._common: saving a figure, the legend labels of class weights and the rows a
figure of a long grid draws."""

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


def test_beta_labels_are_short_distinct_and_stay_inside_the_unit_interval():
    from iml.plots._common import beta_labels, drawn_rows

    assert beta_labels([0.01, 0.011552393085945804, 0.5, 0.99]) == ["0.01", "0.0116", "0.5", "0.99"]
    assert beta_labels([0.9999]) == ["0.9999"]  # never "1"
    assert beta_labels([0.9999991, 0.9999992]) == ["0.9999991", "0.9999992"]
    assert drawn_rows(64, 7).tolist() == [0, 10, 21, 32, 42, 52, 63]
    assert drawn_rows(5, 7).tolist() == [0, 1, 2, 3, 4]
