"""Paired intervals for the ECE comparisons that the results' READMEs state.

Where a README compares two ECEs of scores stored on the same observations (the PneumoniaMNIST
runs, which all score the same 5,856 X-rays through the same folds, and the digits runs
``reproduce_digits`` and ``reproduce_digits_multiclass``), this prints, as one JSON list, one
record per comparison: the README's folder, the two sets of scores, both ECEs (10 quantile bins)
with their 95% bootstrap intervals, and their difference (first minus second) and ratio (first
over second) with 95% paired intervals: each replicate resamples the same rows for both
(:func:`iml.calibration.compare_ece`, 1,000 replicates, ``jax.random.key(0)``).

A set of scores is named by its source:

* ``pneumoniamnist``: the ensemble at ``beta`` of the members of ``runs`` (of ``seeds`` only,
  where named), pooled by the mean score (the paper's), by the mean logit (``average: logit``),
  or as the mean of the seeds' corrected ensembles (``average: corrected``), then clipped to
  ``[1e-7, 1 - 1e-7]`` as the summary tables do, and taken ``raw``, ``corrected`` (the inverse of
  the beta-weighted log loss's optimal rule) or recalibrated by a baseline cross-fitted over the
  folds (``platt``, ``beta``, ``isotonic``: :func:`iml.recalibration.cross_fit`);
* ``reproduce_digits``: the stored ensemble at ``beta`` (``ensemble_scores.npz``), likewise;
* ``reproduce_digits_multiclass``: a loss's stored class scores, ``raw`` or ``corrected``, as
  the binary scores of class 8 against ``label == 8`` (``class 8``), as the top score against
  whether the top class is right (``top label``), or as the mean of the binary ECEs of the nine
  classes other than 8 (``nine other classes``). The last is no single set of binary scores, so
  its replicates are drawn here, the same rows as :func:`iml.calibration.compare_ece` draws.

The bootstrap holds the trained networks fixed: the intervals cover the evaluation data's noise,
not training's. Run from the repository root::

    python -m experiments.studies.ece_comparisons > docs/results/ece_comparisons/comparisons.json
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from iml.calibration import ECEComparison, compare_ece, expected_calibration_error
from iml.calibration import paired_comparison as paired_bootstrap
from iml.pipeline.reveal_input import run_members
from iml.pipeline.store import aggregate_members
from iml.recalibration import BASELINES, cross_fit
from iml.spec import loss_spec

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
_CLIP = 1e-7
N_BINS = 10
WEIGHTED_CLASS = 8  # reproduce_digits_multiclass weights the digit 8

PMN = "pneumoniamnist"
STOPPED = "pneumoniamnist_early_stopping"
PATIENCE = "pneumoniamnist_patience"
FLOOR = "pneumoniamnist_lr_floor"
FLOOR_LOW = "pneumoniamnist_lr_floor_other_betas"
SEEDS = "pneumoniamnist_seeds"
FLOOR_SEEDS = "pneumoniamnist_lr_floor_seeds"
DIGITS = "reproduce_digits"
MULTICLASS = "reproduce_digits_multiclass"


def pmn(
    runs: str | Sequence[str],
    beta: float,
    method: str,
    average: str = "score",
    seeds: Sequence[int] | None = None,
) -> dict[str, Any]:
    """A PneumoniaMNIST ensemble's scores (see the module docstring)."""
    spec: dict[str, Any] = {
        "source": PMN,
        "runs": [runs] if isinstance(runs, str) else list(runs),
        "beta": beta,
        "average": average,
        "method": method,
    }
    if seeds is not None:
        spec["seeds"] = list(seeds)
    return spec


def digits(beta: float, method: str) -> dict[str, Any]:
    return {"source": DIGITS, "beta": beta, "method": method}


def multiclass(loss: str, scores: str, of: str) -> dict[str, Any]:
    return {"source": MULTICLASS, "loss": loss, "scores": scores, "of": of}


