"""Training-step benchmark: the Flax DenseNet-121 against torchvision's densenet121.

One training step is forward, backward and an Adam update on a batch of random images with one
logit per image and the logistic loss. Both frameworks run in this one process under the same
conditions (torch with ``torch.set_num_threads`` equal to the cores available to the process), at
two sizes: batch 16 at 224x224 and batch 64 at 64x64. After a first step each (and JAX's
compilation), given apart as ``cold_s`` and ``compile_s``, the two frameworks' steps are timed
alternately in ``--runs`` interleaved runs, one step of each a run
(:mod:`experiments.benchmarks._harness`), so that both meet the same load on a shared machine.
Each run's ratio is torch's step time over Flax's (Flax over torch in images per second); a
size's ``ratio`` is the median of its runs' ratios, with their range, and the headline is the
size with the lower one (``headline_size``; every size's in ``ratio_by_size`` and the JSON
file's ``results``), with peak memory per framework.

The process runs under ``iml.training.host.keep_step_memory`` (``--host-memory keep``), as
``iml reproduce`` does: glibc keeps freed memory and JAX runs CPU computations on the calling
thread, so that a step's temporaries reuse the last step's pages. The allocator setting holds for
torch too. ``--host-memory system`` leaves both at their defaults.

    python -m experiments.benchmarks.train_step            # the full run (minutes on 2 cores)
    python -m experiments.benchmarks.train_step --quick    # batch 4 @ 224 and 16 @ 64, 3 runs
    python -m experiments.benchmarks.train_step --device gpu --dtype bfloat16

Peak memory on the CPU is the growth of the process's resident set while a framework's steps run
(sampled every 2 ms), plus XLA's own account of the compiled step (arguments + temporaries); on a
GPU it is the frameworks' allocator peaks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments.benchmarks._harness import check_runs, headline, interleaved
from iml.models import CONV_IMPLS, densenet121
from iml.training.host import host_memory_record, keep_step_memory

FULL_SIZES = ((16, 224), (64, 64))
QUICK_SIZES = ((4, 224), (16, 64))


# ----------------------------------------------------------------------------------------------
# Measuring
# ----------------------------------------------------------------------------------------------


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class PeakRSS:
    """Context manager sampling the resident set size; ``.peak_growth_mb`` after exit."""

    def __init__(self, interval_s: float = 0.002) -> None:
        import psutil

        self._proc = psutil.Process()
        self._interval = interval_s
        self._stop = threading.Event()
        self.peak_growth_mb = 0.0

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._peak = max(self._peak, self._proc.memory_info().rss)
            time.sleep(self._interval)

    def __enter__(self) -> PeakRSS:
        self._start = self._proc.memory_info().rss
        self._peak = self._start
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_growth_mb = (self._peak - self._start) / 2**20


def time_steps(step: Callable[[], Any], repeats: int) -> list[float]:
    """Wall seconds of ``repeats`` calls of ``step`` (which must block until done)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return times


# ----------------------------------------------------------------------------------------------
# torch
# ----------------------------------------------------------------------------------------------


