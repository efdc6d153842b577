"""What reveal reads from a run (``iml.pipeline.reveal_input``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from iml.pipeline import sweep as S
from iml.pipeline.store import RunStore
from iml.training import TrainConfig
from iml.training.tabular import TABULAR_DEFAULTS

N, D = 2000, 3


BETAS = [0.5, 0.9]


# One training configuration for every test, so that the compiled programs are shared.
TRAIN = {"max_epochs": 40, "batch_size": 128, "learning_rate": 0.05, "patience": 4, "l2": 0.0,
         "standardize": False}  # fmt: skip


def table_config(**fields) -> TrainConfig:
    """The sweeps' configuration of the trainer with ``fields`` changed."""
    return dataclasses.replace(TABULAR_DEFAULTS, **fields)


@pytest.fixture(scope="module")
def simulated() -> tuple[np.ndarray, np.ndarray]:
    """Data where logistic regression is well specified: y ~ Bernoulli(sigmoid(w.x + b))."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    logits = x @ np.array([1.5, -1.0, 0.5]) - 2.0
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-logits))).astype(np.int32)
    return x, y


def test_reveal_names_a_sweep_that_has_not_finished(simulated, tmp_path):
    from iml.pipeline.reveal_input import load_reveal_input

    x, y = simulated
    plan = S.plan_sweep(x, y, None, BETAS, train=table_config(**TRAIN))
    store = RunStore(tmp_path / "run")
    store.open_run(plan.run_config, devices=[])
    store.save_arrays("data/folds", labels=y, fold_ids=plan.fold_ids)  # as a sweep's first step
    with pytest.raises(ValueError, match="an `iml sweep` run that has not finished"):
        load_reveal_input(store.root)
