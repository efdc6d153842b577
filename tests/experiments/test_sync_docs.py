"""The documents' figures and tables agree with their sources; the script that writes them works.

``experiments/doc_figures.py`` declares every number that the README, the results' READMEs and a
few docstrings state, each with its source (a stored record under ``docs/results``, the data, or
a default of the code) and its format; ``experiments.sync_docs`` writes them into the documents
and checks that they agree. Each document is checked here as a whole. The figures whose source
is in the shared data folder (UCI Adult and Letter) are checked apart, and skipped where the
folder is absent. The mechanism itself is tested on small files.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import iml
from experiments import doc_figures as docs
from experiments import sync_docs
from experiments.sync_docs import (
    END_MARKER,
    REGENERATE_COMMAND,
    Figure,
    Prose,
    Table,
    check,
    declarations,
    documents,
    formatted,
)
from iml.calibration import expected_calibration_error
from iml.models import DEFAULT_CONV_IMPL
from iml.training import DEFAULT_MEMBER_BATCHING

ITEMS = declarations()
DOCUMENTS = documents(ITEMS)
WITHOUT_DATA = documents([item for item in ITEMS if not item.data])
WITH_DATA = documents([item for item in ITEMS if item.data])


def _problems(report: sync_docs.Report) -> str:
    lines = [str(finding) for finding in report.findings]
    return "\n".join(
        [*lines, f"rewrite the figures from their sources with `{REGENERATE_COMMAND}`"]
    )


# ---------------------------------------------------------------------------------------------
# The documents


def test_the_documents_are_found():
    assert "README.md" in DOCUMENTS
    assert "docs/results/reproduce_digits/README.md" in DOCUMENTS
    assert all((sync_docs.REPO_ROOT / where).is_file() for where in DOCUMENTS)


def test_each_declaration_is_named_once_in_its_document():
    names = [(item.where, item.name) for item in ITEMS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("where", WITHOUT_DATA)
def test_document_agrees_with_its_sources(where: str):
    report = check(where, ITEMS, only_data=False)
    assert report.in_sync, _problems(report)
    assert report.figures + report.bounds + report.tables > 0


@pytest.mark.parametrize("where", WITH_DATA)
def test_document_agrees_with_the_shared_data(where: str, shared_data_path):
    folders = {item.data for item in ITEMS if item.where == where and item.data}
    shared = {shared_data_path(name).parent for name in sorted(folders)}  # skips where absent
    (folder,) = shared
    report = check(where, ITEMS, shared_data=folder, only_data=True)
    assert not report.skipped
    assert report.in_sync, _problems(report)
    assert report.figures > 0


def test_readme_notebooks_exist():
    """The notebooks the README names by number are there, each as .py and .ipynb."""
    readme = Prose.of((sync_docs.REPO_ROOT / "README.md").read_text()).text
    named = set(re.findall(r"`(\d\d_\w+)\.py`", readme))
    assert len(named) == 4
    for name in named:
        assert (sync_docs.REPO_ROOT / "notebooks" / f"{name}.py").is_file()
        assert (sync_docs.REPO_ROOT / "notebooks" / f"{name}.ipynb").is_file()


# ---------------------------------------------------------------------------------------------
# The records the documents compare, against each other and against the library


def test_the_pneumoniamnist_runs_score_the_same_test_images():
    # the runs' READMEs compare them observation for observation
    folds = [
        np.load(docs.RESULTS / run / "data" / "folds.npz")
        for run in (
            "pneumoniamnist_early_stopping",
            "pneumoniamnist_patience",
            "pneumoniamnist_seeds",
            "pneumoniamnist_lr_floor",
            "pneumoniamnist_lr_floor_other_betas",
            "pneumoniamnist_lr_floor_seeds",
        )
    ]
    for key in ("labels", "fold_ids"):
        for other in folds[1:]:
            np.testing.assert_array_equal(folds[0][key], other[key])


def test_the_logit_average_of_iml_gives_the_stated_mean_logit_of_four_seeds():
    # The README's 4-seed "mean logit, corrected" comes from _pmn_averages (NumPy); the library's
    # ensemble of the same members, pooled by logit, must give the same ECE.
    from iml.pipeline import aggregate_members, member_test_scores

    runs = ("pneumoniamnist_lr_floor", "pneumoniamnist_lr_floor_seeds")
    members = [
        member
        for run in runs
        for path in sorted((docs.RESULTS / run / "batches").glob("*.npz"))
        for member in member_test_scores(dict(np.load(path)))
    ]
    raw, labels = zip(*(docs._pmn_seed_scores(run) for run in runs), strict=True)
    assert np.array_equal(*labels)
    ensemble = aggregate_members(members, (0.99,), len(labels[0]), average="logit")
    assert (ensemble.sizes == 4).all()
    corrected = np.asarray(iml.loss_corrected_score(ensemble.scores[0], 0.99))
    library = float(expected_calibration_error(corrected, labels[0]))
    stated = docs._pmn_averages(np.concatenate(raw), labels[0])["mean_logit"]
    assert library == pytest.approx(stated, abs=1e-4)


def test_multiclass_record_per_class_eces_are_recomputed_from_its_scores():
    """The report's ece_by_class.json holds what the scores give, class by class."""
    unweighted, raw, corrected = docs._mc_series()
    by_class = docs.record(f"{docs._MC}/ece_by_class.json")
    for stored, scores in (
        (by_class["ones"]["raw"], unweighted),
        (by_class["w[8]=10"]["raw"], raw),
        (by_class["w[8]=10"]["loss_corrected"], corrected),
    ):
        np.testing.assert_allclose(
            stored, [docs._class_ece(scores, j) for j in range(10)], atol=1e-6
        )


