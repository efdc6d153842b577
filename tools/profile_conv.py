"""Which forward pass a dense layer's 3x3 convolution should take, by map size, on this backend.

    python -m tools.profile_conv            # DenseNet-121's map sizes at 224 px and 64 px

For each (batch, map side) a dense layer meets in DenseNet-121 (128 maps in, 32 out), it times
``lax.conv`` against ``conv_same_by_taps`` (one matrix product per tap, added at its shift),
both jitted, median of ``--repeats`` calls, and prints a table and, last, one JSON line. This is
the measurement behind ``iml.models.densenet.TAPS_FORWARD_MAX_PIXELS``; see
``docs/results/cpu_train_step``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

# (batch, side): DenseNet-121's dense blocks at batch 16 / 224 px and at batch 64 / 64 px
SHAPES = ((16, 56), (16, 28), (16, 14), (16, 7), (64, 16), (64, 8), (64, 4), (64, 2))


def _median_ms(fn, args, repeats: int) -> float:
    fn(*args).block_until_ready()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args).block_until_ready()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--cin", type=int, default=128)
    parser.add_argument("--cout", type=int, default=32)
    args = parser.parse_args(argv)
    for name in ("repeats", "cin", "cout"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")

    import jax
    import numpy as np

    from iml.models.convolutions import CONV_PLANS, TAPS_FORWARD_MAX_PIXELS, conv_same_by_taps

    conv = jax.jit(lambda x, k: CONV_PLANS["xla"].conv(x, k, 1, 1))
    taps = jax.jit(conv_same_by_taps)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'batch':>5} {'side':>4} {'lax.conv ms':>12} {'taps ms':>8} {'conv/taps':>9}")
    for batch, side in SHAPES:
        x = jax.numpy.asarray(rng.normal(size=(batch, side, side, args.cin)).astype(np.float32))
        k = jax.numpy.asarray(rng.normal(size=(3, 3, args.cin, args.cout)).astype(np.float32))
        diff = float(abs(conv(x, k) - taps(x, k)).max() / abs(conv(x, k)).max())
        if diff > 1e-5:
            raise AssertionError(f"taps and lax.conv differ by {diff:.1e} at {batch}x{side}")
        c, t = _median_ms(conv, (x, k), args.repeats), _median_ms(taps, (x, k), args.repeats)
        rows.append({"batch": batch, "side": side, "conv_ms": c, "taps_ms": t, "ratio": c / t})
        print(f"{batch:>5} {side:>4} {c:>12.2f} {t:>8.2f} {c / t:>9.2f}")
    summary = {
        "backend": jax.default_backend(),
        "taps_forward_max_pixels": TAPS_FORWARD_MAX_PIXELS,
        "rows": rows,
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
