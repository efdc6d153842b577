"""A clone of the repository alone, without the project's shared data folder beside it.

Pointing ``$IML_SHARED_DATA`` at a missing folder hides the shared data as a fresh clone lacks
it: every test module must still be collected, and the tests that read real data are skipped
with a reason that names the folder they need. What ``pip install`` puts in site-packages is the
library alone: ``experiments`` and ``tools`` run from the clone.
"""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from setuptools import find_namespace_packages

ROOT = Path(__file__).resolve().parents[1]

# Tests that read the shared data, one per data source and module; each takes seconds when run.
NEEDS_SHARED_DATA = {
    "tests/data/builders/pneumoniamnist/test_pneumoniamnist_dataset_builder.py::"
    "test_assemble_pneumoniamnist_rejects_swapped_copies": "pneumoniamnist",
    "tests/data/test_tabular.py::test_letter_one_against_rest_and_several_letters": "uci-letter",
    "tests/data/test_tabular.py::test_adult_matches_an_independent_encoding": "uci-adult",
    "tests/data/builders/chestxray14/test_chestxray14_dataset_builder.py::"
    "test_chestxray14_label_file_counts": "nih-chestxray14-meta",
    "tests/data/test_folds.py::test_chestxray14_patient_folds_on_the_real_label_file": (
        "nih-chestxray14-meta"
    ),
    "tests/calibration/test_curves.py::test_rare_class_prevalence_of_chestxray14": (
        "nih-chestxray14-meta"
    ),
}


def _pytest_without_shared_data(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, IML_SHARED_DATA=str(tmp_path / "no-shared-data"))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_every_test_module_is_collected_and_tests_that_read_shared_data_skip(tmp_path):
    # One run: collecting every module (an import error fails the run), then the tests that read
    # the shared data, chosen by name, are the only ones run.
    names = " or ".join(node.split("::")[1] for node in NEEDS_SHARED_DATA)
    done = _pytest_without_shared_data(tmp_path, "-q", "-rs", "tests", "-k", names)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert f"{len(NEEDS_SHARED_DATA)} skipped" in summary, summary
    assert "deselected" in summary and "error" not in summary and "passed" not in summary, summary
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    for folder in set(NEEDS_SHARED_DATA.values()):
        missing = tmp_path / "no-shared-data" / folder
        assert any(f"needs {missing} " in line for line in skipped), (folder, skipped)
    assert all("IML_SHARED_DATA" in line for line in skipped), skipped


def test_only_the_library_is_installed():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = setuptools["packages"]["find"]["include"]
    # pyproject's packages.find looks for namespace packages too (folders without __init__.py)
    packages = set(find_namespace_packages(ROOT, include=include))
    assert {"iml", "iml.data.builders", "iml.data.builders.pneumoniamnist"} <= packages
    assert {p.split(".")[0] for p in packages} == {"iml"}, packages
    assert (ROOT / "experiments" / "__init__.py").is_file()  # the tests import it from the clone
    assert (ROOT / "tools" / "__init__.py").is_file()  # so do the diagnostics' tests


def test_the_default_tests_leave_out_the_diagnostics():
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert pytest_options["ini_options"]["testpaths"] == ["tests"]
    diagnostics = {path.name for path in (ROOT / "tools" / "tests").glob("test_*.py")}
    assert diagnostics and not diagnostics & {path.name for path in (ROOT / "tests").iterdir()}
