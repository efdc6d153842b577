"""Reading a stored run into the inputs of ``iml reveal`` (:func:`load_reveal_input`), and
checking them (:func:`check_reveal_input`: whether :func:`iml.revealed.reveal` can run on them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.grids import CLASS_WEIGHTS, LossFamily, LossGrid, beta_key, weight_row
from iml.pipeline.scores import RunScores, row_link, stored_scores
from iml.pipeline.store import (
    KINDS,
    RunStore,
    aggregate_members,
    member_test_scores,
)
from iml.spec import LossSpec


class RevealInput(NamedTuple):
    """The scores of ``K`` models at ``K`` class weights on common observations, and their loss;
    or, for a multiclass run, the class scores of the ``K`` losses of its grid.

    Attributes:
      scores: ``[K, n]`` float32 scores, only observations that every model scored; for a
        multiclass run ``[K, n, c]``, each model's raw class scores (as its loss reports them,
        not loss-corrected) over ``c`` classes.
      labels: ``[n]`` labels in ``{0, 1}``, or class indices in ``[0, c)``.
      betas: ``[K]`` class weights (``beta``, or ``alpha`` of a focal loss), float64; empty for
        a multiclass run.
      loss: the loss as a function of its class weight: model ``k`` was trained under
        ``loss(betas[k])``; None for a multiclass run.
      n_stored: the observations in the run, scored by all or not.
      kind: the run's kind as its manifest records it (:data:`iml.pipeline.KINDS`: ``"images"``
        fed from the host, or a ``"table"`` on the device); ``"arrays"`` for scores given
        directly.
      run: the run folder.
      ridge: how the run's members were penalised (:func:`ridge_of`), where its record says.
      seed_scores: ``[M, K, n]`` each training seed's own ensemble scores (NaN rows for a seed
        a model lacks), where some model has several seeds; else ``None``.
      seeds: the seed of each row of ``seed_scores``.
      average: how the run's ensembles pool members (``"score"`` or ``"logit"``).
      grid: a multiclass run's grid of ``K`` losses of ``c`` class scores (its keys name the
        models); None for a binary run.
    """

    scores: np.ndarray
    labels: np.ndarray
    betas: np.ndarray
    loss: LossFamily | None
    n_stored: int
    kind: str
    run: str
    ridge: dict[str, Any] | None = None
    seed_scores: np.ndarray | None = None
    seeds: tuple[int, ...] = ()
    average: str = "score"
    grid: LossGrid | None = None

    @property
    def multiclass(self) -> bool:
        """Whether the models report class scores ``[K, n, c]`` over a grid of losses."""
        return self.grid is not None

    @property
    def keys(self) -> list[str]:
        """Each model's name: its grid key, or its class weight's exact key."""
        if self.grid is not None:
            return list(self.grid.keys)
        return [beta_key(b) for b in self.betas]

    def seeds_per_model(self) -> list[list[int]]:
        """The seeds behind each model's scores (empty lists where the run does not say)."""
        if self.seed_scores is None:
            return [[] for _ in range(self.scores.shape[0])]
        have = np.isfinite(self.seed_scores).reshape(*self.seed_scores.shape[:2], -1).all(2)
        return [[self.seeds[m] for m in np.flatnonzero(have[:, k])] for k in range(have.shape[1])]


