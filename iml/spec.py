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

A :class:`LossSpec` is a pytree: its numeric parameters are leaves, its name is static. It passes
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
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml import losses as L
from iml import scoring as S
from iml.losses import LossRecord

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "LOSSES",
    "LossLike",
    "LossSpec",
    "loss_spec",
]

_DOMAINS = ("simplex", "box")


@dataclasses.dataclass(frozen=True, eq=False)
class LossSpec:
    """A loss, its optimal scoring rule and the rule's inverse (see the module docstring).

    Build it with :func:`loss_spec`; the fields are for reading. Every method looks the loss's
    record up in the registry (:attr:`record`) and calls it, or, where the record gives no
    closed form, the generic rules of :mod:`iml.scoring`.

    Attributes:
      name: the registered loss (:func:`iml.losses.registered`); ``"callable"`` for a user's
        function, which ``fn`` holds.
      params: the numeric parameters by name (pytree leaves, possibly batched); a callable's
        extra arguments are ``params["args"]``.
      fn: a user's loss function (None for a registered loss).
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
        if self.fn is not None:
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
        if self.fn is not None:
            return self.record.title
        shown = ", ".join(f"{k}={np.asarray(v).tolist()}" for k, v in self.params.items())
        return f"{self.record.title} ({shown})"

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready description that :func:`loss_spec` turns back into this specification.

        Raises:
          ValueError: for a callable loss, which cannot be written down.
        """
        if self.fn is not None:
            raise ValueError("a callable loss cannot be stored as a config; register it by name")
        return {
            "name": self.name,
            **{k: np.asarray(v, np.float64).tolist() for k, v in self.params.items()},
        }

    # -- the loss --------------------------------------------------------------------------------

    def _values(self) -> tuple[Any, ...]:
        """The parameters in the order of the record's positional loss."""
        if self.fn is not None:
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
            return jax.nn.softmax(z, axis=-1)
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
