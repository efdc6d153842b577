"""Two binary sweeps that differ in the ridge's scale, side by side: the loss-corrected ECE at
the ends of the beta grid, with a paired bootstrap interval for each difference, and the NIS and
NIAC verdicts of ``iml reveal`` on each.

Each folder is an ``iml sweep`` output (``ensemble_scores.npz``, ``table.json``) with
``iml reveal``'s ``revealed.json`` in its ``revealed/`` subfolder, on the same data and grid.
Run::

    python -m experiments.studies.ridge_scale --first runs/adult_paper \\
        --second runs/adult_per_weight

The last stdout line is the JSON record.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from iml.calibration import expected_calibration_error
from iml.pipeline.reveal import verdict_text


def _ends(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.load(folder / "ensemble_scores.npz") as stored:
        missing = {"betas", "corrected", "labels"} - set(stored.files)
        if missing:  # a reproduce run's ensemble scores, or a sweep over a multiclass grid
            raise ValueError(
                f"{folder} holds no binary sweep's ensemble scores (no {', '.join(sorted(missing))}"
                " in its ensemble_scores.npz): give the folders of two `iml sweep` runs over betas"
            )
        betas, corrected, labels = stored["betas"], stored["corrected"], stored["labels"]
    ends = [int(np.argmin(betas)), int(np.argmax(betas))]
    return betas[ends], corrected[ends], labels


def compare(first: Path, second: Path, n_bootstrap: int = 1000) -> dict[str, Any]:
    """The corrected ECE of both sweeps at the grid's two ends, their difference (first minus
    second) with its 95% paired bootstrap interval, and both sweeps' NIS and NIAC verdicts."""
    betas, a, labels = _ends(first)
    other, b, other_labels = _ends(second)
    if not (np.array_equal(betas, other) and np.array_equal(labels, other_labels)):
        raise ValueError(f"{first} and {second} are not sweeps of the same data and grid")
    h = jnp.asarray(labels)
    rows = jax.random.randint(jax.random.key(0), (n_bootstrap, h.shape[0]), 0, h.shape[0])

    def ece(scores: np.ndarray) -> Any:
        return expected_calibration_error(jnp.asarray(np.clip(scores, 1e-7, 1 - 1e-7)), h)

    out: dict[str, Any] = {"ends": {}}
    for beta, x, y in zip(betas, a, b, strict=True):
        sx, sy = (jnp.asarray(np.clip(s, 1e-7, 1 - 1e-7), jnp.float32) for s in (x, y))
        draws = jax.jit(jax.vmap(lambda i, sx=sx, sy=sy: expected_calibration_error(sx[i], h[i])
                                 - expected_calibration_error(sy[i], h[i])))(rows)  # fmt: skip
        first_ece, second_ece = float(ece(x)), float(ece(y))
        out["ends"][repr(float(beta))] = {
            "first": first_ece,
            "second": second_ece,
            "difference": first_ece - second_ece,
            "interval": np.quantile(np.asarray(draws), [0.025, 0.975]).tolist(),
        }
    for name, folder in (("first", first), ("second", second)):
        record = json.loads((folder / "revealed" / "revealed.json").read_text())
        out[name] = {
            "run": str(folder),
            "ridge": record.get("ridge"),
            **{
                test: {key: record[test][key] for key in ("margin", "lower_bound", "p_value")}
                | {"verdict": verdict_text(record, test)}
                for test in ("nis", "niac")
            },
        }
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--first", required=True, type=Path, help="a sweep's folder")
    parser.add_argument("--second", required=True, type=Path, help="the other sweep's folder")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    args = parser.parse_args(argv)
    report = compare(args.first, args.second, args.n_bootstrap)
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
