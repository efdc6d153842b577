"""The results store: every finished piece of work is one file, written atomically.

A run directory holds ``manifest.json`` (what was run, with which packages, seeds and devices)
and one entry per finished unit of work (a member batch, a table). An entry is written to a
temporary file in the same directory, flushed to disk, and renamed over its final name, so a
process killed at any moment (``kill -9`` included) leaves either the complete entry or none: a
restarted run trusts what it finds and skips it.

Both commands store their members in one layout, ``batches/batch-NNNN`` entries
(:func:`member_entry`), with ``data/folds`` (every observation's label and fold), and read the
ensemble scores back from them (:func:`load_ensemble`, :func:`aggregate_members`).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import io
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from iml import _validation as V
from iml import plugins
from iml._io import atomic_write_bytes
from iml.config import first_difference, lookup

if TYPE_CHECKING:  # the trainer loads Flax and optax, which reading a store does without
    from iml.training.train import Trained

__all__ = [
    "ENSEMBLE_AVERAGES",
    "KINDS",
    "SCHEMA",
    "EnsembleScores",
    "RunStore",
    "aggregate_members",
    "check_stored_run",
    "load_ensemble",
    "member_entry",
    "member_test_scores",
    "package_versions",
]

_PACKAGES = (
    "iml",
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "numpy",
    "tensorflow-datasets",
    "orbax-checkpoint",
)


#: The version of the manifest's layout that this iml writes and reads. Runs recorded at an
#: earlier one are rewritten once by ``python -m tools.migrate_runs RUN`` (from the repository
#: root), not read by the library.
SCHEMA = 6
#: What a run's members take, recorded as the manifest's ``kind``: ``"images"``, fed to the
#: devices in batches from the host, or ``"table"``, rows held whole on the device.
KINDS = ("images", "table")
_KIND_NAMES = {
    "images": "a run on images (`iml reproduce`)",
    "table": "a sweep of a table (`iml sweep`)",
}


def package_versions() -> dict[str, str]:
    """Installed versions of the packages a result depends on."""
    versions = {"python": sys.version.split()[0]}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


class RunStore:
    """A run directory (created if missing) of atomically written entries, keyed by
    '/'-separated names."""

    MANIFEST = "manifest.json"

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def manifest(self) -> dict[str, Any] | None:
        """The stored manifest, or None for a new run.

        Raises:
          ValueError: for a manifest of another schema than :data:`SCHEMA`, naming the command
            that migrates it.
        """
        path = self.root / self.MANIFEST
        if not path.exists():
            return None
        manifest = json.loads(path.read_text())
        schema = manifest.get("schema", 1) if isinstance(manifest, dict) else None
        if schema != SCHEMA:
            raise ValueError(
                f"{self.root} was recorded at manifest schema {schema}; this iml reads schema "
                f"{SCHEMA}: migrate it once with `python -m tools.migrate_runs {self.root}` "
                "from a clone of the iml repository"
            )
        return manifest

    def kind(self) -> str | None:
        """The recorded run's kind (:data:`KINDS`), or None for a new run."""
        manifest = self.manifest()
        return None if manifest is None else manifest["kind"]

    def open_run(
        self,
        config: Mapping[str, Any],
        *,
        kind: str,
        devices: list[str] | None = None,
        extra: Mapping | None = None,
    ) -> dict[str, Any]:
        """Start a run of ``kind`` (:data:`KINDS`), or resume one started with the same
        ``config``.

        The manifest records the plugins this process has loaded (``"plugins"``,
        :func:`iml.plugins.plugins_record`), which ``iml figures`` and ``iml reveal`` load again.
        A resume keeps the stored config (the same config, compared as :meth:`check_resumable`
        compares it), appends its time to the manifest's ``resumed_at`` and its platform,
        devices and package versions to ``resumed_on``, and adds the plugins it loaded that the
        manifest does not list. Where a float of ``config`` differs from the stored one within
        :data:`iml.config.FLOAT_RTOL` (a grid computed by an earlier version or on another CPU),
        the manifest takes ``config``, which this process trains and reports with, so that
        every file of the run keys its losses alike; ``resumed_on`` then records
        ``"config_within_rounding": true``.

        A run directory that holds a different config raises ``ValueError`` naming the first
        differing key, so that results of two experiments never mix.
        """
        asked = json.loads(json.dumps(dict(config)))
        config = self.check_resumable(config, kind)
        existing = self.manifest()
        if existing is not None:
            rounded = existing["config"] != asked
            existing["config"] = asked
            loaded = plugins.plugins_record()
            if existing.get("plugins") or any(loaded.values()):
                existing["plugins"] = plugins.merge_records(existing.get("plugins"), loaded)
            existing.setdefault("resumed_at", []).append(time.strftime("%Y-%m-%dT%H:%M:%S%z"))
            # where each resume ran: a run trained on a GPU machine may be finished on another
            existing.setdefault("resumed_on", []).append(
                {
                    "platform": platform.platform(),
                    "devices": devices or [],
                    "packages": package_versions(),
                    **({"config_within_rounding": True} if rounded else {}),
                }
            )
            self._write_manifest(existing)
            return existing
        manifest = {
            "schema": SCHEMA,
            "kind": kind,
            "config": config,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": sys.argv,
            "packages": package_versions(),
            "platform": platform.platform(),
            "devices": devices or [],
            "plugins": plugins.plugins_record(),
            **dict(extra or {}),
        }
        self._write_manifest(manifest)
        return manifest

    def check_resumable(self, config: Mapping[str, Any], kind: str) -> dict[str, Any]:
        """The config the run records, once ``config`` (a run of ``kind``) is checked against
        it; writes nothing. For a new run, ``config`` as JSON types.

        Raises:
          ValueError: if the directory holds a run with a different config, naming the first
            differing key (dotted, ``'train.max_epochs'``, inside nested sections), a run of the
            other kind, or a manifest of an earlier schema (:meth:`manifest`).
        """
        V.check_choice("kind", kind, KINDS)
        config = json.loads(json.dumps(dict(config)))  # normalise to JSON types
        existing = self.manifest()
        if existing is None:
            return config
        if existing["kind"] != kind:
            raise ValueError(
                f"{self.root} holds {_KIND_NAMES[existing['kind']]}, not {_KIND_NAMES[kind]}; "
                "choose another output directory"
            )
        stored = existing["config"]
        first = first_difference(stored, config)
        if first is not None:
            raise ValueError(
                f"{self.root} holds a run with a different config (first difference: "
                f"config.{first}: {lookup(stored, first)!r} stored, {lookup(config, first)!r} "
                "now); choose another output directory"
            )
        return stored

    def _write_manifest(self, manifest: Mapping[str, Any]) -> None:
        atomic_write_bytes(self.root / self.MANIFEST, json.dumps(manifest, indent=2).encode())

    def _path(self, key: str, suffix: str) -> Path:
        if not key or any(p in ("", ".", "..") or p.startswith(".") for p in key.split("/")):
            raise ValueError(
                f"store keys are '/'-separated names without '.'-prefixed parts; got {key!r}"
            )
        return self.root / (key + suffix)

    def has(self, key: str) -> bool:
        """True when the entry ``key`` was completely written (arrays or JSON)."""
        return self._path(key, ".npz").exists() or self._path(key, ".json").exists()

    def save_arrays(self, key: str, **arrays: Any) -> None:
        """Store named arrays under ``key`` (one ``.npz`` file, written atomically)."""
        buffer = io.BytesIO()
        np.savez(buffer, **{name: np.asarray(value) for name, value in arrays.items()})
        atomic_write_bytes(self._path(key, ".npz"), buffer.getvalue())

    def load_arrays(self, key: str) -> dict[str, np.ndarray]:
        """The arrays stored under ``key``."""
        path = self._path(key, ".npz")
        if not path.exists():
            raise FileNotFoundError(f"no arrays stored under {key!r} in {self.root}")
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}

    def save_json(self, key: str, obj: Any) -> None:
        """Store a JSON-serialisable object under ``key`` (written atomically)."""
        atomic_write_bytes(self._path(key, ".json"), json.dumps(obj, indent=2).encode())

    def load_json(self, key: str) -> Any:
        """The JSON object stored under ``key``."""
        path = self._path(key, ".json")
        if not path.exists():
            raise FileNotFoundError(f"no JSON stored under {key!r} in {self.root}")
        return json.loads(path.read_text())

    def keys(self, prefix: str = "") -> Iterator[str]:
        """Keys of the complete entries under ``prefix``, sorted (temporary files excluded)."""
        base = self.root / prefix if prefix else self.root
        if not base.exists():
            return iter(())
        found = []
        for path in base.rglob("*"):
            if (
                path.is_file()
                and path.suffix in (".npz", ".json")
                and not path.name.startswith(".")
            ):
                key = path.relative_to(self.root).with_suffix("").as_posix()
                if key != Path(self.MANIFEST).stem:
                    found.append(key)
        return iter(sorted(found))


