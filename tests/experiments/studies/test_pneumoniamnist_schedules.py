"""experiments.studies.pneumoniamnist_schedules: its stored record, and the table that states it."""

import json
from pathlib import Path

import pytest

from experiments.studies import pneumoniamnist_schedules as S

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "docs" / "results" / "pneumoniamnist_schedules"


@pytest.mark.slow
def test_the_stored_point_estimates_are_what_the_experiment_computes():
    stored = {r["schedule"]: r for r in json.loads((FOLDER / "ratios.json").read_text())}
    assert list(stored) == list(S.SCHEDULES)
    for name in ("6 epochs", "floor 1e-4, 4 seeds, mean logit"):
        fresh = S.schedule_record(name, S.RESULTS, n_bootstrap=20, seed=0)
        for field in ("ece_0.99_corrected", "ece_0.5", "difference", "ratio"):
            assert fresh[field] == pytest.approx(stored[name][field], abs=1e-4), (name, field)


def test_the_stored_seed_record_is_what_the_study_computes():
    stored = json.loads((FOLDER / "seeds.json").read_text())
    assert S.seed_record(S.RESULTS) == stored
    recipes = list(stored["recipes"].values())
    assert [len(r["seeds"]) for r in recipes] == [4, 4]


def test_the_tables_state_the_records():
    ratios = json.loads((FOLDER / "ratios.json").read_text())
    table = S.schedules_table(ratios)
    assert len(table.splitlines()) == 2 + len(ratios)
    first = ratios[0]
    lo, hi = first["difference_interval"]
    assert f"{first['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}]" in table.splitlines()[2]
    seeds = S.seeds_table(json.loads((FOLDER / "seeds.json").read_text()))
    assert "Welch" in seeds.splitlines()[-1]


def test_a_missing_results_folder_is_named(tmp_path, capsys):
    assert S.main(["--results", str(tmp_path), "--schedules", "6 epochs"]) == 2
    assert "pneumoniamnist_schedules: error:" in capsys.readouterr().err
