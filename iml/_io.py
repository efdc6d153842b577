"""Files written atomically: readers see the old file or all of the new one, never a part.

Every file ``iml`` writes goes through :func:`atomic_write_bytes`: the bytes go to a temporary file
in the same folder, are flushed to disk, and the temporary is renamed over the final name. A
process killed at any moment (``kill -9`` included) leaves the previous file, or none, or the
complete new one.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "file_stem"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file, or all of the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates the file readable by its owner only; give it the usual permissions.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    # Make the rename itself durable.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, as :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def file_stem(key: str) -> str:
    """A file name for a table key (``"B[8,8]=10"`` gives ``"B_8_8_=10"``): runs of characters
    other than letters, digits, ``.``, ``=`` and ``-`` become ``_``."""
    return re.sub(r"[^\w.=-]+", "_", key).strip("_") or "loss"
