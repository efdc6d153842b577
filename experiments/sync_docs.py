"""Write the figures that the documents state from their sources, and check that they agree.

The README, the results' READMEs (``docs/results/*/README.md``) and a few docstrings state
numbers that come from somewhere else: a stored record under ``docs/results``, the data (the
built-in digits; UCI Adult and Letter from the shared data folder), or a default of the code.
Each is declared once, in :mod:`experiments.doc_figures`, as one of:

- a :class:`Figure`: a phrase that occurs once in its file, with ``{}`` where a number stands
  (`` … `` skips any text), one format per ``{}``, and the source function that gives the values.
  Rewriting puts each value, formatted, in its place.
- a bound: a ``{}`` whose format is a comparison (``<``, ``<=``, ``>``, ``>=``). The text bounds
  the value instead of stating it ("p > 0.1" is the source's value ``>`` the stated 0.1): it is
  checked, never rewritten.
- a :class:`Table`: a block of a Markdown document between
  ``<!-- generated: NAME (python -m experiments.sync_docs) -->`` and ``<!-- /generated -->``
  (each on its own line), rendered wholesale from its source.

A phrase is found in the file's prose: a line break, the indentation around it and the comment
marks (``#``) that start the next line read as one space, as do runs of spaces, so that a phrase
can run over the lines of a paragraph, a docstring or a comment.

The formats (:func:`formatted`): a format spec of Python's ``format()`` for a number (``.3f``,
``,d``, ``#.2g``, ``.1e``, which writes ``9.3e-08``; a ``d`` format takes an integer value only);
``es`` in place of ``e`` for the exponent written short (``.1es``: ``2.1e-4``); ``words`` or
``Words`` for an integer from zero to ten written as a word (capitalised); ``date`` for a
``YYYY-MM-DD`` date; ``s`` for a string written as it is. A
source gives one value per ``{}`` (a tuple), or a list for one ``{}`` that several sources must
agree on (formatted); ``None`` where a condition of the source does not hold.

Run from the repository root::

    python -m experiments.sync_docs                   # rewrite every document from its sources
    python -m experiments.sync_docs README.md         # rewrite the named documents
    python -m experiments.sync_docs --check           # only report what is out of sync

Figures whose source is in the shared data folder (``$IML_SHARED_DATA``, else the first
``shared/data`` in the repository root or above it) are skipped, and said to be, where it is
absent.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import operator
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from iml.pipeline import atomic_write_bytes

REPO_ROOT = Path(__file__).resolve().parents[1]
REGENERATE_COMMAND = "python -m experiments.sync_docs"
DECLARATIONS_MODULE = "experiments/doc_figures.py"
SHARED_DATA_ENV = "IML_SHARED_DATA"

WORDS = "zero one two three four five six seven eight nine ten".split()
NUMBER = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e-?\d+)?"
WORD = r"(?i:\b(?:" + "|".join(WORDS) + r")\b)"
DATE = r"\d{4}-\d\d-\d\d"
STATED = f"(?:{NUMBER}|{WORD})"  # what a bound, or a phrase read without formats, finds
BOUNDS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_SPEC = re.compile(r"^[+\- ]?#?\d*[,_]?(?:\.\d+)?(?:[dfeg]|es)?$")


def _marker(name: str) -> str:
    return f"<!-- generated: {name} ({REGENERATE_COMMAND}) -->"


END_MARKER = "<!-- /generated -->"
_START = re.compile(r"^<!-- generated: (.+?) \(" + re.escape(REGENERATE_COMMAND) + r"\) -->$")


# ---------------------------------------------------------------------------------------------
# The declarations


@dataclasses.dataclass(frozen=True)
class Figure:
    """Numbers that ``where`` states at ``phrase`` (its ``{}``), each in its format, and the
    ``source`` that gives their values: ``source()``, or ``source(folder)`` where ``data`` names a
    folder of the shared data that it reads."""

    name: str
    where: str
    phrase: str
    formats: str  # one per ``{}``, separated by spaces
    source: Callable[..., Any]
    data: str = ""

    def __post_init__(self) -> None:
        slots, formats = self.phrase.count("{}"), self.formats.split()
        if slots != len(formats):
            raise ValueError(
                f"{self.where}: {self.name}: {slots} slots in the phrase, {len(formats)} formats"
            )
        for spec in formats:
            _check_format(spec)

    @property
    def slots(self) -> list[str]:
        return self.formats.split()


@dataclasses.dataclass(frozen=True)
class Table:
    """A block of ``where`` between its markers, whose lines ``render()`` (or ``render(folder)``,
    with ``data`` as for :class:`Figure`) gives."""

    name: str
    where: str
    render: Callable[..., str]
    data: str = ""


Item = Figure | Table


def is_bound(spec: str) -> bool:
    return spec in BOUNDS


def _check_format(spec: str) -> None:
    if spec in BOUNDS or spec in ("words", "Words", "date", "s") or _SPEC.match(spec):
        return
    raise ValueError(f"formats: {spec!r} is not a format (see experiments.sync_docs)")


def slot_pattern(spec: str) -> str:
    """The text that a slot of format ``spec`` matches."""
    if spec in ("words", "Words"):
        return WORD
    if spec == "date":
        return DATE
    return STATED if is_bound(spec) else NUMBER


def _plain(value: Any) -> Any:
    """A NumPy or JAX scalar as the Python number it holds."""
    item = getattr(value, "item", None)
    return item() if callable(item) and getattr(value, "ndim", 0) == 0 else value


def _integer(value: Any) -> int:
    value = _plain(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"{value!r} is not an integer")
    return int(value)


def formatted(value: Any, spec: str) -> str:
    """``value`` as the text writes it in format ``spec`` (not a bound)."""
    if isinstance(value, list):
        texts = sorted({formatted(v, spec) for v in value})
        if len(texts) != 1:
            raise ValueError(f"its sources disagree: {', '.join(texts)}")
        return texts[0]
    if value is None:
        raise ValueError("its source gives no value (a condition of the source does not hold)")
    value = _plain(value)
    if spec in ("words", "Words"):
        n = _integer(value)
        if not 0 <= n < len(WORDS):
            raise ValueError(f"{n} has no word")
        return WORDS[n].capitalize() if spec == "Words" else WORDS[n]
    if spec in ("date", "s"):
        if not isinstance(value, str) or (spec == "date" and not re.fullmatch(DATE, value)):
            raise ValueError(f"{value!r} is not a {'date' if spec == 'date' else 'string'}")
        return value
    if isinstance(value, str) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a number")
    if spec.endswith("d"):
        return format(_integer(value), spec)
    if spec.endswith("es"):
        mantissa, _, exponent = format(float(value), spec[:-1]).partition("e")
        return f"{mantissa}e{int(exponent)}"
    return format(float(value), spec)


def stated_number(text: str) -> float:
    """The number that a slot's text states (digits, or a word)."""
    plain = text.replace(",", "").lower()
    return float(WORDS.index(plain)) if plain in WORDS else float(plain)


