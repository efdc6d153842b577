"""Reporting a run of either kind: its table (JSON and Markdown), its scores, Figures 1-4 of a
binary grid, the figures by class of a multiclass one, and the revealed experiments
(:mod:`iml.pipeline.reveal`) of either (:func:`report_run`), from its stored member batches.

A binary grid's table is keyed by its class weights (exact keys,
:func:`iml.calibration.beta_key`), then by method, then by metric::

    {"0.9": {"raw": {"ece": ..., "ece_debiased": ..., "smooth_ece": ..., "brier": ...,
                     "log_loss": ..., "auroc": ..., "loss_calibration": {...},
                     "ece_interval": [low, high]},
             "loss_corrected": {..., "ece_interval": [low, high], "ece_minus_raw": ...,
                                "ece_minus_raw_interval": [low, high]},
             "platt": {...}, "beta": {...}, "temperature": {...}, "isotonic": {...},
             "histogram": {...}, "prior_shift": {...}}, ...}

``raw`` are the ensemble scores, ``loss_corrected`` their loss-corrected scores
``(c^beta)^{-1}(a)`` (Corollary 1; nothing is fitted), and the other methods are recalibration
baselines fitted by cross-fitting over the outer folds (:func:`iml.pipeline.scores.run_table`).
``beta`` is beta calibration (Kull et al. 2017; the method's name, not the class weight), which
contains the loss correction as its case ``a = b = 1``, ``c = -logit(beta)``. ``prior_shift`` is
eq. ``correct-prior`` with the training prior that the beta-weighted loss implies; as the paper
notes (Section 4), it then coincides with the loss correction. ``raw`` also carries the
loss-calibration test (Definition 2) of the raw scores for their weight, its verdict adjusted
over the grid (:func:`iml.calibration.loss_calibration_verdicts`).
"""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from iml import _validation as V
from iml import config as config_lib
from iml import losses as L
from iml._device import usable_cores
from iml._io import atomic_write_bytes, file_stem
from iml.calibration import RENORMALISED, expected_calibration_error
from iml.pipeline.beside import Beside, call_beside
from iml.pipeline.defaults import check_eval_settings, default_config
from iml.pipeline.markdown import markdown_by_loss, markdown_by_method
from iml.pipeline.reveal import reveal_run
from iml.pipeline.reveal_input import RevealInput, check_reveal_input, class_input, reveal_input
from iml.pipeline.scores import RunScores, scored_table, stored_scores
from iml.pipeline.store import RunStore, check_stored_run
from iml.plots import (
    drawn_rows,
    figure1_calibration_curves,
    figure2_theoretical_curves,
    figure3_loss_calibration,
    figure4_loss_corrected,
    figure_calibration_by_loss,
    figure_smooth_calibration,
    reliability_by_class,
    save_figure,
)

__all__ = ["BESIDE_MIN_SCORES", "report_run", "report_settings"]

#: Scores (losses times observations) from which :func:`report_run` makes a binary grid's
#: revealed experiments beside its table by default: a chosen size, well above the tests' small
#: runs (whose reports take seconds, so that a second process's start, a fresh interpreter that
#: loads or compiles its programs, would be much of their time) and below a 64-weight sweep
#: of a table of tens of thousands of rows.
BESIDE_MIN_SCORES = 2**20

_CLIP = 1e-7
# Figures 1-4 and the smooth curves of a longer grid draw this many of its class weights, evenly
# spaced along it: beyond a handful, curves and legend entries cover each other (the table and
# the ECE-by-loss figure keep every weight).
CURVES_DRAWN = 7


