"""Smoke tests of the benchmark scripts: they run at a tiny size and report a sane JSON line.

Speed targets are measured by running the benchmarks themselves, never here.
"""

import json

import jax
import numpy as np
import pytest

from experiments.benchmarks import scoring


def test_scoring_benchmark_reports_ratio_and_accuracy(tmp_path, capsys):
    out = tmp_path / "scoring.json"
    report = scoring.main(["--betas", "8", "--scores", "1000", "--repeats", "2", "--out", str(out)])
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last_line)["ratio"] == report["ratio"]
    assert json.loads(out.read_text())["grid"] == [8, 1000]
    assert report["ratio"] > 0
    assert set(report["results"]) == {"copy", "numpy", "jit", "into"}
    # What was timed is also correct: float32 within a few ulps of the float64 formula.
    assert report["max_relative_error_float32"] < 1e-6


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


def test_compile_seconds_counts_making_programs_not_running_them():
    import jax
    import jax.numpy as jnp

    from experiments.benchmarks.sweep import CompileSeconds

    def program(x):
        return jnp.cumsum(jnp.sin(x) * 3.0)

    x = jnp.ones(1000)
    with CompileSeconds() as first:
        jax.block_until_ready(jax.jit(program)(x))
    assert first.seconds > 0
    compiled = jax.jit(program).lower(x).compile()
    with CompileSeconds() as outer:
        with CompileSeconds() as inner:
            for _ in range(50):
                jax.block_until_ready(compiled(x))  # runs only: nothing to make
        assert inner.seconds == 0.0
        jax.block_until_ready(jax.jit(lambda x: program(x) + 1.0)(x))
    assert outer.seconds > 0 and inner.seconds == 0.0


def test_sweep_train_benchmark_reports_ratio_and_equal_quality(shared_data_path, capsys, tmp_path):
    from experiments.benchmarks import sweep_train

    argv = ["--data-dir", str(shared_data_path("uci-adult")), "--rows", "3000"]
    argv += ["--n-betas", "2", "--seeds", "2", "--baseline-models", "10", "--jobs", "1"]
    argv += ["--cache-dir", str(tmp_path / "jax_cache")]
    out = tmp_path / "sweep_train.json"
    before = jax.config.jax_compilation_cache_dir
    report = sweep_train.main([*argv, "--out", str(out)])
    # the benchmark's persistent cache is its own: the process's setting comes back
    assert jax.config.jax_compilation_cache_dir == before
    assert any((tmp_path / "jax_cache").iterdir())
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last_line) == report == json.loads(out.read_text())
    assert report["ratio"] > 0 and report["peak_rss_gb"] > 0
    assert 0 < report["ours_compile_s"] < report["ours_s"]
    assert (
        "2 betas x 10 rotations = 20 models, each a distinct fit (2 seeds asked, 1 fitted"
        in (report["work"])
    )
    assert report["warnings"] and "2 seeds asked of a sweep fitted exactly" in report["warnings"][0]
    assert report["achieved_gflops"] > 0 and report["gemm_gflops"] > 0
    # The exact fits are at least as good as scikit-learn's, and the corrected ECEs agree.
    assert report["objective_ours_lower_or_equal"]
    assert report["corrected_ece_diff_max"] < 0.005
    # Against scikit-learn's exact solver, objectives and log-likelihoods agree within 1e-3.
    assert report["objective_rel_diff_vs_exact_max"] < 1e-4
    assert report["loglik_rel_diff_vs_exact_max"] < 1e-3


def test_reveal_benchmark_reports_ratio_and_agrees_with_the_baseline(capsys):
    from experiments.benchmarks import reveal

    argv = ["--models", "6", "--rows", "3000", "--replicates", "20"]
    report = reveal.main([*argv, "--baseline-replicates", "4", "--repeats", "1"])
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last_line) == report
    assert report["ratio"] > 0 and report["ours_s"] > 0 and report["peak_rss_gb"] > 0
    assert "6 models x 3000 observations, 10 bins, 20 paired bootstrap" in report["work"]
    # Ours and the baseline loop agree on identical paired weights: G, I_k and the NIS margin to
    # float32 rounding, and the NIAC verdict (minimum cycle mean against the assignment) on each.
    assert all(diff < 1e-5 for diff in report["agreement_max_abs_diff"].values())
    assert set(report["agreement_max_abs_diff"]) == {"G", "I", "nis"}
    assert report["niac_verdicts_agree"] == "4/4"


