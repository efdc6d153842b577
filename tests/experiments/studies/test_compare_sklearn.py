"""Tests of experiments.studies.compare_sklearn: `iml sweep`'s defaults fit as well as
scikit-learn's."""

import numpy as np
import pytest

from experiments.studies import compare_sklearn


@pytest.mark.slow
def test_default_sweep_on_digits_fits_as_well_as_scikit_learns_default():
    """All ten digits, the unweighted class-weighted softmax cross-entropy with no tuning flags:
    out-of-fold accuracy within 0.005 and log loss within 10% of scikit-learn's
    LogisticRegression() on standardised features, fitted on the same training folds."""
    overrides = {"data.name": "digits", "data.classes": "all",
                 "loss.name": "class_weighted_softmax", "loss.weights": "ones"}  # fmt: skip
    result = compare_sklearn.compare(overrides, replicates=200)
    assert result["rows"] == 1797 and result["classes"] == 10
    assert result["accuracy_diff"] > -0.005
    assert result["log_loss_ratio"] < 1.10
    low, high = result["accuracy_diff_95ci"]
    assert low <= result["accuracy_diff"] <= high


def test_rows_are_scored_by_the_top_class_and_the_true_class_log_loss():
    y = np.array([0, 1, 1])
    right, loss = compare_sklearn._per_row(np.array([0.2, 0.7, 0.4]), y)
    assert right.tolist() == [True, True, False]
    np.testing.assert_allclose(loss, -np.log([0.8, 0.7, 0.4]))
    scores = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    right, loss = compare_sklearn._per_row(scores, np.array([0, 1]))
    assert right.tolist() == [True, False]
    assert loss == pytest.approx(-np.log([0.7, 0.1]))
