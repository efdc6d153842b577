"""`iml sweep`: a fine grid of losses (class weights by default), many small models at once.

For every loss of a grid (:func:`iml.loss_grid`: betas of eq. ``b-loss-bin`` by default, focal
alphas, weight matrices ``B`` of eq. ``b-loss-multi``), every seed and every rotation of the
nested cross-validation (7-2-1, the paper's appendix "Technical Details"), a small model
(:mod:`iml.models.small`) is trained, all as one vectorized program (:func:`iml.training.train`
with :data:`~iml.training.TABULAR_DEFAULTS`, or the exact solver for logistic members). Each
loss's ensemble and its loss-corrected scores ``(c^L)^{-1}`` (Proposition 4; Cor. 1 for a beta)
are scored by :func:`~iml.calibration.table_by_loss`. The members are planned as every run's
are (:func:`iml.pipeline.plan.make_plan`, one batch per group of losses) and trained and stored
by the one loop of every run (:func:`iml.pipeline.train_plan.train_plan`), so a killed sweep
resumes where it stopped.

Entry points: :func:`run_sweep` (arrays, e.g. from :func:`iml.data.encoding.encode_table`); and,
for a checked config (:func:`iml.pipeline.run_config.check_config`), :func:`prepare_sweep`,
whose plan :func:`sweep_experiment` makes the experiment that :func:`iml.pipeline.train_plan.run`
trains and :func:`iml.pipeline.report.report_run` reports.
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from iml import _validation as V
from iml.data.folds import FoldSplit
from iml.grids import (
    LossGrid,
    RuleNotInvertibleError,
    check_rules_invertible,
    config_grid,
    loss_grid,
)
from iml.models.registry import build_model
from iml.pipeline import distributed
from iml.pipeline.defaults import ADAM_CHUNK, ADAM_SEEDS, EXACT_SEEDS
from iml.pipeline.plan import Plan, make_plan
from iml.pipeline.run_config import CheckedConfig, load_table
from iml.pipeline.scores import ECE_BOOTSTRAP, SweepResult, score_sweep
from iml.pipeline.store import ENSEMBLE_AVERAGES, RunStore
from iml.pipeline.train_plan import Experiment, run
from iml.spec import LossLike
from iml.training.ensemble_data import DataSource
from iml.training.host import host_memory_record
from iml.training.tabular import (
    TABULAR_DEFAULTS,
    check_labels,
    check_table_config,
    table_solver,
)
from iml.training.train_config import TrainConfig

if TYPE_CHECKING:
    from iml.data import Dataset

__all__ = [
    "METHODS",
    "SweepPlan",
    "plan_sweep",
    "prepare_sweep",
    "run_sweep",
    "sweep_experiment",
    "sweep_result",
]

METHODS = ("raw", "loss_corrected")


def data_fingerprint(features: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> str:
    """sha256 of the features, labels and groups: a resumed run must see the same data."""
    h = hashlib.sha256()
    for a in (features, labels, groups):
        a = np.ascontiguousarray(a)
        h.update(str((a.shape, a.dtype.str)).encode())
        h.update(a.tobytes() if a.dtype.kind != "O" else repr(a.tolist()).encode())
    return h.hexdigest()


class SweepPlan(NamedTuple):
    """A checked sweep, ready to train (:func:`plan_sweep`)."""

    features: np.ndarray
    labels: np.ndarray
    losses: LossGrid
    seeds: np.ndarray
    model: Any  # the Flax module of every member
    config: TrainConfig
    fold_ids: np.ndarray
    splits: list[FoldSplit]
    batches: list[np.ndarray]  # each batch's indices into the grid of losses
    n_bins: int
    run_config: dict[str, Any]
    average: str = "score"  # how the seeds of a loss pool (ENSEMBLE_AVERAGES)
    n_bootstrap: int = 200  # replicates of each ECE's interval in the table
    report_seed: int = 0  # seed of those replicates
    plan: Plan | None = None  # the members, batched by group of losses (make_plan)


#: The layout of a sweep's stored members (:func:`iml.pipeline.store.member_entry`, the layout of
#: every run), recorded in its ``store`` section.
STORE_LAYOUT = "batches"
#: The sections of a sweep's record (its manifest's ``config``): ``data`` (the source the
#: command read, ``n_folds``, ``fold_seed`` and ``sha256``, the digest of the features, labels
#: and groups), ``model``, ``loss`` (a registered loss's config, or a callable's description),
#: ``train`` (the :class:`~iml.training.TrainConfig` fields), ``plan`` (the seeds and
#: ``losses_per_batch``), ``eval`` and ``store``; a caller's other facts stay at the top level
#: under other names.
SECTIONS = ("data", "model", "loss", "train", "plan", "eval", "store")


def _recorded_training(config: TrainConfig) -> dict[str, Any]:
    fields = dataclasses.asdict(config)
    if fields["l2"] != "auto":
        del fields["l2_grid"], fields["l2_choice"]  # read only to choose the ridge
    return fields


def _recorded_source(source: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The data source that opens a sweep record's ``data`` section, checked with the other
    facts a caller records (:data:`SECTIONS`)."""
    if not isinstance(source, Mapping):
        raise ValueError(
            f"run_info['data'] must be a mapping (the data source), got {type(source).__name__}"
        )
    taken = [key for key in ("n_folds", "fold_seed", "sha256") if key in source]
    taken += [key for key in SECTIONS if key in extra]
    if taken:
        raise ValueError(
            f"run_info: {taken[0]!r} is a key the sweep records itself; name the fact otherwise"
        )
    return dict(source)


