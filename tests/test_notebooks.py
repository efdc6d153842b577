"""Every notebook runs top to bottom without an error, and its ``.ipynb`` matches its source.

The jupytext percent-format sources in ``notebooks/*.py`` are the notebooks: each is converted to
a notebook in memory and executed cell by cell in a fresh ``python3`` kernel, with the working
directory at the repository root, inline (headless) figures and a per-cell timeout, by the same
function that writes the ``.ipynb`` files (``experiments.sync_notebooks``). A cell that raises
(including a failed ``assert`` on one of the notebook's key numbers) fails the test.

Each ``notebooks/*.ipynb`` is checked without executing it again: the same cells as its ``.py``,
every code cell executed in order in one run, no error outputs, the figures present, and small.
"""

from __future__ import annotations

import base64
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

from experiments.sync_notebooks import (
    INLINE_BACKEND,
    KERNELSPEC,
    REGENERATE_COMMAND,
    REPO_ROOT,
    cell_sources,
    execute_notebook,
    normalize,
    notebook_sources,
    out_of_sync,
)

NOTEBOOKS = notebook_sources()
IDS = [path.name for path in NOTEBOOKS]
MAX_IPYNB_BYTES = 1_000_000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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


def _code_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def _png_outputs(cell: nbformat.NotebookNode) -> list[str]:
    return [
        output.data["image/png"] for output in cell.outputs if "image/png" in output.get("data", {})
    ]


def _cells_with_figures(notebook: nbformat.NotebookNode) -> list[int]:
    return [
        i
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code" and _png_outputs(cell)
    ]


def _draws(source: str) -> bool:
    """Whether a code cell shows a figure: ``plt.show()`` or ``display(fig...)``."""
    return "plt.show()" in source or "display(fig" in source


# ---------------------------------------------------------------------------------------------
# The sources


def test_the_notebooks_are_discovered():
    names = {path.name for path in NOTEBOOKS}
    expected = {
        "01_theory.py",
        "02_beta_sweep.py",
        "03_paper_figures.py",
        "04_bring_your_own_loss.py",
        "05_what_the_machine_learns.py",
    }
    assert expected <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_a_percent_format_source_with_checks(path: Path):
    notebook = jupytext.read(path)
    representation = notebook.metadata["jupytext"]["text_representation"]
    assert representation["format_name"] == "percent"
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    kinds = [cell.cell_type for cell in notebook.cells]
    assert "markdown" in kinds and "code" in kinds
    # Executing a notebook should check something, not only draw it.
    code = "\n".join(cell.source for cell in _code_cells(notebook))
    assert "assert " in code
    # Saving from Jupyter through jupytext rewrites the file: it must come back unchanged (below
    # the header, whose jupytext_version line follows the installed version).
    source = path.read_text()
    rewritten = jupytext.writes(notebook, fmt="py:percent")
    assert _body(rewritten) == _body(source)


# ---------------------------------------------------------------------------------------------
# Executing the sources


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_executes_without_errors(path: Path):
    notebook = execute_notebook(jupytext.read(path))
    assert _cell_errors(notebook) == []
    assert all(cell.execution_count is not None for cell in _code_cells(notebook))
    # Every cell that draws shows its figure, and the stored .ipynb shows figures in the same
    # cells (checked here, on the run the test makes anyway, not by executing it again).
    for cell in _code_cells(notebook):
        if _draws(cell.source):
            assert _png_outputs(cell), f"no figure shown by:\n{cell.source}"
    stored = nbformat.read(path.with_suffix(".ipynb"), as_version=4)
    assert _cells_with_figures(stored) == _cells_with_figures(notebook), (
        f"{path.with_suffix('.ipynb').name} is stale: regenerate it with "
        f"`{REGENERATE_COMMAND} {path.stem}`"
    )


@pytest.mark.slow
def test_a_raising_cell_fails_the_run():
    notebook = read_percent_source(
        "# %% [markdown]\n# A notebook whose second cell fails.\n\n"
        "# %%\nx = 1\n\n"
        "# %%\nraise ValueError('deliberate failure')\n\n"
        "# %%\ny = 2\n"
    )
    with pytest.raises(CellExecutionError, match="deliberate failure"):
        execute_notebook(notebook)
    code_cells = _code_cells(notebook)
    # The run stopped at the failing cell: the cell after it never ran.
    assert code_cells[0].execution_count is not None
    assert code_cells[2].execution_count is None


