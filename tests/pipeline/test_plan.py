"""The plan of a run (``iml.pipeline.plan``): batches of members, or of every member of a chunk of
losses (a sweep's unit of work and of resumption)."""

from __future__ import annotations

import numpy as np
import pytest

from iml.pipeline.plan import check_betas, ensemble_sizes, make_plan


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


def test_full_cycle_tests_every_observation_once_per_seed():
    labels = (np.arange(200) % 7 == 0).astype(int)
    plan = make_plan(200, betas=(0.5, 0.9, 0.99), seeds=(0, 3), labels=labels)
    assert len(plan.members) == 10 * 3 * 2
    assert [len(b.members) for b in plan.batches] == [6] * 10
    sizes = ensemble_sizes(plan, 200)
    for beta in (0.5, 0.9, 0.99):
        np.testing.assert_array_equal(sizes[beta], 2)  # one rotation tests it, once per seed
    for m in plan.members:
        s = m.split
        assert len(s.train_folds) == 7 and len(s.val_folds) == 2 and len(s.test_folds) == 1
        parts = np.concatenate([s.train, s.val, s.test])
        assert len(np.unique(parts)) == 200  # disjoint and complete


def test_batches_share_a_rotation_and_keys_are_distinct():
    plan = make_plan(60, betas=(0.5, 0.9), seeds=(0,), n_folds=5, n_val_folds=1)
    for batch in plan.batches:
        assert len({m.rotation for m in batch.members}) == 1
        assert sorted(m.beta for m in batch.members) == [0.5, 0.9]
    assert len({b.key for b in plan.batches}) == len(plan.batches) == 5


def test_partial_rotations_leave_untested_observations_with_size_zero():
    plan = make_plan(50, betas=(0.9,), n_folds=5, n_val_folds=1, rotations=(0, 2))
    sizes = ensemble_sizes(plan, 50)[0.9]
    tested = np.isin(plan.fold_ids, [0, 2])  # rotation r tests fold r (one test fold)
    np.testing.assert_array_equal(sizes, tested.astype(int))


def test_groups_never_straddle_training_and_test():
    groups = np.repeat(np.arange(40), 3)
    plan = make_plan(120, betas=(0.5,), groups=groups, n_folds=5, n_val_folds=1)
    for m in plan.members:
        train_groups = set(groups[m.split.train])
        assert not train_groups & set(groups[m.split.test])
        assert not train_groups & set(groups[m.split.val])


@pytest.mark.parametrize("betas", [(0.5, 1.0), (0.0,), (), (0.5, 0.5), (float("nan"),)])
def test_bad_betas_are_refused(betas):
    with pytest.raises(ValueError, match="beta"):
        check_betas(betas)


def test_plan_of_a_multiclass_grid_keys_members_by_loss():
    plan = make_plan(100, losses=("ones", "w[8]=10"), seeds=(0, 1), n_folds=5, n_val_folds=1)
    assert plan.keys == ("ones", "w[8]=10") and plan.betas == ()
    assert {m.beta for m in plan.members} == {None}
    assert [m.loss for m in plan.batches[0].members] == [0, 0, 1, 1]
    sizes = ensemble_sizes(plan, 100)
    np.testing.assert_array_equal(sizes["w[8]=10"], 2)  # one rotation tests it, once per seed
    with pytest.raises(ValueError, match="not both"):
        make_plan(100, betas=(0.5,), losses=("ones",))
    with pytest.raises(ValueError, match="distinct"):
        make_plan(100, losses=("ones", "ones"))


def test_a_batch_makes_its_members_trainer_specs_and_describes_them():
    labels = np.arange(100) % 4 == 0
    binary = make_plan(100, betas=(0.5, 0.9), seeds=1, labels=labels, n_folds=5)
    batch = binary.batches[0]
    specs = batch.member_specs([None] * len(batch.members))
    rotation = batch.members[0].rotation
    assert [(s.beta, s.seed, s.fold) for s in specs] == [(0.5, 0, rotation), (0.9, 0, rotation)]
    assert specs[0].test_idx is batch.members[0].split.test and specs[0].loss is None
    assert batch.described() == {"member_index": [0, 1], "beta": [0.5, 0.9],
                                 "rotation": [0, 0], "seed": [0, 0]}  # fmt: skip
    grid = make_plan(100, losses=("a", "b"), seeds=(3,), labels=labels, n_folds=5,
                     losses_per_batch=1)  # fmt: skip
    described = grid.batches[1].described()
    assert "beta" not in described and set(described["loss_index"]) == {1}
    assert described["seed"] == [3] * 5 and described["rotation"] == list(range(5))
    with pytest.raises(ValueError):  # one loss per member
        grid.batches[1].member_specs([None])