def _member_seeds(seeds: int | Sequence[int] | None, exact: bool) -> np.ndarray:
    """The seeds a sweep trains: the given ones, or (None, ()) the solver's default. A fit that
    is exact does not depend on a seed: it is made once, and several seeds asked of it are
    named in a warning."""
    if seeds is None or (isinstance(seeds, tuple | list) and len(seeds) == 0):
        return np.asarray(EXACT_SEEDS if exact else ADAM_SEEDS, np.int64)
    s = np.asarray(V.check_seeds("seeds", seeds), np.int64)
    if exact and len(s) > 1:
        warnings.warn(
            f"{len(s)} seeds asked of a sweep fitted exactly, whose members' optimum does not "
            f"depend on the seed: fitted once, with seed {int(s[0])} (drop --seeds, or train by "
            "--config.train.solver=adam for members that differ by seed)",
            UserWarning,
            stacklevel=3,
        )
        s = s[:1]
    return s


def plan_sweep(
    features: ArrayLike,
    labels: ArrayLike,
    groups: ArrayLike | None,
    losses: LossLike,
    *,
    seeds: int | Sequence[int] | None = None,
    model: str = "logistic",
    hidden: int = 32,
    train: TrainConfig = TABULAR_DEFAULTS,
    n_folds: int = 10,
    fold_seed: int = 0,
    losses_per_batch: int = 0,
    n_bins: int = 10,
    average: str = "score",
    n_bootstrap: int = ECE_BOOTSTRAP,
    report_seed: int = 0,
    run_info: dict[str, Any] | None = None,
) -> SweepPlan:
    """Check a sweep's data and settings and lay out its work, training nothing.

    The plan's ``run_config`` is what a results store records, in the sections of every run's
    config (:data:`SECTIONS`), so that
    ``RunStore(out).check_resumable(plan.run_config, "table")`` tells before any work whether
    ``out`` can hold (or resume) this sweep.

    Args:
      features, labels, groups, losses: as :func:`run_sweep`'s.
      seeds: number of seeds (``0..seeds-1``) or the seeds themselves; by default one
        (:data:`EXACT_SEEDS`) where the fit is exact, whose optimum no seed changes (several
        are fitted once, with a warning), and :data:`ADAM_SEEDS` where Adam trains.
      model: ``"logistic"`` or ``"mlp"`` (one ReLU hidden layer of ``hidden`` units).
      hidden: the MLP's hidden units.
      train: the trainer's configuration, :data:`~iml.training.TABULAR_DEFAULTS` or a
        variant of it (``dataclasses.replace(TABULAR_DEFAULTS, l2=1e-4)``). Its default solver
        fits the logistic model exactly under the beta-weighted and B-weighted log losses and
        the class-weighted softmax cross-entropy; other losses and models train by Adam.
      n_folds: folds of the nested cross-validation.
      fold_seed: seed of the fold assignment.
      losses_per_batch: losses trained together (with all seeds and rotations) per batch; a
        batch is the unit of memory and of resumption (0: the whole grid where the fit is
        exact, :data:`ADAM_CHUNK` where Adam trains).
      n_bins: bins of the calibration errors.
      average: how the seeds of a loss pool into its ensemble score
        (:data:`iml.pipeline.store.ENSEMBLE_AVERAGES`): ``"score"``, their mean score (the
        paper's ensemble), or ``"logit"``, the score of their mean logit.
      n_bootstrap: replicates of each ECE's 95% interval in the table (0: none).
      report_seed: seed of those replicates.
      run_info: extra JSON-able facts recorded in the store's config: its ``"data"``, the data
        source (a mapping), opens the record's ``data`` section, and its other keys, which may
        not name a section, are recorded at the top level (:data:`SECTIONS`).

    Raises:
      ValueError: for bad arrays or settings, naming the argument; for a loss whose optimal
        scoring rule is not invertible at its weights (:func:`iml.grids.check_rules_invertible`).
    """
    x = np.asarray(features, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"features must be a non-empty [N, d] array, got shape {x.shape}")
    V.check_finite("features", x)
    grid = loss_grid(losses)
    spec = grid.spec
    y = check_labels(labels, x.shape[0], spec)
    check_rules_invertible(grid)
    g = np.arange(x.shape[0]) if groups is None else np.asarray(groups)
    V.check_shape("groups", g, (x.shape[0],))
    if seeds is not None and not (isinstance(seeds, tuple | list) and len(seeds) == 0):
        V.check_seeds("seeds", seeds)
    module = build_model(model, spec.n_classes if spec.multiclass else 1, "rows", hidden=hidden)
    train = check_table_config(train, "train")
    try:
        config = dataclasses.replace(train, solver=table_solver(module, spec.record, train.solver))
    except ValueError as err:
        raise ValueError(f"train.solver 'exact': {err}") from None
    if config.l2_scale == "per_weight" and spec.record.row_weight is None:
        raise ValueError(
            "train.l2_scale 'per_weight' measures the ridge against a loss's class weights; the "
            f"{spec.describe()} has none known (use 'paper')"
        )
    V.check_count("losses_per_batch", losses_per_batch, 0)
    V.check_choice("average", average, ENSEMBLE_AVERAGES)
    V.check_count("n_bootstrap", n_bootstrap, 0)
    V.check_count("report_seed", report_seed, 0)
    s = _member_seeds(seeds, config.solver == "exact")
    (m,) = spec.batch_shape
    if losses_per_batch == 0:
        losses_per_batch = m if config.solver == "exact" else ADAM_CHUNK
    members = make_plan(x.shape[0], losses=grid.keys, seeds=tuple(s.tolist()), labels=y,
                        groups=g, n_folds=n_folds, fold_seed=fold_seed,
                        losses_per_batch=losses_per_batch)  # fmt: skip
    fold_ids, splits = members.fold_ids, list(members.splits)
    batches = [np.unique([mb.loss for mb in batch.members]) for batch in members.batches]
    extra = dict(run_info or {})
    source = _recorded_source(extra.pop("data", {}), extra)
    # a callable cannot be written down: its name stands for it
    recorded = spec.describe() if spec.fn is not None else grid.to_config()
    run_config = {
        "data": {**source, "n_folds": n_folds, "fold_seed": fold_seed,
                 "sha256": data_fingerprint(x, y, g)},
        "model": {"name": model, "hidden": hidden},
        "loss": recorded,
        "train": _recorded_training(config),
        "plan": {"seeds": s.tolist(), "losses_per_batch": losses_per_batch},
        "eval": {"n_bins": n_bins, "average": average, "n_bootstrap": n_bootstrap,
                 "report_seed": report_seed},
        "store": STORE_LAYOUT,
        **extra,
    }  # fmt: skip
    return SweepPlan(x, y, grid, s, module, config, fold_ids, splits, batches, n_bins, run_config,
                     average, n_bootstrap, report_seed, members)  # fmt: skip


