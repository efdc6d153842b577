"""The package's structure, as rules a test can check on the source of ``iml/``:

- no cycle: no module imports (at any depth of its code) a module that imports it back, directly
  or through others, whether the modules are in one package or in several;
- the layers of ``iml/`` import only downwards (a module may import its own layer's and lower
  ones; the package ``iml`` itself re-exports the public API from every layer);
- no re-export shim: a name lives in the module that defines it and is imported from there. A
  module other than a package's ``__init__.py`` may not pass on a name it imports from another
  ``iml`` module: list it in ``__all__``, import it as itself (``from m import f as f``), or
  import it without using it (only so that others import it from here). A module whose whole body
  is such imports is a shim. A package's ``__init__.py`` is the one place that gathers names;
- an import inside a function states why it is there;
- no line states a measured figure (a speed-up, a rate, a run's time, a date): those belong in
  ``docs/results/``.

The layers, lowest first:

0. ``_validation``, ``_io``, ``_device``, ``_ffi``, ``_bootstrap``, ``config``, ``plugins``:
   checks, files, host arrays onto the device, NumPy functions called from programs,
   resampling, configs, the user's modules that register losses, models and datasets;
1. ``scoring``: optimal scoring rules and their inverses (closed forms, generic autodiff rules);
2. ``losses``: the loss families and their registry, each record binding a loss to its rule;
3. ``spec``, ``grids``: ``LossSpec``, "the loss a model was trained with", read from a user,
   and grids of them;
4. ``calibration``, ``sbr``, ``recalibration``;
5. ``revealed``, ``power``: inverse machine learning on top of calibration;
6. ``plots``;
7. ``models`` and ``data``, independent of each other;
8. ``training``;  9. ``pipeline``;  10. ``cli`` and ``commands``, the command line.

The checks read any tree of modules (``_modules(root)``): a test plants a shim and a cycle in a
fake tree and sees each caught.

The tests mirror the package: ``iml/calibration/binning.py`` is tested in
``tests/calibration/test_binning.py``, ``iml/spec.py`` in ``tests/test_spec.py`` (a leading
underscore dropped: ``iml/_io.py`` in ``tests/test_io.py``). The tests of ``experiments/`` mirror
it in ``tests/experiments/`` the same way: ``experiments/studies/ridge_scale.py`` is tested in
``tests/experiments/studies/test_ridge_scale.py``, ``experiments/benchmarks/_projection.py`` in
``tests/experiments/benchmarks/test_projection.py``.
"""

from __future__ import annotations

import ast
import collections
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "iml"
TESTS = Path(__file__).resolve().parent

LAYERS = [
    {"_validation", "_io", "_device", "_ffi", "_bootstrap", "config", "plugins"},
    {"scoring"},
    {"losses"},
    {"spec", "grids"},
    {"calibration", "sbr", "recalibration"},
    {"revealed", "power"},
    {"plots"},
    {"models", "data"},
    {"training"},
    {"pipeline"},
    {"cli", "commands"},
]
LAYER = {name: level for level, names in enumerate(LAYERS) for name in names}


def _modules(root: Path = ROOT) -> dict[str, Path]:
    """The modules of the package at ``root``, by dotted name (a package by its own name)."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


@functools.cache
def _parse(path: Path) -> ast.Module:
    """The syntax tree of the module at ``path``, parsed once for all the tests."""
    return ast.parse(path.read_text())


def _package(name: str, path: Path) -> str:
    """The package that a relative import in the module ``name`` at ``path`` starts from."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _base(node: ast.ImportFrom, package: str) -> str:
    """The absolute name of the module that ``from ... import`` reads."""
    base = node.module or ""
    if node.level:
        anchor = package
        for _ in range(node.level - 1):
            anchor = anchor.rpartition(".")[0]
        base = f"{anchor}.{base}" if base else anchor
    return base


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of other modules of the package, at any depth of its code."""
    edges: dict[str, set[str]] = collections.defaultdict(set)
    for name, path in modules.items():
        package = _package(name, path)
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _base(node, package)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]  # fmt: skip
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles among ``edges``' modules, each as the path that closes it."""
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for other in sorted(edges.get(node, ())):
            if state.get(other) == 1:
                cycles.append([*path[path.index(other) :], other])
            elif other not in state:
                visit(other, [*path, other])
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    return cycles


