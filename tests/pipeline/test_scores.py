"""A run's scoring from its stored member batches (``iml.pipeline.scores``): a stored sweep
reported again gives its stored table, with other bins the table of a sweep run at those bins,
and runs it cannot report are refused before any work."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from _sweep_tables import simulated_table

from iml.pipeline.report import report_run, report_settings
from iml.pipeline.scores import stored_scores
from iml.pipeline.store import RunStore
from iml.pipeline.sweep import run_sweep

#: Every test here reads a sweep trained and stored by the module's fixture.
pytestmark = pytest.mark.slow

BETAS = [0.3, 0.6, 0.9]


def _numbers_equal(got, want, rtol=0.0):
    if isinstance(want, dict):
        assert sorted(got) == sorted(want)
        for key in want:
            _numbers_equal(got[key], want[key], rtol)
    elif isinstance(want, list):
        for g, w in zip(got, want, strict=True):
            _numbers_equal(g, w, rtol)
    elif isinstance(want, str | bool):  # a verdict's words, whether it rejected
        assert got == want
    else:
        np.testing.assert_allclose(got, want, rtol=rtol)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    x, y = simulated_table()
    root = tmp_path_factory.mktemp("sweep")
    result = run_sweep(x, y, None, BETAS, store=RunStore(root), progress=False, n_bootstrap=20)
    return root, result, (x, y)


def test_a_stored_sweep_reported_again_gives_its_stored_table_and_scores(stored, tmp_path):
    root, result, _ = stored
    again = report_run(root, tmp_path / "again", formats=())
    assert again == json.loads((root / "table.json").read_text()) == result.table
    scores = stored_scores(root, "score")
    np.testing.assert_array_equal(scores.scores, result.scores)
    np.testing.assert_array_equal(scores.best_epoch, result.best_epoch)
    np.testing.assert_array_equal(scores.l2, result.l2)
    assert scores.grid.keys == result.keys and list(scores.seeds) == list(result.seeds)
    with np.load(tmp_path / "again" / "ensemble_scores.npz") as arrays:
        np.testing.assert_array_equal(arrays["corrected"], result.corrected)


def test_other_report_settings_give_the_table_of_a_sweep_run_with_them(stored, tmp_path):
    root, _, (x, y) = stored
    settings = {"n_bins": 5, "average": "logit", "n_bootstrap": 30, "report_seed": 3}
    want = run_sweep(x, y, None, BETAS, progress=False, **settings).table
    got = report_run(root, tmp_path / "other", formats=(), eval_overrides=settings)
    _numbers_equal(got, want, rtol=1e-6)
    assert report_settings(root) == {"n_bins": 10, "average": "score", "n_bootstrap": 20,
                                     "report_seed": 0, "figures": ["png", "pdf"]}  # fmt: skip


def test_runs_it_cannot_score_are_refused_naming_why(stored, tmp_path):
    root = stored[0]
    with pytest.raises(ValueError, match=r"config\.eval\.n_bins must be"):
        report_settings(root, {"n_bins": 0})
    with pytest.raises(ValueError, match=r"config\.eval\.smooth: no such key"):
        report_settings(root, {"smooth": 1})
    with pytest.raises(ValueError, match=r"config\.eval\.average"):
        report_settings(root, {"average": "median"})
    # a sweep of a callable loss: its record names the loss but cannot rebuild it
    other = tmp_path / "callable"
    shutil.copytree(root, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["config"]["loss"] = "callable loss odd"
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="cannot rebuild"):
        report_run(other, tmp_path / "out", formats=())
