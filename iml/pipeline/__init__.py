"""The experiment pipeline: plan -> train -> score -> aggregate -> report, and its results store."""

from iml.pipeline.store import RunStore, atomic_write_bytes, package_versions

__all__ = ["RunStore", "atomic_write_bytes", "package_versions"]
