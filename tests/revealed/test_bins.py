"""Tests of iml.revealed.bins: the signals of each model's scores, adaptive bins merged to hold
enough positives and negatives."""

import jax
import numpy as np

from iml import loss_spec
from iml import revealed as R
from iml.revealed.bins import signals_from_scores
from iml.revealed.losses import as_losses


def test_adaptive_bins_merge_the_same_deciles_for_every_model_and_meet_the_count():
    """Digits' regime (prior 0.097, N = 1,797, d = 2.79: the lowest deciles hold about no
    positives). Every model's merged bins are the same quantile ranges, so each bin has the same
    probability for every model, and each holds at least MIN_COUNT expected positives and
    negatives under every model's loss-corrected scores."""
    betas = [0.5, 0.9, 0.99]
    scores, labels = R.simulate_gaussian_agents(jax.random.key(7), betas, 2.79, 0.097, 1797)
    ex = R.revealed_experiments(scores, labels, 10, "adaptive", losses=betas)
    p = np.asarray(ex.probability)
    np.testing.assert_allclose(p, np.broadcast_to(p[0], p.shape), atol=1.5 / 1797)
    used = p[0] > 0
    assert 2 <= used.sum() < 10  # some deciles merged, not all
    signals = np.asarray(signals_from_scores(scores, 10, "adaptive", as_losses(betas, 3)))
    g = np.stack(
        [
            np.asarray(loss_spec(b).loss_corrected_score(s))
            for b, s in zip(betas, scores, strict=True)
        ]
    )
    for k in range(3):
        for s in np.flatnonzero(used):
            m = signals[k] == s
            assert g[k, m].sum() >= R.MIN_COUNT and (1 - g[k, m]).sum() >= R.MIN_COUNT
