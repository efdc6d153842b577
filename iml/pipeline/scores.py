"""A run's scores and its table, whatever trained it: the ensemble of every loss of its grid
(each loss's members pooled by score or by logit, :func:`iml.pipeline.store.aggregate_members`),
their loss-corrected scores (Proposition 4; Corollary 1 for a beta) and the one table of every
run (:func:`run_table`).

:func:`stored_scores` reads a stored run of either kind (:data:`iml.pipeline.store.KINDS`): the
grid its record names, the labels and folds, and its member batches pooled. :func:`score_sweep`
scores member batches held in memory, as :func:`iml.pipeline.sweep.run_sweep` returns them. Both
pool members the same way: by their logits where the members kept them (the table's feed), else
by their stored scores (the host's feed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from iml.calibration import (
    loss_calibration_verdicts,
    loss_corrected_scores,
    scores_from_logits,
    table_by_loss,
)
from iml.grids import (
    CLASS_WEIGHTS,
    LossFamily,
    LossGrid,
    config_grid,
    loss_family,
    loss_grid,
    weight_row,
)
from iml.losses import lookup, registered
from iml.pipeline.store import (
    aggregate_members,
    check_stored_run,
    member_test_scores,
)
from iml.recalibration import BASELINES, LossCorrection, cross_fit
from iml.spec import LossSpec

__all__ = [
    "ECE_BOOTSTRAP",
    "RIDGE",
    "RunScores",
    "SweepResult",
    "grid_family",
    "pool_entries",
    "row_link",
    "run_table",
    "score_sweep",
    "scored_table",
    "stored_grid",
    "stored_scores",
]

#: The entry of a table's row that holds its members' ridge coefficients (``[S][R]``), for runs
#: whose members have one.
RIDGE = "l2"
#: Replicates of each ECE's 95% interval in a table by default (``config.eval.n_bootstrap``;
#: :func:`iml.calibration.ece_intervals`).
ECE_BOOTSTRAP = 200
#: Scores are clipped to ``[_CLIP, 1 - _CLIP]`` before the binary metrics: float32 sigmoids round
#: to exactly 0 or 1, where the log loss is infinite.
_CLIP = 1e-7


def grid_family(grid: LossGrid) -> LossFamily | None:
    """The binary loss of ``grid`` as a function of its class weight, where one loss with fixed
    other parameters spans the grid by its class weight (:data:`iml.grids.CLASS_WEIGHTS`); None
    for a multiclass grid, a callable loss or a grid whose other parameters vary."""
    spec = grid.spec
    if spec.multiclass or grid.weights is None or spec.name not in CLASS_WEIGHTS:
        return None
    weight = CLASS_WEIGHTS[spec.name]
    params = {}
    for key, value in spec.to_config().items():
        if key in ("name", weight):
            continue
        values = np.unique(np.asarray(value, np.float64))
        if values.size != 1:
            return None
        params[key] = float(values[0])
    return loss_family(spec.name, **params)


def run_table(
    grid: LossGrid,
    scores: np.ndarray,
    sizes: np.ndarray,
    labels: np.ndarray,
    fold_ids: np.ndarray,
    *,
    n_bins: int = 10,
    n_bootstrap: int = ECE_BOOTSTRAP,
    seed: int = 0,
    family: LossFamily | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """The table of a run: ``table[key][method][metric]`` (:func:`iml.calibration.table_by_loss`),
    for every loss of ``grid`` (keys :attr:`iml.grids.LossGrid.keys`).

    For a binary grid spanned by one loss's class weight (``family``, :func:`grid_family`), each
    loss's row holds its observations with at least one member: ``raw`` (the ensemble's scores,
    clipped to ``[1e-7, 1 - 1e-7]``, with the loss-calibration test of Definition 2 for its
    weight), ``loss_corrected`` (``(c^w)^{-1}(a)``, Corollary 1 for a beta; nothing is fitted)
    and the recalibration baselines of :data:`iml.recalibration.BASELINES`, each fitted by
    cross-fitting over the outer folds (an observation of fold ``f`` is recalibrated by a map
    fitted on the other folds; ``prior_shift``, eq. ``correct-prior``, for the beta-weighted log
    loss only). Verdicts are adjusted over the grid's tests
    (:func:`iml.calibration.loss_calibration_verdicts`).

    Any other grid (multiclass losses, a callable loss) is scored on the observations every
    loss's ensemble scored: raw and loss-corrected (Proposition 4) scores, no baselines.

    Every ECE's 95% interval resamples the same rows for every loss and method
    (``n_bootstrap`` replicates; fewer than 2: none), from ``jax.random.key(seed + 1)``.

    Args:
      grid: the run's ``m`` losses.
      scores: ``[m, N]`` ensemble scores, or ``[m, N, n]`` class scores (NaN where unscored).
      sizes: ``[m, N]`` members behind each score (0: unscored).
      labels, fold_ids: ``[N]`` labels (class indices for multiclass losses) and outer folds.

    Raises:
      ValueError: for a loss with no scored observation, or a grid with no observation that
        every loss scored.
    """
    spec = grid.spec
    labels = np.asarray(labels)
    replicates = n_bootstrap if n_bootstrap >= 2 else 0
    key = jax.random.key(seed + 1)
    if family is None or spec.multiclass:
        scored = np.asarray(sizes) > 0
        every = scored.all(axis=0)
        if not every.any():
            raise ValueError("no observation is scored by the ensemble of every loss")
        a = scores[:, every]
        if not spec.multiclass:
            a = np.clip(a, _CLIP, 1 - _CLIP)
        return table_by_loss(grid, a, labels[every], n_bins, loss_corrected_scores(spec, a),
                             ece_bootstrap=replicates, key=key)  # fmt: skip
    labels = labels.astype(np.int32)
    scored = np.asarray(sizes) > 0
    if not scored.any(axis=1).all():
        row = int(np.argmin(scored.any(axis=1)))
        raise ValueError(f"no observation has a test score for {grid.keys[row]}")
    weights = np.asarray(grid.weights, np.float64)
    by_row: dict[int, dict[str, dict[str, Any]]] = {}
    # The rows that scored the same observations (usually all) are scored together.
    masks, group = np.unique(scored, axis=0, return_inverse=True)
    for g, have in enumerate(masks):
        rows = np.flatnonzero(group.reshape(-1) == g)
        s = np.clip(scores[rows][:, have], _CLIP, 1 - _CLIP)
        y, folds = labels[have], np.asarray(fold_ids)[have]
        corrected = np.stack([
            np.asarray(LossCorrection(family(float(weights[row]))).transform(a.astype(np.float32)))
            for row, a in zip(rows, s, strict=True)
        ])  # fmt: skip
        part = table_by_loss(
            family(weights[rows]), s, y, n_bins, corrected,
            others=_baselines(family, weights[rows], s, y, folds),
            ece_bootstrap=replicates, key=key, test_family=len(grid.keys),
        )  # fmt: skip
        for row, methods in zip(rows, part.values(), strict=True):
            if "ece_interval" in methods["raw"]:  # the raw scores' fields in their stored order
                methods["raw"]["ece_interval"] = methods["raw"].pop("ece_interval")
            by_row[int(row)] = methods
    table = {name: by_row[row] for row, name in enumerate(grid.keys)}
    loss_calibration_verdicts(table)
    return table


def _baselines(
    family: LossFamily, weights: np.ndarray, scores: np.ndarray, labels: np.ndarray,
    fold_ids: np.ndarray,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Each recalibration baseline of :data:`iml.recalibration.BASELINES` cross-fitted over the
    outer folds (:func:`iml.recalibration.cross_fit`): ``{method: [m, n]}`` for the ``m`` rows
    of ``scores`` (of the weights ``weights``) of the same ``n`` observations;
    ``prior_shift`` for a loss whose record says its class weight shifts the prior (the
    beta-weighted log loss). Each row's observations are put in
    score order once (a stable sort) for all its fits: the maps are the same in any order, and
    a fit that sorts its scores (isotonic) then finds them sorted."""
    shifts = family.fn is None and lookup(family.name).prior_shift
    methods = [m for m in BASELINES if m != "prior_shift" or shifts]
    out = {method: np.empty(scores.shape, np.float64) for method in methods}
    for row, (w, s) in enumerate(zip(weights, scores, strict=True)):
        order = np.argsort(s, kind="stable")
        for method in methods:
            fitted = cross_fit(BASELINES[method](float(w)), s[order], labels[order],
                               fold_ids[order])  # fmt: skip
            out[method][row, order] = fitted
    return out


