"""The convolutions of the DenseNets, three ways with one parameter tree (HWIO kernels).

:class:`iml.models.Conv` picks one by its ``impl`` (:data:`CONV_KERNELS`); they give the same
outputs and gradients from the same parameters:

- ``"xla"``: ``lax.conv_general_dilated``, the choice on a GPU.
- ``"matmul"``: every convolution as matrix products (1x1 convolutions as one ``einsum``, kxk ones
  through shifted slices). Under ``jax.vmap`` over parameters (ensembles) it becomes batched
  matrix products, where a vmapped ``lax.conv`` becomes a grouped convolution, which XLA's CPU
  backend runs slowly.
- ``"mixed"``: the CPU's fastest to train one model. 1x1 convolutions and the stem are matrix
  products, and a 3x3 convolution runs forward through ``lax.conv`` (or one product per tap on
  small maps) but gets both gradients from matrix products over the shifted output gradient
  (:func:`_conv_same`), since XLA's CPU gradient of a convolution is slow. :func:`max_pool` gives
  the stem's max-pool its own gradient for the same reason.

This is CPU-specific code kept beside the architecture (:mod:`iml.models.densenet`), which only
names the implementation it wants and reads its :class:`ConvPlan`: the convolution, the stem's
max-pool, and two reorderings of the same arithmetic that only ``"mixed"`` takes.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array

__all__ = [
    "CONV_KERNELS",
    "CONV_PLANS",
    "TAPS_FORWARD_MAX_PIXELS",
    "ConvPlan",
    "conv_same_by_taps",
    "max_pool",
]


def _conv_matmul(x: Array, kernel: Array, stride: int, padding: int) -> Array:
    """NHWC x HWIO convolution written as matrix products (same result as ``lax.conv``)."""
    kh, kw, cin, cout = kernel.shape
    _, h, w, _ = x.shape
    if kh == 1 and kw == 1 and padding == 0:
        if stride > 1:
            x = x[:, ::stride, ::stride, :]
        return jnp.einsum("nhwc,co->nhwo", x, kernel[0, 0])
    ho = (h + 2 * padding - kh) // stride + 1
    wo = (w + 2 * padding - kw) // stride + 1

    def shifted(t: Array, i: int, j: int) -> Array:
        # the (i, j) tap of every output pixel: a strided window of the padded map
        return lax.slice(
            t,
            (0, i, j, 0),
            (t.shape[0], i + stride * (ho - 1) + 1, j + stride * (wo - 1) + 1, t.shape[3]),
            (1, stride, stride, 1),
        )

    if stride == 1 and cout < cin:
        # Few outputs (a dense layer's 3x3 conv: 128 -> 32): multiply first, one product with
        # all kh*kw taps' weights side by side, then add shifted slices of the small result.
        z = jnp.einsum(
            "nhwc,cko->nhwko", x, kernel.transpose(2, 0, 1, 3).reshape(cin, kh * kw, cout)
        )
        z = jnp.pad(z, ((0, 0), (padding, padding), (padding, padding), (0, 0), (0, 0)))
        out = None
        for i in range(kh):
            for j in range(kw):
                tap = shifted(z[..., i * kw + j, :], i, j)
                out = tap if out is None else out + tap
        return out
    # Few inputs (the stem: 3 channels): gather the patches, then one matrix product.
    patches = _patches(x, kh, kw, stride, padding)
    return jnp.einsum("nhwc,co->nhwo", patches, kernel.reshape(kh * kw * cin, cout))


def _patches(x: Array, kh: int, kw: int, stride: int, padding: int) -> Array:
    """The ``kh x kw`` patches of NHWC ``x`` under every output pixel: ``[N, Ho, Wo, kh*kw*C]``.

    Ordered ``(i, j, c)`` like a reshaped HWIO kernel, so that ``patches @ kernel.reshape(-1, O)``
    is the convolution. Built in two passes, the ``kw`` column taps side by side and then the
    ``kh`` row taps of that, rather than one concatenation of ``kh*kw`` narrow slices: for the
    stem (7x7 taps of 3 channels) XLA's CPU backend then copies runs of 21 values instead of 3
    (measured in ``docs/results/cpu_train_step``).
    """
    n, h, w, c = x.shape
    ho = (h + 2 * padding - kh) // stride + 1
    wo = (w + 2 * padding - kw) // stride + 1
    xp = jnp.pad(x, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
    hp = xp.shape[1]
    last_col, last_row = stride * (wo - 1) + 1, stride * (ho - 1) + 1
    columns = jnp.concatenate(
        [
            lax.slice(xp, (0, 0, j, 0), (n, hp, j + last_col, c), (1, 1, stride, 1))
            for j in range(kw)
        ],
        axis=-1,
    )  # [N, Hp, Wo, kw*C]
    return jnp.concatenate(
        [
            lax.slice(columns, (0, i, 0, 0), (n, i + last_row, wo, kw * c), (1, stride, 1, 1))
            for i in range(kh)
        ],
        axis=-1,
    )


def _conv_xla(x: Array, kernel: Array, stride: int, padding: int) -> Array:
    """NHWC x HWIO convolution through ``lax.conv_general_dilated``."""
    return lax.conv_general_dilated(
        x,
        kernel,
        window_strides=(stride, stride),
        padding=((padding, padding), (padding, padding)),
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )


def _gradient_taps(dy: Array, k: int) -> Array:
    """The ``k*k`` shifted copies of ``dy`` that a stride-1 "same" convolution's gradient needs.

    For an NHWC ``dy`` of a ``k x k`` convolution with padding ``p = k // 2``, column block
    ``(i, j)`` of the result, at pixel ``(a, b)``, is ``dy[a - i + p, b - j + p]`` (zero outside):
    the output pixels that input pixel ``(a, b)`` reached through tap ``(i, j)``. Shape
    ``[N*H*W, k*k*O]``.
    """
    n, h, w, o = dy.shape
    p = k // 2
    dp = jnp.pad(dy, ((0, 0), (p, p), (p, p), (0, 0)))
    taps = [
        dp[:, 2 * p - i : 2 * p - i + h, 2 * p - j : 2 * p - j + w, :]
        for i in range(k)
        for j in range(k)
    ]
    return jnp.concatenate(taps, axis=-1).reshape(n * h * w, k * k * o)


# Up to this many pixels per map, ``_conv_same`` runs forward as ``conv_same_by_taps``; larger
# maps keep ``lax.conv``. ``python -m tools.profile_conv`` times the two per map size
# (``docs/results/cpu_train_step/profile_conv.txt``).
TAPS_FORWARD_MAX_PIXELS = 28 * 28


def conv_same_by_taps(x: Array, kernel: Array) -> Array:
    """Stride-1 "same" convolution as one matrix product per tap, each added at its shift.

    ``out[a, b] = sum over taps (i, j) of (x @ kernel[i, j])[a + i - p, b + j - p]``, zero outside.
    The products have few output maps, so each shifted sum reads a small array.
    """
    k, _, cin, cout = kernel.shape
    n, h, w, _ = x.shape
    p = k // 2
    flat = x.reshape(n * h * w, cin)
    out = None
    for i in range(k):
        for j in range(k):
            z = (flat @ kernel[i, j]).reshape(n, h, w, cout)
            z = jnp.pad(z, ((0, 0), (p, p), (p, p), (0, 0)))[:, i : i + h, j : j + w, :]
            out = z if out is None else out + z
    return out


@jax.custom_vjp
def _conv_same(x: Array, kernel: Array) -> Array:
    """Stride-1 NHWC x HWIO convolution with "same" zero padding (odd kernel side).

    Forward: ``conv_same_by_taps`` on maps of at most ``TAPS_FORWARD_MAX_PIXELS`` pixels with
    fewer outputs than inputs, ``lax.conv`` otherwise. Backward: both gradients by one matrix
    product each with the ``k*k`` shifted copies of the output gradient (``_gradient_taps``),
    where XLA's CPU backend would convolve over a window of the whole image.
    """
    if x.shape[1] * x.shape[2] <= TAPS_FORWARD_MAX_PIXELS and kernel.shape[3] < kernel.shape[2]:
        return conv_same_by_taps(x, kernel)
    return _conv_xla(x, kernel, 1, kernel.shape[0] // 2)


def _conv_same_fwd(x: Array, kernel: Array) -> tuple[Array, tuple[Array, Array]]:
    return _conv_same(x, kernel), (x, kernel)


def _conv_same_bwd(res: tuple[Array, Array], dy: Array) -> tuple[Array, Array]:
    x, kernel = res
    k, _, cin, cout = kernel.shape
    # A dense block shares each map's batch moments among the layers reading it, so ``dy`` adds
    # up the moments' gradients from all of them. Without ``_materialised``, XLA's CPU backend
    # recomputes that sum inside each of the k*k shifted copies.
    taps = _gradient_taps(_materialised(dy), k)  # [P, k*k*O]
    # dx[a, b, c] = sum over taps (i, j) and o of dy[a - i + p, b - j + p, o] kernel[i, j, c, o]
    dx = taps @ kernel.transpose(0, 1, 3, 2).reshape(k * k * cout, cin)
    # dkernel[i, j, c, o] = sum over pixels of x[a, b, c] dy[a - i + p, b - j + p, o]
    dk = lax.dot_general(taps, x.reshape(-1, cin), (((0,), (0,)), ((), ())))
    dk = dk.reshape(k, k, cout, cin).transpose(0, 1, 3, 2)
    return dx.reshape(x.shape).astype(x.dtype), dk.astype(kernel.dtype)


_conv_same.defvjp(_conv_same_fwd, _conv_same_bwd)


@jax.custom_vjp
def _pixel_matmul(x: Array, weight: Array) -> Array:
    """``x [P, C] @ weight [C, O]``: a 1x1 convolution over P pixels, or the stem's patches.

    The output gradient goes behind an optimisation barrier, which on the CPU changes only how
    XLA schedules the backward pass (``docs/results/cpu_train_step``)."""
    return x @ weight


def _pixel_matmul_fwd(x: Array, weight: Array) -> tuple[Array, tuple[Array, Array]]:
    return x @ weight, (x, weight)


def _pixel_matmul_bwd(res: tuple[Array, Array], dy: Array) -> tuple[Array, Array]:
    x, weight = res
    dy = lax.optimization_barrier(dy)
    dw = lax.dot_general(x, dy, (((0,), (0,)), ((), ())))
    return (dy @ weight.T).astype(x.dtype), dw.astype(weight.dtype)


_pixel_matmul.defvjp(_pixel_matmul_fwd, _pixel_matmul_bwd)


def _materialised(x: Array) -> Array:
    """``x``, computed once into memory before its consumers run (finite ``x``: bit for bit).

    XLA's CPU pipeline drops ``lax.optimization_barrier`` before it fuses, and fuses cheap
    elementwise producers into every consumer, so a large gradient read by several scatters is
    recomputed by each. A product with the identity matrix over the last axis is a library call
    whose operand and result are arrays in memory; it costs one small matrix product. A
    non-finite entry spreads over its row (the member's update is then skipped anyway).
    """
    c = x.shape[-1]
    eye = jnp.eye(c, dtype=x.dtype)
    return (x.reshape(-1, c) @ eye).reshape(x.shape)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _max_pool(x: Array, window: int, stride: int, padding: int) -> Array:
    """``window x window`` max-pool of NHWC ``x`` with ``stride`` and ``-inf`` padding.

    The same forward pass and gradient as ``flax.linen.max_pool`` (the gradient goes to the first
    maximum of each window in row-major order, as in torch), computed differently in the backward
    pass: XLA turns the gradient of a max-pool into a reduction over the window that carries four
    full-size index arrays, which on the CPU costs about twice as much as the rest of the stem.
    Here one pass finds the position of each window's maximum (a small integer per output), and
    the gradient is the sum of ``window**2`` strided scatters of the output gradient, one per
    position. Gradients agree with ``flax.linen.max_pool``'s up to the order of summation.
    """
    return lax.reduce_window(
        x,
        jnp.array(-jnp.inf, x.dtype),
        lax.max,
        (1, window, window, 1),
        (1, stride, stride, 1),
        ((0, 0), (padding, padding), (padding, padding), (0, 0)),
    )


def _max_pool_fwd(x: Array, window: int, stride: int, padding: int):
    y = _max_pool(x, window, stride, padding)
    return y, (x, y)


def _max_pool_bwd(window: int, stride: int, padding: int, res, dy: Array) -> tuple[Array]:
    x, y = res
    n, h, w, c = x.shape
    _, ho, wo, _ = y.shape
    p, s = padding, stride
    xp = jnp.pad(x, ((0, 0), (p, p), (p, p), (0, 0)), constant_values=-jnp.inf)
    taps = [(i, j) for i in range(window) for j in range(window)]
    # which tap holds each window's first maximum; going backwards, earlier taps overwrite later
    index = jnp.int8 if len(taps) < 127 else jnp.int32
    first = jnp.full(y.shape, len(taps), index)
    for t in reversed(range(len(taps))):
        i, j = taps[t]
        tap = lax.slice(
            xp, (0, i, j, 0), (n, i + s * (ho - 1) + 1, j + s * (wo - 1) + 1, c), (1, s, s, 1)
        )
        first = jnp.where(tap == y, index(t), first)
    # Fused into the scatters below, whatever computes ``dy`` (the first dense block's BatchNorm
    # gradients) would run once per tap.
    dy = _materialised(dy)
    zero = jnp.zeros((), dy.dtype)
    dxp = None
    for t, (i, j) in enumerate(taps):
        # output pixel (a, b) sends its gradient to padded input pixel (s a + i, s b + j)
        rows = (i, h + 2 * p - i - s * (ho - 1) - 1, s - 1)
        cols = (j, w + 2 * p - j - s * (wo - 1) - 1, s - 1)
        spread = lax.pad(jnp.where(first == t, dy, zero), zero, ((0, 0, 0), rows, cols, (0, 0, 0)))
        dxp = spread if dxp is None else dxp + spread
    return (dxp[:, p : p + h, p : p + w, :],)


_max_pool.defvjp(_max_pool_fwd, _max_pool_bwd)


def _conv_mixed(x: Array, kernel: Array, stride: int, padding: int) -> Array:
    """The CPU-friendly mix: each convolution in the form XLA's CPU backend trains fastest.

    1x1 convolutions and convolutions of few input channels (the stem, on images: its
    ``_patches``) are matrix products (``_pixel_matmul``); stride-1 "same" convolutions (a dense
    layer's 3x3) are ``_conv_same``; any other is ``lax.conv``.
    """
    kh, kw, cin, cout = kernel.shape
    if kh == kw == 1 and padding == 0:
        x = x[:, ::stride, ::stride, :]
        n, h, w, _ = x.shape
        return _pixel_matmul(x.reshape(n * h * w, cin), kernel[0, 0]).reshape(n, h, w, cout)
    if cin <= 4:
        # the stem, on images: its patches times the kernel, as a 2-D product whose kernel
        # gradient XLA computes without first transposing the output gradient (for a 4-D einsum
        # it copies the output gradient transposed)
        patches = _patches(x, kh, kw, stride, padding)
        n, ho, wo, f = patches.shape
        out = _pixel_matmul(patches.reshape(n * ho * wo, f), kernel.reshape(f, cout))
        return out.reshape(n, ho, wo, cout)
    if stride == 1 and kh == kw and kh % 2 == 1 and padding == kh // 2:
        return _conv_same(x, kernel)
    return _conv_xla(x, kernel, stride, padding)


def _reduce_window_max_pool(x: Array, window: int, stride: int, padding: int) -> Array:
    """``window x window`` max-pool of NHWC ``x`` through ``lax.reduce_window``."""
    return nn.max_pool(
        x, (window, window), strides=(stride, stride), padding=((padding, padding),) * 2
    )


@dataclasses.dataclass(frozen=True)
class ConvPlan:
    """How a DenseNet runs under one convolution implementation (all give the same function).

    Attributes:
      conv: ``(x [N, H, W, C], kernel [kh, kw, C, F], stride, padding) -> [N, H', W', F]``.
      max_pool: ``(x, window, stride, padding) -> pooled x``, the stem's max-pool.
      pool_before_transition_conv: a transition pools before its 1x1 convolution instead of
        after it. Both are linear, one across maps and one across pixels, so they commute;
        pooling first makes the product 4 times smaller.
      share_moments: in training, a dense block computes each map's BatchNorm moments once and
        hands them to every layer that reads the map, instead of each BatchNorm computing them
        from the concatenation (the same numbers, to rounding).
    """

    conv: Callable[[Array, Array, int, int], Array]
    max_pool: Callable[[Array, int, int, int], Array]
    pool_before_transition_conv: bool = False
    share_moments: bool = False


#: Each implementation's plan. ``"mixed"`` takes every CPU-specific choice: its own convolutions,
#: a max-pool with its own gradient, pooling before a transition's convolution, and shared
#: moments (measured in ``docs/results/cpu_train_step``).
CONV_PLANS: dict[str, ConvPlan] = {
    "xla": ConvPlan(_conv_xla, _reduce_window_max_pool),
    "matmul": ConvPlan(_conv_matmul, _reduce_window_max_pool),
    "mixed": ConvPlan(_conv_mixed, _max_pool, pool_before_transition_conv=True, share_moments=True),
}
#: The convolution of each implementation (``CONV_PLANS[impl].conv``).
CONV_KERNELS = {impl: plan.conv for impl, plan in CONV_PLANS.items()}
#: The stem's 3x3/2 max-pool with its own gradient, for ``"mixed"``.
max_pool = _max_pool
