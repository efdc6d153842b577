"""The DenseNet-121 training step of this checkout against the one at another git revision.

    python -m tools.compare_densenet --rev 3e47139              # batch 64 at 64 px
    python -m tools.compare_densenet --rev 3e47139 --batch 16 --size 224

Step-time differences between two runs on a shared 2-core machine are often larger than the
change being measured, so this compiles both versions of ``iml/models/densenet.py`` in one process
(the other revision's file is read with ``git show``) and times their steps alternately, exactly
as ``experiments.benchmarks.train_step`` times the Flax step (``optax.adam``, the logistic loss).
It prints each version's median and, last, one JSON line whose ``ratio`` is this checkout's speed
over the other revision's.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

MODULE = "iml/models/densenet.py"


def module_at(rev: str, repo: Path) -> ModuleType:
    """``iml/models/densenet.py`` as it is at git revision ``rev``, imported under its own name."""
    try:
        source = subprocess.run(
            ["git", "show", f"{rev}:{MODULE}"], cwd=repo, check=True, capture_output=True, text=True
        ).stdout
    except subprocess.CalledProcessError as err:
        raise ValueError(f"cannot read {MODULE} at revision {rev!r}: {err.stderr.strip()}") from err
    path = Path(tempfile.mkdtemp()) / "densenet_at_rev.py"
    path.write_text(source)
    name = f"densenet_at_{abs(hash(rev))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # flax and dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


def compare(modules: dict, batch: int, size: int, repeats: int, conv_impl: str) -> dict:
    """Median step seconds of each module's densenet121, timed alternately after two warm-ups."""
    from experiments.benchmarks.train_step import (
        compile_flax_step,
        time_interleaved,
        time_steps,
    )

    steps = {}
    for name, module in modules.items():
        model = module.densenet121(num_outputs=1, conv_impl=conv_impl)
        compiled, state, x, y, compile_s = compile_flax_step(model, batch, size)
        holder = {"state": state}

        def step(compiled=compiled, holder=holder, x=x, y=y):
            holder["state"], loss = compiled(holder["state"], x, y)
            loss.block_until_ready()

        time_steps(step, 2)  # warm-up
        steps[name] = step
        print(f"{name}: compiled in {compile_s:.1f}s", file=sys.stderr, flush=True)
    return time_interleaved(steps, repeats, batch)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rev", required=True, help="git revision to compare against")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--conv-impl", default="mixed")
    args = parser.parse_args(argv)
    for name in ("batch", "size", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")

    import iml.models.densenet as current

    repo = Path(current.__file__).resolve().parents[2]
    other = module_at(args.rev, repo)
    result = compare(
        {args.rev: other, "checkout": current}, args.batch, args.size, args.repeats, args.conv_impl
    )
    for name, r in result.items():
        med = r["median_step_s"]
        print(f"{name}: median {med:.3f} s, {args.batch / med:.1f} img/s")
    summary = {
        "rev": args.rev,
        "batch": args.batch,
        "size": args.size,
        "conv_impl": args.conv_impl,
        "repeats": args.repeats,
        "median_step_s": {name: r["median_step_s"] for name, r in result.items()},
        "ratio": result[args.rev]["median_step_s"] / result["checkout"]["median_step_s"],
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
