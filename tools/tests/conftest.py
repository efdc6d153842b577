"""Test configuration of the diagnostics' tests: the environment ``tests/conftest.py`` sets.

Eight host devices, compiled with the tests' fast XLA options, the Agg plotting backend and no
on-disk JAX compilation cache, all set before JAX starts.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from _training_helpers import FAST_COMPILE

os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count=8 {FAST_COMPILE}")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("IML_JAX_CACHE", "off")

import jax

jax.config.update("jax_num_cpu_devices", 8)
