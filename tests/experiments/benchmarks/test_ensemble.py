"""Tests of experiments.benchmarks.ensemble: the search for the largest ensemble that fits."""

import pytest


def _fits_below(capacity, calls):
    """An ``attempt`` that runs out of memory above ``capacity`` members, recording each K."""

    def attempt(k):
        calls.append(k)
        if k > capacity:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
        return {"members": k}

    return attempt


def test_largest_members_search_halves_then_reports_the_first_failure():
    from experiments.benchmarks.ensemble import search_largest

    calls = []
    found = search_largest(_fits_below(300, calls), predicted=800)
    # 800 fails, 400 fails, 200 fits; it does not grow past a K that already failed.
    assert calls == [800, 400, 200]
    assert found["members"] == 200 and found["smallest_failed_members"] == 400
    assert found["tried"] == [[800, False], [400, False], [200, True]]


def test_largest_members_search_grows_from_a_fitting_prediction_until_one_fails():
    from experiments.benchmarks.ensemble import search_largest

    calls = []
    found = search_largest(_fits_below(90, calls), predicted=64)
    assert calls == [64, 80, 96]  # grows by a quarter, in multiples of 8
    assert found["members"] == 80 and found["smallest_failed_members"] == 96
    # Out of time: the fitting prediction is reported without growing.
    calls.clear()
    found = search_largest(_fits_below(90, calls), predicted=64, seconds=0.0)
    assert calls == [64] and found["smallest_failed_members"] is None


def test_largest_members_search_raises_other_errors_and_reports_nothing_fits():
    from experiments.benchmarks.ensemble import search_largest

    assert "error" in search_largest(_fits_below(4, []), predicted=32)

    def broken(k):
        raise ValueError("a bug, not a lack of memory")

    with pytest.raises(ValueError, match="a bug"):
        search_largest(broken, predicted=32)