def test_member_batching_defaults_are_the_fastest_measured():
    """DEFAULT_MEMBER_BATCHING's comment: its CPU and GPU choices, with the models' default
    convolutions (DEFAULT_CONV_IMPL), won every run of the records."""
    cpu, gpu = (f"{DEFAULT_MEMBER_BATCHING[b]}/{DEFAULT_CONV_IMPL[b]}" for b in ("cpu", "gpu"))
    for run in (*docs.CPU_ENSEMBLE_RUNS, "ensemble_2026-11-26_system.json"):
        r = docs.record(f"cpu_ensemble/{run}")
        assert r["default_strategy"].endswith(cpu) and r["best_strategy"] == r["default_strategy"]
    for run in (docs.GPU_F32, docs.GPU_BF16):
        assert docs.record(run)["best_strategy"] == gpu


# ---------------------------------------------------------------------------------------------
# The mechanism, on small files

STORY = """# A run

The run took 12 s and
reached 0.38 accuracy over
    all 1,797 images.
"""


def _figure(
    name="accuracy", where="doc.md", phrase="reached {} accuracy", formats=".3f", value=0.3781
):
    return Figure(name, where, phrase, formats, lambda: value)


def _write(tmp_path: Path, text: str, name: str = "doc.md") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("value", "spec", "text"),
    [
        (0.3781, ".2f", "0.38"),
        (0.0156, ".3f", "0.016"),
        (1797, ",d", "1,797"),
        (1797.0, ",d", "1,797"),
        (4.6, ",.0f", "5"),
        (2.0610038e-4, ".1es", "2.1e-4"),
        (9.5e-7, ".0es", "1e-6"),
        (9.3e-8, ".1e", "9.3e-08"),
        (0.0104, "#.2g", "0.010"),
        (0.42, "#.2g", "0.42"),
        (6, "Words", "Six"),
        (2, "words", "two"),
        (-0.0001, ".3f", "-0.000"),
        ("2026-11-27", "date", "2026-11-27"),
        ("3.11", "s", "3.11"),
        (np.float32(0.5), ".1f", "0.5"),
        (np.int64(30), "d", "30"),
        ([0.992, 0.988], ".2f", "0.99"),
    ],
)
def test_formatted_writes_the_value_as_declared(value, spec, text):
    assert formatted(value, spec) == text


@pytest.mark.parametrize(
    ("value", "spec", "error"),
    [
        ([0.992, 0.984], ".2f", "its sources disagree: 0.98, 0.99"),
        (2.5, "d", "2.5 is not an integer"),
        (11, "words", "11 has no word"),
        (None, ".2f", "a condition of the source does not hold"),
        ("2026-11", "date", "is not a date"),
        ("0.5", ".2f", "is not a number"),
    ],
)
def test_formatted_refuses_a_value_it_cannot_write(value, spec, error):
    with pytest.raises(ValueError, match=error):
        formatted(value, spec)


def test_a_declaration_has_one_known_format_per_slot():
    with pytest.raises(ValueError, match="2 slots in the phrase, 1 formats"):
        Figure("two", "doc.md", "{} and {}", ".2f", lambda: (1, 2))
    with pytest.raises(ValueError, match=re.escape("'.2x' is not a format")):
        Figure("one", "doc.md", "{}", ".2x", lambda: 1)


