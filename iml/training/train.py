"""One entry point for training members: :func:`train` picks how the data reach the devices
(:data:`FEEDS`) and the solver, and gives every member's scores on its test rows in one form
(:class:`Trained`).
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


def member_grid(
    members: Sequence[MemberSpec],
) -> tuple[np.ndarray, list[LossSpec], list[FoldSplit], np.ndarray] | None:
    """The seeds, losses and rotations of which ``members`` are the full grid, and where each
    member sits in it: ``at[k]`` is member ``k``'s position in the order seed, loss, rotation
    (``(s * B + b) * R + r``); None if they are not one (a combination missing or repeated, or
    members of one rotation on other rows)."""
    seeds: dict[int, int] = {}
    losses: dict[tuple, int] = {}
    specs: list[LossSpec] = []
    rotations: dict[Any, int] = {}
    splits: list[FoldSplit] = []
    where = []
    for m in members:
        if m.test_idx is None:
            return None
        spec = m.loss_spec()
        leaves, tree = jax.tree.flatten(spec)  # the loss's structure and its parameters' bytes
        key = (tree, *((np.asarray(x).dtype.str, np.asarray(x).tobytes()) for x in leaves))
        if key not in losses:
            losses[key] = len(specs)
            specs.append(spec)
        seeds.setdefault(int(m.seed), len(seeds))
        if m.fold not in rotations:
            rotations[m.fold] = len(splits)
            rotation = m.fold if isinstance(m.fold, int) else len(splits)
            splits.append(FoldSplit(rotation, (), (), (), np.asarray(m.train_idx),
                                    np.asarray(m.val_idx), np.asarray(m.test_idx)))  # fmt: skip
        split = splits[rotations[m.fold]]
        if not all(a is b or np.array_equal(a, b) for a, b in
                   ((m.train_idx, split.train), (m.val_idx, split.val),
                    (m.test_idx, split.test))):  # fmt: skip
            return None
        where.append((seeds[int(m.seed)], losses[key], rotations[m.fold]))
    S, B, R = len(seeds), len(specs), len(splits)
    at = np.asarray([(s * B + b) * R + r for s, b, r in where], np.int64)
    if len(members) != S * B * R or len(np.unique(at)) != len(at):
        return None
    return np.asarray(list(seeds), np.int64), specs, splits, at


def _best_epoch(history: MemberHistory) -> int:
    losses = np.asarray(history.val_loss, np.float64)
    finite = np.isfinite(losses)
    return int(np.argmin(np.where(finite, losses, np.inf))) + 1 if finite.any() else 0


def train(
    model: nn.Module,
    members: Sequence[MemberSpec],
    data: DataSource,
    config: TrainConfig | None = None,
    *,
    progress: bool | str = True,
    checkpoint_dir: str | None = None,
    init_variables: Mapping[str, Any] | None = None,
    devices: Sequence[jax.Device] | None = None,
) -> Trained:
    """Train ``members`` of ``model`` on ``data`` and score each on its test rows.

    The feed (:data:`FEEDS`): a table (``data.get_batch`` gives rows ``[n, d]``) whose members
    form a full grid, in any order (:func:`member_grid`), is held whole on the device
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
      devices: the devices of the host's feed (default ``jax.devices()``, every process's;
        ``jax.local_devices()``: this process's own). The table's feed runs on the default
        device, this process's first.

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
    table = np.ndim(data.get_batch(np.zeros(1, np.int64))) == 2
    grid = member_grid(members) if table and init_variables is None else None
    if grid is not None:
        seeds, losses, splits, at = grid
        x = np.asarray(data.get_batch(np.arange(len(data))), np.float32)
        spec = jax.tree.map(lambda *leaves: np.stack(leaves), *losses)
        config = TABULAR_DEFAULTS if config is None else config
        fit = train_tabular(model, x, data.labels, splits, spec, seeds, config, progress=progress)
        shape = (len(seeds), len(losses), len(splits))
        logits, scores = [], []
        for k in at:  # each member's place in the grid, in the order given
            s, b, r = np.unravel_index(k, shape)
            z = fit.test_logits[s, b, r, : len(splits[r].test)]
            logits.append(z)
            scores.append(np.asarray(losses[b].link(z), np.float64) if losses[b].multiclass
                          else 0.5 * (1.0 + np.tanh(0.5 * z.astype(np.float64))))  # fmt: skip
        return Trained(
            test_scores=scores,
            test_logits=logits,
            best_val_loss=np.asarray(fit.best_val, np.float64).reshape(-1)[at],
            best_epoch=np.asarray(fit.best_epoch).reshape(-1)[at],
            l2=None if fit.l2 is None else np.asarray(fit.l2, np.float64).reshape(-1)[at],
            history=None,
            feed="table",
            solver="exact" if fit.hessians is not None else "adam",
            epochs_run=int(fit.epochs_run),
        )
    config = TrainConfig() if config is None else config
    states, history = train_ensemble(
        model, members, data, config, checkpoint_dir=checkpoint_dir,
        init_variables=init_variables, progress=bool(progress), devices=devices,
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