BOTH_FLOORS = [FLOOR, FLOOR_SEEDS]
W8 = "w[8]=10"

# (README folder, what the README compares, first scores, second scores)
COMPARISONS: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    *[
        (PMN, f"beta {b}: loss-corrected against raw", pmn(PMN, b, "corrected"), pmn(PMN, b, "raw"))
        for b in (0.9, 0.99)
    ],
    *[
        (
            PMN,
            f"beta {b}: loss-corrected against cross-fitted {m}",
            pmn(PMN, b, "corrected"),
            pmn(PMN, b, m),
        )
        for m in ("platt", "isotonic")
        for b in (0.5, 0.9, 0.99)
    ],
    *[
        (
            PMN,
            f"beta {b}: beta calibration against Platt scaling",
            pmn(PMN, b, "beta"),
            pmn(PMN, b, "platt"),
        )
        for b in (0.5, 0.9, 0.99)
    ],
    (
        STOPPED,
        "beta 0.99, corrected: patience 2 against the 6-epoch cap",
        pmn(STOPPED, 0.99, "corrected"),
        pmn(PMN, 0.99, "corrected"),
    ),
    (
        STOPPED,
        "corrected: beta 0.9 against beta 0.5",
        pmn(STOPPED, 0.9, "corrected"),
        pmn(STOPPED, 0.5, "corrected"),
    ),
    (
        STOPPED,
        "beta 0.99, corrected: floor 1e-4 (seed 0) against patience 2",
        pmn(FLOOR, 0.99, "corrected"),
        pmn(STOPPED, 0.99, "corrected"),
    ),
    (
        PATIENCE,
        "beta 0.99, corrected: patience 6 against patience 2",
        pmn(PATIENCE, 0.99, "corrected"),
        pmn(STOPPED, 0.99, "corrected"),
    ),
    (
        FLOOR,
        "beta 0.99, corrected with the floor, against beta 0.5 without it (patience 6)",
        pmn(FLOOR, 0.99, "corrected"),
        pmn(PATIENCE, 0.5, "raw"),
    ),
    (
        FLOOR,
        "beta 0.99, corrected: floor 1e-4 against patience 6 without it",
        pmn(FLOOR, 0.99, "corrected"),
        pmn(PATIENCE, 0.99, "corrected"),
    ),
    (
        FLOOR,
        "beta 0.99 with the floor: corrected against cross-fitted Platt",
        pmn(FLOOR, 0.99, "corrected"),
        pmn(FLOOR, 0.99, "platt"),
    ),
    (
        FLOOR_LOW,
        "beta 0.5, corrected: floor 1e-4 against patience 6 without it",
        pmn(FLOOR_LOW, 0.5, "corrected"),
        pmn(PATIENCE, 0.5, "corrected"),
    ),
    (
        FLOOR_LOW,
        "beta 0.9, corrected: floor 1e-4 (patience 6) against patience 2 without it",
        pmn(FLOOR_LOW, 0.9, "corrected"),
        pmn(STOPPED, 0.9, "corrected"),
    ),
    *[
        (
            FLOOR_LOW,
            f"beta {b} with the floor: corrected against cross-fitted Platt",
            pmn(FLOOR_LOW, b, "corrected"),
            pmn(FLOOR_LOW, b, "platt"),
        )
        for b in (0.5, 0.9)
    ],
    (
        SEEDS,
        "beta 0.99, corrected: 4 seeds' mean score against patience 2's one seed",
        pmn(SEEDS, 0.99, "corrected"),
        pmn(STOPPED, 0.99, "corrected"),
    ),
    (
        SEEDS,
        "beta 0.99: 4 seeds' mean of corrected scores against patience 2's one seed",
        pmn(SEEDS, 0.99, "corrected", "corrected"),
        pmn(STOPPED, 0.99, "corrected"),
    ),
    (
        SEEDS,
        "beta 0.99, corrected: 4 seeds' mean logit against patience 2's one seed",
        pmn(SEEDS, 0.99, "corrected", "logit"),
        pmn(STOPPED, 0.99, "corrected"),
    ),
    (
        SEEDS,
        "4 seeds' mean score at beta 0.99, corrected, against beta 0.5 (patience 2)",
        pmn(SEEDS, 0.99, "corrected"),
        pmn(STOPPED, 0.5, "corrected"),
    ),
    (
        SEEDS,
        "4 seeds' mean of corrected scores at beta 0.99 against beta 0.5 (patience 2)",
        pmn(SEEDS, 0.99, "corrected", "corrected"),
        pmn(STOPPED, 0.5, "corrected"),
    ),
    (
        SEEDS,
        "4 seeds' mean logit at beta 0.99, corrected, against beta 0.5 (patience 2)",
        pmn(SEEDS, 0.99, "corrected", "logit"),
        pmn(STOPPED, 0.5, "corrected"),
    ),
    *[
        (
            FLOOR_SEEDS,
            f"beta 0.99 with the floor, corrected: seed 0 against seed {s}",
            pmn(FLOOR, 0.99, "corrected"),
            pmn(FLOOR_SEEDS, 0.99, "corrected", seeds=[s]),
        )
        for s in (1, 2, 3)
    ],
    *[
        (
            FLOOR_SEEDS,
            f"beta 0.99 with the floor, corrected: 4 seeds' mean {a} against seed {s}",
            pmn(BOTH_FLOORS, 0.99, "corrected", a),
            pmn(BOTH_FLOORS, 0.99, "corrected", seeds=[s]),
        )
        for a in ("score", "logit")
        for s in (0, 1, 2, 3)
    ],
    (
        FLOOR_SEEDS,
        "beta 0.99 with the floor, corrected: 4 seeds' mean logit against their mean score",
        pmn(BOTH_FLOORS, 0.99, "corrected", "logit"),
        pmn(BOTH_FLOORS, 0.99, "corrected"),
    ),
    (
        FLOOR_SEEDS,
        "beta 0.99 with the floor, corrected: seeds 1-3's mean logit against their mean score",
        pmn(FLOOR_SEEDS, 0.99, "corrected", "logit"),
        pmn(FLOOR_SEEDS, 0.99, "corrected"),
    ),
    *[
        (
            DIGITS,
            f"beta {b}: beta calibration against Platt scaling",
            digits(b, "beta"),
            digits(b, "platt"),
        )
        for b in (0.5, 0.9, 0.99)
    ],
    (
        MULTICLASS,
        "class 8: weighted and corrected against unweighted",
        multiclass(W8, "corrected", "class 8"),
        multiclass("ones", "raw", "class 8"),
    ),
    (
        MULTICLASS,
        "class 8, weighted: corrected against raw",
        multiclass(W8, "corrected", "class 8"),
        multiclass(W8, "raw", "class 8"),
    ),
    (
        MULTICLASS,
        "class 8: weighted, raw, against unweighted",
        multiclass(W8, "raw", "class 8"),
        multiclass("ones", "raw", "class 8"),
    ),
    (
        MULTICLASS,
        "mean of the nine other classes: weighted and corrected against unweighted",
        multiclass(W8, "corrected", "nine other classes"),
        multiclass("ones", "raw", "nine other classes"),
    ),
    (
        MULTICLASS,
        "mean of the nine other classes, weighted: corrected against raw",
        multiclass(W8, "corrected", "nine other classes"),
        multiclass(W8, "raw", "nine other classes"),
    ),
    (
        MULTICLASS,
        "top label, weighted: corrected against raw",
        multiclass(W8, "corrected", "top label"),
        multiclass(W8, "raw", "top label"),
    ),
    (
        MULTICLASS,
        "top label: weighted and corrected against unweighted",
        multiclass(W8, "corrected", "top label"),
        multiclass("ones", "raw", "top label"),
    ),
]


