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
* a registered name with its parameters (:data:`LOSSES`): ``"log"`` and ``"squared"`` (weighted by
  ``beta``, default 1/2), ``"focal"`` (``gamma``, ``alpha``), ``"softmax_focal"``
  (``gamma``, ``class_weights``), ``"class_weighted_softmax"`` (``class_weights``), ``"matrix"``
  (``B``);
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
    "beta_grid",
    "beta_key",
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

    Build it with :func:`loss_spec`; the fields are for reading.

    Attributes:
      kind: ``"weighted"`` (beta-weighted binary, base ``log`` or ``squared``), ``"matrix"``
        (B-weighted multiclass log loss), ``"class_weighted"`` (class-weighted softmax
        cross-entropy), ``"focal"`` (binary focal), ``"softmax_focal"`` (multiclass focal) or
        ``"callable"``.
      params: the numeric parameters by name (pytree leaves, possibly batched).
      base: the base loss of ``"weighted"`` (``"log"`` or ``"squared"``).
      fn: the user's loss for ``"callable"``.
      n_classes: 2 for binary losses; the class count of multiclass ones.
      domain: for a multiclass callable, ``"simplex"`` (softmax scores) or ``"box"``
        (one-vs-rest sigmoid scores).
    """

    kind: str
    params: Mapping[str, Any]
    base: str = "log"
    fn: Callable[..., Array] | None = None
    n_classes: int = 2
    domain: str = "simplex"

    # -- description ---------------------------------------------------------------------------

    @property
    def multiclass(self) -> bool:
        """Whether scores and posteriors carry a class axis."""
        return self.n_classes != 2

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Leading axes of the parameters beyond one loss's own: ``()`` for a single loss."""
        own = {"beta": 0, "B": 2, "class_weights": 1, "gamma": 0, "alpha": 0}
        leading = [
            tuple(np.shape(value)[: np.ndim(value) - own[name]])
            for name, value in self.params.items()
            if name in own
        ]
        return max(leading, key=len, default=())

    def __getitem__(self, index: Any) -> LossSpec:
        """One member (or a slice) of a batched specification."""
        if not self.batch_shape:
            raise IndexError("this loss specification is not batched")
        return jax.tree.map(lambda x: x[index], self)

    def describe(self) -> str:
        """A short human-readable name, e.g. ``beta-weighted log loss (beta=0.9)``."""
        if self.kind == "callable":
            return f"callable loss {getattr(self.fn, '__name__', repr(self.fn))}"
        shown = ", ".join(
            f"{k}={np.asarray(v).tolist()}" for k, v in self.params.items() if k != "args"
        )
        name = {
            "weighted": f"beta-weighted {self.base} loss",
            "matrix": "B-weighted log loss",
            "class_weighted": "class-weighted softmax cross-entropy",
            "focal": "focal loss",
            "softmax_focal": "softmax focal loss",
        }[self.kind]
        return f"{name} ({shown})"

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready description that :func:`loss_spec` turns back into this specification.

        Raises:
          ValueError: for a callable loss, which cannot be written down.
        """
        if self.kind == "callable":
            raise ValueError("a callable loss cannot be stored as a config; store its name")
        name = self.base if self.kind == "weighted" else _KIND_NAMES[self.kind]
        return {
            "name": name,
            **{k: np.asarray(v, np.float64).tolist() for k, v in self.params.items()},
        }

    # -- the loss --------------------------------------------------------------------------------

    def loss(self, a: ArrayLike, y: ArrayLike) -> Array:
        """``L(a, y)``: scores ``a`` ``[...]`` (binary) or ``[..., n]``, integer labels ``y``."""
        p = self.params
        if self.kind == "weighted":
            base = L.log_loss if self.base == "log" else L.squared_loss
            return L.beta_weighted_loss(a, y, p["beta"], base=base)
        if self.kind == "matrix":
            return L.matrix_weighted_loss(a, y, p["B"])
        if self.kind == "class_weighted":
            return L.class_weighted_cross_entropy(a, y, p["class_weights"])
        if self.kind == "focal":
            return L.focal_loss(a, y, p["gamma"], p["alpha"])
        if self.kind == "softmax_focal":
            return L.focal_loss_multiclass(a, y, p["gamma"], p["class_weights"])
        if not self.multiclass:
            return self.fn(jnp.asarray(a), jnp.asarray(y), *p["args"])
        return _per_row(lambda a1, y1: self.fn(a1, y1, *p["args"]), a, y)

    def logits_loss(self, logits: ArrayLike, y: ArrayLike) -> Array:
        """The loss of ``a = link(logits)``, stable for any logit: what training minimises.

        The link is the sigmoid for binary losses (``logits [...]``), the softmax for the
        simplex losses and one sigmoid per class for the B-weighted loss (its optimal scores,
        Proposition 3, need not sum to one). Binary labels may be soft (in ``[0, 1]``) for the
        weighted losses.
        """
        p = self.params
        z = jnp.asarray(logits)
        if self.kind == "weighted":
            if self.base == "log":
                return L.beta_weighted_sigmoid_cross_entropy(z, y, p["beta"])
            beta = jnp.asarray(p["beta"], z.dtype)
            y = jnp.asarray(y, z.dtype)
            a = jax.nn.sigmoid(z)
            return beta * y * jnp.square(1.0 - a) + (1.0 - beta) * (1.0 - y) * jnp.square(a)
        if self.kind == "matrix":
            B = jnp.asarray(p["B"], z.dtype)
            y = jnp.asarray(y)
            onehot = jax.nn.one_hot(y, z.shape[-1], dtype=z.dtype)
            per_class = -(onehot * jax.nn.log_sigmoid(z) + (1.0 - onehot) * jax.nn.log_sigmoid(-z))
            return jnp.sum(B[y] * per_class, axis=-1)
        if self.kind == "class_weighted":
            return L.class_weighted_softmax_cross_entropy(z, y, p["class_weights"])
        if self.kind == "focal":
            return L.sigmoid_focal_loss(z, y, p["gamma"], p["alpha"])
        if self.kind == "softmax_focal":
            return L.softmax_focal_loss(z, y, p["gamma"], p["class_weights"])
        return self.loss(self.link(z), y)

    def link(self, logits: ArrayLike) -> Array:
        """The scores ``a`` a model with these ``logits`` reports: the link of
        :meth:`logits_loss` (sigmoid for binary losses and for the B-weighted loss, one per
        class; softmax for the simplex losses)."""
        z = jnp.asarray(logits)
        if self.multiclass and not (self.kind == "matrix" or self.domain == "box"):
            return _softmax(z)
        return jax.nn.sigmoid(z)

    # -- the optimal scoring rule and its inverse -----------------------------------------------

    def optimal_score(self, gamma: ArrayLike) -> Array:
        """The optimal scoring rule ``c^L(gamma)``, eq. ``choice`` (closed form where one exists:
        Propositions 2 and 3; otherwise the generic rule of :mod:`iml.scoring`)."""
        p = self.params
        if self.kind == "weighted":
            return S.optimal_score(gamma, p["beta"])
        if self.kind == "matrix":
            return S.optimal_score_multiclass(gamma, p["B"])
        if self.kind == "class_weighted":
            return S.optimal_score_class_weighted(gamma, p["class_weights"])
        if self.kind == "focal":
            return S.optimal_score_for_loss(L.focal_loss, gamma, p["gamma"], p["alpha"])
        if self.kind == "softmax_focal":
            return S.optimal_score_multiclass_for_loss(
                L.focal_loss_multiclass, gamma, p["gamma"], p["class_weights"]
            )
        if not self.multiclass:
            return S.optimal_score_for_loss(self.fn, gamma, *p["args"])
        return S.optimal_score_multiclass_for_loss(self.fn, gamma, *p["args"], domain=self.domain)

    def loss_corrected_score(self, a: ArrayLike) -> Array:
        """The loss-corrected score ``(c^L)^{-1}(a)`` (Proposition 4; Corollary 1, eq.
        ``transformation``, for the beta-weighted loss): NaN where no posterior makes ``a``
        optimal. For the B-weighted loss, each one-vs-rest output inverted at the weight its
        negatives carry (:func:`iml.loss_corrected_score_multiclass`): one posterior per class,
        not renormalised."""
        p = self.params
        if self.kind == "weighted":
            return S.loss_corrected_score(a, p["beta"])
        if self.kind == "matrix":
            return S.loss_corrected_score_multiclass(a, p["B"])
        if self.kind == "class_weighted":
            return S.loss_corrected_score_class_weighted(a, p["class_weights"])
        if self.kind == "focal":
            return S.loss_corrected_score_for_loss(L.focal_loss, a, p["gamma"], p["alpha"])
        if self.kind == "softmax_focal":
            return S.loss_corrected_score_multiclass_for_loss(
                L.focal_loss_multiclass, a, p["gamma"], p["class_weights"]
            )
        if not self.multiclass:
            return S.loss_corrected_score_for_loss(self.fn, a, *p["args"])
        return S.loss_corrected_score_multiclass_for_loss(
            self.fn, a, *p["args"], domain=self.domain
        )

    def minimised_expected_loss(self, gamma: ArrayLike) -> Array:
        """``l*(gamma) = min_a sum_y gamma_y L(a, y)``: the expected loss of the optimal score.

        For the beta-weighted log loss it is ``Z h(c^beta(gamma))`` with
        ``Z = beta gamma + (1 - beta)(1 - gamma)`` and ``h`` the binary entropy in nats; the
        B-weighted log loss sums that form over classes (``Z_j = sum_y gamma_y B[y, j]``), the
        class-weighted softmax cross-entropy gives ``-sum_y xlogy(gamma_y w_y, gamma_y w_y / Z)``
        with ``Z = sum_y gamma_y w_y``; each term is computed as ``p log1p(q / p)``, which keeps
        full relative precision where a posterior is near 0 or 1. Other losses evaluate the loss at
        :meth:`optimal_score`. Labels of posterior zero contribute nothing (``0 log 0 = 0``).
        """
        p = self.params
        g = jnp.asarray(gamma)
        g = g.astype(jnp.result_type(g.dtype, jnp.float32))
        if self.kind == "weighted":
            V.check_unit("gamma", gamma)
            beta = jnp.asarray(p["beta"], g.dtype)
            valid = (beta > 0) & (beta < 1) & (g >= 0) & (g <= 1)
            pos, neg = beta * g, (1.0 - beta) * (1.0 - g)
            if self.base == "log":
                value = _entropy_term(pos, neg) + _entropy_term(neg, pos)
            else:
                value = pos * neg / (pos + neg)  # Z c (1 - c): the weighted Brier entropy
            return V.nan_unless(valid, value)
        if self.kind == "matrix":
            V.check_simplex("gamma", gamma)
            B = jnp.asarray(p["B"], g.dtype)
            n = B.shape[-1]
            valid = jnp.all(B > 0, axis=(-2, -1)) & jnp.all(g >= 0, axis=-1)
            pos = g * jnp.diagonal(B, axis1=-2, axis2=-1)
            neg = jnp.einsum("...y,...yj->...j", g, B * (1.0 - jnp.eye(n, dtype=g.dtype)))
            value = jnp.sum(_entropy_term(pos, neg) + _entropy_term(neg, pos), axis=-1)
            return V.nan_unless(valid, value)
        if self.kind == "class_weighted":
            V.check_simplex("gamma", gamma)
            w = jnp.asarray(p["class_weights"], g.dtype)
            valid = jnp.all(w > 0, axis=-1) & jnp.all(g >= 0, axis=-1)
            weighted = g * w
            others = weighted @ (1.0 - jnp.eye(weighted.shape[-1], dtype=g.dtype))
            return V.nan_unless(valid, jnp.sum(_entropy_term(weighted, others), axis=-1))
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


def _entropy_term(p: Array, q: Array) -> Array:
    """``-p log(p / (p + q)) = p log1p(q / p)``, without cancellation; 0 where ``p = 0``."""
    safe = jnp.where(p > 0, p, 1.0)
    return jnp.where(p > 0, p * jnp.log1p(q / safe), 0.0)


def _softmax(z: Array) -> Array:
    return jax.nn.softmax(z, axis=-1)


def _weighted_sum(weight: Array, value: Array) -> Array:
    """``weight * value`` with ``0 * inf = 0``: a label of posterior zero costs nothing."""
    return jnp.where(weight > 0, weight * value, 0.0)


def _per_row(fn: Callable[[Array, Array], Array], a: ArrayLike, y: ArrayLike) -> Array:
    """Apply a loss of one score vector ``[n]`` and one label to ``a [..., n]``, ``y [...]``."""
    a = jnp.asarray(a)
    y = jnp.broadcast_to(jnp.asarray(y), a.shape[:-1])
    flat = jax.vmap(fn)(a.reshape(-1, a.shape[-1]), y.reshape(-1))
    return flat.reshape(a.shape[:-1])


jax.tree_util.register_dataclass(
    LossSpec,
    data_fields=["params"],
    meta_fields=["kind", "base", "fn", "n_classes", "domain"],
)

#: Anything :func:`loss_spec` reads as a loss: what every function that takes "a loss" accepts.
LossLike = LossSpec | str | float | ArrayLike | Callable[..., Array] | Mapping[str, Any]


# ----------------------------------------------------------------------------------------------
# Building a specification
# ----------------------------------------------------------------------------------------------


def _array(name: str, value: Any) -> Any:
    """Parameters stay as given under a transformation; concrete ones become float32 arrays."""
    if not V.is_concrete(value):
        return value
    x = np.asarray(value, dtype=np.float64)
    if x.dtype == object:
        raise ValueError(f"{name} must be numeric; got {value!r}")
    return jnp.asarray(x, jnp.float32)


def _weighted(base: str) -> Callable[..., LossSpec]:
    def build(beta: ArrayLike = 0.5) -> LossSpec:
        V.check_beta("beta", beta)
        return LossSpec("weighted", {"beta": _array("beta", beta)}, base=base)

    build.__doc__ = (
        f"The beta-weighted {base} loss (eq. ``b-loss-bin``); ``beta = 1/2`` unweighted."
    )
    return build


def _matrix(B: ArrayLike) -> LossSpec:
    """The B-weighted log loss, eq. ``b-loss-multi``; ``B`` ``[..., n, n]`` (batched allowed)."""
    shape = np.shape(B)
    if len(shape) < 2:
        raise ValueError(f"B must be a square [n, n] matrix; got shape {shape}")
    if V.is_concrete(B):
        for matrix in np.reshape(np.asarray(B, np.float64), (-1, *shape[-2:])):
            V.check_weight_matrix("B", matrix)
    else:
        V.check_weight_matrix("B", np.ones(shape[-2:]))  # the shape, known under tracing too
    return LossSpec("matrix", {"B": _array("B", B)}, n_classes=shape[-1])


def _check_class_weights(class_weights: ArrayLike) -> int:
    shape = np.shape(class_weights)
    if len(shape) < 1 or shape[-1] < 2:
        raise ValueError(f"class_weights must be a vector [n] with n >= 2; got shape {shape}")
    if V.is_concrete(class_weights):
        V.check_interval("class_weights", class_weights, 0.0, np.inf, open_low=True, open_high=True)
    return shape[-1]


def _class_weighted(class_weights: ArrayLike) -> LossSpec:
    """The class-weighted softmax cross-entropy ``-w_y log a_y`` (closed-form rule)."""
    n = _check_class_weights(class_weights)
    return LossSpec("class_weighted", {"class_weights": _array("class_weights", class_weights)},
                    n_classes=n)  # fmt: skip


def _check_focusing(gamma: ArrayLike) -> None:
    V.check_interval("gamma", gamma, 0.0, np.inf, open_low=False, open_high=True)


def _focal(gamma: ArrayLike = 2.0, alpha: ArrayLike = 0.5) -> LossSpec:
    """Binary focal loss (Lin et al. 2017) with focusing ``gamma >= 0`` and weight ``alpha``."""
    _check_focusing(gamma)
    V.check_beta("alpha", alpha)
    shape = V.check_broadcastable(gamma=gamma, alpha=alpha)
    gamma = jnp.broadcast_to(_array("gamma", gamma), shape)
    alpha = jnp.broadcast_to(_array("alpha", alpha), shape)
    return LossSpec("focal", {"gamma": gamma, "alpha": alpha})


def _softmax_focal(gamma: ArrayLike = 2.0, *, class_weights: ArrayLike) -> LossSpec:
    """Multiclass focal loss ``-w_y (1 - a_y)^gamma log a_y`` on the simplex."""
    _check_focusing(gamma)
    n = _check_class_weights(class_weights)
    # One batch shape for both, so that a batched specification maps over every leaf.
    lead = V.check_broadcastable(gamma=gamma, class_weights=np.zeros(np.shape(class_weights)[:-1]))
    params = {
        "gamma": jnp.broadcast_to(_array("gamma", gamma), lead),
        "class_weights": jnp.broadcast_to(_array("class_weights", class_weights), (*lead, n)),
    }
    return LossSpec("softmax_focal", params, n_classes=n)


#: Built-in losses by name: ``loss_spec(name, **params)`` calls ``LOSSES[name](**params)``.
#: A new built-in loss is one entry here (and its kind's branches in :class:`LossSpec`).
LOSSES: dict[str, Callable[..., LossSpec]] = {
    "log": _weighted("log"),
    "squared": _weighted("squared"),
    "matrix": _matrix,
    "class_weighted_softmax": _class_weighted,
    "focal": _focal,
    "softmax_focal": _softmax_focal,
}
_KIND_NAMES = {
    "matrix": "matrix",
    "class_weighted": "class_weighted_softmax",
    "focal": "focal",
    "softmax_focal": "softmax_focal",
}


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
        if loss not in LOSSES:
            raise ValueError(f"unknown loss {loss!r}; the built-in losses are {sorted(LOSSES)}")
        if args:
            raise ValueError(f"the {loss!r} loss takes its parameters as keywords")
        try:
            return LOSSES[loss](**params)
        except TypeError as error:
            raise ValueError(f"the {loss!r} loss: {error}") from None
    if callable(loss):
        if params:
            raise ValueError("a callable loss takes its extra arguments positionally, not "
                             f"as keywords {sorted(params)}")  # fmt: skip
        V.check_count("n_classes", n_classes, 2)
        V.check_choice("domain", domain, _DOMAINS)
        leaves = tuple(_array(f"args[{i}]", x) for i, x in enumerate(args))
        return LossSpec("callable", {"args": leaves}, fn=loss, n_classes=n_classes, domain=domain)
    if args or params:
        raise ValueError("a beta or a matrix B takes no further parameters")
    ndim = np.ndim(loss)
    if ndim <= 1:
        return LOSSES["log"](loss)
    shape = np.shape(loss)
    if shape[-1] == shape[-2]:
        return _matrix(loss)
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
    if spec.kind == "weighted":
        V.check_betas("betas", weights)
    keys = grid_keys(spec, weights)
    if len(set(keys)) != len(keys):
        raise ValueError(f"losses repeat: the grid's keys are {keys}")
    return LossGrid(spec, weights, keys)


#: The parameter that is the class weight of each binary loss of :data:`LOSSES`: the weight of
#: the positive class, ``1/2`` unweighted.
CLASS_WEIGHTS = {"log": "beta", "squared": "beta", "focal": "alpha"}


@dataclasses.dataclass(frozen=True)
class LossFamily:
    """A binary loss as a function of its class weight: ``family(w)`` is the
    :class:`LossSpec` of loss ``name`` with class weight ``w`` (:data:`CLASS_WEIGHTS`) and the
    other parameters ``params``. An ensemble trained "at beta = 0.9" under the focal loss is
    ``loss_family("focal", gamma=2.0)(0.9)``.

    Attributes:
      name: a loss of :data:`CLASS_WEIGHTS`.
      params: its other parameters (e.g. ``{"gamma": 2.0}``).
    """

    name: str = "log"
    params: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @property
    def weight_name(self) -> str:
        """The class weight's parameter: ``"beta"`` or ``"alpha"``."""
        return CLASS_WEIGHTS[self.name]

    def __call__(self, weight: ArrayLike) -> LossSpec:
        return loss_spec(self.name, **self.params, **{self.weight_name: weight})

    def describe(self) -> str:
        """E.g. ``focal loss (gamma=2.0) by its class weight alpha``."""
        shown = ", ".join(f"{k}={v}" for k, v in self.params.items())
        name = {"log": "beta-weighted log loss", "squared": "beta-weighted squared loss",
                "focal": "focal loss"}[self.name]  # fmt: skip
        return f"{name}{f' ({shown})' if shown else ''} by its class weight {self.weight_name}"


