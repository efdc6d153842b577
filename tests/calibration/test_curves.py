"""Tests of iml.calibration.curves: the binned calibration curve (Definition 1), its bootstrap
and binomial intervals, and the Clopper-Pearson interval of a binomial rate."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _calibration_samples import binary_sample, ece_by_hand
from absl.testing import parameterized
from sklearn.calibration import calibration_curve as sk_calibration_curve

from iml import calibration as cal

RNG = np.random.default_rng(0)


class CalibrationCurve(chex.TestCase):
    """The curve against scikit-learn's and against repeated observations, jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.parameters("quantile", "uniform")
    def test_calibration_curve_matches_sklearn(self, strategy):
        calibration_curve = self.variant(
            lambda s, y: cal.calibration_curve(s, y, n_bins=10, strategy=strategy)
        )
        scores, labels = binary_sample(2000, seed=1)
        curve = calibration_curve(scores, labels)
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

    @chex.variants(with_jit=True, without_jit=True)
    def test_weighted_curve_equals_repeated_observations(self):
        calibration_curve = self.variant(
            lambda s, y, w: cal.calibration_curve(s, y, strategy="uniform", sample_weight=w)
        )
        scores, labels = binary_sample(300, seed=2)
        reps = RNG.integers(0, 4, 300)
        weighted = calibration_curve(scores, labels, reps)
        repeated = calibration_curve(np.repeat(scores, reps), np.repeat(labels, reps), None)
        chex.assert_trees_all_equal_shapes(weighted, repeated)
        np.testing.assert_allclose(weighted.count, repeated.count)
        np.testing.assert_allclose(weighted.event_rate, repeated.event_rate, rtol=1e-5)
        np.testing.assert_allclose(weighted.mean_score, repeated.mean_score, rtol=1e-5)


def test_calibration_curve_bootstrap_interval_covers_estimate_and_jits():
    scores, labels = binary_sample(1000, seed=3)
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
        ({"scores": np.array([0.1, np.nan, 0.3, 0.4])}, r"scores must lie in \[0, 1\] .* 1 NaN"),
        ({"scores": np.array([0.1, 1.2, 0.3, 0.4])}, r"scores must lie in \[0, 1\] .* max 1\.2"),
        ({"scores": np.array([]), "labels": np.array([])}, "scores is empty"),
        ({"n_bins": 5}, "fewer than n_bins"),
        (
            {"sample_weight": np.array([1.0, -1.0, 1.0, 1.0])},
            r"sample_weight must lie in \[0, inf\) without NaN",
        ),
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


@pytest.mark.slow
def test_curve_carries_the_clopper_pearson_interval_of_every_bin():
    from scipy.stats import binomtest

    scores, labels = binary_sample(1000, seed=4)
    labels = np.where(scores < np.quantile(scores, 0.3), 0, labels)  # three bins without events
    curve = cal.calibration_curve(scores, labels, n_bins=10, confidence=0.9)
    count = np.asarray(curve.count)
    events = np.rint(np.asarray(curve.event_rate) * count).astype(int)
    assert np.sum(events == 0) >= 3
    expected = np.array(
        [
            binomtest(int(k), int(n)).proportion_ci(0.9, method="exact")
            for k, n in zip(events, count, strict=True)
        ]
    ).T
    got = np.asarray(curve.event_rate_binomial_interval)
    np.testing.assert_allclose(got, expected, rtol=3e-4, atol=1e-8)
    rate = np.asarray(curve.event_rate)
    assert np.all((got[0] <= rate) & (rate <= got[1]))
    # Weights that scale every observation alike leave the effective count, so the interval.
    scaled = cal.calibration_curve(
        scores, labels, n_bins=10, confidence=0.9, sample_weight=np.full(1000, 3.0)
    )
    np.testing.assert_allclose(scaled.event_rate_binomial_interval, got, rtol=1e-5, atol=1e-7)
    # Unequal weights: Kish's effective count n_eff = (sum w)^2 / sum w^2 < sum w widens it.
    weights = np.where(np.arange(1000) % 2 == 0, 1.0, 3.0)
    weighted = cal.calibration_curve(
        scores, labels, n_bins=10, confidence=0.9, sample_weight=weights
    )
    w_hi = np.asarray(weighted.event_rate_binomial_interval)[1]
    assert np.all(w_hi[events == 0] > got[1][events == 0])
    # Empty bins (duplicate edges) get NaN bounds; the curve still jits and vmaps.
    tied = cal.calibration_curve(np.r_[np.zeros(60), np.linspace(0.2, 0.8, 40)],
                                 np.r_[np.zeros(60), np.ones(40)], n_bins=10)  # fmt: skip
    empty = np.asarray(tied.count) == 0
    assert empty.any() and np.all(np.isnan(np.asarray(tied.event_rate_binomial_interval)[:, empty]))
    batch = jax.jit(jax.vmap(lambda y: cal.calibration_curve(scores, y)))(
        jnp.stack([labels, 1 - labels])
    )
    np.testing.assert_allclose(
        batch.event_rate_binomial_interval[0],
        cal.calibration_curve(scores, labels).event_rate_binomial_interval,
        rtol=1e-6,
    )


