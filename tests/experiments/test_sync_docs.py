"""The documents' generated tables equal what their records give; the script that writes them works.

Each generated table of the README and the results' READMEs is declared once, with the function
that renders it from its stored record (:mod:`experiments.doc_tables`, or the study's module);
``experiments.sync_docs`` writes them into the documents and, with ``--check``, fails where one
differs. Each document is checked here as a whole, and the mechanism itself on small files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import sync_docs
from experiments.sync_docs import END_MARKER, REGENERATE_COMMAND, Table, check, declarations
from experiments.sync_docs import documents as documents_of

TABLES = declarations()
DOCUMENTS = documents_of(TABLES)


def _problems(report: sync_docs.Report) -> str:
    lines = [str(finding) for finding in report.findings]
    return "\n".join([*lines, f"rewrite the tables from their records with `{REGENERATE_COMMAND}`"])


# ---------------------------------------------------------------------------------------------
# The documents


def test_the_documents_are_found():
    assert "docs/howto/gpus_and_clusters.md" in DOCUMENTS  # a page of the site
    assert "docs/results/reproduce_digits/README.md" in DOCUMENTS
    assert all((sync_docs.REPO_ROOT / where).is_file() for where in DOCUMENTS)


def test_each_table_is_declared_once():
    names = [(table.where, table.name) for table in TABLES]
    assert len(names) == len(set(names))


@pytest.mark.slow
@pytest.mark.parametrize("where", DOCUMENTS)
def test_document_tables_agree_with_their_records(where: str):
    report = check(where, TABLES)
    assert report.in_sync, _problems(report)
    assert report.tables > 0


def test_every_generated_block_in_the_documents_is_declared():
    """A block in a document that declares no table would escape the check: the README, the
    site's pages and the records' READMEs (the build's own output left out)."""
    docs = sync_docs.REPO_ROOT / "docs"
    pages = [
        p for p in docs.rglob("*.md") if p.relative_to(docs).parts[0] not in ("_build", "studies")
    ]
    for path in [sync_docs.REPO_ROOT / "README.md", *sorted(pages)]:
        if "<!-- generated:" in path.read_text():
            where = path.relative_to(sync_docs.REPO_ROOT).as_posix()
            assert where in DOCUMENTS, f"{where} has a generated block and no declared table"


def test_no_phrase_matcher_is_left():
    assert not (sync_docs.REPO_ROOT / "experiments" / "doc_figures.py").exists()


# ---------------------------------------------------------------------------------------------
# The mechanism, on small files


def _table_doc(rows: str) -> str:
    start = sync_docs.marker("results")
    return f"Results:\n\n{start}\n| β | ECE |\n|---|---|\n{rows}{END_MARKER}\n\nThe end: 0.12.\n"


def _write(tmp_path: Path, text: str, name: str = "doc.md") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


RESULTS_TABLE = "| β | ECE |\n|---|---|\n| 0.5 | 0.010 |\n| 0.9 | 0.031 |\n| 0.99 | 0.040 |"


def test_a_generated_table_is_rewritten_whole_between_its_markers(tmp_path: Path):
    _write(tmp_path, _table_doc("| 0.5 | 0.010 |\n| 0.9 | 0.020 |\n"))
    report = check("doc.md", [Table("results", "doc.md", lambda: RESULTS_TABLE)], root=tmp_path)
    (finding,) = report.findings
    assert str(finding) == (
        "doc.md:7: table results: the text says '| 0.9 | 0.020 |', "
        "its record gives '| 0.9 | 0.031 |'"
    )
    assert finding.fixable and (report.tables, report.changed) == (1, 1)
    assert report.text == _table_doc("| 0.5 | 0.010 |\n| 0.9 | 0.031 |\n| 0.99 | 0.040 |\n")
    # the prose around the table is the author's: nothing outside the markers changes
    assert report.text.endswith("The end: 0.12.\n")


def test_check_fails_on_a_table_that_differs_and_rewriting_fixes_it(
    tmp_path: Path, capsys, monkeypatch
):
    _write(tmp_path, _table_doc("| 0.5 | 0.010 |\n"))
    tables = [Table("results", "doc.md", lambda: RESULTS_TABLE)]
    monkeypatch.setattr(sync_docs, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(sync_docs, "declarations", lambda: tables)
    assert sync_docs.main(["--check"]) == 1
    err = capsys.readouterr().err
    says = "the text says 3 lines, its record gives '| 0.9 | 0.031 |'"
    assert f"doc.md:7: table results: {says}" in err
    assert err.rstrip().endswith(f"`{REGENERATE_COMMAND}`")
    assert (tmp_path / "doc.md").read_text() == _table_doc("| 0.5 | 0.010 |\n")
    assert sync_docs.main([str(tmp_path / "doc.md")]) == 0
    assert "wrote doc.md (1 rewritten)" in capsys.readouterr().out
    assert sync_docs.main(["--check"]) == 0
    assert "1 tables in 1 document agree with their records" in capsys.readouterr().out


def test_a_table_without_its_markers_and_markers_without_a_table_are_errors(tmp_path: Path):
    _write(tmp_path, _table_doc("| 0.5 | 0.010 |\n"))
    other = Table("other", "doc.md", lambda: "| a |")
    messages = sorted(str(f) for f in check("doc.md", [other], root=tmp_path).findings)
    assert messages == [
        f"doc.md: table other: 0 blocks marked `{sync_docs.marker('other')}`, expected one",
        "doc.md:4: table results: no table of that name is declared",
    ]


def test_a_record_that_fails_is_reported(tmp_path: Path):
    _write(tmp_path, _table_doc("| 0.5 | 0.010 |\n"))

    def broken() -> str:
        return json.loads("{}")["ratio"]

    (finding,) = check("doc.md", [Table("results", "doc.md", broken)], root=tmp_path).findings
    assert finding.message == "its record failed: KeyError: 'ratio'" and not finding.fixable


def test_unbalanced_markers_are_errors(tmp_path: Path):
    _write(tmp_path, f"{sync_docs.marker('a')}\n| x |\n{sync_docs.marker('b')}\n")
    messages = [f.message for f in check("doc.md", [], root=tmp_path).findings]
    assert messages == [
        "line 3: block b starts inside block a",
        f"block b has no {END_MARKER}",
    ]


def test_the_rewrite_is_idempotent(tmp_path: Path):
    _write(tmp_path, _table_doc("| 0.5 | 0.010 |\n"))
    tables = [Table("results", "doc.md", lambda: "| β | ECE |\n|---|---|\n| 0.5 | 0.011 |")]
    first = check("doc.md", tables, root=tmp_path)
    assert first.changed == 1
    (tmp_path / "doc.md").write_text(first.text)
    second = check("doc.md", tables, root=tmp_path)
    assert second.in_sync and second.changed == 0 and second.text == first.text
