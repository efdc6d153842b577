"""A sweep's scoring from its stored member batches (``iml.pipeline.sweep_scores``): a stored
sweep scored again gives its stored table, with other bins the table of a sweep run at those
bins, and runs it cannot report are refused before any work."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from _sweep_tables import simulated_table

from iml.pipeline.report import report_config
from iml.pipeline.store import RunStore
from iml.pipeline.sweep import run_sweep
from iml.pipeline.sweep_scores import rescore_sweep, stored_sweep_settings

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


def test_a_stored_sweep_scored_again_gives_its_stored_table_and_scores(stored):
    root, result, _ = stored
    again = rescore_sweep(root)
    assert again.table == json.loads((root / "table.json").read_text()) == result.table
    np.testing.assert_array_equal(again.scores, result.scores)
    np.testing.assert_array_equal(again.corrected, result.corrected)
    np.testing.assert_array_equal(again.best_epoch, result.best_epoch)
    np.testing.assert_array_equal(again.l2, result.l2)
    assert again.keys == result.keys and list(again.seeds) == list(result.seeds)


def test_other_report_settings_give_the_table_of_a_sweep_run_with_them(stored):
    root, _, (x, y) = stored
    settings = {"n_bins": 5, "average": "logit", "n_bootstrap": 30, "report_seed": 3}
    want = run_sweep(x, y, None, BETAS, progress=False, **settings).table
    _numbers_equal(rescore_sweep(root, settings).table, want, rtol=1e-6)
    assert stored_sweep_settings(root) == {"n_bins": 10, "average": "score", "n_bootstrap": 20,
                                           "report_seed": 0}  # fmt: skip


def test_runs_it_cannot_score_are_refused_naming_why(stored, tmp_path):
    root = stored[0]
    with pytest.raises(ValueError, match=r"config\.eval\.n_bins must be"):
        stored_sweep_settings(root, {"n_bins": 0})
    with pytest.raises(ValueError, match=r"config\.eval\.smooth is not a setting of a sweep"):
        stored_sweep_settings(root, {"smooth": 1})
    with pytest.raises(ValueError, match=r"config\.eval\.average"):
        stored_sweep_settings(root, {"average": "median"})
    with pytest.raises(ValueError, match="report it with report_sweep_run"):
        report_config(root)  # the report of a reproduce run
    (unfinished := tmp_path / "unfinished").mkdir()
    for name in ("manifest.json", "data", "batches"):
        target = unfinished / name
        target.symlink_to(root / name, target_is_directory=(root / name).is_dir())
    with pytest.raises(ValueError, match="has not finished"):
        rescore_sweep(unfinished)

    # a sweep of a callable loss: its record names the loss but cannot rebuild it
    other = tmp_path / "callable"
    shutil.copytree(root, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["config"]["loss"] = "callable loss odd"
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="cannot rebuild"):
        stored_sweep_settings(other)
