"""The tables and training settings the sweep's, reveal's and the tabular trainer's tests share:
data where (multinomial) logistic regression is well specified, one training configuration for
every test, so that the compiled programs are shared, and a sweep's folder written from given
scores."""

import dataclasses
from pathlib import Path

import numpy as np

from iml.grids import loss_grid
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


def write_sweep_scores(
    out: Path, scores, labels, betas=None, loss=None, keys=None, seeds=None, train=None
) -> Path:
    """A finished sweep's folder in the one layout of every run (manifest, folds, one member
    batch, and the table's marker) from given scores, with neither training nor figures: each
    loss's scores of every row (``[m, N]``), or with ``seeds``, each seed's (``[m, S, N]``)."""
    scores = np.asarray(scores, np.float32)
    members = scores if seeds is not None else scores[:, None]
    m, s, n = members.shape[:3]
    if loss is None and betas is not None:
        recorded = {"name": "log", "beta": np.asarray(betas, np.float64).tolist()}
    elif loss is None:
        recorded = {"name": "matrix"}
    elif loss.name == "callable":  # as plan_sweep records a callable: by its description
        recorded = loss.describe()
    else:  # as plan_sweep records a grid
        recorded = loss_grid(loss).to_config()
    record = {"data": {"n_folds": 10, "fold_seed": 0, "sha256": "0" * 64},
              "model": {"name": "logistic", "hidden": 32}, "loss": recorded,
              "train": dict(train or {}),
              "plan": {"seeds": list(seeds or [0]), "losses_per_batch": m},
              "eval": {"n_bins": 10, "average": "score", "n_bootstrap": 200, "report_seed": 0},
              "store": "batches"}  # fmt: skip
    store = RunStore(out)
    store.open_run(record, kind="table")
    store.save_arrays("data/folds", labels=np.asarray(labels, np.int32),
                      fold_ids=np.arange(n) % 10)  # fmt: skip
    store.save_arrays("batches/batch-0000", member_index=np.arange(m * s),
                      loss_index=np.repeat(np.arange(m), s), rotation=np.zeros(m * s, int),
                      seed=np.tile(list(seeds or [0]), m), test_idx=np.tile(np.arange(n), m * s),
                      test_scores=members.reshape(m * s * n, *members.shape[3:]),
                      test_offsets=np.arange(m * s + 1) * n)  # fmt: skip
    store.save_json("table", {str(k): {} for k in (keys or betas)})
    return out