def test_prose_reads_line_breaks_indentation_and_comment_marks_as_one_space():
    text = "x = 1  # the run took\n    # 12 s  and\n\n  reached 0.38"
    prose = Prose.of(text)
    assert prose.text == "x = 1 # the run took 12 s and reached 0.38"
    start = prose.text.index("12")
    assert prose.span(start, start + 2) == (text.index("12"), text.index("12") + 2)


def test_a_changed_number_is_named_with_its_file_and_line_and_rewritten(
    tmp_path: Path, capsys, monkeypatch
):
    _write(tmp_path, STORY)
    figures = [_figure(), _figure("images", phrase="over all {} images", formats=",d", value=1797)]
    report = check("doc.md", figures, root=tmp_path)
    (finding,) = report.findings
    assert str(finding) == "doc.md:4: accuracy: the text says 0.38, its source gives 0.378"
    assert finding.fixable and (report.figures, report.changed) == (2, 1)
    assert report.text == STORY.replace("0.38", "0.378")
    # the command: --check reports it and the fix, and changes nothing; without it, it rewrites
    monkeypatch.setattr(sync_docs, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(sync_docs, "declarations", lambda: figures)
    assert sync_docs.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "doc.md:4: accuracy: the text says 0.38, its source gives 0.378" in err
    assert err.rstrip().endswith(f"`{REGENERATE_COMMAND}`")
    assert (tmp_path / "doc.md").read_text() == STORY
    assert sync_docs.main([str(tmp_path / "doc.md")]) == 0
    assert "wrote doc.md (1 rewritten)" in capsys.readouterr().out
    assert (tmp_path / "doc.md").read_text() == STORY.replace("0.38", "0.378")
    assert sync_docs.main(["--check"]) == 0
    assert "2 figures, 0 bounds and 0 tables in 1 document agree" in capsys.readouterr().out


def test_a_phrase_found_nowhere_or_twice_is_an_error_naming_it(tmp_path: Path, capsys, monkeypatch):
    _write(tmp_path, STORY + "\nIt reached 0.38 accuracy again.\n")
    nowhere = _figure("speed", phrase="ran at {} img/s")
    twice = _figure()
    report = check("doc.md", [nowhere, twice], root=tmp_path)
    messages = {finding.key: finding.message for finding in report.findings}
    assert messages == {
        "speed": "the phrase 'ran at {} img/s' is found nowhere",
        "accuracy": "the phrase 'reached {} accuracy' is found 2 times (lines 4, 7)",
    }
    assert not any(finding.fixable for finding in report.findings)
    # rewriting cannot fix them: the command says so and leaves the file as it is
    monkeypatch.setattr(sync_docs, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(sync_docs, "declarations", lambda: [nowhere, twice])
    before = (tmp_path / "doc.md").read_text()
    assert sync_docs.main([]) == 1
    assert "the phrase 'ran at {} img/s' is found nowhere" in capsys.readouterr().err
    assert (tmp_path / "doc.md").read_text() == before


def test_a_source_that_fails_or_gives_the_wrong_count_is_reported(tmp_path: Path):
    _write(tmp_path, STORY)

    def broken():
        raise KeyError("ratio")

    figures = [
        Figure("broken", "doc.md", "reached {} accuracy", ".2f", broken),
        Figure("short", "doc.md", "took {} s", "d", lambda: (12, 13)),
    ]
    messages = sorted(
        finding.message for finding in check("doc.md", figures, root=tmp_path).findings
    )
    assert messages == [
        "1 slots in the phrase, 2 values",
        "its source failed: KeyError: 'ratio'",
    ]


def test_a_phrase_over_comment_lines_of_a_python_file_is_rewritten_in_place(tmp_path: Path):
    code = "X = 1  # the default took\n# 12 s on\n#   the 2-core CPU\n"
    _write(tmp_path, code, "code.py")
    figure = Figure("time", "code.py", "took {} s on the {}-core CPU", "d d", lambda: (13, 2))
    report = check("code.py", [figure], root=tmp_path)
    assert [str(f) for f in report.findings] == [
        "code.py:2: time #1: the text says 12, its source gives 13"
    ]
    assert report.text == code.replace("12", "13")


def _table_doc(rows: str) -> str:
    start = f"<!-- generated: results ({REGENERATE_COMMAND}) -->"
    return f"Results:\n\n{start}\n| β | ECE |\n|---|---|\n{rows}{END_MARKER}\n\nThe end: 0.12.\n"


def test_a_generated_table_is_rewritten_whole_between_its_markers(tmp_path: Path):
    _write(tmp_path, _table_doc("| 0.5 | 0.010 |\n| 0.9 | 0.020 |\n"))
    table = Table(
        "results",
        "doc.md",
        lambda: "| β | ECE |\n|---|---|\n| 0.5 | 0.010 |\n| 0.9 | 0.031 |\n| 0.99 | 0.040 |",
    )
    report = check("doc.md", [table], root=tmp_path)
    (finding,) = report.findings
    assert str(finding) == (
        "doc.md:7: table results: the text says '| 0.9 | 0.020 |', "
        "its source gives '| 0.9 | 0.031 |'"
    )
    assert finding.fixable and report.tables == 1
    assert report.text == _table_doc("| 0.5 | 0.010 |\n| 0.9 | 0.031 |\n| 0.99 | 0.040 |\n")


def test_a_table_without_its_markers_and_markers_without_a_table_are_errors(tmp_path: Path):
    _write(tmp_path, _table_doc("| 0.5 | 0.010 |\n"))
    other = Table("other", "doc.md", lambda: "| a |")
    messages = sorted(str(f) for f in check("doc.md", [other], root=tmp_path).findings)
    assert messages == [
        f"doc.md: table other: 0 blocks marked `<!-- generated: other ({REGENERATE_COMMAND}) -->`, "
        "expected one",
        "doc.md:4: table results: no table of that name is declared",
    ]
    # a figure's number inside a generated table is the table's to write
    _write(tmp_path, _table_doc("| 0.5 | 0.010 |\n"))
    inside = _figure("inside", phrase="| 0.5 | {} |", formats=".3f", value=0.01)
    table = Table("results", "doc.md", lambda: "| β | ECE |\n|---|---|\n| 0.5 | 0.010 |")
    (finding,) = check("doc.md", [inside, table], root=tmp_path).findings
    assert finding.message == "this slot lies inside a generated table"


@pytest.mark.parametrize(
    ("spec", "value", "holds"),
    [
        (">", 0.14, True),
        (">", 0.05, False),
        ("<", 0.05, True),
        ("<=", 0.1, True),
        (">=", 0.09, False),
    ],
)
def test_a_bound_is_checked_and_never_rewritten(tmp_path: Path, spec, value, holds):
    text = "Loss calibration is not rejected (p > 0.1) at any beta.\n"
    _write(tmp_path, text)
    bound = Figure("test", "doc.md", "(p > {})", spec, lambda: value)
    report = check("doc.md", [bound], root=tmp_path)
    assert (report.bounds, report.figures, report.text) == (1, 0, text)
    if holds:
        assert report.in_sync
    else:
        (finding,) = report.findings
        assert not finding.fixable
        assert str(finding) == (
            f"doc.md:1: test: the text says 0.1, its source gives {value:g} (a bound: the text "
            f"claims the source {spec} 0.1; not rewritten)"
        )


def test_the_rewrite_is_idempotent(tmp_path: Path):
    _write(tmp_path, STORY + "\n" + _table_doc("| 0.5 | 0.010 |\n"))
    items = [
        _figure(),
        _figure("time", phrase="took {} s", formats="d", value=9),
        _figure("end", phrase="The end: {}.", formats=".3f", value=0.5),
        Table("results", "doc.md", lambda: "| β | ECE |\n|---|---|\n| 0.5 | 0.011 |"),
    ]
    first = check("doc.md", items, root=tmp_path)
    assert first.changed == 4 and all(f.fixable for f in first.findings)
    (tmp_path / "doc.md").write_text(first.text)
    second = check("doc.md", items, root=tmp_path)
    assert second.in_sync and second.changed == 0 and second.text == first.text
    assert "took 9 s" in first.text and "The end: 0.500." in first.text


def test_sources_in_the_shared_data_are_skipped_where_it_is_absent(tmp_path: Path):
    _write(tmp_path, STORY)
    (tmp_path / "shared" / "uci-x").mkdir(parents=True)
    figures = [
        Figure("rows", "doc.md", "over all {} images", ",d", lambda folder: 1797, data="uci-x"),
        Figure("other", "doc.md", "over all {} images", ",d", lambda folder: 1, data="uci-y"),
    ]
    absent = check("doc.md", figures, root=tmp_path)
    assert absent.in_sync and absent.skipped == ["uci-x", "uci-y"] and absent.figures == 0
    present = check("doc.md", figures[:1], root=tmp_path, shared_data=tmp_path / "shared")
    assert present.in_sync and present.skipped == [] and present.figures == 1
