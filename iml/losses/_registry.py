"""The registry of loss families: one :class:`LossRecord` per loss a specification can name.

A record holds everything the rest of ``iml`` asks of a loss: its value on scores, its stable
logit form, its optimal scoring rule ``c^L`` (eq. ``choice``), the rule's inverse (Proposition 4),
the minimised expected loss ``l*``, its class weight, and how a grid of its weights is written.
Each family module of :mod:`iml.losses` registers its records with :func:`register`;
:class:`iml.LossSpec` looks them up by name (:func:`lookup`) and never branches on the kind of
loss. A researcher's new loss is one :func:`register` call, in any file: every field beyond the
loss itself is optional, and an absent rule, inverse or ``l*`` falls back to the generic rules of
:mod:`iml.scoring`, found by automatic differentiation.

Each function of a record takes the loss's parameters as keywords, e.g.
``record.loss(a, y, beta=0.9)``; inside a batched specification they arrive one loss at a time
(``jax.vmap``) or broadcast against the scores.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml._device import to_device

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "GridWeight",
    "LossRecord",
    "as_parameter",
    "entropy_term",
    "is_shipped",
    "lookup",
    "register",
    "registered",
    "unregister",
]

#: The links of :attr:`LossRecord.link`: one sigmoid per output, or a softmax over the classes.
LINKS = ("sigmoid", "softmax")
#: The forms the exact solver of ``iml.training`` fits a linear model in (:attr:`LossRecord.exact`).
EXACT_FORMS = ("logistic", "one_vs_rest", "softmax")


class GridWeight(NamedTuple):
    """The weight a grid of a multiclass loss varies: its ``symbol`` in a grid's text
    (``"B[8,8]=10"``), its number of indices (``rank``) and the parameter it fills (``param``)."""

    symbol: str
    rank: int
    param: str


@dataclasses.dataclass(frozen=True, eq=False)
class LossRecord:
    """One loss family, as :class:`iml.LossSpec` uses it.

    Attributes:
      name: the name a specification, a config (``config.loss.name``) and a stored run use.
      title: what :meth:`iml.LossSpec.describe` calls it, e.g. ``"beta-weighted log loss"``.
      make: ``make(**params) -> (params, n_classes)``: checks the user's parameters (a
        ``ValueError`` naming a bad one, for concrete values), fills defaults, and returns them as
        arrays (:func:`as_parameter`) with the class count (2 for a binary loss).
      loss: ``loss(a, y, **params)``: the loss of scores ``a`` (``[...]`` binary, ``[..., n]``
        multiclass) and integer labels ``y``.
      event_ndims: each parameter's own number of axes (``beta`` 0, ``class_weights`` 1, ``B``
        2); axes beyond them are a batch of losses.
      multiclass: whether scores carry a class axis.
      link: ``"sigmoid"`` (binary losses, and one sigmoid per class for a one-vs-rest loss) or
        ``"softmax"``: how a model's logits become the scores ``loss`` takes.
      logits_loss: ``logits_loss(z, y, **params)``, the loss of ``link(z)`` computed stably;
        default ``loss(link(z), y)``.
      optimal_score: ``optimal_score(gamma, **params)``, the rule in closed form; default the
        generic rule of :mod:`iml.scoring`.
      inverse: ``inverse(a, **params)``, the loss-corrected score in closed form, NaN where no
        posterior makes ``a`` optimal; default the generic inverse.
      minimised_expected_loss: ``l*(gamma, **params)`` in closed form; default the loss at the
        optimal score.
      class_weight: a binary loss's parameter that weighs the positive class (``1/2``
        unweighted), which makes it a function of one class weight (:class:`iml.LossFamily`):
        what ``iml reproduce``, ``iml sweep`` and ``iml reveal`` grid over. None if it has none.
      grid_weight: a multiclass loss's weight that a grid's text varies (``config.loss.weights``).
      row_weight: ``row_weight(y, **params)`` on NumPy arrays (one loss's float64 parameters):
        the total weight a row of label ``y`` carries, summed over outputs; what the ridge's
        ``per_weight`` scale divides by. None if unknown.
      exact: the form in which the exact solver fits a linear model under this loss (a convex
        problem): ``"logistic"`` (one logistic regression, rows weighted by :attr:`row_weight`
        under the class weight), ``"one_vs_rest"`` (one per class, output ``c``'s rows of label
        ``y`` weighted by ``B[y, c]`` of a parameter ``B``) or ``"softmax"`` (a multinomial one,
        rows weighted by ``class_weights[y]``); None where only a stochastic solver applies.
      key: ``key(params) -> str | None``: one loss's row key in a table, from its parameters
        as float64 arrays; None for the default (the parameters themselves).
      prior_shift: whether the class weight acts on the optimal scores as a shift of the prior
        (the beta-weighted log loss, eq. ``correct-prior``), so that the prior-shift baseline
        of :mod:`iml.recalibration` applies to its scores.
    """

    name: str
    title: str
    make: Callable[..., tuple[dict[str, Any], int]]
    loss: Callable[..., Array]
    event_ndims: Mapping[str, int]
    multiclass: bool = False
    link: str = "sigmoid"
    logits_loss: Callable[..., Array] | None = None
    optimal_score: Callable[..., Array] | None = None
    inverse: Callable[..., Array] | None = None
    minimised_expected_loss: Callable[..., Array] | None = None
    class_weight: str | None = None
    grid_weight: GridWeight | None = None
    row_weight: Callable[..., Array] | None = None
    exact: str | None = None
    key: Callable[[Mapping[str, np.ndarray]], str | None] | None = None
    prior_shift: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a loss's name must be an identifier, got {self.name!r}")
        V.check_choice("link", self.link, LINKS)
        if self.exact is not None:
            V.check_choice("exact", self.exact, EXACT_FORMS)
        if self.class_weight is not None and (
            self.multiclass or self.class_weight not in self.event_ndims
        ):
            raise ValueError(
                f"class_weight {self.class_weight!r} must be a parameter of a binary loss"
            )
        if self.prior_shift and self.class_weight is None:
            raise ValueError("prior_shift needs a class_weight: the weight that shifts the prior")
        if self.grid_weight is not None and (
            not self.multiclass or self.grid_weight.param not in self.event_ndims
        ):
            raise ValueError(
                f"grid_weight {self.grid_weight} must fill a parameter of a multiclass loss"
            )

    @property
    def domain(self) -> str:
        """Where the generic multiclass rules search: ``"simplex"`` (softmax scores) or
        ``"box"`` (one sigmoid per class)."""
        return "simplex" if self.link == "softmax" else "box"

    @functools.cached_property
    def positional_loss(self) -> Callable[..., Array]:
        """``loss(a, y, *values)`` with the parameters in :attr:`event_ndims` order, as the
        generic rules of :mod:`iml.scoring` take it. One function per record, so that programs
        compiled for it are reused."""
        names = tuple(self.event_ndims)

        def loss(a: Array, y: Array, *values: Array) -> Array:
            return self.loss(a, y, **dict(zip(names, values, strict=True)))

        loss.__name__ = self.name
        return loss


_REGISTRY: dict[str, LossRecord] = {}


def register(record: LossRecord, *, replace: bool = False) -> LossRecord:
    """Add ``record`` to the registry under its name, and return it.

    Raises:
      ValueError: if the name is taken (unless ``replace``), or is ``"callable"``, which stands
        for a user's function.
    """
    if record.name == "callable":
        raise ValueError("'callable' stands for a user's loss function; choose another name")
    if record.name in _REGISTRY and not replace:
        raise ValueError(f"a loss named {record.name!r} is registered already")
    _REGISTRY[record.name] = record
    return record


def unregister(name: str) -> None:
    """Remove the loss ``name`` from the registry (a test's own loss, once it is done)."""
    lookup(name)
    del _REGISTRY[name]


def lookup(name: str) -> LossRecord:
    """The record of the loss ``name``.

    Raises:
      ValueError: naming the registered losses, for an unknown name.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown loss {name!r}; the registered losses are {registered()}")
    return _REGISTRY[name]


def registered() -> list[str]:
    """The registered losses' names, sorted."""
    return sorted(_REGISTRY)


# The records of the losses iml ships, as its package registers them on import.
_SHIPPED: dict[str, LossRecord] = {}


def mark_shipped() -> None:
    """Note every record registered now as shipped (:func:`is_shipped`); the package calls it
    once its family modules have registered theirs."""
    _SHIPPED.update(_REGISTRY)


def is_shipped(name: str) -> bool:
    """Whether the loss ``name`` is registered as iml ships it: not a plugin's or a user's, and
    not replaced. A fresh process that imports iml then looks up the same loss by that name."""
    return name in _SHIPPED and _REGISTRY.get(name) is _SHIPPED[name]


def as_parameter(name: str, value: Any) -> Any:
    """A parameter as a specification stores it: concrete values become float32 arrays (a
    ``ValueError`` naming ``name`` if they are not numeric); traced ones stay as given."""
    if not V.is_concrete(value):
        return value
    x = np.asarray(value, dtype=np.float64)
    if x.dtype == object:
        raise ValueError(f"{name} must be numeric; got {value!r}")
    return to_device(x, np.float32)


def entropy_term(p: Array, q: Array) -> Array:
    """``-p log(p / (p + q)) = p log1p(q / p)``, without cancellation; 0 where ``p = 0``: the
    terms of the weighted log losses' minimised expected loss."""
    safe = jnp.where(p > 0, p, 1.0)
    return jnp.where(p > 0, p * jnp.log1p(q / safe), 0.0)