def _top_level(body: list[ast.stmt]):
    """The statements run when a module is imported: its body, into ``if`` and ``try`` blocks,
    not into functions or classes."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody"):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield from _top_level(getattr(node, field, []))
        for handler in getattr(node, "handlers", []):
            yield from _top_level(handler.body)


def _dunder_all(body: list[ast.stmt]) -> set[str]:
    """The names a module lists in ``__all__`` (assigned, annotated or extended)."""
    names = set()
    for node in _top_level(body):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                names |= {
                    element.value
                    for element in ast.walk(node.value)
                    if isinstance(element, ast.Constant) and isinstance(element.value, str)
                }
    return names


def _used_names(tree: ast.Module) -> set[str]:
    """The names a module reads anywhere in its code, string annotations included."""
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            used.add(node.id)
        annotations = []
        if isinstance(node, ast.arg | ast.AnnAssign):
            annotations = [node.annotation]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations = [node.returns]
        for annotation in annotations:
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                try:
                    parsed = ast.parse(annotation.value, mode="eval")
                except SyntaxError:
                    continue
                used |= {n.id for n in ast.walk(parsed) if isinstance(n, ast.Name)}
    return used


def _reexports(modules: dict[str, Path]) -> list[str]:
    """Each name that a module other than a package's ``__init__.py`` passes on from another
    module of the package, as ``path: name (from module, how)``; and each shim, a module whose
    whole body is such imports."""
    found = []
    top = {name.split(".")[0] for name in modules}
    for name, path in sorted(modules.items()):
        if path.name == "__init__.py":
            continue
        where = path.relative_to(path.parents[len(name.split(".")) - 1]).as_posix()
        tree = _parse(path)
        listed, used = _dunder_all(tree.body), _used_names(tree)
        imported = {}  # bound name -> (module it comes from, imported as itself)
        for node in _top_level(tree.body):
            if isinstance(node, ast.ImportFrom):
                base = _base(node, _package(name, path))
                if base.split(".")[0] in top:
                    for a in node.names:
                        imported[a.asname or a.name] = (base, a.asname == a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname and a.name.split(".")[0] in top:
                        imported[a.asname] = (a.name, a.asname == a.name)
        passed = []
        for bound, (source, as_itself) in sorted(imported.items()):
            if bound in listed:
                how = "listed in __all__"
            elif as_itself:
                how = "imported as itself"
            elif bound not in used:
                how = "imported and never used here"
            else:
                continue
            passed.append(bound)
            found.append(f"{where}: {bound} (from {source}, {how})")
        rest = [
            node
            for node in tree.body
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
            and not (isinstance(node, ast.ImportFrom) and node.module == "__future__")
            and not _dunder_all([node])
        ]
        if passed and all(isinstance(node, ast.Import | ast.ImportFrom) for node in rest):
            found.append(f"{where}: a shim, its whole body imports from elsewhere")
    return found


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_module_imports_in_a_cycle():
    assert _cycles(_imports(_modules())) == []


def test_layers_import_only_downwards():
    upward = []
    for module, targets in _imports(_modules()).items():
        if module == "iml":  # the package re-exports the public API
            continue
        for target in targets:
            a, b = _top(module), _top(target)
            if a != b and b and LAYER[b] > LAYER[a]:
                upward.append(f"{module} -> {target}")
            if {a, b} == {"models", "data"}:
                upward.append(f"{module} -> {target} (models and data are independent)")
    assert upward == []
    # every top-level module or package has its layer
    assert {_top(m) for m in _modules()} - {""} <= set(LAYER)


#: The re-exports in ``iml/`` today, as ``file: name``, to be removed (each name imported from the
#: module that defines it): the strict xfail below turns into a failure once all are gone (then
#: empty this list), and the test after it fails on a new one, or on an entry here that is fixed.
def test_no_module_re_exports_a_name_of_another_module():
    assert _reexports(_modules()) == []


def _tree(root: Path, sources: dict[str, str]) -> dict[str, Path]:
    """A fake package under ``root``: ``sources`` maps each file's path in it to its text."""
    for relative, text in sources.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return _modules(root / "pkg")


