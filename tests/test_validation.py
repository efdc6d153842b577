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


@pytest.mark.parametrize("value", [0.5, 3, np.float32(2.0), np.int64(1)])
def test_positive_and_non_negative_numbers_come_back_as_floats(value):
    assert V.check_positive("x", value) == float(value)
    assert V.check_non_negative("x", value) == float(value)
    assert V.check_non_negative("x", 0) == 0.0


@pytest.mark.parametrize("value", [0, 0.0, -1e-9, float("nan"), float("inf"), True, "1", None])
def test_check_positive_names_the_argument_and_the_value(value):
    with pytest.raises(
        ValueError, match=f"^tol must be a finite number > 0, got {re.escape(repr(value))}$"
    ):
        V.check_positive("tol", value)


@pytest.mark.parametrize("value", [-1, float("-inf"), float("nan"), False])
def test_check_non_negative_names_the_argument_and_the_value(value):
    with pytest.raises(
        ValueError, match=f"^l2 must be a finite number >= 0, got {re.escape(repr(value))}$"
    ):
        V.check_non_negative("l2", value)


def test_check_choice_lists_the_choices_and_the_value():
    V.check_choice("norm", "l2", ("l1", "l2"))
    V.check_choice("conv_impl", None, ("xla", None))
    with pytest.raises(ValueError, match=r"^norm must be one of \('l1', 'l2'\), got 'max'$"):
        V.check_choice("norm", "max", ["l1", "l2"])


def test_figure_formats_are_known_distinct_and_may_be_none():
    assert V.check_figure_formats("figures", ["svg", "png"]) == ("svg", "png")
    assert V.check_figure_formats("figures", ()) == ()
    for formats, message in (
        (("png", "jpg"), r"^figures: unknown figure format 'jpg'; use \('png', 'pdf', 'svg'\)$"),
        (("png", "png"), r"^figures names a format twice: \('png', 'png'\)$"),
        ("png", r"^figures must be a sequence of figure formats"),
    ):
        with pytest.raises(ValueError, match=message):
            V.check_figure_formats("figures", formats)


def test_check_shape_names_the_shape_wanted_and_the_shape_given():
    V.check_shape("labels", np.zeros(3), (3,))
    V.check_shape("labels", [0, 1, 1], (3,))
    with pytest.raises(ValueError, match=r"^labels must have shape \(4,\), got \(3,\)$"):
        V.check_shape("labels", np.zeros(3), (4,))
    with pytest.raises(ValueError, match=r"^scores must have shape \(2, 3\), got \(3, 2\)$"):
        V.check_shape("scores", np.zeros((3, 2)), [2, 3])


def test_check_finite_counts_the_entries_that_are_not():
    V.check_finite("x", np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"^features must be finite; 2 entries are not$"):
        V.check_finite("features", [[0.0, np.nan], [np.inf, 1.0]])


def test_check_weights_wants_finite_non_negative_weights_with_a_positive_sum():
    V.check_weights("w", np.array([0.0, 2.0]))
    V.check_weights("w", np.zeros(0))
    V.check_weights("w", np.array([[1.0, 0.0], [0.0, 3.0]]))  # each row sums above 0
    for bad, message in [
        ([1.0, -1.0], r"^w must lie in \[0, inf\) without NaN; got min -1, max 1$"),
        ([1.0, np.nan], r"^w must lie in \[0, inf\) without NaN; got 1 NaN, min 1, max 1$"),
        ([1.0, np.inf], r"^w must lie in \[0, inf\) without NaN"),
        ([[1.0, 0.0], [0.0, 0.0]], "^w must have a positive sum$"),
    ]:
        with pytest.raises(ValueError, match=message):
            V.check_weights("w", np.array(bad))


@pytest.mark.parametrize(
    ("seeds", "expected"),
    [
        (3, (0, 1, 2)),
        (np.int64(1), (0,)),
        ((4,), (4,)),
        ([7, 2], (7, 2)),
        (np.array([0, 5]), (0, 5)),
    ],
)
def test_check_seeds_counts_or_takes_the_seeds_themselves(seeds, expected):
    got = V.check_seeds("seeds", seeds)
    assert got == expected and all(type(s) is int for s in got)


