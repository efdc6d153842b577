"""The documentation site (``docs/``): what a reader copies from it works, and it covers the API.

- The API reference (``docs/api/*.rst``) lists every name of every public package's and
  module's ``__all__`` in an ``autosummary`` table, under that module, and nothing that is gone.
- Every Python example of the site's pages is a doctest, run here as written, its printed output
  compared (``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``), from the repository root; the files the
  pages include from elsewhere are tested where they live, or by these examples.
- Every ``iml`` command line of the pages and of the README parses, and names config keys that
  exist with values of their types (the checks every command makes before any work).
- The tutorials' page names every notebook, the map of the repository every module of ``iml/``,
  and CI builds the site with warnings as errors.

The site itself is built by ``.ci/run`` (``sphinx-build -W``), which fails on a broken
reference, a page in no table of contents or a docstring that does not parse.
"""

from __future__ import annotations

import doctest
import importlib
import re
import shlex
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from iml import losses, plugins
from iml.commands.config import load_config_with_names
from iml.commands.figures import eval_overrides
from iml.commands.parser import parse_args
from iml.commands.reveal import reveal_settings

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: What each build writes into docs/ (docs/conf.py), and the records, which are not pages.
NOT_PAGES = ("_build", "studies", "results")


def _pages() -> list[Path]:
    """The site's Markdown pages, as written by hand."""
    return sorted(p for p in DOCS.rglob("*.md") if p.relative_to(DOCS).parts[0] not in NOT_PAGES)


def _fenced(text: str, language: str) -> list[str]:
    """The bodies of the fenced code blocks of ``language`` in Markdown ``text``."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ---------------------------------------------------------------------------------------------
# The API reference


def _public_modules() -> list[str]:
    """``iml``, each package of it and each public top-level module that declares ``__all__``."""
    names = ["iml"]
    for path in sorted((ROOT / "iml").iterdir()):
        if path.name.startswith("_") or path.name == "commands":  # the CLI's insides: iml.cli
            continue
        if (path / "__init__.py").is_file() or path.suffix == ".py":
            name = f"iml.{path.stem}"
            if hasattr(importlib.import_module(name), "__all__"):
                names.append(name)
    return names


def _api_listings() -> dict[str, set[str]]:
    """The names each ``autosummary`` table of ``docs/api/`` lists, by its current module."""
    listed: dict[str, set[str]] = {}
    for page in sorted((DOCS / "api").glob("*.rst")):
        module, in_table = None, False
        for line in page.read_text().splitlines():
            if match := re.match(r"\.\. currentmodule:: (\S+)", line):
                module, in_table = match[1], False
            elif line.startswith(".. autosummary::"):
                in_table = True
            elif in_table and line.startswith("   ") and not line.strip().startswith(":"):
                listed.setdefault(module, set()).add(line.strip())
            elif in_table and line.strip() and not line.startswith("   "):
                in_table = False
    return listed


def test_the_api_reference_lists_every_public_name():
    listed = _api_listings()
    modules = _public_modules()
    assert {"iml", "iml.scoring", "iml.calibration", "iml.training", "iml.pipeline"} <= set(modules)
    for name in modules:
        missing = sorted(set(importlib.import_module(name).__all__) - listed.get(name, set()))
        assert not missing, f"docs/api/: {name} does not list {missing} (add them to its page)"


def test_the_api_reference_lists_no_name_that_is_gone():
    for module, names in _api_listings().items():
        gone = [n for n in names if not hasattr(importlib.import_module(module), n)]
        assert not gone, f"docs/api/ lists {module}.{gone}, which do not exist"


# ---------------------------------------------------------------------------------------------
# The examples


def test_every_python_example_of_the_pages_is_a_doctest():
    """A plain ``python`` block would not be run, so a page holds none."""
    for page in _pages():
        for block in _fenced(page.read_text(), "python"):
            assert block.lstrip().startswith(">>>"), (
                f"{_name(page)}: a python block not run:\n{block}"
            )


PAGES_WITH_EXAMPLES = [
    p for p in _pages() if any(">>>" in b for b in _fenced(p.read_text(), "python"))
]


@pytest.fixture
def a_fresh_session(monkeypatch, tmp_path):
    """What an example changes, undone: the working directory (the repository root, where the
    pages' paths start), the prepared datasets (a folder of this test's), NumPy's print options,
    the losses registered and the plugins loaded."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("IML_DATA_DIR", str(tmp_path / "tfds"))
    monkeypatch.setattr(plugins, "_IMPORTED", {})
    before = set(losses.registered())
    with np.printoptions():
        yield
    for name in set(losses.registered()) - before:
        losses.unregister(name)
    for name in [m for m in sys.modules if m.startswith("iml_plugin_")]:
        del sys.modules[name]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES, ids=_name)
def test_the_examples_of_a_page_run_as_written(page: Path, a_fresh_session):
    text = "\n".join(b for b in _fenced(page.read_text(), "python") if ">>>" in b)
    test = doctest.DocTestParser().get_doctest(text, {}, _name(page), str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)
    assert runner.tries > 0


def test_the_guides_and_first_pages_have_examples():
    have = {_name(p) for p in PAGES_WITH_EXAMPLES}
    for page in ("getting_started", "paper_in_code", "datasets", "howto/sweep_csv",
                 "howto/extend", "howto/read_reveal", "howto/resume_and_redraw"):  # fmt: skip
        assert f"docs/{page}.md" in have


def test_the_files_the_pages_include_exist():
    for page in _pages():
        for target in re.findall(r"^```\{literalinclude\} (\S+)", page.read_text(), flags=re.M):
            assert (page.parent / target).is_file(), f"{_name(page)} includes {target}"


