"""Reading a stored run into the inputs of ``iml reveal``, and checking them.

:class:`RevealInput` holds the scores of ``K`` models trained at ``K`` class weights on the
observations that every model scored, their labels, and the loss as a function of its class
weight. :func:`load_reveal_input` reads it from a run folder of either layout:

* an ``iml reproduce`` run: its ensemble scores per class weight (``ensemble_scores.npz``, or
  aggregated from the stored member batches) and its loss (``config.loss``), or several such runs
  on the same observations (:func:`merge_reproduce_runs`), or
* an ``iml sweep`` run over a grid of class weights of one binary loss: its ``scores.npz`` and
  the loss its ``manifest.json`` records (with its ridge penalty, :func:`ridge_of`);

:func:`check_reveal_input` says whether :func:`iml.revealed.reveal` can run on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from iml.grids import CLASS_WEIGHTS, LossFamily, beta_key, loss_family
from iml.pipeline.store import (
    RunStore,
    aggregate_members,
    check_stored_run,
    load_ensemble,
    member_test_scores,
)


class RevealInput(NamedTuple):
    """The scores of ``K`` models at ``K`` class weights on common observations, and their loss.

    Attributes:
      scores: ``[K, n]`` float32 scores, only observations that every model scored.
      labels: ``[n]`` labels in ``{0, 1}``.
      betas: ``[K]`` class weights (``beta``, or ``alpha`` of a focal loss), float64.
      loss: the loss as a function of its class weight: model ``k`` was trained under
        ``loss(betas[k])``.
      n_stored: the observations in the run, scored by all or not.
      kind: ``"reproduce"`` or ``"sweep"``.
      run: the run folder.
      ridge: how the run's members were penalised (:func:`ridge_of`), where its record says.
      seed_scores: ``[M, K, n]`` each training seed's own ensemble scores (NaN rows for a seed
        a model lacks), where some model has several seeds; else ``None``.
      seeds: the seed of each row of ``seed_scores``.
      average: how the run's ensembles pool members (``"score"`` or ``"logit"``).
    """

    scores: np.ndarray
    labels: np.ndarray
    betas: np.ndarray
    loss: LossFamily
    n_stored: int
    kind: str
    run: str
    ridge: dict[str, Any] | None = None
    seed_scores: np.ndarray | None = None
    seeds: tuple[int, ...] = ()
    average: str = "score"

    def seeds_per_model(self) -> list[list[int]]:
        """The seeds behind each model's scores (empty lists where the run does not say)."""
        if self.seed_scores is None:
            return [[] for _ in self.betas]
        have = np.isfinite(self.seed_scores).all(axis=2)  # [M, K]
        return [[self.seeds[m] for m in np.flatnonzero(have[:, k])] for k in range(len(self.betas))]


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
    stack = None
    if seed_scores is not None:
        st = np.asarray(seed_scores, dtype=np.float64)
        trained = np.isfinite(st).any(axis=2, keepdims=True)  # [M, K, 1]
        keep &= np.where(trained, np.isfinite(st), True).all(axis=(0, 1))
        stack = np.where(trained, st, np.nan)[:, :, keep].astype(np.float32)
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


def load_reveal_input(run: str | Path | Sequence[str | Path]) -> RevealInput:
    """The scores, labels, class weights and loss of a stored ``reproduce`` or ``sweep`` run,
    or of several ``reproduce`` runs on the same observations (:func:`merge_reproduce_runs`).

    A folder with ``scores.npz`` is a sweep; one with ``ensemble_scores.npz``, or with a
    ``manifest.json`` and stored folds, a reproduce run (aggregated from its member batches when
    its report was not written yet). Reads the arrays; runs nothing.

    Raises:
      FileNotFoundError: for a missing folder, or a run without the files it needs.
      ValueError: for a folder of neither kind, a multiclass sweep or one over losses that no
        class weight describes, or stored files that disagree with each other.
    """
    if not isinstance(run, str | Path):
        runs = [Path(r) for r in run]
        if len(runs) == 1:
            return load_reveal_input(runs[0])
        return merge_reproduce_runs(runs)
    root = Path(run)
    if not root.is_dir():
        raise FileNotFoundError(f"no run folder {run}")
    if (root / "scores.npz").exists():
        return _sweep_input(root)
    manifest = _manifest_config(root, "a run") if (root / "manifest.json").exists() else {}
    if "data_sha256" in manifest:  # what a sweep records; a reproduce run records no digest
        raise ValueError(
            f"{run} holds an `iml sweep` run that has not finished (no scores.npz yet): run the "
            "same `iml sweep` again to finish it"
        )
    if (root / "ensemble_scores.npz").exists() or (
        (root / "manifest.json").exists() and (root / "data" / "folds.npz").exists()
    ):
        return _reproduce_input(root)
    raise ValueError(
        f"{run} holds neither an `iml reproduce` run (manifest.json with ensemble_scores.npz or "
        "stored member batches) nor an `iml sweep` run (scores.npz)"
    )


