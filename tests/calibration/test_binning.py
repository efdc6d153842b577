"""Tests of iml.calibration.binning: bin edges (quantile or uniform), the bin of every score
and the per-bin sums."""

import numpy as np
from sklearn.calibration import calibration_curve as sk_calibration_curve

from iml import calibration as cal


def test_ties_share_a_bin_and_duplicate_edges_give_empty_bins():
    # 60% of the scores tie at 0 (exactly), 10% at 1: several deciles collapse onto one value.
    scores = np.concatenate([np.zeros(60), np.linspace(0.2, 0.8, 30), np.ones(10)]).astype(
        np.float32
    )
    labels = np.concatenate([np.zeros(55), np.ones(5), np.zeros(15), np.ones(15), np.ones(10)])
    curve = cal.calibration_curve(scores, labels, n_bins=10)
    count = np.asarray(curve.count)
    # All 60 zeros share bin 0; the bins between the duplicate edges at 0 are empty with NaN means.
    assert count[0] == 60 and np.all(count[1:5] == 0)
    assert np.all(np.isnan(np.asarray(curve.mean_score)[1:5]))
    assert np.all(np.isnan(np.asarray(curve.event_rate)[1:5]))
    np.testing.assert_allclose(curve.event_rate[0], 5 / 60, rtol=1e-6)
    # Scores exactly 1 land in the last bin, together with nothing above them.
    bins = np.asarray(cal.assign_bins(scores, curve.edges))
    assert np.all(bins[scores == 1.0] == 9) and np.all(bins[scores == 0.0] == 0)
    assert count.sum() == 100
    prob_true, prob_pred = sk_calibration_curve(labels, scores, n_bins=10, strategy="quantile")
    np.testing.assert_allclose(np.asarray(curve.event_rate)[count > 0], prob_true, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(curve.mean_score)[count > 0], prob_pred, rtol=1e-6)


def test_uniform_bins_keep_edge_scores_in_lower_bin_and_empty_bins_nan():
    scores = np.array([0.0, 0.05, 0.1, 0.15, 0.95, 1.0], np.float32)
    labels = np.array([0, 0, 1, 0, 1, 1])
    curve = cal.calibration_curve(scores, labels, n_bins=4, strategy="uniform")
    # Bins (0, .25], (.25, .5], (.5, .75], (.75, 1], the first holding 0 too.
    np.testing.assert_array_equal(curve.count, [4, 0, 0, 2])
    np.testing.assert_allclose(curve.event_rate[0], 0.25)
    np.testing.assert_allclose(curve.mean_score[3], 0.975)
    assert np.isnan(curve.event_rate[1]) and np.isnan(curve.mean_score[2])