def reveal_input(
    betas: Sequence[float],
    scores: np.ndarray,
    labels: np.ndarray,
    loss: LossFamily,
    *,
    sizes: np.ndarray | None = None,
    kind: str = "arrays",
    run: str | Path = "",
    seed_scores: np.ndarray | None = None,
    seeds: Sequence[int] | None = None,
    average: str = "score",
) -> RevealInput:
    """The observations scored by every model: finite scores and, with ``sizes`` (ensemble
    sizes ``[K, N]``), at least one member each; with ``seed_scores`` (``[M, K, N]``, each
    seed's own ensemble, all NaN for a seed a model lacks), scored by every seed of every
    model too. ``kind``: the run's (:attr:`RevealInput.kind`).

    Raises:
      ValueError: for a ``kind`` other than ``"images"``, ``"table"`` or ``"arrays"``."""
    V.check_choice("kind", kind, (*KINDS, "arrays"))
    s = np.asarray(scores, dtype=np.float64)
    keep = np.isfinite(s).all(axis=0)
    if sizes is not None:
        keep &= (np.asarray(sizes) > 0).all(axis=0)
    keep, stack = _kept_seeds(seed_scores, keep)
    return RevealInput(
        scores=s[:, keep].astype(np.float32),
        labels=np.asarray(labels)[keep].astype(np.int32),
        betas=np.asarray(betas, dtype=np.float64),
        loss=loss,
        n_stored=int(s.shape[1]),
        kind=kind,
        run=str(run),
        seed_scores=stack,
        seeds=tuple(int(x) for x in seeds) if seeds is not None else (),
        average=average,
    )


