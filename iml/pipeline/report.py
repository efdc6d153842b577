"""Reporting a run: the summary table (JSON and Markdown), Figures 1-4 and the revealed
experiments (:mod:`iml.pipeline.reveal`) from stored scores.

The table is keyed by beta (its exact key, :func:`iml.calibration.beta_key`), then by method,
then by metric::

    {"0.9": {"raw": {"ece": ..., "ece_interval": [low, high], "ece_debiased": ...,
                     "smooth_ece": ..., "brier": ..., "log_loss": ..., "auroc": ...,
                     "loss_calibration": {"p_value", "p_value_familywise", "verdict", ...}},
             "loss_corrected": {...}, "platt": {...}, "beta": {...}, "temperature": {...},
             "isotonic": {...}, "histogram": {...}, "prior_shift": {...}}, ...}

``raw`` are the ensemble scores, ``loss_corrected`` their loss-corrected scores
``(c^beta)^{-1}(a)`` (Corollary 1; nothing is fitted), and the other methods are recalibration
baselines FIT BY CROSS-FITTING over the outer folds: the observations of fold ``f`` are
recalibrated by a map fitted on the ensemble scores and labels of all other folds, so no
observation is ever recalibrated by a map fitted on its own label. ``beta`` is beta calibration
(Kull et al. 2017; the method's name, not the class weight), which contains the loss correction
as its case ``a = b = 1``, ``c = -logit(beta)``. ``prior_shift`` is eq. ``correct-prior`` with
the training prior that the beta-weighted loss implies (odds scaled by ``beta / (1 - beta)``,
the prevalence estimated on the fitting folds); as the paper notes (Section 4), it then
coincides with the loss correction. ``raw`` also carries the
loss-calibration test (Definition 2) of the raw scores for their beta, its verdict adjusted over
the run's betas (:func:`iml.calibration.loss_calibration_verdicts`). Metrics are
computed over the observations with at least one member (ensemble size > 0); scores are clipped to
``[1e-7, 1 - 1e-7]`` first, since float32 sigmoids round to exactly 0 or 1, where the log loss is
infinite. ``ece_interval`` is each ECE's 95% bootstrap interval (``config.eval.n_bootstrap``
replicates, every method of a beta on the same resampled observations, bins fixed:
:func:`iml.calibration.ece_intervals`).
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from iml import _validation as V
from iml import config as config_lib
from iml._io import atomic_write_text, file_stem
from iml.calibration import (
    RENORMALISED,
    beta_key,
    expected_calibration_error,
    loss_calibration_verdicts,
    loss_corrected_scores,
    table_by_loss,
)
from iml.grids import LossFamily, parse_weight_grid
from iml.pipeline.defaults import check_eval_settings, sweep_config
from iml.pipeline.markdown import markdown_by_loss, markdown_by_method
from iml.pipeline.reveal import reveal_run
from iml.pipeline.reveal_input import check_reveal_input, reveal_input
from iml.pipeline.run_config import as_config, run_betas
from iml.pipeline.runner import is_multiclass, run_grid, run_loss
from iml.pipeline.store import (
    EnsembleScores,
    RunStore,
    atomic_write_bytes,
    check_stored_run,
    load_ensemble,
)
from iml.pipeline.sweep_scores import SweepResult, rescore_sweep
from iml.plots import (
    figure1_calibration_curves,
    figure2_theoretical_curves,
    figure3_loss_calibration,
    figure4_loss_corrected,
    figure_calibration_by_loss,
    figure_smooth_calibration,
    reliability_by_class,
    save_figure,
)
from iml.recalibration import BASELINES, LossCorrection, cross_fit

__all__ = [
    "report_config",
    "report_run",
    "report_sweep_run",
    "summary_table",
    "sweep_title",
    "write_sweep_outputs",
]

_CLIP = 1e-7


def summary_table(
    ensemble: EnsembleScores,
    labels: np.ndarray,
    fold_ids: np.ndarray,
    *,
    n_bins: int = 10,
    n_bootstrap: int = 200,
    seed: int = 0,
    loss: LossFamily | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """The summary table: beta -> method -> metric (see the module docstring).

    ``loss`` is the loss the ensembles were trained with, as a function of their class weight
    (:func:`iml.grids.loss_family`; default the beta-weighted log loss): its inverse rule is the
    loss correction and its rule the loss-calibration test's. ``prior_shift``, which stands for
    the beta-weighted log loss's reweighting of the prior, is left out for other losses.
    """
    family = LossFamily() if loss is None else loss
    labels = np.asarray(labels, np.int32)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for row, beta in enumerate(ensemble.betas):
        have = ensemble.sizes[row] > 0
        if not have.any():
            raise ValueError(f"no observation has a test score for beta={beta_key(beta)}")
        s = np.clip(ensemble.scores[row][have], _CLIP, 1 - _CLIP)
        y, folds = labels[have], np.asarray(fold_ids)[have]
        corrected = np.asarray(LossCorrection(family(beta)).transform(s.astype(np.float32)))
        baselines = {name: cross_fit(factory(beta), s, y, folds)[None]
                     for name, factory in BASELINES.items()
                     if name != "prior_shift" or family.name == "log"}  # fmt: skip
        # The one table of every run (iml.calibration.table_by_loss), a beta at a time: each
        # method's metrics, and its ECE's interval with every method on the same resampled rows.
        (methods,) = table_by_loss(
            family(np.asarray([beta])), s[None], y, n_bins, corrected[None], others=baselines,
            ece_bootstrap=n_bootstrap if n_bootstrap >= 2 else 0, key=jax.random.key(seed + 1),
            test_family=len(ensemble.betas),
        ).values()  # fmt: skip
        if "ece_interval" in methods["raw"]:  # the raw scores' fields in their stored order
            methods["raw"]["ece_interval"] = methods["raw"].pop("ece_interval")
        table[beta_key(beta)] = methods
    loss_calibration_verdicts(table)
    return table


def _size_summary(ensemble: EnsembleScores, keys: Sequence[str] | None = None) -> dict[str, Any]:
    """Ensemble sizes per row, keyed by the exact betas or by ``keys``."""
    out = {}
    keys = [beta_key(b) for b in ensemble.betas] if keys is None else keys
    for row, key in enumerate(keys):
        sizes = ensemble.sizes[row]
        values, counts = np.unique(sizes, return_counts=True)
        out[key] = {
            "min": int(sizes.min()),
            "max": int(sizes.max()),
            "mean": float(sizes.mean()),
            "histogram": {str(int(v)): int(c) for v, c in zip(values, counts, strict=True)},
        }
    return out


def _write_tables(
    out: Path,
    table: Mapping[str, Any],
    markdown: str,
    ensemble: EnsembleScores,
    labels: np.ndarray,
    config: ml_collections.ConfigDict,
    keys: Sequence[str] | None = None,
    **extra: np.ndarray,
) -> None:
    """A report's ``table.json``, ``table.md``, ``ensemble.json`` (the ensemble sizes and the
    report's settings) and ``ensemble_scores.npz`` (the rows' betas, or the ``keys`` of a grid of
    losses, the scores, the ``extra`` arrays, the sizes and the labels)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "table.json", json.dumps(table, indent=2).encode())
    atomic_write_bytes(out / "table.md", markdown.encode())
    record = {
        "ensemble_size": _size_summary(ensemble, keys),
        "average": str(config.eval.average),
        "eval": config_lib.to_dict(config.eval),
    }
    atomic_write_bytes(out / "ensemble.json", json.dumps(record, indent=2).encode())
    rows = {"betas": np.asarray(ensemble.betas)} if keys is None else {"keys": np.asarray(keys)}
    RunStore(out).save_arrays(
        "ensemble_scores",
        **rows,
        scores=ensemble.scores,
        **extra,
        sizes=ensemble.sizes,
        labels=labels,
    )