def test_the_checks_catch_a_planted_shim_and_a_planted_cycle(tmp_path):
    modules = _tree(
        tmp_path,
        {
            # a package's __init__.py gathers names: not a shim
            "pkg/__init__.py": "from pkg.a.one import f\n__all__ = ['f']\n",
            "pkg/a/__init__.py": "",
            "pkg/a/one.py": '"""One."""\nfrom pkg.a import two\n\ndef f():\n    return two.g()\n',
            "pkg/a/two.py": "def g():\n    from pkg.a.one import f\n\n    return f\n",
            "pkg/b.py": '"""Old home of f."""\nfrom pkg.a.one import f\n\n__all__ = ["f"]\n',
            "pkg/c.py": "from .a.one import f as f\nfrom .a import two  # noqa: F401\n"
            "import os\n\nX = os.sep\n",
            "pkg/d.py": "from pkg.a.one import f\n\n\ndef h():\n    return f()\n",
        },
    )
    # one.py and two.py, one package's modules, import each other (two.py inside a function)
    assert _cycles(_imports(modules)) == [["pkg.a.one", "pkg.a.two", "pkg.a.one"]]
    assert _reexports(modules) == [
        "pkg/b.py: f (from pkg.a.one, listed in __all__)",
        "pkg/b.py: a shim, its whole body imports from elsewhere",
        "pkg/c.py: f (from pkg.a.one, imported as itself)",
        "pkg/c.py: two (from pkg.a, imported and never used here)",
    ]


def _says_why(lines: list[str], lineno: int) -> bool:
    """Whether the import on line ``lineno`` (1-based), or the block of imports and comments
    just above it, has a comment saying "imported here: ..."."""
    i = lineno - 1
    if "imported here" in lines[i].lower():
        return True
    i -= 1
    while i >= 0:
        line = lines[i].strip()
        if "imported here" in line.lower():
            return True
        if not (line.startswith(("#", "from ", "import ")) or line.endswith(("(", ",", ")"))):
            return False
        i -= 1
    return False


def test_an_import_inside_a_function_says_why():
    unexplained = []
    for path in _modules().values():
        text = path.read_text()
        tree = _parse(path)
        if "Imports inside functions:" in (ast.get_docstring(tree) or ""):
            continue  # the module states the reason once
        lines = text.splitlines()
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom) and not _says_why(
                    lines, inner.lineno
                ):
                    unexplained.append(f"{path.relative_to(ROOT.parent)}:{inner.lineno}")
    assert sorted(set(unexplained)) == []


