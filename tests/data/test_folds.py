"""Properties of the nested cross-validation folds (iml.data.folds)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from iml.data import chestxray14_labels
from iml.data.folds import (
    assign_folds,
    cycle_length,
    nested_cv,
    nested_cv_splits,
    rotation_folds,
)

# ----------------------------------------------------------------------------------------------
# Strategies
# ----------------------------------------------------------------------------------------------


@st.composite
def fold_problems(draw, grouped: bool, stratified: bool):
    """(num_examples, n_folds, groups or None, labels or None, seed)."""
    n_folds = draw(st.integers(2, 12))
    if grouped:
        num_groups = draw(st.integers(n_folds, 60))
        sizes = draw(st.lists(st.integers(1, 6), min_size=num_groups, max_size=num_groups))
        group_ids = draw(st.permutations(range(1000, 1000 + num_groups)))
        groups = np.repeat(np.asarray(group_ids), sizes)
        order = np.random.default_rng(draw(st.integers(0, 2**16))).permutation(len(groups))
        groups = groups[order]
    else:
        groups = None
    num_examples = len(groups) if grouped else draw(st.integers(n_folds, 300))
    if stratified:
        rate = draw(st.floats(0.02, 0.5))
        labels = np.random.default_rng(draw(st.integers(0, 2**16))).random(num_examples) < rate
        labels = labels.astype(np.int32)
    else:
        labels = None
    return num_examples, n_folds, groups, labels, draw(st.integers(0, 2**31))


def _assert_partition(folds: np.ndarray, num_examples: int, n_folds: int) -> None:
    assert folds.shape == (num_examples,) and folds.dtype == np.int32
    assert folds.min() >= 0 and folds.max() < n_folds


def _assert_groups_whole(folds: np.ndarray, groups: np.ndarray) -> None:
    for g in np.unique(groups):
        assert len(np.unique(folds[groups == g])) == 1


# ----------------------------------------------------------------------------------------------
# Fold assignment
# ----------------------------------------------------------------------------------------------


@given(fold_problems(grouped=False, stratified=False))
def test_ungrouped_folds_partition_and_differ_in_size_by_at_most_one(problem):
    n, k, _, _, seed = problem
    folds = assign_folds(n, n_folds=k, seed=seed)
    _assert_partition(folds, n, k)
    sizes = np.bincount(folds, minlength=k)
    assert sizes.sum() == n and sizes.max() - sizes.min() <= 1
    np.testing.assert_array_equal(folds, assign_folds(n, n_folds=k, seed=seed))


@given(fold_problems(grouped=False, stratified=True))
def test_stratified_folds_spread_every_class_evenly(problem):
    n, k, _, labels, seed = problem
    folds = assign_folds(n, n_folds=k, labels=labels, seed=seed)
    _assert_partition(folds, n, k)
    sizes = np.bincount(folds, minlength=k)
    assert sizes.max() - sizes.min() <= 1
    for c in (0, 1):
        per_fold = np.bincount(folds[labels == c], minlength=k)
        assert per_fold.max() - per_fold.min() <= 1


@given(fold_problems(grouped=True, stratified=False))
def test_grouped_folds_keep_groups_whole_and_sizes_within_largest_group(problem):
    n, k, groups, _, seed = problem
    folds = assign_folds(n, n_folds=k, groups=groups, seed=seed)
    _assert_partition(folds, n, k)
    _assert_groups_whole(folds, groups)
    sizes = np.bincount(folds, minlength=k)
    assert sizes.min() > 0
    assert sizes.max() - sizes.min() <= np.unique(groups, return_counts=True)[1].max()
    np.testing.assert_array_equal(folds, assign_folds(n, n_folds=k, groups=groups, seed=seed))


@given(fold_problems(grouped=True, stratified=True))
def test_grouped_stratified_folds_balance_the_rare_class_per_group(problem):
    n, k, groups, labels, seed = problem
    folds = assign_folds(n, n_folds=k, groups=groups, labels=labels, seed=seed)
    _assert_partition(folds, n, k)
    _assert_groups_whole(folds, groups)
    counts = np.bincount(labels)
    if len(counts) < 2 or counts.min() == 0:
        return
    rare = int(np.argmin(counts))
    # Per-fold counts of the rare class differ by at most the most a single group holds.
    rare_per_group = np.bincount(np.unique(groups, return_inverse=True)[1], labels == rare)
    per_fold = np.bincount(folds[labels == rare], minlength=k)
    assert per_fold.max() - per_fold.min() <= rare_per_group.max()
    np.testing.assert_array_equal(
        folds, assign_folds(n, n_folds=k, groups=groups, labels=labels, seed=seed)
    )


def test_seed_changes_the_assignment_but_not_the_balance():
    a = assign_folds(500, seed=0)
    b = assign_folds(500, seed=1)
    assert (a != b).mean() > 0.5
    np.testing.assert_array_equal(np.bincount(a), np.bincount(b))


@pytest.mark.slow
def test_chestxray14_patient_folds_on_the_real_label_file(shared_data_path):
    meta = shared_data_path("nih-chestxray14-meta")
    table = chestxray14_labels(meta / "Data_Entry_2017_v2020.csv.gz")
    folds = assign_folds(len(table.labels), groups=table.patient_ids, labels=table.labels, seed=0)
    # No patient in two folds.
    _, patient_index = np.unique(table.patient_ids, return_inverse=True)
    per_patient = np.zeros((patient_index.max() + 1, 10), dtype=bool)
    per_patient[patient_index, folds] = True
    assert per_patient.sum(axis=1).max() == 1
    # Ten roughly equal folds (11,212 images each on average; the largest patient has 184
    # images) with the 1,431 pneumonia images spread evenly (about 143 each).
    sizes = np.bincount(folds, minlength=10)
    positives = np.bincount(folds, weights=table.labels, minlength=10)
    assert sizes.sum() == 112_120 and positives.sum() == 1_431
    largest_patient = np.bincount(patient_index).max()
    assert sizes.max() - sizes.min() <= largest_patient
    assert positives.max() - positives.min() <= np.bincount(patient_index, table.labels).max()
    # Stratifying spreads pneumonia more evenly than grouping alone does.
    unstratified = assign_folds(len(table.labels), groups=table.patient_ids, seed=0)
    positives_unstratified = np.bincount(unstratified, weights=table.labels, minlength=10)
    assert np.ptp(positives) < np.ptp(positives_unstratified)


# ----------------------------------------------------------------------------------------------
# Rotations
# ----------------------------------------------------------------------------------------------


def test_default_rotation_is_seven_two_one_and_each_fold_is_tested_once():
    assert cycle_length() == 10
    assert rotation_folds(0) == ((3, 4, 5, 6, 7, 8, 9), (1, 2), (0,))
    assert rotation_folds(9) == ((2, 3, 4, 5, 6, 7, 8), (0, 1), (9,))
    tested = [rotation_folds(r)[2] for r in range(10)]
    assert sorted(f for t in tested for f in t) == list(range(10))


@given(
    n_folds=st.integers(3, 15),
    n_val=st.integers(0, 4),
    n_test=st.integers(1, 4),
    spare=st.integers(0, 2),
)
def test_rotations_are_disjoint_and_each_fold_is_tested_equally_often(
    n_folds, n_val, n_test, spare
):
    n_train = n_folds - n_val - n_test - spare
    if n_train < 1:
        with pytest.raises(ValueError, match=r"n_train_folds|exceeds"):
            rotation_folds(
                0, n_folds=n_folds, n_train_folds=n_train, n_val_folds=n_val, n_test_folds=n_test
            )
        return
    cycle = cycle_length(n_folds, n_test)
    times_tested = np.zeros(n_folds, dtype=int)
    for r in range(cycle):
        train, val, test = rotation_folds(
            r, n_folds=n_folds, n_train_folds=n_train, n_val_folds=n_val, n_test_folds=n_test
        )
        assert (len(train), len(val), len(test)) == (n_train, n_val, n_test)
        assert len(set(train) | set(val) | set(test)) == n_train + n_val + n_test
        times_tested[list(test)] += 1
    assert len(set(times_tested.tolist())) == 1
    if n_folds % n_test == 0:
        assert times_tested[0] == 1
    with pytest.raises(ValueError, match="rotation"):
        rotation_folds(cycle, n_folds=n_folds, n_val_folds=n_val, n_test_folds=n_test)


@given(fold_problems(grouped=True, stratified=False))
def test_nested_cv_splits_partition_examples_every_rotation(problem):
    n, k, groups, _, seed = problem
    if k < 3:
        return
    fold_ids, splits = nested_cv(n, groups=groups, n_folds=k, n_val_folds=1, seed=seed)
    assert len(splits) == k
    in_test = np.zeros(n, dtype=int)
    for split in splits:
        parts = [split.train, split.val, split.test]
        joined = np.concatenate(parts)
        assert len(joined) == n and len(np.unique(joined)) == n  # disjoint and covering
        part_folds_all = [split.train_folds, split.val_folds, split.test_folds]
        for part, part_folds in zip(parts, part_folds_all, strict=True):
            np.testing.assert_array_equal(part, np.flatnonzero(np.isin(fold_ids, part_folds)))
            # no group on both sides of a split
            assert not set(groups[part].tolist()) & set(groups[np.setdiff1d(joined, part)].tolist())
        in_test[split.test] += 1
    np.testing.assert_array_equal(in_test, 1)  # every example tested once per cycle


def test_nested_cv_selected_rotations_and_fractions():
    fold_ids, splits = nested_cv(1000, rotations=[4, 2])
    assert [s.rotation for s in splits] == [4, 2]
    assert [len(splits[0].train), len(splits[0].val), len(splits[0].test)] == [700, 200, 100]
    assert splits[0].test_folds == (4,) and splits[1].val_folds == (3, 4)
    five = nested_cv_splits(fold_ids, n_train_folds=5)
    assert len(five[0].train) == 500  # two folds left out of every rotation
    two_test = nested_cv_splits(fold_ids, n_test_folds=2)
    assert len(two_test) == 5 and len(two_test[0].test) == 200


# ----------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------


def test_bad_fold_arguments_raise_naming_them():
    with pytest.raises(ValueError, match="num_examples"):
        assign_folds(5, n_folds=10)
    with pytest.raises(ValueError, match="groups"):
        assign_folds(20, groups=np.arange(20) % 3)
    with pytest.raises(ValueError, match="labels"):
        assign_folds(20, labels=np.full(20, np.nan))
    with pytest.raises(ValueError, match="labels"):
        assign_folds(20, labels=np.zeros(19))
    with pytest.raises(ValueError, match="seed"):
        assign_folds(20, seed=-1)
    with pytest.raises(ValueError, match="n_folds"):
        assign_folds(20, n_folds=1)
    with pytest.raises(ValueError, match="exceeds"):
        rotation_folds(0, n_train_folds=8)
    with pytest.raises(ValueError, match="fold_ids"):
        nested_cv_splits(np.array([0, 1, 10]))
    with pytest.raises(ValueError, match="fold_ids"):
        nested_cv_splits(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="rotation"):
        nested_cv_splits(np.arange(10), rotations=[10])
