"""The tables and training settings the sweep's, reveal's and the tabular trainer's tests share:
data where (multinomial) logistic regression is well specified, one training configuration for
every test, so that the compiled programs are shared, and a sweep's folder written from given
scores."""

import dataclasses
from pathlib import Path

import numpy as np

from iml.models import LogisticRegression
from iml.pipeline.store import RunStore
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


def three_class_table() -> tuple[np.ndarray, np.ndarray]:
    """``N`` rows where multinomial logistic regression is well specified (3 classes)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(N, D)).astype(np.float32)
    logits = x @ np.array([[1.5, -1.0, 0.0], [-0.5, 1.0, 0.5], [0.5, 0.0, -1.0]])
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = (rng.random((N, 1)) > np.cumsum(p, axis=1)).sum(1).astype(np.int32)
    return x, y


def write_sweep_scores(out: Path, scores, labels, betas=None, loss=None, keys=None) -> Path:
    """A sweep folder in the layout of `iml sweep` (write_sweep_outputs' scores.npz and the
    store's manifest) from given scores, with neither training nor figures."""
    scores = np.asarray(scores, np.float32)
    keys = keys or [repr(float(b)) for b in betas]
    arrays = {"keys": np.asarray(keys), "labels": np.asarray(labels, np.int32),
              "fold_ids": np.arange(np.size(labels)) % 10, "scores": scores,
              "corrected": scores}  # fmt: skip
    if betas is not None:
        arrays["betas"] = np.asarray(betas, np.float64)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "scores.npz", **arrays)
    if loss is None and betas is not None:
        config = {"betas": np.asarray(betas).tolist()}
    else:
        config = {"loss": loss.to_config() if loss is not None else {"name": "matrix"}}
    RunStore(out).open_run({**config, "seeds": [0], "n_folds": 10})
    return out
