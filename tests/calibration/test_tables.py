"""Tests of iml.calibration.tables: the metrics of score vectors and the tables of a grid of
losses, raw and loss-corrected."""

import numpy as np
import pytest

from iml import calibration as cal
from iml.pipeline.markdown import markdown_by_loss


@pytest.mark.slow
def test_score_metrics_by_row_equals_each_row_alone():
    rng = np.random.default_rng(4)
    y = (rng.random(3000) < 0.2).astype(np.int32)
    scores = np.clip(rng.beta(2.0, 5.0, (70, 3000)) + 0.3 * y, 0.0, 1.0)  # two blocks of rows
    scores[3, :10] = 0.0  # clipped to 1e-7, as score_metrics does
    rows = cal.score_metrics_by_row(scores, y, n_bins=15)
    assert len(rows) == 70 and all(list(row) == list(cal.METRICS) for row in rows)
    for i in (0, 3, 69):
        alone = cal.score_metrics(scores[i], y, n_bins=15)
        for name in cal.METRICS:  # the same program, vmapped: equal to float32 rounding
            assert rows[i][name] == pytest.approx(alone[name], rel=1e-5, abs=1e-7), (i, name)
    assert rows[0]["ece"] == pytest.approx(
        float(cal.expected_calibration_error(scores[0].astype(np.float32), y, 15)), rel=1e-5
    )
    with pytest.raises(ValueError, match=r"scores must be \[m, N\] with m >= 1, got shape"):
        cal.score_metrics_by_row(scores[0], y)
    # A row with NaN scores (a correction with no inverse there) reports NaN metrics and how
    # many; the other rows are scored as they are alone.
    bad = scores[:2].copy()
    bad[1, [5, 9]] = np.nan
    first, second = cal.score_metrics_by_row(bad, y, n_bins=15)
    assert first == pytest.approx(rows[0], rel=1e-5)
    assert second["nan_scores"] == 2 and all(np.isnan(second[name]) for name in cal.METRICS)


# ----------------------------------------------------------------------------------------------
# Tables by loss: the B-weighted loss's renormalised correction reported apart
# ----------------------------------------------------------------------------------------------


def _one_vs_rest_scores(rng, n_rows, n_classes):
    """Scores of independent sigmoids: rows that do not sum to one, and labels."""
    labels = rng.integers(0, n_classes, n_rows)
    logits = rng.normal(-1.5, 1.0, (n_rows, n_classes))
    logits[np.arange(n_rows), labels] += 3.0
    return 1 / (1 + np.exp(-logits)), labels


@pytest.mark.slow
def test_a_matrix_table_reports_the_renormalised_correction_apart():
    from iml import loss_corrected_score_multiclass, loss_grid, loss_spec
    from iml.plots import figure_calibration_by_loss

    rng = np.random.default_rng(0)
    a, y = _one_vs_rest_scores(rng, 400, 4)
    B = np.ones((2, 4, 4))
    B[1, 3, 3], B[1, 0, 2] = 5.0, 3.0
    grid = loss_grid(loss_spec(B))
    scores = np.stack([a, a])
    table = cal.table_by_loss(grid, scores, y)
    assert list(table) == ["ones", "B[0,2]=3,B[3,3]=5"]
    for key, b in zip(table, B, strict=True):
        row = table[key]
        assert list(row) == ["raw", "loss_corrected", cal.RENORMALISED]
        a32 = a.astype(np.float32)
        plain = np.asarray(loss_corrected_score_multiclass(a32, b.astype(np.float32)), np.float64)
        summed = np.asarray(
            loss_corrected_score_multiclass(a32, b.astype(np.float32), renormalise=True),
            np.float64,
        )
        for method, values in (("loss_corrected", plain), (cal.RENORMALISED, summed)):
            expected = cal.multiclass_score_metrics(values, y)
            assert row[method] == pytest.approx(expected, rel=1e-5, abs=1e-6), (key, method)
    # Unit weights: the correction is the identity; renormalising is not.
    raw = {k: v for k, v in table["ones"]["raw"].items() if k != "loss_calibration"}
    assert table["ones"]["loss_corrected"] == raw
    assert table["ones"][cal.RENORMALISED]["brier"] != table["ones"]["raw"]["brier"]
    # Given corrected scores, the table renormalises those.
    corrected = cal.loss_corrected_scores(grid.spec, scores)
    given = cal.table_by_loss(grid, scores, y, corrected=corrected)
    for key, row in table.items():
        for method, metrics in row.items():
            mine, theirs = dict(metrics), dict(given[key][method])
            assert theirs.pop("loss_calibration", None) == mine.pop("loss_calibration", None)
            assert theirs == pytest.approx(mine, rel=1e-6), (key, method)
    markdown = markdown_by_loss(table, "loss").splitlines()
    assert markdown[0].split(" | ")[1:4] == [
        "raw top_label_ece", "corr. top_label_ece", "renorm. top_label_ece"
    ]  # fmt: skip
    # With intervals, each method's ECEs against the raw scores', paired on the same replicates:
    # the identity correction (unit weights) differs by exactly zero.
    import jax

    boot = cal.table_by_loss(grid, scores, y, ece_bootstrap=30, key=jax.random.key(0))
    for key, row in boot.items():
        for method in ("loss_corrected", cal.RENORMALISED):
            for metric in ("top_label_ece", "classwise_ece"):
                got = row[method][f"{metric}_minus_raw"]
                assert got == row[method][metric] - row["raw"][metric], (key, method, metric)
                low, high = row[method][f"{metric}_minus_raw_interval"]
                assert low <= high
    assert boot["ones"]["loss_corrected"]["top_label_ece_minus_raw_interval"] == [0.0, 0.0]
    assert "corr. classwise_ece − raw [paired 95% CI]" in markdown_by_loss(boot, "loss")
    # a column per metric and method, then the loss-calibration verdict of each loss
    assert len(markdown[2].split(" | ")) == 2 + 3 * len(cal.MULTICLASS_METRICS)
    lines = figure_calibration_by_loss(table).axes[0].lines
    assert {f"ece-{cal.RENORMALISED}", f"debiased-{cal.RENORMALISED}"} <= {
        ln.get_gid() for ln in lines
    }
    # Losses whose corrected scores lie on the simplex have nothing to renormalise.
    softmax = loss_grid(loss_spec("class_weighted_softmax", class_weights=np.ones((1, 4))))
    scores = np.stack([a / a.sum(-1, keepdims=True)])
    table = cal.table_by_loss(softmax, scores, y)
    assert list(table["ones"]) == ["raw", "loss_corrected"]
    assert "renorm." not in markdown_by_loss(table, "loss")


def test_scores_clipped_in_float32_equal_the_float64_clip_rounded():
    """The table clips its scores after rounding them to float32: the same numbers as clipping
    the float64 scores (NaN as the fill, infinities included) and rounding after, including
    values on and beside the bounds."""
    from iml.calibration.tables import _CLIP, _clipped_float32

    rng = np.random.default_rng(0)
    x = rng.uniform(-0.1, 1.1, size=200_000)
    near = [np.nan, np.inf, -np.inf, 0.0, 1.0, 1e-8, _CLIP, 1.0000001e-7, 0.9999999,
            0.99999991, 0.99999995, 0.9999999999, np.nextafter(_CLIP, 0),
            np.nextafter(1 - _CLIP, 1)]  # fmt: skip
    x[: len(near) * 100] = np.repeat(near, 100)
    for fill in (0.5, 0.25):
        want = np.clip(np.nan_to_num(x, nan=fill), _CLIP, 1 - _CLIP).astype(np.float32)
        got = _clipped_float32(x, fill)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
