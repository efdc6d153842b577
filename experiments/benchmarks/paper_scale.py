"""Benchmark: K DenseNet-121 members at 224 px in one training step, against K PyTorch steps, and
the paper's experiment projected from both.

    python -m experiments.benchmarks.paper_scale              # on a GPU: the largest K that fits
    python -m experiments.benchmarks.paper_scale --members 4  # a given K
    python -m experiments.benchmarks.paper_scale --quick      # a tiny DenseNet at 32 px

**Ours.** The trainer's own step (:func:`iml.training.member_train_step` under
:func:`iml.training.batch_members` with the backend's default member batching): ``K`` members of
the paper's recipe, each with its own batch of 16 ``uint8`` images at 224x224x3, random horizontal
flips, ImageNet normalisation, its own beta-weighted cross-entropy (betas spread over
``[0.5, 0.99]``) and its own Adam step, jitted as one program with the state donated. Validation is
:func:`iml.training.member_eval_step` over ``K`` members, batch 64 each.

**Baseline.** torchvision's ``DenseNet`` of the same configuration (DenseNet-121 by default) with
``torch.optim.Adam``: the same preprocessing and beta-weighted loss, cuDNN in benchmark mode, one
model's step after another. ``K`` PyTorch steps take ``K`` times one step, so its member-images per
second are those of one step. It is set up first, before JAX takes the device's memory, and its
model stays on the device (a few GB) until ours have been timed against it: after a first step
of each (``cold_s``; ``compile_s``, ours' compile, apart), one step of each alternates in
``--runs`` interleaved runs (:mod:`experiments.benchmarks._harness`), at one member and at K.

**Largest K.** XLA's memory analysis of the one-member program (arguments and temporaries) gives
the bytes per member; ``0.9`` of the device's limit over that predicts the largest K, which is
compiled and run, halving while it runs out of memory and growing while time is left
(:func:`experiments.benchmarks.ensemble.search_largest`). Any other error ends the run, with the K
that raised it and the first 2,000 characters of its message under ``failed`` in the JSON. On an
H200 the predicted 62 members failed so, and 48 too: a kernel hit a CUDA illegal address, in
XLA's autotuner and, with it off, in the compiled program (``docs/results/gpu_h200``), so pass
``--members`` there; ``--skip-one-member`` then leaves the call's time to the K-member compiles.
``--conv-impl`` chooses the DenseNet's convolutions (default ``xla``, the GPU's): under
``matmul`` every convolution is a matrix product, so vmapped members make batched matrix
products instead of the grouped convolutions that ``xla`` makes.

**Projection** (:mod:`experiments.benchmarks._projection`, whose docstring states the model).
Both sides' throughputs become the wall time of the paper's experiment, 3 betas x 10 rotations x
40 seeds = 1,200 members on ChestX-ray14's 112,120 images, each epoch one pass over the 70%
training folds and one validation pass over the 20% validation folds, trained to early stopping:
each member's epochs are drawn from a stored run trained with the paper's recipe
(``--stopping-run``; ``--epochs`` gives every member a fixed count instead). A loop of PyTorch
models trains each model its own epochs; our K members share a program that runs until the last
of them stops. On ``--cards`` cards across hosts, one process each, the batches are shared out and
the runtime's coordination is added as measured on CPU processes
(``experiments.benchmarks.process_scaling``, ``--scaling-record``). Each projected figure has a
95% percentile bootstrap interval (``--bootstrap`` replicates), resampling the members' epochs and
both sides' timed training steps.

``--card-record FILE...`` projects from a card's stored measurements instead of measuring (no
step runs), e.g. on a machine without the card. Without a validation step at K members the
projection uses PyTorch's validation rate for both sides (``eval_source``).

Each run's ratio is K PyTorch steps' time over our K-member step's (member-images per second of
ours over PyTorch's). The headline ``ratio`` is the median of the runs' ratios at the largest K,
with their range; the JSON also has the one-member ratio (``ratio_one_member``, likewise) and the
projection. With ``--card-record`` nothing is timed: the ratio is the records' (``ratio_from``).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from experiments.benchmarks import _projection as P
from experiments.benchmarks._harness import add_runs_argument, check_runs, headline, interleaved


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a tiny DenseNet at 32 px, 2 members")
    p.add_argument("--members", type=int, default=None, help="K (default: the largest that fits)")
    p.add_argument(
        "--skip-one-member",
        action="store_true",
        help="with --members, skip the one-member step (no ratio_one_member in the JSON)",
    )
    p.add_argument(
        "--conv-impl",
        choices=("xla", "matmul", "mixed"),
        default="xla",
        help="the DenseNet's convolutions (iml.models.CONV_IMPLS; default xla, the GPU's)",
    )
    p.add_argument("--batch", type=int, default=16, help="training images per member and step")
    p.add_argument("--eval-batch", type=int, default=64, help="validation images per member")
    p.add_argument("--size", type=int, default=224)
    add_runs_argument(p, default=None, what=": a step of each a run (10, 3 with --quick)")
    p.add_argument(
        "--epochs", type=float, default=None, help="a fixed count of epochs per member, projected"
    )
    p.add_argument(
        "--stopping-run",
        default=str(P.STOPPING_RUN),
        help="a stored run whose members' epochs to early stopping are projected (default: "
        "docs/results/pneumoniamnist_early_stopping)",
    )
    p.add_argument(
        "--cards", type=int, nargs="+", default=[1, 4, 16, 64], help="card counts projected"
    )
    p.add_argument(
        "--scaling-record",
        default=None,
        help="a process_scaling record (default: the newest in docs/results/process_scaling)",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=2000,
        help="replicates of the projection's 95%% intervals (0: none)",
    )
    p.add_argument(
        "--card-record",
        nargs="+",
        default=None,
        help="project from these stored paper_scale records instead of measuring",
    )
    p.add_argument(
        "--search-seconds", type=float, default=120.0, help="stop growing K after this long"
    )
    p.add_argument("--out", default="runs/benchmarks/paper_scale.json")
    args = p.parse_args(argv)
    if args.quick:
        args.size, args.batch, args.eval_batch = 32, 2, 4
        args.members = args.members or 2
    args.runs = args.runs or (3 if args.quick else 10)
    check_runs(p, args.runs)
    if args.members is not None and args.members < 1:
        p.error(f"--members must be at least 1, got {args.members}")
    if args.skip_one_member and (args.members is None or args.members == 1):
        p.error("--skip-one-member needs --members 2 or more (the search starts from one member)")
    for name in ("batch", "eval_batch", "size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.epochs is not None and not args.epochs > 0:
        p.error(f"--epochs must be positive, got {args.epochs}")
    if any(n < 1 for n in args.cards):
        p.error("--cards must be at least 1 each")
    if args.bootstrap < 0:
        p.error(f"--bootstrap must be 0 or more, got {args.bootstrap}")
    if args.scaling_record is None:
        args.scaling_record = P.latest_scaling_record()
    return args


def architecture(quick: bool) -> dict[str, Any]:
    """The DenseNet's configuration: DenseNet-121's, or a tiny one (blocks 1-1) for ``--quick``."""
    if quick:
        return {"block_config": (1, 1), "growth_rate": 4, "num_init_features": 8, "bn_size": 4}
    # DenseNet-121
    return {
        "block_config": (6, 12, 24, 16),
        "growth_rate": 32,
        "num_init_features": 64,
        "bn_size": 4,
    }


def _median_seconds(step, repeats: int) -> tuple[float, list[float]]:
    from experiments.benchmarks.train_step import time_steps

    times = time_steps(step, repeats)
    return statistics.median(times), times


def torch_baseline(
    arch: dict, batch: int, eval_batch: int, size: int, repeats: int
) -> tuple[Callable[[], None], dict]:
    """One torchvision DenseNet's training step, run once (its first step timed, cold), and its
    validation step, timed (median of ``repeats``).

    Returns:
      the training step (for :func:`pair` to time against ours) and what was measured.
    """
    import torch
    import torchvision

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = dev.type == "cuda"
    torch.manual_seed(0)
    model = torchvision.models.DenseNet(
        growth_rate=arch["growth_rate"],
        block_config=arch["block_config"],
        num_init_features=arch["num_init_features"],
        bn_size=arch["bn_size"],
        num_classes=1,
    ).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    gen = torch.Generator(device="cpu").manual_seed(0)
    images = torch.randint(0, 256, (batch, size, size, 3), dtype=torch.uint8, generator=gen)
    images = images.to(dev)
    labels = (torch.rand(batch, generator=gen) < 0.3).float().to(dev)
    flips = (torch.rand(batch, generator=gen) < 0.5).to(dev)
    val = torch.randint(0, 256, (eval_batch, size, size, 3), dtype=torch.uint8, generator=gen)
    val = val.to(dev)
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1)
    beta = 0.99

    def prepare(x, flip=None):
        x = x.permute(0, 3, 1, 2).float() / 255.0
        if flip is not None:
            x = torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
        return (x - mean) / std

    def sync(loss):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        else:
            loss.item()

    def train_step() -> None:
        model.train()
        opt.zero_grad(set_to_none=True)
        logits = model(prepare(images, flips))[:, 0]
        # the beta-weighted cross-entropy, eq. (7) with the log loss
        loss = -(
            beta * labels * torch.nn.functional.logsigmoid(logits)
            + (1 - beta) * (1 - labels) * torch.nn.functional.logsigmoid(-logits)
        ).mean()
        loss.backward()
        opt.step()
        sync(loss)

    def eval_step() -> None:
        model.eval()
        with torch.no_grad():
            sync(model(prepare(val))[:, 0].sum())

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    train_step()
    first = time.perf_counter() - t0
    eval_step()
    eval_s, _ = _median_seconds(eval_step, repeats)
    out = {
        "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
        "version": torch.__version__,
        "first_step_s": first,
        "eval_step_s": eval_s,
        "eval_member_images_per_s": eval_batch / eval_s,
    }
    if dev.type == "cuda":
        out["peak_device_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return train_step, out


def _member_inputs(k: int, batch: int, size: int, seed: int) -> tuple:
    from experiments.benchmarks.ensemble import member_batches

    return member_batches(k, batch, size, seed, channels=3, betas=(0.5, 0.99))


def _member_states(model, optimizer, k: int, size: int):
    from experiments.benchmarks.ensemble import member_states

    return member_states(model, optimizer, k, size, channels=3)


def ours(model, batching: str, k: int, batch: int, size: int) -> tuple[Callable[[], None], dict]:
    """``k`` members' training step of the trainer, compiled (``compile_s``) and not yet run.

    Returns:
      the step (it donates and replaces the members' state, and blocks until done) and what
      was measured so far.
    """
    import jax

    from iml.training import adam, batch_members, member_train_step

    optimizer = adam()
    step = batch_members(functools.partial(member_train_step, model, optimizer), batching)
    rest = _member_inputs(k, batch, size, seed=k)
    holder = [_member_states(model, optimizer, k, size)]
    t0 = time.perf_counter()
    exe = jax.jit(step, donate_argnums=0).lower(holder[0], *rest).compile()
    compile_s = time.perf_counter() - t0
    mem = exe.memory_analysis()

    def run() -> None:
        holder[0] = jax.block_until_ready(exe(holder[0], *rest))

    out = {"members": k, "compile_s": compile_s}
    if mem is not None:
        out["xla_bytes"] = int(mem.argument_size_in_bytes + mem.temp_size_in_bytes)
    return run, out


def pair(ours_step, ours_info: dict, torch_step, torch_info: dict, batch: int, runs: int):
    """Our K-member step against PyTorch's one-model step: ours' first call (cold), then ``runs``
    interleaved runs of one step of each (:func:`experiments.benchmarks._harness.interleaved`),
    PyTorch's scaled by K (K models' steps: equal work).

    Returns:
      ours' measurements (``first_step_s``, ``step_s`` the median, ``step_s_all``,
      ``member_images_per_s``) and the runs' timing; each run's ratio is K PyTorch steps' time
      over ours, i.e. member-images per second of ours over PyTorch's.
    """
    k = ours_info["members"]
    t0 = time.perf_counter()
    ours_step()
    first = time.perf_counter() - t0
    timing = interleaved(
        {"ours": ours_step, "baseline": torch_step}, runs, scale={"baseline": k}, cold=False
    )
    timing["cold_s"] = {"ours": first, "baseline": torch_info["first_step_s"]}
    times = timing["warm_s"]["ours"]
    median = statistics.median(times)
    info = {
        **ours_info,
        "first_step_s": first,
        "step_s": median,
        "step_s_all": times,
        "member_images_per_s": k * batch / median,
    }
    print(
        f"ours: K={k} {info['member_images_per_s']:.0f} member-images/s, "
        f"compiled in {info['compile_s']:.1f}s, {timing['ratio']:.2f}x PyTorch's",
        file=sys.stderr,
        flush=True,
    )
    return info, timing


def ours_eval(model, batching: str, k: int, eval_batch: int, size: int, repeats: int) -> dict:
    """``k`` members' validation step of the trainer, compiled and timed."""
    import jax
    import jax.numpy as jnp

    from iml.training import adam, batch_members, member_eval_step

    step = batch_members(functools.partial(member_eval_step, model), batching)
    images, labels, _, _, betas = _member_inputs(k, eval_batch, size, seed=k + 1)
    states = _member_states(model, adam(), k, size)
    weights = jnp.ones(labels.shape)
    t0 = time.perf_counter()
    exe = jax.jit(step).lower(states, images, labels, weights, betas).compile()
    compile_s = time.perf_counter() - t0

    def run() -> None:
        jax.block_until_ready(exe(states, images, labels, weights, betas))

    run()
    median, _ = _median_seconds(run, repeats)
    return {
        "members": k,
        "compile_s": compile_s,
        "step_s": median,
        "member_images_per_s": k * eval_batch / median,
    }