def _kept_seeds(
    seed_scores: np.ndarray | None, keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """The observations ``keep [N]`` that every seed of every model scored too, and the seeds'
    scores ``[M, K, N(, c)]`` there (float32; all NaN for a seed a model lacks)."""
    if seed_scores is None:
        return keep, None
    st = np.asarray(seed_scores, dtype=np.float64)
    finite = np.isfinite(st).reshape(*st.shape[:3], -1).all(axis=3)  # [M, K, N]
    trained = finite.any(axis=2, keepdims=True)  # [M, K, 1]
    keep = keep & np.where(trained, finite, True).all(axis=(0, 1))
    trained = trained.reshape(*trained.shape, *(1,) * (st.ndim - 3))
    return keep, np.where(trained, st, np.nan)[:, :, keep].astype(np.float32)


def load_reveal_input(run: str | Path | Sequence[str | Path]) -> RevealInput:
    """The scores, labels and losses of one stored run, or of several on the same observations,
    as :func:`iml.revealed.reveal` takes them.

    Every run is read from the one layout every run stores (:mod:`iml.pipeline.store`), of
    either kind (``iml reproduce`` or a finished ``iml sweep``): the manifest says the grid of
    losses (:func:`iml.pipeline.scores.stored_grid`), ``data/folds`` the labels, and the member
    batches the scores. A binary grid must be one loss over its class weight
    (:func:`iml.pipeline.scores.grid_family`), read with its weights as its keys name them (a
    loss that holds its weights in float32 by their shortest decimals); a multiclass grid is
    read with its keys and raw class scores ``[K, N, c]``. One run's ensembles are those its
    report pooled (:func:`iml.pipeline.scores.stored_scores`). Several
    runs of one kind, loss family, pooling and ridge join by their losses' keys: a loss trained
    in several runs (under different seeds) pools over all its members. Each training seed's
    own ensemble is kept for the seed bootstrap, where the member batches name their seeds.

    Raises:
      FileNotFoundError: for a missing folder, or a run without the files it needs.
      ValueError: for a folder holding no run or one recorded at an earlier schema, a sweep that
        has not finished, a grid that no class weight of one binary loss spans, a loss that is
        not registered in this process (a plugin's, not loaded), runs that do not join (named
        twice, another kind, loss, pooling, ridge or observations, no member batches that name
        their seeds, a loss and seed trained in two runs), or stored files that disagree.
    """
    roots = [Path(run)] if isinstance(run, str | Path) else [Path(r) for r in run]
    if not roots:
        raise ValueError("no run given: name one run folder, or several")
    resolved = [r.resolve() for r in roots]
    twice = sorted({str(r) for r, x in zip(roots, resolved, strict=True) if resolved.count(x) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} given more than once")
    runs = [_stored_run(root) for root in roots]
    if len(runs) == 1:
        return _one_run(runs[0])
    return _joined_runs(runs)


class _StoredRun(NamedTuple):
    """One stored run as ``iml reveal`` reads it (:func:`_stored_run`)."""

    root: Path
    kind: str  # the manifest's: "images" or "table"
    scores: RunScores  # its ensembles over its grid, pooled as its report pools them
    weights: list[float]  # a binary grid's class weights (its keys' numbers); else []
    average: str
    ridge: dict[str, Any] | None
    entries: list[Mapping[str, np.ndarray]]  # its member batches, read once

    def position(self, row: float) -> int:
        """The grid position of a member's ``row`` (:func:`run_members`): its class weight, in
        ``(0, 1)``, for a binary run on images (:func:`iml.grids.weight_row`); its position, a
        whole number, otherwise."""
        return int(row) if float(row).is_integer() else weight_row(self.weights, row)

    def name(self, key: str) -> str:
        """How messages name the grid's loss ``key``: ``beta 0.9``, or ``w[2]=2``."""
        family = self.scores.family
        return key if family is None else f"{family.weight_name} {key}"


def _stored_run(root: Path) -> _StoredRun:
    manifest = _run_manifest(root)
    config = manifest["config"]
    store = RunStore(root)
    table = manifest["kind"] != "images"
    if table and not store.has("table"):  # the sweep's last step
        raise ValueError(
            f"{root} holds an `iml sweep` run that has not finished (no table.json yet): "
            "run the same `iml sweep` again to finish it"
        )
    binary = f"the class weight of one binary loss ({', '.join(sorted(CLASS_WEIGHTS))})"
    if table and not isinstance(config.get("loss"), Mapping):  # a callable, by its description
        raise ValueError(
            f"{root} holds a sweep of the loss {config.get('loss')!r}; `iml reveal` reads sweeps "
            f"over {binary} or a multiclass grid"
        )
    average = str(config.get("eval", {}).get("average", "score"))
    entries = [store.load_arrays(key) for key in store.keys("batches")]
    scores = stored_scores(root, average, entries)
    weights: list[float] = []
    if not scores.grid.spec.multiclass:
        if scores.family is None:
            raise ValueError(
                f"{root} holds a sweep of the loss {scores.grid.spec.describe()!r}; `iml reveal` "
                f"reads sweeps over {binary}, its other parameters fixed"
            )
        weights = [float(w) for w in scores.grid.weights]
    train = config.get("train")
    ridge = ridge_of(train) if table and isinstance(train, Mapping) else None
    return _StoredRun(root, manifest["kind"], scores, weights, average, ridge, entries)


def _as_input(
    run: _StoredRun,
    grid: LossGrid,
    weights: Sequence[float],
    scores: np.ndarray,
    sizes: np.ndarray,
    where: str,
    seeds: Sequence[int] | None,
    stack: np.ndarray | None,
) -> RevealInput:
    """The input of pooled ``scores`` over the keys of ``grid`` (a binary run's ``weights``)."""
    settings = {"kind": run.kind, "run": where, "seed_scores": stack, "seeds": seeds,
                "average": run.average}  # fmt: skip
    if grid.spec.multiclass:
        return class_input(grid, scores, run.scores.labels, sizes, ridge=run.ridge, **settings)
    inputs = reveal_input(weights, scores, run.scores.labels, run.scores.family, sizes=sizes,
                          **settings)  # fmt: skip
    return inputs._replace(ridge=run.ridge)


def _one_run(run: _StoredRun) -> RevealInput:
    """One run: its report's ensembles, and each seed's own ensemble (pooled by the logits the
    members kept, as the run pools them, or else by their scores)."""
    s = run.scores
    members, link = entry_members(run.entries, logits=True), row_link(s.grid.spec)
    if members is None:
        members, link = entry_members(run.entries), None
    seeds, stack = None, None
    if members is not None:
        rows = [float(k) for k in range(len(s.grid.keys))]
        rowed = [(float(run.position(r)), seed, i, a) for r, seed, i, a in members]
        seeds, stack = seed_ensembles(rowed, rows, len(s.labels), run.average, link)
    return _as_input(run, s.grid, run.weights, s.scores, s.sizes, str(run.root), seeds, stack)


def _joined_runs(runs: Sequence[_StoredRun]) -> RevealInput:
    """Several runs joined by their losses' keys, each loss pooled over the members of every
    run that trained it (by their stored scores)."""
    first = runs[0]
    specs: dict[str, LossSpec] = {}
    weight_of: dict[str, float] = {}
    members: list[tuple[str, int, np.ndarray, np.ndarray]] = []
    owner: dict[tuple[str, int], Path] = {}
    for run in runs:
        grid = run.scores.grid
        if grid.spec.multiclass != first.scores.grid.spec.multiclass:
            what = "a binary" if not grid.spec.multiclass else "a multiclass"
            raise ValueError(f"{run.root} is {what} run; it does not join {first.root}")
        differs = {
            "kind": "is another kind of run",
            "ridge": "was penalised otherwise",
            "average": "pools its members by another average",
        }
        for field, what in differs.items():
            if getattr(run, field) != getattr(first, field):
                raise ValueError(f"{run.root} {what} than {first.root}")
        if run.scores.family != first.scores.family:
            raise ValueError(f"{run.root} was trained under another loss than {first.root}")
        if not np.array_equal(run.scores.labels, first.scores.labels):
            raise ValueError(f"{run.root} holds other observations (labels) than {first.root}")
        own = entry_members(run.entries)
        if own is None:
            raise ValueError(f"{run.root} holds no member batches that name their seeds")
        for k, key in enumerate(grid.keys):
            spec = grid.spec[np.array([k])]
            known = specs.setdefault(key, spec)
            same = jax.tree.structure(known) == jax.tree.structure(spec) and all(
                np.array_equal(a, b) for a, b in zip(jax.tree.leaves(known),
                                                     jax.tree.leaves(spec), strict=True)
            )  # fmt: skip
            if not same:
                raise ValueError(
                    f"{run.root}'s loss {key} is not the loss {key} of the runs before it"
                )
            if run.weights:
                weight_of[key] = run.weights[k]
        for row, seed, idx, scores in own:
            key = grid.keys[run.position(row)]
            if owner.setdefault((key, seed), run.root) != run.root:
                raise ValueError(
                    f"{run.name(key)} with seed {seed} was trained in both {owner[(key, seed)]} "
                    f"and {run.root}"
                )
            members.append((key, seed, idx, scores))
    keys = sorted(specs, key=weight_of.__getitem__) if weight_of else list(specs)
    joined = LossGrid(
        jax.tree.map(lambda *x: jnp.concatenate(x), *(specs[key] for key in keys)), None, keys
    )
    rowed = [(float(keys.index(key)), seed, idx, scores) for key, seed, idx, scores in members]
    rows, n = [float(k) for k in range(len(keys))], len(first.scores.labels)
    pooled = aggregate_members([(r, i, a) for r, _, i, a in rowed], rows, n, first.average)
    seeds, stack = seed_ensembles(rowed, rows, n, first.average)
    where = " + ".join(str(run.root) for run in runs)
    weights = [weight_of[key] for key in keys] if weight_of else []
    return _as_input(first, joined, weights, pooled.scores, pooled.sizes, where, seeds, stack)


def class_input(
    grid: LossGrid,
    scores: np.ndarray,
    labels: np.ndarray,
    sizes: np.ndarray | None = None,
    *,
    kind: str = "arrays",
    run: str | Path = "",
    ridge: dict[str, Any] | None = None,
    average: str = "score",
    seed_scores: np.ndarray | None = None,
    seeds: Sequence[int] | None = None,
) -> RevealInput:
    """The input of a multiclass run: the class scores ``[K, N, c]`` of the ``K`` losses of
    ``grid`` (raw, as each loss reports them) on the observations every model scored (finite
    scores and, with ``sizes`` ``[K, N]``, at least one member each), and their labels ``[N]``;
    with ``seed_scores`` (``[M, K, N, c]``, each seed's own ensemble, all NaN for a seed a
    model lacks), scored by every seed of every model too.

    Raises:
      ValueError: naming ``scores`` or ``grid``, for scores that are not ``[K, N, c]`` with one
        row per loss of the grid, or a grid that is not of ``c`` class scores; naming ``kind``
        for one other than ``"images"``, ``"table"`` or ``"arrays"``.
    """
    V.check_choice("kind", kind, (*KINDS, "arrays"))
    s = np.asarray(scores, np.float64)
    K = len(grid.keys)
    if s.ndim != 3 or s.shape[0] != K:
        raise ValueError(f"scores must be [K={K}, N, c] class scores; got shape {s.shape}")
    if not grid.spec.multiclass:
        raise ValueError("grid must be a grid of losses of class scores (multiclass)")
    keep = np.isfinite(s).all(axis=(0, 2))
    if sizes is not None:
        keep &= (np.asarray(sizes) > 0).all(axis=0)
    keep, stack = _kept_seeds(seed_scores, keep)
    return RevealInput(
        scores=s[:, keep].astype(np.float32),
        labels=np.asarray(labels)[keep].astype(np.int32),
        betas=np.zeros(0, np.float64),
        loss=None,
        n_stored=int(s.shape[1]),
        kind=kind,
        run=str(run),
        ridge=ridge,
        seed_scores=stack,
        seeds=tuple(int(x) for x in seeds) if seeds is not None else (),
        average=average,
        grid=grid,
    )


def _run_manifest(root: Path) -> Mapping[str, Any]:
    """A run folder's manifest.

    Raises:
      FileNotFoundError: for a missing folder.
      ValueError: for a folder without a manifest, or with one of an earlier schema.
    """
    if not root.is_dir():
        raise FileNotFoundError(f"no run folder {root}")
    if not (root / "manifest.json").exists():
        raise ValueError(
            f"{root} holds neither an `iml reproduce` run nor an `iml sweep` run (no manifest.json)"
        )
    return RunStore(root).manifest()


#: A stored member: the row of its loss (its class weight, or its position in a sweep's grid),
#: its seed, its test rows and its scores (or logits) there.
Member = tuple[float, int, np.ndarray, np.ndarray]


def run_members(root: Path, logits: bool = False) -> list[Member] | None:
    """``(row, seed, test_idx, test_scores)`` of every stored member (``test_logits`` with
    ``logits``), or ``None`` without member batches that name their seeds. ``row`` is the class
    weight (``beta``) of a member of a reproduce run, the position of its loss in a sweep's
    grid (``loss_index``)."""
    store = RunStore(root)
    keys = list(store.keys("batches")) if (root / "batches").is_dir() else []
    return entry_members([store.load_arrays(key) for key in keys], logits)


def entry_members(
    entries: Sequence[Mapping[str, np.ndarray]], logits: bool = False
) -> list[Member] | None:
    """The members of a run's member batches ``entries``, as :func:`run_members` gives them."""
    if not entries:
        return None
    out = []
    for entry in entries:
        if "seed" not in entry or (logits and "test_logits" not in entry):
            return None
        seeds = np.asarray(entry["seed"]).astype(int).tolist()
        for (row, idx, values), seed in zip(member_test_scores(entry, logits), seeds, strict=True):
            out.append((float(row), int(seed), idx, values))
    return out


def seed_ensembles(
    members: Sequence[Member],
    rows: Sequence[float],
    n: int,
    average: str = "score",
    link: Callable[[int, np.ndarray], np.ndarray] | None = None,
) -> tuple[tuple[int, ...] | None, np.ndarray | None]:
    """Each training seed's own ensemble ``[M, K, n]`` (class scores: ``[M, K, n, c]``;
    NaN where a seed did not train a
    model, or its members did not score an observation), from ``(row, seed, test_idx,
    values)`` members (scores, or logits read through ``link``:
    :func:`iml.pipeline.store.aggregate_members`); ``(None, None)`` where no model has several
    seeds."""
    rows = [float(b) for b in rows]
    seeds = sorted({seed for _, seed, _, _ in members})
    trained = {(row, seed) for row, seed, _, _ in members}
    if max(sum((b, s) in trained for s in seeds) for b in rows) < 2:
        return None, None
    stack = None
    for m, seed in enumerate(seeds):
        own = [(b, idx, a) for b, s, idx, a in members if s == seed]
        ensemble = aggregate_members(own, rows, n, average, link)
        if stack is None:  # [M, K, n], or [M, K, n, c] for class scores
            stack = np.full((len(seeds), *ensemble.scores.shape), np.nan)
        scored = ensemble.sizes.reshape(*ensemble.sizes.shape, *(1,) * (stack.ndim - 3)) > 0
        for k, row in enumerate(rows):
            if (row, seed) in trained:
                stack[m, k] = np.where(scored[k], ensemble.scores[k], np.nan)
    return tuple(seeds), stack


def ridge_of(train: Mapping[str, Any]) -> dict[str, Any] | None:
    """How a sweep's members were penalised (its record's ``train`` section), and what that
    means for the tests of learning: ``{"l2", "l2_grid", "l2_scale", "standardize", "note"}``;
    None for a record that holds no ridge.

    NIAC and the revealed cost bounds take one cost of information for every model. A number
    in the paper's units is a fixed penalty at every class weight, as they assume; a ridge
    chosen per loss on the validation folds, or one measured per unit of each loss's total
    weight, is a penalty that changes with the loss, and so is the set of experiments a model
    could afford: a rejection can come from the penalty as well as from the learning."""
    if "l2" not in train:
        return None
    l2, scale = train["l2"], train.get("l2_scale", "paper")
    standardize = bool(train.get("standardize", False))
    units = "on features standardised on the training folds" if standardize else "on the features"
    if l2 == "auto":
        grid = list(train.get("l2_grid", []))
        rule = f" (l2_choice {train['l2_choice']!r})" if "l2_choice" in train else ""
        note = (
            f"the ridge was chosen per loss and rotation on the validation folds{rule} from {grid} "
            f"({scale} units, {units}): the penalty changes with the loss, so NIAC and the cost "
            "bounds, which assume one cost of information for every model, test the learning "
            "and the choice of penalty together"
        )
    elif scale == "per_weight":
        grid = None
        note = (
            f"l2 = {l2:g} per unit of each loss's total weight ({units}): in the paper's units "
            "the penalty changes with the class weight, which NIAC's one cost does not allow for"
        )
    else:
        grid = None
        note = (
            f"l2 = {l2:g} in the paper's units at every class weight ({units}): one fixed "
            "penalty, as NIAC and the cost bounds assume"
        )
    return {"l2": l2, "l2_grid": grid, "l2_scale": scale, "standardize": standardize, "note": note}


def check_reveal_input(inputs: RevealInput, n_bins: int) -> None:
    """What :func:`iml.revealed.reveal` needs of the run: ``K >= 2`` models, at least
    ``n_bins`` observations scored by all of them, both labels among them (a multiclass run:
    two classes or more among them, class indices in ``[0, c)``, finite scores).

    Raises:
      ValueError: naming what the run holds.
    """
    K = inputs.scores.shape[0]
    if K < 2:
        shown = ", ".join(inputs.keys)
        what = "loss" if inputs.multiclass else inputs.loss.weight_name
        raise ValueError(
            f"{inputs.run} holds {K} model ({what} {shown}); `iml reveal` compares at least 2"
        )
    n = inputs.scores.shape[1]
    if n < n_bins:
        raise ValueError(
            f"{inputs.run}: {n} of its {inputs.n_stored} observations were scored by every "
            f"model, fewer than config.eval.n_bins={n_bins}"
        )
    if inputs.multiclass:
        c = inputs.scores.shape[2]
        if ((inputs.labels < 0) | (inputs.labels >= c)).any():
            raise ValueError(f"{inputs.run} holds labels outside the {c} classes [0, {c})")
        if np.unique(inputs.labels).size < 2:
            raise ValueError(
                f"{inputs.run}: the observations scored by every model share one class"
            )
        if not np.isfinite(inputs.scores).all() or (inputs.scores < 0).any():
            raise ValueError(f"{inputs.run} holds class scores that are negative or not finite")
        return
    if not np.isin(inputs.labels, (0, 1)).all():
        raise ValueError(f"{inputs.run} holds labels other than 0 and 1")
    if np.unique(inputs.labels).size < 2:
        raise ValueError(f"{inputs.run}: the observations scored by every model share one label")
    if (inputs.scores < 0).any() or (inputs.scores > 1).any():
        raise ValueError(f"{inputs.run} holds scores outside [0, 1]")