def loss_family(name: str = "log", **params: float) -> LossFamily:
    """The binary loss ``name`` as a function of its class weight (:class:`LossFamily`).

    Raises:
      ValueError: for a loss without a class weight, or parameters it does not take (naming
        them).
    """
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
    """The grid's class weight per loss, where one number says it: ``beta`` of the weighted
    losses, ``alpha`` of a focal grid of one ``gamma``; else None."""
    p = {k: np.asarray(v, np.float64) for k, v in losses.params.items() if k != "args"}
    if losses.kind == "weighted":
        return p["beta"]
    if losses.kind == "focal" and np.unique(p["gamma"]).size == 1:
        return p["alpha"]
    return None


def _entries_key(name: str, values: np.ndarray, default: float = 1.0) -> str | None:
    """``"B[3,8]=10"``: the entries that differ from ``default`` (``"ones"`` if none)."""
    changed = np.argwhere(values != default)
    if len(changed) > 4:
        return None
    parts = [f"{name}[{','.join(map(str, idx))}]={values[tuple(idx)]:g}" for idx in changed]
    return ",".join(parts) or "ones"


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
        p = {k: np.asarray(v[i], np.float64) for k, v in losses.params.items() if k != "args"}
        key = None
        if losses.kind == "matrix":
            key = _entries_key("B", p["B"])
        elif "class_weights" in p:
            key = _entries_key("w", p["class_weights"])
            if key is not None and "gamma" in p:
                key = f"gamma={p['gamma']:g},{key}"
        elif losses.kind == "focal":
            key = f"gamma={p['gamma']:g},alpha={beta_key(p['alpha'])}"
        keys.append(key if key is not None else f"#{i}")
    return keys