def test_experiments_and_benchmarks_import_only_public_iml_names():
    # What a user's own experiment can do, ours do: no private module or name of iml.
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    private = []
    for path in sorted((root / "experiments").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "iml":
                names = [*node.module.split("."), *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names if a.name.split(".")[0] == "iml"]
                names = [part for module in modules for part in module.split(".")]
            else:
                continue
            if any(name.startswith("_") for name in names):
                private.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not private, f"private iml names imported at {private}"


# ----------------------------------------------------------------------------------------------
# The tests mirror the package
# ----------------------------------------------------------------------------------------------

#: Modules with no test module of their own (a package's ``__init__.py`` needs none: it
#: re-exports its modules' names).
NO_TEST_MODULE = {
    # the input checks of iml.calibration's functions: each module's bad-input tests hold them
    "iml.calibration._checks",
    # the dtype, logit and odds tilt shared by the rules of iml.scoring
    "iml.scoring._common",
    # the derivatives and the binary solver behind iml.scoring.generic and iml.scoring.checks,
    # tested through those
    "iml.scoring._autodiff",
    # the input checks and the logit shared by the recalibrators (tests/recalibration/)
    "iml.recalibration._common",
}


def _test_module(path: Path) -> Path:
    """Where the tests of the module at ``path`` live: ``iml/a/_b.py`` -> ``tests/a/test_b.py``."""
    relative = path.relative_to(ROOT)
    return TESTS / relative.parent / f"test_{relative.stem.lstrip('_')}.py"


def test_every_module_has_its_test_module_at_the_mirrored_path():
    missing = []
    for name, path in sorted(_modules().items()):
        if path.name == "__init__.py" or name in NO_TEST_MODULE:
            continue
        if not _test_module(path).is_file():
            missing.append(f"{name}: {_test_module(path).relative_to(TESTS.parent)}")
    assert missing == []
    # the exceptions name modules that exist
    assert set(NO_TEST_MODULE) <= set(_modules())


def test_every_test_module_in_a_mirrored_folder_tests_a_module_that_exists():
    # a module renamed or removed takes its test module along
    mirrored = {_test_module(path) for path in _modules().values()}
    folders = {path.parent for path in mirrored} - {TESTS}
    orphans = [
        str(test.relative_to(TESTS.parent))
        for folder in folders
        for test in folder.glob("test_*.py")
        if test not in mirrored
    ]
    assert sorted(orphans) == []


EXPERIMENTS = ROOT.parent / "experiments"
#: The packages of ``experiments/`` whose tests belong in ``tests/experiments/``, not at the top.
EXPERIMENTS_PACKAGES = ("experiments.studies", "experiments.benchmarks")


def _experiments_modules() -> set[Path]:
    """The modules of ``experiments/``, as paths inside it (``experiments/configs/`` holds the
    default configs, checked by the tests of the commands that read them)."""
    return {
        path.relative_to(EXPERIMENTS)
        for path in EXPERIMENTS.rglob("*.py")
        if path.name != "__init__.py" and path.relative_to(EXPERIMENTS).parts[0] != "configs"
    }


def _imported_names(path: Path) -> set[str]:
    """What the file at ``path`` imports, at any depth of its code: ``import a.b`` gives ``a.b``,
    ``from a import b`` gives ``a.b``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_every_experiments_module_with_tests_has_them_at_the_mirrored_path():
    # tests/experiments/a/test_b.py tests experiments/a/b.py (or experiments/a/_b.py): a module
    # renamed or removed takes its test module along
    modules = _experiments_modules()
    orphans = []
    for test in sorted((TESTS / "experiments").rglob("test_*.py")):
        relative = test.relative_to(TESTS / "experiments")
        stem = relative.stem.removeprefix("test_")
        if not {relative.parent / f"{stem}.py", relative.parent / f"_{stem}.py"} & modules:
            where = EXPERIMENTS.relative_to(ROOT.parent) / relative.parent / f"{stem}.py"
            orphans.append(f"{test.relative_to(TESTS.parent)} (no {where})")
    assert not orphans, "test modules of no module of experiments/:\n" + "\n".join(orphans)
    # and the tests of experiments' studies and benchmarks are in the mirrored folder, not at
    # the top of tests/
    misplaced = [
        f"{test.relative_to(TESTS.parent)} imports {name}"
        for test in sorted(TESTS.glob("test_*.py"))
        for name in sorted(_imported_names(test))
        if ".".join(name.split(".")[:2]) in EXPERIMENTS_PACKAGES
    ]
    assert not misplaced, (
        "tests of experiments/ outside tests/experiments/ (move each to the path that mirrors "
        "its module):\n" + "\n".join(misplaced)
    )


# A measured figure in the source: a speed-up or slow-down, a rate, a timing of a run, or a date.
# Measurements and their history belong in docs/results/, which code may name.
_MEASUREMENT = re.compile(
    r"\b\d+(\.\d+)?\s*(x|times)\s+(faster|slower|quicker)\b"
    r"|\b(speed-?up|slow-?down)\s+of\s+\d"
    r"|\b\d+(\.\d+)?\s*(GFLOP|TFLOP|GB|MB|it)/s\b"
    r"|\b(took|takes|ran in)\s+(about\s+)?\d+(\.\d+)?\s*(ms|s|seconds|minutes|min)\b"
    r"|\b20\d\d-\d\d-\d\d\b",
    re.IGNORECASE,
)


def test_no_source_line_states_a_measured_time_ratio_or_date():
    planted = ["3.2x faster on the CPU", "at 34 GFLOP/s", "took 12.5 s", "made on 2026-11-28"]
    assert all(_MEASUREMENT.search(line) for line in planted)
    assert not _MEASUREMENT.search("several times faster; a budget of 64 MB; timeout 300 s")
    found = [
        f"{path.relative_to(ROOT.parent)}:{number}: {line.strip()}"
        for path in sorted(ROOT.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _MEASUREMENT.search(line)
    ]
    assert not found, "measured figures belong in docs/results/:\n" + "\n".join(found)
