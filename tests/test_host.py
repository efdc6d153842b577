"""Tests for iml.training.host: glibc keeps freed memory for the next allocation."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from iml.training import host

# Allocates, touches and frees a 256 MB block four times in a fresh process, and reports the page
# faults of the last three rounds (the first may grow the heap).
_PROBE = textwrap.dedent(
    """
    import importlib.util, json, resource, sys
    import numpy as np
    # the module alone, without the package (which imports JAX)
    spec = importlib.util.spec_from_file_location("host", sys.argv[2])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reuse_freed_memory = module.reuse_freed_memory
    applied = reuse_freed_memory() if sys.argv[1] == "reuse" else None
    again = reuse_freed_memory() if sys.argv[1] == "reuse" else None
    def touch():
        block = np.ones(64 * 2**20, np.float32)
        assert float(block[::4096].sum()) == block.size // 4096
    touch()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        touch()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(json.dumps({"applied": applied, "again": again, "faults": faults}))
    """
)


def _probe(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode, host.__file__],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(host._glibc() is None, reason="glibc's mallopt only")
def test_reused_memory_is_not_faulted_in_again():
    reused, system = _probe("reuse"), _probe("system")
    assert reused["applied"] is True and reused["again"] is True
    # 3 x 256 MB: 196,608 pages of 4 KiB, or 384 transparent huge pages; reused pages fault none
    assert reused["faults"] < 100, reused
    assert system["faults"] > 300, system


def test_without_glibc_nothing_is_changed(monkeypatch):
    monkeypatch.setattr(host, "_glibc", lambda: None)
    monkeypatch.setattr(host, "_applied", False)
    assert host.reuse_freed_memory() is False
    assert host._applied is False


def test_a_refused_setting_is_an_error(monkeypatch):
    class RefusingLibc:
        @staticmethod
        def mallopt(param, value):
            return 0

    monkeypatch.setattr(host, "_glibc", lambda: RefusingLibc)
    monkeypatch.setattr(host, "_applied", False)
    with pytest.raises(RuntimeError, match="M_ARENA_MAX"):
        host.reuse_freed_memory()
