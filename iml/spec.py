"""The loss specification: one type for "the loss a model was trained with".

The paper's correction follows from the loss alone (eq. ``choice``: the model reports
``c^L(gamma) = argmin_a sum_y gamma_y L(a, y)``; Proposition 4 inverts it). A :class:`LossSpec`
names that loss once and gives everything the rest of the project asks of it:

* :meth:`LossSpec.loss`: ``L(a, y)`` on scores (probabilities);
* :meth:`LossSpec.logits_loss`: the same loss on logits, computed stably (what training
  minimises), and :meth:`LossSpec.link`, the scores those logits stand for;
* :meth:`LossSpec.optimal_score`: the optimal scoring rule ``c^L(gamma)``, eq. ``choice``;
* :meth:`LossSpec.loss_corrected_score`: its inverse ``(c^L)^{-1}(a)``, the loss-corrected score;
* :meth:`LossSpec.minimised_expected_loss`: ``l*(gamma) = min_a sum_y gamma_y L(a, y)``;
* :attr:`LossSpec.multiclass`: whether scores carry a class axis.

Build one with :func:`loss_spec` from any of

* a class weight ``beta`` in ``(0, 1)``: the beta-weighted log loss, eq. ``b-loss-bin``
  (closed forms: Proposition 2, Corollary 1);
* a weight matrix ``B`` ``[n, n]``: the B-weighted log loss, eq. ``b-loss-multi`` (Proposition 3
  and its inverse, one posterior per one-vs-rest output);
* a registered name with its parameters (:data:`LOSSES`, the registry of :mod:`iml.losses`):
  ``"log"`` and ``"squared"`` (weighted by ``beta``, default 1/2), ``"focal"`` (``gamma``,
  ``alpha``), ``"softmax_focal"`` (``gamma``, ``class_weights``), ``"class_weighted_softmax"``
  (``class_weights``), ``"matrix"`` (``B``), or a loss a researcher registered
  (:func:`iml.losses.register`);
* any differentiable callable ``L(a, y)``: the generic rule of :mod:`iml.scoring`, found by
  automatic differentiation (binary by default; ``n_classes`` for a multiclass loss of one score
  vector).

Binary specifications take positive-class scores and posteriors ``[...]``; multiclass ones take
``[..., n]`` with classes last. The weights of the paper's losses keep its normalisation (``beta``
and ``1 - beta``; the unweighted log loss is ``beta = 1/2``, half the usual one), so that expected
losses compare across betas.

A :class:`LossSpec` is a pytree: its numeric parameters are leaves, its kind is static. It passes
through ``jax.jit``, and an array of betas (or a stack of matrices) is a *batched* specification
that ``jax.vmap`` maps over::

    specs = loss_spec(jnp.array([0.5, 0.9, 0.99]))          # batch_shape (3,)
    corrected = jax.vmap(LossSpec.loss_corrected_score, in_axes=(0, None))(specs, scores)

Concrete bad parameters raise ``ValueError`` naming the parameter when the specification is
built; under a transformation the methods return NaN wherever a parameter is invalid.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml import losses as L
from iml import scoring as S
from iml.losses import GridWeight, LossRecord

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "CLASS_WEIGHTS",
    "LOSSES",
    "WEIGHT_GRIDS",
    "GridWeight",
    "LossFamily",
    "LossGrid",
    "LossLike",
    "LossSpec",
    "RegistryView",
    "beta_grid",
    "beta_key",
    "config_parameters",
    "grid_keys",
    "grid_weights",
    "loss_family",
    "loss_grid",
    "loss_spec",
    "parse_weight_grid",
    "weight_grid",
]

_DOMAINS = ("simplex", "box")


@dataclasses.dataclass(frozen=True, eq=False)
class LossSpec:
    """A loss, its optimal scoring rule and the rule's inverse (see the module docstring).

    Build it with :func:`loss_spec`; the fields are for reading. Every method looks the loss's
    record up in the registry (:attr:`record`) and calls it, or, where the record gives no
    closed form, the generic rules of :mod:`iml.scoring`.

    Attributes:
      name: the registered loss (:func:`iml.losses.registered`: ``"log"``, ``"squared"``,
        ``"matrix"``, ``"class_weighted_softmax"``, ``"focal"``, ``"softmax_focal"``, or a
        researcher's own), or ``"callable"`` for a user's function.
      params: the numeric parameters by name (pytree leaves, possibly batched); a callable's
        extra arguments are ``params["args"]``.
      fn: the user's loss for ``"callable"``.
      n_classes: 2 for binary losses; the class count of multiclass ones.
      domain: for a multiclass callable, ``"simplex"`` (softmax scores) or ``"box"``
        (one-vs-rest sigmoid scores).
    """

    name: str
    params: Mapping[str, Any]
    fn: Callable[..., Array] | None = None
    n_classes: int = 2
    domain: str = "simplex"

    # -- description ---------------------------------------------------------------------------

    @property
    def record(self) -> LossRecord:
        """The registry's record of this loss; for a callable, one made from the function."""
        if self.name == "callable":
            return _callable_record(self.fn, self.n_classes, self.domain)
        return L.lookup(self.name)

    @property
    def multiclass(self) -> bool:
        """Whether scores and posteriors carry a class axis."""
        return self.n_classes != 2

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Leading axes of the parameters beyond one loss's own: ``()`` for a single loss. A
        callable's extra arguments are scalars per loss, so their whole shape is the batch."""
        own = self.record.event_ndims
        leading = [
            tuple(np.shape(leaf)[: np.ndim(leaf) - own[name]])
            for name, value in self.params.items()
            for leaf in (value if name == "args" else (value,))
        ]
        return max(leading, key=len, default=())

    def __getitem__(self, index: Any) -> LossSpec:
        """One member (or a slice) of a batched specification."""
        if not self.batch_shape:
            raise IndexError("this loss specification is not batched")
        return jax.tree.map(lambda x: x[index], self)

    def describe(self) -> str:
        """A short human-readable name, e.g. ``beta-weighted log loss (beta=0.9)``."""
        if self.name == "callable":
            return f"callable loss {getattr(self.fn, '__name__', repr(self.fn))}"
        shown = ", ".join(f"{k}={np.asarray(v).tolist()}" for k, v in self.params.items())
        return f"{self.record.title} ({shown})"

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready description that :func:`loss_spec` turns back into this specification.

        Raises:
          ValueError: for a callable loss, which cannot be written down.
        """
        if self.name == "callable":
            raise ValueError("a callable loss cannot be stored as a config; register it by name")
        return {
            "name": self.name,
            **{k: np.asarray(v, np.float64).tolist() for k, v in self.params.items()},
        }

    # -- the loss --------------------------------------------------------------------------------

    def _values(self) -> tuple[Any, ...]:
        """The parameters in the order of the record's positional loss."""
        if self.name == "callable":
            return tuple(self.params["args"])
        return tuple(self.params[name] for name in self.record.event_ndims)

    def loss(self, a: ArrayLike, y: ArrayLike) -> Array:
        """``L(a, y)``: scores ``a`` ``[...]`` (binary) or ``[..., n]``, integer labels ``y``."""
        return self.record.loss(a, y, **self.params)

    def logits_loss(self, logits: ArrayLike, y: ArrayLike) -> Array:
        """The loss of ``a = link(logits)``, stable for any logit: what training minimises.

        The link is the sigmoid for binary losses (``logits [...]``), the softmax for the
        simplex losses and one sigmoid per class for the B-weighted loss (its optimal scores,
        Proposition 3, need not sum to one). Binary labels may be soft (in ``[0, 1]``) for the
        weighted losses. A record without a logit form gives ``loss(link(logits), y)``.
        """
        record = self.record
        if record.logits_loss is None:
            return self.loss(self.link(logits), y)
        return record.logits_loss(jnp.asarray(logits), y, **self.params)

    def link(self, logits: ArrayLike) -> Array:
        """The scores ``a`` a model with these ``logits`` reports: the link of
        :meth:`logits_loss` (sigmoid for binary losses and for the B-weighted loss, one per
        class; softmax for the simplex losses)."""
        z = jnp.asarray(logits)
        if self.multiclass and self.record.link == "softmax":
            return _softmax(z)
        return jax.nn.sigmoid(z)

    # -- the optimal scoring rule and its inverse -----------------------------------------------

    def optimal_score(self, gamma: ArrayLike) -> Array:
        """The optimal scoring rule ``c^L(gamma)``, eq. ``choice`` (closed form where the record
        has one: Propositions 2 and 3; otherwise the generic rule of :mod:`iml.scoring`)."""
        record = self.record
        if record.optimal_score is not None:
            return record.optimal_score(gamma, **self.params)
        if not self.multiclass:
            return S.optimal_score_for_loss(record.positional_loss, gamma, *self._values())
        return S.optimal_score_multiclass_for_loss(
            record.positional_loss, gamma, *self._values(), domain=record.domain
        )

    def loss_corrected_score(self, a: ArrayLike) -> Array:
        """The loss-corrected score ``(c^L)^{-1}(a)`` (Proposition 4; Corollary 1, eq.
        ``transformation``, for the beta-weighted loss): NaN where no posterior makes ``a``
        optimal. For the B-weighted loss, each one-vs-rest output inverted at the weight its
        negatives carry (:func:`iml.loss_corrected_score_multiclass`): one posterior per class,
        not renormalised."""
        record = self.record
        if record.inverse is not None:
            return record.inverse(a, **self.params)
        if not self.multiclass:
            return S.loss_corrected_score_for_loss(record.positional_loss, a, *self._values())
        return S.loss_corrected_score_multiclass_for_loss(
            record.positional_loss, a, *self._values(), domain=record.domain
        )

    def minimised_expected_loss(self, gamma: ArrayLike) -> Array:
        """``l*(gamma) = min_a sum_y gamma_y L(a, y)``: the expected loss of the optimal score.

        Closed forms where the record has one: for the beta-weighted log loss ``Z h(c^beta
        (gamma))`` with ``Z = beta gamma + (1 - beta)(1 - gamma)`` and ``h`` the binary entropy
        in nats; the B-weighted log loss sums that form over classes; the class-weighted softmax
        cross-entropy gives ``-sum_y xlogy(gamma_y w_y, gamma_y w_y / Z)``, each term computed
        to full relative precision near 0 and 1. Other losses evaluate the loss at
        :meth:`optimal_score`. Labels of posterior zero contribute nothing (``0 log 0 = 0``).
        """
        record = self.record
        if record.minimised_expected_loss is not None:
            return record.minimised_expected_loss(gamma, **self.params)
        g = jnp.asarray(gamma)
        g = g.astype(jnp.result_type(g.dtype, jnp.float32))
        a = self.optimal_score(gamma)
        if not self.multiclass:
            pos = self.loss(a, jnp.ones_like(a, jnp.int32))
            neg = self.loss(a, jnp.zeros_like(a, jnp.int32))
            return _weighted_sum(g, pos) + _weighted_sum(1.0 - g, neg)
        n = g.shape[-1]
        per_class = jnp.stack(
            [self.loss(a, jnp.full(a.shape[:-1], k, jnp.int32)) for k in range(n)], axis=-1
        )
        return jnp.sum(_weighted_sum(g, per_class), axis=-1)

    def row_weight(self, y: ArrayLike) -> Array:
        """The total weight a row of label ``y`` carries under this (unbatched) loss, summed over
        its outputs (``beta`` or ``1 - beta``; ``sum_c B[y, c]``; ``w[y]``), in float64.

        Raises:
          ValueError: for a loss whose record does not say it (a callable's).
        """
        record = self.record
        if record.row_weight is None:
            raise ValueError(f"the {self.describe()} does not say what weight a row carries")
        return record.row_weight(
            np.asarray(y), **{k: np.asarray(v, np.float64) for k, v in self.params.items()}
        )


def _softmax(z: Array) -> Array:
    return jax.nn.softmax(z, axis=-1)


def _weighted_sum(weight: Array, value: Array) -> Array:
    """``weight * value`` with ``0 * inf = 0``: a label of posterior zero costs nothing."""
    return jnp.where(weight > 0, weight * value, 0.0)


def _per_row(fn: Callable[..., Array], a: ArrayLike, y: ArrayLike, *args: Any) -> Array:
    """Apply a loss of one score vector ``[n]`` and one label to ``a [..., n]``, ``y [...]``."""
    a = jnp.asarray(a)
    y = jnp.broadcast_to(jnp.asarray(y), a.shape[:-1])
    flat = jax.vmap(lambda a1, y1: fn(a1, y1, *args))(a.reshape(-1, a.shape[-1]), y.reshape(-1))
    return flat.reshape(a.shape[:-1])


@functools.lru_cache(maxsize=256)
def _callable_record(fn: Callable[..., Array], n_classes: int, domain: str) -> LossRecord:
    """The record of a user's loss function: its value, and the generic rules for the rest. One
    record per function, so that the programs compiled for it are reused."""
    if n_classes == 2:

        def loss(a: Array, y: Array, args: tuple) -> Array:
            return fn(jnp.asarray(a), jnp.asarray(y), *args)
    else:

        def loss(a: Array, y: Array, args: tuple) -> Array:
            return _per_row(fn, a, y, *args)

    record = LossRecord(
        name="callable",
        title=f"callable loss {getattr(fn, '__name__', repr(fn))}",
        make=lambda **_: ({}, n_classes),
        loss=loss,
        event_ndims={"args": 0},
        multiclass=n_classes != 2,
        link="sigmoid" if n_classes == 2 or domain == "box" else "softmax",
    )
    # The generic rules take the function itself: its extra arguments are positional already.
    object.__setattr__(record, "positional_loss", fn)
    return record


jax.tree_util.register_dataclass(
    LossSpec,
    data_fields=["params"],
    meta_fields=["name", "fn", "n_classes", "domain"],
)

#: Anything :func:`loss_spec` reads as a loss: what every function that takes "a loss" accepts.
LossLike = LossSpec | str | float | ArrayLike | Callable[..., Array] | Mapping[str, Any]


# ----------------------------------------------------------------------------------------------
# Building a specification
# ----------------------------------------------------------------------------------------------


def _build(name: str, **params: ArrayLike) -> LossSpec:
    """The specification of the registered loss ``name`` with ``params``."""
    record = L.lookup(name)
    try:
        values, n_classes = record.make(**params)
    except TypeError as error:
        raise ValueError(f"the {name!r} loss: {error}") from None
    return LossSpec(name, values, n_classes=n_classes)


class _Losses(Mapping[str, Callable[..., LossSpec]]):
    """The registered losses by name: ``LOSSES[name](**params)`` builds one, as
    ``loss_spec(name, **params)`` does. A live view of :func:`iml.losses.registered`."""

    def __getitem__(self, name: str) -> Callable[..., LossSpec]:
        L.lookup(name)
        return functools.partial(_build, name)

    def __iter__(self):
        return iter(L.registered())

    def __len__(self) -> int:
        return len(L.registered())


#: Built-in and registered losses by name: ``loss_spec(name, **params)`` builds
#: ``LOSSES[name](**params)``. A new loss is one :func:`iml.losses.register` call.
LOSSES: Mapping[str, Callable[..., LossSpec]] = _Losses()


def loss_spec(
    loss: LossLike,
    *args: ArrayLike,
    n_classes: int = 2,
    domain: str = "simplex",
    **params: ArrayLike,
) -> LossSpec:
    """The :class:`LossSpec` of ``loss``: the one place that reads "a loss" from a user.

    Args:
      loss: one of
        * a :class:`LossSpec` (returned as it is);
        * a number ``beta`` in ``(0, 1)``, or an array of them (a batched specification): the
          beta-weighted log loss;
        * a matrix ``B`` ``[n, n]`` (or a stack ``[..., n, n]``): the B-weighted log loss;
        * a name in :data:`LOSSES`, with its parameters as keywords, e.g.
          ``loss_spec("focal", gamma=2.0)``;
        * a mapping ``{"name": ..., **params}`` (what :meth:`LossSpec.to_config` writes);
        * a callable ``L(a, y, *args)``, differentiable in ``a``: binary (``a`` the
          positive-class score, elementwise) unless ``n_classes > 2``, when it takes one score
          vector ``a [n]`` and an integer label and returns a scalar.
      *args: extra numeric arguments of a callable loss (pytree leaves, so they may be batched).
      n_classes: the class count of a multiclass callable loss.
      domain: for a multiclass callable, ``"simplex"`` (softmax scores) or ``"box"``
        (independent sigmoid scores).
      **params: the parameters of a named loss.

    Raises:
      ValueError: naming the parameter, for an unknown name, a parameter the loss does not
        take, a beta outside ``(0, 1)``, a matrix that is not square and positive, ...
    """
    if isinstance(loss, LossSpec):
        if args or params:
            raise ValueError("a LossSpec takes no further parameters")
        return loss
    if isinstance(loss, Mapping):
        config = dict(loss)
        if "name" not in config:
            raise ValueError(
                f"a loss config needs a 'name' (one of {sorted(LOSSES)}); got {config}"
            )
        return loss_spec(config.pop("name"), *args, **config, **params)
    if isinstance(loss, str):
        L.lookup(loss)  # an unknown name is an error naming the registered ones
        if args:
            raise ValueError(f"the {loss!r} loss takes its parameters as keywords")
        return _build(loss, **params)
    if callable(loss):
        if params:
            raise ValueError("a callable loss takes its extra arguments positionally, not "
                             f"as keywords {sorted(params)}")  # fmt: skip
        V.check_count("n_classes", n_classes, 2)
        V.check_choice("domain", domain, _DOMAINS)
        leaves = tuple(L.as_parameter(f"args[{i}]", x) for i, x in enumerate(args))
        return LossSpec("callable", {"args": leaves}, fn=loss, n_classes=n_classes, domain=domain)
    if args or params:
        raise ValueError("a beta or a matrix B takes no further parameters")
    ndim = np.ndim(loss)
    if ndim <= 1:
        return _build("log", beta=loss)
    shape = np.shape(loss)
    if shape[-1] == shape[-2]:
        return _build("matrix", B=loss)
    raise ValueError(
        "a loss must be a beta in (0, 1) (or a vector of them), a square matrix B (or a stack "
        f"of them), a loss name, a config mapping or a callable; got an array of shape {shape}"
    )


# ----------------------------------------------------------------------------------------------
# Grids of losses: what a sweep trains, and the keys of its table rows
# ----------------------------------------------------------------------------------------------


def beta_key(beta: float) -> str:
    """The key of a class weight in every result table and figure: the shortest decimal string
    that reads back as the same float64 (``repr``), so two distinct betas never share a key.

    ``f"{beta:g}"`` would map 0.9999991 and 0.9999992 to the same ``"1"``.
    """
    return repr(float(beta))


class LossGrid(NamedTuple):
    """A sweep's grid of ``m`` losses (:func:`loss_grid`).

    Attributes:
      spec: the losses, a :class:`iml.LossSpec` with batch shape ``(m,)``.
      weights: ``[m]`` float64 class weights where one number says which loss it is (beta, or
        a focal grid's alpha; as given, before the specification rounds them to float32), else
        None.
      keys: each loss's key in the tables (:func:`grid_keys`).
    """

    spec: LossSpec
    weights: np.ndarray | None
    keys: list[str]


def beta_grid(n_betas: int = 64, beta_min: float = 0.01, beta_max: float = 0.99) -> np.ndarray:
    """``n_betas`` class weights evenly spaced in ``logit(beta)`` from ``beta_min`` to ``beta_max``.

    Raises:
      ValueError: if ``n_betas < 1`` or the bounds are not ``0 < beta_min <= beta_max < 1``.
    """
    V.check_count("n_betas", n_betas)
    for name, b in (("beta_min", beta_min), ("beta_max", beta_max)):
        V.check_beta(name, b)
    if beta_min > beta_max:
        raise ValueError(f"beta_min = {beta_min} exceeds beta_max = {beta_max}")
    if n_betas == 1:
        return np.asarray([beta_min], dtype=np.float64)
    logits = np.linspace(_logit(beta_min), _logit(beta_max), n_betas)
    grid = 1.0 / (1.0 + np.exp(-logits))
    # The round trip through logit drifts the ends by an ulp (0.010000000000000002): pin them,
    # so that the table's exact keys show the bounds asked for.
    grid[0], grid[-1] = beta_min, beta_max
    return grid


def _logit(p: float) -> Any:
    return np.log(p) - np.log1p(-np.asarray(p))


def loss_grid(losses: LossLike | LossGrid) -> LossGrid:
    """A sweep's grid of losses.

    ``losses`` is anything :func:`iml.loss_spec` reads: an array of betas (the default sweep), a
    stack of weight matrices ``B`` ``[m, n, n]``, ``loss_spec("focal", gamma=2.0, alpha=alphas)``,
    ... A single (unbatched) loss is a grid of one.

    Raises:
      ValueError: for a specification batched over more than one axis, repeated betas, or two
        losses of the grid that are equal (their rows of the table would share a key).
    """
    if isinstance(losses, LossGrid):
        return losses
    exact = None
    if isinstance(losses, LossSpec):
        spec = losses
    elif isinstance(losses, str | Mapping) or callable(losses):
        spec = loss_spec(losses)
    else:
        values = np.asarray(losses, np.float64)
        if values.ndim == 1:
            exact = values = V.check_betas("betas", values)
        spec = loss_spec(values)
    if not spec.batch_shape:
        spec = jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], spec)
    if len(spec.batch_shape) != 1:
        raise ValueError(
            f"losses must be a grid along one axis; got batch shape {spec.batch_shape}"
        )
    weights = _float32_decimals(grid_weights(spec)) if exact is None else exact
    if weights is not None:  # one class weight per loss: distinct, each in (0, 1)
        V.check_betas(f"{spec.record.class_weight}s", weights)
    keys = grid_keys(spec, weights)
    if len(set(keys)) != len(keys):
        raise ValueError(f"losses repeat: the grid's keys are {keys}")
    return LossGrid(spec, weights, keys)