def test_paper_scale_projection_counts_training_and_validation_passes():
    from experiments.benchmarks._projection import project_paper_experiment

    # 1,200 members, each epoch 0.7 * 112,120 training and 0.2 * 112,120 validation images.
    p = project_paper_experiment(100.0, 1000.0, epochs=10)
    per_epoch_s = 1200 * (78_484 / 100.0 + 22_424 / 1000.0)
    assert p["hours_per_epoch"] == pytest.approx(per_epoch_s / 3600)
    assert p["hours"] == pytest.approx(10 * per_epoch_s / 3600)
    assert p["hours_per_member"] == pytest.approx(10 * per_epoch_s / 3600 / 1200)
    # twice the training speed, half the training time
    faster = project_paper_experiment(200.0, 1e12, epochs=1, members=1, images=1000)
    slower = project_paper_experiment(100.0, 1e12, epochs=1, members=1, images=1000)
    assert slower["hours"] == pytest.approx(2 * faster["hours"], rel=1e-6)
    with pytest.raises(ValueError, match="epochs must be positive"):
        project_paper_experiment(100.0, 1000.0, epochs=0)


def test_a_batch_runs_the_expected_maximum_of_its_members_epochs():
    import itertools

    from experiments.benchmarks._projection import expected_batch_epochs

    epochs = np.array([6, 8, 8, 13])
    assert expected_batch_epochs(epochs, 1) == pytest.approx(epochs.mean())
    for k in (2, 3):  # every draw of k members, with replacement, equally likely
        draws = [max(d) for d in itertools.product(epochs, repeat=k)]
        assert expected_batch_epochs(epochs, k) == pytest.approx(np.mean(draws))
    assert expected_batch_epochs(epochs, 500) == pytest.approx(13, abs=1e-6)
    assert expected_batch_epochs(np.full(5, 7), 32) == pytest.approx(7)
    with pytest.raises(ValueError, match="at least 1"):
        expected_batch_epochs(np.array([0, 3]), 2)


def test_the_stored_early_stopping_run_gives_each_members_epochs():
    from experiments.benchmarks._projection import STOPPING_RUN, epochs_until_stopped

    epochs = epochs_until_stopped(STOPPING_RUN)
    stopped = np.concatenate([np.load(f)["stopped_epoch"]
                              for f in sorted(STOPPING_RUN.glob("batches/*.npz"))])  # fmt: skip
    assert epochs.shape == (30,) and np.all(stopped >= 0)  # every member stopped before the cap
    np.testing.assert_array_equal(epochs, stopped + 1)  # epoch e (from 0) is the (e + 1)th
    with pytest.raises(FileNotFoundError, match="no batches"):
        epochs_until_stopped(STOPPING_RUN / "figures")


