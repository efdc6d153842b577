"""Test of experiments.benchmarks.sweep_train: a tiny run's record, its interleaved runs and its
equal quality.

Speed targets are measured by running the benchmarks themselves, never here.
"""

import functools
import json

import jax
import pytest
from _benchmark_records import assert_headline, fake_cpuinfo, last_json_line


@pytest.mark.slow
def test_sweep_train_benchmark_reports_ratio_and_equal_quality(
    shared_data_path, capsys, tmp_path, monkeypatch
):
    from experiments.benchmarks import sweep_train

    cpu = fake_cpuinfo(monkeypatch, tmp_path)
    argv = ["--data-dir", str(shared_data_path("uci-adult")), "--rows", "3000"]
    argv += ["--n-betas", "2", "--seeds", "2", "--baseline-models", "10", "--jobs", "1"]
    # this process's JAX started long before: glibc's and JAX's defaults, said in the record
    argv += ["--cache-dir", str(tmp_path / "jax_cache"), "--runs", "3", "--host-memory", "system"]
    out = tmp_path / "sweep_train.json"
    before = jax.config.jax_compilation_cache_dir
    report = sweep_train.main([*argv, "--out", str(out)])
    # the benchmark's persistent cache is its own: the process's setting comes back
    assert jax.config.jax_compilation_cache_dir == before
    assert any((tmp_path / "jax_cache").iterdir())
    assert last_json_line(capsys.readouterr().out) == report == json.loads(out.read_text())
    assert_headline(report, runs=3, cpu=cpu)
    assert report["scale"] == {"baseline": 2.0}  # 10 of the 20 models timed, scaled
    assert report["peak_rss_gb"] > 0
    # --host-memory system leaves the process as it was (an earlier test may have kept memory)
    from iml.training.host import host_memory_record

    assert report["host_memory"] == host_memory_record()
    assert all(r["minor_faults"] >= 0 for r in report["warm_process"]["ours"])
    # the cold call made the programs; the warm runs, apart, little (eager operations' tracing)
    assert report["compile_s"] > 0
    assert len(report["warm_compile_s"]) == 3
    assert max(report["warm_compile_s"]) < report["compile_s"] / 10
    assert report["compile_cache"]["entries_before"] == 0
    assert (
        "2 betas x 10 rotations = 20 models, each a distinct fit (2 seeds asked, 1 fitted"
        in (report["work"])
    )
    assert report["warnings"] and "2 seeds asked of a sweep fitted exactly" in report["warnings"][0]
    assert report["achieved_gflops"] > 0 and report["gemm_gflops"] > 0
    # The reference product is timed in every round, after both sides, and each round's share
    # is ours' rate over the product's in that round.
    assert report["order"] == ["ours", "baseline", "gemm"]
    ours_rates = report["achieved_gflops_rounds"]["rounds"]
    gemm_rates = report["gemm_gflops_rounds"]["rounds"]
    share = report["share_of_gemm"]
    assert len(ours_rates) == len(gemm_rates) == len(share["rounds"]) == 3
    for a, b, ratio in zip(ours_rates, gemm_rates, share["rounds"], strict=True):
        assert ratio == pytest.approx(a / b, rel=0.02)
    assert share["range"] == [min(share["rounds"]), max(share["rounds"])]
    assert share["range"][0] <= share["median"] <= share["range"][1]
    assert report["gemm_gflops"] == pytest.approx(report["gemm_gflops_rounds"]["median"], 0.01)
    # The exact fits are at least as good as scikit-learn's, and the corrected ECEs agree.
    assert report["objective_ours_lower_or_equal"]
    assert report["corrected_ece_diff_max"] < 0.005
    # Against scikit-learn's exact solver, objectives and log-likelihoods agree within 1e-3.
    assert report["objective_rel_diff_vs_exact_max"] < 1e-4
    assert report["loglik_rel_diff_vs_exact_max"] < 1e-3


