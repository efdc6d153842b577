"""Tests of iml.recalibration.interface: the common interface of the recalibrators (fit,
transform, fit_transform) and its checks of input and configuration."""

import numpy as np
import pytest

from iml.recalibration import (
    HistogramBinning,
    IsotonicCalibration,
    LossCorrection,
    PlattScaling,
    PriorShiftCorrection,
    TemperatureScaling,
    prior_shift_ratio,
)


@pytest.mark.slow
def test_fit_transform_equals_fit_then_transform(binary_data):
    s, y, _ = binary_data
    for method in (PlattScaling(), IsotonicCalibration(), HistogramBinning(n_bins=5)):
        np.testing.assert_allclose(method.fit_transform(s, y), method.fit(s, y).transform(s))


_S = np.array([0.1, 0.4, 0.8])
_Y = np.array([0, 1, 1])


@pytest.mark.parametrize(
    ("method", "scores", "labels", "weights", "message"),
    [
        (PlattScaling(), _S, np.array([0, 2, 1]), None, "labels"),
        (IsotonicCalibration(), np.array([0.1, np.nan, 0.8]), _Y, None, "NaN"),
        (HistogramBinning(), np.array([]), np.array([]), None, "empty"),
        (
            PlattScaling(),
            _S,
            _Y,
            np.array([1.0, -1.0, 1.0]),
            r"sample_weight must lie in \[0, inf\)",
        ),
        (TemperatureScaling(), np.array([0.1, 1.4, 0.8]), _Y, None, r"must lie in \[0, 1\]"),
        (PriorShiftCorrection(train_prior=0.5), _S, np.array([0, 0, 0]), None, "class"),
    ],
)
def test_bad_input_raises_value_error(method, scores, labels, weights, message):
    with pytest.raises(ValueError, match=message):
        method.fit(scores, labels, weights)


def test_bad_configuration_raises_value_error():
    with pytest.raises(ValueError, match="beta"):
        LossCorrection(beta=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        LossCorrection()
    with pytest.raises(ValueError, match="not fitted"):
        PlattScaling().transform(_S)
    with pytest.raises(ValueError, match="train_prior"):
        prior_shift_ratio(1.5, 0.1)