def holds(value: Any, spec: str, text: str) -> bool:
    """Whether the bound ``value spec stated`` holds (every value of a list)."""
    if isinstance(value, list):
        return bool(value) and all(holds(v, spec, text) for v in value)
    if value is None:
        raise ValueError("its source gives no value (a condition of the source does not hold)")
    return BOUNDS[spec](float(_plain(value)), stated_number(text))


# ---------------------------------------------------------------------------------------------
# Finding a phrase in a file's prose


@dataclasses.dataclass(frozen=True)
class Prose:
    """A file's text as one line (see the module's docstring), and for each of its characters the
    offset in the file of the character it comes from."""

    text: str
    offsets: tuple[int, ...]

    @classmethod
    def of(cls, text: str) -> Prose:
        out, offsets = text, list(range(len(text)))
        for gap in (r"\s*\n\s*#*", r"\s+"):
            pieces, kept, end = [], [], 0
            for m in re.finditer(gap, out):
                pieces += [out[end : m.start()], " "]
                kept += [*offsets[end : m.start()], offsets[m.start()]]
                end = m.end()
            pieces.append(out[end:])
            kept += offsets[end:]
            out, offsets = "".join(pieces), kept
        return cls(out, tuple(offsets))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The file's span of this text's ``[start, end)`` (a span without gaps)."""
        return self.offsets[start], self.offsets[end - 1] + 1


def pattern(phrase: str, specs: Sequence[str] | None = None) -> str:
    """``phrase`` as a regular expression: each ``{}`` a group matching its format (any number
    without ``specs``), `` … `` and ``…`` any text."""
    parts = re.split(r"(\{\}| … |…)", phrase)
    slots = iter(specs) if specs is not None else None
    out = []
    for part in parts:
        if part == "{}":
            out.append(f"({slot_pattern(next(slots)) if slots else STATED})")
        elif part == " … ":
            out.append(r" (?:.*? )?")
        elif part == "…":
            out.append(".*?")
        else:
            out.append(re.escape(part))
    return "".join(out)


def find(prose: Prose, phrase: str, specs: Sequence[str] | None = None) -> list[re.Match]:
    return list(re.finditer(pattern(phrase, specs), prose.text))


@functools.cache
def _prose_of(path: Path) -> Prose:
    return Prose.of(path.read_text())


def stated(where: str, phrase: str, root: Path = REPO_ROOT) -> tuple[str, ...]:
    """The numbers at the one place where ``phrase`` occurs in ``where`` (for a source that reads
    a figure that the text states, and that no record holds)."""
    found = find(_prose_of(root / where), phrase)
    if len(found) != 1:
        raise ValueError(f"{where}: {len(found)} places read {phrase!r}, expected one")
    return found[0].groups()


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


# ---------------------------------------------------------------------------------------------
# Checking and rewriting one document


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing out of sync: ``fixable`` where rewriting from the sources fixes it."""

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
    changed: int = 0  # slots and tables rewritten in ``text``
    figures: int = 0  # slots that state a value, checked
    bounds: int = 0  # slots that bound a value, checked
    tables: int = 0  # generated tables, checked
    skipped: list[str] = dataclasses.field(default_factory=list)  # shared-data folders absent

    @property
    def in_sync(self) -> bool:
        return not self.findings


