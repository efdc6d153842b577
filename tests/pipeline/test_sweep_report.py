"""A sweep's outputs (``iml.pipeline.sweep_report``): its Markdown table, its scores and its
figures, from a sweep's result."""

from __future__ import annotations

import numpy as np

from iml.calibration import table_by_loss
from iml.pipeline.sweep import SweepResult
from iml.pipeline.sweep_report import write_sweep_outputs


def test_a_sweep_writes_its_table_scores_and_figure(tmp_path):
    rng = np.random.default_rng(0)
    betas = np.array([0.3, 0.7])
    labels = (rng.random(400) < 0.3).astype(np.int32)
    member_scores = np.clip(0.3 + 0.4 * labels + 0.2 * rng.normal(size=(2, 2, 400)), 0.01, 0.99)
    scores = member_scores.mean(axis=1)
    table = table_by_loss(betas, scores, labels)
    result = SweepResult(betas, np.array([0, 1]), labels, np.arange(400) % 10, member_scores,
                         scores, scores, np.ones((2, 2, 10)), table, [0], None,
                         list(table))  # fmt: skip
    paths = write_sweep_outputs(tmp_path, result, float(labels.mean()), "simulated")
    assert {p.name for p in paths} == {"ece_vs_beta.png", "ece_vs_beta.pdf"}
    assert (tmp_path / "ece_vs_beta.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (tmp_path / "sweep_table.md").read_text().splitlines()
    assert markdown[0].startswith("| beta | raw ece | corr. ece |") and len(markdown) == 4
    first = next(iter(table))
    assert markdown[2].startswith(f"| {first} | {table[first]['raw']['ece']:.4f} |")
    with np.load(tmp_path / "scores.npz") as stored:
        # several seeds: each seed's scores too, for reveal's resampling of training noise
        assert sorted(stored.files) == ["betas", "corrected", "fold_ids", "keys", "labels",
                                        "member_scores", "scores", "seeds"]  # fmt: skip
        np.testing.assert_array_equal(stored["scores"], scores.astype(np.float32))
        assert stored["keys"].tolist() == list(table) and stored["seeds"].tolist() == [0, 1]
