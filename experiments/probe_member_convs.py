"""Which of a DenseNet's convolutions fails on this device when batched over K members.

    python -m experiments.probe_member_convs --members 48     # DenseNet-121, batch 16 at 224 px
    python -m experiments.probe_member_convs --members 48 \\
        --first denseblock2/denselayer6/conv1,denseblock4/denselayer6/conv1
    python -m experiments.probe_member_convs --members 40 --only denseblock2/denselayer6/conv1
    python -m experiments.probe_member_convs --quick          # a tiny DenseNet at 32 px

On one H200, 32 DenseNet-121 members at 224 px trained in one program and 48 did not: a kernel
made an illegal memory access, in XLA's autotuner and, with the autotuner off, in the compiled
step (``docs/results/gpu_h200``). That error surfaces asynchronously, so a whole training step
cannot say which kernel made it. This probe takes the step apart.

It traces one member's training pass of the model and collects its distinct convolutions (input
and kernel shapes, strides, padding), each with the first layer that makes it. Each then runs
alone, as the trainer's ``vmap`` runs it: the convolution and both of its gradients (input and
kernel), with inputs and kernels batched over K members, which XLA makes grouped convolutions of
K groups. Each is compiled (on a GPU with XLA's autotuner, as in training), run and waited for,
so a fault is charged to the convolution that made it. The first failure ends the probe: after
a CUDA fault the process's device is unusable, so probe another K in a new process.

``--out`` is rewritten after each convolution, so a probe cut off by a time limit keeps what it
did. The last line printed is one JSON object: the members, the convolutions probed and the first
that failed, if one did (the exit status is then 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class MemberConv:
    """One convolution of one member's training pass, as ``lax.conv_general_dilated`` takes it."""

    layer: str  # the first layer that makes it, e.g. 'denseblock2/denselayer6/conv1'
    lhs_shape: tuple[int, ...]
    rhs_shape: tuple[int, ...]
    window_strides: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    lhs_dilation: tuple[int, ...]
    rhs_dilation: tuple[int, ...]
    dimension_numbers: Any
    dtype: str
    count: int = 1  # how many layers make it

    def describe(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "layers": self.count,
            "input": list(self.lhs_shape),
            "kernel": list(self.rhs_shape),
            "strides": list(self.window_strides),
            "padding": [list(p) for p in self.padding],
            "dtype": self.dtype,
        }


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=48, help="K, the members batched (default 48)")
    p.add_argument("--quick", action="store_true", help="a tiny DenseNet at 32 px, batch 2")
    p.add_argument("--batch", type=int, default=16, help="images per member")
    p.add_argument("--size", type=int, default=224, help="image side in pixels")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument(
        "--first",
        default="",
        help="comma-separated layers to probe first, e.g. denseblock2/denselayer6/conv1",
    )
    p.add_argument("--only", default="", help="comma-separated layers: probe these and no others")
    p.add_argument("--out", default="runs/benchmarks/probe_member_convs.json")
    args = p.parse_args(argv)
    if args.only and args.first:
        p.error("--only and --first exclude each other")
    if args.quick:
        args.size, args.batch = 32, 2
    for name in ("members", "batch", "size"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    return args


def _model(quick: bool, dtype: str):
    import jax.numpy as jnp

    from experiments.benchmarks.paper_scale import architecture
    from iml.models import DenseNet

    return DenseNet(
        **architecture(quick),
        num_outputs=1,
        small_inputs=False,
        dtype=jnp.dtype(dtype),
        conv_impl="xla",
    )


def member_convolutions(model, batch: int, size: int, channels: int = 3) -> list[MemberConv]:
    """The distinct convolutions of one member's training pass of ``model``, in the order the
    pass makes them (nothing is compiled: the pass is traced on abstract arrays)."""
    import jax
    import jax.numpy as jnp
    from jax.extend.core import jaxprs_in_params

    x = jax.ShapeDtypeStruct((batch, size, size, channels), jnp.float32)
    variables = jax.eval_shape(
        lambda: model.init(jax.random.key(0), jnp.zeros(x.shape), train=False)
    )

    def forward(variables, x):
        return model.apply(variables, x, train=True, mutable=["batch_stats"])

    found: dict[tuple, MemberConv] = {}

    def walk(jaxpr) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "conv_general_dilated":
                p = eqn.params
                if p["feature_group_count"] != 1 or p["batch_group_count"] != 1:
                    raise ValueError(f"a grouped convolution in one member's pass: {p}")
                lhs, rhs = (v.aval for v in eqn.invars)
                conv = MemberConv(
                    layer=_layer(eqn, root=type(model).__name__),
                    lhs_shape=tuple(lhs.shape),
                    rhs_shape=tuple(rhs.shape),
                    window_strides=tuple(p["window_strides"]),
                    padding=tuple(tuple(q) for q in p["padding"]),
                    lhs_dilation=tuple(p["lhs_dilation"]),
                    rhs_dilation=tuple(p["rhs_dilation"]),
                    dimension_numbers=p["dimension_numbers"],
                    dtype=str(lhs.dtype),
                )
                key = dataclasses.astuple(dataclasses.replace(conv, layer=""))
                if key in found:
                    found[key] = dataclasses.replace(found[key], count=found[key].count + 1)
                else:
                    found[key] = conv
            for sub in jaxprs_in_params(eqn.params):
                walk(sub)

    walk(jax.make_jaxpr(forward)(variables, x).jaxpr)
    return list(found.values())


def _layer(eqn, root: str) -> str:
    """The module path below ``root`` of a traced equation, e.g. 'denseblock2/denselayer6/conv1'
    (as XLA's op names give it)."""
    parts = [p for p in str(eqn.source_info.name_stack).split("/") if p and "(" not in p]
    return "/".join(parts[1:] if parts[:1] == [root] else parts)


def member_program(conv: MemberConv):
    """The K-member program of ``conv``: ``(inputs [K, ...], kernels [K, ...]) -> (outputs,
    input gradients, kernel gradients)``, jitted, with the members batched by ``vmap``."""
    import jax
    from jax import lax

    def one(x, kernel):
        def apply(x, kernel):
            return lax.conv_general_dilated(
                x,
                kernel,
                conv.window_strides,
                conv.padding,
                lhs_dilation=conv.lhs_dilation,
                rhs_dilation=conv.rhs_dilation,
                dimension_numbers=conv.dimension_numbers,
            )

        y, pullback = jax.vjp(apply, x, kernel)
        dx, dkernel = pullback(y)
        return y, dx, dkernel

    return jax.jit(jax.vmap(one))


def member_inputs(conv: MemberConv, members: int, seed: int = 0) -> tuple:
    """Random inputs and kernels of ``members`` members for ``conv``."""
    import jax

    kx, kk = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(kx, (members, *conv.lhs_shape), conv.dtype)
    kernel = jax.random.normal(kk, (members, *conv.rhs_shape), conv.dtype)
    return x, kernel


def probe(conv: MemberConv, members: int) -> dict[str, Any]:
    """Compiles, runs and waits for ``conv``'s K-member program; raises what the device raises."""
    import jax

    x, kernel = member_inputs(conv, members)
    t0 = time.perf_counter()
    exe = member_program(conv).lower(x, kernel).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(exe(x, kernel))
    return {"compile_s": compile_s, "run_s": time.perf_counter() - t0}


def ordered(convs: list[MemberConv], first: list[str]) -> list[MemberConv]:
    """``convs`` with those of the layers in ``first`` first, in that order."""
    layers = [c.layer for c in convs]
    unknown = [name for name in first if name not in layers]
    if unknown:
        raise ValueError(f"layers without a convolution of their own: {unknown}")
    head = [convs[layers.index(name)] for name in first]
    return head + [c for c in convs if c not in head]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the probe, writes the JSON record and prints the summary as the last line."""
    args = _parse(argv)
    import jax

    model = _model(args.quick, args.dtype)
    first = [name for name in (args.only or args.first).split(",") if name]
    convs = ordered(member_convolutions(model, args.batch, args.size), first)
    if args.only:
        convs = convs[: len(first)]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "probe": "member_convs",
        "model": "densenet121" if not args.quick else "tiny DenseNet",
        "members": args.members,
        "batch_per_member": args.batch,
        "image": [args.size, args.size, 3],
        "dtype": args.dtype,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0].device_kind),
        "convolutions": len(convs),
        "probed": [],
        "failed": None,
    }
    for i, conv in enumerate(convs):
        entry = conv.describe()
        print(
            f"[{i + 1}/{len(convs)}] {conv.layer}: {entry['input']} * {entry['kernel']} "
            f"x {args.members} members",
            file=sys.stderr,
            flush=True,
        )
        try:
            entry.update(probe(conv, args.members))
        except Exception as err:  # a device fault: record it and stop, the device is unusable
            entry["error"] = f"{type(err).__name__}: {err}"[:2000]
            record["failed"] = entry
            out.write_text(json.dumps(record, indent=2))
            break
        record["probed"].append(entry)
        out.write_text(json.dumps(record, indent=2))
    summary = {key: record[key] for key in ("probe", "members", "dtype", "device", "convolutions")}
    summary["ran"] = len(record["probed"])
    summary["failed"] = None if record["failed"] is None else record["failed"]["layer"]
    print(json.dumps(summary))
    if record["failed"] is not None:
        raise SystemExit(1)
    return record


if __name__ == "__main__":
    main()
