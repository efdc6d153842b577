"""The package's structure: the layers of ``iml/`` import only downwards, with no cycle; an
import inside a function states why it is there; and a module stays at one idea.

The layers, lowest first (a module may import its own layer's and lower ones):

0. ``_validation``, ``_io``, ``_bootstrap``, ``config``, ``plugins``: checks, files, resampling,
   configs, the user's modules that register losses, models and datasets;
1. ``scoring``: optimal scoring rules and their inverses (closed forms, generic autodiff rules);
2. ``losses``: the loss families and their registry, each record binding a loss to its rule;
3. ``spec``, ``grids``: ``LossSpec``, "the loss a model was trained with", read from a user,
   and grids of them;
4. ``calibration``, ``sbr``, ``recalibration``;
5. ``revealed``, ``power``: inverse machine learning on top of calibration;
6. ``plots``;
7. ``models`` and ``data``, independent of each other;
8. ``training``;  9. ``pipeline``;  10. ``cli`` and ``commands``, the command line.

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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "iml"
TESTS = Path(__file__).resolve().parent

LAYERS = [
    {"_validation", "_io", "_bootstrap", "config", "plugins"},
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

#: A module longer than this holds more than one idea, unless its opening docstring says why.
MAX_LINES = 600
#: Modules that are still to be split, at most as long as they are now: each may only shrink,
#: and leaves this list once it is under MAX_LINES.
TO_SPLIT = {}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of other ``iml`` modules, at any depth of its code."""
    edges: dict[str, set[str]] = collections.defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]  # fmt: skip
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target.startswith("iml") and target != name:
                    edges[name].add(target)
    return edges


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_module_imports_in_a_cycle():
    edges = _imports(_modules())
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for other in sorted(edges[node]):
            if state.get(other) == 1:
                cycles.append([*path[path.index(other) :], other])
            elif other not in state:
                visit(other, [*path, other])
        state[node] = 2

    for module in sorted(_modules()):
        if module not in state:
            visit(module, [module])
    assert cycles == []


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
        tree = ast.parse(text)
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


def test_modules_stay_at_one_idea():
    long = {}
    for path in sorted(ROOT.rglob("*.py")):
        key = str(path.relative_to(ROOT.parent))
        n = len(path.read_text().splitlines())
        limit = TO_SPLIT.get(key, MAX_LINES)
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if n > limit and "Longer than" not in docstring:
            long[key] = n
    assert long == {}
    # a module that was split, or shrank under the limit, leaves the list
    for key in TO_SPLIT:
        path = ROOT.parent / key
        assert path.exists() and len(path.read_text().splitlines()) > MAX_LINES, key


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
