"""A sweep's scores and table from its stored member batches: the ensemble of every loss of its
grid (each loss's seeds pooled by score or by logit, as every run pools its members,
:func:`iml.pipeline.store.aggregate_members`), their loss-corrected scores (Proposition 4;
Corollary 1 for a beta) and the table of the grid (:func:`iml.calibration.table_by_loss`).

:func:`score_sweep` scores a sweep just trained (:func:`iml.pipeline.sweep.execute_sweep`), and
:func:`rescore_sweep` a stored sweep reported again, e.g. with other bins, by ``iml figures``:
both read the same entries the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from iml.calibration import loss_corrected_scores, scores_from_logits, table_by_loss
from iml.grids import LossGrid, loss_grid
from iml.pipeline.defaults import check_eval_settings
from iml.pipeline.store import (
    RunStore,
    aggregate_members,
    check_stored_run,
    member_test_scores,
)
from iml.spec import LossSpec, loss_spec

__all__ = [
    "ECE_BOOTSTRAP",
    "RIDGE",
    "SweepResult",
    "rescore_sweep",
    "score_sweep",
    "stored_sweep_grid",
    "stored_sweep_settings",
]

#: The entry of a sweep table's row that holds its members' ridge coefficients (``[S][R]``).
RIDGE = "l2"
#: Replicates of each ECE's 95% interval in a sweep's table by default (``config.eval.n_bootstrap``;
#: :func:`iml.calibration.ece_intervals`).
ECE_BOOTSTRAP = 200


class SweepResult(NamedTuple):
    """Out-of-fold scores of a sweep over a grid of ``m`` losses and their metrics.

    Attributes:
      betas: ``[m]`` class weights (:func:`grid_weights`: beta, or a focal grid's alpha), or
        None for grids that one weight does not describe (weight matrices ``B``, ...).
      seeds: ``[S]`` seeds.
      labels: ``[N]`` labels (class indices for multiclass losses).
      fold_ids: ``[N]`` fold of every observation.
      member_scores: ``[m, S, N(, n)]`` each (loss, seed)'s out-of-fold score of every
        observation (from the rotation whose test fold holds it).
      scores: ``[m, N(, n)]`` the ensemble: the mean over seeds of ``member_scores``.
      corrected: ``[m, N(, n)]`` the loss-corrected ensemble scores ``(c^L)^{-1}(scores)``
        (Proposition 4; ``g^beta``, Corollary 1, for a beta).
      best_epoch: ``[m, S, R]`` each member's early-stopping epoch.
      table: ``table[key][method][metric]`` (see :func:`iml.calibration.table_by_loss`).
      batches_trained: indices of the batches trained by this call (the others came from the store).
      losses: the grid (a :class:`iml.LossSpec` with batch shape ``(m,)``).
      keys: the table's key of each loss (:func:`grid_keys`).
      l2: ``[m, S, R]`` each member's ridge coefficient (in ``train.l2``'s units): chosen on its
        validation folds where ``l2 = "auto"``, else the number. The table holds it too, as
        ``table[key]["l2"]`` (``[S][R]``).
    """

    betas: np.ndarray
    seeds: np.ndarray
    labels: np.ndarray
    fold_ids: np.ndarray
    member_scores: np.ndarray
    scores: np.ndarray
    corrected: np.ndarray
    best_epoch: np.ndarray
    table: dict[str, dict[str, dict[str, float]]]
    batches_trained: list[int]
    losses: LossSpec | None = None
    keys: list[str] | None = None
    l2: np.ndarray | None = None


def _row_link(spec: LossSpec) -> Any:
    """``link(row, logits)``: the scores of loss ``row`` of the grid (float64)."""
    if not spec.multiclass:
        return lambda row, z: scores_from_logits(spec, z)
    return lambda row, z: scores_from_logits(spec[np.array([row])], np.asarray(z)[None])[0]


def score_sweep(
    grid: LossGrid,
    seeds: Sequence[int],
    labels: np.ndarray,
    fold_ids: np.ndarray,
    entries: Sequence[Mapping[str, np.ndarray]],
    *,
    n_bins: int,
    average: str,
    n_bootstrap: int,
    report_seed: int,
    rotations: Sequence[int] | None = None,
) -> SweepResult:
    """A sweep's ensembles, their loss-corrected scores and its table, from its stored member
    batches (``entries``, :func:`iml.pipeline.store.member_entry`): the one scoring of a sweep
    just trained and of one reported again (:func:`rescore_sweep`). ``rotations``: the plan's,
    in order (default: those of the entries)."""
    spec = grid.spec
    y = np.asarray(labels)
    # Each member's logits, early-stopping epoch and ridge (chosen on the validation folds, or
    # the number), by loss, seed and rotation; its scores by one vectorised link.
    (m,), n = spec.batch_shape, y.shape[0]
    s = np.asarray(seeds, np.int64)
    seed_at = {int(seed): i for i, seed in enumerate(s)}
    if rotations is None:
        rotations = sorted({int(r) for entry in entries for r in entry["rotation"]})
    rotation_at = {rotation: r for r, rotation in enumerate(rotations)}
    classes = (spec.n_classes,) if spec.multiclass else ()
    logits = np.full((m, len(s), n, *classes), np.nan, np.float32)
    best_epoch = np.zeros((m, len(s), len(rotations)), np.int64)
    l2 = np.full((m, len(s), len(rotations)), np.nan)
    for entry in entries:
        where = zip(entry["loss_index"], entry["seed"], entry["rotation"], strict=True)
        stored = member_test_scores(entry, logits=True)
        for k, ((b, seed, rotation), (_, idx, z)) in enumerate(zip(where, stored, strict=True)):
            at = (int(b), seed_at[int(seed)], rotation_at[int(rotation)])
            logits[at[0], at[1], idx] = z
            best_epoch[at], l2[at] = entry["best_epoch"][k], entry["l2"][k]
    member_scores = scores_from_logits(spec, logits)  # [m, S, N(, n)]
    # The one aggregation of every run's members: each loss's ensemble pools its seeds' scores,
    # or their logits (each loss's link of their mean).
    tested = [(b, seed, np.flatnonzero(~np.isnan(logits[b, seed].reshape(n, -1)[:, 0])))
              for b in range(m) for seed in range(len(s))]  # fmt: skip
    if average == "logit":
        members = [(b, idx, logits[b, seed, idx]) for b, seed, idx in tested]
        ensemble = aggregate_members(members, range(m), n, "logit", _row_link(spec))
    else:
        members = [(b, idx, member_scores[b, seed, idx]) for b, seed, idx in tested]
        ensemble = aggregate_members(members, range(m), n, "score")
    scores = ensemble.scores
    corrected = loss_corrected_scores(spec, scores)
    table = table_by_loss(
        grid, scores, y, n_bins=n_bins, corrected=corrected,
        ece_bootstrap=n_bootstrap, key=jax.random.key(report_seed),
    )  # fmt: skip
    for key, chosen in zip(grid.keys, l2, strict=True):
        table[key][RIDGE] = chosen.tolist()
    return SweepResult(
        betas=grid.weights,
        seeds=s,
        labels=y,
        fold_ids=np.asarray(fold_ids),
        member_scores=member_scores,
        scores=scores,
        corrected=corrected,
        best_epoch=best_epoch,
        table=table,
        batches_trained=[],
        losses=spec,
        keys=grid.keys,
        l2=l2,
    )


def stored_sweep_grid(config: Mapping[str, Any], run: str | Path) -> LossGrid:
    """The grid of losses a stored sweep's manifest ``config`` records (its betas, or its loss's
    config).

    Raises:
      ValueError: for a sweep of a callable loss, which its record names but cannot rebuild.
    """
    loss = config.get("loss")
    if isinstance(loss, Mapping) and loss.get("name") == "log" and "betas" in loss:
        return loss_grid(np.asarray(loss["betas"], np.float64))  # the beta-weighted log loss
    if not isinstance(loss, Mapping):
        raise ValueError(
            f"{run} holds a sweep of the {loss}, which its record names but cannot rebuild: "
            "report it from the process that defined the loss (iml.pipeline.sweep.run_sweep)"
        )
    return loss_grid(loss_spec(dict(loss)))


def stored_sweep_settings(
    run: str | Path, eval_settings: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The report settings (``n_bins``, ``average``, ``n_bootstrap``, ``report_seed``) that a
    stored, finished sweep is scored again with: its own, or those of ``eval_settings``; checked
    before any work. ``eval_settings`` may also hold ``figures``, the formats the report draws
    in (:func:`iml.pipeline.report.report_sweep_run`), checked here and not returned.

    Raises:
      FileNotFoundError, ValueError: for a folder without a finished sweep (or recorded at an
        earlier schema), or a setting that a sweep's report does not have or a bad value,
        naming its ``config.eval`` key.
    """
    store = check_stored_run(run)
    manifest = store.manifest()
    config = manifest["config"]
    if manifest["kind"] != "table":
        raise ValueError(f"{run} holds an `iml reproduce` run, not an `iml sweep` run")
    if not store.has("table"):  # the sweep's last step
        raise ValueError(
            f"{run} holds an `iml sweep` run that has not finished (no table.json yet): "
            "run the same `iml sweep` again to finish it"
        )
    recorded = config["eval"]
    given = dict(eval_settings or {})
    # the figures' formats: a setting of the drawing alone, which the sweep does not record
    figures = given.pop("figures", ())
    unknown = sorted(set(given) - set(recorded))
    if unknown:
        raise ValueError(
            f"config.eval.{unknown[0]} is not a setting of a sweep's report "
            f"({', '.join(f'config.eval.{k}' for k in [*recorded, 'figures'])})"
        )
    settings = {**recorded, **given}
    check_eval_settings({**settings, "figures": figures}, min_bootstrap=0)
    stored_sweep_grid(config, run)  # a loss it can rebuild
    return settings


def rescore_sweep(run: str | Path, eval_settings: Mapping[str, Any] | None = None) -> SweepResult:
    """A stored, finished sweep scored again from its member batches, training nothing, with
    the report settings of :func:`stored_sweep_settings`.

    Raises:
      FileNotFoundError, ValueError: as :func:`stored_sweep_settings`.
    """
    settings = stored_sweep_settings(run, eval_settings)
    store = RunStore(run)
    config = store.manifest()["config"]
    folds = store.load_arrays("data/folds")
    entries = [store.load_arrays(key) for key in store.keys("batches")]
    seeds = config["train"]["seeds"]
    return score_sweep(stored_sweep_grid(config, run), seeds, folds["labels"], folds["fold_ids"],
                       entries, **settings)  # fmt: skip
