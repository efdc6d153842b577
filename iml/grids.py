"""Grids of losses: what a sweep or an ensemble trains, one loss per row of its table.

A grid is a :class:`iml.LossSpec` batched along one axis (:func:`loss_grid`): an array of betas
(:func:`beta_grid`, evenly spaced in the logit), a stack of weight matrices ``B``, a focal loss
over its class weight, a user's callable over its parameters. Each loss of a grid has a key in
the tables (:func:`grid_keys`): its exact class weight (:func:`beta_key`), the entries of its
weights that differ from 1 (``"B[8,8]=10"``; :func:`parse_weight_grid` reads that syntax back),
or its parameters. A binary loss as a function of its class weight is a :class:`LossFamily`.
Which losses have a class weight, or a grid of multiclass weights, the registry says
(:data:`CLASS_WEIGHTS`, :data:`WEIGHT_GRIDS`: live views of :mod:`iml.losses`).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml import losses as L
from iml.losses import GridWeight
from iml.scoring import check_invertibility
from iml.spec import LossLike, LossSpec, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "CLASS_WEIGHTS",
    "WEIGHT_GRIDS",
    "LossFamily",
    "LossGrid",
    "RegistryView",
    "RuleNotInvertibleError",
    "beta_grid",
    "beta_key",
    "check_rules_invertible",
    "config_betas",
    "config_grid",
    "config_parameters",
    "grid_keys",
    "grid_weights",
    "loss_family",
    "loss_grid",
    "parse_weight_grid",
    "weight_grid",
    "weight_row",
]


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

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready description that :func:`loss_grid` turns back into this grid, its keys
        included: the specification's (:meth:`iml.LossSpec.to_config`) with the class weights as
        given (float64, not the specification's float32) where the grid has them.

        Raises:
          ValueError: for a callable loss, which cannot be written down.
        """
        config = self.spec.to_config()
        if self.weights is not None:
            config[self.spec.record.class_weight] = np.asarray(self.weights, np.float64).tolist()
        return config


