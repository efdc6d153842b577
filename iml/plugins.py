"""Plugins: a user's losses, models and datasets, registered by code outside ``iml/``.

A plugin is a Python module that registers what it adds when it is imported
(:func:`iml.losses.register`, :func:`iml.models.register_model`,
``iml.data.datasets.DATASETS``). It reaches ``iml`` in one of two ways:

* :func:`import_plugin` (``iml COMMAND --import MODULE_OR_FILE``): a dotted module name on the
  Python path, or the path of a ``.py`` file, loaded as the module :func:`file_module_name`
  names (the same file is always the same module, and is executed once per process);
* an installed package's entry point in the group ``iml.plugins`` (:data:`ENTRY_POINT_GROUP`),
  loaded by :func:`load_plugins` (once per process; the command line calls it as it starts). An
  entry point names a module (``name = "package.module"``), imported, or a function of no
  arguments in it (``name = "package.module:register"``), imported and called.

Every plugin loaded so far is listed by :func:`plugins_record`, which a run's manifest stores
under ``"plugins"`` (:meth:`iml.pipeline.store.RunStore.open_run`), and :func:`import_recorded`
loads a manifest's plugins again, for ``iml figures`` and ``iml reveal`` of a stored run.

A plugin that cannot be found or fails to import raises :class:`PluginError` (a
``ValueError``), naming it and the exception. Importing a plugin should run no JAX computation
(``iml``'s own modules run none): the command line loads plugins before a run joins its other
processes (:mod:`iml.pipeline.distributed`), which must come before JAX's first computation.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
import traceback
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "ENTRY_POINT_GROUP",
    "PluginError",
    "file_module_name",
    "import_plugin",
    "import_recorded",
    "load_plugins",
    "merge_records",
    "plugins_record",
]

#: The entry-point group through which an installed package registers its plugins.
ENTRY_POINT_GROUP = "iml.plugins"

#: The plugins imported by :func:`import_plugin`, by module name, in the order they were loaded.
_IMPORTED: dict[str, dict[str, str]] = {}
#: The entry points :func:`load_plugins` loaded, or None before it ran.
_ENTRY_POINTS: list[dict[str, str]] | None = None


class PluginError(ValueError):
    """A plugin that cannot be found, or that raised while it was imported."""


class _NotFound(PluginError):
    """A plugin module that is not on the Python path."""


def _is_file(spec: str) -> bool:
    """Whether ``--import`` was given a file's path (``.py``, or a path with a separator) rather
    than a dotted module name."""
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def file_module_name(path: str | os.PathLike) -> str:
    """The module name a plugin file is loaded as: ``iml_plugin_<stem>_<8 hex digits of the
    absolute path's SHA-1>``, the same for the same file in every process, and different for two
    files of one name in two folders."""
    resolved = Path(path).expanduser().resolve()
    stem = re.sub(r"\W", "_", resolved.stem)
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:8]
    return f"iml_plugin_{stem}_{digest}"


def _named(given: str, path: str | os.PathLike) -> str:
    """How messages name a plugin file: as given, with its absolute path where that differs."""
    return repr(given) if given == str(path) else f"{given!r} ({path})"


def _failure(what: str, err: BaseException) -> PluginError:
    """``what`` failed to import: the exception and the innermost line it was raised at."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return PluginError(f"{what} failed to import: {type(err).__name__}: {err}{where}")


