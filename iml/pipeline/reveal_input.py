"""Reading a stored run into the inputs of ``iml reveal`` (:func:`load_reveal_input`), and
checking them (:func:`check_reveal_input`: whether :func:`iml.revealed.reveal` can run on them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from iml.calibration import scores_from_logits
from iml.grids import CLASS_WEIGHTS, LossFamily, LossGrid, beta_key, loss_family
from iml.losses import registered
from iml.pipeline.scores import row_link, stored_grid, stored_scores
from iml.pipeline.store import (
    RunStore,
    aggregate_members,
    check_stored_run,
    load_ensemble,
    member_test_scores,
)
from iml.spec import LossSpec, loss_spec


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
      kind: ``"reproduce"`` or ``"sweep"``.
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
    kind: str = "reproduce",
    run: str | Path = "",
    seed_scores: np.ndarray | None = None,
    seeds: Sequence[int] | None = None,
    average: str = "score",
) -> RevealInput:
    """The observations scored by every model: finite scores and, with ``sizes`` (ensemble
    sizes ``[K, N]``), at least one member each; with ``seed_scores`` (``[M, K, N]``, each
    seed's own ensemble, all NaN for a seed a model lacks), scored by every seed of every
    model too."""
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
    """The scores, labels, class weights and loss of a stored run: an ``iml reproduce`` run over
    class weights (its loss is ``config.loss``), several such runs on the same observations
    (:func:`merge_reproduce_runs`), or a finished ``iml sweep`` over a grid of class weights of
    one binary loss (the loss its manifest records, with its ridge penalty, :func:`ridge_of`).
    A multiclass run of either kind (an ``iml reproduce`` run over ``config.loss.weights``, or
    a sweep with ``config.data.classes=all``) is read with its grid and class scores
    ``[K, N, c]`` (:func:`multiclass_input`); several of them on the same observations by
    :func:`merge_class_runs`.

    Both kinds are read from the one layout every run stores (:mod:`iml.pipeline.store`): the
    manifest's config says the loss and its class weights, ``data/folds`` the labels, and the
    member batches the scores, pooled into each class weight's ensemble as the run pools them.

    Raises:
      FileNotFoundError: for a missing folder, or a run without the files it needs.
      ValueError: for a folder holding no run or one recorded at an earlier schema, a sweep that
        has not finished, a multiclass
        sweep or one over losses that no class weight describes, a sweep of a loss that is not
        registered in this process (a plugin's, not loaded), or stored files that disagree with
        each other.
    """
    if not isinstance(run, str | Path):
        runs = [Path(r) for r in run]
        if len(runs) == 1:
            return load_reveal_input(runs[0])
        if _is_multiclass(runs[0], _run_manifest(runs[0])):
            return merge_class_runs(runs)
        return merge_reproduce_runs(runs)
    root = Path(run)
    manifest = _run_manifest(root)
    if manifest["kind"] != "images" and not RunStore(root).has("table"):  # the sweep's last step
        raise ValueError(
            f"{run} holds an `iml sweep` run that has not finished (no table.json yet): "
            "run the same `iml sweep` again to finish it"
        )
    if _is_multiclass(root, manifest):
        return multiclass_input(root)
    if manifest["kind"] == "images":
        return _reproduce_input(root)
    return _sweep_input(root, manifest["config"])


def _is_multiclass(root: Path, manifest: Mapping[str, Any]) -> bool:
    """Whether a stored run trained a grid of losses of class scores."""
    config = manifest["config"]
    if manifest["kind"] == "images":
        # imported here: as _reproduce_config
        from iml.pipeline.run_config import as_config
        from iml.pipeline.runner import is_multiclass

        return bool(is_multiclass(as_config(config)))
    loss = config.get("loss")
    if not isinstance(loss, Mapping) or loss.get("name") not in registered():
        return False  # refused, or read, as a binary sweep (_sweep_loss)
    if loss.get("name") == "log" and "betas" in loss:
        return False
    try:
        return bool(loss_spec(dict(loss)).multiclass)
    except (TypeError, ValueError):
        return False


def multiclass_input(run: str | Path) -> RevealInput:
    """A stored multiclass run (either kind) read as its report reads it
    (:func:`iml.pipeline.scores.stored_scores`): the ensemble class scores ``[K, N, c]`` of its
    grid's ``K`` losses, pooled as the run pools them (``config.eval.average``), on the
    observations every model scored.

    Raises:
      FileNotFoundError: for a run without the files it needs.
      ValueError: as :func:`iml.pipeline.scores.stored_scores`.
    """
    root = Path(run)
    manifest = _run_manifest(root)
    config = manifest["config"]
    average = str(config.get("eval", {}).get("average", "score"))
    scores = stored_scores(root, average)
    kind = "reproduce" if manifest["kind"] == "images" else "sweep"
    train = config.get("train", {})
    ridge = ridge_of(train) if kind == "sweep" and isinstance(train, Mapping) else None
    # Each seed's own ensemble, pooled as the run pools (by the logits the members kept).
    members, link = run_members(root, logits=True), row_link(scores.grid.spec)
    if members is None:
        members, link = run_members(root), None
    seeds, stack = None, None
    if members is not None:
        rows = [float(k) for k in range(len(scores.grid.keys))]
        seeds, stack = seed_ensembles(members, rows, len(scores.labels), average, link)
    return class_input(scores.grid, scores.scores, scores.labels, scores.sizes, kind=kind,
                       run=root, ridge=ridge, average=average, seed_scores=stack,
                       seeds=seeds)  # fmt: skip


def class_input(
    grid: LossGrid,
    scores: np.ndarray,
    labels: np.ndarray,
    sizes: np.ndarray | None = None,
    *,
    kind: str = "reproduce",
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
        row per loss of the grid, or a grid that is not of ``c`` class scores.
    """
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


def _reproduce_config(root: Path) -> ml_collections.ConfigDict:
    """A reproduce run's config in the current form, refused for a multiclass run (which
    :func:`multiclass_input` reads, alone)."""
    # imported here: the runner imports the trainer (Flax, optax), which only a reproduce
    # run's reading needs
    from iml.pipeline.run_config import as_config
    from iml.pipeline.runner import is_multiclass

    config = as_config(_run_manifest(root)["config"])
    if is_multiclass(config):
        raise ValueError(
            f"{root} holds a multiclass run ({config.loss.name} loss over "
            f"{config.loss.weights!r}); `iml reveal` reads it alone, not merged with other runs"
        )
    return config


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
    if not keys:
        return None
    out = []
    for key in keys:
        entry = store.load_arrays(key)
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


def _from_members(
    root: Path,
    members: Sequence[Member],
    rows: Sequence[float],
    betas: Sequence[float],
    labels: np.ndarray,
    loss: LossFamily,
    average: str,
    kind: str,
    link: Callable[[int, np.ndarray], np.ndarray] | None = None,
) -> RevealInput:
    """The input of a run whose members are given: their ensemble per row, as the run pools
    them, and each seed's own ensemble."""
    n = len(labels)
    pooled = [(row, idx, values) for row, _, idx, values in members]
    ensemble = aggregate_members(pooled, rows, n, average, link)
    seeds, stack = seed_ensembles(members, rows, n, average, link)
    return reveal_input(
        betas, ensemble.scores, labels, loss, sizes=ensemble.sizes, kind=kind, run=root,
        seed_scores=stack, seeds=seeds, average=average,
    )  # fmt: skip


def _reproduce_input(root: Path) -> RevealInput:
    # imported here: as _reproduce_config
    from iml.pipeline.run_config import run_betas
    from iml.pipeline.runner import run_loss

    config = _reproduce_config(root)
    betas = np.asarray(run_betas(config))
    labels = check_stored_run(root).load_arrays("data/folds")["labels"]
    average = str(config.eval.average)
    members = run_members(root)
    if members is None:  # batches of a version that did not store seeds: no seed ensembles
        ensemble = load_ensemble(RunStore(root), betas.tolist(), len(labels), average)
        return reveal_input(betas, ensemble.scores, labels, run_loss(config),
                            sizes=ensemble.sizes, run=root, average=average)  # fmt: skip
    return _from_members(root, members, betas, betas, labels, run_loss(config), average,
                         "reproduce")  # fmt: skip


def merge_reproduce_runs(runs: Sequence[Path]) -> RevealInput:
    """One input from several ``reproduce`` runs on the same observations and loss: their
    class weights pooled, and a class weight trained in several runs (under different seeds)
    pooled over all its members; each seed's own ensemble kept for the seed bootstrap.

    Raises:
      ValueError: for runs whose labels, loss or ensemble pooling differ, a run without member
        batches, or a (class weight, seed) pair trained in two runs.
    """
    from iml.pipeline.runner import run_loss  # imported here: as _reproduce_config

    resolved = [Path(r).resolve() for r in runs]
    twice = sorted({str(r) for r in runs if resolved.count(Path(r).resolve()) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} given more than once")
    members: list[Member] = []
    labels = loss = average = None
    owner: dict[tuple[float, int], Path] = {}
    for root in runs:
        if _run_manifest(Path(root))["kind"] != "images":
            raise ValueError(f"{root} is an `iml sweep` run; only reproduce runs merge")
        config = _reproduce_config(Path(root))
        run_labels = check_stored_run(root).load_arrays("data/folds")["labels"]
        if labels is None:
            labels, loss, average = run_labels, run_loss(config), str(config.eval.average)
        elif not np.array_equal(run_labels, labels):
            raise ValueError(f"{root} holds other observations (labels) than {runs[0]}")
        elif run_loss(config) != loss:
            raise ValueError(f"{root} was trained under another loss than {runs[0]}")
        elif str(config.eval.average) != average:
            raise ValueError(f"{root} pools its members by another average than {runs[0]}")
        own = run_members(root)
        if own is None:
            raise ValueError(f"{root} holds no member batches that name their seeds")
        for beta, seed, idx, scores in own:
            if owner.setdefault((beta, seed), root) != root:
                raise ValueError(
                    f"beta {beta} with seed {seed} was trained in both {owner[(beta, seed)]} "
                    f"and {root}"
                )
            members.append((beta, seed, idx, scores))
    betas = sorted({beta for beta, *_ in members})
    inputs = _from_members(Path(runs[0]), members, betas, betas, labels, loss, average,
                           "reproduce")  # fmt: skip
    return inputs._replace(run=" + ".join(str(r) for r in runs))


def merge_class_runs(runs: Sequence[Path]) -> RevealInput:
    """One input from several multiclass runs on the same observations: the losses of their
    grids joined by key (in the order the runs name them), a loss trained in several runs
    (under different seeds) pooled over all its members by their stored scores, and each seed's
    own ensemble kept for the seed bootstrap.

    Raises:
      ValueError: for a binary run among them, runs of different kinds, labels, ensemble pooling
        or ridge, a key whose loss differs between runs, a run without member batches that name
        their seeds, or a (loss, seed) pair trained in two runs.
    """
    runs = [Path(r) for r in runs]
    resolved = [r.resolve() for r in runs]
    twice = sorted({str(r) for r, x in zip(runs, resolved, strict=True) if resolved.count(x) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} given more than once")
    first: dict[str, Any] = {}
    specs: dict[str, LossSpec] = {}
    members: list[tuple[str, int, np.ndarray, np.ndarray]] = []
    owner: dict[tuple[str, int], Path] = {}
    for root in runs:
        manifest = _run_manifest(root)
        if not _is_multiclass(root, manifest):
            raise ValueError(f"{root} is a binary run; it does not merge with {runs[0]}'s classes")
        config = manifest["config"]
        train = config.get("train", {})
        this = {
            "kind": manifest["kind"],
            "labels": check_stored_run(root).load_arrays("data/folds")["labels"],
            "average": str(config.get("eval", {}).get("average", "score")),
            "ridge": ridge_of(train) if manifest["kind"] != "images" else None,
        }
        first = first or this
        differs = {"kind": "is another kind of run", "ridge": "was penalised otherwise",
                   "average": "pools its members by another average"}  # fmt: skip
        for name, what in differs.items():
            if this[name] != first[name]:
                raise ValueError(f"{root} {what} than {runs[0]}")
        if not np.array_equal(this["labels"], first["labels"]):
            raise ValueError(f"{root} holds other observations (labels) than {runs[0]}")
        own = run_members(root)
        if own is None:
            raise ValueError(f"{root} holds no member batches that name their seeds")
        grid = stored_grid(manifest, root, int(np.shape(own[0][3])[-1]))
        for k, key in enumerate(grid.keys):
            spec = grid.spec[np.array([k])]
            known = specs.setdefault(key, spec)
            same = jax.tree.structure(known) == jax.tree.structure(spec) and all(
                np.array_equal(a, b) for a, b in zip(jax.tree.leaves(known),
                                                     jax.tree.leaves(spec), strict=True)
            )  # fmt: skip
            if not same:
                raise ValueError(f"{root}'s loss {key} is not the loss {key} of the runs before it")
        for row, seed, idx, scores in own:
            key = grid.keys[int(row)]
            if owner.setdefault((key, seed), root) != root:
                raise ValueError(
                    f"{key} with seed {seed} was trained in both {owner[(key, seed)]} and {root}"
                )
            members.append((key, seed, idx, scores))
    keys = list(specs)
    merged = LossGrid(jax.tree.map(lambda *x: jnp.concatenate(x), *specs.values()), None, keys)
    rowed = [(float(keys.index(key)), seed, idx, scores) for key, seed, idx, scores in members]
    rows, n = [float(k) for k in range(len(keys))], len(first["labels"])
    pooled = aggregate_members([(r, i, a) for r, _, i, a in rowed], rows, n, first["average"])
    seeds, stack = seed_ensembles(rowed, rows, n, first["average"])
    kind = "reproduce" if first["kind"] == "images" else "sweep"
    return class_input(merged, pooled.scores, first["labels"], pooled.sizes, kind=kind,
                       run=" + ".join(str(r) for r in runs), ridge=first["ridge"],
                       average=first["average"], seed_scores=stack, seeds=seeds)  # fmt: skip


def _sweep_input(root: Path, config: Mapping[str, Any]) -> RevealInput:
    """A finished sweep over the class weight of one binary loss, from its member batches: the
    scores of members that kept their logits are those logits' scores in float64 (as the
    sweep's table took them)."""
    record = config
    loss, recorded = _sweep_loss(record.get("loss"), root)
    store = check_stored_run(root)
    labels = store.load_arrays("data/folds")["labels"]
    # The weights as the table names them (the grid's own, e.g. 0.9), where each names its
    # recorded weight (a loss's config records float32 parameters: 0.8999999761581421).
    betas = [float(w) for w in recorded]
    for k, key in enumerate(list(store.load_json("table"))[: len(betas)]):
        try:
            named = float(key)
        except ValueError:
            continue
        if np.float32(named) == np.float32(betas[k]):
            betas[k] = named
    members = run_members(root, logits=True)

    def link(row: int, logits: np.ndarray) -> np.ndarray:
        return scores_from_logits(loss(betas[row]), logits)

    if members is None:  # members stored by their scores alone
        members, link = run_members(root), None
    if members is None:
        raise ValueError(f"{root} holds no member batches that name their seeds")
    rows = sorted({row for row, *_ in members})
    if rows != [float(k) for k in range(len(betas))]:
        raise ValueError(
            f"{root}: its members' losses ({len(rows)}) are not the {len(betas)} class weights "
            "of its manifest"
        )
    members = sorted(members, key=lambda m: (m[0], m[1]))  # the sweep's order: loss, then seed
    inputs = _from_members(root, members, rows, betas, labels, loss,
                           str(record["eval"]["average"]), "sweep", link)  # fmt: skip
    return inputs._replace(ridge=ridge_of(record["train"]))


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
        note = (
            f"the ridge was chosen per loss and rotation on the validation folds from {grid} "
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


def _sweep_loss(loss: Any, root: Path) -> tuple[LossFamily, list[float]]:
    """The loss of a sweep by its class weight, and the weights, from its record's ``loss``
    section (:data:`iml.pipeline.sweep.SECTIONS`)."""
    if isinstance(loss, Mapping) and loss.get("name") == "log" and "betas" in loss:
        return loss_family("log"), list(loss["betas"])  # the beta-weighted log loss
    if isinstance(loss, Mapping) and loss.get("name") not in registered():
        raise ValueError(
            f"{root} holds a sweep of the loss {loss.get('name')!r}, which is not registered in "
            "this process: load the plugin that registers it first (`--import MODULE_OR_FILE`, "
            "iml.plugins.import_plugin)"
        )
    if not isinstance(loss, Mapping) or loss.get("name") not in CLASS_WEIGHTS:
        shown = loss.get("name") if isinstance(loss, Mapping) else loss
        raise ValueError(
            f"{root} holds a sweep of the loss {shown!r}; `iml reveal` reads sweeps over the "
            f"class weight of one binary loss ({', '.join(sorted(CLASS_WEIGHTS))})"
        )
    name = loss["name"]
    weight = CLASS_WEIGHTS[name]
    params = {}
    for key, value in loss.items():
        if key in ("name", weight):
            continue
        values = np.unique(np.asarray(value, np.float64))
        if values.size != 1:
            raise ValueError(
                f"{root} holds a sweep of the {name} loss whose {key} varies over the grid; "
                f"`iml reveal` reads grids of its class weight {weight} alone"
            )
        params[key] = float(values[0])
    return loss_family(name, **params), list(np.ravel(loss[weight]))


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