def report_config(
    run: str | Path, eval_overrides: Mapping[str, Any] | None = None
) -> ml_collections.ConfigDict:
    """The config that :func:`report_run` reports a stored run with: the run's own (in the
    :func:`iml.pipeline.run_config.as_config`), its ``config.eval`` keys set from
    ``eval_overrides``; checked before any work.

    Args:
      run: a run directory written by :func:`iml.pipeline.runner.run_experiment`.
      eval_overrides: ``config.eval`` keys and their values, e.g. ``{"n_bins": 20, "average":
        "logit"}`` (:func:`iml.pipeline.defaults.default_config`).

    Raises:
      FileNotFoundError: if ``run`` holds no manifest or no stored folds.
      ValueError: if the run has no finished member batch or is a sweep; naming the key, for a
        key that ``config.eval`` does not have, a value of another type than the key's, or a bad
        value (:func:`iml.pipeline.defaults.check_eval_settings`).
    """
    store = check_stored_run(run)
    manifest = store.manifest()
    if manifest["kind"] != "images":
        raise ValueError(
            f"{run} holds an `iml sweep` run: report it with report_sweep_run (what `iml "
            "figures` does for a sweep); report_run reports `iml reproduce` runs"
        )
    config = as_config(manifest["config"])
    for key, value in (eval_overrides or {}).items():
        config_lib.override(config, f"eval.{key}", value)
    check_eval_settings(config.eval)
    return config


