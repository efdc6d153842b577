"""The config of ``iml reproduce`` or ``iml sweep``: the default (or ``--config FILE``), then the
``--config.KEY=VALUE`` overrides, then the named options (:data:`SHORTCUTS`), each checked and
typed; and the report's settings that ``iml figures`` and ``iml reveal`` take for a stored run
(:func:`report_overrides`).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from iml import config as config_lib
from iml.config import parse_value
from iml.pipeline.defaults import READ_BY, default_config, sweep_config

if TYPE_CHECKING:
    import ml_collections

__all__ = ["SHORTCUTS", "load_config", "load_config_with_names", "report_overrides", "shortcuts"]

#: The named options of ``iml reproduce`` and ``iml sweep`` and the config key each sets: the
#: keys a run is most often started with, one table, so that an option has the same name in
#: every command; every other key is set as ``--config.SECTION.KEY=VALUE``. A command offers the
#: options of the keys its runs read (:func:`shortcuts`); ``--out`` and ``--no-progress`` set no
#: key.
SHORTCUTS = {
    "dataset": "data.name",
    "csv": "data.csv",
    "target": "data.target",
    "loss": "loss.name",
    "betas": "loss.betas",
    "seeds": "plan.seeds",
}


def shortcuts(inputs: str) -> dict[str, str]:
    """The named options of a command whose runs take ``inputs`` (``"images"``: ``iml
    reproduce``; ``"rows"``: ``iml sweep``): those of :data:`SHORTCUTS` whose key such runs read
    (:data:`iml.pipeline.defaults.READ_BY`)."""
    return {option: key for option, key in SHORTCUTS.items() if READ_BY.get(key, inputs) == inputs}


def report_overrides(
    args: argparse.Namespace, keys: Iterable[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The report's settings (``config.eval``) that a command reporting a stored run is given:
    its ``--config.eval.KEY=VALUE`` items, typed as ``iml reproduce`` reads them; and how
    messages name each (``config.eval.n_bins``).

    Args:
      args: the parsed command line, with its ``overrides``.
      keys: the ``config.eval`` keys the command takes.

    Raises:
      ValueError: for any other ``--config.KEY``, naming the keys taken.
    """
    keys = tuple(keys)
    config = default_config()
    names: dict[str, str] = {}
    for key, _ in args.overrides:
        section, _, name = key.partition(".")
        # a key of another section, or a report key this command does not take (a misspelled
        # one is named with the nearest keys below)
        if section != "eval" or not name or (name in config.eval and name not in keys):
            listed = ", ".join(f"config.eval.{k}" for k in keys)
            raise ValueError(
                f"--config.{key}: `iml {args.command}` trains nothing and takes only the "
                f"report's settings ({listed}); `iml reproduce` and `iml sweep` take the other keys"
            )
        names[name] = f"config.eval.{name}"
    config_lib.apply_overrides(config, args.overrides)
    return {name: config.eval[name] for name in names}, names


def load_config(args: argparse.Namespace) -> ml_collections.ConfigDict:
    """The config of :func:`load_config_with_names`."""
    return load_config_with_names(args)[0]


def load_config_with_names(
    args: argparse.Namespace,
) -> tuple[ml_collections.ConfigDict, dict[str, str]]:
    """The config of ``iml reproduce`` or ``iml sweep``, locked: the default (or ``--config
    FILE``), then the ``--config.KEY=VALUE`` overrides in order, then the named options
    (:data:`SHORTCUTS`); and how messages name its keys: the flag of a key that a flag set, or
    that nothing did; ``config.KEY`` where a file or ``--config.KEY`` did.

    Raises:
      FileNotFoundError: for a ``--config`` file that does not exist.
      ValueError: naming the flag, for a key that the config does not have (with the nearest
        ones) or a value of another type than the key's.
    """

    if getattr(args, "command", "reproduce") == "sweep":
        default, options = sweep_config, shortcuts("rows")
    else:
        default, options = default_config, shortcuts("images")
    overrides = list(getattr(args, "overrides", ()))
    for key, text in overrides:
        if key == "plan.seeds":
            _check_seeds_literal(text)
    config = config_lib.load_config(args.config, overrides, default=default)
    overridden = {key for key, _ in overrides}
    names = {}
    for option, key in options.items():
        flag = "--" + option.replace("_", "-")
        value = getattr(args, option)
        if value is not None:
            if key == "loss.betas":
                value = _numbers(flag, value)
            elif key == "plan.seeds":
                value = _member_seeds(flag, value)
            config_lib.override(config, key, value, flag=flag)
        if value is not None or not (args.config or key in overridden):
            names[key] = flag
    return config, names


def _numbers(flag: str, values: Sequence[str]) -> tuple[float, ...]:
    """The numbers of an option that takes several, each given alone or comma-separated
    (``--betas 0.5 0.9``, ``--betas 0.5,0.9``)."""
    text = " ".join(values)
    try:
        return tuple(float(v) for v in text.replace(",", " ").split())
    except ValueError:
        raise ValueError(
            f"{flag} must be numbers, space- or comma-separated, got {text!r}"
        ) from None


def _member_seeds(flag: str, values: Sequence[int]) -> tuple[int, ...]:
    """The seeds of ``--seeds``: one value ``N`` counts them (``0..N-1``), several are the seeds
    themselves."""
    if len(values) == 1:
        if values[0] < 1:
            raise ValueError(
                f"{flag} {values[0]}: one value is a number of seeds (0..N-1) and must be at "
                "least 1; to name the seeds themselves, give several"
            )
        return tuple(range(values[0]))
    return tuple(values)


def _check_seeds_literal(text: str | None) -> None:
    """``--config.plan.seeds=N`` with one number: a count on ``--seeds``, but the key holds the
    seeds themselves, so the number alone is refused rather than read as the one seed ``N``."""

    value = parse_value(text or "")
    if isinstance(value, int) and not isinstance(value, bool):
        count = f"--seeds {value} for the seeds 0..{value - 1}, or " if value >= 1 else ""
        raise ValueError(
            f"--config.plan.seeds={text}: the key holds the seeds themselves; use {count}"
            f"--config.plan.seeds='({value},)' for the seed {value} alone"
        )
