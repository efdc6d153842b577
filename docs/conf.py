"""Sphinx configuration of the iml documentation site.

Build it from the repository root, with the ``docs`` extra installed::

    pip install -e ".[docs]"
    sphinx-build -W -b html docs docs/_build/html

Pages are Markdown (MyST). The tutorials are the executed notebooks of ``notebooks/``, rendered
with their stored outputs and never run here (the test suite runs them). The API reference is
written from the docstrings (autodoc and autosummary, Google style read by napoleon).
``docs/results/`` holds the records of real runs; each gets a page (below).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sphinx.pycode import ModuleAnalyzer

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # the checkout's iml, whether or not it is installed

import iml  # noqa: E402  (from the path above)


def _write_if_changed(path: Path, data: bytes) -> None:
    """Write ``path`` only when its bytes change, so that Sphinx reads an unchanged page once."""
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)


# -- Tutorials: the stored notebooks ---------------------------------------------------------------
# notebooks/ lies outside the source folder, where Sphinx does not read. Each build copies the
# executed notebooks into docs/tutorials/ (the copies are ignored by git).
TUTORIALS = DOCS / "tutorials"
for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
    _write_if_changed(TUTORIALS / notebook.name, notebook.read_bytes())

# -- Results: one page per record of docs/results/ -------------------------------------------------
# Each folder of docs/results/ is a record of real runs with a README: its command, its set-up and
# its tables (rendered from the record by `python -m experiments.sync_docs`). The records are not
# pages themselves: each build writes docs/studies/NAME.md (ignored by git), the folder's README
# followed by every figure the folder holds.
RESULTS = DOCS / "results"
STUDIES = DOCS / "studies"
# a Markdown image or an HTML <img>, with a relative path
_IMAGE = re.compile(r"(!\[[^\]]*\]\(|<img src=\")(?![a-z]+:|/)([^)\"]+)")


def _study_page(folder: Path) -> str:
    """The page of one record: its README (``results.md`` where it has none), its images'
    paths made relative to the page, then every figure of the folder."""
    readme = next(p for p in (folder / "README.md", folder / "results.md") if p.exists())
    where = folder.relative_to(DOCS).as_posix()
    text = _IMAGE.sub(lambda m: f"{m[1]}../{where}/{m[2]}", readme.read_text())
    lines = [text.rstrip(), ""]
    figures = sorted(folder.rglob("*.png"))
    if figures:
        lines += ["## The record's figures", "", f"Every figure in `docs/{where}/`.", ""]
        for figure in figures:
            path = figure.relative_to(folder).as_posix()
            lines += [f"```{{figure}} ../{where}/{path}", ":width: 90%", "", f"`{path}`", "```", ""]
    return "\n".join(lines)


STUDIES.mkdir(exist_ok=True)
for _folder in sorted(p for p in RESULTS.iterdir() if p.is_dir()):
    if (_folder / "README.md").exists() or (_folder / "results.md").exists():
        _write_if_changed(STUDIES / f"{_folder.name}.md", _study_page(_folder).encode())

# -- Project ---------------------------------------------------------------------------------------
project = "iml"
author = "the iml authors"
copyright = "the iml authors; Apache-2.0"
release = version = iml.__version__

extensions = [
    "myst_nb",  # Markdown pages, and the stored notebooks with their outputs
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx_copybutton",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "results/**"]  # records: see above
suppress_warnings = [
    # The records' READMEs are written to be read on the code host, where a heading may skip a
    # level; the site shows them as they are.
    "myst.header",
    # A name that `iml` re-exports is documented twice, on the page of `iml` and on that of its
    # package: a reference to it finds both, and either is right.
    "ref.python",
]

# -- MyST and the notebooks ------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist", "html_image"]
myst_heading_anchors = 3
nb_execution_mode = "off"  # the stored outputs are shown; the test suite executes the notebooks
nb_merge_streams = True

# -- API reference ---------------------------------------------------------------------------------
autosummary_generate = False  # each package's page documents its names itself (docs/api/)
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
# the signatures name the aliases, not the unions they stand for
autodoc_type_aliases = {
    name: name
    for name in (
        "ArrayLike",
        "LossLike",
        "BinaryLoss",
        "BinaryLossFn",
        "MulticlassLossFn",
        "WeightFunction",
    )
}
add_module_names = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # a class's Attributes: stay in its entry, not entries of their own


def _skip_field_accessors(app, what, name, obj, skip, options):
    """Leave out the accessors a named tuple generates ("Alias for field number N"): the class's
    docstring describes its fields."""
    if (getattr(obj, "__doc__", None) or "").startswith("Alias for field number"):
        return True
    return None


def _assigned_comment(name: str, obj: object) -> list[str] | None:
    """The ``#:`` comment above the assignment of ``obj``, found in the ``iml`` module that
    assigns it at its top level under the last part of ``name``."""
    attr = name.rsplit(".", 1)[-1]
    for modname, module in sorted(sys.modules.items()):
        if modname.startswith("iml") and getattr(module, attr, None) is obj:
            comments = ModuleAnalyzer.for_module(modname).find_attr_docs()
            if ("", attr) in comments:
                return list(comments[("", attr)])
    return None


def _data_docstring(app, what, name, obj, options, lines):
    """Document a constant or registry that a package re-exports by the ``#:`` comment where it
    is assigned, not by the docstring of its type (``dict``'s, for a registry)."""
    own = (type(obj).__doc__ or "").strip().splitlines()
    if what == "data" and (not lines or (own and lines[0] == own[0])):
        lines[:] = _assigned_comment(name, obj) or []


def setup(app):
    app.connect("autodoc-skip-member", _skip_field_accessors)
    app.connect("autodoc-process-docstring", _data_docstring)


# -- Copying code: the button leaves out the prompts and outputs of examples -----------------------
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

# -- HTML ------------------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = f"iml {release}"
html_theme_options = {
    "show_toc_level": 2,
    "show_navbar_depth": 1,
    "home_page_in_toc": True,
}
