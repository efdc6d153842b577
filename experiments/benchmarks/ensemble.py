"""Benchmark: one ensemble step of K beta-ensemble members against K single-model steps in a row.

    python -m experiments.benchmarks.ensemble            # full run
    python -m experiments.benchmarks.ensemble --quick    # a short run
    python -m experiments.benchmarks.ensemble --host-devices 1   # one CPU device only
    python -m experiments.benchmarks.ensemble --dtype bfloat16 --max-members   # on a GPU

Model: the small DenseNet (``iml.models.densenet_small``) at 28x28x1, K=8 members, batch 16 per
member. Baseline: the same one-member train step, with the convolutions of the backend's default
strategy (``--baseline-conv`` to change), jitted, called K times in a row on K different states.
Each member-batching strategy of :mod:`iml.training` is timed as one jitted step of all K members
(state donated, as in the trainer): ``vmap`` or ``map`` over members, or ``loop`` (K calls of one
in-place one-member program), with the model's ``conv_impl`` ``xla``, ``matmul`` or ``mixed``;
with several devices (on the CPU one per core by default, as ``iml`` asks for) also the default
strategy as the trainer runs it, on the mesh the trainer makes (its own compiled programs): for
``map`` and ``loop``, whole members on each device, each device stepping its own members one by
one (:func:`iml.training.per_device_members`, :func:`iml.training.per_device_member_loop`); for
``vmap``, members split over the ``'ensemble'`` axis and batches over ``'data'``. All candidates
run in ``--runs`` interleaved runs, one step of each a run, after a cold step of each
(:mod:`experiments.benchmarks._harness`), so load on the machine affects them alike; the step
time is the median of the runs. Compile time (``compile_s``, the default's; every candidate's in
the JSON file), first calls (``cold_s``) and the compiled program's memory (XLA's memory
analysis) are reported apart from the warm runs, with the process's peak resident memory.
``--strategies`` limits the candidates (the baseline always runs); ``--dtype bfloat16`` computes
in bfloat16 (parameters, statistics and the optimiser stay float32). The process runs under
``iml.training.host.keep_step_memory``, as ``iml reproduce`` does (``--host-memory system`` for
glibc's and JAX's defaults).

``--max-members`` then looks for the largest K whose step of the default strategy fits the
device's memory: XLA's memory analysis of the K-member program gives the bytes per member, which
predict the largest K; that K is compiled and run (halving it while it runs out of memory), timed,
and reported with the first larger K that failed, if one was tried.

Each run's ratio is the baseline's step time over a strategy's (member-images per second of the
strategy over the baseline's). The headline ``ratio`` is the median of those of the backend's
default strategy (``iml.training.DEFAULT_MEMBER_BATCHING`` with ``iml.models.DEFAULT_CONV_IMPL``,
over the mesh when there are several devices; where ``--strategies`` leaves it out, the first
strategy asked for: ``headline_strategy``), with their range; every strategy's median ratio is in
``strategies``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

from experiments.benchmarks._harness import (
    add_runs_argument,
    check_runs,
    headline,
    interleaved,
    per_run_ratios,
    summarise,
)


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="few repeats")
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=28)
    add_runs_argument(p, default=None, what=": a step of each candidate a run (15, 5 with --quick)")
    p.add_argument(
        "--host-devices",
        type=int,
        default=None,
        help="CPU devices (default: one per core, as `iml` uses; 1 for none)",
    )
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument(
        "--strategies",
        default=None,
        help="comma-separated candidates, e.g. vmap/xla,loop/xla (default: all)",
    )
    p.add_argument(
        "--max-members", action="store_true", help="find the largest K that fits the device"
    )
    p.add_argument(
        "--max-members-seconds",
        type=float,
        default=None,
        help="stop growing K after this many seconds of the search (default: no limit)",
    )
    p.add_argument(
        "--baseline-conv",
        default=None,
        help="conv_impl of the single-model baseline (default: the default strategy's)",
    )
    p.add_argument(
        "--host-memory",
        choices=("keep", "system"),
        default="keep",
        help="'keep' (default, as `iml reproduce`): iml.training.host.keep_step_memory; "
        "'system': glibc's and JAX's defaults",
    )
    p.add_argument("--out", default="runs/benchmarks/ensemble.json")
    args = p.parse_args(argv)
    args.runs = args.runs or (5 if args.quick else 15)
    check_runs(p, args.runs)
    from iml.models import CONV_IMPLS  # imports JAX without starting a backend

    known = {f"{b}/{c}" for b in ("vmap", "map", "loop") for c in CONV_IMPLS}
    if args.strategies is not None:
        chosen = [s.strip() for s in args.strategies.split(",") if s.strip()]
        unknown = [s for s in chosen if s not in known]
        if unknown or not chosen:
            p.error(f"--strategies: unknown {unknown or chosen}; choose from {sorted(known)}")
        args.strategies = chosen
    else:
        args.strategies = sorted(known, key=lambda s: (s.split("/")[0] != "vmap", s))
    if args.baseline_conv is not None and args.baseline_conv not in CONV_IMPLS:
        p.error(f"--baseline-conv: unknown {args.baseline_conv!r}; choose from {list(CONV_IMPLS)}")
    if args.members < 1 or args.batch < 1:
        p.error("--members and --batch must be at least 1")
    return args


def member_batches(
    k: int, batch: int, size: int, seed: int, channels: int = 1, betas=(0.01, 0.99)
) -> tuple:
    """Random ``(images, labels, flips, active, betas)`` of ``k`` members, one batch each, with
    the members' betas spread evenly over ``betas``."""
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(seed)
    shape = (k, batch, size, size, channels)
    images = jnp.asarray(rng.integers(0, 256, size=shape, dtype=np.uint8))
    labels = jnp.asarray((rng.random((k, batch)) < 0.3).astype(np.float32))
    flips = jnp.asarray(rng.random((k, batch)) < 0.5)
    return images, labels, flips, jnp.ones((k,), bool), jnp.linspace(*betas, k)