def test_the_projection_on_cards_shares_batches_and_adds_coordination():
    from experiments.benchmarks import _projection as P

    scaling = {"coordination_s": 2.0, "meetings": [
        {"processes": 1, "join_s": 0.0, "meeting_s": 0.0},
        {"processes": 2, "join_s": 0.1, "meeting_s": 0.025},
        {"processes": 4, "join_s": 0.3, "meeting_s": 0.075},
    ]}  # fmt: skip
    # joining + 4 meetings: 0, 0.2, 0.6 s at 1, 2, 4 processes: 0.2 s more per process past two
    assert P.coordination_seconds(scaling, 1) == 0
    assert P.coordination_seconds(scaling, 2) == pytest.approx(2.0)
    assert P.coordination_seconds(scaling, 10) == pytest.approx(2.0 + 8 * 0.2)
    ours, torch = {"train": 700.0, "eval": 2000.0}, {"train": 70.0, "eval": 200.0}
    epochs = np.array([4, 6])
    out = P.project_on_cards(ours, torch, members_per_batch=3, epochs=epochs, cards=[1, 2, 7],
                             scaling=scaling, compile_s=30.0, members=7, images=1000)  # fmt: skip
    epoch_s = 1000 * (0.7 / 700 + 0.2 / 2000)
    batch_s = 3 * epoch_s * (4 / 8 + 6 * 7 / 8)  # the maximum of 3 draws is 4 with chance 1/8
    assert out["batches"] == 3 and out["batch_epochs"] == pytest.approx(4 / 8 + 6 * 7 / 8)
    one, two, seven = out["cards"]
    assert one["ours_hours"] * 3600 == pytest.approx(3 * batch_s + 30)
    assert one["torch_hours"] * 3600 == pytest.approx(7 * 10 * epoch_s * 5)
    assert two["ours_hours"] * 3600 == pytest.approx(2 * batch_s + 30 + 2.0)
    assert two["torch_hours"] * 3600 == pytest.approx(4 * 10 * epoch_s * 5)
    assert seven["ours_hours"] * 3600 == pytest.approx(batch_s + 30 + 2.0 + 5 * 0.2)
    assert one["ratio"] == pytest.approx(one["torch_hours"] / one["ours_hours"])


def test_the_projections_intervals_cover_it_and_shrink_to_it_without_spread():
    from experiments.benchmarks import _projection as P

    ours, torch = {"train": 700.0, "eval": 2000.0}, {"train": 70.0, "eval": 200.0}
    settings = {"members_per_batch": 4, "cards": [1, 3], "scaling": None, "members": 12,
                "images": 1000}  # fmt: skip
    epochs = np.array([5, 6, 6, 9, 12])
    point = P.project_on_cards(ours, torch, epochs=epochs, **settings)["cards"]
    spread = P.projection_intervals(ours, torch, ours_step_s=[1.0, 1.1, 0.9],
                                    torch_step_s=[2.0, 2.4, 1.8], epochs=epochs, replicates=300,
                                    **settings)  # fmt: skip
    for row, interval in zip(point, spread, strict=True):
        for key in ("ours_hours", "torch_hours", "ratio"):
            low, high = interval[key]
            assert low < high and low <= row[key] <= high, key
    # one epoch count and equal steps: every replicate is the projection itself
    flat = P.projection_intervals(ours, torch, ours_step_s=[1.0, 1.0], torch_step_s=[2.0],
                                  epochs=np.full(4, 7), replicates=20, **settings)  # fmt: skip
    exact = P.project_on_cards(ours, torch, epochs=np.full(4, 7), **settings)["cards"]
    for row, interval in zip(exact, flat, strict=True):
        assert interval["ratio"] == pytest.approx([row["ratio"]] * 2)


def test_paper_scale_projects_from_the_stored_h200_records(tmp_path, capsys):
    # No card here: the H200's measurements (PyTorch's steps, then K = 32 measured apart) and the
    # CPU processes' coordination give the paper's experiment on 1 to 64 cards.
    from experiments.benchmarks import _projection as P
    from experiments.benchmarks import paper_scale

    h200 = P.ROOT / "docs" / "results" / "gpu_h200" / "2026-11-27"
    records = [str(h200 / "paper_scale.json"), str(h200 / "paper_scale_k32.json")]
    out = tmp_path / "projection.json"
    report = paper_scale.main(["--card-record", *records, "--out", str(out)])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["members"] == 32 and line["ratio"] == pytest.approx(955.09 / 201.37, rel=1e-3)
    proj = report["projection"]
    assert proj["eval_source"] == "PyTorch's, for both sides" and len(proj["epochs_drawn"]) == 30
    one = proj["cards"][0]
    k32 = 32 * proj["ours_member_epoch_s"] * proj["batch_epochs"]
    assert one["ours_hours"] * 3600 == pytest.approx(38 * k32 + 110.005, rel=1e-4)
    assert one["torch_hours"] * 3600 == pytest.approx(
        1200 * proj["torch_member_epoch_s"] * proj["mean_epochs"]
    )
    hours = [row["ours_hours"] for row in proj["cards"]]
    assert hours == sorted(hours, reverse=True) and [r["cards"] for r in proj["cards"]] == [
        1, 4, 16, 64
    ]  # fmt: skip
    low, high = one["interval_95"]["ratio"]
    assert low < one["ratio"] < high and proj["bootstrap"]["replicates"] == 2000
    # a member trains to early stopping at K = 32 as long as the slowest of its batch
    assert proj["mean_epochs"] < proj["batch_epochs"] <= max(proj["epochs_drawn"])
    with pytest.raises(ValueError, match="hold no ours"):
        paper_scale.main(["--card-record", records[0], "--out", str(out)])


