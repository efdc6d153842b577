"""Tests of iml.revealed.bins: the signals of each model's scores, adaptive bins merged to hold
enough positives and negatives."""

import jax
import numpy as np

from iml import loss_spec
from iml import revealed as R
from iml.revealed.bins import cell_signals, signals_from_scores
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


# ----------------------------------------------------------------------------------------------
# Cells of the simplex: the signals of models of n classes
# ----------------------------------------------------------------------------------------------


def _class_agents(weights, n=3000, precision=1.5, prior=(0.5, 0.3, 0.2), seed=0):
    losses = loss_spec("class_weighted_softmax", class_weights=np.asarray(weights))
    scores, labels = R.simulate_gaussian_agents(
        jax.random.key(seed), losses, precision, np.asarray(prior), n
    )
    specs = as_losses(losses, len(weights), 3)
    return (
        losses,
        scores,
        labels,
        np.asarray(jax.vmap(type(specs).loss_corrected_score)(specs, scores)),
    )


def test_cells_are_each_models_top_class_and_its_confidence_quantiles():
    weights = [[1, 1, 1], [1, 1, 6.0]]
    _, _, _, g = _class_agents(weights)
    cells = np.asarray(cell_signals(g, 4, "quantile", R.MIN_COUNT))
    top = g.argmax(-1)
    np.testing.assert_array_equal(cells // 4, top)
    for k in range(2):
        for t in range(3):
            q = cells[k][top[k] == t] % 4
            counts = np.bincount(q, minlength=4)
            assert counts.max() - counts.min() <= 1  # equal-count quantiles
            confidence = g[k][top[k] == t, t]
            # higher quantiles hold higher confidence
            assert np.all(np.diff([confidence[q == i].mean() for i in range(4)]) > 0)


def test_adaptive_cells_merge_alike_for_every_model_and_meet_the_count():
    weights = [[1, 1, 1], [1, 1, 3.0], [1, 1, 10.0]]
    _, _, _, g = _class_agents(weights, n=2000)
    quantile = np.asarray(cell_signals(g, 10, "quantile", R.MIN_COUNT))
    cells = np.asarray(cell_signals(g, 10, "adaptive", R.MIN_COUNT))
    # one merge of the quantiles per class, the same for every model
    mapping = [dict(zip(quantile[k], cells[k], strict=True)) for k in range(3)]
    assert mapping[0] == mapping[1] == mapping[2]
    assert 3 <= len(set(cells[0])) < 30
    q = g / g.sum(-1, keepdims=True)
    for k in range(3):
        for s in np.unique(cells[k]):
            own = q[k][cells[k] == s, s // 10]
            assert own.sum() >= R.MIN_COUNT and (1 - own).sum() >= R.MIN_COUNT


def test_per_signal_sums_each_models_values_by_its_own_signals_and_drops_the_out_of_range():
    """One segment sum over all models gives each model's own sums: equal to NumPy's per-model
    sums, for values with trailing axes too and signals of a small integer type; a signal
    outside [0, S) adds to no model (were it not dropped, -1 would land in the previous model's
    last signal, and S in the next model's first)."""
    from iml.revealed.bins import per_signal

    rng = np.random.default_rng(0)
    K, N, S = 3, 50, 50
    signals = rng.integers(0, S, (K, N)).astype(np.int32)
    signals[1, :3] = -1
    signals[1, 3:5] = S
    values = rng.random((K, N, 2)).astype(np.float32)
    want = np.zeros((K, S, 2))
    for k in range(K):
        for s in range(S):
            want[k, s] = values[k, signals[k] == s].sum(axis=0)
    np.testing.assert_allclose(per_signal(values, signals, S), want, rtol=1e-6)
    np.testing.assert_allclose(per_signal(values[..., 0], signals, S), want[..., 0], rtol=1e-6)
    # int8 signals: K S = 150 segments, beyond int8's range
    np.testing.assert_allclose(per_signal(values, signals.astype(np.int8), S), want, rtol=1e-6)
