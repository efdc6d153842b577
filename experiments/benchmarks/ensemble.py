"""Benchmark: one ensemble step of K beta-ensemble members against K single-model steps in a row.

    python -m experiments.benchmarks.ensemble            # full run
    python -m experiments.benchmarks.ensemble --quick    # a short run
    python -m experiments.benchmarks.ensemble --host-devices 2   # also a mesh over 2 CPU devices

Model: the small DenseNet (``iml.models.densenet_small``) at 28x28x1, K=8 members, batch 16 per
member. Baseline: the same one-member train step (XLA convolutions), jitted, called K times in a
row on K different states. Each member-batching strategy of :mod:`iml.training` is timed as one
jitted step of all K members (state donated, as in the trainer): ``vmap`` or ``map`` over members,
or ``loop`` (K calls of one in-place one-member program), with the model's ``conv_impl`` ``xla``
or ``matmul``; with several devices also the mesh strategy
(members split over the ``'ensemble'`` axis, vmap within a device). Repeats of all candidates are
interleaved, so load on the machine affects them alike; the step time is the median of repeats.
Compile time and the compiled program's memory (XLA's memory analysis) are reported apart, with
the process's peak resident memory.

The headline ``ratio`` is member-images per second of the backend's default strategy
(``iml.training.DEFAULT_MEMBER_BATCHING``) over the baseline's; every strategy's figure is in
``strategies``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="few repeats")
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=28)
    p.add_argument("--repeats", type=int, default=None, help="default 15 (5 with --quick)")
    p.add_argument("--host-devices", type=int, default=1, help="simulated CPU devices (mesh)")
    p.add_argument("--out", default="runs/benchmarks/ensemble.json")
    return p.parse_args()


def main() -> None:
    args = _parse()
    if args.host_devices > 1:
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "")
            + f" --xla_force_host_platform_device_count={args.host_devices}"
        )
    import functools

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    from iml.models import densenet_small
    from iml.training import (
        DEFAULT_MEMBER_BATCHING,
        batch_members,
        make_mesh,
        member_in_place,
        member_train_step,
    )
    from iml.training.step import adam
    from iml.training.train_state import init_member_state

    if args.host_devices > 1:
        jax.config.update("jax_num_cpu_devices", args.host_devices)
    k, b, size = args.members, args.batch, args.size
    repeats = args.repeats or (5 if args.quick else 15)
    backend = jax.default_backend()
    optimizer = adam()
    rng = np.random.default_rng(0)
    images = jnp.asarray(rng.integers(0, 256, size=(k, b, size, size, 1), dtype=np.uint8))
    labels = jnp.asarray((rng.random((k, b)) < 0.3).astype(np.float32))
    flips = jnp.asarray(rng.random((k, b)) < 0.5)
    active = jnp.ones((k,), bool)
    betas = jnp.linspace(0.1, 0.9, k)

    def states_for(model):
        def one(seed):
            v = model.init(jax.random.key(seed), jnp.zeros((1, size, size, 1)), train=False)
            return init_member_state(v, optimizer, 1e-4)

        return jax.jit(jax.vmap(one))(jnp.arange(k))

    def compiled(fn, *example):
        t0 = time.perf_counter()
        exe = jax.jit(fn, donate_argnums=0).lower(*example).compile()
        seconds = time.perf_counter() - t0
        mem = exe.memory_analysis()
        memory = None
        if mem is not None:
            memory = {
                "temp_bytes": int(mem.temp_size_in_bytes),
                "argument_bytes": int(mem.argument_size_in_bytes),
                "output_bytes": int(mem.output_size_in_bytes),
            }
        return exe, seconds, memory

    candidates = {}

    # Baseline: one member's step, K times in a row.
    single_model = densenet_small(conv_impl="xla")
    single_step = functools.partial(member_train_step, single_model, optimizer)
    stacked = states_for(single_model)
    singles = [jax.tree.map(lambda a, i=i: a[i], stacked) for i in range(k)]
    exe, compile_s, memory = compiled(
        single_step, singles[0], images[0], labels[0], flips[0], active[0], betas[0]
    )

    def run_baseline(exe=exe):
        for i in range(k):
            singles[i] = exe(singles[i], images[i], labels[i], flips[i], active[i], betas[i])
        jax.block_until_ready(singles)

    candidates["baseline"] = (run_baseline, compile_s, memory)

    def add(name, batching, conv, mesh=None):
        model = densenet_small(conv_impl=conv)
        one = functools.partial(member_train_step, model, optimizer)
        state = states_for(model)
        x = (state, images, labels, flips, active, betas)
        if batching == "loop":  # K calls of one in-place one-member program
            exe, compile_s, memory = compiled(member_in_place(one), *x, 0)
            holder = [x[0]]

            def run_loop(exe=exe, rest=x[1:]):
                for i in range(k):
                    holder[0] = exe(holder[0], *rest, i)
                jax.block_until_ready(holder[0])

            candidates[name] = (run_loop, compile_s, memory)
            return
        step = batch_members(one, batching)
        if mesh is not None:
            member = NamedSharding(mesh, PartitionSpec("ensemble"))
            data = NamedSharding(mesh, PartitionSpec("ensemble", "data"))
            x = (
                jax.device_put(state, member),
                jax.device_put(images, data),
                jax.device_put(labels, data),
                jax.device_put(flips, data),
                jax.device_put(active, member),
                jax.device_put(betas, member),
            )
        exe, compile_s, memory = compiled(step, *x)
        holder = [x[0]]

        def run(exe=exe, rest=x[1:]):
            holder[0] = exe(holder[0], *rest)
            jax.block_until_ready(holder[0])

        candidates[name] = (run, compile_s, memory)

    for batching in ("vmap", "map", "loop"):
        for conv in ("xla", "matmul"):
            add(f"{batching}/{conv}", batching, conv)
    if jax.device_count() > 1:
        mesh = make_mesh(k, b)
        default_conv = DEFAULT_MEMBER_BATCHING.get(backend, ("vmap", "xla"))[1]
        add(f"mesh{dict(mesh.shape)}/vmap/{default_conv}", "vmap", default_conv, mesh)

    for run, _, _ in candidates.values():  # warm up: first calls allocate and page in
        run()
    times = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, (run, _, _) in candidates.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)

    base = statistics.median(times["baseline"])
    member_images = k * b
    results = {}
    for name, (_, compile_s, memory) in candidates.items():
        med = statistics.median(times[name])
        results[name] = {
            "step_seconds_median": med,
            "step_seconds_all": times[name],
            "member_images_per_second": member_images / med,
            "ratio": base / med,
            "compile_seconds": compile_s,
            "compiled_memory": memory,
        }
    default = "/".join(DEFAULT_MEMBER_BATCHING.get(backend, ("vmap", "xla")))
    summary = {
        "benchmark": "ensemble",
        "backend": backend,
        "device": str(jax.devices()[0].device_kind),
        "devices": jax.device_count(),
        "members": k,
        "batch_per_member": b,
        "image": [size, size, 1],
        "model": "densenet_small()",
        "repeats": repeats,
        "default_strategy": default,
        "baseline_member_images_per_second": member_images / base,
        "member_images_per_second": results[default]["member_images_per_second"],
        "strategies": {n: round(r["ratio"], 3) for n, r in results.items() if n != "baseline"},
        "best_strategy": max(
            (n for n in results if n != "baseline"), key=lambda n: results[n]["ratio"]
        ),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "ratio": results[default]["ratio"],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**summary, "details": results}, indent=2))
    for name, r in results.items():
        print(
            f"{name:>28}: {r['member_images_per_second']:8.1f} member-images/s  "
            f"ratio {r['ratio']:.2f}  compile {r['compile_seconds']:.1f}s",
            file=sys.stderr,
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
