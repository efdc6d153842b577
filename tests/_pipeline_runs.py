"""Configs of runs on images for the pipeline's tests: the default with keys set by dotted name,
and a small multiclass run; and a member batch stored from given scores. The tiny ``iml
reproduce`` run that conftest's ``tiny_reproduce_run`` trains once per test worker, and how a
test runs ``iml`` as a process."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from _training_helpers import FAST_COMPILE

from iml.pipeline.defaults import default_config


def run_config(**values):
    """The default config with ``values`` set by dotted key (``"train.max_epochs": 1``)."""
    config = default_config()
    for key, value in values.items():
        *sections, name = key.split(".")
        section = config
        for part in sections:
            section = section[part]
        section[name] = value
    return config


#: A multiclass run of the tiny DenseNet on 400 digits at 8 px, every member in one trainer call.
MULTICLASS = {
    "data.classes": "all",
    "data.image_size": 8,
    "data.max_examples": 400,
    "data.n_folds": 5,
    "data.n_val_folds": 1,
    "model.name": "densenet_tiny",
    "loss.name": "class_weighted_softmax",
    "loss.weights": "ones;w[8]=10",
    "train.max_epochs": 1,
    "plan.members_per_batch": 10,  # every member in one call of the trainer
    "plan.checkpoint": False,
    "eval.n_bins": 5,
}


def save_batch(store, key, members):
    """A stored member batch of ``(beta, test_idx, test_scores)`` members, in the store's layout
    (:func:`iml.pipeline.store.member_entry`'s arrays that aggregation reads)."""
    tests = [np.asarray(m[1]) for m in members]
    store.save_arrays(
        key,
        beta=np.array([m[0] for m in members]),
        test_idx=np.concatenate(tests),
        test_scores=np.concatenate([np.asarray(m[2], np.float32) for m in members]),
        test_offsets=np.cumsum([0] + [len(t) for t in tests]),
    )


ROOT = Path(__file__).resolve().parents[1]

#: The tiny ``iml reproduce`` run: the tiny DenseNet on 160 digits at 8 px, four folds, two betas,
#: one epoch, stored as four batches of two members (tests/commands/test_experiment.py reads it,
#: tests/pipeline/test_distributed.py compares two processes' tables with its table).
TINY_REPRODUCE = [
    "reproduce",
    "--no-progress",
    "--config.model.name=densenet_tiny",
    "--config.data.n_folds=4",
    "--config.train.max_epochs=1",
    "--betas",
    "0.5",
    "0.9",
    "--config.data.image_size=8",
    "--config.data.n_val_folds=1",
    "--config.eval.n_bootstrap=20",
    "--config.data.max_examples",
    "160",
    "--config.train.batch_size=8",
    "--config.plan.members_per_batch=2",
]


def iml_process_env(cache: Path) -> dict[str, str]:
    """The environment of an ``iml`` command a test runs as a process: XLA's fast compile (not
    conftest's eight devices: ``iml`` takes one per core), this checkout on the path, and JAX's
    compilation cache in ``cache``, every program kept, so that a later run loads the programs
    an earlier one compiled."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = FAST_COMPILE
    env["JAX_COMPILATION_CACHE_DIR"] = str(cache)
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_iml(args, env, **kwargs) -> subprocess.CompletedProcess:
    """``python -m iml.cli ARGS`` from the repository root, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "iml.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,
    )