def setup_torch(batch: int, size: int, device: str, dtype: str) -> tuple[Callable, dict]:
    """A torchvision densenet121 + torch.optim.Adam step closure, run once (warm-up)."""
    import torch
    import torchvision

    dev = torch.device("cuda" if device == "gpu" else "cpu")
    # fixed shapes: let cuDNN pick its fastest kernels, as XLA's autotuner does for JAX
    torch.backends.cudnn.benchmark = dev.type == "cuda"
    torch.manual_seed(0)
    model = torchvision.models.densenet121(weights=None, num_classes=1).to(dev).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(batch, 3, size, size, device=dev)
    y = (torch.rand(batch, 1, device=dev) < 0.3).float()
    loss_fn = torch.nn.BCEWithLogitsLoss()
    autocast = dtype == "bfloat16"

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x).float(), y)
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        else:
            loss.item()

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with PeakRSS() as rss:
        first = time_steps(step, 1)[0]
    info: dict[str, Any] = {"first_step_s": first, "peak_rss_growth_mb": rss.peak_growth_mb}
    if dev.type == "cuda":
        info["peak_device_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return step, info


# ----------------------------------------------------------------------------------------------
# JAX / Flax
# ----------------------------------------------------------------------------------------------


def make_flax_step(model, tx: optax.GradientTransformation) -> Callable:
    """The jitted train step ``(state, x, y) -> (state, loss)`` with the state donated."""

    def loss_fn(params, batch_stats, x, y):
        logits, updates = model.apply(
            {"params": params, "batch_stats": batch_stats}, x, train=True, mutable=["batch_stats"]
        )
        loss = optax.sigmoid_binary_cross_entropy(logits, y).mean()
        return loss, updates["batch_stats"]

    def step(state, x, y):
        params, batch_stats, opt_state = state
        (loss, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, batch_stats, x, y
        )
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return (params, batch_stats, opt_state), loss

    return jax.jit(step, donate_argnums=(0,))


def compile_flax_step(model, batch: int, size: int, channels: int = 3) -> tuple:
    """``model``'s step with ``optax.adam`` compiled for a random batch of images and labels.

    Returns ``(compiled, state, x, y, compile_seconds)``; ``compiled(state, x, y)`` donates the
    state and returns ``(state, loss)``.
    """
    tx = optax.adam(1e-4)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(batch, size, size, channels)).astype(np.float32))
    y = jnp.asarray((rng.random((batch, 1)) < 0.3).astype(np.float32))
    variables = jax.jit(model.init)(jax.random.key(0), x[:1])
    state = (variables["params"], variables["batch_stats"], tx.init(variables["params"]))
    t0 = time.perf_counter()
    compiled = make_flax_step(model, tx).lower(state, x, y).compile()
    return compiled, state, x, y, time.perf_counter() - t0


def setup_flax(
    batch: int, size: int, device: str, dtype: str, conv_impl: str
) -> tuple[Callable, dict]:
    """The compiled Flax densenet121 + optax.adam step closure, run once (warm-up)."""
    dev = jax.devices("gpu" if device == "gpu" else "cpu")[0]
    model = densenet121(
        num_outputs=1,
        conv_impl=conv_impl,
        dtype=jnp.bfloat16 if dtype == "bfloat16" else jnp.float32,
    )
    with jax.default_device(dev):
        compiled, state, x, y, compile_s = compile_flax_step(model, batch, size)
    mem = compiled.memory_analysis()
    holder = {"state": state}

    def step() -> None:
        holder["state"], loss = compiled(holder["state"], x, y)
        loss.block_until_ready()

    with PeakRSS() as rss:
        first = time_steps(step, 1)[0]
    info: dict[str, Any] = {
        "compile_s": compile_s,
        "first_step_s": first,
        "peak_rss_growth_mb": rss.peak_growth_mb,
    }
    if mem is not None:
        info["xla_arguments_mb"] = mem.argument_size_in_bytes / 2**20
        info["xla_temporaries_mb"] = mem.temp_size_in_bytes / 2**20
    if device == "gpu":
        info["peak_device_mb"] = (dev.memory_stats() or {}).get("peak_bytes_in_use", 0) / 2**20
    return step, info


