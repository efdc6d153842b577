"""The README's Python examples run as written, and its test command is what CI runs."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.slow
def test_readme_python_examples_run():
    from iml import losses

    blocks = python_blocks((ROOT / "README.md").read_text())
    assert blocks, "README.md should show the API in a python block"
    before = set(losses.registered())
    try:
        for block in blocks:
            exec(compile(block, "README.md", "exec"), {})
    finally:  # the losses an example registers leave with it: later tests see the built-in ones
        for name in set(losses.registered()) - before:
            losses.unregister(name)


def test_readme_test_command_is_the_ci_script():
    readme = (ROOT / "README.md").read_text()
    assert "bash .ci/run" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest" in ci and "ruff check" in ci