class RegistryView(Mapping[str, Any]):
    """A mapping recomputed from the loss registry at each use, so that a loss registered later
    appears in it: ``RegistryView(lambda: {...})``."""

    def __init__(self, items: Callable[[], dict[str, Any]]) -> None:
        self._items = items

    def __getitem__(self, name: str) -> Any:
        return self._items()[name]

    def __iter__(self):
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        return repr(self._items())


def _record_fields(field: str) -> dict[str, Any]:
    """One field of every registered loss that has it, by name."""
    records = (L.lookup(name) for name in L.registered())
    return {r.name: getattr(r, field) for r in records if getattr(r, field) is not None}


#: The parameter that is the class weight of each registered binary loss that has one (the
#: weight of the positive class, ``1/2`` unweighted): ``{"log": "beta", "squared": "beta",
#: "focal": "alpha", ...}``, a live view of the registry
#: (:attr:`iml.losses.LossRecord.class_weight`).
CLASS_WEIGHTS: Mapping[str, str] = RegistryView(lambda: _record_fields("class_weight"))


@dataclasses.dataclass(frozen=True)
class LossFamily:
    """A binary loss as a function of its class weight: ``family(w)`` is the
    :class:`LossSpec` of loss ``name`` with class weight ``w`` (:data:`CLASS_WEIGHTS`) and the
    other parameters ``params``. An ensemble trained "at beta = 0.9" under the focal loss is
    ``loss_family("focal", gamma=2.0)(0.9)``. A callable loss ``fn(a, y, w, *params)`` is a
    family too (``name`` ``"callable"``): its first extra argument is the class weight.

    Attributes:
      name: a loss of :data:`CLASS_WEIGHTS`, or ``"callable"``.
      params: its other parameters (e.g. ``{"gamma": 2.0}``; a callable's, in order).
      fn: the callable loss, for ``"callable"``.
    """

    name: str = "log"
    params: Mapping[str, float] = dataclasses.field(default_factory=dict)
    fn: Callable[..., Array] | None = None

    @property
    def weight_name(self) -> str:
        """The class weight's parameter: ``"beta"``, ``"alpha"``, ... (``"weight"`` for a
        callable's first extra argument)."""
        return "weight" if self.fn is not None else CLASS_WEIGHTS[self.name]

    def __call__(self, weight: ArrayLike) -> LossSpec:
        if self.fn is not None:
            return loss_spec(self.fn, weight, *self.params.values())
        return loss_spec(self.name, **self.params, **{self.weight_name: weight})

    def describe(self) -> str:
        """E.g. ``focal loss (gamma=2.0) by its class weight alpha``."""
        shown = ", ".join(f"{k}={v}" for k, v in self.params.items())
        if self.fn is not None:
            title = f"callable loss {getattr(self.fn, '__name__', repr(self.fn))}"
        else:
            title = L.lookup(self.name).title
        return f"{title}{f' ({shown})' if shown else ''} by its class weight {self.weight_name}"