_Blocks = dict[str, list[tuple[int, int]]]  # a generated block's name: its content's spans
_Find = Callable[..., None]  # records a finding: (line, key, message, fixable=False)


@dataclasses.dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    new: str
    key: str


def _blocks(text: str) -> tuple[_Blocks, list[str]]:
    """Each generated block's name and content spans (between its marker lines), and the marker
    errors."""
    blocks: _Blocks = {}
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


def _call(item: Item, folders: dict[str, Path]) -> Any:
    function = item.source if isinstance(item, Figure) else item.render
    return function(folders[item.data]) if item.data else function()


def check(
    where: str,
    items: Iterable[Item],
    root: Path = REPO_ROOT,
    shared_data: Path | None = None,
    only_data: bool | None = None,
) -> Report:
    """Check the figures and tables ``items`` declare in ``where`` against their sources.

    Items whose ``data`` folder is not in ``shared_data`` are skipped (named in
    ``report.skipped``); ``only_data`` True or False checks only the items with or without
    ``data``. ``report.text`` is the document with every fixable finding rewritten.
    """
    text = (root / where).read_text()
    report = Report(where, text=text)
    items = [item for item in items if item.where == where]
    tables = {item.name for item in items if isinstance(item, Table)}
    if only_data is not None:
        items = [item for item in items if bool(item.data) == only_data]
    folders = {}
    for data in sorted({item.data for item in items if item.data}):
        folder = shared_data / data if shared_data is not None else None
        if folder is not None and folder.exists():
            folders[data] = folder
        else:
            report.skipped.append(data)
    items = [item for item in items if not item.data or item.data in folders]

    def find_(line: int, key: str, message: str, fixable: bool = False) -> None:
        report.findings.append(Finding(where, line, key, message, fixable))

    blocks, errors = _blocks(text)
    for error in errors:
        find_(0, "generated blocks", error)
    edits: list[_Edit] = []
    for name in sorted(set(blocks) - tables):
        find_(_line(text, blocks[name][0][0]), f"table {name}", "no table of that name is declared")
    for item in items:
        if isinstance(item, Table):
            report.tables += 1
            edits += _check_table(item, text, blocks, folders, find_)
        else:
            edits += _check_figure(item, text, blocks, folders, report, find_)
    report.text = _apply(text, edits, find_)
    report.changed = len({(e.start, e.end) for e in edits})
    report.findings.sort(key=lambda f: (f.line, f.key))
    return report


