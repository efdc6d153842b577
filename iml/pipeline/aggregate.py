"""Ensemble scores: the mean, per loss of the grid, of every member's test score of an observation.

Every member scores the observations of its test folds (models that never saw them, by the nested
cross-validation of :mod:`iml.pipeline.plan`). An observation's ensemble score for ``beta`` (for
a loss of a multiclass grid: its class scores) is the mean of the scores given to it by the
members trained with that loss; the number of those members is its ensemble size (0 where no
planned rotation tests it: its score is then NaN).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from iml.pipeline.store import RunStore

__all__ = ["EnsembleScores", "aggregate_members", "load_ensemble", "member_test_scores"]


@dataclasses.dataclass(frozen=True, eq=False)
class EnsembleScores:
    """Ensemble scores and sizes of every observation, one row per loss of the grid.

    Attributes:
      betas: the class weights in row order; for a multiclass grid, the losses' positions.
      scores: ``[len(betas), N]`` float64 mean test score, ``[len(betas), N, classes]`` for
        multiclass losses (NaN where the size is 0).
      sizes: ``[len(betas), N]`` int64 number of members whose test fold holds the observation.
    """

    betas: tuple[float, ...]
    scores: np.ndarray
    sizes: np.ndarray

    def for_beta(self, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, sizes)`` of one class weight."""
        row = self.betas.index(float(beta))
        return self.scores[row], self.sizes[row]


def member_test_scores(
    entry: Mapping[str, np.ndarray],
) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """Split one stored member batch into ``(beta, test_idx, test_scores)`` per member (the
    loss's position in the grid for multiclass losses, whose batches store ``loss_index``)."""
    offsets = np.asarray(entry["test_offsets"])
    if "loss_index" in entry:
        keys = [float(k) for k in np.asarray(entry["loss_index"])]
    else:
        keys = [float(b) for b in np.asarray(entry["beta"], dtype=np.float64)]
    out = []
    for k, key in enumerate(keys):
        lo, hi = int(offsets[k]), int(offsets[k + 1])
        out.append((key, entry["test_idx"][lo:hi], entry["test_scores"][lo:hi]))
    return out


def aggregate_members(
    members: Iterable[tuple[float, np.ndarray, np.ndarray]],
    betas: Sequence[float],
    num_examples: int,
) -> EnsembleScores:
    """Mean test score and ensemble size per observation and beta.

    Args:
      members: ``(beta, test_idx, test_scores)`` of each member (test scores ``[n]``, or
        ``[n, classes]`` for multiclass losses, keyed by the loss's position in the grid).
      betas: the class weights of the run (rows of the result), or the grid's positions.
      num_examples: ``N``.

    Returns:
      The :class:`EnsembleScores`.

    Raises:
      ValueError: for a member whose beta is not in ``betas``, or indices outside ``[0, N)``,
        or scores that are not finite probabilities.
    """
    betas = tuple(float(b) for b in betas)
    total: np.ndarray | None = None
    sizes = np.zeros((len(betas), num_examples), dtype=np.int64)
    for beta, idx, scores in members:
        if float(beta) not in betas:
            raise ValueError(f"member beta {beta} is not one of the run's betas {list(betas)}")
        idx = np.asarray(idx, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float64)
        if idx.ndim != 1 or scores.shape[:1] != idx.shape or scores.ndim not in (1, 2):
            raise ValueError(f"test_idx {idx.shape} and test_scores {scores.shape} must match")
        if total is None:
            total = np.zeros((len(betas), num_examples, *scores.shape[1:]), dtype=np.float64)
        elif scores.shape[1:] != total.shape[2:]:
            raise ValueError(f"test_scores {scores.shape} differ in shape from earlier members'")
        if idx.size and (idx.min() < 0 or idx.max() >= num_examples):
            raise ValueError(f"test_idx must lie in [0, {num_examples})")
        if not np.all(np.isfinite(scores)) or (scores < 0).any() or (scores > 1).any():
            raise ValueError(f"test_scores of a beta={beta} member are not probabilities in [0, 1]")
        row = betas.index(float(beta))
        np.add.at(total[row], idx, scores)
        np.add.at(sizes[row], idx, 1)
    if total is None:
        total = np.zeros((len(betas), num_examples), dtype=np.float64)
    per = sizes.reshape(sizes.shape + (1,) * (total.ndim - 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(per > 0, total / np.maximum(per, 1), np.nan)
    return EnsembleScores(betas=betas, scores=mean, sizes=sizes)


def load_ensemble(store: RunStore, betas: Sequence[float], num_examples: int) -> EnsembleScores:
    """Aggregate every member batch stored in ``store`` (entries under ``batches/``)."""

    def members() -> Iterable[tuple[float, np.ndarray, np.ndarray]]:
        for key in store.keys("batches"):
            yield from member_test_scores(store.load_arrays(key))

    return aggregate_members(members(), betas, num_examples)
