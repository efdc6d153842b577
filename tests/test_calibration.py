"""Tests for iml.calibration: binning, curves, metrics, sweeps and the loss-calibration test."""

from pathlib import Path

import jax
import numpy as np
import pytest
from sklearn.calibration import calibration_curve as sk_calibration_curve

from iml import calibration as cal

RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def data_dir() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "data"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("shared/data not found above the test file")


def _binary_sample(n: int, seed: int = 0, prevalence_shift: float = 0.0):
    rng = np.random.default_rng(seed)
    scores = rng.beta(2.0, 5.0, n).astype(np.float32)
    labels = (rng.random(n) < np.clip(scores + prevalence_shift, 0, 1)).astype(np.int32)
    return scores, labels


# ---------------------------------------------------------------------------------------------
# Binning and calibration curves
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["quantile", "uniform"])
def test_calibration_curve_matches_sklearn(strategy):
    scores, labels = _binary_sample(2000, seed=1)
    curve = cal.calibration_curve(scores, labels, n_bins=10, strategy=strategy)
    prob_true, prob_pred = sk_calibration_curve(
        labels, scores.astype(np.float64), n_bins=10, strategy=strategy
    )
    keep = np.asarray(curve.count) > 0
    np.testing.assert_allclose(np.asarray(curve.event_rate)[keep], prob_true, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(curve.mean_score)[keep], prob_pred, rtol=1e-5)
    assert float(curve.count.sum()) == 2000
    if strategy == "quantile":
        np.testing.assert_allclose(
            curve.edges,
            np.percentile(scores.astype(np.float64), np.linspace(0, 100, 11)),
            rtol=1e-5,
        )
        assert np.all(np.abs(np.asarray(curve.count) - 200) <= 1)


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


def test_weighted_curve_equals_repeated_observations():
    scores, labels = _binary_sample(300, seed=2)
    reps = RNG.integers(0, 4, 300)
    weighted = cal.calibration_curve(scores, labels, strategy="uniform", sample_weight=reps)
    repeated = cal.calibration_curve(
        np.repeat(scores, reps), np.repeat(labels, reps), strategy="uniform"
    )
    np.testing.assert_allclose(weighted.count, repeated.count)
    np.testing.assert_allclose(weighted.event_rate, repeated.event_rate, rtol=1e-5)
    np.testing.assert_allclose(weighted.mean_score, repeated.mean_score, rtol=1e-5)


def test_calibration_curve_bootstrap_interval_covers_estimate_and_jits():
    scores, labels = _binary_sample(1000, seed=3)
    f = jax.jit(
        lambda s, y, k: cal.calibration_curve(s, y, n_bootstrap=100, key=k),
    )
    curve = f(scores, labels, jax.random.key(0))
    lo, hi = np.asarray(curve.event_rate_interval)
    assert np.all(lo <= np.asarray(curve.event_rate) + 1e-6)
    assert np.all(np.asarray(curve.event_rate) <= hi + 1e-6)
    # Width of a 95% interval of a rate near p from 100 observations: about 4 sd.
    p = np.asarray(curve.event_rate)
    sd = np.sqrt(p * (1 - p) / 100)
    assert np.all((hi - lo) < 6 * sd + 0.02) and np.all((hi - lo) > 2 * sd - 0.02)
    mlo, mhi = np.asarray(curve.mean_score_interval)
    assert np.all(mlo <= np.asarray(curve.mean_score) + 1e-6)
    assert np.all(np.asarray(curve.mean_score) <= mhi + 1e-6)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"labels": np.array([0, 1, 2, 1])}, "labels must be 0 or 1"),
        ({"scores": np.array([0.1, np.nan, 0.3, 0.4])}, "scores contains NaN"),
        ({"scores": np.array([0.1, 1.2, 0.3, 0.4])}, "outside"),
        ({"scores": np.array([]), "labels": np.array([])}, "scores is empty"),
        ({"n_bins": 5}, "fewer than n_bins"),
        ({"sample_weight": np.array([1.0, -1.0, 1.0, 1.0])}, "negative"),
        ({"sample_weight": np.array([1.0, 1.0])}, "sample_weight must have shape"),
        ({"strategy": "kmeans"}, "strategy"),
        ({"labels": np.array([0, 1, 1])}, "labels has shape"),
    ],
)
def test_calibration_curve_rejects_bad_input(kwargs, match):
    args = {
        "scores": np.array([0.1, 0.2, 0.3, 0.4]),
        "labels": np.array([0, 1, 0, 1]),
        "n_bins": 2,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        cal.calibration_curve(**args)
