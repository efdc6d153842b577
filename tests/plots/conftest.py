"""Fixtures shared by the tests of iml.plots."""

import pytest
from _figure_helpers import simulated_scores


@pytest.fixture(scope="session")
def data():
    """Scores of the same signals scored under three class weights (one shared label vector)."""
    return simulated_scores()