@pytest.mark.slow
def test_kernel_imports_this_checkout_and_shows_figures_inline():
    notebook = read_percent_source(
        "# %%\nimport os\nimport matplotlib\nimport iml\n"
        "print(os.getcwd())\nprint(os.path.dirname(os.path.dirname(iml.__file__)))\n"
        "print(matplotlib.get_backend().lower())\n\n"
        "# %%\nimport matplotlib.pyplot as plt\nplt.plot([0, 1], [0, 1])\nplt.show()\n"
    )
    execute_notebook(notebook)
    first, second = notebook.cells
    lines = "".join(
        output.get("text", "") for output in first.outputs if output.name == "stdout"
    ).split()
    assert [Path(lines[0]).resolve(), Path(lines[1]).resolve()] == [REPO_ROOT, REPO_ROOT]
    assert lines[2] == INLINE_BACKEND.lower()
    # No window opens; the figure arrives in the notebook as one PNG.
    (png,) = _png_outputs(second)
    assert base64.b64decode(png).startswith(PNG_SIGNATURE)


# ---------------------------------------------------------------------------------------------
# The stored .ipynb files


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_ipynb_has_the_cells_of_its_source(path: Path):
    problem = out_of_sync(path)
    assert problem is None, problem


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_ipynb_was_executed_top_to_bottom_in_one_run(path: Path):
    target = path.with_suffix(".ipynb")
    notebook = nbformat.read(target, as_version=4)
    nbformat.validate(notebook)
    counts = [cell.execution_count for cell in _code_cells(notebook)]
    assert counts == list(range(1, len(counts) + 1)), f"{target.name}: execution counts {counts}"
    assert _cell_errors(notebook) == []
    # Regenerating an unchanged notebook must not change the file: nothing that varies by run.
    assert notebook.metadata == {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    assert all("execution" not in cell.metadata for cell in notebook.cells)
    assert [cell.id for cell in notebook.cells] == [
        f"cell-{i:03d}" for i in range(len(notebook.cells))
    ]
    assert target.stat().st_size < MAX_IPYNB_BYTES


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_ipynb_shows_the_figures_its_cells_draw(path: Path):
    notebook = nbformat.read(path.with_suffix(".ipynb"), as_version=4)
    drawing = [cell for cell in _code_cells(notebook) if _draws(cell.source)]
    imports_plotting = any(
        "matplotlib" in cell.source or "iml.plots" in cell.source for cell in _code_cells(notebook)
    )
    assert drawing or not imports_plotting, f"{path.name} imports plotting but draws nothing"
    for cell in drawing:
        pngs = _png_outputs(cell)
        assert pngs, f"{path.with_suffix('.ipynb').name}: no figure stored for:\n{cell.source}"
        assert all(base64.b64decode(png).startswith(PNG_SIGNATURE) for png in pngs)


# ---------------------------------------------------------------------------------------------
# The sync check and the normalization, on small notebooks (nothing executed)

SMALL_SOURCE = "# %% [markdown]\n# A title.\n\n# %%\nx = 1\nprint(x)\n"


def test_out_of_sync_names_the_notebook_and_the_command(tmp_path: Path):
    source = tmp_path / "05_small.py"
    source.write_text(SMALL_SOURCE)
    target = tmp_path / "05_small.ipynb"
    missing = out_of_sync(source)
    assert missing is not None and "05_small.ipynb is missing" in missing
    target.write_text(nbformat.writes(normalize(jupytext.read(source))))
    assert out_of_sync(source) is None
    source.write_text(SMALL_SOURCE + "\n# %%\ny = 2\n")
    problem = out_of_sync(source)
    assert problem is not None
    assert "05_small.ipynb differs from" in problem
    assert "(from cell 2; 2 cells against 3)" in problem
    assert f"`{REGENERATE_COMMAND} 05_small`" in problem


def test_a_changed_line_puts_the_pair_out_of_sync(tmp_path: Path):
    source = tmp_path / "small.py"
    source.write_text(SMALL_SOURCE)
    (tmp_path / "small.ipynb").write_text(nbformat.writes(normalize(jupytext.read(source))))
    source.write_text(SMALL_SOURCE.replace("x = 1", "x = 2"))
    problem = out_of_sync(source)
    assert problem is not None and "(from cell 1; 2 cells against 2)" in problem


def test_normalize_gives_the_same_file_for_the_same_source():
    # jupytext gives every cell a random id; the stored file must not depend on them.
    first, second = (normalize(read_percent_source(SMALL_SOURCE)) for _ in range(2))
    assert nbformat.writes(first) == nbformat.writes(second)
    assert cell_sources(first) == [("markdown", "A title."), ("code", "x = 1\nprint(x)")]


def test_normalize_joins_a_stream_split_into_messages():
    notebook = read_percent_source(SMALL_SOURCE)
    code = notebook.cells[1]
    code.metadata["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
    code.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="a\n"),
        nbformat.v4.new_output("stream", name="stdout", text="b\n"),
        nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
        nbformat.v4.new_output("stream", name="stdout", text="c\n"),
    ]
    normalize(notebook)
    assert [(output.name, output.text) for output in code.outputs] == [
        ("stdout", "a\nb\n"),
        ("stderr", "warning\n"),
        ("stdout", "c\n"),
    ]
    assert "execution" not in code.metadata
