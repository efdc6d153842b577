"""`iml sweep`: a fine grid of losses (class weights by default), many small models at once.

For every loss of a grid (:func:`iml.loss_grid`: betas of the beta-weighted cross-entropy, eq.
``b-loss-bin``, by default; focal alphas; weight matrices ``B`` of eq. ``b-loss-multi`` or class
weights of the softmax cross-entropy for multiclass targets), every seed and every rotation of the
nested cross-validation (:mod:`iml.data.folds`: 10 folds, 7-2-1 train/validation/test rotations,
as in the paper's appendix "Technical Details"), a small model (:mod:`iml.models.small`) is
trained under that loss. All members train as one vectorized program
(:func:`iml.training.tabular.train_tabular`).

Each observation is in the test fold of exactly one rotation, so each (loss, seed) gives it one
out-of-fold score; the scores of the seeds are averaged (the paper's ensemble), corrected with the
loss-corrected score ``(c^L)^{-1}`` (Proposition 4; Cor. 1 for a beta) and both are scored with
:mod:`iml.calibration`'s metrics (:func:`sweep_table`). Work is split into chunks of losses; each
finished chunk is one atomic :class:`~iml.pipeline.store.RunStore` entry, so a killed sweep
resumes where it stopped.

Entry points: :func:`run_sweep` (library, notebooks: arrays, e.g. from a pandas DataFrame by
:func:`iml.data.tabular.encode_table`), :func:`add_sweep_arguments` and
:func:`prepare_sweep_command` (the ``iml sweep`` command; also ``python -m iml.pipeline.sweep``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from iml import _validation as V
from iml._io import atomic_write_bytes, atomic_write_text
from iml.calibration import (
    METRICS,
    MULTICLASS_METRICS,
    multiclass_score_metrics,
    score_metrics,
)
from iml.data.folds import FoldSplit, assign_folds, nested_cv_splits
from iml.data.tabular import ArgumentError
from iml.models.small import SMALL_MODELS
from iml.pipeline.store import RunStore
from iml.spec import LossGrid, LossLike, LossSpec, loss_grid, loss_spec, weight_grid
from iml.training.tabular import (
    SOLVERS,
    TabularConfig,
    check_labels,
    check_seeds,
    exact_solver_applies,
    out_of_fold_logits,
    train_tabular,
)

Array = jax.Array

__all__ = [
    "METHODS",
    "SWEEP_LOSSES",
    "SweepPlan",
    "SweepResult",
    "add_sweep_arguments",
    "beta_grid",
    "execute_sweep",
    "loss_corrected_scores",
    "parse_weight_grid",
    "plan_sweep",
    "prepare_sweep_command",
    "run_sweep",
    "run_sweep_command",
    "scores_from_logits",
    "sweep_markdown",
    "sweep_table",
]

METHODS = ("raw", "loss_corrected")


# ----------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------


def beta_grid(n_betas: int = 64, beta_min: float = 0.01, beta_max: float = 0.99) -> np.ndarray:
    """``n_betas`` class weights evenly spaced in ``logit(beta)`` from ``beta_min`` to ``beta_max``.

    Raises:
      ValueError: if ``n_betas < 1`` or the bounds are not ``0 < beta_min <= beta_max < 1``.
    """
    if isinstance(n_betas, bool) or not isinstance(n_betas, int) or n_betas < 1:
        raise ValueError(f"n_betas must be a positive integer, got {n_betas!r}")
    for name, b in (("beta_min", beta_min), ("beta_max", beta_max)):
        if not 0.0 < b < 1.0:
            raise ValueError(f"{name} must lie in (0, 1), got {b!r}")
    if beta_min > beta_max:
        raise ValueError(f"beta_min = {beta_min} exceeds beta_max = {beta_max}")
    if n_betas == 1:
        return np.asarray([beta_min], dtype=np.float64)
    logits = np.linspace(_logit(beta_min), _logit(beta_max), n_betas)
    grid = 1.0 / (1.0 + np.exp(-logits))
    # The round trip through logit drifts the ends by an ulp (0.010000000000000002): pin them,
    # so that the table's exact keys show the bounds asked for.
    grid[0], grid[-1] = beta_min, beta_max
    return grid


def _logit(p: float | np.ndarray) -> Any:
    return np.log(p) - np.log1p(-np.asarray(p))


# ----------------------------------------------------------------------------------------------
# Metrics, the table and the figure
# ----------------------------------------------------------------------------------------------


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, np.float64)))


def scores_from_logits(losses: LossSpec, logits: ArrayLike) -> np.ndarray:
    """The scores ``[m, ...]`` that logits ``[m, ...]`` of a grid's members stand for
    (:meth:`iml.LossSpec.link` of each loss), in float64."""
    if not losses.multiclass:  # every binary loss reads its logit through the sigmoid
        return _sigmoid(logits)
    z = jnp.asarray(logits, jnp.float32)
    spec = jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.float32), losses)
    return np.asarray(jax.vmap(LossSpec.link)(spec, z), np.float64)


def loss_corrected_scores(losses: LossSpec, scores: ArrayLike) -> np.ndarray:
    """The loss-corrected scores ``(c^L)^{-1}(a)`` of every loss of a grid (Proposition 4;
    Corollary 1 for a beta): ``scores [m, N(, n)]``, row ``i`` corrected by loss ``i``."""
    a = jnp.asarray(np.clip(np.asarray(scores, np.float64), 0.0, 1.0), jnp.float32)
    return np.asarray(jax.vmap(LossSpec.loss_corrected_score)(losses, a), np.float64)


def sweep_table(
    losses: LossLike, scores: ArrayLike, labels: ArrayLike, n_bins: int = 10
) -> dict[str, dict[str, dict[str, float]]]:
    """Metrics of the raw and loss-corrected scores of every loss: ``table[key][method][metric]``.

    Keys are :func:`grid_keys` (for a beta grid, the exact betas). Methods: ``"raw"`` (the
    ensemble's scores ``a``) and ``"loss_corrected"`` (``(c^L)^{-1}(a)``, Proposition 4;
    ``g^beta(a)``, Corollary 1, for a beta). Metrics: :data:`iml.calibration.METRICS` for binary
    losses (``"ece"`` over ``n_bins`` quantile bins, the paper's deciles, ...) and
    :data:`iml.calibration.MULTICLASS_METRICS` for multiclass ones (top-label and class-wise
    ECE, Brier score, log loss, accuracy).

    Args:
      losses: the grid of ``m`` losses (:func:`loss_grid`: e.g. an array of betas).
      scores: ``[m, N]`` raw scores per loss, or ``[m, N, n]`` class scores.
      labels: ``[N]`` labels.
      n_bins: bins of the calibration errors.
    """
    grid = loss_grid(losses)
    spec = grid.spec
    (m,) = spec.batch_shape
    a = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    shape = (m, y.shape[0], *((spec.n_classes,) if spec.multiclass else ()))
    if a.shape != shape:
        raise ValueError(f"scores must have shape {shape}, got {a.shape}")
    metrics = multiclass_score_metrics if spec.multiclass else score_metrics
    corrected = loss_corrected_scores(spec, a)
    return {
        key: {"raw": metrics(raw, y, n_bins), "loss_corrected": metrics(fixed, y, n_bins)}
        for key, raw, fixed in zip(grid.keys, a, corrected, strict=True)
    }


def sweep_markdown(table: dict[str, dict[str, dict[str, float]]], key_name: str = "beta") -> str:
    """The table as Markdown: one row per loss (its exact key), raw and loss-corrected metrics."""
    metrics = METRICS if "auroc" in next(iter(table.values()))["raw"] else MULTICLASS_METRICS
    header = [key_name] + [f"{m} {k}" for k in metrics for m in ("raw", "corr.")]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, row in table.items():
        cells = [key]  # the exact key (iml.calibration.beta_key): close betas stay apart
        for metric in metrics:
            cells += [f"{row['raw'][metric]:.4f}", f"{row['loss_corrected'][metric]:.4f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# The sweep: chunks of betas, out-of-fold scores, the ensemble and the table
# ----------------------------------------------------------------------------------------------


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
      table: ``table[key][method][metric]`` (see :func:`sweep_table`).
      chunks_trained: indices of the chunks trained by this call (the others came from the store).
      losses: the grid (a :class:`iml.LossSpec` with batch shape ``(m,)``).
      keys: the table's key of each loss (:func:`grid_keys`).
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
    chunks_trained: list[int]
    losses: LossSpec | None = None
    keys: list[str] | None = None


def _train_chunk(
    features: np.ndarray,
    labels: np.ndarray,
    splits: Sequence[FoldSplit],
    losses: LossGrid,
    seeds: np.ndarray,
    config: TabularConfig,
    progress: bool | str,
) -> dict[str, np.ndarray]:
    """Train one chunk of losses (all seeds and rotations); its out-of-fold logits and epochs."""
    fit = train_tabular(features, labels, splits, losses, seeds, config, progress=progress)
    return {
        "oof_logits": out_of_fold_logits(fit.test_logits, splits, features.shape[0]),
        "best_epoch": fit.best_epoch,
        "best_val": fit.best_val,
        "epochs_run": np.asarray(fit.epochs_run),
    }


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
    config: TabularConfig
    fold_ids: np.ndarray
    splits: list[FoldSplit]
    chunks: list[np.ndarray]  # indices into the grid of losses
    n_bins: int
    run_config: dict[str, Any]


def plan_sweep(
    features: ArrayLike,
    labels: ArrayLike,
    groups: ArrayLike | None,
    losses: LossLike,
    *,
    seeds: int | Sequence[int] = 8,
    model: str = "logistic",
    hidden: int = 32,
    max_epochs: int = 100,
    batch_size: int = 512,
    learning_rate: float = 0.01,
    l2: float = 0.0,
    patience: int = 5,
    solver: str = "auto",
    n_folds: int = 10,
    fold_seed: int = 0,
    betas_per_chunk: int = 16,
    n_bins: int = 10,
    run_info: dict[str, Any] | None = None,
) -> SweepPlan:
    """Check a sweep's data and settings and lay out its work, training nothing.

    Takes the arguments of :func:`run_sweep` but ``store`` and ``progress``. The plan's
    ``run_config`` is what a results store records, so that
    ``RunStore(out).check_resumable(plan.run_config)`` tells before any work whether ``out`` can
    hold (or resume) this sweep.

    Raises:
      ValueError: for bad arrays or settings, naming the argument.
    """
    x = np.asarray(features, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"features must be a non-empty [N, d] array, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("features contain NaN or infinite values")
    grid = loss_grid(losses)
    spec = grid.spec
    y = check_labels(labels, x.shape[0], spec)
    g = np.arange(x.shape[0]) if groups is None else np.asarray(groups)
    if g.shape != (x.shape[0],):
        raise ValueError(f"groups must have shape ({x.shape[0]},), got {g.shape}")
    s = check_seeds(seeds)
    config = TabularConfig(
        model=model,
        hidden=hidden,
        max_epochs=max_epochs,
        batch_size=batch_size,
        learning_rate=float(learning_rate),
        l2=float(l2),
        patience=patience,
        solver=solver,
    )
    if config.exact and not exact_solver_applies(spec):
        if solver == "exact":
            raise ValueError(
                f"solver 'exact' fits the beta-weighted log loss only, not the "
                f"{spec.describe()}; use 'adam'"
            )
        config = dataclasses.replace(config, solver="adam")
    if (
        isinstance(betas_per_chunk, bool)
        or not isinstance(betas_per_chunk, int)
        or betas_per_chunk < 1
    ):
        raise ValueError(f"betas_per_chunk must be a positive integer, got {betas_per_chunk!r}")
    fold_ids = assign_folds(x.shape[0], n_folds=n_folds, groups=g, labels=y, seed=fold_seed)
    splits = nested_cv_splits(fold_ids, n_folds=n_folds)
    (m,) = spec.batch_shape
    chunks = [np.arange(i, min(i + betas_per_chunk, m)) for i in range(0, m, betas_per_chunk)]
    if exact_solver_applies(spec):  # the default grid keeps the layout of earlier runs
        recorded: dict[str, Any] = {"betas": grid.weights.tolist()}
    else:  # a callable cannot be written down: its name stands for it
        recorded = {"loss": spec.describe() if spec.kind == "callable" else spec.to_config()}
    run_config = {
        **recorded,
        "seeds": s.tolist(),
        "train": dataclasses.asdict(config),
        "n_folds": n_folds,
        "fold_seed": fold_seed,
        "betas_per_chunk": betas_per_chunk,
        "n_bins": n_bins,
        "data_sha256": data_fingerprint(x, y, g),
        **(run_info or {}),
    }
    return SweepPlan(x, y, grid, s, config, fold_ids, splits, chunks, n_bins, run_config)


def run_sweep(
    features: ArrayLike,
    labels: ArrayLike,
    groups: ArrayLike | None,
    losses: LossLike,
    *,
    seeds: int | Sequence[int] = 8,
    model: str = "logistic",
    hidden: int = 32,
    max_epochs: int = 100,
    batch_size: int = 512,
    learning_rate: float = 0.01,
    l2: float = 0.0,
    patience: int = 5,
    solver: str = "auto",
    n_folds: int = 10,
    fold_seed: int = 0,
    betas_per_chunk: int = 16,
    n_bins: int = 10,
    store: RunStore | None = None,
    progress: bool = True,
    run_info: dict[str, Any] | None = None,
) -> SweepResult:
    """Train a grid of losses (by default of class weights beta) of small models by nested
    cross-validation and score their calibration.

    Folds are :func:`iml.data.assign_folds` (grouped by ``groups``, stratified by label) and the
    rotations the paper's 7-2-1 (with 10 folds; otherwise 2 validation folds, 1 test fold and
    the rest for training). For every loss, seed and rotation one member is trained
    (:func:`train_tabular`); every observation gets one out-of-fold score per (loss, seed),
    averaged over seeds into the ensemble score, whose raw and loss-corrected versions are scored
    by :func:`sweep_table`.

    Any loss :func:`iml.loss_spec` reads makes a grid (:func:`loss_grid`)::

        run_sweep(x, y, None, beta_grid(64))                               # beta-weighted log loss
        run_sweep(x, y, None, loss_spec("focal", gamma=2.0, alpha=alphas))  # focal, alpha grid
        run_sweep(x, classes, None, np.stack([ones, upweighted]))          # B matrices [m, n, n]

    Multiclass losses take class indices as labels and train ``n`` outputs per member.

    A pandas DataFrame is encoded first (one-hot categories, z-scored numbers, missing values
    imputed and flagged: :func:`iml.data.tabular.encode_table`)::

        table = encode_table(frame, "y", positive="yes")
        result = run_sweep(table.features, table.labels, None, beta_grid(16), seeds=4)

    Args:
      features: ``[N, d]`` finite inputs (standardised columns train best).
      labels: ``[N]`` labels in ``{0, 1}``, or class indices for multiclass losses.
      groups: ``[N]`` group ids kept within one fold (e.g. patients), or None.
      losses: ``[m]`` class weights in ``(0, 1)``, no repeats, or any grid of losses
        (:func:`loss_grid`).
      seeds: number of seeds (``0..seeds-1``) or the seeds themselves.
      model: ``"logistic"`` or ``"mlp"`` (one ReLU hidden layer of ``hidden`` units).
      hidden, max_epochs, batch_size, learning_rate, l2, patience, solver: see
        :class:`TabularConfig` (by default the logistic model is fitted exactly under the
        beta-weighted log loss; other losses train by Adam).
      n_folds: folds of the nested cross-validation.
      fold_seed: seed of the fold assignment.
      betas_per_chunk: losses trained together (with all seeds and rotations) per chunk; a
        chunk is the unit of memory and of resumption.
      n_bins: bins of the calibration errors.
      store: a :class:`RunStore`: finished chunks and the table are stored there, and chunks
        already stored (by a run with the same configuration and data) are not trained again.
      progress: show tqdm bars (chunks, and epochs within a chunk).
      run_info: extra JSON-able facts recorded in the store's config (e.g. the data source).

    Returns:
      A :class:`SweepResult`.

    Raises:
      ValueError: for bad arrays or settings (naming the argument), or a store holding a run
        with another configuration.
    """
    plan = plan_sweep(
        features,
        labels,
        groups,
        losses,
        seeds=seeds,
        model=model,
        hidden=hidden,
        max_epochs=max_epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        l2=l2,
        patience=patience,
        solver=solver,
        n_folds=n_folds,
        fold_seed=fold_seed,
        betas_per_chunk=betas_per_chunk,
        n_bins=n_bins,
        run_info=run_info,
    )
    return execute_sweep(plan, store, progress)


def execute_sweep(
    plan: SweepPlan, store: RunStore | None = None, progress: bool = True
) -> SweepResult:
    """Train and score the sweep laid out by :func:`plan_sweep` (see :func:`run_sweep`)."""
    x, y, grid, s, config, fold_ids, splits, chunks = plan[:8]
    spec = grid.spec
    if store is not None:
        store.open_run(plan.run_config, devices=[str(d) for d in jax.devices()])
    results, trained = [], []
    for c, chunk in enumerate(_progress_iter(chunks, progress, "chunks")):
        key = f"chunks/{c:04d}"
        if store is not None and store.has(key):
            results.append(store.load_arrays(key))
            continue
        desc = f"chunk {c + 1}/{len(chunks)} epochs" if progress else False
        part = LossGrid(spec[chunk], None if grid.weights is None else grid.weights[chunk],
                        [grid.keys[i] for i in chunk])  # fmt: skip
        arrays = _train_chunk(x, y, splits, part, s, config, desc)
        if store is not None:
            store.save_arrays(key, **arrays)
        results.append(arrays)
        trained.append(c)
    oof = np.concatenate([r["oof_logits"] for r in results], axis=1)  # [S, m, N(, n)]
    member_scores = scores_from_logits(spec, np.swapaxes(oof, 0, 1))  # [m, S, N(, n)]
    scores = member_scores.mean(axis=1)
    corrected = loss_corrected_scores(spec, scores)
    table = sweep_table(grid, scores, y, n_bins=plan.n_bins)
    if store is not None:
        store.save_json("sweep_table", table)
    return SweepResult(
        betas=grid.weights,
        seeds=s,
        labels=y,
        fold_ids=fold_ids,
        member_scores=member_scores,
        scores=scores,
        corrected=corrected,
        best_epoch=np.swapaxes(np.concatenate([r["best_epoch"] for r in results], axis=1), 0, 1),
        table=table,
        chunks_trained=trained,
        losses=spec,
        keys=grid.keys,
    )


def _progress_iter(items: Sequence[Any], progress: bool, desc: str) -> Any:
    if not progress or len(items) <= 1:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, file=sys.stderr)


# ----------------------------------------------------------------------------------------------
# The command: `iml sweep` (and `python -m iml.pipeline.sweep`)
# ----------------------------------------------------------------------------------------------

_UCI_FILES = {
    "adult": ("adult.data", "adult.test", "adult.names"),
    "letter": ("letter-recognition.data",),
}
# Built-in datasets of the sweep that need no files; images are flattened into features.
_BUILT_IN = ("digits",)
# The losses `iml sweep --loss` trains, and what each one's grid is made of.
SWEEP_LOSSES = {
    "log": "betas",
    "squared": "betas",
    "focal": "alphas",
    "matrix": "weights",
    "class_weighted_softmax": "weights",
}


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``iml sweep`` to ``parser``."""
    source = parser.add_argument_group("data (one of --csv or --dataset)")
    which = source.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--csv",
        metavar="PATH",
        help="a delimited text file with a header row (comma, semicolon, tab or | separated; "
        "quotes, a UTF-8 byte-order mark and Windows line ends are fine)",
    )
    which.add_argument(
        "--dataset",
        choices=sorted([*_UCI_FILES, *_BUILT_IN]),
        help="a UCI dataset (adult, letter: --data-dir) or the built-in digits (8 x 8 pixels as "
        "64 features; label 1 for the digit 8, or all 10 classes with --classes all)",
    )
    source.add_argument(
        "--classes",
        choices=("binary", "all"),
        default="binary",
        help="binary (default): the positive class against the rest; all: every class of "
        "--dataset digits or letter, for the multiclass losses",
    )
    source.add_argument("--target", metavar="COLUMN", help="target column of --csv")
    source.add_argument(
        "--positive",
        metavar="VALUE",
        help="positive target value of --csv (default: the target is 0/1 or true/false), or "
        "the positive letter(s) of --dataset letter (default O, a ~4%% class)",
    )
    source.add_argument(
        "--delimiter",
        metavar="CHAR",
        help="field separator of --csv: one character, or tab (default: detected among "
        "comma, semicolon, tab and |)",
    )
    source.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder of the UCI files, as downloaded from the UCI Machine Learning Repository: "
        "letter-recognition.data (Letter Recognition) or adult.data, adult.test and adult.names "
        "(Adult)",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (resumable)")
    grid = parser.add_argument_group("the loss and its grid of class weights")
    grid.add_argument(
        "--loss",
        choices=sorted(SWEEP_LOSSES),
        default="log",
        help="log (default: the beta-weighted cross-entropy), squared (beta-weighted), focal "
        "(--gamma, with the beta grid as its weight alpha), or the multiclass matrix (the "
        "B-weighted log loss, one sigmoid per class) and class_weighted_softmax (--weights)",
    )
    grid.add_argument("--gamma", type=float, help="focal loss's gamma (default 2)")
    grid.add_argument(
        "--weights",
        metavar="W1;W2;...",
        help="the grid of a multiclass loss, ';'-separated: 'ones' (unweighted) or the entries "
        "that differ from 1, e.g. 'ones;B[8,8]=10;B[3,8]=10' (matrix) or 'ones;w[8]=10' "
        "(class_weighted_softmax), classes counted from 0",
    )
    grid.add_argument("--betas", metavar="B1,B2,...", help="explicit betas in (0, 1)")
    grid.add_argument("--n-betas", type=int, default=64, help="grid size (default 64)")
    grid.add_argument("--beta-min", type=float, default=0.01, help="smallest beta (default 0.01)")
    grid.add_argument("--beta-max", type=float, default=0.99, help="largest beta (default 0.99)")
    train = parser.add_argument_group("training")
    train.add_argument("--seeds", type=int, default=8, help="seeds per beta (default 8)")
    train.add_argument("--model", choices=SMALL_MODELS, default="logistic")
    train.add_argument("--hidden", type=int, default=32, help="MLP hidden units")
    train.add_argument("--epochs", type=int, default=100, help="most epochs")
    train.add_argument("--batch-size", type=int, default=512)
    train.add_argument("--lr", type=float, default=0.01, help="Adam learning rate")
    train.add_argument("--l2", type=float, default=0.0, help="L2 penalty on the weights")
    train.add_argument("--patience", type=int, default=5, help="early-stopping patience")
    train.add_argument(
        "--solver",
        choices=SOLVERS,
        default="auto",
        help="exact: full-batch Newton to the optimum (logistic only; seeds then coincide); "
        "adam: minibatch Adam with early stopping; auto (default): exact for logistic, adam for "
        "mlp",
    )
    train.add_argument("--n-folds", type=int, default=10)
    train.add_argument("--fold-seed", type=int, default=0)
    train.add_argument("--betas-per-chunk", type=int, default=16, help="betas per chunk")
    parser.add_argument("--n-bins", type=int, default=10, help="bins of the ECE (deciles)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


# The flag of `iml sweep` that stands for each argument of iml.data.load_csv.
_CSV_FLAGS = {
    "path": "--csv",
    "frame": "--csv",
    "target": "--target",
    "positive": "--positive",
    "delimiter": "--delimiter",
}


def _parse_betas(args: argparse.Namespace) -> np.ndarray:
    if args.betas:
        try:
            values = [float(v) for v in str(args.betas).split(",") if v.strip()]
        except ValueError as err:
            raise ValueError(
                f"--betas must be comma-separated numbers, got {args.betas!r}"
            ) from err
        return V.check_betas("--betas", values)
    try:
        return beta_grid(args.n_betas, args.beta_min, args.beta_max)
    except ValueError as err:
        raise ValueError(f"--n-betas/--beta-min/--beta-max: {err}") from err


_ENTRY = re.compile(r"^\s*(\w+)\[([\d,\s]+)\]\s*=\s*([^,\s]+)\s*$")


def parse_weight_grid(text: str, loss: str) -> list[dict[tuple[int, ...], float]]:
    """The grid of ``--weights``: per loss, the entries of ``B`` (``matrix``) or of the class
    weights ``w`` (``class_weighted_softmax``) that differ from 1.

    ``"ones;B[8,8]=10;B[3,8]=10,B[8,3]=10"`` gives three losses: unweighted, one diagonal entry
    10, two off-diagonal entries 10 (the syntax of :func:`grid_keys`).

    Raises:
      ValueError: naming ``--weights`` and the part it cannot read.
    """
    name, rank = ("B", 2) if loss == "matrix" else ("w", 1)
    grid = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        entries: dict[tuple[int, ...], float] = {}
        if part != "ones":
            for item in re.split(r",(?=\s*\w+\[)", part):
                match = _ENTRY.match(item)
                if match is None or match[1] != name:
                    raise ValueError(
                        f"--weights: cannot read {item.strip()!r}; the {loss} loss's entries "
                        f"read like {name}[{','.join(['3'] * rank)}]=10 (or 'ones')"
                    )
                index = tuple(int(i) for i in match[2].split(","))
                try:
                    value = float(match[3])
                except ValueError:
                    raise ValueError(f"--weights: {match[3]!r} is not a number") from None
                if len(index) != rank:
                    raise ValueError(
                        f"--weights: {name} takes {rank} indices, got {item.strip()!r}"
                    )
                if not (math.isfinite(value) and value > 0):
                    raise ValueError(f"--weights: weights must be positive, got {item.strip()!r}")
                entries[index] = value
        grid.append(entries)
    if not grid:
        raise ValueError("--weights is empty")
    return grid


def _check_uci(name: str, data_dir: str | None) -> Path:
    if not data_dir:
        raise ValueError(f"--dataset {name} needs --data-dir (the folder of {_UCI_FILES[name][0]})")
    folder = Path(data_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"--data-dir: folder not found: {folder}")
    for file_name in _UCI_FILES[name]:
        if not (folder / file_name).is_file():
            raise FileNotFoundError(
                f"--data-dir: {folder / file_name} not found (needed by {name})"
            )
    return folder


class _Command(NamedTuple):
    """``iml sweep``'s checked arguments."""

    source: dict[str, Any]
    loss: str
    grid: Any  # betas (log, squared), alphas (focal) or parsed --weights (multiclass)
    gamma: float
    config: TabularConfig


def _plan(args: argparse.Namespace) -> _Command:
    """Check every argument before any file is read."""
    multiclass = SWEEP_LOSSES[args.loss] == "weights"
    if multiclass:
        if not args.weights:
            raise ValueError(f"--loss {args.loss} needs --weights (e.g. 'ones;B[8,8]=10')")
        grid: Any = parse_weight_grid(args.weights, args.loss)
        if args.betas or args.gamma is not None:
            flag = "--betas" if args.betas else "--gamma"
            raise ValueError(f"{flag} does not apply to --loss {args.loss}; its grid is --weights")
    else:
        if args.weights:
            raise ValueError(f"--weights applies to the multiclass losses, not --loss {args.loss}")
        if args.gamma is not None and args.loss != "focal":
            raise ValueError(f"--gamma applies to --loss focal, not --loss {args.loss}")
        grid = _parse_betas(args)
    gamma = 2.0 if args.gamma is None else args.gamma
    if not (math.isfinite(gamma) and gamma >= 0):
        raise ValueError(f"--gamma must be a non-negative number, got {args.gamma}")
    if args.seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
    for flag, value in (("--n-folds", args.n_folds), ("--betas-per-chunk", args.betas_per_chunk)):
        if value < 1:
            raise ValueError(f"{flag} must be positive, got {value}")
    if args.n_folds < 4:
        raise ValueError(f"--n-folds must be at least 4 (train/2 val/1 test), got {args.n_folds}")
    solver = args.solver
    if args.loss != "log" and solver == "exact":
        raise ValueError(f"--solver exact fits --loss log only, not --loss {args.loss}")
    if args.loss != "log" and solver == "auto":
        solver = "adam"
    try:
        config = TabularConfig(
            model=args.model,
            hidden=args.hidden,
            max_epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.lr,
            l2=args.l2,
            patience=args.patience,
            solver=solver,
        )
    except ValueError as err:
        raise ValueError(f"training option: {err}") from err
    if bool(args.csv) == bool(args.dataset):
        raise ValueError("give exactly one of --csv PATH or --dataset adult|digits|letter")
    if (args.classes == "all") != multiclass:
        if multiclass:
            raise ValueError(f"--loss {args.loss} is multiclass: add --classes all")
        raise ValueError(
            f"--classes all needs a multiclass --loss (matrix, class_weighted_softmax), "
            f"not {args.loss}"
        )
    if args.classes == "all" and args.dataset not in ("digits", "letter"):
        raise ValueError("--classes all applies to --dataset digits and letter")
    if args.csv:
        if not args.target:
            raise ValueError("--csv needs --target COLUMN")
        source = {"name": "csv", "path": args.csv, "target": args.target}
        for option in ("positive", "delimiter"):
            if getattr(args, option) is not None:
                source[option] = getattr(args, option)
        return _Command(source, args.loss, grid, gamma, config)
    for option in ("target", "delimiter"):
        if getattr(args, option) is not None:
            flag = "--" + option
            raise ValueError(f"{flag} applies to --csv only, not --dataset {args.dataset}")
    if args.dataset in _BUILT_IN:
        source = {"name": args.dataset}
        if args.data_dir:
            if not Path(args.data_dir).is_dir():
                raise FileNotFoundError(f"--data-dir: folder not found: {args.data_dir}")
            source["data_dir"] = args.data_dir
        if args.positive is not None:
            if args.classes == "all":
                raise ValueError("--positive does not apply to --classes all")
            if not (args.positive.isdigit() and len(args.positive) == 1):
                raise ValueError(
                    f"--positive of --dataset digits is one digit, got {args.positive!r}"
                )
            source["positive_digit"] = int(args.positive)
        return _Command(source, args.loss, grid, gamma, config)
    folder = _check_uci(args.dataset, args.data_dir)
    source = {"name": args.dataset, "manual_dir": str(folder)}
    if args.positive is not None:
        if args.dataset != "letter":
            raise ValueError("--positive applies to --csv, --dataset letter and digits only")
        if args.classes == "all":
            raise ValueError("--positive does not apply to --classes all")
        source["positive_letter"] = args.positive
    return _Command(source, args.loss, grid, gamma, config)


def _load(source: dict[str, Any]) -> Any:
    """The dataset named by the checked arguments; errors worded with the command's flags."""
    from iml.data import load_dataset

    options = dict(source)
    name = options.pop("name")
    try:
        return load_dataset(name, **options)
    except ArgumentError as err:
        raise err.for_flags(_CSV_FLAGS) from None


def _grid_of(command: _Command, n_classes: int) -> Any:
    if command.loss == "log":
        return command.grid  # the betas themselves: exact keys
    if command.loss == "squared":
        return loss_spec("squared", beta=command.grid)
    if command.loss == "focal":
        return loss_spec("focal", gamma=command.gamma, alpha=command.grid)
    return weight_grid(command.grid, command.loss, n_classes)


def _file_name(key: str) -> str:
    return re.sub(r"[^\w.=-]+", "_", key).strip("_") or "loss"


def _save_outputs(
    out: Path,
    result: SweepResult,
    prevalence: float | None,
    title: str,
    class_names: Sequence[str] | None = None,
) -> list[Path]:
    """Write the Markdown table, the scores and the figures, each file atomically."""
    from iml.plots import figure_calibration_by_loss, reliability_by_class, save_figure

    key_name = "beta" if result.betas is not None else "loss"
    if result.losses is not None and result.losses.kind == "focal" and result.betas is not None:
        key_name = "alpha"
    atomic_write_text(out / "sweep_table.md", sweep_markdown(result.table, key_name))
    buffer = io.BytesIO()
    arrays = {"keys": np.asarray(result.keys), "labels": result.labels,
              "fold_ids": result.fold_ids, "scores": result.scores.astype(np.float32),
              "corrected": result.corrected.astype(np.float32)}  # fmt: skip
    if result.betas is not None:
        arrays["betas"] = result.betas
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(out / "scores.npz", buffer.getvalue())
    fig = figure_calibration_by_loss(
        result.table, prevalence=prevalence, title=title, weight_name=key_name
    )
    paths = save_figure(fig, out / "ece_vs_beta")
    if result.scores.ndim == 3:
        for key, raw, fixed in zip(result.keys, result.scores, result.corrected, strict=True):
            fig = reliability_by_class(raw, result.labels, fixed, class_names,
                                       title=f"{title}: {key}")  # fmt: skip
            paths += save_figure(fig, out / "reliability_by_class" / _file_name(key))
    return paths


def prepare_sweep_command(args: argparse.Namespace) -> Callable[[], int]:
    """Check ``iml sweep``'s arguments and data; return the work, which returns exit status 0.

    Everything that can be wrong with the input is found here, before any model is trained or
    any output written: the options, the files, and the data itself (the CSV is read and
    encoded here, so a missing column, an unknown ``--positive`` value or an undetectable
    delimiter is reported now). The returned function trains, writes the outputs and prints a
    summary; an exception raised there (a failure during the work) propagates.

    Raises:
      ValueError: for bad input, naming the flag (``--target``, ``--positive``, ...), the
        column and the values found.
      FileNotFoundError: for a missing file or folder, naming the flag.
    """
    command = _plan(args)
    dataset = _load(command.source)
    name = command.source["name"]
    x = dataset.feature_matrix()
    multiclass = args.classes == "all"
    labels = dataset.classes if multiclass else dataset.labels
    class_names = dataset.class_names if multiclass else None
    losses = _grid_of(command, len(class_names) if multiclass else 2)
    out = Path(args.out)
    config = command.config

    try:
        plan = plan_sweep(
            x,
            labels,
            dataset.groups,
            losses,
            seeds=args.seeds,
            model=config.model,
            hidden=config.hidden,
            max_epochs=config.max_epochs,
            batch_size=config.batch_size,
            learning_rate=config.learning_rate,
            l2=config.l2,
            patience=config.patience,
            solver=config.solver,
            n_folds=args.n_folds,
            fold_seed=args.fold_seed,
            betas_per_chunk=args.betas_per_chunk,
            n_bins=args.n_bins,
            run_info={"data": command.source},
        )
    except ValueError as err:
        raise ValueError(f"--csv/--dataset: {err}") from None
    store = RunStore(out)
    try:
        store.check_resumable(plan.run_config)
    except ValueError as err:
        raise ValueError(f"--out: {err}") from None

    def work() -> int:
        result = execute_sweep(plan, store, progress=not args.no_progress)
        what = "" if command.loss == "log" else f"{command.loss} loss, "
        title = (
            f"{name}: {what}{len(result.keys)} losses x {len(result.seeds)} seeds, {config.model}"
        )
        prevalence = None if multiclass else dataset.prevalence
        paths = _save_outputs(out, result, prevalence, title, class_names)
        metric, shown = ("top_label_ece", "top-label ECE") if multiclass else ("ece", "ECE")
        worst = max(row["raw"][metric] for row in result.table.values())
        corrected = [row["loss_corrected"][metric] for row in result.table.values()]
        where = (
            f"{len(class_names)} classes" if multiclass else f"prevalence {dataset.prevalence:.4f}"
        )
        print(
            f"{name}: N={dataset.num_examples}, {where}; raw {shown} up to {worst:.4f}; "
            f"loss-corrected {shown} {min(corrected):.4f}..{max(corrected):.4f}; "
            f"trained chunks {result.chunks_trained}"
        )
        written = [out / "sweep_table.json", out / "sweep_table.md", out / "scores.npz", *paths]
        print("wrote " + ", ".join(map(str, written)))
        return 0

    return work


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run ``iml sweep`` from parsed arguments; returns the exit status.

    Bad input (:func:`prepare_sweep_command`) is printed as one line, ``iml sweep: error: ...``,
    with status 2 before any work starts; a failure during the work raises.
    """
    try:
        work = prepare_sweep_command(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"iml sweep: error: {err}", file=sys.stderr)
        return 2
    return work()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m iml.pipeline.sweep``: the same options as ``iml sweep``."""
    parser = argparse.ArgumentParser(
        prog="python -m iml.pipeline.sweep",
        description="Train a fine grid of class weights (betas) of small models as one "
        "vectorized program; plot ECE against beta for raw and loss-corrected scores.",
    )
    add_sweep_arguments(parser)
    return run_sweep_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