def member_states(model, optimizer, k: int, size: int, channels: int = 1):
    """The stacked initial states of ``k`` members of ``model`` (seeds ``0..k-1``)."""
    import jax
    import jax.numpy as jnp

    from iml.training import init_member_state

    def one(seed):
        v = model.init(jax.random.key(seed), jnp.zeros((1, size, size, channels)), train=False)
        return init_member_state(v, optimizer, 1e-4)

    return jax.jit(jax.vmap(one))(jnp.arange(k))


def largest_members(
    make_model, batching, memory_at_k, k, batch, size, repeats, limit=None, seconds=None
) -> dict:
    """The largest K whose one-step program of ``batching`` fits the default device, and its speed.

    ``memory_at_k`` is XLA's memory analysis of the K-member program; its bytes per member
    predict the largest K, from which :func:`search_largest` compiles and runs (halving while it
    runs out of memory, then growing, for at most ``seconds``).
    """
    import functools

    import jax

    from iml.training import adam, batch_members, member_in_place, member_train_step

    device = jax.devices()[0]
    limit = limit or (device.memory_stats() or {}).get("bytes_limit")
    if memory_at_k is None or limit is None:
        return {"error": "the backend reports no memory analysis or memory limit"}
    per_member = (memory_at_k["temp_bytes"] + memory_at_k["argument_bytes"]) / k
    predicted = max(8, int(0.9 * limit / per_member) // 8 * 8)
    print(
        f"largest K: {per_member / 2**20:.1f} MiB per member predicts {predicted}",
        file=sys.stderr,
        flush=True,
    )
    model = make_model()
    optimizer = adam()
    one = functools.partial(member_train_step, model, optimizer)
    step = member_in_place(one) if batching == "loop" else batch_members(one, batching)

    def attempt(kk: int) -> dict:
        rest = member_batches(kk, batch, size, seed=kk)
        state = member_states(model, optimizer, kk, size)
        t0 = time.perf_counter()
        if batching == "loop":
            exe = jax.jit(step, donate_argnums=0).lower(state, *rest, 0).compile()

            def run(state):
                for i in range(kk):
                    state = exe(state, *rest, i)
                return jax.block_until_ready(state)
        else:
            exe = jax.jit(step, donate_argnums=0).lower(state, *rest).compile()

            def run(state):
                return jax.block_until_ready(exe(state, *rest))

        compile_s = time.perf_counter() - t0
        state = run(state)  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            state = run(state)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print(
            f"largest K: {kk} members fit, {kk * batch / med:.0f} member-images/s, "
            f"compiled in {compile_s:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        return {
            "members": kk,
            "step_seconds_median": med,
            "member_images_per_second": kk * batch / med,
            "compile_seconds": compile_s,
        }

    found = search_largest(attempt, predicted, seconds=seconds)
    if "error" in found:
        return found
    return {
        **found,
        "strategy": batching,
        "bytes_limit": int(limit),
        "bytes_per_member_predicted": per_member,
        "predicted_members": predicted,
    }


def search_largest(attempt, predicted: int, step: int = 8, grow: int = 3, seconds=None) -> dict:
    """The largest K that ``attempt(K)`` runs without running out of memory, starting from a guess.

    ``attempt`` returns a result dict or raises; out-of-memory errors
    (:func:`iml.training.is_out_of_memory`) mean "does not fit", any other error propagates. From
    ``predicted`` (a multiple of ``step``) the K is halved while it fails; once one fits, it grows
    by a quarter, at most ``grow`` times, until one fails. ``seconds`` stops the growing once that
    much time has passed, so a search on a lent machine ends with what it has. The result is the
    largest fit, with ``smallest_failed_members`` (``None`` if no K failed) and ``tried`` (each K
    in order, with ``True`` where it fitted).
    """
    from iml.training import is_out_of_memory

    start = time.perf_counter()
    tried, failed, fit = [], None, None
    kk = predicted
    while kk >= step:
        try:
            fit = attempt(kk)
            tried.append([kk, True])
            break
        except Exception as err:  # only out-of-memory is expected
            if not is_out_of_memory(err):
                raise
            print(f"largest K: {kk} members ran out of memory", file=sys.stderr, flush=True)
            tried.append([kk, False])
            failed = kk
            kk = kk // 2 // step * step
    if fit is None:
        return {"error": f"not even {step} members fit", "tried": tried}
    for _ in range(grow):
        if failed is not None:
            break
        if seconds is not None and time.perf_counter() - start > seconds:
            print("largest K: out of time, not growing further", file=sys.stderr, flush=True)
            break
        bigger = max(fit["members"] + step, int(fit["members"] * 1.25) // step * step)
        try:
            fit = attempt(bigger)
            tried.append([bigger, True])
        except Exception as err:
            if not is_out_of_memory(err):
                raise
            print(f"largest K: {bigger} members ran out of memory", file=sys.stderr, flush=True)
            tried.append([bigger, False])
            failed = bigger
    return {**fit, "smallest_failed_members": failed, "tried": tried}


def headline_candidate(candidates: dict, default: str) -> str:
    """The candidate the headline is of: the backend's default strategy; where it is not among
    the candidates, the first one asked for after the baseline (never the fastest measured,
    which would pick the luckiest run)."""
    if default in candidates:
        return default
    return next(name for name in candidates if name != "baseline")


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    import functools

    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    from iml.models import DEFAULT_CONV_IMPL, densenet_small
    from iml.training import (
        DEFAULT_MEMBER_BATCHING,
        TrainConfig,
        adam,
        batch_members,
        make_mesh,
        member_in_place,
        member_train_step,
        use_cpu_cores_as_devices,
    )
    from iml.training.host import host_memory_record, keep_step_memory

    # before JAX's first computation, which fixes its CPU dispatch mode
    if args.host_memory == "keep":
        keep_step_memory()
    if args.host_devices is None:
        use_cpu_cores_as_devices()
    elif args.host_devices > 1:
        jax.config.update("jax_num_cpu_devices", args.host_devices)
    k, b, size = args.members, args.batch, args.size
    dtype = jnp.bfloat16 if args.dtype == "bfloat16" else jnp.float32
    backend = jax.default_backend()
    optimizer = adam()
    images, labels, flips, active, betas = member_batches(k, b, size, seed=0)

    def states_for(model):
        return member_states(model, optimizer, k, size)

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

    # Baseline: one member's step, K times in a row, with the default strategy's convolutions.
    default = (
        f"{DEFAULT_MEMBER_BATCHING.get(backend, 'vmap')}/{DEFAULT_CONV_IMPL.get(backend, 'xla')}"
    )
    baseline_conv = args.baseline_conv or default.split("/")[1]
    single_model = densenet_small(conv_impl=baseline_conv, dtype=dtype)
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
        model = densenet_small(conv_impl=conv, dtype=dtype)
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

    for name in args.strategies:
        batching, conv = name.split("/")
        add(name, batching, conv)
    if jax.device_count() > 1:  # the default strategy as the trainer runs it, over its mesh
        from iml.training import ensemble_programs

        batching, conv = default.split("/")
        mesh = make_mesh(k, 1 if batching == "loop" else b)  # as train_ensemble makes it
        model = densenet_small(conv_impl=conv, dtype=dtype)
        config = TrainConfig(member_batching=batching)
        train = ensemble_programs(model, batching, mesh, config)["train"]
        member = NamedSharding(mesh, PartitionSpec("ensemble"))
        data = NamedSharding(mesh, PartitionSpec("ensemble", "data"))
        state = jax.device_put(states_for(model), member)
        rest = tuple(jax.device_put(a, data) for a in (images, labels, flips)) + tuple(
            jax.device_put(a, member) for a in (active, betas)
        )
        t0 = time.perf_counter()
        holder = [jax.block_until_ready(train(state, *rest))]  # compiles
        compile_s = time.perf_counter() - t0
        default = f"mesh{dict(mesh.shape)}/{default}"

        def run_mesh(rest=rest):
            holder[0] = train(holder[0], *rest)
            jax.block_until_ready(holder[0])

        candidates[default] = (run_mesh, compile_s, None)

    ours = headline_candidate(candidates, default)
    sides = {ours: candidates[ours][0], "baseline": candidates["baseline"][0]}
    sides.update({name: run for name, (run, _, _) in candidates.items() if name not in sides})
    # the cold calls allocate and page in; then the candidates' steps alternate, run by run
    timing = interleaved(sides, args.runs, ours=ours, baseline="baseline")

    warm = timing["warm_s"]
    member_images = k * b
    results = {}
    for name, (_, compile_s, memory) in candidates.items():
        med = statistics.median(warm[name])
        against = summarise(per_run_ratios(warm["baseline"], warm[name]))
        results[name] = {
            "step_seconds_median": med,
            "step_seconds_all": warm[name],
            "member_images_per_second": member_images / med,
            "ratio": against["ratio"],
            "ratio_range": against["ratio_range"],
            "first_call_seconds": timing["cold_s"][name],
            "compile_seconds": compile_s,
            "compiled_memory": memory,
        }
    summary = {
        "benchmark": "ensemble",
        "backend": backend,
        "device": str(jax.devices()[0].device_kind),
        "devices": jax.device_count(),
        "members": k,
        "batch_per_member": b,
        "image": [size, size, 1],
        "model": "densenet_small()",
        "dtype": args.dtype,
        "baseline_conv_impl": baseline_conv,
        "host_memory": host_memory_record(),
        "default_strategy": default,
        "headline_strategy": ours,
        "baseline_member_images_per_second": results["baseline"]["member_images_per_second"],
        "member_images_per_second": results[ours]["member_images_per_second"],
        "strategies": {n: round(r["ratio"], 3) for n, r in results.items() if n != "baseline"},
        "best_strategy": max(
            (n for n in results if n != "baseline"), key=lambda n: results[n]["ratio"]
        ),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **headline(timing, compile_s=candidates[ours][1]),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**summary, "details": results}, indent=2))  # kept if the search dies
    if args.max_members:
        batching, conv = ours.split("/")[-2:]
        summary["largest_members"] = largest_members(
            functools.partial(densenet_small, conv_impl=conv, dtype=dtype),
            batching,
            results[ours]["compiled_memory"],
            k,
            b,
            size,
            3,  # each try at thousands of members takes seconds per step
            seconds=args.max_members_seconds,
        )
    out.write_text(json.dumps({**summary, "details": results}, indent=2))
    for name, r in results.items():
        print(
            f"{name:>28}: {r['member_images_per_second']:8.1f} member-images/s  "
            f"ratio {r['ratio']:.2f}  compile {r['compile_seconds']:.1f}s",
            file=sys.stderr,
        )
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