class RunScores(NamedTuple):
    """A run's ensemble scores over its grid of ``m`` losses (:func:`stored_scores`).

    Attributes:
      grid: the losses.
      family: the binary loss by its class weight where one spans the grid (:func:`grid_family`).
      labels, fold_ids: ``[N]`` labels (class indices for multiclass losses) and outer folds.
      scores: ``[m, N(, n)]`` each loss's ensemble scores (NaN where no member scored).
      sizes: ``[m, N]`` the members behind each.
      seeds: ``[S]`` the members' seeds.
      member_scores: ``[m, S, N(, n)]`` each (loss, seed)'s out-of-fold scores, where the members
        kept their logits; else None.
      best_epoch, l2: ``[m, S, R]`` each member's early-stopping epoch and ridge, where the
        members record them; else None.
    """

    grid: LossGrid
    family: LossFamily | None
    labels: np.ndarray
    fold_ids: np.ndarray
    scores: np.ndarray
    sizes: np.ndarray
    seeds: np.ndarray
    member_scores: np.ndarray | None = None
    best_epoch: np.ndarray | None = None
    l2: np.ndarray | None = None

    @property
    def corrected(self) -> np.ndarray:
        """``[m, N(, n)]`` the loss-corrected ensemble scores (NaN where unscored)."""
        spec = self.grid.spec
        scored = self.sizes > 0
        fill = 0.5 if not spec.multiclass else 1.0 / spec.n_classes
        shape = scored.shape + (1,) * (self.scores.ndim - 2)
        filled = np.where(scored.reshape(shape), self.scores, fill)
        return np.where(scored.reshape(shape), loss_corrected_scores(spec, filled), np.nan)


