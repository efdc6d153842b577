"""What models trained at several class weights learned (:mod:`iml.revealed`), in four figures.

* :func:`figure_information_by_weight`: the mutual information of each model's revealed
  experiment against its class weight.
* :func:`figure_information_by_class`: the information about each class along a grid of
  losses of ``n`` classes.
* :func:`figure_value_matrix`: the value matrix relative to its diagonal, with the significant
  NIS violations and an improving NIAC cycle.
* :func:`figure_cost_bounds`: the revealed bounds on the costs of learning.

Each artist's ``gid`` is in the function's docstring.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from matplotlib.figure import Figure

from iml import _validation as V
from iml.plots._common import logit, new_figure, weight_axis

ArrayLike = jax.typing.ArrayLike

__all__ = [
    "figure_cost_bounds",
    "figure_information_by_class",
    "figure_information_by_weight",
    "figure_value_matrix",
]


def _check_weights_and(
    betas: Sequence[float], weight_name: str, **values: ArrayLike
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The class weights ``[K]`` and each named array as float64, its last axis ``K``."""
    b = V.check_betas(weight_name + "s", [float(x) for x in betas])
    out = {}
    for name, value in values.items():
        v = np.asarray(value, dtype=np.float64)
        if v.ndim == 0 or v.shape[-1] != b.size:
            raise ValueError(f"{name} must have one value per class weight ({b.size}); got shape "
                             f"{v.shape}")  # fmt: skip
        out[name] = v
    return b, out


def _interval(name: str, interval: ArrayLike | None, k: int) -> np.ndarray | None:
    if interval is None:
        return None
    iv = np.asarray(interval, dtype=np.float64)
    if iv.shape != (2, k):
        raise ValueError(f"{name} must have shape (2, {k}) (lower and upper ends); got {iv.shape}")
    return iv


