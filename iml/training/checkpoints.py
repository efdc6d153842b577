"""Saving and resuming ensemble training: :class:`EnsembleCheckpointer`, numbered
``(state, metadata)`` checkpoints of one directory through orbax (or, for a state that one
process of several saves alone, as one atomically written ``.npz`` file per step), safe against a
crash during a save."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from iml import _validation as V
from iml._io import atomic_write_bytes

__all__ = ["EnsembleCheckpointer"]

# Orbax writes each checkpoint into a temporary directory and renames it only once every file is
# written, and its manager lists only finalized steps: a run killed during a save leaves nothing a
# restart would trust, and the next manager of the folder removes the leftover.


class EnsembleCheckpointer:
    """Saves and restores ``(state, metadata)`` pairs under numbered steps of one directory.

    Args:
      directory: the checkpoint folder (created if missing).
      max_to_keep: how many of the newest checkpoints to keep.
      local: this process alone saves and restores: a state on its own devices, while the other
        processes of a run on several train other states (orbax expects every process at each
        save, and saves no array of one process's devices alone). Each step is then one
        ``STEP.npz`` file of the state's leaves and the metadata, written atomically.
    """

    def __init__(
        self, directory: str | os.PathLike, max_to_keep: int = 2, *, local: bool = False
    ) -> None:
        V.check_count("max_to_keep", max_to_keep)
        self.directory = os.path.abspath(os.fspath(directory))
        self._keep = max_to_keep
        self._manager = None
        if local:
            os.makedirs(self.directory, exist_ok=True)
            return
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True, enable_async_checkpointing=False
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def _file(self, step: int) -> Path:
        return Path(self.directory) / f"{step}.npz"

    def latest_step(self) -> int | None:
        """The newest finalized step, or ``None`` when there is none."""
        if self._manager is None:
            return max(self.all_steps(), default=None)
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        """Every finalized step kept in the directory, oldest first."""
        if self._manager is None:
            return sorted(int(p.stem) for p in Path(self.directory).glob("*.npz")
                          if p.stem.isdigit())  # fmt: skip
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any, metadata: dict[str, Any]) -> None:
        """Writes ``state`` (a pytree of arrays) and JSON ``metadata`` as ``step``, then waits."""
        if self._manager is None:
            buffer = io.BytesIO()
            leaves = {f"leaf_{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(state))}
            np.savez(buffer, metadata=np.asarray(json.dumps(metadata)), **leaves)
            atomic_write_bytes(self._file(step), buffer.getvalue())
            for old in self.all_steps()[: -self._keep]:
                self._file(old).unlink(missing_ok=True)
            return
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(state), metadata=ocp.args.JsonSave(metadata)
        )
        self._manager.save(step, args=args, force=True)
        self._manager.wait_until_finished()

    def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict[str, Any]]:
        """Reads ``step`` into the structure, shapes and shardings of ``abstract_state``.

        Args:
          step: a finalized step (see :meth:`latest_step`).
          abstract_state: a pytree of ``jax.ShapeDtypeStruct`` with shardings, or of arrays.

        Returns:
          ``(state, metadata)``.
        """
        if self._manager is None:
            leaves, tree = jax.tree.flatten(abstract_state)
            with np.load(self._file(step), allow_pickle=False) as data:
                metadata = json.loads(str(data["metadata"]))
                values = [data[f"leaf_{i}"] for i in range(len(leaves))]
            placed = [jax.device_put(v, a.sharding) for v, a in zip(values, leaves, strict=True)]
            return jax.tree.unflatten(tree, placed), metadata
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract_state)
        args = ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), metadata=ocp.args.JsonRestore()
        )
        restored = self._manager.restore(step, args=args)
        return restored["state"], restored["metadata"]

    def close(self) -> None:
        """Waits for pending writes and releases the manager."""
        if self._manager is None:
            return
        self._manager.wait_until_finished()
        self._manager.close()