def row_link(spec: LossSpec) -> Any:
    """``link(row, logits)``: the scores of loss ``row`` of the grid (float64)."""
    if not spec.multiclass:
        return lambda row, z: scores_from_logits(spec, z)
    return lambda row, z: scores_from_logits(spec[np.array([row])], np.asarray(z)[None])[0]


def pool_entries(
    grid: LossGrid,
    labels: np.ndarray,
    fold_ids: np.ndarray,
    entries: Sequence[Mapping[str, np.ndarray]],
    *,
    average: str,
    seeds: Sequence[int] | None = None,
    rotations: Sequence[int] | None = None,
) -> RunScores:
    """Every loss's ensemble from a run's member batches (``entries``,
    :func:`iml.pipeline.store.member_entry`), the one pooling of every run: members that kept
    their logits (the table's feed) pool by those logits, linked to scores by their loss's rule
    in float64; the others (the host's feed) by their stored scores. ``average``: ``"score"``
    (the mean score) or ``"logit"`` (the score of the mean logit). ``seeds``, ``rotations``:
    the plan's, in order (default: those of the entries)."""
    spec = grid.spec
    (m,), n = spec.batch_shape, len(labels)
    positions = [float(k) for k in range(m)]
    if not all("test_logits" in entry for entry in entries):  # the host's feed: stored scores
        weights = None if grid.weights is None else [float(w) for w in grid.weights]

        def members() -> Any:
            for entry in entries:
                for key, idx, values in member_test_scores(entry):
                    row = (
                        positions.index(key) if "loss_index" in entry else weight_row(weights, key)
                    )
                    yield float(row), idx, values

        ensemble = aggregate_members(members(), positions, n, average)
        found = sorted({int(s) for entry in entries for s in np.asarray(entry.get("seed", []))})
        return RunScores(
            grid,
            grid_family(grid),
            np.asarray(labels),
            np.asarray(fold_ids),
            ensemble.scores,
            ensemble.sizes,
            np.asarray(seeds or found, np.int64),
        )
    s = np.asarray(
        sorted({int(x) for e in entries for x in e["seed"]}) if seeds is None else seeds, np.int64
    )
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
            best_epoch[at] = entry["best_epoch"][k]
            if "l2" in entry:
                l2[at] = entry["l2"][k]
    member_scores = scores_from_logits(spec, logits)  # [m, S, N(, n)]
    tested = [(b, seed, np.flatnonzero(~np.isnan(logits[b, seed].reshape(n, -1)[:, 0])))
              for b in range(m) for seed in range(len(s))]  # fmt: skip
    if average == "logit":
        members = [(b, idx, logits[b, seed, idx]) for b, seed, idx in tested]
        ensemble = aggregate_members(members, range(m), n, "logit", row_link(spec))
    else:
        members = [(b, idx, member_scores[b, seed, idx]) for b, seed, idx in tested]
        ensemble = aggregate_members(members, range(m), n, "score")
    return RunScores(grid, grid_family(grid), np.asarray(labels), np.asarray(fold_ids),
                     ensemble.scores, ensemble.sizes, s, member_scores, best_epoch,
                     l2 if not np.isnan(l2).all() else None)  # fmt: skip


