"""Tests of iml.models.registry: the one registry of models by name, for ensembles and sweeps."""

import pytest
from flax import linen as nn

from iml.models import (
    MODELS,
    DenseNet,
    LogisticRegression,
    build_model,
    model_record,
    models_taking,
    register_model,
    unregister_model,
)


def test_the_built_in_models_are_registered_with_the_inputs_they_take():
    assert {"densenet_tiny", "densenet_small", "densenet121"} <= set(models_taking("images"))
    assert {"logistic", "mlp"} <= set(models_taking("rows")) & set(models_taking("images"))
    assert not set(models_taking("rows")) & {"densenet_tiny", "densenet_small", "densenet121"}
    assert isinstance(build_model("densenet_tiny", 3, "images"), DenseNet)
    assert build_model("densenet_tiny", 3).num_outputs == 3
    logistic = build_model("logistic", 4, "rows", hidden=7, name="logistic")
    assert isinstance(logistic, LogisticRegression) and logistic.n_outputs == 4
    assert build_model("mlp", 1, "rows", hidden=7).hidden == 7  # the option it takes


def test_a_registered_model_is_built_with_its_options_and_removed_again():
    class Probe(nn.Module):
        n: int = 1
        width: int = 2

    record = register_model("probe_test", lambda n, width=2: Probe(n, width), options=("width",))
    try:
        assert MODELS["probe_test"] is record and record.inputs == {"images", "rows"}
        model = build_model("probe_test", 5, "rows", width=9, hidden=3)
        assert (model.n, model.width) == (5, 9)  # hidden is not one of its options
    finally:
        unregister_model("probe_test")
    assert "probe_test" not in MODELS
    unregister_model("probe_test")  # a no-op


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: register_model("", lambda n: None), "non-empty string"),
        (lambda: register_model("x_test", 3), "build must be callable"),
        (lambda: register_model("x_test", lambda n: None, inputs=()), "non-empty subset"),
        (lambda: register_model("x_test", lambda n: None, inputs=("pixels",)), "subset"),
        (lambda: model_record("nope"), "unknown model 'nope'; the models are"),
        (lambda: model_record("densenet121", "rows"), "does not take rows"),
        (lambda: models_taking("pixels"), "inputs"),
        (lambda: build_model("logistic", 0), "num_outputs"),
        (lambda: build_model("mlp", 1, hidden=0), "hidden"),
    ],
)
def test_bad_registrations_and_lookups_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
    assert "x_test" not in MODELS