def beta_grid(n_betas: int = 64, beta_min: float = 0.01, beta_max: float = 0.99) -> np.ndarray:
    """``n_betas`` class weights evenly spaced in ``logit(beta)`` from ``beta_min`` to ``beta_max``.

    The bounds are read as written (their shortest decimals, 0.01 and 0.99), and each weight is
    the float64 nearest its exact value, computed in 40-digit decimal arithmetic: the grid, and
    the table keys and run configs made from it, are the same on every machine (the last bits
    of NumPy's ``exp`` and ``log`` differ between CPUs). The ends are the bounds, and with an
    odd ``n_betas`` the middle of bounds whose decimals sum to 1 (0.01 and 0.99) is 1/2.

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
    with decimal.localcontext(decimal.Context(prec=40)):
        low, high = (_exact_logit(decimal.Decimal(repr(float(b)))) for b in (beta_min, beta_max))
        step = (high - low) / (n_betas - 1)
        grid = [float(1 / (1 + (-(low + k * step)).exp())) for k in range(n_betas)]
    return np.asarray(grid, dtype=np.float64)


def _exact_logit(p: decimal.Decimal) -> decimal.Decimal:
    return (p / (1 - p)).ln()


def _logit(p: float) -> Any:
    return np.log(p) - np.log1p(-np.asarray(p))


def loss_grid(losses: LossLike | LossGrid) -> LossGrid:
    """A sweep's grid of losses.

    ``losses`` is anything :func:`iml.loss_spec` reads: an array of betas (the default sweep), a
    stack of weight matrices ``B`` ``[m, n, n]``, ``loss_spec("focal", gamma=2.0, alpha=alphas)``,
    a config such as ``{"name": "focal", "gamma": 2.0, "alpha": alphas}``
    (:meth:`LossGrid.to_config`), ... A single (unbatched) loss is a grid of one. Class weights
    given as numbers (an array of betas, a config's list) key the grid as they are; those of a
    :class:`iml.LossSpec`, by their shortest float32 decimals.

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
        weight = None if spec.fn is not None else spec.record.class_weight
        if isinstance(losses, Mapping) and weight in losses:
            exact = np.atleast_1d(np.asarray(losses[weight], np.float64))
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
    weights = grid_weights(spec)
    if weights is not None:  # one class weight per loss: distinct, each in (0, 1)
        name = f"{spec.record.class_weight}s"
        if exact is not None and isinstance(losses, Mapping):  # a config's list, or one weight
            exact = np.broadcast_to(exact, weights.shape)
            if len(np.unique(exact.astype(np.float32))) < len(exact):
                raise ValueError(
                    f"{name}: the grid repeats a class weight in float32, the precision the "
                    f"losses are computed in: {exact.tolist()}"
                )
        weights = _float32_decimals(weights) if exact is None else np.array(exact)
        V.check_betas(name, weights)
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
    family too (``fn``; ``name`` ``"callable"``): its first extra argument is the class weight.

    Attributes:
      name: a loss of :data:`CLASS_WEIGHTS`; ``"callable"`` for ``fn``.
      params: its other parameters (e.g. ``{"gamma": 2.0}``; a callable's, in order).
      fn: a callable loss (None for a registered one).
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


class RuleNotInvertibleError(ValueError):
    """A loss of a grid whose optimal scoring rule is not invertible at its weights
    (:func:`check_rules_invertible`)."""


def check_rules_invertible(losses: LossLike | LossGrid) -> None:
    """Refuse a grid of binary losses one of whose optimal scoring rules is not invertible, at
    its own weights, over the scores a float32 model outputs: Proposition 4's premise, checked
    before any training.

    Each loss that takes the generic rule or inverse of :mod:`iml.scoring` (its record gives no
    closed form of one of them) is checked by :func:`iml.check_invertibility` at its own
    parameters: its rule increasing and invertible, and the round trip closing, on a grid of
    scores over the float32 logit range. A closed-form rule and inverse are the record's own
    statement and are not checked again; nor are multiclass losses.

    Raises:
      RuleNotInvertibleError: a ``ValueError`` naming the loss, its weight (its key in the
        grid) and the scores where the check fails.
    """
    grid = loss_grid(losses)
    spec, record = grid.spec, grid.spec.record
    if spec.multiclass or (record.optimal_score is not None and record.inverse is not None):
        return
    (m,) = spec.batch_shape
    values = [np.broadcast_to(np.asarray(v), (m,)) for v in spec._values()]
    checked: dict[tuple[float, ...], bool] = {}
    for i, key in enumerate(grid.keys):
        row = tuple(float(v[i]) for v in values)
        if checked.get(row):
            continue
        report = check_invertibility(record.positional_loss, *row)
        checked[row] = report.passed()
        if checked[row]:
            continue
        low, high = report.failing_range()
        weight = f"{record.class_weight} = {key}" if record.class_weight else f"loss {key}"
        raise RuleNotInvertibleError(
            f"the {record.title} at {weight} has an optimal scoring rule that is not "
            f"invertible for scores in [{low:.8g}, {high:.8g}] (logits {_logit(low):.3g} to "
            f"{_logit(high):.3g}), scores a float32 model can output: its loss-corrected scores "
            "would not be probabilities there (iml.check_invertibility; a strictly proper "
            "loss has an invertible rule)"
        )


def loss_family(name: str | Callable[..., Array] = "log", **params: float) -> LossFamily:
    """The binary loss ``name`` as a function of its class weight (:class:`LossFamily`); or a
    callable ``fn(a, y, weight, *params)`` as one, its class weight the first extra argument.

    Raises:
      ValueError: for a loss without a class weight, or parameters it does not take (naming
        them).
    """
    if callable(name):
        family = LossFamily("callable", dict(params), fn=name)
    else:
        L.lookup(name)
        if name not in CLASS_WEIGHTS:
            raise ValueError(
                f"loss {name!r} has no class weight; the binary losses weighted by one are "
                f"{sorted(CLASS_WEIGHTS)}"
            )
        family = LossFamily(name, dict(params))
    family(0.5)  # checks the parameters now
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
    if losses.fn is not None:
        return None
    weight = losses.record.class_weight
    if weight is None:
        return None
    p = {k: np.asarray(v, np.float64) for k, v in losses.params.items()}
    if any(np.unique(v).size > 1 for k, v in p.items() if k != weight):
        return None
    return p[weight]


def weight_row(weights: Sequence[float], weight: float) -> int:
    """The row of a grid's class ``weights`` (:attr:`LossGrid.weights`) that ``weight`` names:
    the row equal to it, or else the one row equal to it in float32, the precision a loss's
    parameters hold (a plan's beta 0.123456789 is the focal grid's 0.12345679).

    Raises:
      ValueError: for a weight that no row holds, or that several hold in float32.
    """
    w = np.asarray(weights, np.float64)
    rows = np.flatnonzero(w == weight)
    if rows.size == 0:
        rows = np.flatnonzero(w.astype(np.float32) == np.float32(weight))
    if rows.size != 1:
        said = "is not one" if rows.size == 0 else "is several in float32"
        raise ValueError(f"class weight {weight!r} {said} of the grid's {w.tolist()}")
    return int(rows[0])


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
        if losses.fn is not None:
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
    """The parameters of the loss ``name`` that a config's loss section sets in its ``params``
    (``gamma`` of the focal losses, as ``config.loss.params.gamma``; any parameter of a
    registered loss), other than the weight its grid varies (the class weight, or the multiclass
    grid's weight), which the grid gives. A parameter not set takes the loss's own default.

    Raises:
      ValueError: naming ``params.KEY`` for a parameter the loss does not take, the weight its
        grid varies, or a value that is not a number.
    """
    record = L.lookup(name)
    varied = {record.class_weight, record.grid_weight and record.grid_weight.param}
    takes = [k for k in record.event_ndims if k not in varied]
    params = dict(section.get("params", None) or {})
    out = {}
    for key, value in params.items():
        if key not in takes:
            said = f"takes {', '.join(takes)}" if takes else "takes no parameter"
            grid = " (its grid gives that weight)" if key in varied else ""
            raise ValueError(f"params.{key}: the loss {name!r} {said}{grid}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"params.{key} must be a number, got {value!r}")
        out[key] = float(value)
    return out


def config_betas(
    loss: Mapping[str, Any], name: Callable[[str], str] = lambda key: f"config.{key}"
) -> np.ndarray:
    """The class weights of a config's ``loss`` section: ``betas``, or where they are ``()``
    the logit grid of ``n_betas`` from ``beta_min`` to ``beta_max`` (:func:`beta_grid`).

    Raises:
      ValueError: naming the bad key as ``name`` gives it (``"loss.betas"`` ->
        ``"config.loss.betas"``), for a weight outside ``(0, 1)``, a bad logit grid, or weights
        equal in float32.
    """
    betas = loss["betas"]
    if betas:
        if any(isinstance(b, bool) or not isinstance(b, int | float) for b in betas):
            raise ValueError(f"{name('loss.betas')} must be numbers in (0, 1), got {betas!r}")
        grid = V.check_betas(name("loss.betas"), [float(b) for b in betas])
    else:
        try:
            grid = beta_grid(loss["n_betas"], loss["beta_min"], loss["beta_max"])
        except (TypeError, ValueError) as err:
            keys = ("n_betas", "beta_min", "beta_max")
            key = next((k for k in keys if str(err).startswith(k)), None) or next(
                (k for k in keys if isinstance(loss[k], bool | str)), "n_betas"
            )
            raise ValueError(f"{name('loss.' + key)}: {err}") from None
    values, counts = np.unique(grid.astype(np.float32), return_counts=True)
    if (counts > 1).any():  # one model trained twice: the losses compute in float32
        key = "loss.betas" if betas else "loss.n_betas"
        raise ValueError(
            f"{name(key)}: the grid repeats a class weight in float32, the precision the losses "
            f"compute in: {[float(v) for v in values[counts > 1]]}"
        )
    return grid


def config_grid(
    loss: Mapping[str, Any],
    n_classes: int = 2,
    name: Callable[[str], str] = lambda key: f"config.{key}",
) -> LossGrid:
    """The grid of losses a config's ``loss`` section names: a binary loss of
    :data:`CLASS_WEIGHTS` over its class weights (:func:`config_betas`), or a multiclass loss of
    :data:`WEIGHT_GRIDS` over the grid ``weights`` (:func:`parse_weight_grid`) of ``n_classes``
    classes; each with the parameters ``params`` sets (:func:`config_parameters`). A binary
    grid is keyed by its class weights themselves.

    Raises:
      ValueError: naming the bad key as ``name`` gives it (``"loss.betas"`` ->
        ``"config.loss.betas"``): a beta outside ``(0, 1)``, a bad logit grid, an unreadable
        weight grid or a class out of range, a parameter the loss does not take.
    """

    try:
        params = config_parameters(loss["name"], loss)
    except ValueError as err:  # "params.gamma: ...", from the key it names
        key, _, rest = str(err).partition(":")
        raise ValueError(f"{name('loss.' + key)}:{rest}") from None
    if loss["name"] in WEIGHT_GRIDS:
        entries = parse_weight_grid(loss["weights"], loss["name"], name=name("loss.weights"))
        try:
            return loss_grid(weight_grid(entries, loss["name"], n_classes, **params))
        except ValueError as err:  # a class out of range
            said = str(err).removeprefix("weights: ")
            raise ValueError(f"{name('loss.weights')}: {said}") from None
    family = loss_family(loss["name"], **params)
    weights = np.asarray(config_betas(loss, name), np.float64).tolist()
    return loss_grid({"name": family.name, **family.params, family.weight_name: weights})


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
    parts = [p.strip() for p in text.split(";") if p.strip()]
    for k, entries in enumerate(grid):
        if entries in grid[:k]:
            raise ValueError(
                f"{name} repeats a loss: {parts[k]!r} is {parts[grid.index(entries)]!r}"
            )
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
