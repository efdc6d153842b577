"""Tests for iml.calibration: binning, curves, metrics, sweeps and the loss-calibration test."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _training_helpers import RUNS_LONG
from sklearn.calibration import calibration_curve as sk_calibration_curve

from iml import calibration as cal
from iml.pipeline.markdown import markdown_by_loss

RNG = np.random.default_rng(0)


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


# ---------------------------------------------------------------------------------------------
# Binomial (Clopper-Pearson) interval of an event rate
# ---------------------------------------------------------------------------------------------


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
    assert got.shape == (2, len(events))
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


def test_curve_carries_the_clopper_pearson_interval_of_every_bin():
    from scipy.stats import binomtest

    scores, labels = _binary_sample(1000, seed=4)
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


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------


def _multiclass_sample(n: int, k: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 1.5
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = np.array([rng.choice(k, p=p) for p in probs])
    sharpened = probs**1.5 / (probs**1.5).sum(1, keepdims=True)  # overconfident model
    return sharpened.astype(np.float32), labels


def test_binary_metrics_match_sklearn_with_weights():
    from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

    scores, labels = _binary_sample(3000, seed=4)
    scores = np.round(scores, 2)  # many ties for the Mann-Whitney statistic
    scores = np.clip(scores, 0.005, 0.995).astype(np.float32)
    w = RNG.uniform(0.2, 3.0, 3000)
    s64 = scores.astype(np.float64)
    for weight in (None, w):
        np.testing.assert_allclose(
            cal.auroc(scores, labels, weight),
            roc_auc_score(labels, s64, sample_weight=weight),
            rtol=1e-5,
        )
        np.testing.assert_allclose(
            cal.brier_score(scores, labels, weight),
            brier_score_loss(labels, s64, sample_weight=weight),
            rtol=1e-5,
        )
        np.testing.assert_allclose(
            cal.mean_log_loss(scores, labels, weight),
            log_loss(labels, s64, sample_weight=weight),
            rtol=1e-5,
        )


def test_multiclass_metrics_match_sklearn():
    from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

    scores, labels = _multiclass_sample(1500, seed=5)
    w = RNG.uniform(0.5, 2.0, 1500)
    p64 = scores.astype(np.float64)
    p64 /= p64.sum(1, keepdims=True)
    np.testing.assert_allclose(
        cal.auroc(scores, labels), roc_auc_score(labels, p64, multi_class="ovr"), rtol=1e-4
    )
    np.testing.assert_allclose(
        cal.brier_score(scores, labels, w),
        brier_score_loss(labels, p64, sample_weight=w, labels=[0, 1, 2, 3]),
        rtol=1e-4,
    )
    np.testing.assert_allclose(
        cal.mean_log_loss(scores, labels, w), log_loss(labels, p64, sample_weight=w), rtol=1e-4
    )


def _ece_by_hand(scores, labels, edges, norm):
    """Independent float64 loop: right-closed bins, first bin closed."""
    n = len(scores)
    gaps, shares = [], []
    for b in range(len(edges) - 1):
        if b == 0:
            member = scores <= edges[1]
        else:
            member = (scores > edges[b]) & (scores <= edges[b + 1])
        if b == len(edges) - 2:
            member = scores > edges[b] if b > 0 else np.ones(n, bool)
        if member.sum() == 0:
            continue
        gaps.append(abs(scores[member].mean() - labels[member].mean()))
        shares.append(member.sum() / n)
    gaps, shares = np.array(gaps), np.array(shares)
    return {
        "l1": np.sum(shares * gaps),
        "l2": np.sqrt(np.sum(shares * gaps**2)),
        "max": gaps.max(),
    }[norm]


@pytest.mark.parametrize(
    ("norm", "strategy"), [("l1", "quantile"), ("l2", "uniform"), ("max", "quantile")]
)
def test_ece_matches_hand_computation(norm, strategy):
    scores, labels = _binary_sample(1200, seed=6, prevalence_shift=0.05)
    s64 = scores.astype(np.float64)
    edges = (
        np.percentile(s64, np.linspace(0, 100, 11))
        if strategy == "quantile"
        else np.linspace(0, 1, 11)
    )
    got = cal.expected_calibration_error(scores, labels, strategy=strategy, norm=norm)
    np.testing.assert_allclose(got, _ece_by_hand(s64, labels, edges, norm), rtol=1e-4)


def test_ece_tiny_example_by_hand():
    scores = np.array([0.1, 0.2, 0.6, 0.8], np.float32)
    labels = np.array([0, 1, 1, 1])
    # Two uniform bins: [0, .5] holds .1, .2 (mean .15, rate .5); (.5, 1] holds .6, .8 (.7, 1).
    ece = cal.expected_calibration_error(scores, labels, n_bins=2, strategy="uniform")
    np.testing.assert_allclose(ece, 0.5 * 0.35 + 0.5 * 0.3, rtol=1e-6)
    mce = cal.expected_calibration_error(scores, labels, n_bins=2, strategy="uniform", norm="max")
    np.testing.assert_allclose(mce, 0.35, rtol=1e-6)


def test_debiased_ece_is_unbiased_for_calibrated_scores_where_plugin_is_not():
    # Calibrated scores: the true squared calibration error is 0. The plug-in estimate of the
    # squared L2 error is biased upward by about sum_b p_b r_b(1-r_b)/n_b; the debiased one is not.
    keys = jax.random.split(jax.random.key(7), 200)

    def one(k):
        k1, k2 = jax.random.split(k)
        s = jax.random.uniform(k1, (2000,))
        y = (jax.random.uniform(k2, (2000,)) < s).astype(jnp.int32)
        plug = cal.expected_calibration_error(s, y, norm="l2") ** 2
        deb = cal.expected_calibration_error(s, y, norm="l2", debias=True)
        return plug, deb

    plug, deb = jax.jit(jax.vmap(one))(keys)
    # Expected plug-in bias: mean of r(1-r) over scores / bin size ~ (1/6) / 200.
    assert float(plug.mean()) > 0.5 * (1 / 6) / 200
    # The debiased estimator returns sqrt(max(estimate, 0)); its square averages near zero.
    assert float(jnp.mean(deb**2)) < 0.3 * float(plug.mean())


def test_multiclass_ece_top_label_and_classwise():
    scores, labels = _multiclass_sample(2000, seed=8)
    top = cal.expected_calibration_error(scores, labels, multiclass="top_label")
    conf = scores.max(1).astype(np.float64)
    correct = (scores.argmax(1) == labels).astype(float)
    edges = np.percentile(conf, np.linspace(0, 100, 11))
    np.testing.assert_allclose(top, _ece_by_hand(conf, correct, edges, "l1"), rtol=1e-4)
    classwise = cal.expected_calibration_error(scores, labels, multiclass="classwise")
    by_hand = np.mean(
        [
            _ece_by_hand(
                scores[:, j].astype(np.float64),
                (labels == j).astype(float),
                np.percentile(scores[:, j].astype(np.float64), np.linspace(0, 100, 11)),
                "l1",
            )
            for j in range(4)
        ]
    )
    np.testing.assert_allclose(classwise, by_hand, rtol=1e-4)
    # The sharpened (overconfident) model is visibly miscalibrated.
    assert float(top) > 0.02


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
    by_hand = _ece_by_hand(
        scores.astype(np.float64), labels, np.percentile(scores, np.linspace(0, 100, 11)), "l1"
    )
    np.testing.assert_allclose(ece, by_hand, rtol=1e-3)


@pytest.mark.parametrize(
    ("fn", "scores", "labels", "match"),
    [
        (cal.auroc, np.full((3, 2), 0.5), np.array([0, 2, 1]), r"class indices in \[0, 2\)"),
        (cal.brier_score, np.array([[0.5, np.nan]]), np.array([0]), "NaN"),
        (cal.mean_log_loss, np.zeros((2, 2, 2)), np.array([0, 1]), "shape"),
        (cal.brier_score, np.array([0.2, 0.3]), np.array([1, 3]), "labels must be 0 or 1"),
    ],
)
def test_metrics_reject_bad_input(fn, scores, labels, match):
    with pytest.raises(ValueError, match=match):
        fn(scores, labels)


def test_ece_rejects_bad_options():
    s, y = _binary_sample(50)
    with pytest.raises(ValueError, match="debias"):
        cal.expected_calibration_error(s, y, norm="l1", debias=True)
    with pytest.raises(ValueError, match="norm"):
        cal.expected_calibration_error(s, y, norm="l3")
    with pytest.raises(ValueError, match="multiclass"):
        cal.expected_calibration_error(s, y, multiclass="pairwise")


# ---------------------------------------------------------------------------------------------
# Loss calibration (Definition 2) and the beta sweep
# ---------------------------------------------------------------------------------------------


def _loss_calibrated_sample(key, n: int, beta: float):
    """Posteriors ~ Beta(1, 5) (inverse CDF), scores c^beta(posterior), labels ~ posterior."""
    from iml.scoring import optimal_score

    k1, k2 = jax.random.split(key)
    posterior = 1.0 - (1.0 - jax.random.uniform(k1, (n,))) ** (1.0 / 5.0)
    scores = optimal_score(posterior, beta)
    labels = (jax.random.uniform(k2, (n,)) < posterior).astype(jnp.int32)
    return scores, labels


def _np_loss_calibrated_sample(seed: int, n: int, beta: float):
    """NumPy twin of _loss_calibrated_sample (no JAX compilation), float32 scores."""
    rng = np.random.default_rng(seed)
    posterior = 1.0 - (1.0 - rng.random(n)) ** (1.0 / 5.0)
    scores = beta * posterior / (beta * posterior + (1 - beta) * (1 - posterior))
    labels = (rng.random(n) < posterior).astype(np.int32)
    return scores.astype(np.float32), labels


def test_loss_calibration_test_size_and_power():
    """Rejection rate at alpha = 0.05 over 200 simulated datasets of 1,000 observations.

    H0 true (scores optimal for beta = 0.8, tested at 0.8): the rejection rate is the test's size.
    H0 false (the same kind of data tested at beta = 0.65, i.e. the wrong loss): its power.
    """

    @functools.partial(jax.jit, compiler_options=RUNS_LONG)
    def rejection_rate(keys, test_beta):
        def one(k):
            k_data, k_test = jax.random.split(k)
            scores, labels = _loss_calibrated_sample(k_data, 1000, 0.8)
            r = cal.loss_calibration_test(scores, labels, test_beta, n_bootstrap=99, key=k_test)
            covered = (r.gap_interval[0] <= r.gap) & (r.gap <= r.gap_interval[1])
            return r.p_value <= 0.05, covered

        rejected, covered = jax.lax.map(one, keys)
        return jnp.mean(rejected), jnp.mean(covered)

    keys = jax.random.split(jax.random.key(10), 200)
    size, covered = rejection_rate(keys, 0.8)
    power, _ = rejection_rate(keys, 0.65)
    # Binomial sd of a rate near 0.05 over 200 datasets is about 0.015.
    assert 0.015 <= float(size) <= 0.095, float(size)
    assert float(power) >= 0.9, float(power)
    assert float(covered) >= 0.9


def test_loss_calibration_gap_matches_hand_computation():
    scores, labels = _np_loss_calibrated_sample(11, 2000, 0.9)
    s, y = np.asarray(scores, np.float64), np.asarray(labels)
    key = jax.random.key(12)
    r = cal.loss_calibration_test(scores, labels, 0.9, n_bootstrap=99, key=key)
    # By hand in float64: each decile's loss minus the loss of a' = c^beta(rate) for all of it.
    edges = np.percentile(s, np.linspace(0, 100, 11))
    bins = np.searchsorted(edges[1:-1], s)
    beta = 0.9

    def lb(a, yy):
        with np.errstate(divide="ignore"):
            return np.where(yy == 1, -beta * np.log(a), -(1 - beta) * np.log1p(-a))

    reduction = []
    for b in range(10):
        m = bins == b
        rate = y[m].mean()
        best = beta * rate / (beta * rate + (1 - beta) * (1 - rate))  # c^beta, Prop. 2
        np.testing.assert_allclose(r.optimal_score[b], best, rtol=1e-5)
        reduction.append((lb(s[m], y[m]).sum() - lb(np.full(m.sum(), best), y[m]).sum()) / 2000)
    np.testing.assert_allclose(r.loss_reduction, reduction, atol=2e-6)
    np.testing.assert_allclose(r.gap, np.sum(reduction), atol=1e-5)
    assert 0.05 < float(r.p_value) <= 1.0


def test_loss_calibration_test_with_focal_loss_passes_and_raw_posteriors_fail():
    from iml.losses import focal_loss
    from iml.scoring import optimal_score_for_loss

    k1, k2, k3 = jax.random.split(jax.random.key(13), 3)
    posterior = 1.0 - (1.0 - jax.random.uniform(k1, (2000,))) ** (1.0 / 3.0)
    labels = (jax.random.uniform(k2, (2000,)) < posterior).astype(jnp.int32)
    posterior = jnp.clip(posterior, 1e-3, 1 - 1e-3)
    focal = lambda a, y: focal_loss(a, y, 2.0, 0.5)  # noqa: E731
    optimal = optimal_score_for_loss(focal, posterior)
    passed = cal.loss_calibration_test(optimal, labels, focal, n_bootstrap=99, key=k3)
    failed = cal.loss_calibration_test(posterior, labels, focal, n_bootstrap=99, key=k3)
    assert float(passed.p_value) > 0.05
    assert float(failed.p_value) <= 0.05


def test_loss_calibration_reads_the_loss_as_a_spec_a_name_or_a_callable_alike():
    from iml.losses import focal_loss
    from iml.spec import loss_spec

    k1, k2, k3 = jax.random.split(jax.random.key(21), 3)
    posterior = jnp.clip(jax.random.uniform(k1, (1500,)), 1e-3, 1 - 1e-3)
    labels = (jax.random.uniform(k2, (1500,)) < posterior).astype(jnp.int32)
    spec = loss_spec("focal", gamma=2.0, alpha=0.5)
    scores = spec.optimal_score(posterior)
    as_spec = cal.loss_calibration_test(scores, labels, spec, n_bootstrap=49, key=k3)
    as_config = cal.loss_calibration_test(
        scores, labels, {"name": "focal", "gamma": 2.0}, n_bootstrap=49, key=k3
    )
    as_callable = cal.loss_calibration_test(
        scores, labels, lambda a, y: focal_loss(a, y, 2.0, 0.5), n_bootstrap=49, key=k3
    )
    for other in (as_config, as_callable):
        np.testing.assert_allclose(other.gap, as_spec.gap, rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(other.p_value, as_spec.p_value)
    # The beta-weighted Brier score: the same beta, another base loss, another gap.
    brier = cal.loss_calibration_test(
        scores, labels, loss_spec("squared", beta=0.5), n_bootstrap=49, key=k3
    )
    assert abs(float(brier.gap) - float(as_spec.gap)) > 1e-6
    curve = cal.loss_calibration_curve(scores, labels, spec)
    np.testing.assert_allclose(curve.optimal_score_grid, spec.optimal_score(curve.posterior_grid))
    with pytest.raises(ValueError, match="binary loss"):
        cal.loss_calibration_test(scores, labels, np.eye(3) + 1.0, key=k3)
    with pytest.raises(ValueError, match="not a batch"):
        cal.loss_calibration_curve(scores, labels, np.array([0.3, 0.7]))


def test_loss_calibration_curve_against_theoretical_map():
    from iml.scoring import optimal_score

    scores, labels = _np_loss_calibrated_sample(14, 20_000, 0.9)
    curve = cal.loss_calibration_curve(scores, labels, 0.9)
    np.testing.assert_allclose(curve.optimal_score, optimal_score(curve.event_rate, 0.9), rtol=1e-5)
    np.testing.assert_allclose(
        curve.optimal_score_grid, optimal_score(curve.posterior_grid, 0.9), rtol=1e-5
    )
    # Loss-calibrated: the empirical points lie near the theoretical map, not near the diagonal.
    assert float(jnp.max(jnp.abs(curve.optimal_score - curve.mean_score))) < 0.06
    assert float(jnp.max(jnp.abs(curve.event_rate - curve.mean_score))) > 0.2
    wrong = cal.loss_calibration_curve(scores, labels, 0.5)
    assert float(jnp.max(jnp.abs(wrong.optimal_score - wrong.mean_score))) > 0.2


def test_beta_sweep_matches_per_beta_computations_and_exact_bootstrap():
    scores, labels = _np_loss_calibrated_sample(15, 2000, 0.9)
    betas = np.array([0.3, 0.6, 0.8, 0.9, 0.95], np.float32)
    key = jax.random.key(16)
    sw = cal.beta_sweep(scores, labels, betas, n_bootstrap=40, key=key, beta_chunk=2, tile=64)
    sw = jax.tree.map(np.asarray, sw)
    s = scores.astype(np.float64)
    for i, beta in enumerate(betas.astype(np.float64)):
        corrected = ((1 - beta) * s / ((1 - beta) * s + beta * (1 - s))).astype(np.float32)
        curve = cal.calibration_curve(corrected, labels)
        np.testing.assert_allclose(sw.mean_score[i], curve.mean_score, rtol=1e-5)
        np.testing.assert_allclose(sw.event_rate, curve.event_rate, rtol=1e-6)
        np.testing.assert_allclose(
            sw.ece[i], cal.expected_calibration_error(corrected, labels), rtol=1e-4
        )
        test = cal.loss_calibration_test(scores, labels, float(beta), n_bootstrap=99, key=key)
        np.testing.assert_allclose(sw.loss_calibration_gap[i], test.gap, rtol=1e-4, atol=1e-7)
    # The bootstrap intervals, recomputed in float64 NumPy from the same resampling multiplicities
    # (the sweep resamples the scores in sorted order with fixed bins).
    mult = np.asarray(cal._bootstrap_counts(key, 2000, 40), np.float64)
    order = np.argsort(scores, kind="stable")
    s, y = s[order], labels[order].astype(np.float64)
    bins = np.searchsorted(sw.edges.astype(np.float64)[1:-1], s)
    for i, beta in enumerate(betas.astype(np.float64)):
        g = (1 - beta) * s / ((1 - beta) * s + beta * (1 - s))
        eces, means = [], []
        for m in mult:
            cnt = np.bincount(bins, m, 10)
            mean = np.bincount(bins, m * g, 10) / cnt
            rate = np.bincount(bins, m * y, 10) / cnt
            eces.append(np.sum(cnt / cnt.sum() * np.abs(mean - rate)))
            means.append(mean)
        np.testing.assert_allclose(
            sw.ece_interval[:, i], np.percentile(eces, [2.5, 97.5]), rtol=1e-4, atol=1e-6
        )
        np.testing.assert_allclose(
            sw.mean_score_interval[:, i], np.percentile(means, [2.5, 97.5], axis=0), rtol=1e-4
        )


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s, y: cal.beta_sweep(s, y, [0.5, 1.0], n_bootstrap=0), "betas"),
        (lambda s, y: cal.beta_sweep(s, y, [0.5], n_bootstrap=5), "key"),
        (lambda s, y: cal.beta_sweep(s, y, [0.5], n_bootstrap=0, norm="l1", debias=True), "debias"),
        (lambda s, y: cal.loss_calibration_test(s, y, 1.5, key=jax.random.key(0)), "beta"),
        (lambda s, y: cal.loss_calibration_test(s, y, 0.5, n_bootstrap=0), "n_bootstrap"),
        (lambda s, y: cal.loss_calibration_test(s, y * 2, 0.5, key=jax.random.key(0)), "labels"),
        (lambda s, y: cal.loss_calibration_curve(s[:5], y[:5], 0.5), "fewer than n_bins"),
    ],
)
def test_sweep_and_loss_calibration_reject_bad_input(call, match):
    scores, labels = _binary_sample(100)
    with pytest.raises(ValueError, match=match):
        call(scores, labels)


def test_under_jit_nan_scores_give_nan_results_instead_of_errors():
    scores, labels = _binary_sample(200, seed=18)
    scores[7] = np.nan
    curve = jax.jit(lambda s, y: cal.calibration_curve(s, y, strategy="uniform"))(scores, labels)
    # The NaN stays in the bin it was assigned to; the other bins are unaffected.
    filled = np.asarray(curve.count) > 0
    assert int(np.sum(np.isnan(np.asarray(curve.mean_score))[filled])) == 1
    assert np.isnan(float(jax.jit(cal.expected_calibration_error)(scores, labels)))
    assert np.isnan(float(jax.jit(cal.auroc)(scores, labels)))
    assert np.isnan(float(jax.jit(cal.brier_score)(scores, labels)))


def test_under_jit_bad_labels_and_negative_weights_give_nan():
    scores, labels = _binary_sample(200, seed=21)
    bad_labels = labels.copy()
    bad_labels[4] = 2
    weights = np.ones(200)
    weights[9] = -1.0
    key = jax.random.key(0)

    def everything(s, y, w):
        return (
            cal.expected_calibration_error(s, y, sample_weight=w),
            cal.brier_score(s, y, w),
            cal.mean_log_loss(s, y, w),
            cal.auroc(s, y, w),
            cal.loss_calibration_test(s, y, 0.5, sample_weight=w, n_bootstrap=9, key=key).p_value,
        )

    run = jax.jit(everything)
    for y, w in ((bad_labels, np.ones(200)), (labels, weights)):
        assert np.all(np.isnan(np.array(run(scores, y, w))))
    assert not np.any(np.isnan(np.array(run(scores, labels, np.ones(200)))))
    multiclass, classes = _multiclass_sample(50, seed=22)
    classes[0] = 7
    for fn in (cal.expected_calibration_error, cal.brier_score, cal.mean_log_loss, cal.auroc):
        assert np.isnan(float(jax.jit(fn)(multiclass, classes)))


def test_impossible_label_makes_the_gap_infinite_and_rejects():
    scores, labels = _np_loss_calibrated_sample(19, 2000, 0.5)
    scores[0], labels[0] = 0.0, 1  # a positive at score 0: impossible under H0
    r = cal.loss_calibration_test(scores, labels, 0.5, n_bootstrap=99, key=jax.random.key(0))
    assert np.isinf(float(r.gap)) and int(np.sum(np.isinf(np.asarray(r.loss_reduction)))) == 1
    np.testing.assert_allclose(r.p_value, 1 / 100)


def test_beta_sweep_finds_the_training_weight_with_debiased_l2_and_generic_loss_curve():
    from iml.losses import beta_weighted_loss
    from iml.scoring import optimal_score

    scores, labels = _np_loss_calibrated_sample(20, 20_000, 0.7)
    betas = np.linspace(0.5, 0.95, 46).astype(np.float32)
    sw = cal.beta_sweep(scores, labels, betas, n_bootstrap=0, norm="l2", debias=True)
    assert sw.ece_interval is None and sw.mean_score.shape == (46, 10)
    # The weight the scores were made with minimises both the ECE of the corrected scores and
    # the loss-calibration gap of the raw ones.
    assert abs(float(betas[np.argmin(sw.ece)]) - 0.7) <= 0.02
    assert abs(float(betas[np.argmin(sw.loss_calibration_gap)]) - 0.7) <= 0.02
    s = scores.astype(np.float64)
    for i in (0, 20):
        beta = float(betas[i])
        corrected = ((1 - beta) * s / ((1 - beta) * s + beta * (1 - s))).astype(np.float32)
        expected = cal.expected_calibration_error(corrected, labels, norm="l2", debias=True)
        np.testing.assert_allclose(sw.ece[i], expected, rtol=1e-3, atol=1e-6)
    curve = cal.loss_calibration_curve(
        scores, labels, lambda a, y: beta_weighted_loss(a, y, 0.7), n_grid=50
    )
    np.testing.assert_allclose(
        curve.optimal_score_grid, optimal_score(curve.posterior_grid, 0.7), rtol=1e-4
    )


def test_sweep_benchmark_runs_tiny_and_agrees_with_its_baseline(tmp_path, capsys):
    import json

    from experiments.benchmarks import sweep

    out = tmp_path / "sweep.json"
    argv = ["--n", "400", "--betas", "4", "--bootstrap", "5", "--repeats", "1"]
    report = sweep.main([*argv, "--baseline-betas", "2", "--out", str(out)])
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["ratio"] == report["ratio"] > 0
    assert json.loads(out.read_text())["n_betas"] == 4 and report["baseline_scaled"]
    # The timed work is the same work: point ECE and gap agree with the NumPy/sklearn loop.
    assert report["check_max_abs_diff_ece"] < 1e-5 and report["check_max_abs_diff_gap"] < 1e-5


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
    bad = scores[:2].copy()
    bad[1, 5] = np.nan
    with pytest.raises(ValueError, match="scores"):
        cal.score_metrics_by_row(bad, y)


# ----------------------------------------------------------------------------------------------
# Tables by loss: the B-weighted loss's renormalised correction reported apart
# ----------------------------------------------------------------------------------------------


def _one_vs_rest_scores(rng, n_rows, n_classes):
    """Scores of independent sigmoids: rows that do not sum to one, and labels."""
    labels = rng.integers(0, n_classes, n_rows)
    logits = rng.normal(-1.5, 1.0, (n_rows, n_classes))
    logits[np.arange(n_rows), labels] += 3.0
    return 1 / (1 + np.exp(-logits)), labels


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
    assert table["ones"]["loss_corrected"] == table["ones"]["raw"]
    assert table["ones"][cal.RENORMALISED]["brier"] != table["ones"]["raw"]["brier"]
    # Given corrected scores, the table renormalises those.
    corrected = cal.loss_corrected_scores(grid.spec, scores)
    given = cal.table_by_loss(grid, scores, y, corrected=corrected)
    for key, row in table.items():
        for method, metrics in row.items():
            assert given[key][method] == pytest.approx(metrics, rel=1e-6), (key, method)
    markdown = markdown_by_loss(table, "loss").splitlines()
    assert markdown[0].split(" | ")[1:4] == [
        "raw top_label_ece", "corr. top_label_ece", "renorm. top_label_ece"
    ]  # fmt: skip
    assert len(markdown[2].split(" | ")) == 1 + 3 * len(cal.MULTICLASS_METRICS)
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


def test_one_vs_rest_logistic_regressions_on_digits_are_corrected_output_by_output():
    # The B-weighted one-vs-rest model fitted by scikit-learn: output c is a logistic regression
    # of 1{y = c} with positives weighted B[c, c] and negatives B[y, c] (here 1), out of fold.
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    from iml import loss_corrected_score_multiclass

    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(x, y))

    def output(c, positive_weight):
        scores = np.empty(len(y))
        for train, test in folds:
            model = LogisticRegression(class_weight={0: 1.0, 1: positive_weight}, max_iter=500)
            model.fit(x[train], y[train] == c)
            scores[test] = model.predict_proba(x[test])[:, 1]
        return scores

    unweighted = np.stack([output(c, 1.0) for c in range(10)], axis=-1).astype(np.float32)
    weighted = unweighted.copy()  # B[8,8] = 10 changes output 8 alone
    weighted[:, 8] = output(8, 10.0)
    ones = np.ones((10, 10), np.float32)
    B = ones.copy()
    B[8, 8] = 10.0
    np.testing.assert_array_equal(loss_corrected_score_multiclass(unweighted, ones), unweighted)
    corrected = np.asarray(loss_corrected_score_multiclass(weighted, B))

    def ece_of_8(scores):
        return float(cal.expected_calibration_error(scores[:, 8], (y == 8).astype(np.int32)))

    # About 0.079 raw and 0.009 corrected, against 0.019 for the unweighted output.
    raw, fixed, reference = ece_of_8(weighted), ece_of_8(corrected), ece_of_8(unweighted)
    assert fixed < raw / 2 and fixed < 2 * reference
    assert weighted[:, 8].mean() > (y == 8).mean() + 0.05  # the weight inflates class 8
    np.testing.assert_array_equal(np.delete(corrected, 8, 1), np.delete(weighted, 8, 1))


def test_loss_calibration_power_against_the_neighbouring_beta_at_digits_size():
    """At digits' size (1,797 scores, prior about 0.1), scores calibrated under beta = 10/11:
    the test under 10/11 keeps its size, and its power against beta = 1/2 is reported."""
    from iml.calibration import loss_calibration_power
    from iml.revealed import simulate_gaussian_agents

    scores, _ = simulate_gaussian_agents(jax.random.key(0), [10 / 11], 3.1, 0.097, 1797)
    a = scores[0]
    size = loss_calibration_power(a, 10 / 11, 10 / 11, key=jax.random.key(2), n_simulations=400)
    assert float(size.rate) <= 0.05 + 2 * 0.011  # the parametric bootstrap is exact under H0
    assert float(size.standard_error) == pytest.approx(
        np.sqrt(size.rate * (1 - size.rate) / 400), rel=1e-5
    )
    power = loss_calibration_power(a, 10 / 11, 0.5, key=jax.random.key(3), n_simulations=100)
    assert float(power.rate) >= 0.9  # a precise model at this size: 1/2 is told from 10/11
    # Against a closer neighbour (beta = 0.88) the power is lower.
    near = loss_calibration_power(a, 10 / 11, 0.88, key=jax.random.key(3), n_simulations=100)
    assert float(near.rate) < float(power.rate)
    other = loss_calibration_power(a, 10 / 11, 10 / 11, key=jax.random.key(5), n_simulations=400)
    assert not np.array_equal(other.rejected, size.rejected)  # the key draws the labels


def test_loss_calibration_power_names_bad_input():
    from iml.calibration import loss_calibration_power

    with pytest.raises(ValueError, match="n_simulations"):
        loss_calibration_power(np.full(10, 0.5), 0.5, 0.5, key=jax.random.key(0), n_simulations=0)
    with pytest.raises(ValueError, match="key"):
        loss_calibration_power(np.full(10, 0.5), 0.5, 0.5)


def _numpy_ece(scores, labels, n_bins=10):
    """ECE with quantile bins, as np.quantile and np.searchsorted place them."""
    edges = np.quantile(scores, np.linspace(0, 1, n_bins + 1))
    bins = np.clip(np.searchsorted(edges, scores, side="left") - 1, 0, n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        m = bins == b
        if m.any():
            total += m.sum() * abs(scores[m].mean() - labels[m].mean())
    return total / len(scores)


def test_compare_ece_pairs_the_rows_and_matches_an_independent_bootstrap():
    from iml.calibration import compare_ece

    rng = np.random.default_rng(0)
    p = rng.uniform(0.02, 0.98, 3000)
    y = (rng.uniform(size=3000) < p).astype(np.int32)
    good, bad = p, np.clip(p + 0.08, 0, 1)  # the second is miscalibrated by 0.08
    key = jax.random.key(4)
    c = compare_ece(good, bad, y, n_bootstrap=300, key=key)
    assert float(c.ece[0]) == pytest.approx(_numpy_ece(good, y), abs=1e-5)
    assert float(c.ece[1]) == pytest.approx(_numpy_ece(bad, y), abs=1e-5)
    rows = np.asarray(jax.random.randint(key, (300, 3000), 0, 3000))
    diff = [_numpy_ece(good[r], y[r]) - _numpy_ece(bad[r], y[r]) for r in rows]
    np.testing.assert_allclose(c.difference_interval, np.quantile(diff, [0.025, 0.975]), atol=2e-4)
    assert float(c.difference_interval[1]) < 0  # the better model is told apart
    assert float(c.ratio_interval[1]) < 1
    same = compare_ece(good, good, y, n_bootstrap=50, key=key)
    np.testing.assert_array_equal(same.difference_interval, [0.0, 0.0])
    np.testing.assert_array_equal(same.ratio_interval, [1.0, 1.0])
    with pytest.raises(ValueError, match=r"labels has shape \(3000,\) but second has shape"):
        compare_ece(good, good[:100], y, n_bootstrap=10, key=key)
    with pytest.raises(ValueError, match="same observations"):
        compare_ece(good, good[:100], y, y[:100], n_bootstrap=10, key=key)


def test_ece_intervals_are_weighted_ece_quantiles_on_the_shared_resamples():
    from iml.calibration import _bootstrap_counts, ece_intervals

    rng = np.random.default_rng(1)
    p = rng.uniform(0.02, 0.98, 2000)
    y = (rng.uniform(size=2000) < p).astype(np.int32)
    rows = np.stack([p, np.clip(p + 0.12, 0, 1)]).astype(np.float32)
    key = jax.random.key(9)
    got = np.asarray(ece_intervals(rows, y, n_bootstrap=300, key=key))
    counts = np.asarray(_bootstrap_counts(key, 2000, 300), np.float64)
    for r, interval in zip(rows, got, strict=True):
        edges = np.quantile(r, np.linspace(0, 1, 11))
        bins = np.clip(np.searchsorted(edges, r, side="left") - 1, 0, 9)
        gap = np.zeros((2000, 10))
        gap[np.arange(2000), bins] = r - y
        ece = np.abs(counts @ gap).sum(1) / counts.sum(1)
        np.testing.assert_allclose(interval, np.quantile(ece, [0.025, 0.975]), atol=2e-4)
    assert got[1, 0] > got[0, 1]  # the shifted scores' interval lies above
    one = np.asarray(ece_intervals(rows[0], y, n_bootstrap=300, key=key))
    np.testing.assert_array_equal(one, got[0])


def test_multiclass_ece_intervals_are_top_label_and_mean_classwise_on_shared_resamples():
    from iml.calibration import _bootstrap_counts, multiclass_ece_intervals

    rng = np.random.default_rng(2)
    n, k = 1500, 3
    p = rng.dirichlet(np.ones(k), n)
    y = np.array([rng.choice(k, p=row) for row in p])
    scores = np.stack([p, 0.7 * p + 0.1]).astype(np.float32)  # the second over-smoothed
    key = jax.random.key(4)
    got = multiclass_ece_intervals(scores, y, n_bootstrap=300, key=key)
    counts = np.asarray(_bootstrap_counts(key, n, 300), np.float64)

    def replicates(s, hit):  # a binary ECE per replicate, bins fixed at the full sample's deciles
        edges = np.quantile(s, np.linspace(0, 1, 11))
        bins = np.clip(np.searchsorted(edges, s, side="left") - 1, 0, 9)
        gap = np.zeros((n, 10))
        gap[np.arange(n), bins] = s - hit
        return np.abs(counts @ gap).sum(1) / counts.sum(1)

    for m, s in enumerate(scores.astype(np.float64)):
        top = replicates(s.max(1), (s.argmax(1) == y).astype(float))
        classwise = np.mean([replicates(s[:, j], (y == j).astype(float)) for j in range(k)], 0)
        for name, reps in (("top_label_ece", top), ("classwise_ece", classwise)):
            want = np.quantile(reps, [0.025, 0.975])
            np.testing.assert_allclose(np.asarray(got[name])[m], want, atol=3e-4)
    # the over-smoothed scores' class-wise interval lies above the calibrated ones'
    assert got["classwise_ece"][1, 0] > got["classwise_ece"][0, 1]
    with pytest.raises(ValueError, match="class scores"):
        multiclass_ece_intervals(scores[0], y, key=key)
