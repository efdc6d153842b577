"""Tests of experiments.benchmarks.train_step: its interleaved runs and headline (on fake steps),
and the benchmarks' GPU script, experiments/benchmarks/gpu.sh, which passes only arguments its
benchmarks accept.

The script's test is kept here because gpu.sh runs train_step in three of its five parts (fp32,
bf16, rest); the script's other benchmarks (ensemble, paper_scale, sweep_train) and
tools.probe_member_convs have their arguments checked alike.
"""

import pytest


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

    root = Path(__file__).resolve().parents[3]
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


def test_train_step_interleaves_the_frameworks_and_heads_with_the_slower_size(
    tmp_path, monkeypatch, capsys
):
    # Fake steps (no DenseNet is built): Flax's steps take 1 ms at 64 px and 4 ms at 224 px,
    # torch's 2 ms at both, so 224 px is the size with the lower ratio.
    import json
    import time

    from _benchmark_records import assert_headline, fake_cpuinfo, last_json_line

    from experiments.benchmarks import train_step

    cpu = fake_cpuinfo(monkeypatch, tmp_path)
    calls = []

    def fake(name, seconds):
        def step():
            calls.append(name)
            time.sleep(seconds)

        return step

    def setup_torch(batch, size, device, dtype):
        return fake(f"torch{size}", 0.002), {"first_step_s": 0.5}

    def setup_flax(batch, size, device, dtype, conv_impl):
        info = {"compile_s": 3.0, "first_step_s": 1.0}
        return fake(f"flax{size}", 0.004 if size == 224 else 0.001), info

    monkeypatch.setattr(train_step, "setup_torch", setup_torch)
    monkeypatch.setattr(train_step, "setup_flax", setup_flax)
    out = tmp_path / "train_step.json"
    argv = ["--quick", "--runs", "4", "--host-memory", "system", "--out", str(out)]
    summary = train_step.main(argv)
    assert calls == ["flax224", "torch224"] * 4 + ["flax64", "torch64"] * 4
    line = last_json_line(capsys.readouterr().out)
    assert line == summary
    assert_headline(summary, runs=4, ours="flax", baseline="torch", cpu=cpu)
    assert summary["headline_size"] == "b4_224px" and summary["ratio"] < 1
    assert summary["ratio"] == summary["ratio_by_size"]["b4_224px"]["ratio"]
    assert summary["ratio_by_size"]["b16_64px"]["ratio"] > 1
    # cold (compile and first step) apart from the warm runs
    assert summary["cold_s"] == {"flax": 1.0, "torch": 0.5} and summary["compile_s"] == 3.0
    stored = json.loads(out.read_text())
    assert [r["size"] for r in stored["results"]] == [224, 64]
    for r in stored["results"]:
        assert_headline(r, runs=4, ours="flax", baseline="torch", cpu=None)
    with pytest.raises(SystemExit):
        train_step.main(["--runs", "2", "--out", str(out)])
