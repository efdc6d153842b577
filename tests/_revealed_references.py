"""References shared by the tests of iml.revealed (tests/revealed/): the binary entropy, the
minimised expected loss of the beta-weighted log loss in float64, random value matrices, and a
symmetric channel of n classes."""

import numpy as np


def binary_entropy(g):
    g = np.asarray(g, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.nan_to_num(g * np.log(g)) - np.nan_to_num((1 - g) * np.log(1 - g))


def minimised_loss(beta, gamma):
    """The closed form ``l*(gamma) = Z h(c^beta(gamma))`` of the beta-weighted log loss, float64."""
    z = beta * gamma + (1 - beta) * (1 - gamma)
    return z * binary_entropy(beta * gamma / z)


def random_value_matrices(rng, n, K):
    """Supermodular matrices (the identity is optimal) plus noise of random size."""
    u = np.sort(rng.normal(size=(n, K, 1)), axis=1)
    v = np.sort(rng.normal(size=(n, 1, K)), axis=2)
    noise = rng.normal(size=(n, K, K)) * rng.choice([0.0, 0.05, 0.3, 1.0], size=(n, 1, 1))
    return (u * v + noise).astype(np.float32)


def symmetric_channel(prior, accuracy, n_models):
    """``n`` signals, ``P(s = y | y) = accuracy`` and the rest spread evenly over the others:
    ``(probability [K, n], posterior [K, n, n])`` of one experiment for each of ``K`` models."""
    prior = np.asarray(prior, np.float64)
    n = prior.size
    channel = np.full((n, n), (1.0 - accuracy) / (n - 1))
    np.fill_diagonal(channel, accuracy)  # [y, s]
    joint = prior[:, None] * channel
    probability = joint.sum(0)
    posterior = (joint / probability).T  # [s, y]
    return np.tile(probability, (n_models, 1)), np.tile(posterior, (n_models, 1, 1))
