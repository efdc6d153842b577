"""Experiment configs: nested, locked (``ConfigDict``), read from a file and overridden by flags.

A config file is a Python file whose ``get_config()`` returns an ``ml_collections.ConfigDict``
of sections (``config.data``, ``config.model``, ...). The command line overrides any of its keys
by its dotted name, ``--config.train.learning_rate=1e-4`` (or ``--config.train.learning_rate
1e-4``): the value is read as a Python literal (``3``, ``1e-4``, ``True``, ``0.5,0.9``) and
otherwise taken as text; a key of text takes the text as written, and a key holding a tuple
takes a list, a tuple or one value. The config comes back locked, so that a misspelled key, on
the command line or later in code, is an error naming it instead of a new key nobody reads::

    config = load_config("experiments/configs/chestxray14.py", [("train.max_epochs", "1")])
    config.train.epochz = 2  # AttributeError: the key does not exist

For storing, :func:`to_dict` gives the config as plain nested dicts of JSON types and
:func:`from_dict` reads them back.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import json
import math
import textwrap
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ml_collections

__all__ = [
    "apply_overrides",
    "check_keys",
    "first_difference",
    "flatten",
    "from_dict",
    "keys_help",
    "load_config",
    "load_config_file",
    "lookup",
    "override",
    "parse_value",
    "split_overrides",
    "to_dict",
]

_PREFIX = "--config."


# ------------------------------------------------------------------------------------------------
# Reading: the file, the overrides
# ------------------------------------------------------------------------------------------------


def load_config_file(path: str | Path) -> ml_collections.ConfigDict:
    """The ``ConfigDict`` that ``get_config()`` of the Python file ``path`` returns.

    Raises:
      FileNotFoundError: if there is no such file.
      ValueError: if the file defines no ``get_config()``, it returns no ``ConfigDict``, or it
        sets a key that a locked config lacks or a value of another type (naming the line).
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"--config: file not found: {path}")
    spec = importlib.util.spec_from_file_location(f"_iml_config_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        if not hasattr(module, "get_config"):
            raise ValueError(f"--config: {path} defines no get_config()")
        config = module.get_config()
    except (AttributeError, KeyError, TypeError) as err:
        # A locked config refusing a new key, or a value of another type: name the line.
        frames = traceback.extract_tb(err.__traceback__)
        lines = [f.lineno for f in frames if Path(f.filename).resolve() == file.resolve()]
        where = f", line {lines[-1]}" if lines else ""
        reason = str(err).strip("'\"").split(" Other fields present")[0].splitlines()[0]
        raise ValueError(f"--config: {path}{where}: {reason}") from None
    if not isinstance(config, ml_collections.ConfigDict):
        raise ValueError(
            f"--config: get_config() of {path} returns {type(config).__name__}, not a ConfigDict"
        )
    return config


def split_overrides(argv: Sequence[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """``argv`` without its ``--config.KEY=VALUE`` and ``--config.KEY VALUE`` items, and those.

    Returns:
      The other arguments, in order, and the ``(KEY, VALUE)`` pairs, in order; ``VALUE`` is
      ``None`` where the last argument is a ``--config.KEY`` without one.
    """
    rest: list[str] = []
    overrides: list[tuple[str, str | None]] = []
    items = iter(argv)
    for item in items:
        if not item.startswith(_PREFIX):
            rest.append(item)
            continue
        key, sep, value = item[len(_PREFIX) :].partition("=")
        overrides.append((key, value if sep else next(items, None)))
    return rest, overrides


def parse_value(text: str, current: Any = None) -> Any:
    """The value that the command-line text ``text`` gives a key now holding ``current``.

    A Python literal where ``text`` is one (``3``, ``1e-4``, ``True``, ``(1, 2)``, ``0.5,0.9``),
    else the text itself. A key of text takes ``text`` as written (a quoted literal loses its
    quotes); a key of a tuple takes a list, a tuple or one value (a tuple of one), and a key of
    a tuple of text also its items separated by commas (``png,pdf``; empty text: none); a key of
    a bool also takes ``true`` and ``false``.
    """
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = text
    if isinstance(current, str):
        return value if isinstance(value, str) else text
    if isinstance(current, bool) and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if isinstance(current, tuple) and current and all(isinstance(v, str) for v in current):
        if isinstance(value, str):  # a tuple of text: its items separated by commas
            return tuple(item.strip() for item in value.split(",") if item.strip())
    if isinstance(current, tuple):
        return tuple(value) if isinstance(value, list | tuple) else (value,)
    return value


def override(
    config: ml_collections.ConfigDict, key: str, value: Any, *, flag: str | None = None
) -> None:
    """Set the existing dotted ``key`` of ``config`` to ``value``, keeping the key's type.

    Args:
      config: the config (it may be locked: only existing keys are set, and any key of an
        unlocked section, such as the loss's parameters).
      key: a dotted name, ``"train.learning_rate"``.
      value: the new value; an int is accepted for a float and a list for a tuple.
      flag: how the error messages name the key (default ``config.KEY``).

    Raises:
      ValueError: naming the key, for a key that does not exist (with the nearest existing
        keys), a section given a value, or a value of another type than the key's.
    """
    name = flag or f"config.{key}"
    section = config
    parts = key.split(".")
    for depth, part in enumerate(parts):
        here = ".".join(["config", *parts[:depth]])
        if not isinstance(section, ml_collections.ConfigDict):
            raise ValueError(f"{name}: {here} is a value, not a section")
        if part not in section:
            if depth == len(parts) - 1 and not section.is_locked:  # an open section's new key
                section[part] = tuple(value) if isinstance(value, list) else value
                return
            raise ValueError(f"{name}: no such key; {_suggest(config, key, section, here)}")
        if depth < len(parts) - 1:
            section = section[part]
    current = section[parts[-1]]
    if isinstance(current, ml_collections.ConfigDict):
        keys = ", ".join(f"config.{key}.{k}" for k in flatten(current))
        raise ValueError(f"{name}: config.{key} is a section; set its keys: {keys}")
    if isinstance(current, tuple) and isinstance(value, list):
        value = tuple(value)
    try:
        section[parts[-1]] = value
    except TypeError:
        kinds = {bool: "True or False", int: "an integer", float: "a number", str: "text"}
        kind = kinds.get(type(current), f"a {type(current).__name__}")
        raise ValueError(
            f"{name}: expected {kind}, got {value!r} ({type(value).__name__})"
        ) from None


def apply_overrides(
    config: ml_collections.ConfigDict, overrides: Iterable[tuple[str, str | None]]
) -> ml_collections.ConfigDict:
    """``config`` with each ``(KEY, TEXT)`` of ``overrides`` set in turn, errors naming
    ``--config.KEY`` (see :func:`parse_value` and :func:`override`); returns ``config``."""
    for key, text in overrides:
        flag = _PREFIX + key
        if text is None:
            raise ValueError(f"{flag}: no value; write {flag}=VALUE")
        current = None if _untyped(config, key) else lookup(config, key)
        override(config, key, parse_value(text, current), flag=flag)
    return config


def _untyped(config: ml_collections.ConfigDict, key: str) -> bool:
    """Whether ``key`` holds a value of any type (a field of type ``object``, such as a number or
    ``'auto'``), which the text on the command line gives as a literal."""
    *sections, name = key.split(".")
    section = lookup(config, ".".join(sections)) if sections else config
    field = getattr(section, "_fields", {}).get(name)
    return isinstance(field, ml_collections.FieldReference) and field.get_type() is object


def load_config(
    path: str | Path | None = None,
    overrides: Iterable[tuple[str, str | None]] = (),
    *,
    default: Callable[[], ml_collections.ConfigDict] | None = None,
) -> ml_collections.ConfigDict:
    """The config of the file ``path`` (or ``default()``), then ``overrides``, locked.

    Raises:
      FileNotFoundError: for a missing file.
      ValueError: for a file without ``get_config()``, or an override naming a key that does
        not exist or giving it a value of another type (naming the key, see :func:`override`).
    """
    if path:
        config = load_config_file(path)
    elif default is not None:
        config = default()
    else:
        raise ValueError("--config: no config file given")
    apply_overrides(config, overrides)
    config.lock()
    return config


# ------------------------------------------------------------------------------------------------
# Keys, and plain nested dicts for storing
# ------------------------------------------------------------------------------------------------


def flatten(config: Mapping[str, Any] | ml_collections.ConfigDict) -> dict[str, Any]:
    """The values (not sections) of nested ``config`` by dotted name, sections in order."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping | ml_collections.ConfigDict):
            out.update({f"{key}.{k}": v for k, v in flatten(value).items()})
        else:
            out[str(key)] = value
    return out


def check_keys(
    config: Mapping[str, Any] | ml_collections.ConfigDict,
    reference: Mapping[str, Any] | ml_collections.ConfigDict,
) -> None:
    """Raise ``ValueError`` unless ``config`` has exactly the keys and sections of ``reference``.

    The message names the first unknown key (with the nearest keys of ``reference``) or the
    first missing one, as ``config.SECTION.KEY``. A section that ``reference`` leaves unlocked
    (open to any key) takes any keys.
    """
    have, want = list(flatten(config)), list(flatten(reference))
    open_sections = [f"{k}." for k in _open_sections(reference)]
    unknown = [k for k in have if k not in want and not k.startswith(tuple(open_sections))]
    if unknown:
        near = _nearest(unknown[0], want)
        names = ["config." + k for k in near or want]
        hint = f"did you mean {_or(names)}?" if near else f"known keys: {_or(names, 'and')}"
        raise ValueError(f"unknown config key config.{unknown[0]}; {hint}")
    missing = [k for k in want if k not in have]
    if missing:
        raise ValueError(f"config lacks key(s) {', '.join('config.' + k for k in missing)}")


def _open_sections(config: Any, prefix: str = "") -> list[str]:
    """The dotted names of the unlocked sections inside a locked ``ConfigDict``."""
    if not isinstance(config, ml_collections.ConfigDict):
        return []
    found = []
    for key, value in config.items():
        if isinstance(value, ml_collections.ConfigDict):
            if config.is_locked and not value.is_locked:
                found.append(prefix + key)
            found += _open_sections(value, f"{prefix}{key}.")
    return found


def to_dict(config: Mapping[str, Any] | ml_collections.ConfigDict) -> dict[str, Any]:
    """``config`` as plain nested dicts of JSON types (tuples become lists), as stored."""
    if isinstance(config, ml_collections.ConfigDict):
        config = config.to_dict()
    return json.loads(json.dumps(dict(config)))


def from_dict(data: Mapping[str, Any], *, lock: bool = True) -> ml_collections.ConfigDict:
    """The ``ConfigDict`` of plain nested dicts (lists become tuples), locked by default."""

    def tuples(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: tuples(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return tuple(tuples(v) for v in value)
        return value

    config = ml_collections.ConfigDict(tuples(data))
    if lock:
        config.lock()
    return config


def lookup(config: Mapping[str, Any] | ml_collections.ConfigDict, key: str) -> Any:
    """The value (or section) of nested ``config`` at the dotted ``key``; ``None`` if absent."""
    value: Any = config
    for part in key.split("."):
        if not isinstance(value, Mapping | ml_collections.ConfigDict) or part not in value:
            return None
        value = value[part]
    return value


def first_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """The dotted name of the first key, in sorted order, where nested ``old`` and ``new``
    differ (present in one only, or another value); ``None`` where they are equal. Finite floats,
    alone or in lists, are equal within a relative :data:`FLOAT_RTOL`: a weight computed again
    by another version or CPU (a grid of class weights) is the same setting."""
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            inner = first_difference(a, b)
            if inner is not None:
                return f"{key}.{inner}"
        elif not _same_value(a, b) or (key in old) != (key in new):
            return str(key)
    return None


#: The relative difference within which two finite float settings are the same
#: (:func:`first_difference`): far below any change made on purpose, far above float64 round-off.
FLOAT_RTOL = 1e-12


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isfinite(a) and math.isfinite(b):
        return abs(a - b) <= FLOAT_RTOL * max(abs(a), abs(b))
    return a == b


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------


def _suggest(config: ml_collections.ConfigDict, key: str, section: Any, here: str) -> str:
    near = _nearest(key, list(flatten(config)))
    if near:
        return f"did you mean {_or(['config.' + k for k in near])}?"
    return f"{here} has {_or(sorted(section), 'and')}"


def _nearest(name: str, candidates: Sequence[str]) -> list[str]:
    # The closest candidates by difflib's ratio, and those almost as close (at most three).
    near = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    if not near:
        return []
    ratio = {c: difflib.SequenceMatcher(None, name, c).ratio() for c in near}
    return [c for c in near if ratio[c] >= ratio[near[0]] - 0.05]


def _or(names: Sequence[str], word: str = "or") -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def keys_help(
    config: Mapping[str, Any] | ml_collections.ConfigDict,
    meaning: Callable[[str], str],
    title: str = "config keys (set with --config.KEY=VALUE), with their defaults:",
) -> str:
    """The text that ``--help`` prints after the options: ``title``, then every key of
    ``config`` with its default and ``meaning(key)``, one per line."""
    flat = flatten(config)
    width = min(max(len(f"{k} = {v!r}") for k, v in flat.items()), 36)
    lines = [title]
    for key, value in flat.items():
        shown = f"  {key} = {value!r}"
        text = textwrap.wrap(meaning(key), 96 - width)
        if len(shown) > width + 2 and text:  # a long default: its meaning on the next lines
            lines.append(shown)
            shown = ""
        lines.append(f"{shown:<{width + 4}}{text[0] if text else ''}".rstrip())
        lines += [" " * (width + 4) + part for part in text[1:]]
    return "\n".join(lines)