def _size_summary(scores: RunScores) -> dict[str, Any]:
    """Ensemble sizes per loss, by the grid's keys."""
    out = {}
    for key, sizes in zip(scores.grid.keys, scores.sizes, strict=True):
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
    scores: RunScores,
    settings: Mapping[str, Any],
    corrected: np.ndarray,
) -> None:
    """A report's ``table.json``, ``table.md``, ``ensemble.json`` (the ensemble sizes and the
    report's settings) and ``ensemble_scores.npz`` (see :func:`report_run`)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "table.json", json.dumps(table, indent=2).encode())
    atomic_write_bytes(out / "table.md", markdown.encode())
    record = {
        "ensemble_size": _size_summary(scores),
        "average": str(settings["average"]),
        "eval": dict(settings),
    }
    atomic_write_bytes(out / "ensemble.json", json.dumps(record, indent=2).encode())
    grid = scores.grid
    binary = scores.family is not None
    rows = {"betas": np.asarray(grid.weights, np.float64)} if binary else {}
    arrays = {**rows, "keys": np.asarray(grid.keys), "scores": scores.scores,
              "corrected": corrected, "sizes": scores.sizes, "labels": scores.labels,
              "fold_ids": scores.fold_ids}  # fmt: skip
    member = scores.member_scores
    if member is not None and member.ndim == 3 and member.shape[1] > 1:
        # Each seed's binary scores [m, S, N], for a user's own analysis of training noise.
        arrays["member_scores"] = member.astype(np.float32)
        arrays["seeds"] = np.asarray(scores.seeds, np.int64)
    RunStore(out).save_arrays("ensemble_scores", **arrays)


def report_settings(
    run: str | Path, eval_overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The report's settings (``config.eval``: ``n_bins``, ``n_bootstrap``, ``report_seed``,
    ``average``, ``figures``) that :func:`report_run` reports a stored run of either kind with:
    the run's own (the figures' formats of the schema where its record holds none), each key of
    ``eval_overrides`` in place of its own; checked before any work.

    Raises:
      FileNotFoundError: if ``run`` holds no manifest or no stored folds.
      ValueError: if the run has no finished member batch; naming the key, for a key that
        ``config.eval`` does not have, a value of another type than the key's, or a bad value
        (:func:`iml.pipeline.defaults.check_eval_settings`).
    """
    store = check_stored_run(run)
    config = default_config()
    recorded = store.manifest()["config"].get("eval", {})
    for key, value in {**recorded, **dict(eval_overrides or {})}.items():
        config_lib.override(config, f"eval.{key}", value)
    check_eval_settings(config.eval, min_bootstrap=0)
    return config_lib.to_dict(config.eval)


def _title(manifest: Mapping[str, Any], grid: Any, seeds: int) -> str:
    """A run's figures' title, e.g. ``digits: beta-weighted log loss, 64 losses x 1 seeds,
    logistic``: the grid's loss by its record's title, the same words for every loss."""
    data = manifest["config"].get("data", {})
    name = Path(data["path"]).stem if data.get("path") else data.get("name", "")
    model = manifest["config"].get("model", {}).get("name", "")
    return f"{name}: {grid.spec.record.title}, {len(grid.keys)} losses x {seeds} seeds, {model}"