def test_process_scaling_splits_a_run_at_its_stored_batches():
    from experiments.benchmarks.process_scaling import components, meetings

    # two processes: batches 0, 2, 4 on process 0 and 1, 3, 5 on process 1
    stored = [10.0, 10.5, 11.0, 11.6, 12.0, 12.7]
    got = components(stored, wall_s=14.0, count=2)
    assert got == {"start_s": 10.0, "batch_s": pytest.approx(1.05), "end_s": pytest.approx(1.3),
                   "wall_s": 14.0}  # fmt: skip
    assert components([1.0, 2.0, 4.0], 5.0, 1)["batch_s"] == pytest.approx(1.5)
    with pytest.raises(ValueError, match="fewer than two"):
        components([1.0, 2.0, 3.0], 4.0, 2)
    met = meetings(2, repeats=3)  # two processes join the runtime and meet over loopback
    assert met["processes"] == 2 and 0 < met["meeting_s"] < 5 and met["join_s"] > 0


def test_paper_scale_keeps_what_it_measured_when_a_k_fails(tmp_path, monkeypatch):
    # On a GPU a large K's compile can fail for other reasons than memory (an H200's autotuner hit
    # a CUDA illegal address at K = 62); the record keeps the baseline, K = 1 and the failure.
    from experiments.benchmarks import paper_scale

    measured = paper_scale.ours

    def ours(model, batching, k, *rest):
        if k > 1:
            raise RuntimeError(f"INTERNAL: autotuning failed at K = {k}")
        return measured(model, batching, k, *rest)

    monkeypatch.setattr(paper_scale, "ours", ours)
    out = tmp_path / "paper_scale.json"
    with pytest.raises(RuntimeError, match="autotuning failed"):
        paper_scale.main(["--quick", "--members", "3", "--repeats", "1", "--out", str(out)])
    stored = json.loads(out.read_text())
    assert stored["failed"] == {"members": 3, "error": "INTERNAL: autotuning failed at K = 3"}
    assert stored["ours_one_member"]["members"] == 1 and stored["torch"]["train_step_s"] > 0
    assert "ours" not in stored and "projection" not in stored


def test_paper_scale_can_skip_the_one_member_step(tmp_path, monkeypatch, capsys):
    # With --members K, --skip-one-member compiles K members only (a GPU job's time is short).
    from experiments.benchmarks import paper_scale

    compiled = []

    def ours(model, batching, k, batch, size, repeats):
        compiled.append(k)
        return {"members": k, "member_images_per_s": 10.0 * k}

    def ours_eval(model, batching, k, eval_batch, size, repeats):
        return {"members": k, "member_images_per_s": 100.0 * k}

    def torch_baseline(*args):
        return {"train_member_images_per_s": 5.0, "eval_member_images_per_s": 50.0}

    monkeypatch.setattr(paper_scale, "ours", ours)
    monkeypatch.setattr(paper_scale, "ours_eval", ours_eval)
    monkeypatch.setattr(paper_scale, "torch_baseline", torch_baseline)
    out = tmp_path / "paper_scale.json"
    argv = ["--quick", "--members", "3", "--skip-one-member", "--out", str(out)]
    report = paper_scale.main(argv)
    assert compiled == [3]
    assert "ours_one_member" not in report and "ratio_one_member" not in report
    assert report["ratio"] == pytest.approx(30.0 / 5.0)
    assert report["ours_eval"]["members"] == 3
    with pytest.raises(SystemExit):
        paper_scale.main(["--members", "1", "--skip-one-member", "--out", str(out)])
    assert "--skip-one-member needs --members 2 or more" in capsys.readouterr().err