def report_run(
    run: str | Path,
    out: str | Path | None = None,
    *,
    formats: Sequence[str] | None = None,
    eval_overrides: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Aggregate a stored run and write its table, ensemble scores, Figures 1-4 and revealed
    experiments (for a run over multiclass losses: its table, ensemble scores and reliability
    figures per class; see below).

    Writes into ``out`` (default: the run directory): ``table.json``, ``table.md``,
    ``ensemble.json`` (ensemble sizes per beta), ``ensemble_scores.npz``,
    ``figures/figure{1,2,3,4}.{png,pdf}`` and the smooth reliability diagrams of the raw and the
    loss-corrected scores, ``figures/smooth_{raw,corrected}.{png,pdf}``. With two betas or more,
    also what the ensembles learned across them (:func:`iml.pipeline.reveal.reveal_run`, on the
    observations scored at every beta, with ``config.eval.n_bootstrap`` replicates and
    ``config.eval.report_seed``): ``revealed.json`` and
    ``figures/revealed_{information,value_matrix,cost_bounds}.{png,pdf}``, or a warning saying
    why not (too few observations scored at every beta, or one label among them). Trains
    nothing.

    A run over a grid of multiclass losses (``config.loss.weights``) is keyed by the grid's keys
    instead of betas. Its table holds, per loss, the raw and loss-corrected (Proposition 4)
    top-label and class-wise ECE, Brier score, log loss and accuracy, over the observations that
    every loss's ensemble scored; ``ece_by_class.json`` holds each class's ECE, raw and
    corrected. ``ensemble_scores.npz`` adds the corrected class scores
    (``corrected``, where an observation is scored). The figures are
    ``figures/ece_by_loss`` and ``figures/reliability_by_class/KEY``. The recalibration
    baselines, Figures 1-4 and the revealed experiments are binary and are not drawn.

    Args:
      run: a run directory written by :func:`iml.pipeline.runner.run_experiment`.
      out: where to write (created if missing).
      formats: figure formats; None: the run's ``config.eval.figures``; ``()``: none (the
        tables and scores alone, and ``revealed.json``).
      eval_overrides: ``config.eval`` keys to report with instead of the run's own
        (:func:`report_config`): ``n_bins``, ``n_bootstrap``, ``report_seed``, ``figures``, and
        ``average``, how each ensemble pools its members (:data:`~iml.pipeline.ENSEMBLE_AVERAGES`).
        The members are the same whatever these are, so a stored run can be reported several
        ways (into separate ``out`` directories); ``ensemble.json`` records the settings used.

    Returns:
      The summary table.

    Raises:
      FileNotFoundError: if ``run`` holds no manifest or no stored folds.
      ValueError: if the run has no finished member batch, or for a bad ``eval_overrides``
        (:func:`report_config`).
    """
    config = report_config(run, eval_overrides)
    if formats is not None:  # recorded in ensemble.json as the report's setting
        config.eval.figures = V.check_figure_formats("formats", formats)
    formats = tuple(config.eval.figures)
    store = RunStore(run)
    n_bins, n_bootstrap = int(config.eval.n_bins), int(config.eval.n_bootstrap)
    folds = store.load_arrays("data/folds")
    labels, fold_ids = folds["labels"], folds["fold_ids"]
    out = Path(out) if out is not None else store.root
    if is_multiclass(config):
        return _report_multiclass(store, config, labels, out, formats)
    betas = list(run_betas(config))
    loss = run_loss(config)
    ensemble = load_ensemble(store, betas, len(labels), str(config.eval.average))
    table = summary_table(
        ensemble,
        labels,
        fold_ids,
        n_bins=n_bins,
        n_bootstrap=n_bootstrap,
        seed=int(config.eval.report_seed),
        loss=loss,
    )
    _write_tables(out, table, markdown_by_method(table), ensemble, labels, config)
    scores_by_beta, labels_by_beta = {}, {}
    for row, beta in enumerate(ensemble.betas):
        have = ensemble.sizes[row] > 0
        scores_by_beta[beta] = np.clip(ensemble.scores[row][have], _CLIP, 1 - _CLIP)
        labels_by_beta[beta] = labels[have]
    figures = (
        {}
        if not formats
        else {
            "figure1": figure1_calibration_curves(scores_by_beta, labels_by_beta, n_bins),
            "figure2": figure2_theoretical_curves(ensemble.betas, loss=loss),
            "figure3": figure3_loss_calibration(scores_by_beta, labels_by_beta, n_bins, loss=loss),
            "figure4": figure4_loss_corrected(
                scores_by_beta,
                labels_by_beta,
                n_bins,
                loss=loss,
                verdicts={
                    b: table[beta_key(b)]["raw"]["loss_calibration"]["verdict"]
                    for b in ensemble.betas
                },
            ),
            "smooth_raw": figure_smooth_calibration(
                scores_by_beta, labels_by_beta, n_bootstrap=n_bootstrap, loss=loss
            ),
            "smooth_corrected": figure_smooth_calibration(
                scores_by_beta, labels_by_beta, corrected=True, n_bootstrap=n_bootstrap, loss=loss
            ),
        }
    )
    for name, fig in figures.items():
        save_figure(fig, out / "figures" / name, formats)
    if len(ensemble.betas) >= 2:  # what the ensembles learned, across their class weights
        inputs = reveal_input(
            ensemble.betas, ensemble.scores, labels, loss, sizes=ensemble.sizes, run=store.root
        )
        try:
            check_reveal_input(inputs, n_bins)
        except ValueError as err:  # e.g. one label among the observations every beta scored
            warnings.warn(f"no revealed experiments: {err}", RuntimeWarning, stacklevel=2)
            return table
        reveal_run(
            inputs,
            out,
            n_bins=n_bins,
            n_bootstrap=max(n_bootstrap, 2),
            seed=int(config.eval.report_seed),
            formats=formats,
            # Size and power simulated on 100 data sets of 200 replicates where the report
            # runs at least 100 replicates itself (fewer would make the rates mere noise).
            power_datasets=100 if n_bootstrap >= 100 else 0,
            power_bootstrap=min(max(n_bootstrap, 2), 200),
        )
    return table


def _report_multiclass(
    store: RunStore,
    config: Any,
    labels: np.ndarray,
    out: Path,
    formats: Sequence[str],
) -> dict[str, dict[str, dict[str, float]]]:
    """The report of a run over a grid of multiclass losses: per loss, the raw and
    loss-corrected (Proposition 4) ensemble scores' top-label and class-wise ECE, Brier score,
    log loss and accuracy (:func:`iml.calibration.table_by_loss`), over the observations that
    every loss's ensemble scored; one reliability figure per loss, a panel per class; and the
    ECE of every loss's ensemble before and after the correction; and each class's ECE
    (``ece_by_class.json``), whose mean is the class-wise ECE. For the B-weighted loss both also
    hold the corrected posteriors renormalised to sum to one (``loss_corrected_renormalised``)."""
    n_bins = int(config.eval.n_bins)
    n_losses = len(parse_weight_grid(config.loss.weights, config.loss.name))
    positions = [float(k) for k in range(n_losses)]
    ensemble = load_ensemble(store, positions, len(labels), str(config.eval.average))
    n_classes = ensemble.scores.shape[-1]
    grid = run_grid(config, n_classes)
    scored = ensemble.sizes > 0
    every = scored.all(axis=0)
    if not every.any():
        raise ValueError(f"{store.root}: no observation is scored by the ensemble of every loss")
    filled = np.where(scored[..., None], ensemble.scores, 1.0 / n_classes)
    corrected = np.where(scored[..., None], loss_corrected_scores(grid.spec, filled), np.nan)
    scores, fixed, y = ensemble.scores[:, every], corrected[:, every], labels[every]
    n_bootstrap = int(config.eval.n_bootstrap)
    table = table_by_loss(grid, scores, y, n_bins, corrected=fixed,
                          ece_bootstrap=n_bootstrap if n_bootstrap >= 2 else 0,
                          key=jax.random.key(int(config.eval.report_seed) + 1))  # fmt: skip
    markdown = markdown_by_loss(table, "loss")
    _write_tables(out, table, markdown, ensemble, labels, config, grid.keys, corrected=corrected)
    by_class = {
        key: {"raw": _class_eces(a, y, n_bins), "loss_corrected": _class_eces(c, y, n_bins)}
        for key, a, c in zip(grid.keys, scores, fixed, strict=True)
    }
    if grid.spec.record.domain == "box":  # the table's renormalised one-vs-rest posteriors too
        for key, c in zip(grid.keys, fixed, strict=True):
            by_class[key][RENORMALISED] = _class_eces(c / c.sum(-1, keepdims=True), y, n_bins)
    atomic_write_bytes(out / "ece_by_class.json", json.dumps(by_class, indent=2).encode())
    _grid_figures(
        table, grid.keys, scores, fixed, y, title=f"{config.data.name}, {config.loss.name} loss",
        prevalence=None, weight_name="loss", ece_path=out / "figures" / "ece_by_loss",
        classes_dir=out / "figures" / "reliability_by_class", formats=formats,
        class_formats=formats, n_bins=n_bins,
    )  # fmt: skip
    return table


def _grid_figures(
    table: Mapping[str, Any],
    keys: Sequence[str],
    scores: np.ndarray,
    corrected: np.ndarray,
    labels: np.ndarray,
    *,
    title: str,
    prevalence: float | None,
    weight_name: str,
    ece_path: Path,
    classes_dir: Path,
    formats: Sequence[str],
    class_formats: Sequence[str],
    class_names: Sequence[str] | None = None,
    n_bins: int = 10,
) -> list[Path]:
    """The figures of a grid of losses, a sweep's or a multiclass run's: the ECE of every loss
    before and after its correction, and, for class scores ``[m, N, n]``, one reliability
    figure per loss, a panel per class (``classes_dir/KEY``); none for no ``formats``."""
    if not formats:
        return []
    fig = figure_calibration_by_loss(table, prevalence=prevalence, title=title,
                                     weight_name=weight_name)  # fmt: skip
    paths = save_figure(fig, ece_path, formats)
    if scores.ndim == 3:
        for key, a, c in zip(keys, scores, corrected, strict=True):
            fig = reliability_by_class(a, labels, c, class_names, n_bins, title=f"{title}: {key}")
            paths += save_figure(fig, classes_dir / file_stem(key), class_formats)
    return paths


def write_sweep_outputs(
    out: str | Path,
    result: SweepResult,
    prevalence: float | None,
    title: str,
    class_names: Sequence[str] | None = None,
    formats: Sequence[str] = ("png", "pdf"),
) -> list[Path]:
    """Write a sweep's Markdown table, scores and figures into ``out``, each file atomically.

    Files: ``table.md`` (:func:`iml.pipeline.markdown.markdown_by_loss`),
    ``ensemble_scores.npz`` (keys, labels, fold ids, raw and loss-corrected ensemble scores, the
    betas of a beta grid, and, for binary losses trained with several seeds, each seed's scores
    ``member_scores`` and ``seeds``),
    ``ece_vs_beta`` (the ECE of both against the loss, in each of ``formats``) and, for
    multiclass losses, one ``reliability_by_class/KEY`` figure per loss (in the first format).
    The JSON table is the store's (``table.json``, written by
    :func:`iml.pipeline.sweep.execute_sweep`).

    Args:
      prevalence: the positive rate, drawn on the figure (None for multiclass losses).
      class_names: names of the classes of a multiclass sweep.
      formats: the figures' formats (``config.eval.figures``); ``()``: no figures.

    Returns:
      The paths of the figures written.
    """
    out = Path(out)
    key_name = "beta" if result.betas is not None else "loss"
    if result.losses is not None and result.betas is not None:  # beta, or the focal loss's alpha
        key_name = result.losses.record.class_weight or key_name
    atomic_write_text(out / "table.md", markdown_by_loss(result.table, key_name))
    buffer = io.BytesIO()
    arrays = {"keys": np.asarray(result.keys), "labels": result.labels,
              "fold_ids": result.fold_ids, "scores": result.scores.astype(np.float32),
              "corrected": result.corrected.astype(np.float32)}  # fmt: skip
    if result.betas is not None:
        arrays["betas"] = result.betas
    if result.member_scores.ndim == 3 and result.member_scores.shape[1] > 1:
        # Each seed's binary scores [m, S, N], for a user's own analysis of training noise.
        arrays["member_scores"] = result.member_scores.astype(np.float32)
        arrays["seeds"] = np.asarray(result.seeds, np.int64)
    formats = V.check_figure_formats("formats", formats)
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(out / "ensemble_scores.npz", buffer.getvalue())
    return _grid_figures(
        result.table, result.keys, result.scores, result.corrected, result.labels, title=title,
        prevalence=prevalence, weight_name=key_name, ece_path=out / "ece_vs_beta",
        classes_dir=out / "reliability_by_class", formats=formats, class_formats=formats[:1],
        class_names=class_names,
    )  # fmt: skip


def sweep_title(data: str, loss: str, losses: int, seeds: int, model: str) -> str:
    """The title of a sweep's figures, e.g. ``digits: 64 losses x 1 seeds, logistic``."""
    what = "" if loss == "log" else f"{loss} loss, "
    return f"{data}: {what}{losses} losses x {seeds} seeds, {model}"


