"""Tests of iml.recalibration.newton: logistic regression by Newton's method, the fitting kernel of
Platt scaling and beta calibration."""

import numpy as np
from sklearn.linear_model import LogisticRegression

from iml.recalibration import (
    platt_fit,
)


def test_platt_converges_on_heavily_weighted_rare_class_scores():
    # Scores of a beta = 0.99 model on a ~2% class: logits shifted by logit(0.99) ~ 4.6. Newton's
    # full step from (1, 0) overshoots here; the fit must still match scikit-learn's optimum.
    rng = np.random.default_rng(7)
    z = rng.normal(-5.0, 1.5, size=4000)
    y = (rng.uniform(size=z.size) < 1 / (1 + np.exp(-z))).astype(np.int32)
    s = (1 / (1 + np.exp(-(z + np.log(99.0))))).astype(np.float32)
    params = platt_fit(s, y, smooth_targets=False)
    features = np.log(np.float64(s) / (1.0 - np.float64(s)))[:, None]
    lr = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(features, y)
    np.testing.assert_allclose(float(params.slope), lr.coef_[0, 0], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(float(params.intercept), lr.intercept_[0], rtol=1e-3, atol=1e-3)
