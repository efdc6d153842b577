"""iml._io: a writer killed at any moment leaves the old file or the new one, whole."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from iml._io import atomic_write_bytes, atomic_write_text

ROOT = Path(__file__).resolve().parents[1]


def _version_of(data: bytes, size: int) -> int:
    """Which version a file of ``size`` repeated 8-byte words holds; raises if it is mixed."""
    words = np.frombuffer(data, dtype=np.int64)
    assert words.size == size, f"partial file: {words.size} of {size} words"
    assert (words == words[0]).all(), "the file mixes two versions"
    return int(words[0])


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.15, 0.4, 0.9])
def test_killed_overwriter_leaves_the_old_or_the_new_file_whole(tmp_path, delay):
    # A child overwrites one 16 MB file again and again, alternating two versions (constants);
    # killed mid-way, the file holds exactly one version, complete.
    size = 2_000_000
    path = tmp_path / "result.bin"
    script = textwrap.dedent(
        f"""
        import numpy as np
        from iml._io import atomic_write_bytes
        versions = [np.full({size}, i, dtype=np.int64).tobytes() for i in (1, 2)]
        for i in range(100_000):
            atomic_write_bytes({str(path)!r}, versions[i % 2])
        """
    )
    atomic_write_bytes(path, np.zeros(size, dtype=np.int64).tobytes())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", script], env=env)
    start = path.stat().st_mtime_ns
    deadline = time.time() + 60
    while time.time() < deadline and path.stat().st_mtime_ns == start:
        time.sleep(0.01)  # wait for the child's first rename, then let it run on
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.wait()
    version = _version_of(path.read_bytes(), size)
    assert version >= 1  # the child got past its first write: the kill hit a running writer
    # Only the result and, at most, the temporary of the write that was cut short are left.
    others = [p.name for p in tmp_path.iterdir() if p != path]
    assert len(others) <= 1 and all(n.startswith(".result.bin.") for n in others), others


def test_text_is_written_as_utf8(tmp_path):
    atomic_write_text(tmp_path / "a" / "table.md", "| β | ECE |\n")
    assert (tmp_path / "a" / "table.md").read_bytes() == "| β | ECE |\n".encode()


def test_file_stem_keeps_a_keys_letters_digits_and_signs():
    from iml._io import file_stem

    assert file_stem("B[8,8]=10") == "B_8_8_=10"
    assert file_stem("w[8]=10") == "w_8_=10"
    assert file_stem("0.9") == "0.9"
    assert file_stem("[ ]") == "loss"
