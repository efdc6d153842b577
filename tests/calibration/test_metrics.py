"""Tests of iml.calibration.metrics: the expected calibration error (binned, debiased, top-label
and class-wise), the Brier score, the log loss and the AUROC."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _calibration_samples import binary_sample, ece_by_hand
from absl.testing import parameterized

from iml import calibration as cal

RNG = np.random.default_rng(0)


def _multiclass_sample(n: int, k: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 1.5
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = np.array([rng.choice(k, p=p) for p in probs])
    sharpened = probs**1.5 / (probs**1.5).sum(1, keepdims=True)  # overconfident model
    return sharpened.astype(np.float32), labels


class Metrics(chex.TestCase):
    """The metrics against scikit-learn and hand computations, jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_binary_metrics_match_sklearn_with_weights(self):
        from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

        auroc = self.variant(cal.auroc)
        brier_score = self.variant(cal.brier_score)
        mean_log_loss = self.variant(cal.mean_log_loss)
        scores, labels = binary_sample(3000, seed=4)
        scores = np.round(scores, 2)  # many ties for the Mann-Whitney statistic
        scores = np.clip(scores, 0.005, 0.995).astype(np.float32)
        w = RNG.uniform(0.2, 3.0, 3000)
        s64 = scores.astype(np.float64)
        for weight in (None, w):
            np.testing.assert_allclose(
                auroc(scores, labels, weight),
                roc_auc_score(labels, s64, sample_weight=weight),
                rtol=1e-5,
            )
            np.testing.assert_allclose(
                brier_score(scores, labels, weight),
                brier_score_loss(labels, s64, sample_weight=weight),
                rtol=1e-5,
            )
            np.testing.assert_allclose(
                mean_log_loss(scores, labels, weight),
                log_loss(labels, s64, sample_weight=weight),
                rtol=1e-5,
            )

    @chex.variants(with_jit=True, without_jit=True)
    def test_multiclass_metrics_match_sklearn(self):
        from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

        scores, labels = _multiclass_sample(1500, seed=5)
        w = RNG.uniform(0.5, 2.0, 1500)
        p64 = scores.astype(np.float64)
        p64 /= p64.sum(1, keepdims=True)
        np.testing.assert_allclose(
            self.variant(cal.auroc)(scores, labels),
            roc_auc_score(labels, p64, multi_class="ovr"),
            rtol=1e-4,
        )
        np.testing.assert_allclose(
            self.variant(cal.brier_score)(scores, labels, w),
            brier_score_loss(labels, p64, sample_weight=w, labels=[0, 1, 2, 3]),
            rtol=1e-4,
        )
        np.testing.assert_allclose(
            self.variant(cal.mean_log_loss)(scores, labels, w),
            log_loss(labels, p64, sample_weight=w),
            rtol=1e-4,
        )

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.parameters(("l1", "quantile"), ("l2", "uniform"), ("max", "quantile"))
    def test_ece_matches_hand_computation(self, norm, strategy):
        ece = self.variant(
            lambda s, y: cal.expected_calibration_error(s, y, strategy=strategy, norm=norm)
        )
        scores, labels = binary_sample(1200, seed=6, prevalence_shift=0.05)
        s64 = scores.astype(np.float64)
        edges = (
            np.percentile(s64, np.linspace(0, 100, 11))
            if strategy == "quantile"
            else np.linspace(0, 1, 11)
        )
        got = ece(scores, labels)
        np.testing.assert_allclose(got, ece_by_hand(s64, labels, edges, norm), rtol=1e-4)

    @chex.variants(with_jit=True, without_jit=True)
    def test_ece_tiny_example_by_hand(self):
        def ece(norm):
            return self.variant(
                lambda s, y: cal.expected_calibration_error(
                    s, y, n_bins=2, strategy="uniform", norm=norm
                )
            )

        scores = np.array([0.1, 0.2, 0.6, 0.8], np.float32)
        labels = np.array([0, 1, 1, 1])
        # Two uniform bins: [0, .5] holds .1, .2 (mean .15, rate .5); (.5, 1] holds .6, .8
        # (.7, 1).
        np.testing.assert_allclose(ece("l1")(scores, labels), 0.5 * 0.35 + 0.5 * 0.3, rtol=1e-6)
        np.testing.assert_allclose(ece("max")(scores, labels), 0.35, rtol=1e-6)


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
    np.testing.assert_allclose(top, ece_by_hand(conf, correct, edges, "l1"), rtol=1e-4)
    classwise = cal.expected_calibration_error(scores, labels, multiclass="classwise")
    by_hand = np.mean(
        [
            ece_by_hand(
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
    s, y = binary_sample(50)
    with pytest.raises(ValueError, match="debias"):
        cal.expected_calibration_error(s, y, norm="l1", debias=True)
    with pytest.raises(ValueError, match="norm"):
        cal.expected_calibration_error(s, y, norm="l3")
    with pytest.raises(ValueError, match="multiclass"):
        cal.expected_calibration_error(s, y, multiclass="pairwise")


def test_under_jit_nan_scores_give_nan_results_instead_of_errors():
    scores, labels = binary_sample(200, seed=18)
    scores[7] = np.nan
    curve = jax.jit(lambda s, y: cal.calibration_curve(s, y, strategy="uniform"))(scores, labels)
    # The NaN stays in the bin it was assigned to; the other bins are unaffected.
    filled = np.asarray(curve.count) > 0
    assert int(np.sum(np.isnan(np.asarray(curve.mean_score))[filled])) == 1
    assert np.isnan(float(jax.jit(cal.expected_calibration_error)(scores, labels)))
    assert np.isnan(float(jax.jit(cal.auroc)(scores, labels)))
    assert np.isnan(float(jax.jit(cal.brier_score)(scores, labels)))


def test_under_jit_bad_labels_and_negative_weights_give_nan():
    scores, labels = binary_sample(200, seed=21)
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
