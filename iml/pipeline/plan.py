"""Planning a run: the grid beta x rotation x seed, split into member batches for the trainer.

Nested cross-validation follows the paper's appendix "Technical Details": the observations are
split into ``n_folds`` folds (grouped by patient where patients exist, stratified by label) and
rotated into training / validation / test folds (7 / 2 / 1 by default), so that every observation
is scored only by models that never saw it. Every combination of a class weight ``beta``, a
rotation and a seed is one ensemble member; members are trained ``members_per_batch`` at a time
by :func:`iml.training.train_ensemble` (one compiled program per batch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from iml import _validation as V
from iml.data import FoldSplit, assign_folds, cycle_length, nested_cv_splits

__all__ = ["Member", "MemberBatch", "Plan", "check_betas", "ensemble_sizes", "make_plan"]


@dataclasses.dataclass(frozen=True, eq=False)
class Member:
    """One ensemble member: a class weight, a rotation of the nested CV and a seed.

    Attributes:
      index: position in the plan's grid (betas outermost, then rotations, then seeds).
      beta: the positive-class weight of its loss (eq. ``b-loss-bin``).
      rotation: the rotation of the nested cross-validation it trains on.
      seed: seed of its initial parameters, data order and flips.
      split: its training, validation and test observations.
    """

    index: int
    beta: float
    rotation: int
    seed: int
    split: FoldSplit


@dataclasses.dataclass(frozen=True, eq=False)
class MemberBatch:
    """Members trained together in one call of the trainer; ``key`` names its store entry."""

    index: int
    members: tuple[Member, ...]

    @property
    def key(self) -> str:
        """The store key of the batch's results (``batches/batch-0003``)."""
        return f"batches/batch-{self.index:04d}"


@dataclasses.dataclass(frozen=True, eq=False)
class Plan:
    """The whole grid of a run.

    Attributes:
      betas: the class weights.
      seeds: the member seeds.
      fold_ids: ``[N]`` fold of every observation.
      splits: the rotations used, one :class:`~iml.data.FoldSplit` each.
      batches: the member batches, in the order they are trained.
    """

    betas: tuple[float, ...]
    seeds: tuple[int, ...]
    fold_ids: np.ndarray
    splits: tuple[FoldSplit, ...]
    batches: tuple[MemberBatch, ...]

    @property
    def members(self) -> list[Member]:
        """Every member of the grid, in grid order."""
        return [m for b in self.batches for m in b.members]


def check_betas(betas: Sequence[float]) -> tuple[float, ...]:
    """The class weights as floats, checked to be distinct and inside ``(0, 1)``.

    Raises:
      ValueError: naming the first beta outside ``(0, 1)``, or for an empty or repeated list.
    """
    return tuple(V.check_betas("betas", [float(b) for b in betas]).tolist())


def make_plan(
    num_examples: int,
    *,
    betas: Sequence[float],
    seeds: Sequence[int] = (0,),
    labels: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    n_folds: int = 10,
    n_val_folds: int = 2,
    n_test_folds: int = 1,
    rotations: Sequence[int] | None = None,
    fold_seed: int = 0,
    members_per_batch: int | None = None,
) -> Plan:
    """Plan a run: folds, rotations and the member grid split into batches.

    Args:
      num_examples: number of observations ``N``.
      betas: class weights in ``(0, 1)``.
      seeds: non-negative member seeds (each rotation and beta is trained once per seed).
      labels: ``[N]`` labels to stratify the folds by.
      groups: ``[N]`` patient (group) ids; no group is split across folds.
      n_folds, n_val_folds, n_test_folds: the nested cross-validation (10, 2, 1: the paper's
        70-20-10); the training folds are all the others.
      rotations: which rotations to train (default: one full cycle, so every observation is in
        exactly ``n_test_folds * cycle / n_folds`` test folds: once with the defaults).
      fold_seed: seed of the fold assignment.
      members_per_batch: members per trainer call (default: all members of one rotation, i.e.
        ``len(betas) * len(seeds)``).

    Returns:
      The :class:`Plan`; batches hold consecutive members of the grid (betas outermost within a
      rotation: the grid is ordered rotation, beta, seed so that a batch shares its folds).
    """
    betas = check_betas(betas)
    seeds = tuple(int(s) for s in seeds)
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct non-negative integers, got {list(seeds)}")
    fold_ids = assign_folds(
        num_examples, n_folds=n_folds, groups=groups, labels=labels, seed=fold_seed
    )
    cycle = cycle_length(n_folds, n_test_folds)
    rotations = tuple(range(cycle)) if rotations is None else tuple(int(r) for r in rotations)
    if not rotations or len(set(rotations)) != len(rotations):
        raise ValueError(f"rotations must be distinct, got {list(rotations)}")
    splits = tuple(
        nested_cv_splits(
            fold_ids,
            n_folds=n_folds,
            n_val_folds=n_val_folds,
            n_test_folds=n_test_folds,
            rotations=rotations,
        )
    )
    grid = [(s, b, seed) for s in splits for b in betas for seed in seeds]
    members = [
        Member(index=i, beta=b, rotation=s.rotation, seed=seed, split=s)
        for i, (s, b, seed) in enumerate(grid)
    ]
    per = members_per_batch or len(betas) * len(seeds)
    if int(per) < 1:
        raise ValueError(f"members_per_batch must be >= 1, got {members_per_batch!r}")
    batches = tuple(
        MemberBatch(index=k, members=tuple(members[i : i + per]))
        for k, i in enumerate(range(0, len(members), per))
    )
    return Plan(betas=betas, seeds=seeds, fold_ids=fold_ids, splits=splits, batches=batches)


def ensemble_sizes(plan: Plan, num_examples: int) -> dict[float, np.ndarray]:
    """Planned ensemble size of every observation per beta: members whose test fold holds it."""
    sizes = {b: np.zeros(num_examples, dtype=np.int64) for b in plan.betas}
    for m in plan.members:
        sizes[m.beta][m.split.test] += 1
    return sizes
