"""Tests of iml.revealed.losses: the K models' losses, read as one batched specification or a
list, checked against the number of models."""

import numpy as np
import pytest

from iml import revealed as R

BETAS = np.array([0.5, 0.7, 0.9, 0.99])


BAD = {
    "losses": (lambda: R.value_matrix(R.shannon_agent(BETAS, 0.1, 0.3), [0.5, 0.9]), "losses"),
    "losses-beta": (
        lambda: R.value_matrix(R.shannon_agent(BETAS, 0.1, 0.3), [0.5, 0.9, 1.5, 0.2]),
        "beta",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_naming_the_argument(name):
    call, match = BAD[name]
    with pytest.raises(ValueError, match=match):
        call()
