"""The compiled pieces of a table's training (``iml.training.tabular_program``): padded index
blocks, and every member's test logits at once equal to each member's own."""

from __future__ import annotations

import jax
import numpy as np

from iml.models import LogisticRegression
from iml.training.tabular_program import blocked, member_test_logits


def test_index_lists_are_padded_to_blocks_with_zero_weight():
    idx, weight = blocked([np.arange(5), np.arange(10, 13)], block=4)
    assert idx.shape == weight.shape == (2, 2, 4)
    np.testing.assert_array_equal(idx.reshape(2, -1)[0, :5], np.arange(5))
    assert weight.sum(axis=(1, 2)).tolist() == [5.0, 3.0]
    assert (idx.reshape(2, -1)[weight.reshape(2, -1) == 0] == 0).all()
    # a block no longer than the longest list, rounded up to a power of two
    assert blocked([np.arange(3)], block=1024)[0].shape == (1, 1, 4)


def test_every_members_test_logits_equal_its_own():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 3)).astype(np.float32)
    model = LogisticRegression()
    one = model.init(jax.random.key(0), x[:2], train=False)
    variables = jax.tree.map(  # [S=1, nb=2, R=2] members, each its own weights
        lambda a: np.stack([np.stack([a * (1 + k + 2 * r) for r in range(2)]) for k in range(2)])[
            None
        ],
        one,
    )
    tests = [np.arange(0, 7), np.arange(7, 12)]
    idx, _ = blocked(tests, block=4)
    center, scale = np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)
    out = np.asarray(member_test_logits(model, variables, x, idx, center, scale))
    assert out.shape[:3] == (1, 2, 2)
    for k in range(2):
        for r, rows in enumerate(tests):
            own = jax.tree.map(lambda a, k=k, r=r: a[0, k, r], variables)
            want = np.asarray(model.apply(own, x[rows], train=False))
            np.testing.assert_allclose(out[0, k, r, : len(rows)], want, rtol=1e-5, atol=1e-6)
