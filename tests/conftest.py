"""Test configuration shared by every test module.

Eight host devices are requested before JAX starts so that sharded code (mesh axes for ensemble
members and data) is exercised on the CPU exactly as it would be on eight accelerators.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("MPLBACKEND", "Agg")

import jax
from hypothesis import HealthCheck, settings

jax.config.update("jax_num_cpu_devices", 8)

# JIT compilation makes the first example of a property slow; deadlines would only measure that.
settings.register_profile(
    "iml",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("iml")