def loss_family(name: str | Callable[..., Array] = "log", **params: float) -> LossFamily:
    """The binary loss ``name`` as a function of its class weight (:class:`LossFamily`); or a
    callable ``fn(a, y, weight, *params)`` as one, its class weight the first extra argument.

    Raises:
      ValueError: for a loss without a class weight, or parameters it does not take (naming
        them).
    """
    if callable(name):
        family = LossFamily("callable", dict(params), fn=name)
        family(0.5)  # checks the parameters now
        return family
    L.lookup(name)
    if name not in CLASS_WEIGHTS:
        raise ValueError(
            f"loss {name!r} has no class weight; the binary losses weighted by one are "
            f"{sorted(CLASS_WEIGHTS)}"
        )
    family = LossFamily(name, dict(params))
    family(0.5)  # checks the other parameters now
    return family


def _float32_decimals(weights: np.ndarray | None) -> np.ndarray | None:
    """float32 parameters as their shortest float32 decimals (0.01, not 0.009999999776)."""
    if weights is None:
        return None
    return np.asarray([float(str(w)) for w in np.asarray(weights, np.float32)])


def grid_weights(losses: LossSpec) -> np.ndarray | None:
    """The grid's class weight per loss, where one number says which loss it is: the class
    weight of a binary loss that has one (``beta``; a focal grid's ``alpha``) when its other
    parameters are the same across the grid; else None."""
    if losses.name == "callable":
        return None
    weight = losses.record.class_weight
    if weight is None:
        return None
    p = {k: np.asarray(v, np.float64) for k, v in losses.params.items()}
    if any(np.unique(v).size > 1 for k, v in p.items() if k != weight):
        return None
    return p[weight]


