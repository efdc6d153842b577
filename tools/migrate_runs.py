"""Rewrite stored runs to the manifest schema that ``iml`` reads (:data:`iml.pipeline.SCHEMA`).

``iml`` reads one manifest layout: ``{"schema": N, "kind": "images" | "table", "config": {...}}``
with the config in sections. Runs recorded by earlier versions are rewritten here, once, so that
the library carries no reader of old layouts. Each step takes a manifest from one schema to the
next; a manifest without ``schema`` is schema 1, in any of the layouts that version wrote:

- a run on images with a flat config (``{"dataset": "digits", "betas": [...], ...}``), whose keys
  move to their sections (:data:`FLAT_KEYS`), retired keys dropped (:data:`RETIRED_KEYS`);
- a run on images in sections that lacks keys added later, which take the values those runs ran
  at (:data:`IMAGES_DEFAULTS`, the schema-2 defaults);
- a sweep recorded flat (``data_sha256``, ``betas``, ``seeds``, ``train`` with the model), or in
  sections without ``train.min_lr`` (the learning-rate floor, 0 in every such sweep);
- a sweep's report files named ``sweep_table.json``, ``scores.npz`` and ``sweep_table.md``.

Schema 2 to 3: the config's keys take the names of the fields they set (``train.epochs`` ->
``train.max_epochs``, ``train.min_learning_rate`` -> ``train.min_lr``), one name for the unit of
work (``train.betas_per_chunk`` -> ``train.losses_per_batch``), and the loss's parameters live in
an open section (``loss.gamma`` -> ``loss.params.gamma``, kept only for a loss that takes it).

Schema 3 to 4: the keys that lay out the members (``seeds``, ``losses_per_batch``,
``members_per_batch``, ``memory_budget_bytes``, ``checkpoint``) move from ``train`` to a ``plan``
section, so that ``train`` holds :class:`iml.training.TrainConfig` fields only.

Schema 4 to 5: ``train.l2_choice`` records how ``l2 = "auto"`` chose the ridge; every earlier
run on a table with ``l2 = "auto"`` chose the level of lowest validation loss (``"lowest_loss"``;
a sweep at a fixed ridge records no choice), and a run on images, which reads no ridge choice,
takes the schema's default (``"least_penalty"``).

Schema 5 to 6: a run on a table records its loss as :meth:`iml.grids.LossGrid.to_config` writes
it, the class weights under the loss's own parameter name and as the grid keys them: the
beta-weighted log loss's ``{"name": "log", "betas": [...]}`` becomes ``{"name": "log", "beta":
[...]}``, and the class weights of another binary loss (a focal grid's ``alpha``), which schema 5
wrote as float32 values (``0.009999999776482582``), take the shortest decimals that the grid's
keys were (``0.01``); a plugin's loss needs its plugin loaded (the run's recorded plugins are,
where found; else ``--import MODULE_OR_FILE``). Runs on images, whose loss is their config's
section, are unchanged.

A ``revealed.json`` (:mod:`iml.pipeline.reveal`) records its run's kind as the manifest does:
``"kind": "reproduce"`` becomes ``"images"`` and ``"sweep"`` becomes ``"table"``, the kinds of
the runs those records were read from.

Usage, from the repository root (a folder is searched for ``manifest.json`` files,
``*_manifest.json`` copies and ``revealed.json`` records; ``--check`` rewrites nothing and exits 1
if anything is out of date)::

    python -m tools.migrate_runs docs/results
    python -m tools.migrate_runs runs/old-sweep --check
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from iml._io import atomic_write_bytes
from iml.pipeline import SCHEMA

#: Where each key of the flat config of runs on images lives in sections.
FLAT_KEYS = {
    "dataset": "data.name",
    "data_dir": "data.data_dir",
    "manual_dir": "data.manual_dir",
    "max_examples": "data.max_examples",
    "image_size": "data.image_size",
    "n_folds": "data.n_folds",
    "n_val_folds": "data.n_val_folds",
    "n_test_folds": "data.n_test_folds",
    "rotations": "data.rotations",
    "fold_seed": "data.fold_seed",
    "model": "model.name",
    "weights": "model.weights",
    "conv_impl": "model.conv_impl",
    "betas": "loss.betas",
    "seeds": "train.seeds",
    "members_per_batch": "train.members_per_batch",
    "epochs": "train.epochs",
    "batch_size": "train.batch_size",
    "learning_rate": "train.learning_rate",
    "patience": "train.patience",
    "plateau_patience": "train.plateau_patience",
    "flip": "train.flip",
    "normalize": "train.normalize",
    "checkpoint": "train.checkpoint",
    "n_bins": "eval.n_bins",
    "n_bootstrap": "eval.n_bootstrap",
    "report_seed": "eval.report_seed",
}
#: Keys of the flat config that were retired, with the only value runs held them at.
RETIRED_KEYS = {"csv_path": "", "csv_target": ""}

#: Every key of a run on images at schema 2, with the value a run that did not record it ran at.
IMAGES_DEFAULTS: dict[str, dict[str, Any]] = {
    "data": {"classes": "binary", "csv": "", "data_dir": "", "delimiter": "", "fold_seed": 0,
             "image_size": 4, "manual_dir": "", "max_examples": 0, "n_folds": 10,
             "n_test_folds": 1, "n_val_folds": 2, "name": "digits", "positive": "",
             "rotations": [], "target": ""},
    "eval": {"average": "score", "figures": ["png", "pdf"], "n_bins": 10, "n_bootstrap": 200,
             "report_seed": 0},
    "loss": {"beta_max": 0.99, "beta_min": 0.01, "betas": [0.5, 0.9, 0.99], "gamma": 2.0,
             "n_betas": 64, "name": "log", "weights": ""},
    "model": {"conv_impl": "", "hidden": 32, "name": "densenet_small", "weights": ""},
    "train": {"batch_size": 16, "betas_per_chunk": 0, "checkpoint": True, "epochs": 3,
              "eval_batch_size": 64, "flip": False, "l2": "auto",
              "l2_grid": [1e-06, 1e-05, 0.0001, 0.001, 0.01, 0.1, 1.0], "l2_scale": "paper",
              "learning_rate": 0.001, "members_per_batch": 0, "memory_budget_bytes": 0,
              "min_learning_rate": 0.0, "normalize": "imagenet", "patience": 5,
              "plateau_patience": 1, "seeds": [0], "solver": "auto", "standardize": True},
}  # fmt: skip

#: The report settings a flat sweep record left out at these values.
FLAT_SWEEP_EVAL = {"n_bins": 10, "average": "score", "n_bootstrap": 200, "report_seed": 0}
#: A sweep's report files under the names an earlier layout gave them, and their names now.
REPORT_NAMES = {
    "sweep_table.json": "table.json",
    "scores.npz": "ensemble_scores.npz",
    "sweep_table.md": "table.md",
}
#: The names of the files that hold a run's manifest.
MANIFESTS = ("manifest.json", "*_manifest.json")
#: A ``revealed.json``'s kind under the command that wrote it, and as the manifest names it.
REVEALED_KINDS = {"reproduce": "images", "sweep": "table"}


def _is_sweep(config: Mapping[str, Any]) -> bool:
    # schema 1 told the kinds apart by the data digest a sweep records
    data = config.get("data")
    return "data_sha256" in config or (isinstance(data, Mapping) and "sha256" in data)


def _images_to_2(config: Mapping[str, Any]) -> dict[str, Any]:
    if any(isinstance(v, Mapping) for v in config.values()):
        values = {f"{s}.{k}": v for s, keys in config.items() for k, v in keys.items()}
    else:
        values = {FLAT_KEYS.get(k, k): v for k, v in config.items()}
    for key, only in RETIRED_KEYS.items():
        if key in values and (held := values.pop(key)) != only:
            raise ValueError(f"config.{key}={held!r}: a retired key, read only at {only!r}")
    out = copy.deepcopy(IMAGES_DEFAULTS)
    for key, value in values.items():
        section, _, name = key.partition(".")
        if section == "distributed":  # how many processes ran it: not part of the record
            continue
        if section not in out or name not in out[section]:
            raise ValueError(f"config.{key}: not a key of a run on images")
        out[section][name] = value
    return out


def _sweep_to_2(config: Mapping[str, Any]) -> dict[str, Any]:
    record = json.loads(json.dumps(dict(config)))
    if "data_sha256" in record:  # the flat form
        source = record.pop("data", {})
        data = dict(source) if isinstance(source, Mapping) else {"source": source}
        data |= {key: record.pop(key) for key in ("n_folds", "fold_seed") if key in record}
        data["sha256"] = record.pop("data_sha256")
        settings = record.pop("train", {})
        model = {
            new: settings.pop(old)
            for old, new in (("model", "name"), ("hidden", "hidden"))
            if old in settings
        }
        sections: dict[str, Any] = {"data": data, "model": model}
        if "betas" in record:  # the beta-weighted log loss
            sections["loss"] = {"name": "log", "betas": record.pop("betas")}
        elif "loss" in record:
            sections["loss"] = record.pop("loss")
        train = {key: record.pop(key) for key in ("seeds", "betas_per_chunk") if key in record}
        sections["train"] = {**train, **settings}
        sections["eval"] = {k: record.pop(k, v) for k, v in FLAT_SWEEP_EVAL.items()}
        if "store" in record:
            sections["store"] = record.pop("store")
        record = {**sections, **record}
    record["train"].setdefault("min_lr", 0.0)
    return record


def migrate_manifest(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest at :data:`SCHEMA`: ``manifest`` itself where it is at that schema already.

    Raises:
      ValueError: for a schema newer than this tool's, or a config that no step reads.
    """
    out = json.loads(json.dumps(dict(manifest)))
    schema = out.get("schema", 1)
    if schema > SCHEMA:
        raise ValueError(f"manifest schema {schema} is newer than this iml's ({SCHEMA})")
    if schema == 1:
        config = out.get("config", {})
        sweep = _is_sweep(config)
        out["config"] = _sweep_to_2(config) if sweep else _images_to_2(config)
        out = {"schema": 2, "kind": "table" if sweep else "images", **out}
    if out["schema"] == 2:
        out["config"] = _to_3(out["config"], out["kind"])
        out["schema"] = 3
    if out["schema"] == 3:
        out["config"] = _to_4(out["config"])
        if isinstance(out.get("command"), list):  # the recorded command, rerunnable as it reads
            out["command"] = [_option_4(arg) for arg in out["command"]]
        out["schema"] = 4
    if out["schema"] == 4:
        out["config"] = _to_5(out["config"], out["kind"])
        out["schema"] = 5
    if out["schema"] == 5:
        if out["kind"] == "table":
            out["config"] = _to_6(out["config"])
        out["schema"] = 6
    return out


