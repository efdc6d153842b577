"""Nested cross-validation folds: grouped by patient, optionally stratified, rotated 7-2-1.

The paper's appendix "Technical Details" splits the data "into ten approximately equal folds and
then iterate[s] through 70-20-10 train-validation-test splits", so that every observation gets a
score from models that never saw it. This module makes those folds and rotations with numpy only:

* :func:`assign_folds` gives every example a fold in ``0..n_folds-1``. With ``groups`` (patient
  ids) no group is split across folds; with ``labels`` the classes are spread evenly over folds
  (exactly, to within one example per class, when there are no groups; best effort with groups).
* :func:`rotation_folds` names the training, validation and test folds of one rotation: rotation
  ``r`` tests folds ``r*n_test .. r*n_test+n_test-1`` (mod ``n_folds``), validates on the next
  ``n_val`` folds and trains on the ``n_train`` after those.
* :func:`nested_cv_splits` turns fold ids into the example indices of each rotation.

With the defaults (10 folds, 7/2/1) a full cycle is 10 rotations and each example is in the test
fold of exactly one of them. Everything is a deterministic function of ``seed``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from iml import _validation as V

__all__ = [
    "FoldSplit",
    "assign_folds",
    "cycle_length",
    "nested_cv",
    "nested_cv_splits",
    "rotation_folds",
]


@dataclasses.dataclass(frozen=True, eq=False)
class FoldSplit:
    """The examples of one rotation of nested cross-validation.

    Attributes:
      rotation: the rotation index ``r``.
      train_folds, val_folds, test_folds: the fold ids in each part.
      train, val, test: sorted example indices (int64) in each part.
    """

    rotation: int
    train_folds: tuple[int, ...]
    val_folds: tuple[int, ...]
    test_folds: tuple[int, ...]
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


# ----------------------------------------------------------------------------------------------
# Validation helpers
# ----------------------------------------------------------------------------------------------


def _check_per_example(name: str, values: ArrayLike, num_examples: int) -> np.ndarray:
    arr = np.asarray(values)
    V.check_shape(name, arr, (num_examples,))
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN")
    return arr


def _fold_counts(
    n_folds: int, n_train_folds: int | None, n_val_folds: int, n_test_folds: int
) -> tuple[int, int, int, int]:
    n_folds = V.check_count("n_folds", n_folds, 2)
    n_val_folds = V.check_count("n_val_folds", n_val_folds, 0)
    n_test_folds = V.check_count("n_test_folds", n_test_folds, 1)
    if n_train_folds is None:
        n_train_folds = n_folds - n_val_folds - n_test_folds
    n_train_folds = V.check_count("n_train_folds", n_train_folds, 1)
    if n_train_folds + n_val_folds + n_test_folds > n_folds:
        raise ValueError(
            f"n_train_folds + n_val_folds + n_test_folds = "
            f"{n_train_folds} + {n_val_folds} + {n_test_folds} exceeds n_folds = {n_folds}"
        )
    return n_folds, n_train_folds, n_val_folds, n_test_folds


# ----------------------------------------------------------------------------------------------
# Fold assignment
# ----------------------------------------------------------------------------------------------


def _assign_ungrouped(
    num_examples: int, n_folds: int, labels: np.ndarray | None, rng: np.random.Generator
) -> np.ndarray:
    # Deal the (shuffled) examples round-robin; with labels, deal class after class so that both
    # the fold sizes and every class's count per fold differ by at most one.
    order = rng.permutation(num_examples)
    if labels is not None:
        order = order[np.argsort(labels[order], kind="stable")]
    folds = np.empty(num_examples, dtype=np.int32)
    folds[order] = np.arange(num_examples) % n_folds
    return folds


def _assign_grouped(
    groups: np.ndarray, n_folds: int, labels: np.ndarray | None, rng: np.random.Generator
) -> np.ndarray:
    _, group_of = np.unique(groups, return_inverse=True)
    group_of = group_of.reshape(-1)
    num_groups = int(group_of.max()) + 1
    sizes = np.bincount(group_of, minlength=num_groups)
    if labels is None:
        class_of = np.zeros_like(group_of)
        num_classes = 1
    else:
        _, class_of = np.unique(labels, return_inverse=True)
        class_of = class_of.reshape(-1)
        num_classes = int(class_of.max()) + 1
    # counts[g, c]: examples of class c in group g.
    counts = np.zeros((num_groups, num_classes), dtype=np.int64)
    np.add.at(counts, (group_of, class_of), 1)
    # Each group is balanced on its "key" class: the globally rarest class it contains. Groups are
    # placed rarest key class first, then by decreasing count of that class and size (random
    # order among ties), each into the fold holding fewest examples of its key class (ties: the
    # smallest fold). For a single class this is greedy largest-first bin balancing, which keeps
    # fold sizes within the largest group size of each other.
    rarity = np.argsort(np.argsort(counts.sum(axis=0), kind="stable"), kind="stable")
    present_rarity = np.where(counts > 0, rarity[None, :], num_classes)
    key_class = np.argmin(present_rarity, axis=1)
    key_count = counts[np.arange(num_groups), key_class]
    tiebreak = rng.permutation(num_groups)
    order = np.lexsort((tiebreak, -sizes, -key_count, rarity[key_class]))

    fold_counts = np.zeros((n_folds, num_classes), dtype=np.int64)
    fold_sizes = np.zeros(n_folds, dtype=np.int64)
    group_fold = np.empty(num_groups, dtype=np.int32)
    for g in order:
        c = key_class[g]
        f = np.lexsort((fold_sizes, fold_counts[:, c]))[0]
        group_fold[g] = f
        fold_counts[f] += counts[g]
        fold_sizes[f] += sizes[g]
    return group_fold[group_of]


def assign_folds(
    num_examples: int,
    *,
    n_folds: int = 10,
    groups: ArrayLike | None = None,
    labels: ArrayLike | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Assign every example to one of ``n_folds`` folds of about equal size.

    The paper (appendix "Technical Details") randomly splits the data into ten approximately
    equal folds; patients are kept whole so that no patient's images are both trained and tested on.

    Args:
      num_examples: number of examples ``N``.
      n_folds: number of folds (default 10, as in the paper).
      groups: optional ``[N]`` group ids (e.g. patient ids, any dtype); all examples of a group
        land in the same fold. Folds then differ in size by at most the largest group's size
        (when ``labels`` is not given).
      labels: optional ``[N]`` class labels for stratification. Without groups, every class's
        count per fold differs by at most one across folds and fold sizes by at most one. With
        groups, stratification is best effort: the rare class is balanced first (its per-fold
        counts differ by at most the largest count of that class in one group).
      seed: non-negative seed of the shuffling; the result is a deterministic function of all
        arguments.

    Returns:
      ``[N]`` int32 fold ids in ``0..n_folds-1``.

    Raises:
      ValueError: if ``num_examples < n_folds`` (some fold would be empty), if there are fewer
        groups than folds, or if ``groups``/``labels`` have the wrong shape or contain NaN.
    """
    num_examples = V.check_count("num_examples", num_examples, 1)
    n_folds = V.check_count("n_folds", n_folds, 2)
    if num_examples < n_folds:
        raise ValueError(f"num_examples = {num_examples} is smaller than n_folds = {n_folds}")
    seed = V.check_count("seed", seed, 0)
    label_arr = None if labels is None else _check_per_example("labels", labels, num_examples)
    rng = np.random.default_rng(np.random.SeedSequence([seed, n_folds]))
    if groups is None:
        folds = _assign_ungrouped(num_examples, n_folds, label_arr, rng)
    else:
        group_arr = _check_per_example("groups", groups, num_examples)
        num_groups = len(np.unique(group_arr))
        if num_groups < n_folds:
            raise ValueError(
                f"groups has {num_groups} distinct values, fewer than n_folds = {n_folds}"
            )
        folds = _assign_grouped(group_arr, n_folds, label_arr, rng)
    # Relabel folds at random so that no fold is systematically the one dealt first.
    return rng.permutation(n_folds).astype(np.int32)[folds]