def run_sweep(
    features: ArrayLike,
    labels: ArrayLike,
    groups: ArrayLike | None,
    losses: LossLike,
    *,
    store: RunStore | None = None,
    progress: bool = True,
    **settings: Any,
) -> SweepResult:
    """Train a grid of losses (by default of class weights beta) of small models by nested
    cross-validation and score their calibration.

    Folds are :func:`iml.data.assign_folds` (grouped by ``groups``, stratified by label) and the
    rotations the paper's 7-2-1 (with 10 folds; otherwise 2 validation folds, 1 test fold and
    the rest for training). For every loss, seed and rotation one member is trained
    (:func:`iml.training.train`); every observation gets one out-of-fold score per (loss, seed),
    averaged over seeds into the ensemble score (or, with ``average="logit"``, the score of the
    seeds' mean logit), whose raw and loss-corrected versions are scored by
    :func:`iml.calibration.table_by_loss`.

    Any loss :func:`iml.loss_spec` reads makes a grid (:func:`loss_grid`)::

        run_sweep(x, y, None, beta_grid(64))                               # beta-weighted log loss
        run_sweep(x, y, None, loss_spec("focal", gamma=2.0, alpha=alphas))  # focal, alpha grid
        run_sweep(x, classes, None, np.stack([ones, upweighted]))          # B matrices [m, n, n]

    Multiclass losses take class indices as labels and train ``n`` outputs per member.

    A pandas DataFrame is encoded first (one-hot categories, z-scored numbers, missing values
    imputed and flagged: :func:`iml.data.encoding.encode_table`)::

        table = encode_table(frame, "y", positive="yes")
        result = run_sweep(table.features, table.labels, None, beta_grid(16), seeds=4)

    Args:
      features: ``[N, d]`` finite inputs (standardised columns train best).
      labels: ``[N]`` labels in ``{0, 1}``, or class indices for multiclass losses.
      groups: ``[N]`` group ids kept within one fold (e.g. patients), or None.
      losses: ``[m]`` class weights in ``(0, 1)``, no repeats, or any grid of losses
        (:func:`loss_grid`).
      store: a :class:`RunStore`: finished batches and the table are stored there, and batches
        already stored (by a run with the same configuration and data) are not trained again.
      progress: show tqdm bars (batches, and epochs within a batch).
      **settings: the keywords of :func:`plan_sweep` (``seeds``, ``model``, ``hidden``,
        ``train``, ``n_folds``, ``fold_seed``, ``losses_per_batch``, ``n_bins``, ``average``,
        ``n_bootstrap``, ``report_seed``, ``run_info``), at its defaults where not given.

    Returns:
      A :class:`SweepResult`.

    Raises:
      ValueError: for bad arrays or settings (naming the argument), or a store holding a run
        with another configuration or of an earlier schema.
    """
    plan = plan_sweep(features, labels, groups, losses, **settings)
    trained = run(sweep_experiment(plan), store, progress=progress)
    if store is None:
        entries = [b.entry for b in trained]
    else:
        entries = [store.load_arrays(b.key) for b in plan.plan.batches]
    result = sweep_result(plan, entries)
    if store is not None and distributed.processes().main:
        store.save_json("table", result.table)
    return result._replace(batches_trained=[b.batch.index for b in trained])