@pytest.mark.slow
def test_rare_class_prevalence_of_chestxray14(shared_data_path):
    import csv
    import gzip

    path = shared_data_path("nih-chestxray14-meta") / "Data_Entry_2017_v2020.csv.gz"
    with gzip.open(path, "rt") as f:
        rows = list(csv.DictReader(f))
    labels = np.array(["Pneumonia" in r["Finding Labels"] for r in rows], np.int32)
    assert labels.size == 112_120 and labels.sum() == 1_431
    # Calibrated scores with the real prevalence (~1.3%): most deciles hold no positive.
    rng = np.random.default_rng(9)
    scores = np.zeros(labels.size, np.float32)
    scores[labels == 1] = rng.beta(2, 20, labels.sum())
    scores[labels == 0] = rng.beta(0.3, 200, (labels == 0).sum())
    curve = cal.calibration_curve(scores, labels)
    positives_per_bin = np.asarray(curve.event_rate) * np.asarray(curve.count)
    assert np.sum(np.round(positives_per_bin) == 0) >= 5
    prob_true, prob_pred = sk_calibration_curve(
        labels, scores.astype(np.float64), n_bins=10, strategy="quantile"
    )
    np.testing.assert_allclose(curve.event_rate, prob_true, atol=1e-6)
    np.testing.assert_allclose(curve.mean_score, prob_pred, rtol=1e-4)
    np.testing.assert_allclose(curve.count.sum(), 112_120)
    ece = cal.expected_calibration_error(scores, labels)
    by_hand = ece_by_hand(
        scores.astype(np.float64), labels, np.percentile(scores, np.linspace(0, 100, 11)), "l1"
    )
    np.testing.assert_allclose(ece, by_hand, rtol=1e-3)


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_clopper_pearson_interval_matches_scipy_exact(confidence):
    from scipy.stats import binomtest

    events = np.array([0, 1, 2, 5, 17, 90, 179, 180, 0, 1, 3, 7, 0, 40, 1000])
    count = np.array([180, 180, 180, 180, 180, 180, 180, 180, 1, 1, 7, 7, 5000, 5000, 20000])
    got = np.asarray(cal.clopper_pearson_interval(events, count, confidence))
    expected = np.array(
        [
            binomtest(int(k), int(n)).proportion_ci(confidence, method="exact")
            for k, n in zip(events, count, strict=True)
        ]
    ).T
    chex.assert_shape(got, (2, len(events)))
    # float32 betainc: about 1e-4 relative for counts in the hundreds, 1e-3 in the thousands.
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-8)
    small = count <= 180
    np.testing.assert_allclose(got[:, small], expected[:, small], rtol=2e-4, atol=1e-8)


def test_clopper_pearson_bounds_without_events_and_with_only_events_have_closed_forms():
    n = np.array([1.0, 10.0, 180.0, 1797.0])
    alpha = 0.05
    lower, upper = np.asarray(cal.clopper_pearson_interval(np.zeros(4), n, 1 - alpha))
    assert np.all(lower == 0.0)
    np.testing.assert_allclose(upper, 1 - (alpha / 2) ** (1 / n), rtol=1e-5)
    lower, upper = np.asarray(cal.clopper_pearson_interval(n, n, 1 - alpha))
    assert np.all(upper == 1.0)
    np.testing.assert_allclose(lower, (alpha / 2) ** (1 / n), rtol=1e-5)


@pytest.mark.slow
def test_clopper_pearson_interval_jits_vmaps_and_turns_invalid_entries_into_nan():
    events = jnp.array([0.0, 3.0, 5.0, 4.0, 1.0])
    count = jnp.array([10.0, 10.0, 0.0, 2.0, 10.0])  # an empty bin, and more events than trials
    f = jax.jit(jax.vmap(cal.clopper_pearson_interval, in_axes=(0, 0, None), out_axes=1))
    got = np.asarray(f(events, count, 0.9))
    eager = np.asarray(cal.clopper_pearson_interval(events[:2], count[:2], 0.9))
    np.testing.assert_allclose(got[:, :2], eager, rtol=1e-6)
    assert np.all(np.isnan(got[:, 2:4])) and np.all(np.isfinite(got[:, [0, 1, 4]]))
    # The interval widens with the confidence and always holds the rate.
    wide = np.asarray(cal.clopper_pearson_interval(3.0, 10.0, 0.99))
    narrow = np.asarray(cal.clopper_pearson_interval(3.0, 10.0, 0.5))
    assert wide[0] < narrow[0] < 0.3 < narrow[1] < wide[1]


@pytest.mark.parametrize(
    ("events", "count", "confidence", "match"),
    [
        (-1.0, 10.0, 0.95, "events"),
        (np.nan, 10.0, 0.95, "events"),
        (1.0, -2.0, 0.95, "count"),
        (11.0, 10.0, 0.95, "events exceeds count"),
        (1.0, 10.0, 1.0, "confidence"),
        (1.0, 10.0, 0.0, "confidence"),
    ],
)
def test_clopper_pearson_interval_rejects_bad_input(events, count, confidence, match):
    with pytest.raises(ValueError, match=match):
        cal.clopper_pearson_interval(events, count, confidence)