# ----------------------------------------------------------------------------------------------
# Rotations
# ----------------------------------------------------------------------------------------------


def cycle_length(n_folds: int = 10, n_test_folds: int = 1) -> int:
    """Number of rotations after which the test folds repeat: ``n_folds / gcd(n_folds, n_test)``.

    Over one cycle each fold is a test fold ``n_test_folds / gcd(n_folds, n_test_folds)`` times:
    exactly once when ``n_test_folds`` divides ``n_folds`` (10 rotations for the default 7-2-1).
    """
    n_folds = V.check_count("n_folds", n_folds, 2)
    n_test_folds = V.check_count("n_test_folds", n_test_folds, 1)
    return n_folds // math.gcd(n_folds, n_test_folds)


def rotation_folds(
    rotation: int,
    *,
    n_folds: int = 10,
    n_train_folds: int | None = None,
    n_val_folds: int = 2,
    n_test_folds: int = 1,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The (train, val, test) folds of one rotation, walking the folds cyclically.

    Rotation ``r`` starts at fold ``s = r * n_test_folds``: folds ``s, ..., s + n_test - 1`` (mod
    ``n_folds``) are tested, the next ``n_val_folds`` validate and the next ``n_train_folds``
    train (default: all remaining folds, 7 with the defaults, the paper's 70-20-10 split).

    Args:
      rotation: rotation index in ``0 .. cycle_length(n_folds, n_test_folds) - 1``.
      n_folds: number of folds.
      n_train_folds: training folds per rotation (``None``: all folds not used otherwise).
      n_val_folds: validation folds per rotation (may be 0).
      n_test_folds: test folds per rotation.

    Returns:
      ``(train_folds, val_folds, test_folds)`` as tuples of fold ids.

    Raises:
      ValueError: if the counts do not fit into ``n_folds`` or ``rotation`` is out of range.
    """
    n_folds, n_train, n_val, n_test = _fold_counts(
        n_folds, n_train_folds, n_val_folds, n_test_folds
    )
    rotation = V.check_count("rotation", rotation, 0)
    cycle = cycle_length(n_folds, n_test)
    if rotation >= cycle:
        raise ValueError(f"rotation must be in [0, {cycle}) for {n_folds} folds, got {rotation}")
    start = rotation * n_test
    walk = [(start + k) % n_folds for k in range(n_test + n_val + n_train)]
    test = tuple(walk[:n_test])
    val = tuple(walk[n_test : n_test + n_val])
    train = tuple(walk[n_test + n_val :])
    return train, val, test


def nested_cv_splits(
    fold_ids: ArrayLike,
    *,
    n_folds: int = 10,
    n_train_folds: int | None = None,
    n_val_folds: int = 2,
    n_test_folds: int = 1,
    rotations: Iterable[int] | None = None,
) -> list[FoldSplit]:
    """Example indices of the training, validation and test parts of each rotation.

    Args:
      fold_ids: ``[N]`` fold id of every example, in ``0..n_folds-1`` (from :func:`assign_folds`).
      n_folds, n_train_folds, n_val_folds, n_test_folds: as in :func:`rotation_folds`.
      rotations: which rotations to return (default: one full cycle, ``range(cycle_length)``).

    Returns:
      One :class:`FoldSplit` per requested rotation, in the order requested.

    Raises:
      ValueError: if ``fold_ids`` is not a 1-D integer array within range, or a rotation is invalid.
    """
    folds = np.asarray(fold_ids)
    if folds.ndim != 1 or folds.dtype.kind not in "iu":
        raise ValueError(
            f"fold_ids must be a 1-D integer array, got shape {folds.shape} dtype {folds.dtype}"
        )
    n_folds, n_train, n_val, n_test = _fold_counts(
        n_folds, n_train_folds, n_val_folds, n_test_folds
    )
    if folds.size and (folds.min() < 0 or folds.max() >= n_folds):
        raise ValueError(f"fold_ids must lie in [0, {n_folds}), got [{folds.min()}, {folds.max()}]")
    if rotations is None:
        rotations = range(cycle_length(n_folds, n_test))
    splits = []
    for r in rotations:
        train_f, val_f, test_f = rotation_folds(
            r, n_folds=n_folds, n_train_folds=n_train, n_val_folds=n_val, n_test_folds=n_test
        )
        splits.append(
            FoldSplit(
                rotation=int(r),
                train_folds=train_f,
                val_folds=val_f,
                test_folds=test_f,
                train=np.flatnonzero(np.isin(folds, train_f)),
                val=np.flatnonzero(np.isin(folds, val_f)),
                test=np.flatnonzero(np.isin(folds, test_f)),
            )
        )
    return splits


def nested_cv(
    num_examples: int,
    *,
    groups: ArrayLike | None = None,
    labels: ArrayLike | None = None,
    n_folds: int = 10,
    n_train_folds: int | None = None,
    n_val_folds: int = 2,
    n_test_folds: int = 1,
    rotations: Sequence[int] | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, list[FoldSplit]]:
    """Folds and rotations in one call: :func:`assign_folds` then :func:`nested_cv_splits`.

    Returns:
      ``(fold_ids, splits)``.
    """
    fold_ids = assign_folds(num_examples, n_folds=n_folds, groups=groups, labels=labels, seed=seed)
    splits = nested_cv_splits(
        fold_ids,
        n_folds=n_folds,
        n_train_folds=n_train_folds,
        n_val_folds=n_val_folds,
        n_test_folds=n_test_folds,
        rotations=rotations,
    )
    return fold_ids, splits