# ----------------------------------------------------------------------------------------------
# The scores
# ----------------------------------------------------------------------------------------------


@functools.cache
def _folds(run: Path) -> tuple[np.ndarray, np.ndarray]:
    with np.load(run / "data" / "folds.npz") as folds:
        return folds["labels"], folds["fold_ids"]


@functools.cache
def _members(run: Path) -> tuple[tuple[float, int, np.ndarray, np.ndarray], ...]:
    found = run_members(run)
    if found is None:
        raise ValueError(f"{run} holds no member batches that name their seeds")
    return tuple(found)


def _pooled(runs: Sequence[Path], beta: float, average: str, seeds: Sequence[int] | None):
    members = [
        (b, s, idx, a)
        for run in runs
        for b, s, idx, a in _members(run)
        if b == beta and (seeds is None or s in seeds)
    ]
    if not members:
        raise ValueError(f"no member at beta {beta} (seeds {seeds}) in {[str(r) for r in runs]}")
    n = len(_folds(runs[0])[0])

    def pool(chosen, how: str) -> np.ndarray:
        ensemble = aggregate_members([(b, idx, a) for b, _, idx, a in chosen], [beta], n, how)
        if (ensemble.sizes[0] == 0).any():
            raise ValueError(f"some observations have no member at beta {beta}")
        return np.clip(np.asarray(ensemble.scores[0], np.float64), _CLIP, 1 - _CLIP)

    if average != "corrected":
        return pool(members, average)
    seeds_found = sorted({m[1] for m in members})
    each = [pool([m for m in members if m[1] == s], "score") for s in seeds_found]
    return np.mean([_corrected(s, beta) for s in each], axis=0)


