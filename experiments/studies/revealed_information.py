"""Paired differences of the revealed mutual information ``I_k`` between class weights.

``iml reveal`` gives each model's ``I_k`` with a percentile interval from a paired bootstrap: every
replicate resamples the same observations for every model. Two marginal intervals that overlap
say nothing about the difference of paired estimates, so this study draws the same replicates as
``iml reveal`` (the same key, the same order of the observations, the same adaptive bins and, for
a model trained with several seeds, the same resampling of its seeds) and gives, for each pair of
models, ``I_j - I_k`` with the percentile interval of the replicates' differences.

Its marginal intervals equal those of the run's stored ``revealed.json`` (the record says whether
they do, ``marginal_matches_revealed``), which checks that the replicates are ``iml reveal``'s.
Only runs whose scores are stored can be read: the default digits run and the PneumoniaMNIST
runs with the learning-rate floor (the sweeps of Adult and Letter commit no scores).

Run from the repository root (about a minute on the 2-core CPU)::

    python -m experiments.studies.revealed_information \
        > docs/results/revealed/information_differences.json
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

from experiments.sync_docs import Table
from iml.pipeline.reveal_input import load_reveal_input
from iml.revealed import paired_bootstrap_weights
from iml.revealed.bins import as_min_count, bin_signals, merged_signals, signals_from_scores
from iml.revealed.experiments import (
    experiments_from_sums,
    mutual_information_of,
    signal_indicator,
    signal_sums,
)
from iml.revealed.losses import as_losses
from iml.revealed.report import bootstrap_chunks, resampled_seeds

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
# name: (the runs read, the folder of their stored revealed.json)
RUNS = {
    "digits": (["reproduce_digits"], "revealed/reproduce_digits"),
    "PneumoniaMNIST": (
        [
            "pneumoniamnist_lr_floor_other_betas",
            "pneumoniamnist_lr_floor",
            "pneumoniamnist_lr_floor_seeds",
        ],
        "revealed/pneumoniamnist",
    ),
}
N_BINS, N_BOOTSTRAP, SEED, CONFIDENCE = 10, 1000, 0, 0.95  # iml reveal's defaults


def information_replicates(
    inputs: Any, n_bins: int = N_BINS, n_bootstrap: int = N_BOOTSTRAP, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray]:
    """``(I [K], I* [n_bootstrap, K])``: the estimate and ``iml reveal``'s bootstrap replicates
    (:func:`iml.revealed.reveal` with adaptive bins and ``jax.random.key(seed)``)."""
    scores, labels = inputs.scores, inputs.labels
    specs = as_losses(inputs.loss(inputs.betas), len(inputs.betas))
    min_count = as_min_count(None)
    key = jax.random.split(jax.random.key(seed))[0]
    signals = np.asarray(signals_from_scores(scores, n_bins, "adaptive", specs, min_count))
    n = labels.shape[0]
    # reveal orders the positives first and sums the positives over a leading block of rows
    order = np.argsort(labels != 1, kind="stable")
    step = -(-n // 16)
    positive_rows = min(n, max(1, -(-int(np.sum(labels == 1)) // step)) * step)
    signals, y = signals[:, order], jnp.asarray(labels[order])
    seeds = None if inputs.seed_scores is None else jnp.asarray(inputs.seed_scores[:, :, order])
    w = jnp.ones(n, jnp.float32)

    def information(weights, indicator):
        sums = signal_sums(weights, y, indicator, n_bins, positive_rows)
        return mutual_information_of(experiments_from_sums(*sums))

    indicator = signal_indicator(jnp.asarray(signals), n_bins, positive_rows)
    estimate = information(w, indicator)
    chunks, size = bootstrap_chunks(n_bootstrap, n)

    def seed_replicate(args):
        key_seed, counts = args
        pooled = resampled_seeds(key_seed, seeds, inputs.average)
        signals_b = merged_signals(
            pooled, bin_signals(pooled, n_bins, "quantile"), specs, n_bins, min_count
        )
        return information(w * counts, signal_indicator(signals_b, n_bins, positive_rows))

    @jax.jit
    def chunk(key_chunk):
        counts = paired_bootstrap_weights(key_chunk, n, size, "poisson")
        if seeds is None:
            return jax.vmap(lambda c: information(w * c, indicator))(counts)
        keys = jax.random.split(jax.random.fold_in(key_chunk, 1), size)
        return jax.lax.map(seed_replicate, (keys, counts))

    replicates = [chunk(k) for k in jax.random.split(key, chunks)]
    stacked = np.concatenate([np.asarray(r) for r in replicates])[:n_bootstrap]
    return np.asarray(estimate), stacked


def _interval(replicates: np.ndarray) -> list[list[float]]:
    """The percentile interval over axis 0 as ``iml reveal`` reads it: the order statistics of
    ranks ``floor(a (n - 1))`` and ``ceil((1 - a) (n - 1))``, ``a = (1 - confidence) / 2``."""
    ordered, n = np.sort(replicates, axis=0), replicates.shape[0]
    tail = (1.0 - CONFIDENCE) / 2.0
    low, high = int(np.floor(tail * (n - 1))), int(np.ceil((1.0 - tail) * (n - 1)))
    return [ordered[low].tolist(), ordered[high].tolist()]


def run_record(name: str, results: Path = RESULTS) -> dict[str, Any]:
    """The paired differences of ``I_k`` between every two models of one run."""
    runs, revealed = RUNS[name]
    inputs = load_reveal_input([results / r for r in runs])
    estimate, replicates = information_replicates(inputs)
    stored = json.loads((results / revealed / "revealed.json").read_text())["information"]
    marginal = _interval(replicates)
    betas = [float(b) for b in inputs.betas]
    pairs = []
    for k in range(len(betas)):
        for j in range(k + 1, len(betas)):
            diff = replicates[:, k] - replicates[:, j]
            lo, hi = _interval(diff[:, None])
            pairs.append(
                {
                    "first": betas[k],
                    "second": betas[j],
                    "difference": float(estimate[k] - estimate[j]),
                    "interval": [lo[0], hi[0]],
                }
            )
    return {
        "run": name,
        "runs": [f"docs/results/{r}" for r in runs],
        "betas": betas,
        "n": int(inputs.labels.shape[0]),
        "information": estimate.tolist(),
        "information_interval": marginal,
        "marginal_matches_revealed": bool(
            np.allclose(estimate, stored["estimate"], atol=1e-5)
            and np.allclose(marginal, stored["interval"], atol=1e-5)
        ),
        "differences": pairs,
        "method": (
            f"I_first - I_second in nats, with the {CONFIDENCE:.0%} percentile interval of the "
            f"same difference over iml reveal's {N_BOOTSTRAP} paired bootstrap replicates "
            f"(adaptive bins from {N_BINS} deciles, jax.random.key({SEED}); a model with "
            "several seeds has them resampled per replicate and binned anew)"
        ),
    }


def render_table(records: Sequence[dict[str, Any]]) -> str:
    """The Markdown table of every pair's difference (``docs/results/revealed/README.md``)."""
    lines = [
        "| run | betas | `I` at the first | `I` at the second | difference [95% paired interval] |",
        "|---|---|---|---|---|",
    ]
    for record in records:
        info, betas = record["information"], record["betas"]
        for pair in record["differences"]:
            k, j = betas.index(pair["first"]), betas.index(pair["second"])
            lo, hi = pair["interval"]
            lines.append(
                f"| {record['run']} | {pair['first']:g} − {pair['second']:g} | {info[k]:.3f} "
                f"| {info[j]:.3f} | {pair['difference']:+.4f} [{lo:+.4f}, {hi:+.4f}] |"
            )
    return "\n".join(lines)


def stored_table() -> str:
    """``render_table`` of the stored record."""
    path = RESULTS / "revealed" / "information_differences.json"
    return render_table(json.loads(path.read_text()))


#: The generated tables of docs/results/revealed/README.md (:mod:`experiments.sync_docs`).
TABLES = [
    Table("revealed_information differences", "docs/results/revealed/README.md", stored_table)
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="*", default=list(RUNS), choices=list(RUNS))
    args = parser.parse_args(argv)
    records = [run_record(name) for name in args.runs]
    json.dump(records, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
