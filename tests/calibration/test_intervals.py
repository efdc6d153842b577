"""Tests of iml.calibration.intervals: the Clopper-Pearson interval of a binomial rate."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml import calibration as cal


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_clopper_pearson_interval_matches_scipy_exact(confidence):
    from scipy.stats import binomtest

    events = np.array([0, 1, 2, 5, 17, 90, 179, 180, 0, 1, 3, 7, 0, 40, 1000])
    count = np.array([180, 180, 180, 180, 180, 180, 180, 180, 1, 1, 7, 7, 5000, 5000, 20000])
    got = np.asarray(cal.clopper_pearson_interval(events, count, confidence))
    expected = np.array(
        [
            binomtest(int(k), int(n)).proportion_ci(confidence, method="exact")
            for k, n in zip(events, count, strict=True)
        ]
    ).T
    chex.assert_shape(got, (2, len(events)))
    # float32 betainc: about 1e-4 relative for counts in the hundreds, 1e-3 in the thousands.
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-8)
    small = count <= 180
    np.testing.assert_allclose(got[:, small], expected[:, small], rtol=2e-4, atol=1e-8)


def test_clopper_pearson_bounds_without_events_and_with_only_events_have_closed_forms():
    n = np.array([1.0, 10.0, 180.0, 1797.0])
    alpha = 0.05
    lower, upper = np.asarray(cal.clopper_pearson_interval(np.zeros(4), n, 1 - alpha))
    assert np.all(lower == 0.0)
    np.testing.assert_allclose(upper, 1 - (alpha / 2) ** (1 / n), rtol=1e-5)
    lower, upper = np.asarray(cal.clopper_pearson_interval(n, n, 1 - alpha))
    assert np.all(upper == 1.0)
    np.testing.assert_allclose(lower, (alpha / 2) ** (1 / n), rtol=1e-5)


def test_clopper_pearson_interval_jits_vmaps_and_turns_invalid_entries_into_nan():
    events = jnp.array([0.0, 3.0, 5.0, 4.0, 1.0])
    count = jnp.array([10.0, 10.0, 0.0, 2.0, 10.0])  # an empty bin, and more events than trials
    f = jax.jit(jax.vmap(cal.clopper_pearson_interval, in_axes=(0, 0, None), out_axes=1))
    got = np.asarray(f(events, count, 0.9))
    eager = np.asarray(cal.clopper_pearson_interval(events[:2], count[:2], 0.9))
    np.testing.assert_allclose(got[:, :2], eager, rtol=1e-6)
    assert np.all(np.isnan(got[:, 2:4])) and np.all(np.isfinite(got[:, [0, 1, 4]]))
    # The interval widens with the confidence and always holds the rate.
    wide = np.asarray(cal.clopper_pearson_interval(3.0, 10.0, 0.99))
    narrow = np.asarray(cal.clopper_pearson_interval(3.0, 10.0, 0.5))
    assert wide[0] < narrow[0] < 0.3 < narrow[1] < wide[1]


@pytest.mark.parametrize(
    ("events", "count", "confidence", "match"),
    [
        (-1.0, 10.0, 0.95, "events"),
        (np.nan, 10.0, 0.95, "events"),
        (1.0, -2.0, 0.95, "count"),
        (11.0, 10.0, 0.95, "events exceeds count"),
        (1.0, 10.0, 1.0, "confidence"),
        (1.0, 10.0, 0.0, "confidence"),
    ],
)
def test_clopper_pearson_interval_rejects_bad_input(events, count, confidence, match):
    with pytest.raises(ValueError, match=match):
        cal.clopper_pearson_interval(events, count, confidence)
