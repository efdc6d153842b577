"""experiments.studies.revealed_information: iml reveal's replicates, its record and table."""

import json
from pathlib import Path

import pytest

from experiments.studies import revealed_information as S

ROOT = Path(__file__).resolve().parents[3]
RECORD = ROOT / "docs" / "results" / "revealed" / "information_differences.json"


@pytest.mark.slow
def test_the_stored_record_is_what_the_study_computes():
    stored = {r["run"]: r for r in json.loads(RECORD.read_text())}
    assert list(stored) == list(S.RUNS)
    fresh = S.run_record("digits")
    assert fresh["marginal_matches_revealed"]  # the replicates are iml reveal's own
    for old, new in zip(stored["digits"]["differences"], fresh["differences"], strict=True):
        assert new["difference"] == pytest.approx(old["difference"], abs=1e-6)
        assert new["interval"] == pytest.approx(old["interval"], abs=1e-6)
    assert all(r["marginal_matches_revealed"] for r in stored.values())


def test_the_table_states_each_pair_of_the_record():
    records = json.loads(RECORD.read_text())
    table = S.render_table(records)
    rows = [line for line in table.splitlines()[2:]]
    assert len(rows) == sum(len(r["differences"]) for r in records)
    first = records[0]["differences"][1]  # digits, 0.5 - 0.99
    lo, hi = first["interval"]
    assert f"{first['difference']:+.4f} [{lo:+.4f}, {hi:+.4f}]" in rows[1]
