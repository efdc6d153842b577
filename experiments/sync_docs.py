"""Write the documents' generated tables from their records, and check that they agree.

A results table in a Markdown document (a page of the site under ``docs/``, a record's README
``docs/results/*/README.md``, or the README) may stand between two marker lines::

    <!-- generated: NAME (python -m experiments.sync_docs) -->
    | ... the table ... |
    <!-- /generated -->

Each such block is declared once as a :class:`Table`: its ``name``, the document it is in and the
function that renders it from its stored record. A study's tables live in the study's module
(``experiments/studies/<study>.py``, its ``TABLES``), the others in :mod:`experiments.doc_tables`.
The prose around a table is not checked: it explains the set-up and quotes no number that its
record does not hold nearby.

Run from the repository root::

    python -m experiments.sync_docs                   # rewrite every table from its record
    python -m experiments.sync_docs docs/howto/gpus_and_clusters.md  # only the named ones
    python -m experiments.sync_docs --check           # only report the tables out of sync
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from iml.pipeline import atomic_write_bytes

REPO_ROOT = Path(__file__).resolve().parents[1]
REGENERATE_COMMAND = "python -m experiments.sync_docs"
END_MARKER = "<!-- /generated -->"
_START = re.compile(r"^<!-- generated: (.+?) \(" + re.escape(REGENERATE_COMMAND) + r"\) -->$")


def marker(name: str) -> str:
    """The line that opens the generated block ``name``."""
    return f"<!-- generated: {name} ({REGENERATE_COMMAND}) -->"


@dataclasses.dataclass(frozen=True)
class Table:
    """The block ``name`` of the document ``where`` (a path from the repository root), whose
    lines ``render()`` gives from its record."""

    name: str
    where: str
    render: Callable[[], str]


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing out of sync: ``fixable`` where rewriting the table from its record fixes it."""

    where: str
    line: int
    key: str
    message: str
    fixable: bool

    def __str__(self) -> str:
        place = f"{self.where}:{self.line}" if self.line else self.where
        return f"{place}: {self.key}: {self.message}"


@dataclasses.dataclass
class Report:
    """What checking a document found, and its text with every fixable finding rewritten."""

    where: str
    findings: list[Finding] = dataclasses.field(default_factory=list)
    text: str = ""
    changed: int = 0  # tables rewritten in ``text``
    tables: int = 0  # tables checked

    @property
    def in_sync(self) -> bool:
        return not self.findings


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _blocks(text: str) -> tuple[dict[str, list[tuple[int, int]]], list[str]]:
    """Each generated block's name and content spans (between its marker lines), and the marker
    errors."""
    blocks: dict[str, list[tuple[int, int]]] = {}
    errors, open_at, name = [], None, ""
    offset = 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        stripped = line.strip()
        start = _START.match(stripped)
        if start:
            if open_at is not None:
                errors.append(f"line {number}: block {start[1]} starts inside block {name}")
            open_at, name = offset + len(line), start[1]
        elif stripped == END_MARKER:
            if open_at is None:
                errors.append(f"line {number}: {END_MARKER} without a block to end")
            else:
                blocks.setdefault(name, []).append((open_at, offset))
                open_at = None
        offset += len(line)
    if open_at is not None:
        errors.append(f"block {name} has no {END_MARKER}")
    return blocks, errors


