"""Meshes and devices (``iml.training.sharding``): the CPU cores as devices, before and after JAX
starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest
from _training_helpers import (
    FAST_COMPILE,
)

from iml.training import (
    use_cpu_cores_as_devices,
)

TESTS = Path(__file__).resolve().parents[1]


ROOT = TESTS.parent


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["XLA_FLAGS"] = FAST_COMPILE  # the helper adds its devices
    return env


@pytest.mark.slow
def test_use_cpu_cores_as_devices_before_and_after_jax_starts():
    # In this process JAX has started (8 devices from conftest): nothing changes.
    assert len(jax.devices("cpu")) == 8
    assert use_cpu_cores_as_devices() == 8 == len(jax.devices("cpu"))
    code = (
        "import os, jax; from iml.training import use_cpu_cores_as_devices; "
        "n = use_cpu_cores_as_devices(); "
        "assert n == len(os.sched_getaffinity(0)) == len(jax.devices('cpu')), n; print(n)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_worker_env(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) == len(os.sched_getaffinity(0))