def sweep_experiment(plan: SweepPlan) -> Experiment:
    """The experiment of a checked sweep (:func:`plan_sweep`): its rows held whole on the device,
    each member's loss its position in the grid; its manifest records the host memory settings
    in force (:func:`iml.training.host.host_memory_record`)."""
    spec = plan.losses.spec

    def losses(batch: Any) -> list:
        return [spec[m.loss] for m in batch.members]

    return Experiment(
        kind="table", record=plan.run_config, plan=plan.plan, losses=losses, model=plan.model,
        source=DataSource.from_arrays(plan.features, plan.labels), train=plan.config,
        options={}, extra={"host_memory": host_memory_record()},
    )  # fmt: skip


def sweep_result(plan: SweepPlan, entries: list) -> SweepResult:
    """The scores and table of the sweep ``plan`` from its member batches (``entries``,
    :func:`iml.pipeline.scores.score_sweep`)."""
    return score_sweep(plan.losses, plan.seeds, plan.labels, plan.fold_ids, entries,
                       n_bins=plan.n_bins, average=plan.average, n_bootstrap=plan.n_bootstrap,
                       report_seed=plan.report_seed,
                       rotations=[split.rotation for split in plan.splits])  # fmt: skip


def prepare_sweep(checked: CheckedConfig) -> tuple[SweepPlan, Dataset]:
    """Read the data of a checked table run (:func:`iml.pipeline.run_config.check_config`) and
    lay out its work, training nothing: the data is read and encoded, so that a missing CSV
    column, an unknown ``config.data.positive`` value or an undetectable delimiter is reported
    here.

    Returns:
      The plan, and the dataset it was made from.

    Raises:
      ValueError: for a config of a run on images, or bad data, naming the key
        (``config.data.target``, ...) or its name as the config's messages name it, the column
        and the values found.
      FileNotFoundError: for a missing file or folder, naming the key.
    """
    if checked.kind != "table":
        raise ValueError(
            f"{checked.name('model.name')}: {checked.config.model.name!r} takes images; a run "
            "on a table needs a model that takes rows"
        )
    c, name = checked.config, checked.name
    dataset = load_table(checked)
    multiclass = c.data.classes == "all"
    labels = dataset.classes if multiclass else dataset.labels
    losses = config_grid(c.loss, len(dataset.class_names) if multiclass else 2, name)
    train = checked.train
    try:
        plan = plan_sweep(
            dataset.feature_matrix(),
            labels,
            dataset.groups,
            losses,
            seeds=c.plan.seeds,
            model=c.model.name,
            hidden=c.model.hidden,
            train=train,
            n_folds=c.data.n_folds,
            fold_seed=c.data.fold_seed,
            losses_per_batch=c.plan.losses_per_batch,
            n_bins=c.eval.n_bins,
            average=c.eval.average,
            n_bootstrap=c.eval.n_bootstrap,
            report_seed=c.eval.report_seed,
            run_info={"data": checked.source},
        )
    except RuleNotInvertibleError as err:
        raise ValueError(f"{name('loss.name')}: {err}") from None
    except ValueError as err:
        raise ValueError(f"{name('data.csv' if c.data.csv else 'data.name')}: {err}") from None
    return plan, dataset
