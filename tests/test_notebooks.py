"""Every notebook runs top to bottom without an error.

The jupytext percent-format sources in ``notebooks/*.py`` are the notebooks: each is converted to
a notebook in memory and executed cell by cell in a fresh ``python3`` kernel, with the working
directory at the repository root, ``MPLBACKEND=Agg`` and a per-cell timeout. A cell that raises
(including a failed ``assert`` on one of the notebook's key numbers) fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.py"))
CELL_TIMEOUT_S = 300


def _kernel_environment() -> dict[str, str]:
    """The test's environment, with headless plotting and this checkout's ``iml`` first on the
    path (another installed copy of the package must not be the one the notebooks test)."""
    env = dict(os.environ)
    env["MPLBACKEND"] = "Agg"
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    return env


def execute_notebook(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Execute ``notebook`` in place in a fresh kernel; raises ``CellExecutionError`` on error."""
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(REPO_ROOT)}},
    )
    client.execute(env=_kernel_environment())
    return notebook


def read_percent_source(text: str) -> nbformat.NotebookNode:
    """A notebook from jupytext percent-format text, as the notebook files are read."""
    return jupytext.reads(text, fmt="py:percent")


def _body(percent_source: str) -> str:
    """A percent-format source without its leading ``# ---`` header block."""
    lines = percent_source.splitlines(keepends=True)
    if lines and lines[0].startswith("# ---"):
        end = next(i for i in range(1, len(lines)) if lines[i].startswith("# ---"))
        lines = lines[end + 1 :]
    return "".join(lines)


def _cell_errors(notebook: nbformat.NotebookNode) -> list[str]:
    return [
        f"cell {i}: {output.get('ename')}: {output.get('evalue')}"
        for i, cell in enumerate(notebook.cells)
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]


def test_the_notebooks_are_discovered():
    names = {path.name for path in NOTEBOOKS}
    expected = {
        "01_theory.py",
        "02_beta_sweep.py",
        "03_paper_figures.py",
        "04_bring_your_own_loss.py",
    }
    assert expected <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.name for path in NOTEBOOKS])
def test_notebook_is_a_percent_format_source_with_checks(path: Path):
    notebook = jupytext.read(path)
    representation = notebook.metadata["jupytext"]["text_representation"]
    assert representation["format_name"] == "percent"
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    kinds = [cell.cell_type for cell in notebook.cells]
    assert "markdown" in kinds and "code" in kinds
    # Executing a notebook should check something, not only draw it.
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert "assert " in code
    # Saving from Jupyter through jupytext rewrites the file: it must come back unchanged (below
    # the header, whose jupytext_version line follows the installed version).
    source = path.read_text()
    rewritten = jupytext.writes(notebook, fmt="py:percent")
    assert _body(rewritten) == _body(source)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.name for path in NOTEBOOKS])
def test_notebook_executes_without_errors(path: Path):
    notebook = execute_notebook(jupytext.read(path))
    assert _cell_errors(notebook) == []
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code_cells)


def test_a_raising_cell_fails_the_run():
    notebook = read_percent_source(
        "# %% [markdown]\n# A notebook whose second cell fails.\n\n"
        "# %%\nx = 1\n\n"
        "# %%\nraise ValueError('deliberate failure')\n\n"
        "# %%\ny = 2\n"
    )
    with pytest.raises(CellExecutionError, match="deliberate failure"):
        execute_notebook(notebook)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    # The run stopped at the failing cell: the cell after it never ran.
    assert code_cells[0].execution_count is not None
    assert code_cells[2].execution_count is None


def test_kernel_imports_this_checkout_with_a_headless_backend():
    notebook = read_percent_source(
        "# %%\nimport os\nimport matplotlib\nimport iml\n"
        "print(os.getcwd())\nprint(os.path.dirname(os.path.dirname(iml.__file__)))\n"
        "print(matplotlib.get_backend().lower())\n"
    )
    execute_notebook(notebook)
    lines = "".join(
        output.get("text", "") for output in notebook.cells[0].outputs if output.name == "stdout"
    ).split()
    assert [Path(lines[0]).resolve(), Path(lines[1]).resolve()] == [REPO_ROOT, REPO_ROOT]
    assert lines[2] == "agg"