def _manifest_config(root: Path, what: str) -> Mapping[str, Any]:
    path = root / "manifest.json"
    if not path.exists():
        raise FileNotFoundError(f"{root} holds {what} but no manifest.json to say its loss")
    return json.loads(path.read_text()).get("config", {})


def _reproduce_input(root: Path) -> RevealInput:
    # imported here: the runner imports the trainer (Flax, optax), which only a reproduce
    # run's reading needs
    from iml.pipeline.runner import is_multiclass, run_betas, run_loss, stored_config

    config = stored_config(_manifest_config(root, "a reproduce run"))
    if is_multiclass(config):
        raise ValueError(
            f"{root} holds a multiclass run ({config.loss.name} loss over "
            f"{config.loss.weights!r}); `iml reveal` reads runs over a grid of class weights"
        )
    betas = np.asarray(run_betas(config))
    loss = run_loss(config)
    if (root / "ensemble_scores.npz").exists():
        with np.load(root / "ensemble_scores.npz", allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in ("betas", "scores", "sizes", "labels")}
        if not np.array_equal(arrays["betas"], betas):
            raise ValueError(
                f"{root}: ensemble_scores.npz holds betas {arrays['betas'].tolist()} but the "
                f"manifest's config.loss.betas are {betas.tolist()}"
            )
        scores, sizes, labels = arrays["scores"], arrays["sizes"], arrays["labels"]
    else:
        store = check_stored_run(root)
        labels = store.load_arrays("data/folds")["labels"]
        ensemble = load_ensemble(store, betas.tolist(), len(labels), str(config.eval.average))
        scores, sizes = ensemble.scores, ensemble.sizes
    average = str(config.eval.average)
    members = run_members(root)
    seeds, stack = (
        (None, None) if members is None else seed_ensembles(members, betas, len(labels), average)
    )
    return reveal_input(
        betas, scores, labels, loss, sizes=sizes, kind="reproduce", run=root,
        seed_scores=stack, seeds=seeds, average=average,
    )  # fmt: skip


def run_members(root: Path) -> list[tuple[float, int, np.ndarray, np.ndarray]] | None:
    """``(beta, seed, test_idx, test_scores)`` of every stored member, or ``None`` without
    member batches that name their seeds."""
    store = RunStore(root)
    keys = list(store.keys("batches")) if (root / "batches").is_dir() else []
    if not keys:
        return None
    out = []
    for key in keys:
        entry = store.load_arrays(key)
        if "seed" not in entry:
            return None
        seeds = np.asarray(entry["seed"]).astype(int).tolist()
        for (beta, idx, scores), seed in zip(member_test_scores(entry), seeds, strict=True):
            out.append((float(beta), int(seed), idx, scores))
    return out


def seed_ensembles(
    members: Sequence[tuple[float, int, np.ndarray, np.ndarray]],
    betas: Sequence[float],
    n: int,
    average: str = "score",
) -> tuple[tuple[int, ...] | None, np.ndarray | None]:
    """Each training seed's own ensemble ``[M, K, n]`` (NaN where a seed did not train a
    model, or its members did not score an observation), from ``(beta, seed, test_idx,
    test_scores)`` members; ``(None, None)`` where no model has several seeds."""
    betas = [float(b) for b in betas]
    seeds = sorted({seed for _, seed, _, _ in members})
    trained = {(beta, seed) for beta, seed, _, _ in members}
    if max(sum((b, s) in trained for s in seeds) for b in betas) < 2:
        return None, None
    stack = np.full((len(seeds), len(betas), n), np.nan)
    for m, seed in enumerate(seeds):
        own = [(b, idx, a) for b, s, idx, a in members if s == seed]
        ensemble = aggregate_members(own, betas, n, average)
        for k, beta in enumerate(betas):
            if (beta, seed) in trained:
                stack[m, k] = np.where(ensemble.sizes[k] > 0, ensemble.scores[k], np.nan)
    return tuple(seeds), stack