def report_sweep_run(
    run: str | Path,
    out: str | Path | None = None,
    *,
    eval_overrides: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Report a stored, finished sweep again without training: its table (``table.json``)
    and :func:`write_sweep_outputs`' Markdown, scores and figures, written into ``out`` (default:
    the run directory), scored as the sweep scored them (:func:`iml.pipeline.sweep_scores.
    rescore_sweep`) with its report settings, or those of ``eval_overrides`` (``n_bins``,
    ``average``, ``n_bootstrap``, ``report_seed``), its figures in the formats of
    ``eval_overrides["figures"]`` (the schema's default unless given; ``()``: none), which a
    sweep does not record.

    Returns:
      The table, ``table[key][method][metric]``.

    Raises:
      FileNotFoundError, ValueError: for a folder without a finished sweep, or a setting that a
        sweep's report does not have.
    """
    result = rescore_sweep(run, eval_overrides)
    formats = tuple((eval_overrides or {}).get("figures", sweep_config().eval.figures))
    record = RunStore(run).manifest()["config"]
    source = record["data"]
    name = Path(source["path"]).stem if "path" in source else source.get("name", Path(run).name)
    model = record["model"].get("name", "logistic")
    title = sweep_title(name, record["loss"]["name"], len(result.keys), len(result.seeds), model)
    multiclass = result.scores.ndim == 3
    prevalence = None if multiclass else float(np.mean(result.labels))
    out = Path(out or run)
    RunStore(out).save_json("table", result.table)
    write_sweep_outputs(out, result, prevalence, title, formats=formats)
    return result.table


def _class_eces(scores: np.ndarray, labels: np.ndarray, n_bins: int) -> list[float]:
    """Each class's ECE (l1, quantile bins): its scores against ``1{y = j}``; their mean is the
    class-wise ECE of :data:`iml.calibration.MULTICLASS_METRICS`."""
    s = np.clip(scores, _CLIP, 1 - _CLIP).astype(np.float32)
    return [
        float(expected_calibration_error(s[:, j], (labels == j).astype(np.int32), n_bins))
        for j in range(s.shape[-1])
    ]
