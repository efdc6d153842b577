"""Running an experiment: load the data, plan the grid, train and score every member batch.

A run is a directory managed by :class:`~iml.pipeline.store.RunStore`: ``manifest.json`` (config,
package versions, seeds, devices), ``data/folds.npz`` (labels and fold of every observation) and
one ``batches/batch-NNNN.npz`` per finished member batch (each member's per-observation test
scores and its training history). Every entry is written atomically, so a run killed at any moment
(``kill -9`` included) and started again skips the finished batches, resumes the interrupted one
from its last checkpoint (``checkpoints/``, removed once the batch is stored) and ends with the
same results as an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from iml.data import Dataset, load_dataset
from iml.models import CONV_IMPLS, densenet121, densenet_small, min_input_size
from iml.pipeline.plan import MemberBatch, Plan, check_betas, make_plan
from iml.pipeline.store import RunStore
from iml.training import (
    DataSource,
    MemberHistory,
    MemberSpec,
    TrainConfig,
    predict_ensemble,
    train_ensemble,
)
from iml.training.host import host_memory_record

__all__ = [
    "MODELS",
    "build_model",
    "check_config",
    "default_config",
    "load_run_data",
    "plan_run",
    "run_experiment",
]

MODELS = ("densenet_tiny", "densenet_small", "densenet121")
# Image datasets up to this many bytes are read into memory once (digits, PneumoniaMNIST).
_IN_MEMORY_BYTES = 1 << 30


def default_config() -> ml_collections.ConfigDict:
    """The default experiment: digits (8 vs rest) at 4 px, a small DenseNet, beta 0.5/0.9/0.99.

    Chosen so that ``iml reproduce`` finishes within 10 minutes on a 2-core CPU: 10 folds rotated
    7/2/1 (30 members; the 3 of a rotation trained together), 3 epochs at learning rate 1e-3.

    The digits are shrunk from their native 8 px to 4 px so that the task is uncertain: at 8 px
    the eights are almost separable (AUROC 0.995), nearly every score lies at 0 or 1 and most
    deciles hold no eight, so Figures 3 and 4 have two or three points per curve. At 4 px (AUROC
    about 0.98, 9.7% positive) the upper deciles hold rates from 1% to 80%, along which the raw
    curves fan out by beta as ``c^beta`` predicts and the loss-corrected ones meet the diagonal
    (``docs/results/reproduce_digits``).
    """
    c = ml_collections.ConfigDict()
    c.dataset = "digits"
    c.data_dir = ""  # '' = iml.data.default_data_dir()
    c.manual_dir = ""
    c.max_examples = 0  # 0 = all; else a random subset of this many (quick runs, tests)
    c.image_size = 4  # digits shrunk from their native 8 px: an uncertain task (see above)
    c.model = "densenet_small"
    # '' = random initial weights; else a torchvision DenseNet .pth file (the paper starts from
    # torchvision's ImageNet densenet121), adapted to the images' channels, with a fresh head
    c.weights = ""
    c.betas = (0.5, 0.9, 0.99)
    c.seeds = (0,)
    c.n_folds = 10
    c.n_val_folds = 2
    c.n_test_folds = 1
    c.rotations = ()  # () = one full cycle
    c.fold_seed = 0
    c.members_per_batch = 0  # 0 = len(betas) * len(seeds): one rotation per batch
    c.epochs = 3
    c.batch_size = 16
    c.learning_rate = 1e-3
    c.patience = 5
    c.plateau_patience = 1
    c.flip = False
    c.normalize = "imagenet"
    # '' = the backend's default (iml.training.DEFAULT_MEMBER_BATCHING: 'mixed' on a CPU, where it
    # trains a DenseNet-121 about 1.5-2x faster than 'xla', docs/results/cpu_train_step)
    c.conv_impl = ""
    c.checkpoint = True
    c.n_bins = 10
    c.n_bootstrap = 200
    c.report_seed = 0
    return c


def _positive_int(config: Mapping[str, Any], name: str, minimum: int = 1) -> None:
    value = config[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"config.{name} must be an integer >= {minimum}, got {value!r}")


def check_config(config: Mapping[str, Any]) -> None:
    """Check a run's config before any work starts.

    Raises:
      ValueError: naming the first bad key: an unknown key, an unknown dataset or model, a beta
        outside ``(0, 1)``, a non-positive count.
      FileNotFoundError: for a data, manual or CSV path that does not exist.
    """
    known = set(default_config().keys())
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f"unknown config key(s) {unknown}; known keys: {sorted(known)}")
    missing = sorted(known - set(config))
    if missing:
        raise ValueError(f"config lacks key(s) {missing}")
    from iml.data import DATASETS

    if config["dataset"] not in DATASETS:
        raise ValueError(f"unknown dataset {config['dataset']!r}; expected one of {list(DATASETS)}")
    if config["dataset"] in ("csv", "adult", "letter"):
        raise ValueError(
            f"dataset {config['dataset']!r} is tabular; `iml reproduce` trains DenseNets on images "
            "(digits, pneumoniamnist, chestxray14); `iml sweep` takes tables"
        )
    if config["model"] not in MODELS:
        raise ValueError(f"unknown model {config['model']!r}; expected one of {list(MODELS)}")
    check_betas(config["betas"])
    for name in ("image_size", "n_folds", "n_test_folds", "epochs", "batch_size", "n_bins"):
        _positive_int(config, name)
    for name in ("max_examples", "n_val_folds", "fold_seed", "members_per_batch", "report_seed"):
        _positive_int(config, name, 0)
    _positive_int(config, "patience")
    if config["n_folds"] - config["n_val_folds"] - config["n_test_folds"] < 1:
        raise ValueError(
            f"config.n_folds={config['n_folds']} leaves no training fold after "
            f"n_val_folds={config['n_val_folds']} and n_test_folds={config['n_test_folds']}"
        )
    _positive_int(config, "plateau_patience")
    _positive_int(config, "n_bootstrap")
    if not (np.isfinite(config["learning_rate"]) and config["learning_rate"] > 0):
        raise ValueError(f"config.learning_rate must be positive, got {config['learning_rate']!r}")
    seeds = list(config["seeds"])
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
        raise ValueError(f"config.seeds must be non-negative integers, got {seeds!r}")
    for name in ("data_dir", "manual_dir"):
        if config[name] and not Path(config[name]).expanduser().is_dir():
            raise FileNotFoundError(f"config.{name}: directory not found: {config[name]}")
    if config["weights"] and not Path(config["weights"]).expanduser().is_file():
        raise FileNotFoundError(f"config.weights: file not found: {config['weights']}")
    if config["conv_impl"] and config["conv_impl"] not in CONV_IMPLS:
        raise ValueError(
            f"config.conv_impl must be '' (the backend's default) or one of {CONV_IMPLS}, "
            f"got {config['conv_impl']!r}"
        )
    model = build_model(config)
    if config["image_size"] < min_input_size(model):
        raise ValueError(
            f"config.image_size={config['image_size']} is too small for {config['model']} "
            f"(at least {min_input_size(model)} px)"
        )


def build_model(config: Mapping[str, Any]) -> Any:
    """The (unbound) Flax model named by ``config['model']``, with one output (binary task).

    ``densenet121``: torchvision's DenseNet-121 (the paper's); ``densenet_small``:
    :func:`iml.models.densenet_small` (blocks 2-4-4); ``densenet_tiny``: blocks 1-1, growth 4.
    """
    if config["model"] == "densenet121":
        return densenet121(num_outputs=1)
    if config["model"] == "densenet_small":
        return densenet_small(num_outputs=1)
    if config["model"] == "densenet_tiny":
        # Two blocks of one layer: for smoke runs and tests, where compile time dominates.
        return densenet_small(
            num_outputs=1, block_config=(1, 1), growth_rate=4, num_init_features=8
        )
    raise ValueError(f"unknown model {config['model']!r}; expected one of {list(MODELS)}")


def _dataset(config: Mapping[str, Any]) -> Dataset:
    dataset = load_dataset(
        config["dataset"],
        data_dir=config["data_dir"] or None,
        manual_dir=config["manual_dir"] or None,
        image_size=int(config["image_size"]),
    )
    n = int(config["max_examples"])
    if not n or n >= dataset.num_examples:
        return dataset
    # A fixed random subset (a deterministic function of fold_seed), re-indexed from 0.
    rng = np.random.default_rng(np.random.SeedSequence([int(config["fold_seed"]), n]))
    keep = np.sort(rng.choice(dataset.num_examples, size=n, replace=False))
    return dataclasses.replace(
        dataset,
        labels=dataset.labels[keep],
        groups=np.asarray(dataset.groups)[keep],
        ids=np.asarray(dataset.ids)[keep],
        reader=lambda idx: dataset.get_batch(keep[idx]),
        split=None if dataset.split is None else dataset.split[keep],
        classes=None if dataset.classes is None else dataset.classes[keep],
    )


def plan_run(config: Mapping[str, Any], dataset: Dataset) -> Plan:
    """The member grid of ``config`` over ``dataset`` (folds grouped by patient, stratified)."""
    groups = dataset.groups
    has_groups = len(np.unique(groups)) < dataset.num_examples
    return make_plan(
        dataset.num_examples,
        betas=config["betas"],
        seeds=config["seeds"],
        labels=dataset.labels,
        groups=groups if has_groups else None,
        n_folds=int(config["n_folds"]),
        n_val_folds=int(config["n_val_folds"]),
        n_test_folds=int(config["n_test_folds"]),
        rotations=list(config["rotations"]) or None,
        fold_seed=int(config["fold_seed"]),
        members_per_batch=int(config["members_per_batch"]) or None,
    )


def _train_config(config: Mapping[str, Any]) -> TrainConfig:
    return TrainConfig(
        learning_rate=float(config["learning_rate"]),
        batch_size=int(config["batch_size"]),
        max_epochs=int(config["epochs"]),
        patience=int(config["patience"]),
        plateau_patience=int(config["plateau_patience"]),
        flip=bool(config["flip"]),
        normalize=str(config["normalize"]),
        conv_impl=str(config["conv_impl"]) or None,
    )


def _as_float(images: np.ndarray) -> np.ndarray:
    # The trainer accepts uint8 or [0, 1] floats; floats keep model initialisation on one path.
    return np.asarray(images, np.float32) / np.float32(255.0)


def initial_variables(config: Mapping[str, Any], model: Any, channels: int) -> dict | None:
    """The members' starting variables: ``None`` (random) or ``config['weights']`` converted.

    The torchvision file's first convolution is adapted to ``channels`` image channels and its
    classifier replaced by a fresh one-logit head
    (:func:`iml.models.load_torchvision_densenet`); a file that does not fit ``model`` raises a
    ``ValueError`` naming the first key that does not match.
    """
    if not config["weights"]:
        return None
    from iml.models import load_torchvision_densenet

    path = Path(config["weights"]).expanduser()
    return load_torchvision_densenet(path, model, head="init", in_channels=int(channels))


def _source(dataset: Dataset) -> DataSource:
    n = dataset.num_examples
    if n * int(np.prod(dataset.input_shape)) <= _IN_MEMORY_BYTES:
        images = _as_float(dataset.get_batch(np.arange(n)))
        return DataSource.from_arrays(images, dataset.labels)
    return DataSource(
        get_batch=lambda idx: _as_float(dataset.get_batch(idx)), labels=dataset.labels
    )


def _history_arrays(history: list[MemberHistory], epochs: int) -> dict[str, np.ndarray]:
    def padded(name: str) -> np.ndarray:
        out = np.full((len(history), epochs), np.nan)
        for k, h in enumerate(history):
            values = getattr(h, name)
            out[k, : len(values)] = values
        return out

    return {
        "train_loss": padded("train_loss"),
        "val_loss": padded("val_loss"),
        "lr": padded("lr"),
        "stopped_epoch": np.array(
            [-1 if h.stopped_epoch is None else h.stopped_epoch for h in history]
        ),
        "diverged": np.array([h.diverged for h in history]),
        "best_val_loss": np.array([h.best_val_loss for h in history]),
    }


def _run_batch(
    store: RunStore,
    batch: MemberBatch,
    model: Any,
    source: DataSource,
    config: Mapping[str, Any],
    progress: bool,
    init_variables: dict | None = None,
) -> None:
    train_config = _train_config(config)
    specs = [
        MemberSpec(
            beta=m.beta,
            seed=m.seed,
            train_idx=m.split.train,
            val_idx=m.split.val,
            test_idx=m.split.test,
            fold=m.rotation,
        )
        for m in batch.members
    ]
    ckpt = store.root / "checkpoints" / f"batch-{batch.index:04d}"
    states, history = train_ensemble(
        model,
        specs,
        source,
        train_config,
        checkpoint_dir=str(ckpt) if config["checkpoint"] else None,
        init_variables=init_variables,
        progress=progress,
    )
    tests = [s.test_idx for s in specs]
    scores = predict_ensemble(model, states, source, tests, train_config)
    store.save_arrays(
        batch.key,
        member_index=np.array([m.index for m in batch.members]),
        beta=np.array([m.beta for m in batch.members]),
        rotation=np.array([m.rotation for m in batch.members]),
        seed=np.array([m.seed for m in batch.members]),
        test_idx=np.concatenate(tests),
        test_scores=np.concatenate([np.asarray(s, np.float32) for s in scores]),
        test_offsets=np.cumsum([0] + [len(t) for t in tests]),
        **_history_arrays(history, int(config["epochs"])),
    )
    shutil.rmtree(ckpt, ignore_errors=True)


def load_run_data(config: Mapping[str, Any]) -> tuple[Dataset, Plan]:
    """Check ``config``, load its dataset and plan its grid (no training)."""
    check_config(config)
    dataset = _dataset(config)
    return dataset, plan_run(config, dataset)


def _as_stored(config: Mapping[str, Any], store: RunStore) -> dict[str, Any]:
    """``config`` without the keys a stored run predates, where they hold their defaults.

    A key added to :func:`default_config` after a run was started, left at its default, does not
    make that run different, so it can still be resumed; nor does a key removed since
    (:data:`RETIRED_KEYS`), which the stored run holds at its only value.
    """
    manifest = store.manifest()
    if manifest is None:
        return dict(config)
    stored, defaults = manifest.get("config", {}), default_config()
    out = {k: v for k, v in config.items() if k in stored or v != defaults[k]}
    # Keys that runs made before their removal hold, at the only value they could take.
    out.update({k: v for k, v in RETIRED_KEYS.items() if stored.get(k) == v})
    return out


#: Config keys that are gone, with the value every run that stored them held.
RETIRED_KEYS = {"csv_path": "", "csv_target": ""}


def run_experiment(
    config: Mapping[str, Any], out: str | Path, *, progress: bool = True
) -> RunStore:
    """Train and score every member batch of ``config`` not yet stored in ``out``.

    Args:
      config: a run config (keys of :func:`default_config`).
      out: the run directory; a directory holding a run with another config is refused.
      progress: show progress bars (members with time left; epochs of the current batch).

    Returns:
      The run's :class:`RunStore`, with every batch stored.
    """
    config = dict(config)
    dataset, plan = load_run_data(config)
    model = build_model(config)
    init_variables = initial_variables(config, model, dataset.input_shape[-1])
    store = RunStore(out)
    store.open_run(
        _as_stored(config, store),
        devices=[str(d) for d in jax.devices()],
        extra={
            "seeds": {"members": list(plan.seeds), "folds": int(config["fold_seed"])},
            "num_examples": dataset.num_examples,
            "num_members": len(plan.members),
            "num_batches": len(plan.batches),
            "host_memory": host_memory_record(),
        },
    )
    store.save_arrays("data/folds", labels=dataset.labels, fold_ids=plan.fold_ids)
    todo = [b for b in plan.batches if not store.has(b.key)]
    done_members = len(plan.members) - sum(len(b.members) for b in todo)
    if not todo:
        return store
    source = _source(dataset)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(plan.members), initial=done_members, desc="members", unit="member")
    try:
        for batch in todo:
            _run_batch(store, batch, model, source, config, progress, init_variables)
            if bar is not None:
                bar.update(len(batch.members))
    finally:
        if bar is not None:
            bar.close()
    shutil.rmtree(store.root / "checkpoints", ignore_errors=True)
    return store
