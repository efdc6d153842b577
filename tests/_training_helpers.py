"""Shared pieces of the training tests, and a worker run as a subprocess by them.

The worker trains the tiny ensemble of :func:`tiny_problem` and writes its final parameters:

    python tests/_training_helpers.py train OUT.npz CKPT_DIR DELAY
    python tests/_training_helpers.py distributed OUT.npz PORT PROCESS_ID

``train`` checkpoints every other step into ``CKPT_DIR`` (resuming from it when it holds a
checkpoint) and reads every batch ``DELAY`` seconds slowly, so that a test can kill it mid-run.
``distributed`` is one of two processes joined over loopback with ``jax.distributed``, four CPU
devices each.
"""

from __future__ import annotations

import os
import socket
import sys
import time

import numpy as np
from flax import linen as nn

#: XLA's CPU backend without LLVM's optimisations, with the elemental IR emitters instead of the
#: MLIR fusion emitters, and each program's machine code made as one LLVM module instead of parts
#: made in parallel (the test workers keep the cores busy already). The tests compile thousands
#: of small programs whose running time is negligible: on 2 cores the suite's tests took 903 s of
#: work against 1,028 s at level 1 (docs/results/test_suite/2026-11-27_xla_levels.json), three
#: compile-heavy tests 28.4 and 31.2 s in two runs against 35.1 and 37.6 s with the fusion
#: emitters (docs/results/test_suite/2026-11-29_xla_emitters.json), and the split into parts
#: cost about a tenth of XLA's compile time (docs/results/test_suite/2026-12-05_codegen_split.json).
#: Every process of a test that compares results bit for bit must use it alike.
FAST_COMPILE = (
    "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false "
    "--xla_cpu_parallel_codegen_split_count=1"
)

#: ``compiler_options`` for the few programs a test runs long enough that optimising them pays
#: (``jax.jit(f, compiler_options=RUNS_LONG)``): the one setting that differs from FAST_COMPILE.
RUNS_LONG = {"xla_backend_optimization_level": 2}


class TinyCNN(nn.Module):
    """A small CNN with BatchNorm and the apply signature of the project's DenseNets."""

    features: int = 4
    outputs: int = 1

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Conv(self.features, (3, 3), use_bias=False)(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        x = nn.Conv(self.features, (3, 3), strides=(2, 2), use_bias=False)(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        return nn.Dense(self.outputs)(x.mean(axis=(1, 2)))


def tiny_images(n: int = 96, size: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images whose mean brightness carries the label, and the labels."""
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.4).astype(np.float32)
    noise = rng.integers(0, 120, size=(n, size, size, 1))
    images = (noise + 100 * labels[:, None, None, None]).astype(np.uint8)
    return images, labels


def tiny_members(n: int = 96, k: int = 4):
    """``k`` members on two folds of the first 3/4 of the data, validated on the rest."""
    from iml.training import MemberSpec

    cut = 3 * n // 4
    betas = [0.2, 0.5, 0.8, 0.35, 0.65, 0.5, 0.4, 0.6]
    return [
        MemberSpec(
            beta=betas[i % len(betas)],
            seed=10 + i,
            train_idx=np.arange(cut)[np.arange(cut) % 2 != i % 2],
            val_idx=np.arange(cut, n),
            fold=i % 2,
        )
        for i in range(k)
    ]


def tiny_config(**overrides):
    from iml.training import TrainConfig

    base = dict(
        learning_rate=3e-3,
        batch_size=8,
        eval_batch_size=8,
        max_epochs=3,
        patience=2,
        plateau_patience=1,
    )
    base.update(overrides)
    return TrainConfig(**base)


def flat_params(states) -> dict[str, np.ndarray]:
    """The best parameters and BatchNorm statistics of all members, as named numpy arrays."""
    import jax

    leaves = jax.tree_util.tree_leaves_with_path(
        {"params": states.best_params, "batch_stats": states.best_batch_stats, "lr": states.lr}
    )
    return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in leaves}


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(procs, timeout_s: float, stop_on_failure: bool = False) -> None:
    """Wait until every process of ``procs`` has ended (or, with ``stop_on_failure``, one has
    failed), killing those still running past ``timeout_s`` seconds or after a failure."""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            if stop_on_failure and any(p.poll() not in (None, 0) for p in procs):
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def _worker() -> None:
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "distributed":
        port, process_id = int(sys.argv[3]), int(sys.argv[4])
        os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count=4 {FAST_COMPILE}"
        import jax

        jax.config.update("jax_num_cpu_devices", 4)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=f"127.0.0.1:{port}",
            num_processes=2,
            process_id=process_id,
            initialization_timeout=60,
        )
        from jax.experimental import multihost_utils

        from iml.training import DataSource, make_mesh, train_ensemble

        assert jax.device_count() == 8 and jax.local_device_count() == 4
        images, labels = tiny_images()
        mesh = make_mesh(4, 8, ensemble_size=4)  # 4 x 2 over both processes' devices
        states, history = train_ensemble(
            TinyCNN(),
            tiny_members(),
            DataSource.from_arrays(images, labels),
            tiny_config(),
            mesh=mesh,
            progress=False,
        )
        gathered = multihost_utils.process_allgather(
            {"params": states.best_params, "batch_stats": states.best_batch_stats, "lr": states.lr},
            tiled=True,
        )
        if process_id == 0:
            leaves = jax.tree_util.tree_leaves_with_path(gathered)
            flat = {jax.tree_util.keystr(p): np.asarray(v) for p, v in leaves}
            flat["val_loss"] = np.asarray([h.val_loss for h in history])
            np.savez(out, **flat)
        jax.distributed.shutdown()
        return

    ckpt, delay = sys.argv[3], float(sys.argv[4])
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count=8 {FAST_COMPILE}"
    import jax

    jax.config.update("jax_num_cpu_devices", 8)
    from iml.training import DataSource, EnsembleCheckpointer, make_mesh, train_ensemble

    images, labels = tiny_images()

    def slow_batch(idx):
        time.sleep(delay)
        return images[idx]

    checkpointer = EnsembleCheckpointer(ckpt)
    resumed = checkpointer.latest_step()
    checkpointer.close()
    print(f"resumed_from={resumed}", flush=True)
    mesh = make_mesh(4, 8, devices=jax.devices()[:4], ensemble_size=2)
    states, _ = train_ensemble(
        TinyCNN(),
        tiny_members(),
        DataSource(slow_batch, labels),
        tiny_config(checkpoint_every_steps=2),
        checkpoint_dir=ckpt,
        mesh=mesh,
        progress=False,
    )
    np.savez(out, **flat_params(states))


if __name__ == "__main__":
    _worker()
