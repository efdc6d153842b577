"""The store of a run (``iml.pipeline.store``): the ensemble read back from stored member batches
and the one aggregation of members."""

import numpy as np
import pytest

from iml.pipeline import RunStore, aggregate_members, load_ensemble


def _save_batch(store, key, members):
    tests = [np.asarray(m[1]) for m in members]
    store.save_arrays(
        key,
        beta=np.array([m[0] for m in members]),
        test_idx=np.concatenate(tests),
        test_scores=np.concatenate([np.asarray(m[2], np.float32) for m in members]),
        test_offsets=np.cumsum([0] + [len(t) for t in tests]),
    )


def test_ensemble_mean_and_size_by_hand(tmp_path):
    store = RunStore(tmp_path)
    _save_batch(store, "batches/batch-0000", [(0.5, [0, 1], [0.2, 0.4]), (0.9, [0, 2], [0.5, 0.7])])
    _save_batch(store, "batches/batch-0001", [(0.5, [1, 2], [0.6, 0.8]), (0.5, [1], [0.5])])
    ens = load_ensemble(store, (0.5, 0.9), 4)
    scores, sizes = ens.for_beta(0.5)
    np.testing.assert_array_equal(sizes, [1, 3, 1, 0])
    np.testing.assert_allclose(scores[:3], [0.2, (0.4 + 0.6 + 0.5) / 3, 0.8], rtol=1e-6)
    assert np.isnan(scores[3])
    scores, sizes = ens.for_beta(0.9)
    np.testing.assert_array_equal(sizes, [1, 0, 1, 0])
    np.testing.assert_allclose(scores[[0, 2]], [0.5, 0.7], rtol=1e-6)


def test_aggregate_refuses_foreign_beta_and_bad_scores():
    with pytest.raises(ValueError, match=r"beta 0\.7"):
        aggregate_members([(0.7, np.array([0]), np.array([0.5]))], (0.5,), 2)
    with pytest.raises(ValueError, match="probabilities"):
        aggregate_members([(0.5, np.array([0]), np.array([1.5]))], (0.5,), 2)
    with pytest.raises(ValueError, match="test_idx"):
        aggregate_members([(0.5, np.array([5]), np.array([0.5]))], (0.5,), 2)


def test_logit_average_is_the_score_of_the_members_mean_logit(tmp_path):
    from scipy.special import expit, logit, softmax

    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.01, 0.99, 5), rng.uniform(0.01, 0.99, 3)
    members = [(0.9, np.arange(5), a), (0.9, np.array([0, 1, 4]), b)]
    ens = aggregate_members(members, (0.9,), 6, average="logit")
    np.testing.assert_array_equal(ens.sizes, [[2, 2, 1, 1, 2, 0]])
    pooled = expit(np.mean([logit(a[[0, 1, 4]]), logit(b)], axis=0))
    np.testing.assert_allclose(ens.scores[0, [0, 1, 4]], pooled, rtol=1e-12)
    np.testing.assert_allclose(ens.scores[0, [2, 3]], a[[2, 3]], rtol=1e-12)  # one member: itself
    assert np.isnan(ens.scores[0, 5])
    # near 1, the mean score falls toward the less confident member; the mean logit does not
    near = [(0.9, [0], np.array([0.999999])), (0.9, [0], np.array([0.99]))]
    by_score = aggregate_members(near, (0.9,), 1).scores[0, 0]
    by_logit = aggregate_members(near, (0.9,), 1, average="logit").scores[0, 0]
    assert by_score == pytest.approx(0.9949995) and by_logit == pytest.approx(0.9999, rel=1e-4)
    # a stored 0 or 1 counts as the nearest float32 inside (0, 1), whose logits are finite
    low, high = (float(np.nextafter(np.float32(e), np.float32(0.5))) for e in (0, 1))
    ends = [(0.9, [0, 1], np.array([1.0, 0.0])), (0.9, [0, 1], np.array([0.0, 0.0]))]
    pooled = aggregate_members(ends, (0.9,), 2, average="logit").scores[0]
    np.testing.assert_allclose(pooled, [expit((logit(high) + logit(low)) / 2), low], rtol=1e-9)
    # multiclass: the softmax of the mean log-probabilities, the renormalised geometric mean
    p, q = rng.dirichlet(np.ones(4), 3), rng.dirichlet(np.ones(4), 3)
    ens = aggregate_members([(0.0, np.arange(3), p), (0.0, np.arange(3), q)], (0.0,), 3, "logit")
    np.testing.assert_allclose(ens.scores[0], softmax((np.log(p) + np.log(q)) / 2, axis=-1))
    geometric = np.sqrt(p * q)
    np.testing.assert_allclose(ens.scores[0], geometric / geometric.sum(-1, keepdims=True))
    # the stored run's reader pools the same way
    store = RunStore(tmp_path)
    _save_batch(
        store, "batches/batch-0000", [(0.9, [0, 1], [0.2, 0.999]), (0.9, [0, 1], [0.6, 0.9])]
    )
    stored = load_ensemble(store, (0.9,), 2, average="logit").scores[0]
    np.testing.assert_allclose(
        stored, expit(logit(np.array([[0.2, 0.999], [0.6, 0.9]], np.float32)).mean(0)), rtol=1e-6
    )
    with pytest.raises(
        ValueError, match=r"average must be one of \('score', 'logit'\), got 'median'"
    ):
        aggregate_members(members, (0.9,), 6, average="median")


def test_aggregate_means_class_scores_per_loss():
    a, b = np.array([[0.2, 0.8], [0.6, 0.4]]), np.array([[0.4, 0.6]])
    ens = aggregate_members([(0.0, np.array([0, 1]), a), (0.0, np.array([0]), b)], (0.0, 1.0), 3)
    assert ens.scores.shape == (2, 3, 2)
    np.testing.assert_allclose(ens.scores[0, 0], [0.3, 0.7])
    np.testing.assert_allclose(ens.scores[0, 1], [0.6, 0.4])
    assert np.isnan(ens.scores[0, 2]).all() and np.isnan(ens.scores[1]).all()
    np.testing.assert_array_equal(ens.sizes, [[2, 1, 0], [0, 0, 0]])
    with pytest.raises(ValueError, match="differ in shape"):
        aggregate_members([(0.0, [0], a[:1]), (0.0, [1], np.ones((1, 3)) / 3)], (0.0,), 2)
