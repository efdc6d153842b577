"""One entry point for training members: :func:`train` picks how the data reach the devices and
the solver, and gives every member's scores on its test rows in one form.

Two feeds, each in its own module: image batches read from the host and sharded over the
devices step by step (:func:`iml.training.trainer.train_ensemble`, then
:func:`~iml.training.trainer.predict_ensemble`), or a table held whole on the device, its
minibatches shared by the members (:func:`iml.training.tabular.train_tabular`), which fits convex
members exactly (:mod:`iml.training.exact`) and trains the others by the same Adam steps. The
table's feed takes members that form a full grid of seeds, losses and rotations (as a sweep's
chunk does); other members of a table, and every member on images, take the host's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import linen as nn

from iml.data.folds import FoldSplit
from iml.spec import LossSpec
from iml.training.ensemble_data import DataSource, MemberSpec
from iml.training.tabular import TABULAR_DEFAULTS, train_tabular
from iml.training.train_config import TrainConfig
from iml.training.trainer import MemberHistory, predict_ensemble, train_ensemble

__all__ = ["FEEDS", "Trained", "member_grid", "train"]

#: How the data reach the devices: ``"host"``, batches read from the host every step (images,
#: or any members), or ``"table"``, the whole table on the device (a full grid of members).
FEEDS = ("host", "table")


class Trained(NamedTuple):
    """Members trained by :func:`train`, in the order given.

    Attributes:
      test_scores: each member's scores on its ``test_idx`` (``[n]``, or ``[n, classes]`` for a
        multiclass loss): float32 from the host's feed, float64 from the table's.
      test_logits: each member's logits there (the table's feed); None from the host's, which
        keeps scores only.
      best_val_loss: ``[K]`` each member's best validation loss.
      best_epoch: ``[K]`` the (1-based) epoch of that loss; Newton steps for an exact fit.
      l2: ``[K]`` each member's ridge coefficient (the table's feed), else None.
      history: each member's :class:`MemberHistory` (the host's feed), else None.
      feed: the feed that trained them (:data:`FEEDS`).
      solver: ``"exact"`` or ``"adam"``.
      epochs_run: epochs the program ran (Newton steps for an exact fit).
    """

    test_scores: list[np.ndarray]
    test_logits: list[np.ndarray] | None
    best_val_loss: np.ndarray
    best_epoch: np.ndarray
    l2: np.ndarray | None
    history: list[MemberHistory] | None
    feed: str
    solver: str
    epochs_run: int


def _same_loss(a: LossSpec, b: LossSpec) -> bool:
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    return tree_a == tree_b and all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(leaves_a, leaves_b, strict=True)
    )


def member_grid(
    members: Sequence[MemberSpec],
) -> tuple[np.ndarray, list[LossSpec], list[FoldSplit]] | None:
    """The seeds, losses and rotations of which ``members`` are the full grid, in the order
    seed, loss, rotation (member ``(s * B + b) * R + r``); None if they are not one."""
    first = members[0]
    R = 1
    while (R < len(members) and members[R].seed == first.seed
           and _same_loss(members[R].loss_spec(), first.loss_spec())):  # fmt: skip
        R += 1
    B = 1
    while B * R < len(members) and members[B * R].seed == first.seed:
        B += 1
    if len(members) % (B * R):
        return None
    seeds = np.asarray([m.seed for m in members[:: B * R]], np.int64)
    losses = [m.loss_spec() for m in members[: B * R : R]]
    splits = [FoldSplit(m.fold if isinstance(m.fold, int) else r, (), (), (),
                        np.asarray(m.train_idx), np.asarray(m.val_idx), np.asarray(m.test_idx))
              for r, m in enumerate(members[:R])]  # fmt: skip
    if len(set(seeds.tolist())) != len(seeds):
        return None
    for k, m in enumerate(members):
        s, rest = divmod(k, B * R)
        b, r = divmod(rest, R)
        same_rows = all(
            np.array_equal(getattr(m, f"{part}_idx"), getattr(splits[r], part))
            for part in ("train", "val", "test")
        )
        if m.seed != seeds[s] or not same_rows or not _same_loss(m.loss_spec(), losses[b]):
            return None
    return seeds, losses, splits


def _best_epoch(history: MemberHistory) -> int:
    losses = np.asarray(history.val_loss, np.float64)
    finite = np.isfinite(losses)
    return int(np.argmin(np.where(finite, losses, np.inf))) + 1 if finite.any() else 0


def _is_table(data: DataSource) -> bool:
    return np.ndim(data.get_batch(np.zeros(1, np.int64))) == 2


def train(
    model: nn.Module,
    members: Sequence[MemberSpec],
    data: DataSource,
    config: TrainConfig | None = None,
    *,
    progress: bool | str = True,
    checkpoint_dir: str | None = None,
    init_variables: Mapping[str, Any] | None = None,
) -> Trained:
    """Train ``members`` of ``model`` on ``data`` and score each on its test rows.

    The feed (:data:`FEEDS`): a table (``data.get_batch`` gives rows ``[n, d]``) whose members
    form a full grid (:func:`member_grid`) is held whole on the device
    (:func:`~iml.training.tabular.train_tabular`; its solver exact where it applies and the
    config allows, Adam otherwise); anything else is fed from the host
    (:func:`~iml.training.trainer.train_ensemble`, resumable from ``checkpoint_dir``). Both
    feeds train each member as it would train alone.

    Args:
      model: a Flax module taking the data's images or rows.
      members: the members; each needs its ``test_idx``.
      data: the shared data (:meth:`DataSource.from_arrays` for arrays in memory).
      config: the trainer's configuration (default: :data:`TABULAR_DEFAULTS` for the table's
        feed, ``TrainConfig()`` for the host's).
      progress: show progress bars (a string: the description of the table's bar).
      checkpoint_dir: the host's feed saves and resumes its state there.
      init_variables: starting variables of every member (the host's feed).

    Returns:
      A :class:`Trained`.

    Raises:
      ValueError: for no members, a member without test rows, or what the feed refuses.
    """
    if not members:
        raise ValueError("members is empty")
    for k, m in enumerate(members):
        if m.test_idx is None:
            raise ValueError(f"{m.describe(k)} has no test_idx to score")
    grid = member_grid(members) if _is_table(data) and init_variables is None else None
    if grid is not None:
        seeds, losses, splits = grid
        x = np.asarray(data.get_batch(np.arange(len(data))), np.float32)
        spec = jax.tree.map(lambda *leaves: np.stack(leaves), *losses)
        config = TABULAR_DEFAULTS if config is None else config
        fit = train_tabular(model, x, data.labels, splits, spec, seeds, config, progress=progress)
        lengths = [len(split.test) for split in splits]
        logits = [fit.test_logits[s, b, r, : lengths[r]]
                  for s in range(len(seeds)) for b in range(len(losses))
                  for r in range(len(splits))]  # fmt: skip
        scores = [np.asarray(losses[(k // len(splits)) % len(losses)].link(z), np.float64)
                  if losses[0].multiclass else 0.5 * (1.0 + np.tanh(0.5 * z.astype(np.float64)))
                  for k, z in enumerate(logits)]  # fmt: skip
        return Trained(
            test_scores=scores,
            test_logits=logits,
            best_val_loss=np.asarray(fit.best_val, np.float64).reshape(-1),
            best_epoch=np.asarray(fit.best_epoch).reshape(-1),
            l2=None if fit.l2 is None else np.asarray(fit.l2, np.float64).reshape(-1),
            history=None,
            feed="table",
            solver="exact" if fit.hessians is not None else "adam",
            epochs_run=int(fit.epochs_run),
        )
    config = TrainConfig() if config is None else config
    states, history = train_ensemble(
        model, members, data, config, checkpoint_dir=checkpoint_dir,
        init_variables=init_variables, progress=bool(progress),
    )  # fmt: skip
    tests = [m.test_idx for m in members]
    loss = members[0].loss
    scores = predict_ensemble(model, states, data, tests, config, loss=loss)
    return Trained(
        test_scores=scores,
        test_logits=None,
        best_val_loss=np.asarray([h.best_val_loss for h in history], np.float64),
        best_epoch=np.asarray([_best_epoch(h) for h in history]),
        l2=None,
        history=history,
        feed="host",
        solver="adam",
        epochs_run=max((len(h.val_loss) for h in history), default=0),
    )
