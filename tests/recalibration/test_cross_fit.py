"""Recalibration cross-fitted over folds (``iml.recalibration.cross_fit``): no observation is
recalibrated by a map fitted on its own label, and a weighted fit equals one on the other folds
alone."""

import numpy as np
import pytest

from iml.recalibration import BASELINES, cross_fit


class _MeanLabel:
    """A recalibrator that predicts the mean label it was fitted on, and records the fit."""

    fits: list

    def __init__(self, fits):
        self.fits = fits

    def fit(self, scores, labels):
        self.fits.append(np.asarray(scores).copy())
        self.rate = float(np.mean(labels))
        return self

    def transform(self, scores):
        return np.full(len(scores), self.rate)


def test_cross_fit_never_fits_on_the_evaluated_fold():
    rng = np.random.default_rng(0)
    scores = rng.uniform(size=30)
    labels = (rng.uniform(size=30) < 0.3).astype(int)
    folds = np.arange(30) % 3
    fits = []
    out = cross_fit(lambda y: _MeanLabel(fits), scores, labels, folds)
    for f in range(3):
        expected = labels[folds != f].mean()
        np.testing.assert_allclose(out[folds == f], expected)
        assert not np.isin(scores[folds == f], fits[f]).any()


@pytest.mark.parametrize("name", ["platt", "beta", "temperature", "isotonic", "histogram"])
def test_weighted_cross_fit_equals_fitting_on_the_other_folds_alone(name):
    rng = np.random.default_rng(1)
    scores = np.clip(rng.beta(0.5, 3.0, size=300), 1e-4, 1 - 1e-4)
    labels = (rng.uniform(size=300) < scores**0.7).astype(int)
    folds = np.arange(300) % 5
    make = BASELINES[name](0.9)
    out = cross_fit(make, scores, labels, folds)  # held-out observations weigh 0
    for f in range(5):
        fit = folds != f
        alone = make(labels[fit]).fit(scores[fit].astype(np.float32), labels[fit])
        want = np.asarray(alone.transform(scores[~fit].astype(np.float32)))
        np.testing.assert_allclose(out[~fit], want, rtol=2e-5, atol=1e-7)


@pytest.mark.parametrize("in_order", [False, True])
def test_isotonic_folds_fitted_on_the_host_equal_its_fold_by_fold_cross_fit(in_order):
    """Isotonic calibration fits its folds on the host and maps each fold's held-out scores in
    one program: to the last bit the scores of fitting it with each fold weighing zero and
    mapping every score, fold by fold; with tied scores, folds of unequal sizes and fold ids
    that are not 0 to F - 1, in score order (as the report passes them) or not."""
    from iml.recalibration import IsotonicCalibration

    rng = np.random.default_rng(3)
    n = 997
    scores = np.round(rng.beta(0.7, 2.0, size=n), 3)  # a few hundred distinct scores
    labels = (rng.uniform(size=n) < scores).astype(np.int32)
    folds = rng.choice([2, 5, 11, 12], size=n, p=[0.1, 0.2, 0.3, 0.4])
    if in_order:
        order = np.argsort(scores, kind="stable")
        scores, labels, folds = scores[order], labels[order], folds[order]
    out = cross_fit(BASELINES["isotonic"](0.5), scores, labels, folds)
    s = scores.astype(np.float32)
    want = np.empty(n)
    for f in np.unique(folds):
        fitted = IsotonicCalibration().fit(s, labels, sample_weight=(folds != f).astype(np.float32))
        want[folds == f] = np.asarray(fitted.transform(s))[folds == f]
    np.testing.assert_array_equal(out, want)


def test_the_table_baselines_fitted_in_score_order_are_each_row_own_cross_fit():
    """The report sorts each row's observations once for all its baselines' fits; the maps,
    and so the recalibrated scores in the observations' own order, are those of cross-fitting
    the row as it comes (to float32 summation order)."""
    from iml.grids import loss_family
    from iml.pipeline.scores import _baselines

    rng = np.random.default_rng(2)
    scores = np.clip(rng.beta(0.5, 3.0, size=(2, 400)), 1e-4, 1 - 1e-4)
    labels = (rng.uniform(size=400) < scores[0] ** 0.7).astype(np.int32)
    folds = rng.permutation(np.arange(400) % 5)
    weights = np.array([0.3, 0.9])
    out = _baselines(loss_family("log"), weights, scores, labels, folds)
    assert set(out) == set(BASELINES)
    for name, fitted in out.items():
        for row, (w, s) in enumerate(zip(weights, scores, strict=True)):
            want = cross_fit(BASELINES[name](float(w)), s, labels, folds)
            np.testing.assert_allclose(fitted[row], want, rtol=1e-4, atol=1e-6, err_msg=name)


def test_cross_fit_refuses_bad_scores_and_labels_naming_them():
    """Every fold's fit runs in one program, which checks nothing: the arrays are checked
    before it."""
    scores, labels, folds = np.full(6, 0.5), np.array([0, 1, 0, 1, 0, 1]), np.arange(6) % 2
    with pytest.raises(ValueError, match="scores"):
        cross_fit(BASELINES["platt"](0.5), np.full(6, 1.5), labels, folds)
    with pytest.raises(ValueError, match="labels must take values in"):
        cross_fit(BASELINES["isotonic"](0.5), scores, labels + 1, folds)


def test_a_method_that_fits_its_folds_on_the_host_has_no_program_of_fold_fits():
    from iml.recalibration import IsotonicCalibration
    from iml.recalibration.cross_fit import _fold_fits

    with pytest.raises(TypeError, match="on the host"):
        _fold_fits(IsotonicCalibration())
