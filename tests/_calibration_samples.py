"""Samples and float64 references shared by the tests of iml.calibration (tests/calibration/)."""

import numpy as np


def binary_sample(n: int, seed: int = 0, prevalence_shift: float = 0.0):
    rng = np.random.default_rng(seed)
    scores = rng.beta(2.0, 5.0, n).astype(np.float32)
    labels = (rng.random(n) < np.clip(scores + prevalence_shift, 0, 1)).astype(np.int32)
    return scores, labels


def np_loss_calibrated_sample(seed: int, n: int, beta: float):
    """Posteriors ~ Beta(1, 5) (inverse CDF), scores c^beta(posterior) as float32, labels ~
    posterior; in NumPy (no JAX compilation)."""
    rng = np.random.default_rng(seed)
    posterior = 1.0 - (1.0 - rng.random(n)) ** (1.0 / 5.0)
    scores = beta * posterior / (beta * posterior + (1 - beta) * (1 - posterior))
    labels = (rng.random(n) < posterior).astype(np.int32)
    return scores.astype(np.float32), labels


def ece_by_hand(scores, labels, edges, norm):
    """Independent float64 loop: right-closed bins, first bin closed."""
    n = len(scores)
    gaps, shares = [], []
    for b in range(len(edges) - 1):
        if b == 0:
            member = scores <= edges[1]
        else:
            member = (scores > edges[b]) & (scores <= edges[b + 1])
        if b == len(edges) - 2:
            member = scores > edges[b] if b > 0 else np.ones(n, bool)
        if member.sum() == 0:
            continue
        gaps.append(abs(scores[member].mean() - labels[member].mean()))
        shares.append(member.sum() / n)
    gaps, shares = np.array(gaps), np.array(shares)
    return {
        "l1": np.sum(shares * gaps),
        "l2": np.sqrt(np.sum(shares * gaps**2)),
        "max": gaps.max(),
    }[norm]


def scores_of_kind(kind: str, n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scores of a known kind and labels drawn from the true posteriors ``p ~ Beta(2, 5)``."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 5.0, n)
    labels = (rng.random(n) < p).astype(np.int32)
    logit = np.log(p / (1 - p))
    scores = {
        "calibrated": p,
        "over_confident": 1 / (1 + np.exp(-2.0 * logit)),
        "under_confident": 1 / (1 + np.exp(-0.5 * logit)),
        "beta_weighted": 0.8 * p / (0.8 * p + 0.2 * (1 - p)),  # trained with beta = 0.8
    }[kind]
    return scores.astype(np.float32), labels
