"""Tests of iml._bootstrap: resampling counts (multinomial and Poisson), percentile and order
statistic intervals, and the check of the resampling scheme."""

import jax
import pytest

from iml import revealed as R

BAD = {
    "resampling": (
        lambda: R.paired_bootstrap_weights(jax.random.key(0), 5, 2, "jackknife"),
        "resampling",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_naming_the_argument(name):
    call, match = BAD[name]
    with pytest.raises(ValueError, match=match):
        call()