def measure_card(args: argparse.Namespace, summary: dict[str, Any], save) -> None:
    """PyTorch's steps, ours at one member and at K (the largest that runs, or ``--members``),
    each timed against PyTorch's in interleaved runs, and our K-member validation step, each
    stored in ``summary`` (and saved) as it is measured. PyTorch's model stays on the device
    (a few GB on a GPU) while ours run, so that their steps can alternate."""
    arch = architecture(args.quick)
    torch_step, torch_result = torch_baseline(
        arch, args.batch, args.eval_batch, args.size, args.runs
    )
    held = {"torch_step": torch_step}
    del torch_step
    summary["torch"] = torch_result
    save()

    import jax

    from experiments.benchmarks.ensemble import search_largest
    from iml.models import DenseNet
    from iml.training import DEFAULT_MEMBER_BATCHING, is_out_of_memory

    backend = jax.default_backend()
    batching = DEFAULT_MEMBER_BATCHING.get(backend, "vmap")
    if batching == "loop":  # one member at a time is K single steps: batch them in one program
        batching = "vmap"
    model = DenseNet(**arch, num_outputs=1, small_inputs=False, conv_impl=args.conv_impl)
    summary.update(
        backend=backend,
        device=str(jax.devices()[0].device_kind),
        batching=batching,
        conv_impl=args.conv_impl,
    )
    timings: dict[int, dict] = {}

    def attempt(k: int) -> dict:
        tried.append(k)
        run, info = ours(model, batching, k, args.batch, args.size)
        info, timings[k] = pair(run, info, held["torch_step"], torch_result, args.batch, args.runs)
        return info

    tried: list[int] = []
    try:
        if not args.skip_one_member:
            one = attempt(1)
            summary["ours_one_member"] = one
            summary["ratio_one_member"] = timings[1]["ratio"]
            summary["ratio_one_member_range"] = timings[1]["ratio_range"]
            save()
        if args.members == 1:
            largest = one
        elif args.members is not None:
            largest = attempt(args.members)
        else:
            limit = (jax.devices()[0].memory_stats() or {}).get("bytes_limit")
            if limit is None or "xla_bytes" not in one:
                raise SystemExit("the backend reports no memory limit: pass --members")
            predicted = max(1, int(0.9 * limit / one["xla_bytes"]))
            summary["predicted_members"] = predicted
            save()
            print(f"largest K: predicted {predicted}", file=sys.stderr, flush=True)
            largest = search_largest(
                attempt, predicted, step=1, grow=2, seconds=args.search_seconds
            )
            if "error" in largest:
                raise SystemExit(f"largest K: {largest['error']}")
    except Exception as err:  # e.g. a compile that fails (not for memory): keep what it says
        summary["failed"] = {"members": tried[-1] if tried else None, "error": str(err)[:2000]}
        save()
        raise
    k = largest["members"]
    summary["ours"] = largest
    timing = timings[k]
    torch_times = timing["warm_s"]["baseline"]
    summary["torch"].update(
        train_step_s=statistics.median(torch_times),
        train_step_s_all=torch_times,
        train_member_images_per_s=args.batch / statistics.median(torch_times),
    )
    summary.update(headline(timing, compile_s=largest["compile_s"]))
    save()
    held.clear()  # PyTorch's model, before our validation step at K
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    try:
        ev = ours_eval(model, batching, k, args.eval_batch, args.size, args.runs)
    except Exception as err:  # validation at K members may not fit where training just did
        if not is_out_of_memory(err):
            raise
        ev = ours_eval(model, batching, max(1, k // 2), args.eval_batch, args.size, args.runs)
    summary["ours_eval"] = ev
    save()


def _named(path: str | Path) -> str:
    """``path`` relative to the repository where it lies in it, so that records name no machine."""
    path = Path(path).resolve()
    return str(path.relative_to(P.ROOT)) if path.is_relative_to(P.ROOT) else str(path)


def projection(card: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The paper's experiment projected from a card's measurements (``torch``, ``ours`` and,
    where measured, ``ours_eval``), on each of ``--cards``."""
    torch_rates = {
        "train": card["torch"]["train_member_images_per_s"],
        "eval": card["torch"]["eval_member_images_per_s"],
    }
    measured_eval = "ours_eval" in card
    ours_rates = {
        "train": card["ours"]["member_images_per_s"],
        "eval": card["ours_eval"]["member_images_per_s"] if measured_eval else torch_rates["eval"],
    }
    if args.epochs is not None:
        epochs, source = np.array([args.epochs]), f"{args.epochs:g} epochs for every member"
    else:
        epochs, source = P.epochs_until_stopped(args.stopping_run), _named(args.stopping_run)
    scaling = None
    if args.scaling_record is not None:
        scaling = json.loads(Path(args.scaling_record).read_text())
    settings = {
        "members_per_batch": card["ours"]["members"],
        "cards": args.cards,
        "scaling": scaling,
        "compile_s": card["ours"].get("compile_s", 0.0),
    }
    out = P.project_on_cards(ours_rates, torch_rates, epochs=epochs, **settings)
    steps = (card["ours"].get("step_s_all"), card["torch"].get("train_step_s_all"))
    if args.bootstrap and all(steps):
        intervals = P.projection_intervals(
            ours_rates, torch_rates, ours_step_s=steps[0], torch_step_s=steps[1], epochs=epochs,
            replicates=args.bootstrap, **settings,
        )  # fmt: skip
        for row, interval in zip(out["cards"], intervals, strict=True):
            row["interval_95"] = interval
        out["bootstrap"] = {
            "replicates": args.bootstrap,
            "resampled": "the members' epochs and both sides' timed training steps",
        }
    out.update(
        images=P.CHESTXRAY14_IMAGES,
        epochs_source=source,
        epochs_drawn=sorted(int(e) if float(e).is_integer() else float(e) for e in epochs),
        eval_source="ours at K" if measured_eval else "PyTorch's, for both sides",
        scaling_record=None if args.scaling_record is None else _named(args.scaling_record),
    )
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the benchmark, writes the JSON file and prints the summary as the last line."""
    args = _parse(argv)
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after each part, so that a part cut off by a time limit loses only itself
        out_path.write_text(json.dumps(summary, indent=2))

    if args.card_record:
        summary = P.load_card_records(args.card_record)
        summary["card_records"] = [_named(p) for p in args.card_record]
        summary["ratio_from"] = "the card records: nothing timed in this run"
        summary.setdefault(
            "ratio",
            summary["ours"]["member_images_per_s"] / summary["torch"]["train_member_images_per_s"],
        )
    else:
        summary = {
            "benchmark": "paper_scale",
            "model": "densenet121" if not args.quick else f"DenseNet{architecture(True)}",
            "image": [args.size, args.size, 3],
            "batch_per_member": args.batch,
            "eval_batch_per_member": args.eval_batch,
        }
        measure_card(args, summary, save)
    summary["projection"] = projection(summary, args)
    save()
    skip = ("torch", "ours", "ours_one_member", "ours_eval", "projection", "failed")
    line = {key: v for key, v in summary.items() if key not in skip}
    line["members"] = summary["ours"]["members"]
    line["member_images_per_s"] = summary["ours"]["member_images_per_s"]
    line["torch_images_per_s"] = summary["torch"]["train_member_images_per_s"]
    line["projected_hours"] = {
        row["cards"]: {"ours": row["ours_hours"], "torch": row["torch_hours"]}
        for row in summary["projection"]["cards"]
    }
    line["ratio"] = summary["ratio"]
    print(json.dumps(line))
    return summary


if __name__ == "__main__":
    main()
