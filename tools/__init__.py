"""Diagnostics of the training step, kept outside the library and outside the default tests.

Each module is a command run from the repository root as ``python -m tools.NAME`` (for example
``python -m tools.profile_step`` sums a step's XLA time by kind and layer, and
``python -m tools.probe_member_convs`` runs a K-member step's convolutions layer by layer); none
is installed with ``iml``. Their tests are in ``tools/tests`` and run with
``python -m pytest tools/tests``, not with the default ``python -m pytest``.
"""