@pytest.mark.slow
def test_default_sweep_benchmark_chooses_penalties_as_scikit_learn_does(
    shared_data_path, capsys, tmp_path, monkeypatch
):
    from experiments.benchmarks import sweep_train
    from iml.pipeline import report as report_module

    cpu = fake_cpuinfo(monkeypatch, tmp_path)
    # The report it times, without the tests' simulated size and power (their own tests are
    # tests/pipeline/test_reveal.py's): this test checks the benchmark's bookkeeping.
    reveal = functools.partial(report_module._reveal, simulate=False)
    monkeypatch.setattr(report_module, "_reveal", reveal)
    argv = ["--data-dir", str(shared_data_path("uci-adult")), "--rows", "3000", "--default"]
    argv += ["--n-betas", "2", "--baseline-models", "10", "--jobs", "1", "--runs", "3"]
    argv += ["--host-memory", "system"]
    argv += ["--cache-dir", str(tmp_path / "jax_cache"), "--out", str(tmp_path / "d.json")]
    report = sweep_train.main(argv)
    assert last_json_line(capsys.readouterr().out) == report
    assert_headline(report, runs=3, cpu=cpu)
    assert report["scale"] == {"baseline": 2.0}
    assert "2 betas x 10 rotations = 20 members, each fitted at the 7 penalties" in report["work"]
    assert sum(report["chosen_l2_ours"].values()) == 20
    assert report["command_s"] is None  # a slice of the rows is not the command's work
    assert report["sweep_s"] > 0 and report["outputs_s"] > 0 and report["report_share"] > 0
    # The solver's phases, each with its arithmetic rate beside the matrix product's.
    phases = report["phases"]
    assert [p["phase"] for p in phases] == [
        "the path of betas at l2 = 1",
        *[f"l2 = {level:g} from the level above" for level in (0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6)],
        "the chosen penalty's fit carried on to the tolerance",
    ]
    assert phases[0]["calls"] >= 1 and all(p["calls"] == 1 for p in phases[1:])
    for phase in phases:
        assert phase["seconds"] > 0 and phase["gflops"] >= 0
        assert phase["share_of_gemm"] == pytest.approx(
            phase["gflops"] / report["gemm_gflops"], abs=2e-3
        )
    # Against scikit-learn's exact paths, the same penalties and, where the penalty is the same,
    # the same out-of-fold losses; pooled over each sliced beta's rotations, too. (One member of
    # these ten, beta = 0.01 in rotation 1, lies where the rule's choice turns on its validation
    # losses' last digits: scikit-learn's exact path keeps 1e-4 there, and fits within the
    # tolerance may keep a smaller penalty.)
    # A member that keeps another penalty is bounded too: the validation loss it was chosen by
    # within 2 % of the reference's chosen level's, its out-of-fold loss within 3 % (1.6 % and
    # 1.9 % on this slice).
    exact = report["vs_exact"]
    assert exact["chosen_l2_equal_share"] >= 0.9
    assert exact["oof_log_loss_rel_diff_max_same_penalty"] < 0.01
    assert all(abs(d) < 0.01 for d in exact["oof_log_loss_rel_diff_pooled"].values())
    assert exact["val_loss_rel_diff_max"] < 0.02 and exact["oof_log_loss_rel_diff_max"] < 0.03
    assert exact["corrected_ece_diff_max"] < 0.005
    assert report["vs_baseline"]["chosen_l2_equal"].endswith("of 10")


@pytest.mark.slow
def test_a_run_stopped_after_its_rounds_keeps_their_record(shared_data_path, tmp_path, monkeypatch):
    from experiments.benchmarks import sweep_train
    from iml.pipeline import sweep

    def stopped(*args, **kwargs):  # as a time limit would stop it, after the timed rounds
        raise RuntimeError("stopped")

    monkeypatch.setattr(sweep, "run_sweep", stopped)
    argv = ["--data-dir", str(shared_data_path("uci-adult")), "--rows", "3000", "--n-betas", "2"]
    argv += ["--baseline-models", "10", "--jobs", "1", "--runs", "3", "--host-memory", "system"]
    out = tmp_path / "sweep_train.json"
    argv += ["--cache-dir", str(tmp_path / "jax_cache"), "--out", str(out)]
    with pytest.raises(RuntimeError, match="stopped"):
        sweep_train.main(argv)
    record = json.loads(out.read_text())
    assert record["benchmark"] == "sweep_train" and record["partial"].startswith("the timed")
    assert len(record["ratios"]) == 3 and record["ratio"] > 0 and record["runs"] == 3
