"""Tests of iml.data.errors: an argument error words one problem for a call (the argument) and
for a command (its flag)."""

from __future__ import annotations

import pytest

from iml.data.errors import ArgumentError, ArgumentFileNotFoundError, check_unique_names


def test_argument_error_words_the_same_problem_for_a_call_and_a_command():
    err = ArgumentError("positive", "{x}", "{given} never occurs in {column!r}", column="a{b}")
    assert str(err) == "positive='{x}' never occurs in 'a{b}'"  # braces in data stay data
    flagged = err.for_flags({"positive": "--positive"})
    assert str(flagged) == "--positive '{x}' never occurs in 'a{b}'"
    assert isinstance(flagged, ValueError) and flagged.argument == "positive"
    assert err.for_flags({"target": "--target"}) is err
    missing = ArgumentFileNotFoundError("path", "x.csv", "{given}: file not found")
    assert isinstance(missing.renamed("file", "y.csv"), FileNotFoundError)
    assert str(missing.renamed("file", "y.csv")) == "file='y.csv': file not found"


def test_repeated_names_are_listed_once_each_in_the_order_they_repeat():
    check_unique_names(["a", "b", "c"], "names", ["a", "b", "c"])
    with pytest.raises(
        ArgumentError, match=r"names=\['b', 'a', 'b', 'a', 'b'\]: column names repeat: \['b', 'a'\]"
    ):
        check_unique_names(["b", "a", "b", "a", "b"], "names", ["b", "a", "b", "a", "b"])
