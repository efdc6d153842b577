"""The benchmarks' GPU script, experiments/benchmarks/gpu.sh, passes only arguments its benchmarks
accept.

Kept with the tests of experiments.benchmarks.train_step, which gpu.sh runs in three of its five
parts (fp32, bf16, rest); the script's other benchmarks (ensemble, paper_scale, sweep_train) and
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