def time_interleaved(
    steps: dict[str, Callable[[], Any]], repeats: int, batch: int
) -> dict[str, dict[str, Any]]:
    """Times the steps alternately, so that both see the same load on a shared machine."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            times[name].extend(time_steps(step, 1))
    out = {}
    for name, ts in times.items():
        median = statistics.median(ts)
        out[name] = {"step_s": ts, "median_step_s": median, "images_per_s": batch / median}
    return out


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the benchmark, writes the JSON file and prints the summary as the last line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches, 3 runs")
    parser.add_argument(
        "--runs",
        "--repeats",
        dest="runs",
        type=int,
        default=None,
        help="interleaved steps of each framework per size, at least 3; the ratio is their "
        "median (default 5, 3 with --quick)",
    )
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument(
        "--conv-impl",
        choices=CONV_IMPLS,
        default=None,
        help="the model's convolutions (default: 'mixed' on the CPU, where it trains fastest, "
        "'xla' on a GPU)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="cores for both frameworks (default: all available to this process)",
    )
    parser.add_argument(
        "--host-memory",
        choices=("keep", "system"),
        default="keep",
        help="'keep' (default, as `iml reproduce`): iml.training.host.keep_step_memory, for both "
        "frameworks; 'system': glibc's and JAX's defaults",
    )
    parser.add_argument("--size", type=int, choices=(64, 224), default=None, help="one size only")
    parser.add_argument("--out", type=Path, default=Path("runs/benchmarks/train_step.json"))
    args = parser.parse_args(argv)
    runs = args.runs or (3 if args.quick else 5)
    check_runs(parser, runs)
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.conv_impl is None:
        args.conv_impl = "mixed" if args.device == "cpu" else "xla"
    # before JAX's first computation, which fixes its CPU dispatch mode
    if args.host_memory == "keep":
        keep_step_memory()
    cores = available_cores()
    threads = min(args.threads or cores, cores)
    if threads < cores:
        # pin the whole process (both frameworks) to `threads` cores before JAX starts its CPU
        # backend, which sizes its thread pool from the cores it may use
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])
    if args.device == "gpu" and not any(d.platform == "gpu" for d in jax.devices()):
        parser.error("--device gpu: JAX sees no GPU")
    import torch

    torch.set_num_threads(threads)
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if args.size is not None:
        sizes = tuple(bs for bs in sizes if bs[1] == args.size)

    results = []
    for batch, size in sizes:
        torch_step, ref = setup_torch(batch, size, args.device, args.dtype)
        print(
            f"batch {batch} @ {size}px: torch ready, first step {ref['first_step_s']:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        flax_step, ours = setup_flax(batch, size, args.device, args.dtype, args.conv_impl)
        print(
            f"batch {batch} @ {size}px: flax compiled in {ours['compile_s']:.1f}s, first step "
            f"{ours['first_step_s']:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        # the first steps (cold) ran in the setups; the runs are warm
        timing = interleaved(
            {"flax": flax_step, "torch": torch_step},
            runs,
            ours="flax",
            baseline="torch",
            cold=False,
        )
        timing["cold_s"] = {"flax": ours["first_step_s"], "torch": ref["first_step_s"]}
        del torch_step, flax_step
        for side, info in (("flax", ours), ("torch", ref)):
            median = statistics.median(timing["warm_s"][side])
            info.update(median_step_s=median, images_per_s=batch / median)
        results.append({
            "batch": batch, "size": size, **timing, "compile_s": ours["compile_s"], "flax": ours,
            "torch": ref,
        })  # fmt: skip
        print(
            f"batch {batch:3d} @ {size}px: flax {ours['images_per_s']:7.2f} img/s "
            f"(compile {ours['compile_s']:.1f}s), torch {ref['images_per_s']:7.2f} img/s, "
            f"ratio {timing['ratio']:.3f} [{timing['ratio_range'][0]:.3f}, "
            f"{timing['ratio_range'][1]:.3f}]",
            flush=True,
        )

    lowest = min(results, key=lambda r: r["ratio"])
    timing_keys = ("runs", "order", "ratio", "ratio_range", "ratios", "warm_s", "cold_s")
    summary = {
        "benchmark": "train_step",
        "headline_size": f"b{lowest['batch']}_{lowest['size']}px",
        "ratio_by_size": {
            f"b{r['batch']}_{r['size']}px": {"ratio": r["ratio"], "ratio_range": r["ratio_range"]}
            for r in results
        },
        "images_per_s": {
            f"b{r['batch']}_{r['size']}px": {
                "flax": r["flax"]["images_per_s"],
                "torch": r["torch"]["images_per_s"],
            }
            for r in results
        },
        "device": args.device,
        "dtype": args.dtype,
        "conv_impl": args.conv_impl,
        "quick": args.quick,
        "cores": cores,
        "threads": threads,
        "torch_threads": torch.get_num_threads(),
        "host_memory": host_memory_record(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "jax_version": jax.__version__,
        "torch_version": torch.__version__,
        **headline(
            {key: lowest[key] for key in timing_keys},
            compile_s=lowest["compile_s"],
            gpu=args.device == "gpu",
        ),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**summary, "results": results}, indent=2))
    summary["out"] = str(args.out)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
