"""Input checks shared by the math layers.

Public functions validate their arguments when the arrays are concrete (ordinary calls) and raise
``ValueError`` naming the argument. Under a JAX transformation (``jit``, ``vmap``, ``grad``) values
are unknown at trace time, so the functions instead turn every output that depends on an invalid
input into NaN (:func:`nan_unless`): never a plausible wrong number. Shapes are static, so shape
errors raise under transformations too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array


def is_concrete(*xs: object) -> bool:
    """True when none of ``xs`` is a tracer, i.e. their values can be inspected now."""
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def concrete_value(x: object) -> np.ndarray | None:
    """``x`` as a NumPy array, or ``None`` when it is ``None`` or a tracer (inside a transform)."""
    if x is None or not is_concrete(x):
        return None
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None  # a container of tracers


def _describe(values: np.ndarray) -> str:
    finite = values[np.isfinite(values)]
    parts = []
    if np.isnan(values).any():
        parts.append(f"{int(np.isnan(values).sum())} NaN")
    if finite.size:
        parts.append(f"min {finite.min():.6g}, max {finite.max():.6g}")
    return ", ".join(parts)


def check_interval(
    name: str, x: object, low: float, high: float, *, open_low: bool, open_high: bool
) -> None:
    """Raise ``ValueError`` if concrete ``x`` has NaN or entries outside the interval."""
    if not is_concrete(x):
        return
    values = np.asarray(x)
    if values.dtype.kind not in "fiub":  # object arrays, complex: compared as float64
        values = values.astype(np.float64)
    if values.size == 0:
        return
    # The extremes decide (a NaN anywhere makes both NaN); no float64 copy of a large array.
    least, most = np.float64(values.min()), np.float64(values.max())
    below = least <= low if open_low else least < low
    above = most >= high if open_high else most > high
    if np.isnan(least) or np.isnan(most) or below or above:
        values = values.astype(np.float64)
        lo, hi = ("(" if open_low else "["), (")" if open_high else "]")
        raise ValueError(
            f"{name} must lie in {lo}{low:g}, {high:g}{hi} without NaN; got {_describe(values)}"
        )


def check_count(name: str, value: object, minimum: int = 1) -> int:
    """A count: a Python or NumPy integer (not a bool) of at least ``minimum``; returned as int."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_seeds(name: str, seeds: object) -> tuple[int, ...]:
    """Member seeds: a count ``N`` of at least 1 (the seeds ``0..N-1``) or the seeds themselves,
    distinct non-negative integers; returned as a tuple of ints."""
    if isinstance(seeds, np.ndarray) and seeds.ndim == 0:
        seeds = seeds.item()
    if isinstance(seeds, int | np.integer) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(
                f"{name} must be a count of at least 1 or the seeds themselves, got {seeds!r}"
            )
        return tuple(range(int(seeds)))
    values = list(seeds) if isinstance(seeds, Sequence | np.ndarray) else None
    if not values or any(
        isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 0 for s in values
    ):
        raise ValueError(f"{name} must be non-negative integers, got {seeds!r}")
    values = [int(s) for s in values]
    if len(set(values)) < len(values):
        raise ValueError(f"{name} repeats a seed: {values!r}")
    return tuple(values)


def _check_number(name: str, value: object, strict: bool) -> float:
    number = isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool
    )
    if not number or not (math.isfinite(value) and (value > 0 if strict else value >= 0)):
        raise ValueError(
            f"{name} must be a finite number {'>' if strict else '>='} 0, got {value!r}"
        )
    return float(value)


def check_positive(name: str, value: object) -> float:
    """A finite number (not a bool) above 0; returned as float."""
    return _check_number(name, value, strict=True)


def check_non_negative(name: str, value: object) -> float:
    """A finite number (not a bool) of at least 0; returned as float."""
    return _check_number(name, value, strict=False)


def check_beta(name: str, beta: object) -> None:
    """A class weight ``beta`` must lie in the open interval (0, 1)."""
    check_interval(name, beta, 0.0, 1.0, open_low=True, open_high=True)


def check_betas(name: str, betas: object, *, distinct: bool = True) -> np.ndarray:
    """A grid of class weights: a non-empty 1-D array of betas in (0, 1), by default distinct.

    Returns the betas as float64 (concrete input only: a grid of betas configures work).
    """
    b = np.asarray(betas, dtype=np.float64)
    if b.ndim != 1 or b.size == 0:
        raise ValueError(
            f"{name} must be a non-empty 1-D array of class weights; got shape {b.shape}"
        )
    check_beta(name, b)
    if distinct and np.unique(b).size != b.size:
        values, counts = np.unique(b, return_counts=True)
        raise ValueError(f"{name} must not repeat a beta; repeated: {values[counts > 1].tolist()}")
    return b


