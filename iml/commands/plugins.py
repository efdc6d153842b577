"""The plugins of a command (:mod:`iml.plugins`): those installed packages register (entry points
of the group ``iml.plugins``), those given with ``--import MODULE_OR_FILE``, and, for a command
reading stored runs (``--run``), those each run's manifest records.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from iml import plugins
from iml.losses import registered
from iml.pipeline.store import SCHEMA, RunStore

__all__ = ["add_import_argument", "load_command_plugins"]


def add_import_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--import MODULE_OR_FILE`` (repeatable) to a command's parser."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE_OR_FILE",
        help="a plugin to load first: a module on the Python path, or a .py file, that "
        "registers losses, models or datasets (repeatable)",
    )


def load_command_plugins(args: argparse.Namespace) -> None:
    """Load the plugins of the command ``args`` runs: the installed packages' entry points, then
    each ``--import`` in order, then the plugins each stored run of ``--run`` records (those not
    given with ``--import``), and check that each run's loss is registered.

    Raises:
      iml.plugins.PluginError: naming a plugin that cannot be found or fails to import, and for
        a run's recorded plugin, how to supply it.
      ValueError: for a run whose loss no loaded plugin registers, naming the loss and
        ``--import``.
    """
    plugins.load_plugins()
    imports = list(getattr(args, "imports", None) or ())
    for spec in imports:
        try:
            plugins.import_plugin(spec)
        except plugins.PluginError as err:
            raise plugins.PluginError(f"--import: {err}") from err
    runs = getattr(args, "run", None)
    for run in [runs] if isinstance(runs, str) else runs or ():
        manifest = _manifest(run)
        if manifest is None:  # the command names what the folder lacks
            continue
        try:
            plugins.import_recorded(manifest.get("plugins"), supplied=imports, run=str(run))
        except plugins.PluginError as err:
            raise plugins.PluginError(f"--run: {err}") from err
        loss = _loss_name(manifest.get("config"))
        if loss is not None and loss not in registered():
            raise ValueError(
                f"--run: {run} was made with the loss {loss!r}, which no loaded plugin "
                "registers: give the module or file that registers it with --import "
                "MODULE_OR_FILE, or install its package (entry points of iml.plugins)"
            )


def _manifest(run: str | Path) -> dict[str, Any] | None:
    """A run's manifest, or None where the folder holds none of this schema (the command then
    names what the folder lacks, or how to migrate it)."""
    path = Path(run) / RunStore.MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("schema") == SCHEMA else None


def _loss_name(config: Any) -> str | None:
    """The name of the loss a run's recorded config trained with; None where it records none
    by name (a callable loss)."""
    loss = config.get("loss") if isinstance(config, Mapping) else None
    name = loss.get("name") if isinstance(loss, Mapping) else None
    return name if isinstance(name, str) and name != "callable" else None
