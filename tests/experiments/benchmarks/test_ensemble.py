"""Tests of experiments.benchmarks.ensemble: the search for the largest ensemble that fits."""

import pytest


def _fits_below(capacity, calls):
    """An ``attempt`` that runs out of memory above ``capacity`` members, recording each K."""

    def attempt(k):
        calls.append(k)
        if k > capacity:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
        return {"members": k}

    return attempt


def test_largest_members_search_halves_then_reports_the_first_failure():
    from experiments.benchmarks.ensemble import search_largest

    calls = []
    found = search_largest(_fits_below(300, calls), predicted=800)
    # 800 fails, 400 fails, 200 fits; it does not grow past a K that already failed.
    assert calls == [800, 400, 200]
    assert found["members"] == 200 and found["smallest_failed_members"] == 400
    assert found["tried"] == [[800, False], [400, False], [200, True]]


def test_largest_members_search_grows_from_a_fitting_prediction_until_one_fails():
    from experiments.benchmarks.ensemble import search_largest

    calls = []
    found = search_largest(_fits_below(90, calls), predicted=64)
    assert calls == [64, 80, 96]  # grows by a quarter, in multiples of 8
    assert found["members"] == 80 and found["smallest_failed_members"] == 96
    # Out of time: the fitting prediction is reported without growing.
    calls.clear()
    found = search_largest(_fits_below(90, calls), predicted=64, seconds=0.0)
    assert calls == [64] and found["smallest_failed_members"] is None


def test_largest_members_search_raises_other_errors_and_reports_nothing_fits():
    from experiments.benchmarks.ensemble import search_largest

    assert "error" in search_largest(_fits_below(4, []), predicted=32)

    def broken(k):
        raise ValueError("a bug, not a lack of memory")

    with pytest.raises(ValueError, match="a bug"):
        search_largest(broken, predicted=32)


def test_the_headline_is_the_default_strategy_or_the_first_asked_for():
    from experiments.benchmarks.ensemble import headline_candidate

    candidates = {"baseline": 0, "vmap/xla": 1, "loop/xla": 2}
    assert headline_candidate(candidates, "loop/xla") == "loop/xla"
    assert headline_candidate(candidates, "map/mixed") == "vmap/xla"  # not the fastest


@pytest.mark.slow
def test_ensemble_benchmark_interleaves_every_candidate(tmp_path, capsys, monkeypatch):
    # A tiny DenseNet (one layer of one block) keeps the compiles short; the tests' 8 CPU
    # devices add the default strategy on the trainer's mesh, which heads the record.
    import json
    import statistics

    from _benchmark_records import assert_headline, fake_cpuinfo, last_json_line

    import iml.models
    from experiments.benchmarks import ensemble

    real = iml.models.densenet_small

    def tiny(**kwargs):
        return real(block_config=(1,), growth_rate=2, bn_size=1, num_init_features=4, **kwargs)

    monkeypatch.setattr(iml.models, "densenet_small", tiny)
    cpu = fake_cpuinfo(monkeypatch, tmp_path)
    out = tmp_path / "ensemble.json"
    argv = ["--members", "2", "--batch", "2", "--size", "8", "--strategies", "vmap/xla"]
    argv += ["--runs", "3", "--host-devices", "1", "--host-memory", "system"]
    summary = ensemble.main([*argv, "--out", str(out)])
    assert last_json_line(capsys.readouterr().out) == summary
    ours = summary["headline_strategy"]
    assert ours == summary["default_strategy"] and ours.startswith("mesh")
    assert_headline(summary, runs=3, ours=ours, cpu=cpu)
    assert summary["order"] == [ours, "baseline", "vmap/xla"]
    details = json.loads(out.read_text())["details"]
    warm = summary["warm_s"]
    vmap = [b / v for b, v in zip(warm["baseline"], warm["vmap/xla"], strict=True)]
    assert details["vmap/xla"]["ratio"] == pytest.approx(statistics.median(vmap))
    assert summary["strategies"]["vmap/xla"] == round(statistics.median(vmap), 3)
    assert details[ours]["first_call_seconds"] == summary["cold_s"][ours]
    with pytest.raises(SystemExit):
        ensemble.main(["--runs", "2", "--out", str(out)])
