"""Planning a run: the grid loss x rotation x seed, split into member batches for the trainer.

Nested cross-validation follows the paper's appendix "Technical Details": folds grouped by
patient where patients exist, stratified by label, rotated into training / validation / test
folds (7 / 2 / 1 by default), so that every observation is scored only by models that never saw
it. Every combination of a loss, a rotation and a seed is one ensemble member.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from iml import _validation as V
from iml.calibration import beta_key
from iml.data import FoldSplit, assign_folds, cycle_length, nested_cv_splits

__all__ = ["Member", "MemberBatch", "Plan", "check_betas", "ensemble_sizes", "make_plan"]


@dataclasses.dataclass(frozen=True, eq=False)
class Member:
    """One ensemble member.

    Attributes:
      index: position in the plan's grid (rotations outermost, then losses, then seeds).
      beta: the positive-class weight of its loss (eq. ``b-loss-bin``); ``None`` in a grid of
        multiclass losses.
      seed: seed of its initial parameters, data order and flips.
      loss: the position of its loss in the plan's grid (:attr:`Plan.keys`).
    """

    index: int
    beta: float | None
    rotation: int
    seed: int
    split: FoldSplit
    loss: int = 0


@dataclasses.dataclass(frozen=True, eq=False)
class MemberBatch:
    """Members trained together in one call of the trainer; ``key`` names its store entry."""

    index: int
    members: tuple[Member, ...]

    @property
    def key(self) -> str:
        """``batches/batch-0003``."""
        return f"batches/batch-{self.index:04d}"

    def member_specs(self, losses: Sequence[Any]) -> list[Any]:
        """The trainer's :class:`iml.training.MemberSpec` of each member, member ``k`` under
        ``losses[k]`` (None: the beta-weighted log loss of its beta)."""
        # imported here: the trainer loads Flax and optax, which reading a plan does without
        from iml.training import MemberSpec

        pairs = zip(self.members, losses, strict=True)
        return [MemberSpec(beta=m.beta, seed=m.seed, train_idx=m.split.train, val_idx=m.split.val,
                           test_idx=m.split.test, fold=m.rotation, loss=loss)
                for m, loss in pairs]  # fmt: skip

    def described(self) -> dict[str, list]:
        """What a stored batch says of its members (:func:`iml.pipeline.store.member_entry`):
        their ``member_index``, loss (``beta``, or ``loss_index`` in a grid of losses that no
        class weight names), ``rotation`` and ``seed``."""
        named = all(m.beta is not None for m in self.members)
        loss = {"beta": [m.beta for m in self.members]} if named else {
            "loss_index": [m.loss for m in self.members]}  # fmt: skip
        return {"member_index": [m.index for m in self.members], **loss,
                "rotation": [m.rotation for m in self.members],
                "seed": [m.seed for m in self.members]}  # fmt: skip


@dataclasses.dataclass(frozen=True, eq=False)
class Plan:
    """The whole grid of a run.

    Attributes:
      betas: the class weights (empty for a grid of multiclass losses).
      fold_ids: ``[N]`` fold of every observation.
      splits: the rotations used, one :class:`~iml.data.FoldSplit` each.
      batches: the member batches, in the order they are trained.
      keys: the grid's losses by name: the exact betas (:func:`iml.calibration.beta_key`), or
        the keys of a multiclass grid (:attr:`iml.LossGrid.keys`, e.g. ``"B[8,8]=10"``).
    """

    betas: tuple[float, ...]
    seeds: tuple[int, ...]
    fold_ids: np.ndarray
    splits: tuple[FoldSplit, ...]
    batches: tuple[MemberBatch, ...]
    keys: tuple[str, ...] = ()

    @property
    def members(self) -> list[Member]:
        """Every member, in grid order."""
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
    betas: Sequence[float] = (),
    losses: Sequence[str] = (),
    seeds: int | Sequence[int] = (0,),
    labels: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    n_folds: int = 10,
    n_val_folds: int = 2,
    n_test_folds: int = 1,
    rotations: Sequence[int] | None = None,
    fold_seed: int = 0,
    members_per_batch: int | None = None,
    losses_per_batch: int | None = None,
) -> Plan:
    """Plan a run: folds, rotations and the member grid split into batches.

    Args:
      num_examples: number of observations ``N``.
      betas: class weights in ``(0, 1)``, one loss each.
      losses: or the keys of a grid of multiclass losses (distinct); exactly one of ``betas``
        and ``losses`` is given.
      seeds: distinct non-negative member seeds, or their count ``N`` for ``0..N-1`` (each
        rotation and beta is trained once per seed).
      labels: ``[N]`` labels to stratify the folds by.
      groups: ``[N]`` patient (group) ids; no group is split across folds.
      n_folds, n_val_folds, n_test_folds: the nested cross-validation (10, 2, 1: the paper's
        70-20-10); the training folds are all the others.
      rotations: which rotations to train (default: one full cycle, so every observation is in
        exactly ``n_test_folds * cycle / n_folds`` test folds: once with the defaults).
      fold_seed: seed of the fold assignment.
      members_per_batch: members per trainer call (default: all members of one rotation, i.e.
        ``len(betas) * len(seeds)``).
      losses_per_batch: or the losses per trainer call, each batch holding every member (all
        rotations and seeds) of its losses: a full grid, which a table's feed trains at once
        (:func:`iml.training.train`).

    Returns:
      The :class:`Plan`; batches hold consecutive members of the grid (betas outermost within a
      rotation: the grid is ordered rotation, beta, seed so that a batch shares its folds), or
      with ``losses_per_batch`` the members of consecutive losses, in grid order.
    """
    if bool(len(betas)) == bool(len(losses)):
        raise ValueError("give the grid as betas or as the keys of multiclass losses, not both")
    keys = tuple(str(k) for k in losses)
    if losses and len(set(keys)) != len(keys):
        raise ValueError(f"losses must be distinct, got {list(keys)}")
    betas = check_betas(betas) if betas else ()
    weights: tuple[float | None, ...] = betas or (None,) * len(keys)
    keys = tuple(beta_key(b) for b in betas) or keys
    seeds = V.check_seeds("seeds", seeds)
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
    grid = [(s, j, seed) for s in splits for j in range(len(keys)) for seed in seeds]
    members = [
        Member(index=i, beta=weights[j], rotation=s.rotation, seed=seed, split=s, loss=j)
        for i, (s, j, seed) in enumerate(grid)
    ]
    if members_per_batch and losses_per_batch:
        raise ValueError("give members_per_batch or losses_per_batch, not both")
    if losses_per_batch:
        per = V.check_count("losses_per_batch", losses_per_batch)
        chunks = [range(i, min(i + per, len(keys))) for i in range(0, len(keys), per)]
        batches = tuple(MemberBatch(index=k, members=tuple(m for m in members if m.loss in chunk))
                        for k, chunk in enumerate(chunks))  # fmt: skip
        return Plan(betas, seeds, fold_ids, splits, batches, keys)
    per = members_per_batch or len(keys) * len(seeds)
    V.check_count("members_per_batch", per)
    batches = tuple(
        MemberBatch(index=k, members=tuple(members[i : i + per]))
        for k, i in enumerate(range(0, len(members), per))
    )
    return Plan(betas, seeds, fold_ids, splits, batches, keys)


def ensemble_sizes(plan: Plan, num_examples: int) -> dict[float, np.ndarray]:
    """Planned ensemble size of every observation per beta (per key of a multiclass grid):
    members whose test fold holds it."""
    sizes = {b: np.zeros(num_examples, dtype=np.int64) for b in plan.betas or plan.keys}
    for m in plan.members:
        sizes[plan.keys[m.loss] if m.beta is None else m.beta][m.split.test] += 1
    return sizes
