"""Which of a DenseNet's convolutions fails on this device when batched over K members.

    python -m tools.probe_member_convs --members 48     # DenseNet-121, batch 16 at 224 px
    python -m tools.probe_member_convs --members 48 \\
        --first denseblock2/denselayer6/conv1,denseblock4/denselayer6/conv1
    python -m tools.probe_member_convs --members 40 --only denseblock2/denselayer6/conv1
    python -m tools.probe_member_convs --quick          # a tiny DenseNet at 32 px

On one H200, 32 DenseNet-121 members at 224 px trained in one program and 48 did not: a kernel
made an illegal memory access, in XLA's autotuner and, with the autotuner off, in the compiled
step (``docs/results/gpu_h200``). That error surfaces asynchronously, so a whole training step
cannot say which kernel made it. This probe takes the step apart.

It traces the trainer's K-member training step (:func:`iml.training.member_train_step` under
:func:`iml.training.batch_members` with ``vmap``, as on a GPU) and collects its convolutions,
forward and backward, exactly as the step has them (grouped over the K members), by the layer
that makes them. Each layer's convolutions then run alone, in a program of their own on random
inputs of their shapes: compiled (on a GPU with XLA's autotuner, as in training), run and waited
for, so a fault is charged to the layer whose convolutions made it. Layers whose convolutions
are the same (the 3x3 ones within a dense block) run once. The first failure ends the probe:
after a CUDA fault the process's device is unusable, so probe another K in a new process.

``--out`` is rewritten after each layer, so a probe cut off by a time limit keeps what it did.
The last line printed is one JSON object: the members, the layers and convolutions found, the
layers run and the first that failed, if one did (the exit status is then 1).
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
class ConvCall:
    """One ``conv_general_dilated`` of the K-member step: its operands' shapes and its params."""

    lhs_shape: tuple[int, ...]
    rhs_shape: tuple[int, ...]
    dtype: str
    params: tuple[tuple[str, Any], ...]  # the primitive's parameters, sorted by name
    backward: bool  # in the step's backward pass

    def describe(self) -> dict[str, Any]:
        p = dict(self.params)
        return {
            "pass": "backward" if self.backward else "forward",
            "input": list(self.lhs_shape),
            "kernel": list(self.rhs_shape),
            "window_strides": list(p["window_strides"]),
            "padding": [list(q) for q in p["padding"]],
            "feature_group_count": p["feature_group_count"],
            "batch_group_count": p["batch_group_count"],
            "dtype": self.dtype,
        }