def _corrected(scores: np.ndarray, beta: float) -> np.ndarray:
    return np.asarray(loss_spec(beta).loss_corrected_score(scores.astype(np.float32)), np.float64)


def _method(scores: np.ndarray, beta: float, method: str, labels, fold_ids) -> np.ndarray:
    if method == "raw":
        return scores
    if method == "corrected":
        return _corrected(scores, beta)
    return np.asarray(cross_fit(BASELINES[method](beta), scores, labels, fold_ids), np.float64)


def scores(spec: dict[str, Any], root: Path = RESULTS) -> tuple[str, np.ndarray, np.ndarray]:
    """``(kind, scores, labels)`` of a named set of scores: ``kind`` is ``binary`` (scores
    ``[N]``) or ``nine other classes`` (class scores ``[N, 10]`` and class labels)."""
    source = spec["source"]
    if source == PMN:
        runs = [root / r for r in spec["runs"]]
        labels, fold_ids = _folds(runs[0])
        for run in runs[1:]:
            if not np.array_equal(_folds(run)[0], labels):
                raise ValueError(f"{run} holds other observations than {runs[0]}")
        if spec["average"] == "corrected" and spec["method"] != "corrected":
            raise ValueError("the mean of corrected scores is already corrected")
        pooled = _pooled(runs, spec["beta"], spec["average"], spec.get("seeds"))
        if spec["average"] == "corrected":
            return "binary", pooled, labels
        return "binary", _method(pooled, spec["beta"], spec["method"], labels, fold_ids), labels
    if source == DIGITS:
        labels, fold_ids = _folds(root / DIGITS)
        with np.load(root / DIGITS / "ensemble_scores.npz") as z:
            row = [float(b) for b in z["betas"]].index(spec["beta"])
            s = np.clip(np.asarray(z["scores"][row], np.float64), _CLIP, 1 - _CLIP)
            if not np.array_equal(z["labels"], labels):
                raise ValueError(f"{DIGITS}: ensemble_scores.npz and data/folds.npz differ")
        return "binary", _method(s, spec["beta"], spec["method"], labels, fold_ids), labels
    if source == MULTICLASS:
        with np.load(root / MULTICLASS / "ensemble_scores.npz") as z:
            row = [str(k) for k in z["keys"]].index(spec["loss"])
            stored = {"raw": "scores", "corrected": "corrected"}[spec["scores"]]
            s = np.clip(np.asarray(z[stored][row], np.float64), _CLIP, 1 - _CLIP)
            labels = np.asarray(z["labels"])
        if spec["of"] == f"class {WEIGHTED_CLASS}":
            return "binary", s[:, WEIGHTED_CLASS], (labels == WEIGHTED_CLASS).astype(np.int32)
        if spec["of"] == "top label":
            correct = np.argmax(s, axis=1) == labels
            return "binary", s.max(axis=1), correct.astype(np.int32)
        if spec["of"] == "nine other classes":
            return "nine other classes", s, labels
    raise ValueError(f"unknown scores {spec}")


