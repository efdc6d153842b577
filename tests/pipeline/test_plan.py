"""The plan of a run (``iml.pipeline.plan``): batches of members, or of every member of a chunk of
losses (a sweep's unit of work and of resumption)."""

from __future__ import annotations

import numpy as np
import pytest

from iml.pipeline.plan import make_plan


def test_batches_by_chunk_of_losses_hold_every_member_of_their_losses():
    labels = np.arange(200) % 3 == 0
    plan = make_plan(200, losses=("a", "b", "c"), seeds=2, labels=labels, n_folds=5,
                     losses_per_batch=2)  # fmt: skip
    assert [b.key for b in plan.batches] == ["batches/batch-0000", "batches/batch-0001"]
    first, second = ([(m.loss, m.seed, m.rotation) for m in b.members] for b in plan.batches)
    rotations = [s.rotation for s in plan.splits]
    assert first == [(j, s, r) for r in rotations for j in (0, 1) for s in (0, 1)]  # grid order
    assert second == [(2, s, r) for r in rotations for s in (0, 1)]
    assert sorted(m.index for m in plan.members) == list(range(3 * 2 * len(rotations)))
    # the same folds and members as batches of members
    by_members = make_plan(200, losses=("a", "b", "c"), seeds=2, labels=labels, n_folds=5)
    np.testing.assert_array_equal(by_members.fold_ids, plan.fold_ids)
    assert {m.index for m in by_members.members} == {m.index for m in plan.members}
    with pytest.raises(ValueError, match="members_per_batch or losses_per_batch, not both"):
        make_plan(200, losses=("a", "b"), members_per_batch=2, losses_per_batch=1)
    with pytest.raises(ValueError, match="losses_per_batch must be an integer >= 1"):
        make_plan(200, losses=("a", "b"), losses_per_batch=-1)
