"""Tests of iml.recalibration.temperature: temperature scaling, against scipy's minimisation."""

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

from iml.recalibration import (
    TemperatureScaling,
    temperature_fit,
    temperature_transform,
)


def test_temperature_matches_scipy_minimisation_binary_and_multiclass():
    rng = np.random.default_rng(2)
    n, k = 800, 4
    true_logits = rng.normal(size=(n, k)) * 1.5
    labels = np.array([rng.choice(k, p=np.exp(log_softmax(z))) for z in true_logits])
    logits = 2.5 * true_logits  # overconfident: T should be near 2.5

    def nll(t):
        return -np.mean(log_softmax(logits / t, axis=1)[np.arange(n), labels])

    expected = minimize_scalar(nll, bounds=(0.05, 50), method="bounded", options={"xatol": 1e-9})
    got = temperature_fit(logits, labels)
    np.testing.assert_allclose(float(got), expected.x, rtol=1e-4)
    probs = temperature_transform(got, logits)
    np.testing.assert_allclose(np.sum(probs, axis=1), 1.0, rtol=1e-5)

    z = logits[:, 0] - logits[:, 1]
    yb = (labels == 0).astype(np.int32)

    def nll_binary(t):
        return np.mean(np.logaddexp(0.0, -z / t) * yb + np.logaddexp(0.0, z / t) * (1 - yb))

    expected = minimize_scalar(nll_binary, bounds=(0.05, 50), method="bounded")
    np.testing.assert_allclose(float(temperature_fit(z, yb)), expected.x, rtol=1e-4)
    # The class maps probabilities to logits itself (moderate logits: float32 probabilities).
    z_mod = z / 4.0

    def nll_mod(t):
        return np.mean(np.logaddexp(0.0, -z_mod / t) * yb + np.logaddexp(0.0, z_mod / t) * (1 - yb))

    t_mod = minimize_scalar(nll_mod, bounds=(0.01, 50), method="bounded").x
    sb = 1.0 / (1.0 + np.exp(-z_mod))
    out = TemperatureScaling().fit(sb, yb).transform(sb)
    np.testing.assert_allclose(out, 1.0 / (1.0 + np.exp(-z_mod / t_mod)), atol=1e-4)
