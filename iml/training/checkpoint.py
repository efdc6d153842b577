"""Crash-safe checkpoints of an ensemble's train state, through orbax.

Orbax writes each checkpoint into a temporary directory and renames it to its final name only
once every file is written (its atomic finalize), and the manager lists only finalized steps; a
run killed in the middle of a save therefore leaves nothing a restart would trust, and the
leftover temporary directory is removed when the next manager opens the folder.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp

__all__ = ["EnsembleCheckpointer"]


class EnsembleCheckpointer:
    """Saves and restores ``(state, metadata)`` pairs under numbered steps of one directory.

    Args:
      directory: the checkpoint folder (created if missing).
      max_to_keep: how many of the newest checkpoints to keep.
    """

    def __init__(self, directory: str | os.PathLike, max_to_keep: int = 2) -> None:
        if max_to_keep < 1:
            raise ValueError(f"max_to_keep must be >= 1, got {max_to_keep}")
        self.directory = os.path.abspath(os.fspath(directory))
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True, enable_async_checkpointing=False
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        """The newest finalized step, or ``None`` when there is none."""
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        """Every finalized step kept in the directory, oldest first."""
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any, metadata: dict[str, Any]) -> None:
        """Writes ``state`` (a pytree of arrays) and JSON ``metadata`` as ``step``, then waits."""
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
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract_state)
        args = ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), metadata=ocp.args.JsonRestore()
        )
        restored = self._manager.restore(step, args=args)
        return restored["state"], restored["metadata"]

    def close(self) -> None:
        """Waits for pending writes and releases the manager."""
        self._manager.wait_until_finished()
        self._manager.close()
