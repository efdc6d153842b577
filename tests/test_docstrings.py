"""Docstrings and comments of ``iml/`` state no measured time, speed ratio or date.

Docstrings say what the code computes, with its shapes, errors and paper reference; measured
figures and history belong in ``docs/results/``, where they are dated and reproducible. The
checker reads docstrings (of modules, classes and functions) with ``ast`` and comments with
``tokenize``, and names each offender by file, line and text.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "iml"

# A number not glued to a word, another number or an exponent (so not the 32 of float32, a hex
# digit or the 31 of 2**31).
_NUMBER = r"(?<![\w.*^])\d+(?:\.\d+)?"

#: What a measurement looks like in prose.
OFFENDERS = {
    # "14 s", "0.3 ms", "2.5 minutes", "3 h": a number, then a unit of time as a whole word
    "a measured time": re.compile(
        _NUMBER + r"\s?(?:s|ms|µs|us|sec|secs|seconds?|minutes?|mins?|hours?|h)(?![\w/])"
    ),
    # "1.5x", "2-3x", "10×": a number glued to x or ×, which ends the word (so not 2x2 or 1x1)
    "a speed ratio": re.compile(_NUMBER + r"[x×](?!\w)"),
    # "2026-11-29"
    "a date": re.compile(r"(?<!\d)20\d\d-\d\d-\d\d(?!\d)"),
}


def _docstrings(tree: ast.AST):
    """Yield ``(line, text)`` for each line of each docstring in ``tree``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = node.body
        if not (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            continue
        first = body[0].value.lineno
        for offset, text in enumerate(body[0].value.value.splitlines()):
            yield first + offset, text


def _comments(source: str):
    """Yield ``(line, text)`` for each comment in ``source``."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def find_offenders(source: str, filename: str = "<string>") -> list[str]:
    """The measured figures that ``source``'s docstrings and comments state.

    Returns:
      One ``"filename:line: <kind>: 'match' in 'text'"`` string per match, in line order.
    """
    lines = [*_docstrings(ast.parse(source, filename)), *_comments(source)]
    found = []
    for line, text in sorted(lines):
        for kind, pattern in OFFENDERS.items():
            for match in pattern.finditer(text):
                found.append(f"{filename}:{line}: {kind}: {match.group()!r} in {text.strip()!r}")
    return found


def test_no_docstring_or_comment_in_iml_states_a_measured_figure():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        found += find_offenders(source, str(path.relative_to(ROOT)))
    assert found == [], "measured figures belong in docs/results/:\n" + "\n".join(found)


def test_checker_reports_a_planted_ratio_time_and_date():
    source = (
        '"""Runs 2.3x faster, 14 s a step."""\n'
        "\n"
        "\n"
        "def f(x):  # measured on 2026-11-29: 0.5 ms\n"
        '    """A 2-3x speed-up over the loop."""\n'
        "    return x\n"
    )
    found = find_offenders(source, "planted.py")
    assert found == [
        "planted.py:1: a measured time: '14 s' in 'Runs 2.3x faster, 14 s a step.'",
        "planted.py:1: a speed ratio: '2.3x' in 'Runs 2.3x faster, 14 s a step.'",
        "planted.py:4: a measured time: '0.5 ms' in '# measured on 2026-11-29: 0.5 ms'",
        "planted.py:4: a date: '2026-11-29' in '# measured on 2026-11-29: 0.5 ms'",
        "planted.py:5: a speed ratio: '3x' in 'A 2-3x speed-up over the loop.'",
    ]


def test_checker_passes_shapes_kernels_dtypes_and_hex():
    source = (
        '"""Scores of shape [N, 2], a 2x2 kernel, 1x1 convolutions, float32, 0x1f, x2."""\n'
        "\n"
        "# in 3 steps, over 10 samples, 4 heads, 5 hsplits, 2 minibatches, below 2**31 ms\n"
    )
    assert find_offenders(source) == []
