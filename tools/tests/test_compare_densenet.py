"""Tests for tools.compare_densenet: the DenseNet step against another revision."""

from __future__ import annotations

import types
from pathlib import Path

import jax
import numpy as np
import pytest

from iml.models import densenet_small
from tools.compare_densenet import compare, module_at


def test_module_at_head_is_an_independent_copy_that_builds_the_same_model():
    import iml.models.densenet as current

    other = module_at("HEAD", Path(current.__file__).resolve().parents[2])
    assert other is not current and other.DenseNet is not current.DenseNet
    x = jax.random.normal(jax.random.key(0), (2, 16, 16, 1))
    kwargs = dict(block_config=(1, 1), growth_rate=4, num_init_features=8)
    a, b = current.densenet_small(**kwargs), other.densenet_small(**kwargs)
    variables = a.init(jax.random.key(1), x)
    np.testing.assert_array_equal(a.apply(variables, x), b.apply(variables, x))


def test_module_at_unknown_revision_names_it():
    import iml.models.densenet as current

    with pytest.raises(ValueError, match="no-such-rev"):
        module_at("no-such-rev", Path(current.__file__).resolve().parents[2])


def test_compare_times_every_module_alternately():
    def tiny(num_outputs, conv_impl):
        return densenet_small(num_outputs, block_config=(1,), growth_rate=4, conv_impl=conv_impl)

    modules = {
        "a": types.SimpleNamespace(densenet121=tiny),
        "b": types.SimpleNamespace(densenet121=tiny),
    }
    result = compare(modules, batch=2, size=8, repeats=3, conv_impl="mixed")
    assert set(result) == {"a", "b"}
    for r in result.values():
        assert len(r["step_s"]) == 3 and r["median_step_s"] == sorted(r["step_s"])[1] > 0


def test_main_refuses_no_repeats(capsys):
    from tools.compare_densenet import main

    with pytest.raises(SystemExit):
        main(["--rev", "HEAD", "--repeats", "0"])
    assert "--repeats must be at least 1" in capsys.readouterr().err