def merge_reproduce_runs(runs: Sequence[Path]) -> RevealInput:
    """One input from several ``reproduce`` runs on the same observations and loss: their
    class weights pooled, and a class weight trained in several runs (under different seeds)
    pooled over all its members; each seed's own ensemble kept for the seed bootstrap.

    Raises:
      ValueError: for runs whose labels, loss or ensemble pooling differ, a run without member
        batches, or a (class weight, seed) pair trained in two runs.
    """
    # imported here: the runner imports the trainer, as above
    from iml.pipeline.runner import run_loss, stored_config

    resolved = [Path(r).resolve() for r in runs]
    twice = sorted({str(r) for r in runs if resolved.count(Path(r).resolve()) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} given more than once")
    members: list[tuple[float, int, np.ndarray, np.ndarray]] = []
    labels = loss = average = None
    owner: dict[tuple[float, int], Path] = {}
    for root in runs:
        first = load_reveal_input(root)  # checks the folder, its kind and its loss
        if first.kind != "reproduce":
            raise ValueError(f"{root} is an `iml sweep` run; only reproduce runs merge")
        config = stored_config(_manifest_config(root, "a reproduce run"))
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
    betas = np.asarray(sorted({beta for beta, *_ in members}))
    n = len(labels)
    ensemble = aggregate_members([(b, i, a) for b, _, i, a in members], betas.tolist(), n, average)
    seeds, stack = seed_ensembles(members, betas, n, average)
    return reveal_input(
        betas, ensemble.scores, labels, loss, sizes=ensemble.sizes, kind="reproduce",
        run=" + ".join(str(r) for r in runs), seed_scores=stack, seeds=seeds, average=average,
    )  # fmt: skip


def _sweep_input(root: Path) -> RevealInput:
    with np.load(root / "scores.npz", allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    scores = arrays["scores"]
    if scores.ndim != 2:
        raise ValueError(
            f"{root} holds a multiclass sweep (scores of shape {scores.shape}); `iml reveal` "
            "reads binary sweeps over class weights"
        )
    if "betas" not in arrays:
        keys = [str(k) for k in arrays.get("keys", [])]
        shown = ", ".join(keys[:3]) + (", ..." if len(keys) > 3 else "")
        raise ValueError(
            f"{root} holds a sweep over losses that no class weight describes (keys {shown}); "
            "`iml reveal` reads sweeps over a grid of class weights"
        )
    loss, recorded = _sweep_loss(_manifest_config(root, "a sweep's scores.npz"), root)
    betas = np.asarray(arrays["betas"], dtype=np.float64)
    if betas.shape != (scores.shape[0],) or not np.array_equal(
        np.asarray(recorded, np.float32), betas.astype(np.float32)
    ):
        raise ValueError(
            f"{root}: the class weights of scores.npz ({betas.size}) are not those of its "
            f"manifest ({len(recorded)}) or do not match its scores ({scores.shape[0]} rows)"
        )
    config = _manifest_config(root, "a sweep")
    stack, seeds = None, None
    if "member_scores" in arrays:  # several seeds per loss: [m, S, N] -> [S, m, N]
        stack, seeds = np.swapaxes(arrays["member_scores"], 0, 1), arrays["seeds"].tolist()
    inputs = reveal_input(
        betas, scores, arrays["labels"], loss, kind="sweep", run=root, seed_scores=stack,
        seeds=seeds, average=str(config.get("average", "score")),
    )  # fmt: skip
    return inputs._replace(ridge=ridge_of(config.get("train", {})))


def ridge_of(train: Mapping[str, Any]) -> dict[str, Any] | None:
    """How a sweep's members were penalised (its record's ``train`` settings), and what that
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


def _sweep_loss(config: Mapping[str, Any], root: Path) -> tuple[LossFamily, list[float]]:
    """The loss of a sweep by its class weight, and the weights, from its manifest's config."""
    if "betas" in config:  # the beta-weighted log loss (plan_sweep's layout)
        return loss_family("log"), list(config["betas"])
    loss = config.get("loss")
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
    ``n_bins`` observations scored by all of them, both labels among them.

    Raises:
      ValueError: naming what the run holds.
    """
    K = inputs.scores.shape[0]
    if K < 2:
        shown = ", ".join(beta_key(b) for b in inputs.betas)
        raise ValueError(
            f"{inputs.run} holds {K} model ({inputs.loss.weight_name} {shown}); `iml reveal` "
            "compares at least 2"
        )
    n = inputs.scores.shape[1]
    if n < n_bins:
        raise ValueError(
            f"{inputs.run}: {n} of its {inputs.n_stored} observations were scored by every "
            f"model, fewer than --n-bins {n_bins}"
        )
    if not np.isin(inputs.labels, (0, 1)).all():
        raise ValueError(f"{inputs.run} holds labels other than 0 and 1")
    if np.unique(inputs.labels).size < 2:
        raise ValueError(f"{inputs.run}: the observations scored by every model share one label")
    if (inputs.scores < 0).any() or (inputs.scores > 1).any():
        raise ValueError(f"{inputs.run} holds scores outside [0, 1]")
