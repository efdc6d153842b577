"""Where a DenseNet training step spends its time: XLA's thunks, summed by kind and by fusion.

    python -m tools.profile_step                       # DenseNet-121, batch 64 at 64 px
    python -m tools.profile_step --size 224 --batch 16 --conv-impl xla

The step (forward, backward, Adam) is compiled, run a few times, then traced with
``jax.profiler`` for ``--steps`` steps. Each traced thunk (one HLO fusion or library call) is
mapped to what its fused computation contains (``convolution``, ``dot``, ``transpose``, ...; a
fusion of none of these is ``elementwise``) through the compiled HLO text. The table gives
milliseconds per step for each kind and for the slowest thunks, with the layer their HLO metadata
names. This is how the CPU's slow convolution kernel gradients were found (see
``docs/results/cpu_train_step``). The last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import tempfile
from typing import Any

KINDS = (
    "convolution",
    "dot",
    "reduce-window",
    "select-and-scatter",
    "reduce",
    "concatenate",
    "transpose",
    "pad",
    "slice",
)
_NOT_THUNKS = ("Thunk", "$", "Pjit", "SlinkyThreadPool", "CommonPjRt", "end: ", "Wait for")


def computations(hlo: str) -> dict[str, list[str]]:
    """The lines of each computation in an HLO module's text, by computation name."""
    out: dict[str, list[str]] = {}
    current = None
    for line in hlo.splitlines():
        if line and not line.startswith(" ") and line.rstrip().endswith("{"):
            name = line.split()[1] if line.startswith("ENTRY") else line.split()[0]
            current = name.lstrip("%")
            out[current] = []
        elif current is not None and line.startswith(" "):
            out[current].append(line)
    return out


def instruction_kinds(hlo: str) -> dict[str, tuple[str, str]]:
    """``{instruction: (kind, op_name)}`` for every instruction of the module.

    A fusion's kind lists the notable operations (``KINDS``) in its computation, joined by
    commas, or ``elementwise``; another instruction's kind is its opcode. ``op_name`` is the first
    JAX operation name in its metadata (which names the layer), or ``''``.
    """
    comps = computations(hlo)
    out: dict[str, tuple[str, str]] = {}
    for lines in comps.values():
        for line in lines:
            m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = \S+ ([\w\-]+)\(", line)
            if not m:
                continue
            name, opcode = m.groups()
            called = re.search(r"calls=%?([\w.\-]+)", line)
            body = comps.get(called.group(1), []) if called else [line]
            kinds = sorted({k for k in KINDS for b in body if f" {k}(" in b})
            kind = ",".join(kinds) or ("elementwise" if called else opcode)
            op = re.search(r'op_name="([^"]+)"', " ".join(body))
            out[name] = (kind, op.group(1) if op else "")
    return out


def thunk_milliseconds(trace_dir: str, steps: int) -> dict[str, float]:
    """Milliseconds per step of each traced thunk in the newest trace under ``trace_dir``."""
    files = sorted(glob.glob(os.path.join(trace_dir, "**", "*.trace.json.gz"), recursive=True))
    if not files:
        raise FileNotFoundError(f"no *.trace.json.gz under {trace_dir}")
    with gzip.open(files[-1]) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    total: dict[str, float] = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and "dur" in e and not e["name"].startswith(_NOT_THUNKS):
            total[e["name"]] += e["dur"] / 1e3 / steps
    return dict(total)


def profile(step, steps: int) -> dict[str, float]:
    """Traces ``steps`` calls of ``step()`` (which must block); milliseconds per thunk per step."""
    import jax

    with tempfile.TemporaryDirectory() as trace_dir:
        jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
        try:
            for _ in range(steps):
                step()
        finally:
            jax.profiler.stop_trace()
        return thunk_milliseconds(trace_dir, steps)


def summarize(ms: dict[str, float], kinds: dict[str, tuple[str, str]], top: int) -> dict[str, Any]:
    """Milliseconds per kind and the ``top`` slowest thunks with their kind and layer.

    Traced events that are no HLO instruction (the runtime's argument handling, say) count as
    kind ``runtime`` and are not listed among the slowest.
    """
    by_kind: dict[str, float] = collections.Counter()
    for name, t in ms.items():
        by_kind[kinds[name][0] if name in kinds else "runtime"] += t
    slowest = sorted((kv for kv in ms.items() if kv[0] in kinds), key=lambda kv: -kv[1])[:top]
    return {
        "total_ms": sum(ms.values()),
        "by_kind_ms": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
        "slowest": [
            {"thunk": n, "ms": t, "kind": kinds[n][0], "op": kinds[n][1]} for n, t in slowest
        ],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Profiles the step and prints the tables, then the JSON summary as the last line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("densenet121", "small"), default="densenet121")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--conv-impl", default="mixed")
    parser.add_argument("--steps", type=int, default=2, help="traced steps")
    parser.add_argument("--top", type=int, default=25, help="slowest thunks listed")
    args = parser.parse_args(argv)
    if min(args.batch, args.size, args.steps, args.top) < 1:
        parser.error("--batch, --size, --steps and --top must be at least 1")

    from experiments.benchmarks.train_step import compile_flax_step
    from iml.models import CONV_IMPLS, densenet121, densenet_small

    if args.conv_impl not in CONV_IMPLS:
        parser.error(f"--conv-impl must be one of {CONV_IMPLS}")
    channels = 3 if args.model == "densenet121" else 1
    make = densenet121 if args.model == "densenet121" else densenet_small
    model = make(num_outputs=1, conv_impl=args.conv_impl)
    compiled, state, x, y, _ = compile_flax_step(model, args.batch, args.size, channels)
    holder = [state]

    def step() -> None:
        holder[0], loss = compiled(holder[0], x, y)
        loss.block_until_ready()

    for _ in range(2):  # warm up
        step()
    summary = summarize(profile(step, args.steps), instruction_kinds(compiled.as_text()), args.top)
    print(f"{summary['total_ms']:9.1f} ms per step in traced thunks")
    for kind, t in summary["by_kind_ms"].items():
        print(f"{t:9.1f} ms  {kind}")
    print("slowest thunks:")
    for s in summary["slowest"]:
        print(f"{s['ms']:9.1f} ms  {s['thunk'][:30]:30s} {s['kind'][:24]:24s} {s['op'][-60:]}")
    summary.update(model=args.model, batch=args.batch, size=args.size, conv_impl=args.conv_impl)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
