"""What an exact fit takes (``iml.training.exact_inputs``): each bad argument named."""

import numpy as np
import pytest

from iml.training.exact import beta_weighted_sample_weights, fit_weighted_logistic


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sample_weights": np.ones((2, 5))}, r"sample_weights must be \[\.\.\., 4\]"),
        ({"sample_weights": -np.ones((1, 4))}, r"sample_weights must lie in \[0, inf\)"),
        ({"labels": np.array([0, 1, 2, 1])}, "labels must be 0 or 1"),
        ({"features": np.array([[0.0, np.nan]] * 4)}, "features must be finite; 4 entries"),
        ({"l2": -1.0}, r"l2 must lie in \[0, inf\)"),
        ({"max_iter": 0}, "max_iter must be an integer >= 1"),
        ({"tol": 0.0}, "tol must be a finite number > 0"),
    ],
)
def test_bad_input_is_named(kwargs, message):
    args = {
        "features": np.zeros((4, 2)),
        "labels": np.array([0, 1, 0, 1]),
        "sample_weights": np.ones((1, 4)),
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        fit_weighted_logistic(**args)
    with pytest.raises(ValueError, match=r"betas must lie in \(0, 1\)"):
        beta_weighted_sample_weights(np.array([0, 1]), [1.0], np.ones((1, 2)))
    with pytest.raises(ValueError, match="no training rows"):
        beta_weighted_sample_weights(np.array([0, 1]), [0.5], np.zeros((1, 2)))
