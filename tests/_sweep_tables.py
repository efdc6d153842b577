"""The table and training settings the sweep's and the tabular trainer's tests share: data where
logistic regression is well specified, and one training configuration for every test, so that
the compiled programs are shared."""

import dataclasses

import numpy as np

from iml.models import LogisticRegression
from iml.training import TrainConfig
from iml.training.tabular import TABULAR_DEFAULTS

N, D = 2000, 3
TRAIN = {"max_epochs": 40, "batch_size": 128, "learning_rate": 0.05, "patience": 4, "l2": 0.0,
         "standardize": False}  # fmt: skip
LOGISTIC = LogisticRegression()


def table_config(**fields) -> TrainConfig:
    """The sweeps' configuration of the trainer with ``fields`` changed."""
    return dataclasses.replace(TABULAR_DEFAULTS, **fields)


def simulated_table() -> tuple[np.ndarray, np.ndarray]:
    """``N`` rows where logistic regression is well specified: y ~ Bernoulli(sigmoid(w.x + b))."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    logits = x @ np.array([1.5, -1.0, 0.5]) - 2.0
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-logits))).astype(np.int32)
    return x, y