_ENTRY = re.compile(r"^\s*(\w+)\[([\d,\s]+)\]\s*=\s*([^,\s]+)\s*$")


class GridWeight(NamedTuple):
    """The weight a grid of a multiclass loss varies: its ``symbol`` in a grid's text, its number
    of indices (``rank``) and the parameter of its :data:`LOSSES` builder (``param``)."""

    symbol: str
    rank: int
    param: str


#: The multiclass losses of :data:`LOSSES` whose grids vary their weights: ``B[i,j]`` of the
#: weight matrix (eq. ``b-loss-multi``) or ``w[k]`` of the class weights of the softmax
#: cross-entropy. A new one is an entry here.
WEIGHT_GRIDS: dict[str, GridWeight] = {
    "matrix": GridWeight("B", 2, "B"),
    "class_weighted_softmax": GridWeight("w", 1, "class_weights"),
}


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


def weight_grid(entries: Sequence[Mapping[tuple[int, ...], float]], loss: str, n: int) -> LossSpec:
    """A grid of ``n``-class losses from the entries of each one's weights that differ from 1
    (``{(8, 8): 10.0}``: ``B[8, 8] = 10``; the syntax of :func:`grid_keys`): a batched
    :class:`LossSpec` of ``loss`` ``"matrix"`` (``B``) or ``"class_weighted_softmax"`` (``w``).

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
    return loss_spec(loss, **{weight.param: stack})
