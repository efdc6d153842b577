"""Fixtures shared by the tests of iml.recalibration."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def binary_data():
    """Miscalibrated scores (too confident), rounded so that ties occur."""
    rng = np.random.default_rng(0)
    n = 1500
    x = rng.normal(size=n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(1.5 * x - 1.0)))).astype(np.int32)
    s = np.clip(np.round(1.0 / (1.0 + np.exp(-3.0 * x)), 3), 0.001, 0.999)
    w = rng.uniform(0.2, 2.0, size=n)
    return s, y, w
