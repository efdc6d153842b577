"""A sweep's outputs: its Markdown table, its scores and its figures (what ``iml sweep`` writes
beside the store's ``sweep_table.json``), each file written atomically."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from iml._io import atomic_write_bytes, atomic_write_text, file_stem
from iml.pipeline.markdown import markdown_by_loss
from iml.pipeline.sweep import SweepResult
from iml.plots import figure_calibration_by_loss, reliability_by_class, save_figure

__all__ = ["write_sweep_outputs"]


def write_sweep_outputs(
    out: str | Path,
    result: SweepResult,
    prevalence: float | None,
    title: str,
    class_names: Sequence[str] | None = None,
) -> list[Path]:
    """Write a sweep's Markdown table, scores and figures into ``out``, each file atomically.

    Files: ``sweep_table.md`` (:func:`iml.pipeline.markdown.markdown_by_loss`),
    ``scores.npz`` (keys, labels, fold ids, raw and loss-corrected ensemble scores, the betas of
    a beta grid, and, for binary losses trained with several seeds, each seed's scores
    ``member_scores`` and ``seeds``),
    ``ece_vs_beta`` (the ECE of both against the loss, PNG and PDF) and, for multiclass losses, one
    ``reliability_by_class/KEY`` figure per loss. The JSON table is the store's
    (``sweep_table.json``, written by :func:`execute_sweep`).

    Args:
      out: the output folder.
      result: the sweep's result.
      prevalence: the positive rate, drawn on the figure (None for multiclass losses).
      title: the figures' title.
      class_names: names of the classes of a multiclass sweep.

    Returns:
      The paths of the figures written.
    """
    out = Path(out)
    key_name = "beta" if result.betas is not None else "loss"
    if result.losses is not None and result.betas is not None:  # beta, or the focal loss's alpha
        key_name = result.losses.record.class_weight or key_name
    atomic_write_text(out / "sweep_table.md", markdown_by_loss(result.table, key_name))
    buffer = io.BytesIO()
    arrays = {"keys": np.asarray(result.keys), "labels": result.labels,
              "fold_ids": result.fold_ids, "scores": result.scores.astype(np.float32),
              "corrected": result.corrected.astype(np.float32)}  # fmt: skip
    if result.betas is not None:
        arrays["betas"] = result.betas
    if result.member_scores.ndim == 3 and result.member_scores.shape[1] > 1:
        # Each seed's binary scores [m, S, N]: what `iml reveal` resamples for training noise.
        arrays["member_scores"] = result.member_scores.astype(np.float32)
        arrays["seeds"] = np.asarray(result.seeds, np.int64)
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
            paths += save_figure(fig, out / "reliability_by_class" / file_stem(key), ("png",))
    return paths
