"""Tests of iml.calibration.across_betas: the calibration of the loss-corrected scores for many
class weights at once, beside the loss-calibration gap."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _calibration_samples import binary_sample, np_loss_calibrated_sample, scores_of_kind

from iml import calibration as cal
from iml._bootstrap import bootstrap_counts
from iml.scoring import loss_corrected_score


def _gap_by_hand(s: np.ndarray, y: np.ndarray, beta: float, edges: np.ndarray) -> float:
    """Definition 2's wholesale switch in float64: per bin, the beta-weighted log loss of its
    scores minus that of ``a' = c^beta(rate)`` for all of it, summed over bins, per row."""

    def lb(a, yy):
        with np.errstate(divide="ignore"):
            return np.where(yy == 1, -beta * np.log(a), -(1 - beta) * np.log1p(-a))

    bins = np.searchsorted(edges[1:-1], s)
    total = 0.0
    for b in np.unique(bins):
        m = bins == b
        rate = y[m].mean()
        best = beta * rate / (beta * rate + (1 - beta) * (1 - rate))  # c^beta, Prop. 2
        total += lb(s[m], y[m]).sum() - lb(np.full(m.sum(), best), y[m]).sum()
    return total / len(s)


@pytest.mark.slow
def test_matches_per_beta_computations_and_exact_bootstrap():
    scores, labels = np_loss_calibrated_sample(15, 2000, 0.9)
    betas = np.array([0.3, 0.6, 0.8, 0.9, 0.95], np.float32)
    key = jax.random.key(16)
    result = cal.calibration_across_betas(
        scores, labels, betas, n_bootstrap=40, key=key, beta_chunk=2, tile=64
    )
    result = jax.tree.map(np.asarray, result)
    s = scores.astype(np.float64)
    for i, beta in enumerate(betas.astype(np.float64)):
        corrected = ((1 - beta) * s / ((1 - beta) * s + beta * (1 - s))).astype(np.float32)
        curve = cal.calibration_curve(corrected, labels)
        np.testing.assert_allclose(result.mean_score[i], curve.mean_score, rtol=1e-5)
        np.testing.assert_allclose(result.event_rate, curve.event_rate, rtol=1e-6)
        np.testing.assert_allclose(
            result.ece[i], cal.expected_calibration_error(corrected, labels), rtol=1e-4
        )
        gap = _gap_by_hand(s, labels, float(beta), result.edges.astype(np.float64))
        np.testing.assert_allclose(result.loss_calibration_gap[i], gap, rtol=1e-4, atol=2e-6)
    # The bootstrap intervals, recomputed in float64 NumPy from the same resampling multiplicities
    # (it resamples the scores in sorted order with fixed bins).
    mult = np.asarray(bootstrap_counts(key, 2000, 40), np.float64)
    order = np.argsort(scores, kind="stable")
    s, y = s[order], labels[order].astype(np.float64)
    bins = np.searchsorted(result.edges.astype(np.float64)[1:-1], s)
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
            result.ece_interval[:, i], np.percentile(eces, [2.5, 97.5]), rtol=1e-4, atol=1e-6
        )
        np.testing.assert_allclose(
            result.mean_score_interval[:, i], np.percentile(means, [2.5, 97.5], axis=0), rtol=1e-4
        )


@pytest.mark.slow
def test_finds_the_training_weight_with_debiased_l2_and_generic_loss_curve():
    from iml.losses import beta_weighted_loss
    from iml.scoring import optimal_score

    scores, labels = np_loss_calibrated_sample(20, 20_000, 0.7)
    betas = np.linspace(0.5, 0.95, 46).astype(np.float32)
    result = cal.calibration_across_betas(
        scores, labels, betas, n_bootstrap=0, norm="l2", debias=True
    )
    assert result.ece_interval is None
    chex.assert_shape(result.mean_score, (46, 10))
    # The weight the scores were made with minimises both the ECE of the corrected scores and
    # the loss-calibration gap of the raw ones.
    assert abs(float(betas[np.argmin(result.ece)]) - 0.7) <= 0.02
    assert abs(float(betas[np.argmin(result.loss_calibration_gap)]) - 0.7) <= 0.02
    s = scores.astype(np.float64)
    for i in (0, 20):
        beta = float(betas[i])
        corrected = ((1 - beta) * s / ((1 - beta) * s + beta * (1 - s))).astype(np.float32)
        expected = cal.expected_calibration_error(corrected, labels, norm="l2", debias=True)
        np.testing.assert_allclose(result.ece[i], expected, rtol=1e-3, atol=1e-6)
    curve = cal.loss_calibration_curve(
        scores, labels, lambda a, y: beta_weighted_loss(a, y, 0.7), n_grid=50
    )
    np.testing.assert_allclose(
        curve.optimal_score_grid, optimal_score(curve.posterior_grid, 0.7), rtol=1e-4
    )


@pytest.mark.slow
def test_reports_the_smooth_ece_of_every_corrected_score():
    scores, labels = scores_of_kind("beta_weighted", n=1500, seed=10)
    betas = np.array([0.3, 0.6, 0.8, 0.9], np.float32)
    across = cal.calibration_across_betas(
        scores, labels, betas, n_bootstrap=5, key=jax.random.key(0), beta_chunk=3
    )
    chex.assert_shape([across.smooth_ece, across.ece_interval], [(4,), (2, 4)])
    for i, beta in enumerate(betas):
        corrected = loss_corrected_score(jnp.asarray(scores), beta)
        expected = cal.smooth_ece(corrected, labels).ece
        np.testing.assert_allclose(across.smooth_ece[i], expected, rtol=1e-5, atol=1e-7)
    assert int(np.argmin(across.smooth_ece)) == 2


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s, y: cal.calibration_across_betas(s, y, [0.5, 1.0], n_bootstrap=0), "betas"),
        (lambda s, y: cal.calibration_across_betas(s, y, [0.5], n_bootstrap=5), "key"),
        (
            lambda s, y: cal.calibration_across_betas(
                s, y, [0.5], n_bootstrap=0, norm="l1", debias=True
            ),
            "debias",
        ),
    ],
)
def test_rejects_bad_input(call, match):
    scores, labels = binary_sample(100)
    with pytest.raises(ValueError, match=match):
        call(scores, labels)