@dataclasses.dataclass(frozen=True)
class LayerConvs:
    """The convolutions that one layer makes in the K-member step, forward and backward."""

    layer: str  # e.g. 'denseblock2/denselayer6/conv1': the first layer that makes them
    calls: tuple[ConvCall, ...]
    count: int = 1  # how many layers make the same convolutions

    def describe(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "layers": self.count,
            "convolutions": [c.describe() for c in self.calls],
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
    """DenseNet-121 (or the tiny DenseNet of ``--quick``) with XLA's convolutions, the GPU's."""
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


def step_convolutions(
    model, members: int, batch: int, size: int, channels: int = 3
) -> list[LayerConvs]:
    """The convolutions of the trainer's ``members``-member training step of ``model``, by
    layer, in the order the step first makes them (traced on abstract arrays: nothing is
    compiled or allocated)."""
    import functools

    import jax
    from jax.extend.core import jaxprs_in_params

    from experiments.benchmarks.ensemble import member_batches, member_states
    from iml.training import adam, batch_members, member_train_step

    optimizer = adam()
    step = batch_members(functools.partial(member_train_step, model, optimizer), "vmap")
    state = jax.eval_shape(lambda: member_states(model, optimizer, members, size, channels))
    rest = jax.eval_shape(lambda: member_batches(members, batch, size, 0, channels=channels))
    by_layer: dict[str, list[ConvCall]] = {}

    def walk(jaxpr) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "conv_general_dilated":
                lhs, rhs = (v.aval for v in eqn.invars)
                stack = str(eqn.source_info.name_stack)
                call = ConvCall(
                    lhs_shape=tuple(lhs.shape),
                    rhs_shape=tuple(rhs.shape),
                    dtype=str(lhs.dtype),
                    params=tuple(sorted(eqn.params.items())),
                    backward="transpose(" in stack,
                )
                by_layer.setdefault(_layer(stack, type(model).__name__), []).append(call)
            for sub in jaxprs_in_params(eqn.params):
                walk(sub)

    walk(jax.make_jaxpr(step)(state, *rest).jaxpr)
    layers: dict[tuple[ConvCall, ...], LayerConvs] = {}
    for name, calls in by_layer.items():
        key = tuple(sorted(set(calls), key=repr))
        if key in layers:
            layers[key] = dataclasses.replace(layers[key], count=layers[key].count + 1)
        else:
            layers[key] = LayerConvs(name, key)
    return list(layers.values())


def _layer(name_stack: str, root: str) -> str:
    """The module path below ``root`` in a traced name stack, e.g.
    'vmap(transpose(jvp(DenseNet)))/denseblock2/denselayer6/conv1' -> 'denseblock2/...'."""
    parts = [p for p in name_stack.split("/") if p and "(" not in p and p != root]
    return "/".join(parts)


def layer_program(layer: LayerConvs):
    """The program of ``layer``'s convolutions alone: ``(lhs_0, rhs_0, lhs_1, rhs_1, ...) ->
    outputs``, jitted."""
    import jax
    from jax import lax

    def run(*operands):
        pairs = zip(operands[::2], operands[1::2], strict=True)
        return [
            lax.conv_general_dilated_p.bind(lhs, rhs, **dict(call.params))
            for call, (lhs, rhs) in zip(layer.calls, pairs, strict=True)
        ]

    return jax.jit(run)


def layer_inputs(layer: LayerConvs, seed: int = 0) -> list:
    """Random operands of ``layer``'s convolutions, ``[lhs_0, rhs_0, lhs_1, ...]``."""
    import jax

    keys = iter(jax.random.split(jax.random.key(seed), 2 * len(layer.calls)))
    return [
        jax.random.normal(next(keys), shape, call.dtype)
        for call in layer.calls
        for shape in (call.lhs_shape, call.rhs_shape)
    ]


def probe(layer: LayerConvs) -> dict[str, Any]:
    """Compiles, runs and waits for ``layer``'s program; raises what the device raises."""
    import jax

    operands = layer_inputs(layer)
    t0 = time.perf_counter()
    exe = layer_program(layer).lower(*operands).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(exe(*operands))
    return {"compile_s": compile_s, "run_s": time.perf_counter() - t0}


def ordered(layers: list[LayerConvs], first: list[str]) -> list[LayerConvs]:
    """``layers`` with those named in ``first`` first, in that order."""
    names = [layer.layer for layer in layers]
    unknown = [name for name in first if name not in names]
    if unknown:
        raise ValueError(f"layers without convolutions of their own: {unknown}")
    head = [layers[names.index(name)] for name in first]
    return head + [layer for layer in layers if layer not in head]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the probe, writes the JSON record and prints the summary as the last line."""
    args = _parse(argv)
    import jax

    from iml.pipeline import atomic_write_bytes

    model = _model(args.quick, args.dtype)
    first = [name for name in (args.only or args.first).split(",") if name]
    layers = ordered(step_convolutions(model, args.members, args.batch, args.size), first)
    if args.only:
        layers = layers[: len(first)]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after each layer, whole or not at all
        atomic_write_bytes(out, json.dumps(record, indent=2).encode())

    record: dict[str, Any] = {
        "probe": "member_convs",
        "model": "densenet121" if not args.quick else "tiny DenseNet",
        "members": args.members,
        "batch_per_member": args.batch,
        "image": [args.size, args.size, 3],
        "dtype": args.dtype,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0].device_kind),
        "layers": len(layers),
        "convolutions": sum(len(layer.calls) for layer in layers),
        "probed": [],
        "failed": None,
    }
    for i, layer in enumerate(layers):
        entry = layer.describe()
        print(
            f"[{i + 1}/{len(layers)}] {layer.layer}: {len(layer.calls)} convolutions "
            f"over {args.members} members",
            file=sys.stderr,
            flush=True,
        )
        try:
            entry.update(probe(layer))
        except Exception as err:  # a device fault: record it and stop, the device is unusable
            entry["error"] = f"{type(err).__name__}: {err}"[:2000]
            record["failed"] = entry
            save()
            break
        record["probed"].append(entry)
        save()
    keys = ("probe", "members", "dtype", "device", "layers", "convolutions")
    summary = {key: record[key] for key in keys}
    summary["ran"] = len(record["probed"])
    summary["failed"] = None if record["failed"] is None else record["failed"]["layer"]
    print(json.dumps(summary))
    if record["failed"] is not None:
        raise SystemExit(1)
    return record


if __name__ == "__main__":
    main()