@dataclasses.dataclass(frozen=True, eq=False)
class EnsembleScores:
    """Ensemble scores and sizes of every observation, one row per loss of the grid.

    Attributes:
      betas: the class weights in row order; for a multiclass grid, the losses' positions.
      scores: ``[len(betas), N]`` float64 mean test score, ``[len(betas), N, classes]`` for
        multiclass losses (NaN where the size is 0).
      sizes: ``[len(betas), N]`` int64 number of members whose test fold holds the observation.
    """

    betas: tuple[float, ...]
    scores: np.ndarray
    sizes: np.ndarray

    def for_beta(self, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, sizes)`` of one class weight."""
        row = self.betas.index(float(beta))
        return self.scores[row], self.sizes[row]


def member_entry(
    trained: Trained,
    members: Mapping[str, Sequence[Any]],
    tests: Sequence[np.ndarray],
    epochs: int | None = None,
) -> dict[str, np.ndarray]:
    """One stored member batch, the layout of every run's ``batches/batch-NNNN`` entries.

    Args:
      trained: the batch's members as :func:`iml.training.train` gave them.
      members: per member, in order: ``member_index``, the loss (``beta``, its class weight, or
        ``loss_index``, its position in the run's grid), ``rotation`` and ``seed``.
      tests: each member's test indices.
      epochs: the most epochs a member trains: the width of the per-epoch history of members
        fed from the host.

    Returns:
      The entry's arrays: those of ``members``, ``test_idx``, ``test_scores`` (float32) and
      ``test_offsets`` (member ``k``'s rows are ``test_offsets[k]:test_offsets[k + 1]``); the
      members' ``test_logits`` where the feed kept them; their per-epoch ``train_loss``,
      ``val_loss`` and ``lr``, ``stopped_epoch`` (-1: ran to the cap) and ``diverged`` (the host's
      feed) or ``best_epoch`` and ``epochs_run`` (the table's); ``best_val_loss``; and ``l2``,
      each member's ridge, where it has one.
    """
    entry = {name: np.asarray(values) for name, values in members.items()}
    entry |= {
        "test_idx": np.concatenate(tests),
        "test_scores": np.concatenate([np.asarray(s, np.float32) for s in trained.test_scores]),
        "test_offsets": np.cumsum([0] + [len(t) for t in tests]),
    }
    if trained.test_logits is not None:
        entry["test_logits"] = np.concatenate(
            [np.asarray(z, np.float32) for z in trained.test_logits]
        )
    if trained.history is not None:
        history = trained.history

        def padded(name: str) -> np.ndarray:
            out = np.full((len(history), int(epochs or 0)), np.nan)
            for k, h in enumerate(history):
                values = getattr(h, name)
                out[k, : len(values)] = values
            return out

        entry |= {
            "train_loss": padded("train_loss"),
            "val_loss": padded("val_loss"),
            "lr": padded("lr"),
            "stopped_epoch": np.array(
                [-1 if h.stopped_epoch is None else h.stopped_epoch for h in history]
            ),
            "diverged": np.array([h.diverged for h in history]),
        }
    else:
        entry |= {"best_epoch": trained.best_epoch, "epochs_run": np.asarray(trained.epochs_run)}
    entry["best_val_loss"] = np.asarray(trained.best_val_loss)
    if trained.l2 is not None:
        entry["l2"] = np.asarray(trained.l2, np.float64)
    return entry


def member_test_scores(
    entry: Mapping[str, np.ndarray], logits: bool = False
) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """Split one stored member batch into ``(beta, test_idx, test_scores)`` per member (the
    loss's position in the grid for runs over a grid of losses, whose batches store
    ``loss_index``); with ``logits``, the members' ``test_logits`` in place of their scores."""
    offsets = np.asarray(entry["test_offsets"])
    if "loss_index" in entry:
        keys = [float(k) for k in np.asarray(entry["loss_index"])]
    else:
        keys = [float(b) for b in np.asarray(entry["beta"], dtype=np.float64)]
    values = entry["test_logits" if logits else "test_scores"]
    out = []
    for k, key in enumerate(keys):
        lo, hi = int(offsets[k]), int(offsets[k + 1])
        out.append((key, entry["test_idx"][lo:hi], values[lo:hi]))
    return out


#: How an ensemble pools its members' test scores: ``"score"``, the mean of the scores (the
#: paper's ensemble), or ``"logit"``, the score of the mean of the members' logits (binary:
#: ``sigmoid(mean logit(a))``; multiclass: ``softmax(mean log a)``, the renormalised geometric
#: mean). Near 0 or 1 the mean of scores falls toward the least confident member, the mean of
#: logits does not (``docs/results/pneumoniamnist_lr_floor_seeds``).
ENSEMBLE_AVERAGES = ("score", "logit")


#: The float32 numbers next to 0 and 1 inside ``(0, 1)``: a stored score of exactly 0 or 1 (a
#: float32 sigmoid gives 1 for logits above about 16.6) counts as the nearest of them.
_INSIDE = (
    float(np.nextafter(np.float32(0), np.float32(1))),
    float(np.nextafter(np.float32(1), np.float32(0))),
)


def _to_logits(scores: np.ndarray) -> np.ndarray:
    """A member's scores as logits: ``logit(a)`` (binary ``[n]``) or ``log a`` (``[n, k]``, up to
    a constant per row), with scores of exactly 0 or 1 moved to the nearest float32 inside."""
    low, high = _INSIDE
    a = np.where(scores <= 0.0, low, np.where(scores >= 1.0, high, scores))
    if a.ndim == 1:
        return np.log(a) - np.log1p(-a)
    return np.log(a)


def _from_mean_logits(mean: np.ndarray, multiclass: bool) -> np.ndarray:
    """Scores of mean logits: the sigmoid, or the softmax over the last axis."""
    if not multiclass:  # the sigmoid, without cancellation at large negative logits
        e = np.exp(-np.abs(mean))
        return np.where(mean >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    shifted = np.exp(mean - np.max(mean, axis=-1, keepdims=True))
    return shifted / np.sum(shifted, axis=-1, keepdims=True)


def aggregate_members(
    members: Iterable[tuple[float, np.ndarray, np.ndarray]],
    betas: Sequence[float],
    num_examples: int,
    average: str = "score",
    link: Callable[[int, np.ndarray], np.ndarray] | None = None,
) -> EnsembleScores:
    """Ensemble score (the mean test score, or the score of the mean logit) and ensemble size per
    observation and beta.

    Args:
      members: ``(beta, test_idx, test_scores)`` of each member (test scores ``[n]``, or
        ``[n, classes]`` for multiclass losses, keyed by the loss's position in the grid).
      betas: the class weights of the run (rows of the result), or the grid's positions.
      num_examples: ``N``.
      average: how members pool (:data:`ENSEMBLE_AVERAGES`): ``"score"`` (the paper's) or
        ``"logit"``.
      link: for members given by their logits: ``link(row, logits)``, the scores of the loss of
        row ``row`` (float64); the logits of the members themselves then pool, not those of
        their scores.

    Returns:
      The :class:`EnsembleScores`.

    Raises:
      ValueError: for a member whose beta is not in ``betas``, or indices outside ``[0, N)``,
        or scores that are not finite probabilities, or an unknown ``average``.
    """
    V.check_choice("average", average, ENSEMBLE_AVERAGES)
    betas = tuple(float(b) for b in betas)
    total: np.ndarray | None = None
    sizes = np.zeros((len(betas), num_examples), dtype=np.int64)
    for beta, idx, scores in members:
        if float(beta) not in betas:
            raise ValueError(f"member beta {beta} is not one of the run's betas {list(betas)}")
        idx = np.asarray(idx, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float64)
        if idx.ndim != 1 or scores.shape[:1] != idx.shape or scores.ndim not in (1, 2):
            raise ValueError(f"test_idx {idx.shape} and test_scores {scores.shape} must match")
        if total is None:
            total = np.zeros((len(betas), num_examples, *scores.shape[1:]), dtype=np.float64)
        elif scores.shape[1:] != total.shape[2:]:
            raise ValueError(f"test_scores {scores.shape} differ in shape from earlier members'")
        if idx.size and (idx.min() < 0 or idx.max() >= num_examples):
            raise ValueError(f"test_idx must lie in [0, {num_examples})")
        row = betas.index(float(beta))
        if link is not None:  # logits
            if not np.all(np.isfinite(scores)):
                raise ValueError(f"test_logits of a member of row {row} are not finite")
            pooled = link(row, scores) if average == "score" else scores
        elif not np.all(np.isfinite(scores)) or (scores < 0).any() or (scores > 1).any():
            raise ValueError(f"test_scores of a beta={beta} member are not probabilities in [0, 1]")
        else:
            pooled = scores if average == "score" else _to_logits(scores)
        np.add.at(total[row], idx, pooled)
        np.add.at(sizes[row], idx, 1)
    if total is None:
        total = np.zeros((len(betas), num_examples), dtype=np.float64)
    per = sizes.reshape(sizes.shape + (1,) * (total.ndim - 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(per > 0, total / np.maximum(per, 1), np.nan)
        if average == "logit" and link is not None:
            scores = np.stack([link(row, values) for row, values in enumerate(mean)])
            mean = np.where(per > 0, scores, np.nan)
        elif average == "logit":
            mean = np.where(per > 0, _from_mean_logits(mean, total.ndim == 3), np.nan)
    return EnsembleScores(betas=betas, scores=mean, sizes=sizes)


def load_ensemble(
    store: RunStore, betas: Sequence[float], num_examples: int, average: str = "score"
) -> EnsembleScores:
    """Aggregate every member batch stored in ``store`` (entries under ``batches/``), pooling
    the members as ``average`` says (:func:`aggregate_members`)."""

    def members() -> Iterable[tuple[float, np.ndarray, np.ndarray]]:
        for key in store.keys("batches"):
            yield from member_test_scores(store.load_arrays(key))

    return aggregate_members(members(), betas, num_examples, average)


def check_stored_run(run: str | Path) -> RunStore:
    """The store of a run that :func:`report_run` can report: checked before any work.

    Raises:
      FileNotFoundError: if ``run`` holds no manifest or no stored folds.
      ValueError: if the run has no finished member batch.
    """
    store = RunStore(run) if Path(run).is_dir() else None
    if store is None or store.manifest() is None:
        raise FileNotFoundError(f"no stored run (manifest.json) in {run}")
    if not store.has("data/folds"):
        raise FileNotFoundError(f"{run} holds no stored folds (data/folds.npz)")
    if not any(True for _ in store.keys("batches")):
        raise ValueError(f"{run} holds no finished member batch")
    return store