# ---------------------------------------------------------------------------------------------
# The command lines

#: The plugin files the pages name by their file name alone, as a reader saves them.
PLUGIN_FILES = {"spherical.py": str(DOCS / "howto" / "spherical.py")}


def _command_lines(text: str) -> list[list[str]]:
    """The arguments of each ``iml`` command in the ``bash`` blocks of ``text``: lines joined
    where they end in a backslash, comments dropped, the command found after ``srun`` or ``&&``
    or inside a quoted ``--command=...``."""
    commands = []
    for block in _fenced(text, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            for i, word in enumerate(words):
                if word == "iml":
                    rest = words[i + 1 :]
                    ends = [j for j, w in enumerate(rest) if w in ("&&", "||", ";", "|")]
                    commands.append(rest[: ends[0]] if ends else rest)
                elif re.match(r"(--\w+=)?iml ", word):
                    commands.append(shlex.split(word.split("iml ", 1)[1]))
    return commands


COMMAND_LINES = [
    (f"{_name(page)}: iml {shlex.join(argv)}", argv)
    for page in [ROOT / "README.md", *_pages()]
    for argv in _command_lines(page.read_text())
]


def test_the_command_lines_are_found():
    commands = {argv[0] for _, argv in COMMAND_LINES}
    assert commands == {"reproduce", "sweep", "figures", "reveal"}
    assert len(COMMAND_LINES) >= 25


@pytest.mark.parametrize(("where", "argv"), COMMAND_LINES, ids=[w for w, _ in COMMAND_LINES])
def test_a_command_line_parses_and_names_keys_that_exist(where, argv, monkeypatch):
    monkeypatch.chdir(ROOT)  # the config files the pages name are experiments/configs/*.py
    monkeypatch.setattr(plugins, "_IMPORTED", {})
    before = set(losses.registered())
    try:
        args = parse_args(argv)
        for spec in args.imports:
            plugins.import_plugin(PLUGIN_FILES.get(spec, spec))
        if args.command in ("reproduce", "sweep"):
            load_config_with_names(args)
        elif args.command == "figures":
            eval_overrides(args)
        else:
            reveal_settings(args)
    except SystemExit as err:  # argparse's way of refusing
        pytest.fail(f"{where}: refused by the parser ({err})")
    finally:
        for name in set(losses.registered()) - before:
            losses.unregister(name)
        for name in [m for m in sys.modules if m.startswith("iml_plugin_")]:
            del sys.modules[name]


# ---------------------------------------------------------------------------------------------
# The tutorials, the map, the build


def test_the_tutorials_page_names_and_lists_every_notebook():
    page = (DOCS / "tutorials" / "index.md").read_text()
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("*.py")}
    assert len(notebooks) >= 5
    assert set(re.findall(r"`(\d\d_\w+)\.py`", page)) == notebooks
    (toctree,) = re.findall(r"```\{toctree\}\n(.*?)```", page, flags=re.S)
    assert {line.strip() for line in toctree.splitlines() if re.match(r"\d\d_", line)} == notebooks
    for name in notebooks:
        assert (ROOT / "notebooks" / f"{name}.ipynb").is_file()


def test_every_record_and_every_benchmark_has_its_place():
    """Each folder of docs/results/ with a README (or a results.md) is listed once, on the
    results' page or the benchmarks'; each benchmark of experiments/benchmarks/ is named on
    the benchmarks' page."""
    records = {
        p.name
        for p in (DOCS / "results").iterdir()
        if (p / "README.md").is_file() or (p / "results.md").is_file()
    }
    listed = [
        name
        for page in ("results.md", "benchmarks.md")
        for name in re.findall(r"^studies/(\w+)$", (DOCS / page).read_text(), flags=re.M)
    ]
    assert sorted(listed) == sorted(records)
    benchmarks = (DOCS / "benchmarks.md").read_text()
    for script in (ROOT / "experiments" / "benchmarks").glob("[!_]*.py"):
        assert f"python -m experiments.benchmarks.{script.stem}" in benchmarks, script.stem


def _repository_map() -> str:
    text = (DOCS / "development.md").read_text()
    (block,) = [b for b in _fenced(text, "text") if b.startswith("iml/")]
    return block


def test_the_repository_map_names_every_module_of_iml_and_only_those():
    block = _repository_map()
    named = set(re.findall(r"^(iml/\w+(?:\.py|/))", block, flags=re.M))
    tree = {
        f"iml/{p.name}/" if p.is_dir() else f"iml/{p.name}"
        for p in (ROOT / "iml").iterdir()
        if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").is_file())
    }
    assert named == tree
    # the files listed under a package, one to a line, exist in it
    package = None
    for line in block.splitlines():
        if match := re.match(r"(iml/\w+/)", line):
            package = match[1]
        elif not line.startswith(" ") and line.strip():
            package = None
        elif package and (match := re.match(r"  (\w+\.py) ", line)):
            assert (ROOT / package / match[1]).is_file(), f"{package}{match[1]}"


def test_ci_builds_the_site_with_warnings_as_errors():
    ci = (ROOT / ".ci" / "run").read_text()
    assert '".[dev,reference,docs]"' in ci
    assert "sphinx-build -W -b html docs docs/_build/html" in ci
    assert ci.index("sphinx-build") < ci.index("python -m pytest")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    docs = " ".join(extras["optional-dependencies"]["docs"])
    for package in ("sphinx", "myst-nb", "sphinx-book-theme", "sphinx-copybutton"):
        assert package in docs


def test_the_build_output_is_ignored_by_git():
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    for path in ("/docs/_build/", "/docs/tutorials/*.ipynb", "/docs/studies/"):
        assert path in ignored
