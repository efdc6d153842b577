"""The revealed experiments of a run (``iml.pipeline.reveal``): which verdicts change with the
bins, and what the record's intervals cover."""

from __future__ import annotations

import numpy as np

from iml.grids import loss_family
from iml.pipeline.reveal import fragile, intervals_cover
from iml.pipeline.reveal_input import reveal_input


def test_a_verdict_that_changes_with_the_bins_is_fragile():
    sensitivity = {
        "adaptive": {"nis": {"rejected": True}, "niac": {"rejected": False}},
        "quantile_5": {"nis": {"rejected": True}, "niac": {"rejected": True}},
        "quantile_10": {"nis": {"rejected": True}, "niac": {"rejected": False}},
    }
    assert fragile(sensitivity) == {"nis": False, "niac": True}


def test_the_intervals_cover_the_seeds_only_where_a_model_has_several():
    rng = np.random.default_rng(0)
    scores, labels = rng.random((2, 50)), (rng.random(50) < 0.3).astype(int)
    one = reveal_input([0.3, 0.7], scores, labels, loss_family("log"))
    assert "not the noise of training" in intervals_cover(one)
    stack = np.stack([scores, scores[::-1]])  # two seeds, each model trained with both
    two = reveal_input([0.3, 0.7], scores, labels, loss_family("log"), seed_scores=stack,
                       seeds=[0, 1])  # fmt: skip
    assert "over its training seeds (2 a model)" in intervals_cover(two)
