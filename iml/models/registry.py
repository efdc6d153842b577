"""The models by name: one registry for the ensembles of ``iml reproduce`` and the sweeps of
``iml sweep``.

A record says how to build the model (``build(num_outputs, **options)`` gives an unbound Flax
module called as ``model.apply(variables, x, train=...)``), which inputs it takes (``"images"``,
``[n, H, W, C]``; ``"rows"``, ``[n, d]``) and which keys of ``config.model`` it reads besides its
name. An ensemble trains a model that takes images, a sweep one that takes rows. A new model is
one call of :func:`register_model`, from any file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from flax import linen as nn

from iml import _validation as V

__all__ = [
    "INPUTS",
    "MODELS",
    "ModelRecord",
    "build_model",
    "model_record",
    "models_taking",
    "register_model",
    "unregister_model",
]

#: What a model can take: images ``[n, H, W, C]`` (an ensemble's) or rows ``[n, d]`` (a sweep's).
INPUTS = ("images", "rows")


@dataclasses.dataclass(frozen=True)
class ModelRecord:
    """A model the experiments build by name.

    Attributes:
      name: its name in ``config.model.name``.
      build: ``build(num_outputs, **options)``, an unbound Flax module with ``num_outputs``
        logits per example (1: a binary task).
      inputs: the inputs it takes, a subset of :data:`INPUTS`.
      options: the keys of ``config.model`` that ``build`` takes as keyword arguments.
    """

    name: str
    build: Callable[..., nn.Module]
    inputs: frozenset[str]
    options: frozenset[str] = frozenset()


#: Every registered model by name (:func:`register_model` adds to it).
MODELS: dict[str, ModelRecord] = {}


def register_model(
    name: str,
    build: Callable[..., nn.Module],
    *,
    inputs: Iterable[str] = INPUTS,
    options: Iterable[str] = (),
) -> ModelRecord:
    """Register ``build`` as the model ``name`` (replacing one of that name) and return its record.

    Raises:
      ValueError: for an empty name, a ``build`` that is not callable, or inputs outside
        :data:`INPUTS`.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a model's name must be a non-empty string, got {name!r}")
    if not callable(build):
        raise ValueError(f"model {name!r}: build must be callable, got {type(build).__name__}")
    taken = frozenset(inputs)
    if not taken or not taken <= set(INPUTS):
        raise ValueError(f"model {name!r}: inputs must be a non-empty subset of {INPUTS}")
    record = ModelRecord(name, build, taken, frozenset(options))
    MODELS[name] = record
    return record


def unregister_model(name: str) -> None:
    """Remove the model ``name`` from the registry (a no-op where it is absent)."""
    MODELS.pop(name, None)


def models_taking(inputs: str) -> tuple[str, ...]:
    """The names of the registered models that take ``inputs`` (``"images"`` or ``"rows"``)."""
    V.check_choice("inputs", inputs, INPUTS)
    return tuple(n for n, r in MODELS.items() if inputs in r.inputs)


def model_record(name: str, inputs: str | None = None) -> ModelRecord:
    """The record of the model ``name``, which must take ``inputs`` where that is given.

    Raises:
      ValueError: for an unknown name, or a model that does not take ``inputs``, naming the
        models that do.
    """
    record = MODELS.get(name)
    if record is None:
        raise ValueError(f"unknown model {name!r}; the models are {list(MODELS)}")
    if inputs and inputs not in record.inputs:
        raise ValueError(
            f"model {name!r} does not take {inputs}; the models that do are "
            f"{list(models_taking(inputs))}"
        )
    return record


def build_model(
    name: str, num_outputs: int = 1, inputs: str | None = None, /, **options: Any
) -> nn.Module:
    """The model ``name`` with ``num_outputs`` logits, built with those ``options`` its record
    takes (others are ignored, so one config section serves every model).

    Raises:
      ValueError: for an unknown name, a model that does not take ``inputs``, or a count below 1.
    """
    record = model_record(name, inputs)
    V.check_count("num_outputs", num_outputs)
    return record.build(num_outputs, **{k: v for k, v in options.items() if k in record.options})