def check(where: str, tables: Iterable[Table], root: Path = REPO_ROOT) -> Report:
    """Check the tables of ``where`` against their records; ``report.text`` is the document with
    every table rendered anew."""
    text = (root / where).read_text()
    report = Report(where, text=text)
    tables = [table for table in tables if table.where == where]

    def find(line: int, key: str, message: str, fixable: bool = False) -> None:
        report.findings.append(Finding(where, line, key, message, fixable))

    blocks, errors = _blocks(text)
    for error in errors:
        find(0, "generated blocks", error)
    for name in sorted(set(blocks) - {table.name for table in tables}):
        find(_line(text, blocks[name][0][0]), f"table {name}", "no table of that name is declared")
    edits = []
    for table in tables:
        report.tables += 1
        key = f"table {table.name}"
        spans = blocks.get(table.name, [])
        if len(spans) != 1:
            find(0, key, f"{len(spans)} blocks marked `{marker(table.name)}`, expected one")
            continue
        start, end = spans[0]
        try:
            rendered = table.render().rstrip("\n") + "\n"
        except Exception as error:  # a record that fails is reported like any other finding
            find(_line(text, start), key, f"its record failed: {type(error).__name__}: {error}")
            continue
        current = text[start:end]
        if current == rendered:
            continue
        old, new = current.splitlines(), rendered.splitlines()
        i = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
        if i is None:
            i = min(len(old), len(new))
            says = f"{len(old)} lines" if len(old) < len(new) else repr(old[i])
            gives = repr(new[i]) if len(old) < len(new) else f"{len(new)} lines"
        else:
            says, gives = repr(old[i]), repr(new[i])
        find(_line(text, start) + i, key, f"the text says {says}, its record gives {gives}", True)
        edits.append((start, end, rendered))
    for start, end, rendered in sorted(edits, reverse=True):
        text = text[:start] + rendered + text[end:]
    report.text, report.changed = text, len(edits)
    report.findings.sort(key=lambda f: (f.line, f.key))
    return report


def declarations() -> list[Table]:
    """Every generated table of the documents: :mod:`experiments.doc_tables`' and the studies'."""
    from experiments import doc_tables
    from experiments.studies import (
        compare_sklearn,
        multiclass_reveal_power,
        pneumoniamnist_schedules,
        reveal_size_power,
        revealed_information,
        well_specified_sweeps,
    )

    studies = (pneumoniamnist_schedules, revealed_information, reveal_size_power,
               well_specified_sweeps, multiclass_reveal_power, compare_sklearn)  # fmt: skip
    return [*doc_tables.TABLES, *(table for study in studies for table in study.TABLES)]


def documents(tables: Iterable[Table]) -> list[str]:
    """The files that ``tables`` are in, in name order (the README first)."""
    return sorted({t.where for t in tables}, key=lambda where: (where != "README.md", where))


def _selected(names: Sequence[str], known: list[str]) -> list[str]:
    if not names:
        return known
    chosen = [Path(os.path.relpath(Path(name).resolve(), REPO_ROOT)).as_posix() for name in names]
    unknown = [name for name, where in zip(names, chosen, strict=True) if where not in known]
    if unknown:
        raise ValueError(
            f"documents: no tables are declared in {', '.join(unknown)} "
            f"(they are in: {', '.join(known)})"
        )
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "documents",
        nargs="*",
        help="documents to rewrite, e.g. docs/results/revealed/README.md (default: all)",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a table is out of sync"
    )
    args = parser.parse_args(argv)
    tables = declarations()
    try:
        chosen = _selected(args.documents, documents(tables))
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    reports = [check(where, tables, root=REPO_ROOT) for where in chosen]
    findings = [f for report in reports for f in report.findings]
    if not args.check:
        for report in reports:
            if report.changed:
                atomic_write_bytes(REPO_ROOT / report.where, report.text.encode("utf-8"))
                print(f"wrote {report.where} ({report.changed} rewritten)", flush=True)
        findings = [f for f in findings if not f.fixable]
    if findings:
        for finding in findings:
            print(finding, file=sys.stderr)
        if any(f.fixable for f in findings):
            print(f"rewrite them from their records with `{REGENERATE_COMMAND}`", file=sys.stderr)
        return 1
    if args.check:
        total = sum(r.tables for r in reports)
        plural = "s" * (len(reports) != 1)
        print(f"{total} tables in {len(reports)} document{plural} agree with their records")
    return 0


if __name__ == "__main__":
    # The declarations are instances of the importable module's classes, not of __main__'s.
    from experiments import sync_docs

    sys.exit(sync_docs.main())