def report_run(
    run: str | Path,
    out: str | Path | None = None,
    *,
    formats: Sequence[str] | None = None,
    eval_overrides: Mapping[str, Any] | None = None,
    progress: bool = False,
    beside: bool | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Score a stored run of either kind (images fed from the host, or a table on the device)
    and write its report; trains nothing.

    Writes into ``out`` (default: the run directory), each file atomically:

    * ``table.json`` and ``table.md``: the one table of every run
      (:func:`iml.pipeline.scores.run_table`): per loss, the raw and loss-corrected scores'
      metrics with the loss-calibration test (Definition 2); for a binary grid of class weights
      also the recalibration baselines, cross-fitted over the outer folds; each row's ridges
      where the members have one;
    * ``ensemble.json`` (ensemble sizes per loss and the report's settings) and
      ``ensemble_scores.npz`` (the grid's ``betas`` or ``keys``, ``scores``, ``corrected``,
      ``sizes``, ``labels``, ``fold_ids``; ``member_scores`` and ``seeds`` where the members of
      a binary grid kept their logits under several seeds);
    * ``figures/ece_by_loss``: the ECE of every loss before and after its correction;
    * a binary grid of class weights: ``figures/figure{1,2,3,4}`` (the paper's Figures 1-4) and
      the smooth reliability diagrams ``figures/smooth_{raw,corrected}``; with two weights or
      more, what the ensembles learned across them (:func:`iml.pipeline.reveal.reveal_run`, on
      the observations scored at every weight): ``revealed.json`` and
      ``figures/revealed_*``, or a warning saying why not;
    * a multiclass grid: ``ece_by_class.json`` (each class's ECE, raw and corrected) and
      ``figures/reliability_by_class/KEY``, a panel per class; with two losses or more, what
      the ensembles learned across them (the same :func:`iml.pipeline.reveal.reveal_run`, on
      the observations every loss scored: class-posterior experiments, the information about
      each class, ``G``, NIS, NIAC, the cost bounds and NIAS): ``revealed.json`` and
      ``figures/revealed_*``, or a warning saying why not.

    Args:
      run: a run directory (:func:`iml.pipeline.experiment.run`, :func:`iml.pipeline.sweep.
        run_sweep` with a store).
      out: where to write (created if missing).
      formats: figure formats; None: the report's ``config.eval.figures``; ``()``: none.
      eval_overrides: ``config.eval`` keys to report with instead of the run's own
        (:func:`report_settings`). The members are the same whatever these are, so a stored
        run can be reported several ways (into separate ``out`` directories); ``ensemble.json``
        records the settings used.
      progress: say each stage on stderr as it starts (the table, the figures, the revealed
        experiments and their simulated size and power).
      beside: make a binary grid's revealed experiments in a second process, beside the table
        and the figures (:func:`iml.pipeline.beside.call_beside`; the same files, to the last
        byte), where its loss is one iml ships unchanged or a function of a module
        (:func:`iml.losses.is_shipped`: a plugin's is looked up in this process alone); None:
        where their size and power are simulated, on a CPU of two cores or more, for a grid of
        at least :data:`BESIDE_MIN_SCORES` scores (losses times observations).

    Returns:
      The table.

    Raises:
      FileNotFoundError: if ``run`` holds no manifest or no stored folds.
      ValueError: if the run has no finished member batch, for a bad ``eval_overrides``
        (:func:`report_settings`) or ``beside``, or a run whose loss this process cannot rebuild
        (:func:`iml.pipeline.scores.stored_grid`).
    """
    if beside not in (None, True, False):
        raise ValueError(f"beside must be True, False or None (chosen by size); got {beside!r}")
    settings = report_settings(run, eval_overrides)
    if formats is not None:  # recorded in ensemble.json as the report's setting
        settings["figures"] = list(V.check_figure_formats("formats", formats))
    formats = tuple(settings["figures"])
    n_bins, n_bootstrap = int(settings["n_bins"]), int(settings["n_bootstrap"])
    seed = int(settings["report_seed"])
    store = RunStore(run)
    manifest = store.manifest()
    scores = stored_scores(run, str(settings["average"]))
    grid, family, labels = scores.grid, scores.family, scores.labels
    out = Path(out) if out is not None else store.root
    binary = family is not None
    revealing = None  # what the ensembles learned, across the grid's losses
    if grid.spec.multiclass and len(grid.keys) >= 2:
        inputs = class_input(grid, scores.scores, labels, scores.sizes, run=store.root,
                             kind=manifest["kind"], average=str(settings["average"]))  # fmt: skip
        revealing = _reveal(inputs, out, n_bins, n_bootstrap, seed, formats, progress,
                            simulate=False, beside=False)  # fmt: skip
    elif binary and len(grid.weights) >= 2:
        weights = [float(w) for w in grid.weights]
        inputs = reveal_input(weights, scores.scores, labels, family, sizes=scores.sizes,
                              kind=manifest["kind"], run=store.root)  # fmt: skip
        revealing = _reveal(inputs, out, n_bins, n_bootstrap, seed, formats, progress,
                            beside=beside)  # fmt: skip
    with revealing or contextlib.nullcontext():  # a process beside ends with the report
        table = _report(scores, settings, manifest, out, formats, progress)
        if revealing is not None:  # made here, after the table and figures, unless beside
            revealing.result()
    return table


def _report(
    scores: RunScores,
    settings: dict[str, Any],
    manifest: dict[str, Any],
    out: Path,
    formats: tuple[str, ...],
    progress: bool,
) -> dict[str, dict[str, dict[str, Any]]]:
    """:func:`report_run`'s table, its files and its figures (all but the revealed
    experiments')."""
    n_bins, n_bootstrap = int(settings["n_bins"]), int(settings["n_bootstrap"])
    seed = int(settings["report_seed"])
    say = _say if progress else lambda message: None
    grid, family, labels = scores.grid, scores.family, scores.labels
    say(
        f"the table of {len(grid.keys)} losses ({n_bootstrap} bootstrap replicates of each ECE"
        + (", the recalibration baselines cross-fitted)" if family is not None else ")")
    )
    table = scored_table(scores, n_bins, n_bootstrap, seed)
    binary = family is not None
    weight_name = family.weight_name if binary else "loss"
    markdown = (markdown_by_method if binary else markdown_by_loss)(table, weight_name)
    corrected = scores.corrected
    _write_tables(out, table, markdown, scores, settings, corrected)
    title = _title(manifest, grid, len(scores.seeds))
    if formats:
        say(f"the figures ({', '.join(formats)})")
        prevalence = None if grid.spec.multiclass else float(np.mean(labels))
        fig = figure_calibration_by_loss(table, prevalence=prevalence, title=title,
                                         weight_name=weight_name)  # fmt: skip
        save_figure(fig, out / "figures" / "ece_by_loss", formats)
    if grid.spec.multiclass:
        every = (scores.sizes > 0).all(axis=0)
        a, c, y = scores.scores[:, every], corrected[:, every], labels[every]
        by_class = {
            key: {"raw": _class_eces(ak, y, n_bins), "loss_corrected": _class_eces(ck, y, n_bins)}
            for key, ak, ck in zip(grid.keys, a, c, strict=True)
        }
        if grid.spec.record.domain == "box":  # the table's renormalised one-vs-rest posteriors
            for key, ck in zip(grid.keys, c, strict=True):
                by_class[key][RENORMALISED] = _class_eces(ck / ck.sum(-1, keepdims=True), y, n_bins)
        atomic_write_bytes(out / "ece_by_class.json", json.dumps(by_class, indent=2).encode())
        for key, ak, ck in zip(grid.keys if formats else (), a, c, strict=False):
            fig = reliability_by_class(ak, y, ck, None, n_bins, title=f"{title}: {key}")
            save_figure(fig, out / "figures" / "reliability_by_class" / file_stem(key), formats)
        return table
    if not binary:
        return table
    weights = [float(w) for w in grid.weights]
    scores_by_weight, labels_by_weight = {}, {}
    for row, weight in enumerate(weights):
        have = scores.sizes[row] > 0
        scores_by_weight[weight] = np.clip(scores.scores[row][have], _CLIP, 1 - _CLIP)
        labels_by_weight[weight] = labels[have]
    if formats:
        rows = drawn_rows(len(weights), CURVES_DRAWN)
        drawn = [weights[row] for row in rows]
        a = {w: scores_by_weight[w] for w in drawn}
        y = {w: labels_by_weight[w] for w in drawn}
        verdicts = {weights[row]: table[grid.keys[row]]["raw"]["loss_calibration"]["verdict"]
                    for row in rows}  # fmt: skip
        figures = {
            "figure1": figure1_calibration_curves(a, y, n_bins),
            "figure2": figure2_theoretical_curves(drawn, loss=family),
            "figure3": figure3_loss_calibration(a, y, n_bins, loss=family),
            "figure4": figure4_loss_corrected(a, y, n_bins, loss=family, verdicts=verdicts),
            "smooth_raw": figure_smooth_calibration(a, y, n_bootstrap=n_bootstrap, loss=family),
            "smooth_corrected": figure_smooth_calibration(a, y, corrected=True,
                                                          n_bootstrap=n_bootstrap, loss=family),
        }  # fmt: skip
        for name, fig in figures.items():
            if len(drawn) < len(weights):
                fig.supxlabel(f"{len(drawn)} of the run's {len(weights)} class weights, evenly "
                              "spaced along its grid; table.md holds every one",
                              fontsize="small")  # fmt: skip
            save_figure(fig, out / "figures" / name, formats)
    return table


def _reveal(
    inputs: RevealInput,
    out: Path,
    n_bins: int,
    n_bootstrap: int,
    seed: int,
    formats: Sequence[str],
    progress: bool,
    simulate: bool = True,
    beside: bool | None = None,
) -> Beside | None:
    """The revealed experiments of a report's grid (:func:`iml.pipeline.reveal.reveal_run`) as a
    call to wait for, started in a process beside this one where ``beside`` asks or (None)
    where it pays (see :func:`report_run`), else made here when waited for; or None, with a
    warning saying why not (:func:`iml.pipeline.reveal_input.check_reveal_input`).
    Where ``n_bootstrap`` is 100 or more, each verdict is also reached again at 5, 10 and 20
    quantile bins, and, with ``simulate``, the tests' size and power simulated (fewer replicates
    make both mere noise); a multiclass grid's size and power are left to ``iml reveal``, whose
    agents of n classes take minutes."""
    try:
        check_reveal_input(inputs, n_bins)
    except ValueError as err:  # e.g. one label among the observations every loss scored
        warnings.warn(f"no revealed experiments: {err}", RuntimeWarning, stacklevel=3)
        return None
    # Size and power simulated on 100 data sets of 200 replicates where the report runs at
    # least 100 replicates itself (fewer would make the rates mere noise).
    power_datasets = 100 if simulate and n_bootstrap >= 100 else 0
    if beside is None:
        beside = (power_datasets > 0 and inputs.scores.size >= BESIDE_MIN_SCORES
                  and usable_cores() >= 2 and jax.default_backend() == "cpu")  # fmt: skip
    settings = {
        "n_bins": n_bins,
        "n_bootstrap": max(n_bootstrap, 2),
        "seed": seed,
        "formats": formats,
        "power_datasets": power_datasets,
        "power_bootstrap": min(max(n_bootstrap, 2), 200),
        "sensitivity": n_bootstrap >= 100,
        "progress": progress,
    }
    if beside and inputs.loss is not None and inputs.loss.fn is None:
        # the process beside has the shipped losses only, and looks the loss up by its name
        beside = L.is_shipped(inputs.loss.name)
    if beside:
        return call_beside(reveal_run, inputs, out, **settings)
    return Beside(reveal_run, (inputs, out), settings, None, None)


def _say(message: str) -> None:
    print(f"  {message} ...", file=sys.stderr, flush=True)


def _class_eces(scores: np.ndarray, labels: np.ndarray, n_bins: int) -> list[float]:
    """Each class's ECE (l1, quantile bins): its scores against ``1{y = j}``; their mean is the
    class-wise ECE of :data:`iml.calibration.MULTICLASS_METRICS`."""
    s = np.clip(scores, _CLIP, 1 - _CLIP).astype(np.float32)
    return [
        float(expected_calibration_error(s[:, j], (labels == j).astype(np.int32), n_bins))
        for j in range(s.shape[-1])
    ]