@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        (0, "must be a count of at least 1 or the seeds themselves, got 0"),
        ((), r"must be non-negative integers, got \(\)"),
        ((1, -2), "must be non-negative integers"),
        ((True,), "must be non-negative integers"),
        ((0.5,), "must be non-negative integers"),
        (np.array([[0, 1]]), "must be non-negative integers"),
        ((0, 3, 0), r"repeats a seed: \[0, 3, 0\]"),
    ],
)
def test_check_seeds_names_the_argument_and_the_rule(seeds, message):
    with pytest.raises(ValueError, match=f"^config.plan.seeds {message}"):
        V.check_seeds("config.plan.seeds", seeds)


def test_every_seeds_argument_is_checked_alike():
    from iml.pipeline.plan import make_plan
    from iml.pipeline.sweep import run_sweep

    x, y = np.zeros((20, 2)), np.arange(20) % 2
    for call in (
        lambda: make_plan(20, betas=[0.5], seeds=(1, 1)),
        lambda: run_sweep(x, y, None, [0.5], seeds=(1, 1), progress=False),
    ):
        with pytest.raises(ValueError, match=r"^seeds repeats a seed: \[1, 1\]$"):
            call()


def test_public_functions_word_a_bad_count_alike():
    from iml import beta_grid
    from iml.calibration import expected_calibration_error
    from iml.data import assign_folds
    from iml.models import build_model

    scores, labels = np.array([0.2, 0.7]), np.array([0, 1])
    for call, name, minimum, shown in [
        (lambda: beta_grid(0), "n_betas", 1, "0"),
        (lambda: expected_calibration_error(scores, labels, n_bins=0), "n_bins", 1, "0"),
        (lambda: assign_folds(10, n_folds=1), "n_folds", 2, "1"),
        (lambda: build_model("mlp", 1, hidden=True), "hidden", 1, "True"),
    ]:
        with pytest.raises(
            ValueError, match=f"^{name} must be an integer >= {minimum}, got {shown}$"
        ):
            call()


def test_no_module_words_the_count_or_number_rules_its_own_way():
    # Other wordings the package once used for the same rules; V.check_count, V.check_positive,
    # V.check_non_negative, V.check_interval, V.check_finite and V.check_weights are the one
    # place of each.
    others = re.compile(
        r"must be a (positive|non-negative) integer[,;]|must be >= \d"
        r"|must be (positive|non-negative), got|non-negative number|strictly between"
        r"|NaN or infinite|finite and (strictly )?positive|finite,? (and )?non-negative"
        r"|sums to zero|strictly positive entries|must be one of [^\"]*[;] got"
    )
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "_validation.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if others.search(line)
    ]
    assert found == []


def test_check_interval_judges_every_dtype_by_its_extremes():
    """Floats of any width, integers, booleans and lists: in range passes; an entry out of
    range, at an open end, or NaN anywhere is refused, its extremes and NaN count named."""
    x = np.linspace(0.0, 1.0, 101, dtype=np.float32).reshape(1, 101)
    for ok in (x, x.astype(np.float16), np.arange(5), np.array([True, False]), [0.0, 1.0]):
        V.check_interval("w", ok, 0.0, 4.0, open_low=False, open_high=False)
    with pytest.raises(ValueError, match=r"w must lie in \(0, 1\] without NaN; got min 0, max 1"):
        V.check_interval("w", x, 0.0, 1.0, open_low=True, open_high=False)
    with pytest.raises(ValueError, match=r"\[0, 1\) without NaN; got min 0, max 1"):
        V.check_interval("w", x, 0.0, 1.0, open_low=False, open_high=True)
    with pytest.raises(ValueError, match="got min 0, max 5"):
        V.check_interval("n", np.arange(6), 0.0, 4.0, open_low=False, open_high=False)
    nan = x.copy()
    nan[0, 50] = np.nan
    with pytest.raises(ValueError, match="got 1 NaN, min 0, max 1"):
        V.check_interval("w", nan, -1.0, 2.0, open_low=False, open_high=False)
    V.check_interval("w", np.array([]), 0.0, 1.0, open_low=True, open_high=True)  # nothing to judge