def grid_keys(losses: LossSpec, weights: np.ndarray | None = None) -> list[str]:
    """The row key of every loss of a grid: the exact weight (:func:`beta_key`)
    where :func:`grid_weights` gives one, the entries of ``B`` (or of the class weights) that
    differ from 1 (``"B[8,8]=10"``; ``"ones"`` for the unweighted loss), else the parameters.

    Args:
      losses: a specification batched along one axis.
      weights: the grid's weights as given (float64), whose keys are then exact; by default
        :func:`grid_weights`, the specification's float32 values, keyed by their shortest
        float32 decimal.
    """
    (m,) = losses.batch_shape
    weights = _float32_decimals(grid_weights(losses)) if weights is None else weights
    if weights is not None:
        return [beta_key(w) for w in weights]
    keys = []
    for i in range(m):
        p = {k: np.asarray(v, np.float64)[i] for k, v in losses.params.items() if k != "args"}
        key = None
        if losses.name == "callable":
            args = [np.asarray(x)[i] for x in losses.params["args"]]
            if args and all(x.ndim == 0 for x in args):  # each by its shortest float32 decimal
                key = ",".join(repr(float(str(np.float32(x)))) for x in args)
        elif losses.record.key is not None:
            key = losses.record.key(p)
        keys.append(key if key is not None else f"#{i}")
    return keys