def _check_table(
    item: Table, text: str, blocks: _Blocks, folders: dict[str, Path], find_: _Find
) -> list[_Edit]:
    key = f"table {item.name}"
    spans = blocks.get(item.name, [])
    if len(spans) != 1:
        find_(0, key, f"{len(spans)} blocks marked `{_marker(item.name)}`, expected one")
        return []
    start, end = spans[0]
    try:
        rendered = _call(item, folders)
    except Exception as error:  # a source that fails is reported like any other finding
        find_(_line(text, start), key, f"its source failed: {type(error).__name__}: {error}")
        return []
    rendered = rendered.rstrip("\n") + "\n"
    current = text[start:end]
    if current == rendered:
        return []
    old, new = current.splitlines(), rendered.splitlines()
    i = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
    if i is None:
        i = min(len(old), len(new))
        says = f"{len(old)} lines" if len(old) < len(new) else repr(old[i])
        gives = repr(new[i]) if len(old) < len(new) else f"{len(new)} lines"
    else:
        says, gives = repr(old[i]), repr(new[i])
    find_(_line(text, start) + i, key, f"the text says {says}, its source gives {gives}", True)
    return [_Edit(start, end, rendered, key)]


def _check_figure(
    item: Figure,
    text: str,
    blocks: _Blocks,
    folders: dict[str, Path],
    report: Report,
    find_: _Find,
) -> list[_Edit]:
    specs, prose = item.slots, _prose_of_text(text)
    found = find(prose, item.phrase, specs)
    if len(found) != 1:
        lines = sorted({_line(text, prose.span(*m.span())[0]) for m in found})
        where = f" (lines {', '.join(map(str, lines))})" if lines else ""
        times = "nowhere" if not found else f"{len(found)} times{where}"
        find_(lines[0] if lines else 0, item.name, f"the phrase {item.phrase!r} is found {times}")
        return []
    try:
        values = _call(item, folders)
    except Exception as error:  # a source that fails is reported like any other finding
        line = _line(text, prose.span(*found[0].span())[0])
        find_(line, item.name, f"its source failed: {type(error).__name__}: {error}")
        return []
    values = values if isinstance(values, tuple) else (values,)
    if len(values) != len(specs):
        find_(0, item.name, f"{len(specs)} slots in the phrase, {len(values)} values")
        return []
    edits = []
    inside = [span for spans in blocks.values() for span in spans]
    for i, (spec, value) in enumerate(zip(specs, values, strict=True)):
        key = f"{item.name} #{i + 1}" if len(specs) > 1 else item.name
        start, end = prose.span(*found[0].span(i + 1))
        says, line = text[start:end], _line(text, start)
        if any(a <= start < b for a, b in inside):
            find_(line, key, "this slot lies inside a generated table")
            continue
        if is_bound(spec):
            report.bounds += 1
            try:
                ok = holds(value, spec, says)
            except (TypeError, ValueError) as error:
                find_(line, key, str(error))
                continue
            if not ok:
                gives = ", ".join(
                    f"{v:.6g}" for v in (value if isinstance(value, list) else [value])
                )
                find_(
                    line,
                    key,
                    f"the text says {says}, its source gives {gives} (a bound: the text claims "
                    f"the source {spec} {says}; not rewritten)",
                )
            continue
        report.figures += 1
        try:
            new = formatted(value, spec)
        except (TypeError, ValueError) as error:
            find_(line, key, str(error))
            continue
        if not re.fullmatch(slot_pattern(spec), new):
            find_(line, key, f"its source gives {new!r}, which the text cannot hold in a slot")
            continue
        if new != says:
            find_(line, key, f"the text says {says}, its source gives {new}", True)
            edits.append(_Edit(start, end, new, key))
    return edits


@functools.lru_cache(maxsize=8)
def _prose_of_text(text: str) -> Prose:
    return Prose.of(text)


