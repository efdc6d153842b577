"""Saving and resuming ensemble training: :class:`EnsembleCheckpointer`, numbered
``(state, metadata)`` checkpoints of one directory through orbax, safe against a crash during a
save."""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from iml import _validation as V

__all__ = ["EnsembleCheckpointer"]

# Orbax writes each checkpoint into a temporary directory and renames it only once every file is
# written, and its manager lists only finalized steps: a run killed during a save leaves nothing a
# restart would trust, and the next manager of the folder removes the leftover.


class EnsembleCheckpointer:
    """Saves and restores ``(state, metadata)`` pairs under numbered steps of one directory.

    Args:
      directory: the checkpoint folder (created if missing).
      max_to_keep: how many of the newest checkpoints to keep.
    """

    def __init__(self, directory: str | os.PathLike, max_to_keep: int = 2) -> None:
        V.check_count("max_to_keep", max_to_keep)
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