_ENTRY = re.compile(r"^\s*(\w+)\[([\d,\s]+)\]\s*=\s*([^,\s]+)\s*$")


#: The multiclass losses whose grids vary their weights, by name: ``B[i,j]`` of the weight matrix
#: (eq. ``b-loss-multi``), ``w[k]`` of the class weights of the softmax cross-entropy, ...; a
#: live view of the registry (:attr:`iml.losses.LossRecord.grid_weight`).
WEIGHT_GRIDS: Mapping[str, GridWeight] = RegistryView(lambda: _record_fields("grid_weight"))


def config_parameters(name: str, section: Mapping[str, Any]) -> dict[str, float]:
    """The parameters of the loss ``name`` that a config's loss section sets (``gamma`` of the
    focal losses, as ``config.loss.gamma``), other than the weight its grid varies (the class
    weight, or the multiclass grid's weight), which the grid gives."""
    record = L.lookup(name)
    varied = {record.class_weight, record.grid_weight and record.grid_weight.param}
    return {k: float(section[k]) for k in record.event_ndims if k not in varied and k in section}


def _grid_weight(loss: str, name: str) -> GridWeight:
    if loss not in WEIGHT_GRIDS:
        raise ValueError(
            f"{name}: a grid of weights is read for the losses {list(WEIGHT_GRIDS)}, not {loss!r}"
        )
    return WEIGHT_GRIDS[loss]