def _apply(text: str, edits: list[_Edit], find_: _Find) -> str:
    """``text`` with ``edits`` made (the same edit twice counts once; overlapping ones are
    reported and left out)."""
    unique = sorted({(e.start, e.end, e.new): e for e in edits}.values(), key=lambda e: e.start)
    kept: list[_Edit] = []
    for edit in unique:
        if kept and edit.start < kept[-1].end:
            find_(_line(text, edit.start), edit.key, f"overlaps {kept[-1].key}: left as it is")
            continue
        kept.append(edit)
    for edit in reversed(kept):
        text = text[: edit.start] + edit.new + text[edit.end :]
    return text


# ---------------------------------------------------------------------------------------------
# Every document


def declarations() -> list[Item]:
    """Every figure and table that the documents state (:mod:`experiments.doc_figures`)."""
    from experiments.doc_figures import DECLARATIONS

    return list(DECLARATIONS)


def documents(items: Iterable[Item]) -> list[str]:
    """The files that ``items`` are in, in name order (the README first)."""
    return sorted({item.where for item in items}, key=lambda where: (where != "README.md", where))


def shared_data_folder() -> tuple[Path | None, str]:
    """The shared data folder (None where it is absent) and what a message calls it:
    ``$IML_SHARED_DATA`` where it is set (that path only), else the first ``shared/data`` in the
    repository root or above it (as ``tests/conftest.py`` finds it)."""
    named = os.environ.get(SHARED_DATA_ENV)
    if named:
        folder = Path(named).expanduser()
        return (folder if folder.is_dir() else None), f"${SHARED_DATA_ENV}"
    for parent in (REPO_ROOT, *REPO_ROOT.parents):
        if (parent / "shared" / "data").is_dir():
            return parent / "shared" / "data", str(parent / "shared" / "data")
    return None, "../shared/data"


def _selected(names: Sequence[str], known: list[str]) -> list[str]:
    if not names:
        return known
    chosen = [Path(os.path.relpath(Path(name).resolve(), REPO_ROOT)).as_posix() for name in names]
    unknown = [name for name, where in zip(names, chosen, strict=True) if where not in known]
    if unknown:
        raise ValueError(
            f"documents: no figures are declared in {', '.join(unknown)} "
            f"(they are in: {', '.join(known)})"
        )
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "documents", nargs="*", help="documents to rewrite, e.g. README.md (default: all)"
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a figure is out of sync"
    )
    args = parser.parse_args(argv)
    items = declarations()
    try:
        chosen = _selected(args.documents, documents(items))
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    folder, called = shared_data_folder()
    reports = [check(where, items, root=REPO_ROOT, shared_data=folder) for where in chosen]
    findings = [f for report in reports for f in report.findings]
    if not args.check:
        for report in reports:
            if report.changed:
                atomic_write_bytes(REPO_ROOT / report.where, report.text.encode("utf-8"))
                print(f"wrote {report.where} ({report.changed} rewritten)", flush=True)
        findings = [f for f in findings if not f.fixable]
    skipped = sorted({data for report in reports for data in report.skipped})
    why = f"not in the shared data folder ({called})" if folder else f"no {called} folder"
    note = f"skipped the figures from {', '.join(skipped)}: {why}" if skipped else ""
    if findings:
        for line in [*map(str, findings), note]:
            if line:
                print(line, file=sys.stderr)
        if not all(f.fixable for f in findings):
            print(
                "a phrase found nowhere or more than once, a bound that does not hold and a "
                f"source that fails need the text or the declaration ({DECLARATIONS_MODULE}) "
                "changed",
                file=sys.stderr,
            )
        if any(f.fixable for f in findings):
            print(f"rewrite them from their sources with `{REGENERATE_COMMAND}`", file=sys.stderr)
        return 1
    if args.check:
        total = [sum(getattr(r, k) for r in reports) for k in ("figures", "bounds", "tables")]
        summary = (
            f"{total[0]} figures, {total[1]} bounds and {total[2]} tables in {len(reports)} "
            f"document{'s' * (len(reports) != 1)} agree with their sources"
        )
        print(f"{summary} ({note})" if note else summary)
    elif note:
        print(note, file=sys.stderr)
    return 0


if __name__ == "__main__":
    # The declarations are instances of the importable module's classes, not of __main__'s.
    from experiments import sync_docs

    sys.exit(sync_docs.main())