def test_paper_scale_conv_impl_reaches_the_model_and_the_record(tmp_path, monkeypatch):
    # --conv-impl matmul trains members without grouped convolutions (the H200's fault at 48
    # members was in cuDNN's grouped ones); the record says which convolutions it timed.
    from experiments.benchmarks import paper_scale
    from iml.models import CONV_IMPLS

    impls = []

    def ours(model, batching, k, batch, size, repeats):
        impls.append(model.conv_impl)
        return {"members": k, "member_images_per_s": 10.0 * k}

    monkeypatch.setattr(paper_scale, "ours", ours)
    monkeypatch.setattr(paper_scale, "ours_eval", lambda *a: {"member_images_per_s": 1.0})
    monkeypatch.setattr(
        paper_scale,
        "torch_baseline",
        lambda *a: {"train_member_images_per_s": 5.0, "eval_member_images_per_s": 50.0},
    )
    for impl in CONV_IMPLS:
        out = tmp_path / f"{impl}.json"
        argv = ["--quick", "--members", "2", "--skip-one-member", "--conv-impl", impl]
        paper_scale.main([*argv, "--out", str(out)])
        assert json.loads(out.read_text())["conv_impl"] == impl
    assert impls == list(CONV_IMPLS)
    out = tmp_path / "default.json"
    paper_scale.main(["--quick", "--members", "2", "--skip-one-member", "--out", str(out)])
    assert impls[-1] == json.loads(out.read_text())["conv_impl"] == "xla"


def test_paper_scale_benchmark_runs_a_tiny_densenet_against_torch(tmp_path, capsys):
    from experiments.benchmarks import paper_scale

    out = tmp_path / "paper_scale.json"
    report = paper_scale.main(["--quick", "--members", "1", "--repeats", "1", "--out", str(out)])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["ratio"] == report["ratio"] > 0
    assert report["ours"]["members"] == 1 and report["ours_eval"]["members"] == 1
    stored = json.loads(out.read_text())
    one_card = stored["projection"]["cards"][0]
    assert one_card["cards"] == 1 and one_card["ours_hours"] > 0 and one_card["torch_hours"] > 0
    assert stored["projection"]["eval_source"] == "ours at K"
    # the headline is K members' speed over one PyTorch model's
    assert (
        report["ratio"]
        == report["ours"]["member_images_per_s"] / (report["torch"]["train_member_images_per_s"])
    )


class _Parsed(Exception):
    """Raised in place of running a benchmark once its arguments have parsed."""


@pytest.mark.parametrize("part", ["fp32", "bf16", "rest", "paper", "sweep"])
def test_gpu_script_passes_only_arguments_its_benchmarks_accept(part, tmp_path, monkeypatch):
    # A misspelt flag in gpu.sh would otherwise show only on a GPU, and cost that part's run.
    import argparse
    import importlib
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    script = root / "experiments" / "benchmarks" / "gpu.sh"
    env = {"PATH": "/usr/bin:/bin", "DRY_RUN": "1", "OUT": str(tmp_path)}
    printed = subprocess.run(
        ["bash", str(script), part], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert printed, f"gpu.sh {part} runs nothing"
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        raise _Parsed(parse(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    for line in printed:
        module, *argv = shlex.split(line)
        assert argv[-2:] == ["--out", f"{tmp_path}/{Path(argv[-1]).name}"]
        main = importlib.import_module(module).main
        monkeypatch.setattr(sys, "argv", [module, *argv])  # for a main that reads sys.argv
        with pytest.raises(_Parsed):
            main(argv) if "argv" in main.__code__.co_varnames else main()


def test_experiments_and_benchmarks_import_only_public_iml_names():
    # What a user's own experiment can do, ours do: no private module or name of iml.
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    private = []
    for path in sorted((root / "experiments").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "iml":
                names = [*node.module.split("."), *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names if a.name.split(".")[0] == "iml"]
                names = [part for module in modules for part in module.split(".")]
            else:
                continue
            if any(name.startswith("_") for name in names):
                private.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not private, f"private iml names imported at {private}"