#: The keys that schema 3 renamed, in the sections of either kind.
RENAMED_3 = {
    "epochs": "max_epochs",
    "min_learning_rate": "min_lr",
    "betas_per_chunk": "losses_per_batch",
}


def _takes_gamma(loss: str) -> bool:
    # imported here: the registry of losses (JAX), which only this step needs
    from iml.losses import lookup

    try:
        return "gamma" in lookup(loss).event_ndims
    except (KeyError, ValueError):  # a plugin's loss, not loaded: the focal family's parameter
        return "focal" in loss


def _to_3(config: Mapping[str, Any], kind: str) -> dict[str, Any]:
    out = json.loads(json.dumps(dict(config)))
    out["train"] = {RENAMED_3.get(k, k): v for k, v in out["train"].items()}
    if kind == "images":
        gamma = out["loss"].pop("gamma")
        out["loss"]["params"] = {"gamma": gamma} if _takes_gamma(out["loss"]["name"]) else {}
    return out


#: The keys that schema 4 moved from ``train`` to ``plan``: how members are laid out, which
#: :class:`iml.training.TrainConfig` does not take.
PLAN_KEYS_4 = ("seeds", "losses_per_batch", "members_per_batch", "memory_budget_bytes",
               "checkpoint")  # fmt: skip