def figure_information_by_weight(
    betas: Sequence[float],
    information: ArrayLike,
    interval: ArrayLike | None = None,
    *,
    weight_name: str = "beta",
    title: str = "",
) -> Figure:
    """Mutual information ``I_k`` (nats) of each model's revealed experiment against its weight.

    Does reweighting change what is learned? Flat means the same information at every class
    weight (:func:`iml.revealed.mutual_information`; the x axis is ``logit(weight)``).
    The points carry the ``gid`` ``"information"`` and their interval bars (one segment per model,
    in order) ``"information-interval"``.

    Args:
      betas: the class weights ``[K]``.
      information: ``I_k`` in nats ``[K]``.
      interval: its bootstrap interval ``[2, K]`` (lower, upper), or None.
      weight_name: the class weight's name on the axis (``"beta"``, or ``"alpha"`` for focal).
      title: optional title.
    """
    b, v = _check_weights_and(betas, weight_name, information=information)
    info = v["information"]
    iv = _interval("interval", interval, b.size)
    z = logit(b)
    fig, ax = new_figure((6.0, 4.0))
    ax.plot(z, info, "o-", color="tab:blue", ms=3.5, lw=1.2, label="I_k (estimate)",
            gid="information")  # fmt: skip
    if iv is not None:
        ax.vlines(z, iv[0], iv[1], color="tab:blue", lw=1.0, alpha=0.7,
                  label="marginal bootstrap interval (not a test of a difference)",
                  gid="information-interval")  # fmt: skip
    weight_axis(ax, b, weight_name)
    ax.set_ylabel("mutual information I(signal; label) (nats)")
    ax.set_ylim(bottom=0.0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(title or "What each model learned, by class weight")
    return fig


def figure_information_by_class(
    information: ArrayLike,
    interval: ArrayLike | None = None,
    *,
    grid_keys: Sequence[str] | None = None,
    class_names: Sequence[str] | None = None,
    title: str = "",
) -> Figure:
    """The information each model's revealed experiment carries about each class, along a grid
    of losses of ``n`` classes: one line per class, ``I_{k,c}`` in nats
    (:func:`iml.revealed.class_information`, one-vs-rest), models in grid order.

    Does raising a class's weight buy information about that class? The line of class ``c``
    carries the ``gid`` ``"class-information-{c}"`` and its interval bars (one segment per model)
    ``"class-information-interval-{c}"``; the legend says the bars are marginal intervals, which
    do not test a difference between models.

    Args:
      information: ``I_{k,c}`` ``[K, n]``.
      interval: its bootstrap interval ``[2, K, n]`` (lower, upper), or None.
      grid_keys: the tick label of each model ``[K]`` (e.g. ``"w[2]=4"``); default its index.
      class_names: the legend's name of each class ``[n]``; default ``"class c"``.
      title: optional title.

    Raises:
      ValueError: naming ``information``, ``interval``, ``grid_keys`` or ``class_names``.
    """
    info = np.asarray(information, dtype=np.float64)
    if info.ndim != 2 or info.shape[1] < 2:
        raise ValueError(f"information must have shape [K, n] with n >= 2; got {info.shape}")
    k, n = info.shape
    iv = None if interval is None else np.asarray(interval, dtype=np.float64)
    if iv is not None and iv.shape != (2, k, n):
        raise ValueError(f"interval must have shape (2, {k}, {n}) (lower and upper ends); got "
                         f"{iv.shape}")  # fmt: skip
    keys = [str(i) for i in range(k)] if grid_keys is None else [str(x) for x in grid_keys]
    if len(keys) != k:
        raise ValueError(f"grid_keys must name each of the {k} models; got {len(keys)}")
    names = [f"class {c}" for c in range(n)] if class_names is None else list(class_names)
    if len(names) != n:
        raise ValueError(f"class_names must name each of the {n} classes; got {len(names)}")
    x = np.arange(k, dtype=np.float64)
    fig, ax = new_figure((6.0, 4.0))
    for c in range(n):
        (line,) = ax.plot(x, info[:, c], "o-", ms=3.5, lw=1.2, label=names[c],
                          gid=f"class-information-{c}")  # fmt: skip
        if iv is not None:
            ax.vlines(x, iv[0, :, c], iv[1, :, c], color=line.get_color(), lw=1.0, alpha=0.7,
                      gid=f"class-information-interval-{c}")  # fmt: skip
    if iv is not None:  # the bars' key: each is one model's own interval
        key = "bars: marginal bootstrap intervals (not a test of a difference)"
        ax.plot([], [], color="0.4", lw=1.0, gid="interval-key", label=key)
    ax.set_xticks(x, keys)
    ax.set_xlabel("loss of the grid")
    ax.set_ylabel("information about the class, I(signal; y = c) (nats)")
    ax.set_ylim(bottom=0.0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(title or "What each model learned about each class")
    return fig


def _pairs(violations: ArrayLike | Sequence[Sequence[int]] | None, k: int) -> np.ndarray:
    """Violating pairs ``(k, j)`` as an ``[n, 2]`` array, from a ``[K, K]`` mask or a list."""
    if violations is None:
        return np.zeros((0, 2), np.int64)
    v = np.asarray(violations)
    if v.dtype == bool:
        if v.shape != (k, k):
            raise ValueError(f"violations must be a [{k}, {k}] mask or a list of (k, j) pairs; "
                             f"got shape {v.shape}")  # fmt: skip
        return np.argwhere(v)
    v = v.reshape(-1, 2) if v.size else np.zeros((0, 2), np.int64)
    if v.size and ((v < 0) | (v >= k)).any():
        raise ValueError(f"violations must be pairs of model indices in [0, {k}); got {v.tolist()}")
    return v.astype(np.int64)


def figure_value_matrix(
    G: ArrayLike,
    keys: Sequence[str],
    violations: ArrayLike | Sequence[Sequence[int]] | None = None,
    cycle: Sequence[int] | None = None,
    *,
    weight_name: str = "beta",
    title: str = "",
) -> Figure:
    """The value matrix relative to its diagonal: ``G[k, j] - G[k, k]`` as a heatmap.

    Row ``k`` is the decision problem (model ``k``'s loss), column ``j`` the experiment learned
    under loss ``j`` and re-scored optimally for ``k`` (:func:`iml.revealed.value_matrix`). A
    positive cell (red) says that training under ``j`` and correcting afterwards beats training
    under ``k`` on ``k``'s own loss: a violation of NIS, which capacity-constrained learning
    forbids. The diverging colormap is centred at 0.

    Artists: the heatmap (``gid`` ``"value-matrix"``; ``get_array()`` is the matrix drawn), the
    significant violations as open squares (``"violations"``; offsets ``(j, k)``) and an
    improving cycle as a closed path through the cells ``(k_i, k_{i+1})``
    (``"niac-cycle"``; x the columns, y the rows).

    Args:
      G: the value matrix ``[K, K]``.
      keys: the label of each model (its class weight), ``[K]``.
      violations: significant NIS violations: a ``[K, K]`` mask (row ``k``, column ``j``) or a
        list of pairs ``(k, j)``.
      cycle: a NIAC cycle ``k_1, ..., k_m`` (``-1`` entries are padding), each ``k_i`` given the
        experiment of ``k_{i+1}`` and ``k_m`` that of ``k_1``, or None.
      weight_name: the class weight's name in the axis labels.
      title: optional title.
    """
    g = np.asarray(G, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] != g.shape[1] or g.shape[0] < 2:
        raise ValueError(f"G must be a square [K, K] value matrix with K >= 2; got {g.shape}")
    k = g.shape[0]
    keys = [str(x) for x in keys]
    if len(keys) != k:
        raise ValueError(f"keys must name the {k} models; got {len(keys)}")
    pairs = _pairs(violations, k)
    D = g - np.diagonal(g)[:, None]
    scale = float(np.nanmax(np.abs(D))) if np.isfinite(D).any() else 0.0
    scale = scale if scale > 0 else 1.0
    size = min(9.0, 4.0 + 0.08 * k)
    fig, ax = new_figure((size + 1.2, size))
    image = ax.imshow(D, cmap="RdBu_r", vmin=-scale, vmax=scale, interpolation="nearest",
                      gid="value-matrix")  # fmt: skip
    label = "G[k, j] − G[k, k], point estimates (positive: j's is higher for k)"
    fig.colorbar(image, ax=ax, shrink=0.85, label=label)
    if k <= 6:  # few cells: their values, too
        for (row, col), d in np.ndenumerate(D):
            ax.text(col, row, f"{d:.3g}", ha="center", va="center", fontsize="small",
                    color="white" if abs(d) > 0.6 * scale else "black")  # fmt: skip
    if len(pairs):
        ax.scatter(pairs[:, 1], pairs[:, 0], s=max(8.0, 400.0 / k), marker="s",
                   facecolors="none", edgecolors="black", linewidths=1.2,
                   label="significant NIS violation", gid="violations")  # fmt: skip
    if cycle is not None:
        c = [int(i) for i in cycle if int(i) >= 0]
        if any(i >= k for i in c):
            raise ValueError(f"cycle must hold model indices in [0, {k}); got {list(cycle)}")
        if len(c) >= 2:
            rows = [*c, c[0]]
            cols = [*c[1:], c[0], c[1]]
            ax.plot(cols, rows, "o-", color="black", ms=4, lw=1.4,
                    label=f"improving cycle ({len(c)} models)", gid="niac-cycle")  # fmt: skip
    step = max(1, int(np.ceil(k / 12)))
    ticks = np.arange(0, k, step)
    ax.set_xticks(ticks, [keys[i] for i in ticks], rotation=90 if k > 6 else 0,
                  fontsize="small")  # fmt: skip
    ax.set_yticks(ticks, [keys[i] for i in ticks], fontsize="small")
    ax.set_xlabel(f"experiment j (learned at {weight_name})")
    ax.set_ylabel(f"decision problem k (loss at {weight_name})")
    if len(pairs) or (cycle is not None and ax.get_legend_handles_labels()[0]):
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 if k <= 6 else -0.2),
                  fontsize="small", ncol=2)  # fmt: skip
    ax.set_title(title or "Value of each experiment, relative to the model's own")
    return fig


