"""iml._validation: the shared input checks, and one wording per rule across the package."""

import re
from pathlib import Path

import numpy as np
import pytest

from iml import _validation as V

PACKAGE = Path(__file__).resolve().parents[1] / "iml"


@pytest.mark.parametrize("value", [1, 7, np.int64(3), np.int32(1)])
def test_check_count_accepts_integers_at_the_minimum_and_above(value):
    got = V.check_count("n", value)
    assert got == int(value) and type(got) is int


@pytest.mark.parametrize(
    ("value", "minimum", "shown"),
    [(0, 1, "0"), (True, 1, "True"), (2.0, 1, "2.0"), ("3", 1, "'3'"), (1, 2, "1"), (-1, 0, "-1")],
)
def test_check_count_names_the_argument_the_minimum_and_the_value(value, minimum, shown):
    message = f"^n_bins must be an integer >= {minimum}, got {re.escape(shown)}$"
    with pytest.raises(ValueError, match=message):
        V.check_count("n_bins", value, minimum)


def test_public_functions_word_a_bad_count_alike():
    from iml import beta_grid
    from iml.calibration import expected_calibration_error
    from iml.data import assign_folds
    from iml.models import build_small_model

    scores, labels = np.array([0.2, 0.7]), np.array([0, 1])
    for call, name, minimum, shown in [
        (lambda: beta_grid(0), "n_betas", 1, "0"),
        (lambda: expected_calibration_error(scores, labels, n_bins=0), "n_bins", 1, "0"),
        (lambda: assign_folds(10, n_folds=1), "n_folds", 2, "1"),
        (lambda: build_small_model("mlp", hidden=True), "hidden", 1, "True"),
    ]:
        with pytest.raises(
            ValueError, match=f"^{name} must be an integer >= {minimum}, got {shown}$"
        ):
            call()


def test_no_module_words_the_count_rule_its_own_way():
    # Other wordings the package once used for the same rule; V.check_count is the one place.
    others = re.compile(r"must be a (positive|non-negative) integer[,;]|must be >= \d")
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if others.search(line)
    ]
    assert found == []