class SweepResult(NamedTuple):
    """Out-of-fold scores of a sweep over a grid of ``m`` losses and their table
    (:func:`iml.pipeline.sweep.run_sweep`).

    Attributes:
      betas: ``[m]`` class weights (beta, or a focal grid's alpha), or None for grids that one
        weight does not describe (weight matrices ``B``, ...).
      seeds: ``[S]`` seeds.
      labels: ``[N]`` labels (class indices for multiclass losses).
      fold_ids: ``[N]`` fold of every observation.
      member_scores: ``[m, S, N(, n)]`` each (loss, seed)'s out-of-fold score of every
        observation (from the rotation whose test fold holds it).
      scores: ``[m, N(, n)]`` each loss's ensemble of its seeds.
      corrected: ``[m, N(, n)]`` the loss-corrected ensemble scores ``(c^L)^{-1}(scores)``
        (Proposition 4; ``g^beta``, Corollary 1, for a beta).
      best_epoch: ``[m, S, R]`` each member's early-stopping epoch.
      table: ``table[key][method][metric]`` (:func:`run_table`).
      batches_trained: indices of the batches trained by this call (the others came from the store).
      losses: the grid (a :class:`iml.LossSpec` with batch shape ``(m,)``).
      keys: the table's key of each loss.
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


def scored_table(run: RunScores, n_bins: int, n_bootstrap: int, seed: int) -> dict[str, Any]:
    """:func:`run_table` of ``run``, with each row's members' ridges (:data:`RIDGE`) where they
    have one."""
    table = run_table(run.grid, run.scores, run.sizes, run.labels, run.fold_ids, n_bins=n_bins,
                      n_bootstrap=n_bootstrap, seed=seed, family=run.family)  # fmt: skip
    if run.l2 is not None:
        for key, chosen in zip(run.grid.keys, run.l2, strict=True):
            table[key][RIDGE] = chosen.tolist()
    return table


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
    """A sweep's ensembles, their loss-corrected scores and its table from its member batches
    (``entries``): :func:`pool_entries`, then :func:`run_table`."""
    run = pool_entries(grid, labels, fold_ids, entries, average=average, seeds=seeds,
                       rotations=rotations)  # fmt: skip
    table = scored_table(run, n_bins, n_bootstrap, report_seed)
    return SweepResult(
        betas=grid.weights, seeds=run.seeds, labels=run.labels, fold_ids=run.fold_ids,
        member_scores=run.member_scores, scores=run.scores,
        corrected=loss_corrected_scores(grid.spec, run.scores), best_epoch=run.best_epoch,
        table=table, batches_trained=[], losses=grid.spec, keys=grid.keys, l2=run.l2,
    )  # fmt: skip


def stored_grid(manifest: Mapping[str, Any], run: str | Path, n_classes: int = 0) -> LossGrid:
    """The grid of losses a stored run's manifest records: a run on images by its config's
    ``loss`` section (:func:`iml.grids.config_grid`, a multiclass grid over ``n_classes``
    classes), a run on a table by its record's loss (:meth:`iml.grids.LossGrid.to_config`).

    Raises:
      ValueError: for a run of a callable loss, which its record names but cannot rebuild, or of
        a loss not registered in this process (a plugin's, not loaded).
    """
    config = manifest["config"]
    loss = config.get("loss")
    if manifest["kind"] == "images":
        # imported here: the image runner loads the models and the data registry
        from iml.pipeline.run_config import as_config

        return config_grid(as_config(config).loss, n_classes or 2)
    if not isinstance(loss, Mapping):
        raise ValueError(
            f"{run} holds a run of the {loss}, which its record names but cannot rebuild: "
            "report it from the process that defined the loss (iml.pipeline.sweep.run_sweep)"
        )
    if loss.get("name") not in registered():
        raise ValueError(
            f"{run} holds a run of the loss {loss.get('name')!r}, which is not registered in "
            "this process: load the plugin that registers it first (`--import MODULE_OR_FILE`, "
            "iml.plugins.import_plugin)"
        )
    return loss_grid(dict(loss))


def stored_scores(
    run: str | Path, average: str, entries: Sequence[Mapping[str, np.ndarray]] | None = None
) -> RunScores:
    """A stored run's ensembles over its grid (:func:`stored_grid`, :func:`pool_entries`), its
    labels and folds, read from the one layout of every run (:mod:`iml.pipeline.store`);
    ``entries``: its member batches, where the caller has read them already.

    Raises:
      FileNotFoundError: for a folder without a manifest or stored folds.
      ValueError: as :func:`stored_grid`, or for a run without a finished member batch.
    """
    store = check_stored_run(run)
    manifest = store.manifest()
    folds = store.load_arrays("data/folds")
    if entries is None:
        entries = [store.load_arrays(key) for key in store.keys("batches")]
    n_classes = 0
    if entries and np.asarray(entries[0]["test_scores"]).ndim == 2:
        n_classes = np.asarray(entries[0]["test_scores"]).shape[-1]
    grid = stored_grid(manifest, run, n_classes)
    seeds = manifest["config"].get("plan", {}).get("seeds") or None
    return pool_entries(grid, folds["labels"], folds["fold_ids"], entries, average=average,
                        seeds=seeds)  # fmt: skip
