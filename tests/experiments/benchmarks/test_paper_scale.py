"""Tests of experiments.benchmarks.paper_scale: its projection from stored records, what it keeps
when a K fails, its options, and a smoke run at a tiny size.

Speed targets are measured by running the benchmarks themselves, never here.
"""

import json

import pytest


@pytest.mark.slow
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
    # nothing was timed: the ratio is the records', and no runs are claimed
    assert line["ratio_from"].startswith("the card records") and "runs" not in line
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


@pytest.mark.slow
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
        paper_scale.main(["--quick", "--members", "3", "--runs", "3", "--out", str(out)])
    stored = json.loads(out.read_text())
    assert stored["failed"] == {"members": 3, "error": "INTERNAL: autotuning failed at K = 3"}
    assert stored["ours_one_member"]["members"] == 1 and stored["torch"]["first_step_s"] > 0
    assert len(stored["ours_one_member"]["step_s_all"]) == 3
    assert "ours" not in stored and "projection" not in stored and "ratio" not in stored


def _fake_steps(monkeypatch, paper_scale, compiled):
    """Fake steps for both sides (no DenseNet is built): ours records each K it compiles."""

    def ours(model, batching, k, batch, size):
        compiled.append((k, model.conv_impl))
        return (lambda: None), {"members": k, "compile_s": 0.1}

    def ours_eval(model, batching, k, eval_batch, size, repeats):
        return {"members": k, "member_images_per_s": 100.0 * k}

    def torch_baseline(*args):
        return (lambda: None), {"first_step_s": 0.2, "eval_member_images_per_s": 50.0}

    monkeypatch.setattr(paper_scale, "ours", ours)
    monkeypatch.setattr(paper_scale, "ours_eval", ours_eval)
    monkeypatch.setattr(paper_scale, "torch_baseline", torch_baseline)


@pytest.mark.slow
def test_paper_scale_can_skip_the_one_member_step(tmp_path, monkeypatch, capsys):
    # With --members K, --skip-one-member compiles K members only (a GPU job's time is short).
    from _benchmark_records import assert_headline, fake_cpuinfo

    from experiments.benchmarks import paper_scale

    cpu = fake_cpuinfo(monkeypatch, tmp_path)
    compiled = []
    _fake_steps(monkeypatch, paper_scale, compiled)
    out = tmp_path / "paper_scale.json"
    argv = ["--quick", "--members", "3", "--skip-one-member", "--out", str(out)]
    report = paper_scale.main(argv)
    assert [k for k, _ in compiled] == [3]
    assert "ours_one_member" not in report and "ratio_one_member" not in report
    # PyTorch's one-model step counts K times: equal work
    assert_headline(report, runs=3, cpu=cpu, cold=False)
    assert report["scale"] == {"baseline": 3.0} and report["compile_s"] == 0.1
    assert report["cold_s"]["baseline"] == 0.2 and report["ours"]["first_step_s"] >= 0
    assert report["ours"]["step_s_all"] == report["warm_s"]["ours"]
    assert report["torch"]["train_step_s_all"] == report["warm_s"]["baseline"]
    assert report["ours_eval"]["members"] == 3
    with pytest.raises(SystemExit):
        paper_scale.main(["--members", "1", "--skip-one-member", "--out", str(out)])
    assert "--skip-one-member needs --members 2 or more" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        paper_scale.main(["--members", "2", "--runs", "2", "--out", str(out)])


@pytest.mark.slow
def test_paper_scale_conv_impl_reaches_the_model_and_the_record(tmp_path, monkeypatch):
    # --conv-impl matmul trains members without grouped convolutions (the H200's fault at 48
    # members was in cuDNN's grouped ones); the record says which convolutions it timed.
    from experiments.benchmarks import paper_scale
    from iml.models import CONV_IMPLS

    compiled = []
    _fake_steps(monkeypatch, paper_scale, compiled)
    for impl in CONV_IMPLS:
        out = tmp_path / f"{impl}.json"
        argv = ["--quick", "--members", "2", "--skip-one-member", "--conv-impl", impl]
        paper_scale.main([*argv, "--out", str(out)])
        assert json.loads(out.read_text())["conv_impl"] == impl
    assert [impl for _, impl in compiled] == list(CONV_IMPLS)
    out = tmp_path / "default.json"
    paper_scale.main(["--quick", "--members", "2", "--skip-one-member", "--out", str(out)])
    assert compiled[-1][1] == json.loads(out.read_text())["conv_impl"] == "xla"


@pytest.mark.slow
def test_paper_scale_benchmark_runs_a_tiny_densenet_against_torch(tmp_path, capsys, monkeypatch):
    from _benchmark_records import assert_headline, fake_cpuinfo, last_json_line

    from experiments.benchmarks import paper_scale

    cpu = fake_cpuinfo(monkeypatch, tmp_path)
    out = tmp_path / "paper_scale.json"
    report = paper_scale.main(["--quick", "--members", "1", "--runs", "3", "--out", str(out)])
    line = last_json_line(capsys.readouterr().out)
    assert line["ratio"] == report["ratio"] > 0
    assert_headline(line, runs=3, cpu=cpu, cold=False)
    assert report["ours"]["members"] == 1 and report["ours_eval"]["members"] == 1
    assert report["ratio_one_member"] == report["ratio"]  # K = 1 is the one-member step
    stored = json.loads(out.read_text())
    one_card = stored["projection"]["cards"][0]
    assert one_card["cards"] == 1 and one_card["ours_hours"] > 0 and one_card["torch_hours"] > 0
    assert stored["projection"]["eval_source"] == "ours at K"
    assert stored["cold_s"]["ours"] == stored["ours"]["first_step_s"] > 0
    assert stored["cold_s"]["baseline"] == stored["torch"]["first_step_s"] > 0