def import_plugin(spec: str) -> types.ModuleType:
    """Import the plugin ``spec`` (a dotted module name, or the path of a ``.py`` file) and
    record it for :func:`plugins_record`; a plugin imported already is not executed again.

    Args:
      spec: ``"package.module"``, or ``"path/to/plugin.py"`` (relative to the working folder),
        loaded as the module :func:`file_module_name` names.

    Returns:
      The imported module.

    Raises:
      PluginError: for a file that does not exist or is not a ``.py`` file, a module that is not
        on the Python path, or a plugin that raised while it was imported (naming the plugin,
        the exception and where it was raised).
    """
    if not isinstance(spec, str) or not spec:
        raise PluginError(f"a plugin is a module name or a .py file's path, got {spec!r}")
    if not _is_file(spec):
        return _import_module(spec)
    path = Path(spec).expanduser().resolve()
    if path.suffix != ".py":
        raise PluginError(f"plugin {spec!r}: a plugin file is a .py file, got {path}")
    if not path.is_file():
        raise PluginError(f"plugin {spec!r}: file not found: {path}")
    name = file_module_name(path)
    if name not in sys.modules:
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise PluginError(f"plugin {spec!r}: {path} cannot be loaded as a module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # as `import` does: the module can find itself while it runs
        try:
            module_spec.loader.exec_module(module)
        except Exception as err:
            del sys.modules[name]
            raise _failure(f"plugin {_named(spec, path)}", err) from err
    _IMPORTED.setdefault(name, {"given": spec, "path": str(path), "module": name})
    return sys.modules[name]


def _import_module(name: str) -> types.ModuleType:
    """:func:`import_plugin` of a dotted module name."""
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and (name == err.name or name.startswith(err.name + ".")):
            raise _NotFound(
                f"plugin {name!r}: no module named {err.name!r} on the Python path (give a "
                "file's path as path/to/plugin.py)"
            ) from err
        raise _failure(f"plugin {name!r}", err) from err
    except Exception as err:
        raise _failure(f"plugin {name!r}", err) from err
    _IMPORTED.setdefault(name, {"given": name, "module": name})
    return module


def _entry_point_record(entry_point: importlib.metadata.EntryPoint) -> dict[str, str]:
    dist = getattr(entry_point, "dist", None)
    record = {"name": entry_point.name, "value": entry_point.value}
    if dist is not None:
        record.update(distribution=dist.metadata["Name"], version=dist.version)
    return record


def _describe_entry_point(record: Mapping[str, str]) -> str:
    source = ""
    if "distribution" in record:
        source = f"{record['distribution']} {record.get('version', '')}".rstrip() + ": "
    return f"plugin entry point {record['name']!r} ({source}{record['value']})"


def load_plugins() -> list[dict[str, str]]:
    """Load the plugins installed packages register in the entry-point group ``iml.plugins``
    (:data:`ENTRY_POINT_GROUP`), once per process: each entry point's module is imported, and a
    function it names (``"package.module:register"``) is called with no arguments.

    Returns:
      The entry points loaded: ``{"name", "value"}``, with ``"distribution"`` and ``"version"``
      of the package that declares each.

    Raises:
      PluginError: naming the entry point and its package, for one that raised while it was
        imported or called; the entry points are loaded again at the next call.
    """
    global _ENTRY_POINTS
    if _ENTRY_POINTS is not None:
        return list(_ENTRY_POINTS)
    loaded, seen = [], set()
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if (entry_point.name, entry_point.value) in seen:  # one package on the path twice
            continue
        seen.add((entry_point.name, entry_point.value))
        record = _entry_point_record(entry_point)
        try:
            target = entry_point.load()
            if callable(target) and not isinstance(target, types.ModuleType):
                target()
        except Exception as err:
            raise _failure(_describe_entry_point(record), err) from err
        loaded.append(record)
    _ENTRY_POINTS = loaded
    return list(loaded)


def plugins_record() -> dict[str, list[dict[str, str]]]:
    """The plugins this process has loaded, as a run's manifest stores them: ``"imports"``, each
    plugin of :func:`import_plugin` (``"given"``: as given; ``"module"``: the module's name;
    ``"path"``: a file's absolute path), and ``"entry_points"``, those of :func:`load_plugins`
    (empty where it has not run)."""
    return {
        "imports": [dict(record) for record in _IMPORTED.values()],
        "entry_points": [dict(record) for record in _ENTRY_POINTS or ()],
    }


def merge_records(*records: Mapping[str, Any] | None) -> dict[str, list[dict[str, str]]]:
    """The plugins of several :func:`plugins_record` records, each listed once (a run resumed
    with plugins its manifest does not list yet keeps both)."""
    merged: dict[str, dict[tuple, dict[str, str]]] = {"imports": {}, "entry_points": {}}
    for record in records:
        for section, items in merged.items():
            for item in (record or {}).get(section, ()):
                key = (item.get("module"), item.get("path"), item.get("name"), item.get("value"))
                items.setdefault(key, dict(item))
    return {section: list(items.values()) for section, items in merged.items()}


def import_recorded(
    record: Mapping[str, Any] | None, *, supplied: Iterable[str] = (), run: str = "the run"
) -> None:
    """Load the plugins a run's manifest records (its ``"plugins"``, :func:`plugins_record`)
    again: each plugin file from its recorded path, each module by its name, and each entry
    point from its installed package (:func:`load_plugins`). A run recorded without plugins
    (``None``) loads none.

    Args:
      record: the manifest's ``"plugins"``.
      supplied: the plugins given in their place (``--import``): a recorded file counts as given
        by a given file of the same name, a recorded module or entry point by its module's name.
      run: how messages name the run.

    Raises:
      PluginError: for a recorded plugin that cannot be found and was not supplied, naming it
        and how to supply it (``--import ...``), or one that raised while it was imported.
    """
    if not record:
        return
    supplied = [str(s) for s in supplied]
    given_files = {Path(s).name for s in supplied if _is_file(s)}
    given_modules = {s for s in supplied if not _is_file(s)}
    for item in record.get("imports", ()):
        module, path = item.get("module", ""), item.get("path")
        if module in sys.modules:  # loaded in this process already
            continue
        if path is not None:
            if Path(path).name in given_files:
                continue
            if not Path(path).is_file():
                raise PluginError(
                    f"{run} was made with the plugin {_named(item.get('given', path), path)}, "
                    f"which is not found: give it with --import PATH/{Path(path).name}"
                )
            import_plugin(path)
            continue
        if module in given_modules:
            continue
        try:
            _import_module(module)
        except _NotFound as err:
            raise PluginError(
                f"{run} was made with the plugin module {module!r}, which is not on the Python "
                f"path: install it, or give it with --import {module} (with its folder on "
                "PYTHONPATH) or --import PATH/TO/FILE.py"
            ) from err
    installed = {(e["name"], e["value"]) for e in load_plugins()}
    for item in record.get("entry_points", ()):
        module = item.get("value", "").partition(":")[0].strip()
        if (item.get("name"), item.get("value")) in installed or module in given_modules:
            continue
        package = item.get("distribution", "its package")
        raise PluginError(
            f"{run} was made with the {_describe_entry_point(item)}, which is not installed: "
            f"install {package}, or give its module with --import {module}"
        )