def check_open_unit(name: str, x: object) -> None:
    """A probability that sets a procedure (a confidence level, a significance level, a
    quantile) must lie in the open interval (0, 1)."""
    check_interval(name, x, 0.0, 1.0, open_low=True, open_high=True)


def check_unit(name: str, x: object) -> None:
    """Scores and posteriors must lie in the closed interval [0, 1]."""
    check_interval(name, x, 0.0, 1.0, open_low=False, open_high=False)


def check_broadcastable(**arrays: object) -> tuple[int, ...]:
    """Raise ``ValueError`` naming the arguments whose shapes do not broadcast together."""
    shapes = {name: tuple(np.shape(x)) for name, x in arrays.items()}
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        described = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"shapes do not broadcast together: {described}") from None


def check_weight_matrix(name: str, B: object) -> None:
    """A class-weight matrix must be square, finite and strictly positive (Proposition 3)."""
    shape = np.shape(B)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{name} must be a square [n, n] matrix; got shape {shape}")
    if shape[0] < 2:
        raise ValueError(f"{name} must have at least 2 classes; got shape {shape}")
    if is_concrete(B):
        check_interval(name, B, 0.0, np.inf, open_low=True, open_high=True)


def check_choice(name: str, value: object, choices: Sequence[object]) -> None:
    """``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")


#: The formats a figure is written in (:func:`iml.plots.save_figure`).
FIGURE_FORMATS = ("png", "pdf", "svg")


def check_figure_formats(name: str, formats: object) -> tuple[str, ...]:
    """``formats`` is a sequence of distinct :data:`FIGURE_FORMATS`, possibly empty; returned
    as a tuple."""
    if isinstance(formats, str) or not isinstance(formats, Sequence):
        raise ValueError(
            f"{name} must be a sequence of figure formats {FIGURE_FORMATS}, got {formats!r}"
        )
    for fmt in formats:
        if fmt not in FIGURE_FORMATS:
            raise ValueError(f"{name}: unknown figure format {fmt!r}; use {FIGURE_FORMATS}")
    if len(set(formats)) < len(formats):
        raise ValueError(f"{name} names a format twice: {tuple(formats)}")
    return tuple(formats)


def check_shape(name: str, x: object, shape: tuple[int, ...]) -> None:
    """``x`` has exactly the shape ``shape``."""
    if np.shape(x) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {np.shape(x)}")


def check_finite(name: str, x: object) -> None:
    """Every entry of concrete ``x`` is finite (no NaN or infinity)."""
    values = concrete_value(x)
    if values is None or values.dtype.kind in "iub":  # integers are finite
        return
    if values.dtype.kind != "f":
        values = values.astype(np.float64)
    finite = np.isfinite(values)
    if not finite.all():
        bad = int(np.sum(~finite))
        raise ValueError(f"{name} must be finite; {bad} entries are not")


def check_weights(name: str, weights: object) -> None:
    """Observation weights: finite, non-negative, with a positive sum along the last axis."""
    if not is_concrete(weights):
        return
    check_interval(name, weights, 0.0, np.inf, open_low=False, open_high=True)
    values = np.asarray(weights, dtype=np.float64)
    if values.size and (values.sum(axis=-1) <= 0).any():
        raise ValueError(f"{name} must have a positive sum")


def check_simplex(name: str, x: object, atol: float = 1e-4) -> None:
    """Posteriors must be non-negative and sum to one along the last axis."""
    if not is_concrete(x):
        return
    values = np.asarray(x, dtype=np.float64)
    if values.size == 0:
        return
    if np.isnan(values).any() or (values < 0).any():
        raise ValueError(f"{name} must be non-negative without NaN; got {_describe(values)}")
    sums = values.sum(axis=-1)
    if np.abs(sums - 1.0).max() > atol:
        raise ValueError(
            f"{name} must sum to 1 along the last axis (classes); sums range over "
            f"[{sums.min():.6g}, {sums.max():.6g}]"
        )


def nan_unless(valid: Array, x: Array) -> Array:
    """``x`` where ``valid`` holds, NaN elsewhere: how invalid input shows under transformations."""
    return jnp.where(valid, x, jnp.asarray(jnp.nan, x.dtype))