def _to_4(config: Mapping[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(dict(config)))
    train = out.get("train")
    if not isinstance(train, dict):
        raise ValueError(f"config.train: a section of schema 3, got {train!r}")
    if "plan" in out:  # a caller's own fact of that name, which the new section would hide
        raise ValueError(
            f"config.plan={out['plan']!r}: schema 4 names a section so; rename this fact first"
        )
    plan = {key: train.pop(key) for key in PLAN_KEYS_4 if key in train}
    sections = list(out)
    at = sections.index("train") + 1  # the new section follows train, as in the schema
    items = [*[(k, out[k]) for k in sections[:at]], ("plan", plan),
             *[(k, out[k]) for k in sections[at:]]]  # fmt: skip
    return dict(items)


def _option_4(arg: Any) -> Any:
    for key in PLAN_KEYS_4:
        if isinstance(arg, str) and arg.startswith(f"--config.train.{key}"):
            rest = arg.removeprefix(f"--config.train.{key}")
            if rest == "" or rest.startswith("="):
                return f"--config.plan.{key}{rest}"
    return arg


def _to_5(config: Mapping[str, Any], kind: str) -> dict[str, Any]:
    out = json.loads(json.dumps(dict(config)))
    train = out.get("train")
    if not isinstance(train, dict):
        raise ValueError(f"config.train: a section of schema 4, got {train!r}")
    if kind == "table" and train.get("l2") != "auto":
        return out  # a fixed ridge: nothing was chosen (a sweep records no choice then)
    # runs on images read no ridge choice: they hold the schema's default, as every key they
    # do not read
    added = {**train, "l2_choice": "lowest_loss" if kind == "table" else "least_penalty"}
    out["train"] = dict(sorted(added.items())) if list(train) == sorted(train) else added
    return out


def _class_weight(loss: str) -> str | None:
    # imported here: the registry of losses (JAX), which only this step needs
    from iml.losses import lookup, registered

    if loss not in registered():  # its weights' keys depend on what its record says of them
        raise ValueError(
            f"config.loss.name={loss!r}: a loss not registered in this process; load the plugin "
            "that registers it (python -m tools.migrate_runs --import MODULE_OR_FILE RUN)"
        )
    return lookup(loss).class_weight


def _to_6(config: Mapping[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(dict(config)))
    loss = out.get("loss")
    if not isinstance(loss, dict):  # a callable's name: nothing recorded to rewrite
        return out
    if loss.get("name") == "log" and set(loss) == {"name", "betas"}:  # as schema 5 wrote it
        out["loss"] = {"name": "log", "beta": loss["betas"]}
        return out
    weight = _class_weight(str(loss.get("name")))
    values = loss.get(weight) if weight is not None else None
    if not isinstance(values, list):
        return out
    others = [v for k, v in loss.items() if k not in ("name", weight)]
    if all(isinstance(v, list) and len(set(v)) <= 1 for v in others):  # keyed by its weights
        from iml.grids import _float32_decimals  # the decimals schema 5's keys were made of

        loss[weight] = _float32_decimals(np.asarray(values)).tolist()
    return out


def manifests(paths: Iterable[str | Path], names: tuple[str, ...] = MANIFESTS) -> list[Path]:
    """The records of ``paths``: each file itself (a manifest under any name; a revealed record
    only as ``revealed.json``), and in each folder every file below it whose name matches one of
    ``names`` (the manifests by default), sorted."""
    found: set[Path] = set()
    for path in map(Path, paths):
        if path.is_file():
            revealed = path.name == "revealed.json"
            found |= {path} if revealed == (names == ("revealed.json",)) else set()
        elif path.is_dir():
            found |= {p for name in names for p in path.rglob(name)}
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return sorted(found)


def migrate_revealed(path: Path, write: bool = True) -> list[str]:
    """Give a ``revealed.json`` the kind of its run as the manifest names it; returns what
    changed (``[]``: nothing), writing it only with ``write``. The rest of the file is kept as
    written, byte for byte."""
    text = path.read_text()
    kind = json.loads(text).get("kind")
    if kind not in REVEALED_KINDS:
        return []
    old, new = f'"kind": "{kind}"', f'"kind": "{REVEALED_KINDS[kind]}"'
    if old not in text:
        raise ValueError(f"{path}: its kind is not written as {old}; rewrite it by hand")
    if write:
        atomic_write_bytes(path, text.replace(old, new, 1).encode())
    return [f"{path}: kind {kind} -> {REVEALED_KINDS[kind]}"]


def migrate_run(manifest_path: Path, write: bool = True, imported: Iterable[str] = ()) -> list[str]:
    """Bring one manifest (and, for a run's ``manifest.json``, its report files) to the current
    schema; returns what changed (``[]``: nothing), writing it only with ``write``. The plugins
    its record names are loaded first, but those in ``imported`` (already loaded)."""
    manifest = json.loads(manifest_path.read_text())
    changes = []
    if manifest.get("schema", 1) < SCHEMA:  # the plugins its record names, where they are found
        from iml.plugins import import_recorded

        import_recorded(manifest.get("plugins"), supplied=imported, run=str(manifest_path))
    migrated = migrate_manifest(manifest)
    if migrated != manifest:
        changes.append(f"{manifest_path}: schema {manifest.get('schema', 1)} -> {SCHEMA}")
        if write:
            atomic_write_bytes(manifest_path, json.dumps(migrated, indent=2).encode())
    if manifest_path.name == "manifest.json":
        root = manifest_path.parent
        for old, new in REPORT_NAMES.items():
            if (root / old).is_file() and not (root / new).exists():
                changes.append(f"{root / old} -> {new}")
                if write:
                    (root / old).rename(root / new)
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.migrate_runs", description=__doc__)
    parser.add_argument("paths", nargs="+", help="run folders, manifests, or folders of runs")
    parser.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 if stale")
    from iml.commands.plugins import add_import_argument
    from iml.plugins import import_plugin

    add_import_argument(parser)  # a plugin that registers a run's loss
    args = parser.parse_args(argv)

    for plugin in args.imports:
        import_plugin(plugin)
    changes = [c for path in manifests(args.paths)
               for c in migrate_run(path, not args.check, args.imports)]  # fmt: skip
    changes += [c for path in manifests(args.paths, ("revealed.json",))
                for c in migrate_revealed(path, not args.check)]  # fmt: skip
    done = f"every manifest is at schema {SCHEMA}; every revealed.json names its run's kind"
    print("\n".join(changes) or done)
    return 1 if args.check and changes else 0


if __name__ == "__main__":
    sys.exit(main())
