"""One weighted class of a multiclass sweep, looked at closely: is it corrected, and why (not)?

A multiclass sweep that weights one class ``k`` by ``w`` (``B[k,k] = w`` of the B-weighted log
loss, or ``w[k] = w`` of the class-weighted softmax cross-entropy, all other weights 1) changes
that class's coordinate of the optimal rule into the binary beta-weighted rule with
``beta = w / (w + 1)``: ``c_k(gamma) = w gamma_k / (w gamma_k + 1 - gamma_k)`` (Proposition 3,
and the closed form of the class-weighted rule). This script reads a sweep's
``ensemble_scores.npz`` and reports, for every loss of the grid:

* the binary ECE (10 quantile bins) of class ``k``'s raw and loss-corrected scores against
  ``1{y = k}``, each with its 95% bootstrap interval (:func:`iml.calibration.ece_intervals`,
  bins fixed), and their means against the class's rate;
* the 5%, 50% and 95% quantiles of the raw scores' row sums (one-vs-rest scores need not sum to
  one; a posterior must);
* the loss-calibration test (Definition 2, :func:`iml.calibration.loss_calibration_test`) of
  class ``k``'s raw scores under ``beta = w / (w + 1)`` (the loss it was trained with) and under
  ``beta = 1/2`` (unweighted), each with its verdict, number of bins and power against odds x2;
* where the grid holds the unweighted loss (``ones``), the difference of each weighted loss's
  corrected ECE from the unweighted model's ECE, with a 95% paired bootstrap interval.

Run::

    python -m experiments.studies.weighted_class --run runs/sweep_digits_matrix --class 8 \\
        --weight 10
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from iml.calibration import (
    ece_intervals,
    expected_calibration_error,
    loss_calibration_test,
    loss_calibration_verdict,
)

_CLIP = 1e-6


def _ece(scores: np.ndarray, hits: np.ndarray) -> float:
    return float(
        expected_calibration_error(np.clip(scores, _CLIP, 1 - _CLIP).astype(np.float32), hits)
    )


def weighted_class_report(
    scores: np.ndarray,
    corrected: np.ndarray,
    labels: np.ndarray,
    keys: Sequence[str],
    k: int,
    weight: float,
    n_bootstrap: int = 500,
) -> dict[str, dict[str, Any]]:
    """The diagnostics above, per key: ``scores`` and ``corrected`` are ``[m, N, n]``."""
    if scores.ndim != 3 or scores.shape != corrected.shape or not 0 <= k < scores.shape[-1]:
        raise ValueError(f"scores must be [m, N, n] with class {k} < n, got {scores.shape}")
    if not weight > 0:
        raise ValueError(f"weight must be positive, got {weight}")
    hits = (np.asarray(labels) == k).astype(np.int32)
    # Each ECE's interval: every key's raw and corrected scores on the same resampled rows.
    both = np.concatenate([scores[:, :, k], corrected[:, :, k]])
    intervals = np.asarray(
        ece_intervals(np.clip(both, _CLIP, 1 - _CLIP).astype(np.float32), hits,
                      n_bootstrap=n_bootstrap, key=jax.random.key(3)),
        np.float64,
    ).reshape(2, len(keys), 2)  # fmt: skip
    out = {}
    for i, (key, raw, fixed) in enumerate(zip(keys, scores, corrected, strict=True)):
        a = np.clip(raw[:, k], _CLIP, 1 - _CLIP).astype(np.float32)
        row: dict[str, Any] = {
            "ece_raw": _ece(raw[:, k], hits),
            "ece_raw_interval": intervals[0, i].tolist(),
            "ece_corrected": _ece(fixed[:, k], hits),
            "ece_corrected_interval": intervals[1, i].tolist(),
            "mean_raw": float(raw[:, k].mean()),
            "mean_corrected": float(fixed[:, k].mean()),
            "rate": float(hits.mean()),
            "row_sum_quantiles": np.percentile(raw.sum(-1), [5, 50, 95]).round(3).tolist(),
        }
        betas = {"trained": weight / (weight + 1), "unweighted": 0.5}
        for name, beta in betas.items():
            test = loss_calibration_test(a, hits, beta, key=jax.random.key(0))
            p, bins, power = float(test.p_value), int(test.n_bins), float(test.power)
            row[f"loss_calibration_{name}"] = {
                "beta": beta,
                "p_value": p,
                "n_bins": bins,
                "power_against_odds_x2": power,
                "calibration_error": float(test.calibration_error),
                "null_calibration_error": float(test.null_calibration_error),
                "verdict": loss_calibration_verdict(p, bins, power),
            }
        out[str(key)] = row
    keys = [str(key) for key in keys]
    if "ones" in keys:  # against the unweighted model, paired over the same resampled rows
        reference = scores[keys.index("ones")][:, k]
        for key, fixed in zip(keys, corrected, strict=True):
            if key != "ones":
                out[key]["ece_corrected_minus_unweighted"] = _paired_difference(
                    fixed[:, k], reference, hits, n_bootstrap
                )
    return out


def _paired_difference(
    first: np.ndarray, second: np.ndarray, hits: np.ndarray, n_bootstrap: int
) -> dict[str, Any]:
    """``ECE(first) - ECE(second)`` on the same rows, with its 95% paired bootstrap interval
    (rows resampled with replacement, the same rows for both)."""
    a = jnp.asarray(np.clip(first, _CLIP, 1 - _CLIP), jnp.float32)
    b = jnp.asarray(np.clip(second, _CLIP, 1 - _CLIP), jnp.float32)
    h = jnp.asarray(hits)
    rows = jax.random.randint(jax.random.key(1), (n_bootstrap, h.shape[0]), 0, h.shape[0])

    @jax.jit
    @jax.vmap
    def difference(i):
        return expected_calibration_error(a[i], h[i]) - expected_calibration_error(b[i], h[i])

    draws = np.asarray(difference(rows))
    return {
        "estimate": _ece(first, hits) - _ece(second, hits),
        "interval": np.quantile(draws, [0.025, 0.975]).tolist(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", required=True, type=Path, help="a multiclass sweep's folder")
    parser.add_argument("--class", dest="k", required=True, type=int, help="the weighted class")
    parser.add_argument("--weight", required=True, type=float, help="its weight w")
    parser.add_argument("--n-bootstrap", type=int, default=500)
    args = parser.parse_args(argv)
    path = args.run / "ensemble_scores.npz"
    if not path.is_file():
        print(f"weighted_class: error: --run: {path} not found", file=sys.stderr)
        return 2
    with np.load(path) as stored:
        if not {"keys", "corrected"} <= set(stored.files) or stored["scores"].ndim != 3:
            problem = (
                "holds no multiclass sweep's ensemble scores (keys, scores per class, corrected)"
            )
            print(f"weighted_class: error: --run: {path} {problem}", file=sys.stderr)
            return 2
        if not np.isfinite(stored["scores"]).all():
            problem = "leaves observations unscored (NaN), and the report needs every one scored"
            print(f"weighted_class: error: --run: {path} {problem}", file=sys.stderr)
            return 2
        report = weighted_class_report(
            stored["scores"], stored["corrected"], stored["labels"], list(stored["keys"]),
            args.k, args.weight, args.n_bootstrap,
        )  # fmt: skip
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