# ----------------------------------------------------------------------------------------------
# The comparison
# ----------------------------------------------------------------------------------------------


def _nine_other(scores: jax.Array, labels: jax.Array) -> jax.Array:
    """The mean binary ECE of the classes other than the weighted one."""
    others = [k for k in range(scores.shape[1]) if k != WEIGHTED_CLASS]
    return jnp.mean(
        jnp.stack([expected_calibration_error(scores[:, k], labels == k, N_BINS) for k in others])
    )


def compare(
    first: dict[str, Any], second: dict[str, Any], n_bootstrap: int, key: jax.Array, root: Path
) -> tuple[ECEComparison, int]:
    """The comparison of two named sets of scores, and the number of observations."""
    kind, a, y = scores(first, root)
    other, b, z = scores(second, root)
    if kind != other:
        raise ValueError(f"{first} and {second} are not the same kind of ECE")
    if kind == "binary":
        first_scores, second_scores = a.astype(np.float32), b.astype(np.float32)
        c = compare_ece(first_scores, second_scores, y, z, N_BINS, n_bootstrap=n_bootstrap, key=key)
        return c, len(y)
    if not np.array_equal(y, z):
        raise ValueError(f"{first} and {second} hold other observations")
    sa, sb, labels = (jnp.asarray(x) for x in (a.astype(np.float32), b.astype(np.float32), y))

    @jax.jit
    def both(rows: jax.Array) -> jax.Array:
        return jnp.stack([_nine_other(sa[rows], labels[rows]), _nine_other(sb[rows], labels[rows])])

    return paired_bootstrap(both, len(y), n_bootstrap, key), len(y)


def _round(x: Any) -> Any:
    return np.round(np.asarray(x, np.float64), 4).tolist()


def record(
    index: int, n_bootstrap: int = 1000, seed: int = 0, root: Path = RESULTS
) -> dict[str, Any]:
    """The JSON record of ``COMPARISONS[index]``."""
    folder, claim, first, second = COMPARISONS[index]
    c, n = compare(first, second, n_bootstrap, jax.random.key(seed), root)
    return {
        "folder": folder,
        "comparison": claim,
        "first": first,
        "second": second,
        "n": n,
        "ece_first": _round(c.ece[0]),
        "ece_first_interval": _round(c.ece_interval[:, 0]),
        "ece_second": _round(c.ece[1]),
        "ece_second_interval": _round(c.ece_interval[:, 1]),
        "difference": _round(c.difference),
        "difference_interval": _round(c.difference_interval),
        "ratio": _round(c.ratio),
        "ratio_interval": _round(c.ratio_interval),
        "bootstrap": n_bootstrap,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the docs/results folder")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.n_bootstrap < 2:
        parser.error("--n-bootstrap must be at least 2")
    try:
        records = [
            record(i, args.n_bootstrap, args.seed, args.results) for i in range(len(COMPARISONS))
        ]
    except (ValueError, FileNotFoundError) as err:
        print(f"ece_comparisons: error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