def parse_weight_grid(
    text: str, loss: str, *, name: str = "weights"
) -> list[dict[tuple[int, ...], float]]:
    """The grid of ``config.loss.weights``: per loss, the entries of ``B`` (``matrix``) or of the
    class weights ``w`` (``class_weighted_softmax``) that differ from 1.

    ``"ones;B[8,8]=10;B[3,8]=10,B[8,3]=10"`` gives three losses: unweighted, one diagonal entry
    10, two off-diagonal entries 10 (the syntax of :func:`grid_keys`; :func:`weight_grid` builds
    the losses).

    Raises:
      ValueError: naming ``name`` (the key or flag the text came from) and the part it cannot
        read.
    """
    symbol, rank, _ = _grid_weight(loss, name)
    grid = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        entries: dict[tuple[int, ...], float] = {}
        if part != "ones":
            for item in re.split(r",(?=\s*\w+\[)", part):
                match = _ENTRY.match(item)
                if match is None or match[1] != symbol:
                    raise ValueError(
                        f"{name}: cannot read {item.strip()!r}; the {loss} loss's entries "
                        f"read like {symbol}[{','.join(['3'] * rank)}]=10 (or 'ones')"
                    )
                index = tuple(int(i) for i in match[2].split(","))
                try:
                    value = float(match[3])
                except ValueError:
                    raise ValueError(f"{name}: {match[3]!r} is not a number") from None
                if len(index) != rank:
                    raise ValueError(f"{name}: {symbol} takes {rank} indices, got {item.strip()!r}")
                if not (math.isfinite(value) and value > 0):
                    raise ValueError(
                        f"{name}: a weight must be a finite number > 0, got {item.strip()!r}"
                    )
                entries[index] = value
        grid.append(entries)
    if not grid:
        raise ValueError(f"{name} is empty")
    return grid


def weight_grid(
    entries: Sequence[Mapping[tuple[int, ...], float]], loss: str, n: int, **params: float
) -> LossSpec:
    """A grid of ``n``-class losses from the entries of each one's weights that differ from 1
    (``{(8, 8): 10.0}``: ``B[8, 8] = 10``; the syntax of :func:`grid_keys`): a batched
    :class:`LossSpec` of a loss of :data:`WEIGHT_GRIDS`, ``"matrix"`` (``B``),
    ``"class_weighted_softmax"`` (``w``), ..., with its other parameters ``params`` (the same for
    every loss of the grid).

    Raises:
      ValueError: for an index out of range.
    """
    weight = _grid_weight(loss, "loss")
    stack = np.ones((len(entries), *(n,) * weight.rank))
    for k, changed in enumerate(entries):
        for index, value in changed.items():
            if max(index) >= n:
                raise ValueError(
                    f"weights: index {list(index)} is out of range for {n} classes "
                    f"(classes count from 0)"
                )
            stack[(k, *index)] = value
    return loss_spec(loss, **params, **{weight.param: stack})
