"""Tests for tools.profile_conv: lax.conv against the taps forward, by map size."""

from __future__ import annotations

import json

import tools.profile_conv as profile_conv


def test_profile_conv_times_both_forwards_and_prints_json(monkeypatch, capsys):
    monkeypatch.setattr(profile_conv, "SHAPES", ((2, 5), (1, 9)))
    summary = profile_conv.main(["--repeats", "1", "--cin", "8", "--cout", "4"])
    assert [(r["batch"], r["side"]) for r in summary["rows"]] == [(2, 5), (1, 9)]
    for row in summary["rows"]:
        assert row["conv_ms"] > 0 and row["taps_ms"] > 0
        assert abs(row["ratio"] - row["conv_ms"] / row["taps_ms"]) < 1e-12
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == summary


def test_profile_conv_refuses_no_repeats(capsys):
    import pytest

    with pytest.raises(SystemExit):
        profile_conv.main(["--repeats", "0"])
    assert "--repeats must be at least 1" in capsys.readouterr().err
