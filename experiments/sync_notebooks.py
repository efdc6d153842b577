"""Write each notebook's ``.ipynb`` form, executed, from its jupytext ``.py`` source.

``notebooks/*.py`` (jupytext percent format) are the sources: they diff well. Beside each lives
an ``.ipynb`` with its outputs (figures included), so that the notebook renders on the code host
and opens in plain Jupyter or Colab. This script makes the second from the first: it reads the
``.py`` with jupytext, executes it with nbclient in a fresh ``python3`` kernel started in
``notebooks/`` as Jupyter would start it (``tests/test_notebooks.py`` executes the notebooks with
the same function, from the repository root), and writes the ``.ipynb`` atomically.

The output is deterministic, so that regenerating an unchanged notebook changes no byte that the
computation does not: cell ids are numbered, execution timestamps and kernel versions are left
out, stream outputs are merged, and figures are PNGs at a fixed, modest resolution.

Run from the repository root::

    python -m experiments.sync_notebooks                  # regenerate every notebook
    python -m experiments.sync_notebooks 01_theory        # regenerate the named ones
    python -m experiments.sync_notebooks --check          # only report pairs out of sync
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

from iml.pipeline import atomic_write_bytes

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
REGENERATE_COMMAND = "python -m experiments.sync_notebooks"
CELL_TIMEOUT_S = 300
# The matplotlib backend Jupyter uses by default: it draws with Agg (no display needed) and
# sends each figure to the notebook as a PNG output.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
FIGURE_DPI = 80  # 12 x 3.4 in figures become 960 x 272 px: readable, and the files stay small
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def notebook_sources() -> list[Path]:
    """The notebooks' jupytext sources, ``notebooks/*.py``, in name order."""
    return sorted(NOTEBOOK_DIR.glob("*.py"))


def kernel_environment() -> dict[str, str]:
    """This process's environment, with inline figures and this checkout's ``iml`` first on the
    path (another installed copy of the package must not be the one the notebooks run)."""
    env = dict(os.environ)
    env["MPLBACKEND"] = INLINE_BACKEND
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    return env


def execute_notebook(
    notebook: nbformat.NotebookNode, cwd: Path = REPO_ROOT
) -> nbformat.NotebookNode:
    """Execute ``notebook`` in place in a fresh ``python3`` kernel started in ``cwd``; raises
    ``nbclient.exceptions.CellExecutionError`` when a cell raises."""
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(cwd)}},
        extra_arguments=[
            "--InlineBackend.figure_formats={'png'}",
            f"--InlineBackend.print_figure_kwargs={{'bbox_inches': 'tight', 'dpi': {FIGURE_DPI}}}",
        ],
    )
    client.execute(env=kernel_environment())
    return notebook


def cell_sources(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """The ``(cell_type, source)`` of every cell: what a pair of notebook files must share."""
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def _merged_streams(outputs: list) -> list:
    """``outputs`` with consecutive writes to one stream joined (how a stream is split into
    messages depends on timing, not on the notebook)."""
    merged = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (
            output.output_type == "stream"
            and previous is not None
            and previous.output_type == "stream"
            and previous.name == output.name
        ):
            previous.text += output.text
        else:
            merged.append(output)
    return merged


def normalize(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``notebook`` in place with only what its source and its outputs determine: numbered cell
    ids, no execution timing, the ``python3`` kernelspec, and merged stream outputs."""
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    notebook.metadata = nbformat.from_dict(
        {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    )
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index:03d}"
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = _merged_streams(cell.outputs)
    return notebook


def render(source: Path) -> str:
    """The ``.ipynb`` text of the jupytext notebook ``source``, executed in its own folder (where
    Jupyter starts a notebook's kernel) and normalized."""
    notebook = normalize(execute_notebook(jupytext.read(source), cwd=source.parent))
    nbformat.validate(notebook)
    return nbformat.writes(notebook) + "\n"


def out_of_sync(source: Path) -> str | None:
    """Why ``source``'s ``.ipynb`` does not match it (missing, or other cells), or ``None``."""
    target = source.with_suffix(".ipynb")
    rerun = f"regenerate it with `{REGENERATE_COMMAND} {source.stem}`"
    if not target.exists():
        return f"{_shown(target)} is missing: {rerun}"
    expected = cell_sources(jupytext.read(source))
    stored = cell_sources(nbformat.read(target, as_version=4))
    if stored == expected:
        return None
    first = next(
        (i for i, (a, b) in enumerate(zip(stored, expected, strict=False)) if a != b),
        min(len(stored), len(expected)),
    )
    return (
        f"{_shown(target)} differs from {_shown(source)} "
        f"(from cell {first}; {len(stored)} cells against {len(expected)}): {rerun}"
    )


def _shown(path: Path) -> str:
    """``path`` relative to the repository root where it lies inside it."""
    return str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)


def _selected(names: Sequence[str]) -> list[Path]:
    sources = notebook_sources()
    if not names:
        return sources
    by_name = {path.stem: path for path in sources} | {path.name: path for path in sources}
    unknown = [name for name in names if Path(name).name not in by_name]
    if unknown:
        known = ", ".join(path.stem for path in sources)
        raise ValueError(f"names: no notebook {', '.join(unknown)} (there are: {known})")
    return [by_name[Path(name).name] for name in names]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "names", nargs="*", help="notebooks to regenerate, e.g. 01_theory (default: all)"
    )
    parser.add_argument(
        "--check", action="store_true", help="execute nothing; exit 1 if a pair is out of sync"
    )
    args = parser.parse_args(argv)
    try:
        sources = _selected(args.names)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    if args.check:
        problems = [problem for problem in map(out_of_sync, sources) if problem]
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    for source in sources:
        target = source.with_suffix(".ipynb")
        atomic_write_bytes(target, render(source).encode("utf-8"))
        size_kb = target.stat().st_size / 1024
        print(f"wrote {_shown(target)} ({size_kb:.0f} KiB)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