def figure_cost_bounds(
    betas: Sequence[float] | None,
    lower: ArrayLike,
    upper: ArrayLike,
    interval: ArrayLike | None = None,
    *,
    reference: int | None = None,
    weight_name: str = "beta",
    title: str = "",
    grid_keys: Sequence[str] | None = None,
) -> Figure:
    """The revealed bounds on each model's cost of learning, ``C_k - C_ref``, against its weight.

    Costly learning implies ``lower_k <= C_k - C_ref <= upper_k``
    (:func:`iml.revealed.revealed_cost_bounds`); each model's interval is a vertical bar at
    ``logit(weight)`` (``gid`` ``"cost-bounds"``, one segment per model, in order), with its ends
    marked (``"cost-lower"`` and ``"cost-upper"``). NaN bounds (NIAC fails at the point
    estimates, so no costs fit them; its test may still not reject) are not drawn. A bootstrap
    interval of the bounds is drawn as wider, lighter bars (``"cost-interval"``).

    A grid of losses that no class weight orders (models of ``n`` classes) is drawn by its
    ``grid_keys`` instead, one position per model in grid order.

    Args:
      betas: the class weights ``[K]``, or None with ``grid_keys``.
      lower, upper: the bounds ``[K]``.
      interval: the bootstrap interval of the bounds ``[2, K]``: the low end of the lower
        bound's interval and the high end of the upper bound's, or None.
      reference: the model whose cost is 0 (marked), or None.
      weight_name: the class weight's name on the axis.
      title: optional title.
      grid_keys: each model's name ``[K]`` (e.g. ``"w[8]=10"``), drawn in place of ``betas``.

    Raises:
      ValueError: naming ``betas``, ``grid_keys``, ``lower``, ``upper``, ``interval`` or
        ``reference``: neither or both of ``betas`` and ``grid_keys``, or arrays of other
        lengths.
    """
    if (betas is None) == (grid_keys is None):
        raise ValueError("give the models' betas or their grid_keys, one of the two")
    if grid_keys is not None:
        names = [str(x) for x in grid_keys]
        lo, hi = (np.asarray(x, np.float64) for x in (lower, upper))
        if lo.shape != (len(names),) or hi.shape != (len(names),):
            raise ValueError(f"lower and upper must have one value per grid key ({len(names)}); "
                             f"got shapes {lo.shape} and {hi.shape}")  # fmt: skip
        b = np.arange(len(names), dtype=np.float64)
        z = b
    else:
        b, v = _check_weights_and(betas, weight_name, lower=lower, upper=upper)
        lo, hi = v["lower"], v["upper"]
        z = logit(b)
    iv = _interval("interval", interval, b.size)
    if reference is not None and not 0 <= reference < b.size:
        raise ValueError(f"reference must be a model index in [0, {b.size}); got {reference!r}")
    fig, ax = new_figure((6.0, 4.0))
    ax.axhline(0.0, color="0.5", lw=0.8, zorder=0)
    if iv is not None:
        ax.vlines(z, iv[0], iv[1], color="tab:orange", lw=5.0, alpha=0.3,
                  label="bootstrap interval", gid="cost-interval")  # fmt: skip
    ax.vlines(z, lo, hi, color="tab:red", lw=1.8, gid="cost-bounds",
              label="bounds on C_k − C_ref at the point estimates")  # fmt: skip
    ax.plot(z, lo, "_", color="tab:red", ms=8, mew=1.8, ls="none", gid="cost-lower")
    ax.plot(z, hi, "_", color="tab:red", ms=8, mew=1.8, ls="none", gid="cost-upper")
    if reference is not None:
        named = (f"{grid_keys[reference]}" if grid_keys is not None else
                 f"{weight_name} = {b[reference]:g}")  # fmt: skip
        ax.plot([z[reference]], [0.0], "o", color="black", ms=5, ls="none",
                label=f"reference ({named}): cost 0", gid="cost-reference")  # fmt: skip
    if not (np.isfinite(lo) | np.isfinite(hi)).any():
        note = "no costs fit the point estimates\n(a point estimate, not the test's verdict)"
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", color="0.3")
    if grid_keys is not None:
        ax.set_xticks(z, names, rotation=90 if len(names) > 6 else 0, fontsize="small")
        ax.set_xlabel("loss of the grid")
        ax.set_xlim(-0.5, len(names) - 0.5)
    else:
        weight_axis(ax, b, weight_name)
    ax.set_ylabel("C_k − C_ref (value units)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(title or "Revealed costs of learning, relative to the reference model")
    return fig
