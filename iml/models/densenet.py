"""DenseNets in Flax linen, laid out like torchvision's so that its weights map by name.

The architecture is Huang et al., *Densely Connected Convolutional Networks* (CVPR 2017), in the
form torchvision gives it (``torchvision.models.densenet121``): a stem (7x7/2 convolution, batch
norm, ReLU, 3x3/2 max-pool), dense blocks whose layers each add ``growth_rate`` feature maps
(BN-ReLU-1x1 conv to ``bn_size * growth_rate`` maps, BN-ReLU-3x3 conv), transitions between blocks
that halve the feature maps and the resolution (BN-ReLU-1x1 conv, 2x2 average pool), a final batch
norm and ReLU, global average pooling and a linear classifier. The paper's experiments (the chest
X-ray classifiers) use DenseNet-121 with one logit per label.

Inputs are NHWC images in floating point. A layer's ``dtype`` is its computation dtype (parameters
stay float32) and its ``conv_impl`` that of its convolutions (``Conv.impl``). Batch norm follows
torch exactly (``BatchNorm`` below): normalise by the biased batch variance in training, keep
running averages with momentum 0.1 whose variance is the *unbiased* batch variance, epsilon 1e-5.

Three convolution implementations share one parameter tree (HWIO kernels, like
``flax.linen.Conv``) and give the same outputs and gradients (:mod:`iml.models.convolutions`):
``conv_impl="xla"`` (``lax.conv_general_dilated``: the choice on a GPU), ``"matmul"`` (matrix
products, for parameters vmapped over an ensemble) and ``"mixed"`` (the CPU's fastest to train
one model). Each names a :class:`~iml.models.convolutions.ConvPlan`, which the architecture reads
without knowing the implementation: under ``"mixed"`` it also pools before a transition's 1x1
convolution (the two commute), gives the stem's max-pool its own gradient, and in training
computes each map's batch moments once for all the BatchNorms that read it (``DenseBlock``).
The backends' defaults are :data:`DEFAULT_CONV_IMPL`; the CPU step's timings are in
``docs/results/cpu_train_step``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Literal

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from iml import _validation as V
from iml.models.convolutions import CONV_KERNELS, CONV_PLANS
from iml.models.registry import register_model

Array = jax.Array
Dtype = Any
ConvImpl = Literal["xla", "matmul", "mixed"]

__all__ = [
    "CONV_IMPLS",
    "DEFAULT_CONV_IMPL",
    "BatchNorm",
    "Conv",
    "DenseBlock",
    "DenseLayer",
    "DenseNet",
    "Transition",
    "batch_moments",
    "densenet121",
    "densenet_small",
    "init_classifier",
    "min_input_size",
    "validate_images",
    "with_conv_impl",
]

CONV_IMPLS: tuple[str, ...] = ("xla", "matmul", "mixed")

# The convolutions each backend trains fastest with, as measured by
# `python -m experiments.benchmarks.ensemble` (K=8 small DenseNets, 28x28x1; docs/results/
# cpu_ensemble and gpu_h200) and `python -m experiments.benchmarks.train_step` (DenseNet-121;
# docs/results/cpu_train_step): on a CPU, 'mixed' (1x1 convolutions and the stem as matrix
# products) with the trainer's 'map' batching beats every other pair; on a GPU, XLA's own
# convolutions. TPU has no measurement; XLA's are the usual choice there.
DEFAULT_CONV_IMPL: dict[str, str] = {"cpu": "mixed", "gpu": "xla", "tpu": "xla"}

# per-channel (mean, biased variance) of a batch of maps, as ``batch_moments`` returns them
Moments = tuple[Array, Array]

# torch's defaults: kaiming_normal_ (fan_in, gain sqrt 2) for convolutions as torchvision's
# DenseNet sets them; nn.Linear's default uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the head.
_conv_init = nn.initializers.variance_scaling(2.0, "fan_in", "normal")
_dense_init = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


# ----------------------------------------------------------------------------------------------
# Layers
# ----------------------------------------------------------------------------------------------


class BatchNorm(nn.Module):
    """Batch normalisation with torch's running-average rule, optionally fused with a ReLU.

    In training the batch is normalised with its biased variance, and the running averages move
    as ``r <- (1 - momentum) r + momentum s`` where ``s`` is the batch mean or the *unbiased* batch
    variance ``n / (n - 1)`` times the biased one (as ``torch.nn.BatchNorm2d`` does;
    ``flax.linen.BatchNorm`` keeps the biased one). In evaluation the running averages are used.
    Statistics are computed in float32 whatever ``dtype`` is.

    Attributes:
        momentum: weight of the new batch statistic in the running average (torch's momentum).
        epsilon: added to the variance before the square root.
        relu: apply a ReLU to the output (fused into the same elementwise pass).
        dtype: dtype of the output.
    """

    momentum: float = 0.1
    epsilon: float = 1e-5
    relu: bool = False
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x: Array, train: bool, moments: Moments | None = None) -> Array:
        """Normalises ``x`` over all axes but the last (channels).

        ``moments``, used in training only, is ``batch_moments(x)`` when the caller has it already
        (a dense block shares each map's moments among all the layers that read it).
        """
        features = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones, (features,), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (features,), jnp.float32)
        running_mean = self.variable(
            "batch_stats", "mean", lambda: jnp.zeros((features,), jnp.float32)
        )
        running_var = self.variable(
            "batch_stats", "var", lambda: jnp.ones((features,), jnp.float32)
        )
        xf = x.astype(jnp.float32)
        if train:
            axes = tuple(range(x.ndim - 1))
            mean, var = batch_moments(x) if moments is None else moments
            if not self.is_initializing() and self.is_mutable_collection("batch_stats"):
                n = int(np.prod([x.shape[a] for a in axes]))
                unbiased = var * (n / max(n - 1, 1))
                m = self.momentum
                running_mean.value = (1.0 - m) * running_mean.value + m * mean
                running_var.value = (1.0 - m) * running_var.value + m * unbiased
        else:
            mean, var = running_mean.value, running_var.value
        mul = scale * lax.rsqrt(var + self.epsilon)
        y = xf * mul + (bias - mean * mul)
        if self.relu:
            y = jax.nn.relu(y)
        return y.astype(self.dtype)


def batch_moments(x: Array) -> Moments:
    """Per-channel mean and biased variance of ``x`` over all axes but the last, in float32.

    The statistics a training-mode ``BatchNorm`` normalises ``x`` with.
    """
    xf = x.astype(jnp.float32)
    axes = tuple(range(x.ndim - 1))
    mean = jnp.mean(xf, axis=axes)
    return mean, jnp.mean(jnp.square(xf - mean), axis=axes)


class Conv(nn.Module):
    """Bias-free 2-D convolution on NHWC maps with an HWIO ``kernel`` and symmetric padding.

    Attributes:
        features: number of output channels.
        kernel_size: side of the square kernel.
        stride: stride in both spatial directions.
        padding: zero padding on every side (torch's ``padding``).
        impl: ``"xla"`` (``lax.conv_general_dilated``), ``"matmul"`` (matrix products) or
            ``"mixed"`` (the CPU's fastest to train); all give the same result from the same
            parameters.
    """

    features: int
    kernel_size: int = 1
    stride: int = 1
    padding: int = 0
    impl: ConvImpl = "xla"
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x: Array) -> Array:
        """Convolves ``x`` of shape ``[N, H, W, C]``."""
        k = self.kernel_size
        kernel = self.param("kernel", _conv_init, (k, k, x.shape[-1], self.features), jnp.float32)
        x = x.astype(self.dtype)
        kernel = kernel.astype(self.dtype)
        V.check_choice("impl", self.impl, CONV_IMPLS)
        return CONV_KERNELS[self.impl](x, kernel, self.stride, self.padding)


class DenseLayer(nn.Module):
    """One dense layer: BN-ReLU-1x1 conv, BN-ReLU-3x3 conv; returns only the new maps.

    Attributes:
        growth_rate: number of maps the layer adds (k in Huang et al.).
        bn_size: width of the bottleneck as a multiple of ``growth_rate``.
    """

    growth_rate: int
    bn_size: int
    conv_impl: ConvImpl = "xla"
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x: Array, train: bool, moments: Moments | None = None) -> Array:
        """Maps the concatenated features ``x`` (``moments``: theirs) to ``growth_rate`` maps."""
        conv = functools.partial(Conv, impl=self.conv_impl, dtype=self.dtype)
        y = BatchNorm(relu=True, dtype=self.dtype, name="norm1")(x, train, moments)
        y = conv(self.bn_size * self.growth_rate, name="conv1")(y)
        y = BatchNorm(relu=True, dtype=self.dtype, name="norm2")(y, train)
        return conv(self.growth_rate, kernel_size=3, padding=1, name="conv2")(y)


class DenseBlock(nn.Module):
    """``num_layers`` dense layers, each seeing the concatenation of all maps before it.

    Attributes:
        num_layers: number of dense layers (``denselayer1`` ...).
        growth_rate: see ``DenseLayer``.
        bn_size: see ``DenseLayer``.
        remat: recompute each layer's activations in the backward pass instead of storing them.
    """

    num_layers: int
    growth_rate: int
    bn_size: int
    remat: bool = False
    conv_impl: ConvImpl = "xla"
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(
        self, x: Array, train: bool, with_moments: bool = False
    ) -> Array | tuple[Array, Moments | None]:
        """Returns ``x`` with ``num_layers * growth_rate`` maps appended.

        With ``with_moments``, returns ``(maps, moments)``: ``batch_moments(maps)`` when they were
        shared (training with ``conv_impl="mixed"``), for the BatchNorm that reads the block's
        output, or ``None``.

        Sharing: in training, every BatchNorm that reads a map normalises it with the same batch
        mean and variance, so under ``"mixed"`` each map's moments are computed once, when the map
        is made, and handed to all the layers that read it. The other implementations let each
        BatchNorm compute them again from the concatenation (the same numbers, to rounding;
        measured in ``docs/results/cpu_train_step``).
        """
        layer_cls = nn.remat(DenseLayer, static_argnums=(2,)) if self.remat else DenseLayer
        share = train and CONV_PLANS[self.conv_impl].share_moments
        features = [x]
        moments = [batch_moments(x)] if share else []
        for i in range(self.num_layers):
            inputs = features[0] if len(features) == 1 else jnp.concatenate(features, axis=-1)
            new = layer_cls(
                growth_rate=self.growth_rate,
                bn_size=self.bn_size,
                conv_impl=self.conv_impl,
                dtype=self.dtype,
                name=f"denselayer{i + 1}",
            )(inputs, train, _concat_moments(moments) if share else None)
            features.append(new.astype(x.dtype))
            if share:
                moments.append(batch_moments(features[-1]))
        out = jnp.concatenate(features, axis=-1)
        if with_moments:
            return out, (_concat_moments(moments) if share else None)
        return out


def _concat_moments(moments: list[Moments]) -> Moments:
    """The moments of maps concatenated on the last axis, from each part's ``batch_moments``."""
    means, variances = zip(*moments, strict=True)
    return jnp.concatenate(means), jnp.concatenate(variances)


class Transition(nn.Module):
    """BN-ReLU-1x1 conv to ``features`` maps, then 2x2 average pooling with stride 2.

    Attributes:
        features: number of output maps (torchvision halves them).
    """

    features: int
    conv_impl: ConvImpl = "xla"
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x: Array, train: bool, moments: Moments | None = None) -> Array:
        """Compresses and downsamples ``x`` (``moments``: see ``BatchNorm``)."""
        y = BatchNorm(relu=True, dtype=self.dtype, name="norm")(x, train, moments)
        conv = Conv(self.features, impl=self.conv_impl, dtype=self.dtype, name="conv")
        if CONV_PLANS[self.conv_impl].pool_before_transition_conv:
            return conv(_avg_pool_2x2(y))
        return _avg_pool_2x2(conv(y))


def _avg_pool_2x2(x: Array) -> Array:
    # torch's AvgPool2d(2, 2) drops a trailing odd row/column; a reshape-mean is cheaper than
    # reduce_window and vmaps to the same thing.
    n, h, w, c = x.shape
    x = x[:, : h - h % 2, : w - w % 2, :]
    return x.reshape(n, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4)).astype(x.dtype)


# ----------------------------------------------------------------------------------------------
# The network
# ----------------------------------------------------------------------------------------------


class DenseNet(nn.Module):
    """A DenseNet classifier returning ``num_outputs`` logits per NHWC image.

    Call as ``model.apply({"params": p, "batch_stats": s}, x, train=False)`` for inference, or
    with ``train=True, mutable=["batch_stats"]`` in training (returns ``(logits, updates)``).

    Attributes:
        block_config: number of dense layers in each dense block (DenseNet-121: 6, 12, 24, 16).
        growth_rate: maps added per dense layer.
        bn_size: bottleneck width as a multiple of ``growth_rate``.
        num_init_features: maps after the stem convolution.
        num_outputs: logits per image (1 for a binary task, L for L independent labels).
        small_inputs: use a 3x3/1 stem convolution and no max-pool (for 28-64 px images)
            instead of torchvision's 7x7/2 convolution and 3x3/2 max-pool.
        remat: recompute dense layers in the backward pass to save memory.
        dtype: computation dtype (e.g. ``jnp.bfloat16`` for mixed precision); parameters, batch
            statistics and the returned logits are float32.
        conv_impl: ``"xla"``, ``"matmul"`` or ``"mixed"`` (see ``Conv``); the parameter tree is
            the same.
    """

    block_config: Sequence[int] = (6, 12, 24, 16)
    growth_rate: int = 32
    bn_size: int = 4
    num_init_features: int = 64
    num_outputs: int = 1
    small_inputs: bool = False
    remat: bool = False
    dtype: Dtype = jnp.float32
    conv_impl: ConvImpl = "xla"

    @nn.compact
    def __call__(self, x: Array, train: bool = False) -> Array:
        """Maps images ``[N, H, W, C]`` to logits ``[N, num_outputs]`` (float32)."""
        validate_images(x, min_size=min_input_size(self))
        V.check_choice("conv_impl", self.conv_impl, CONV_IMPLS)
        conv = functools.partial(Conv, impl=self.conv_impl, dtype=self.dtype)
        if self.small_inputs:
            x = conv(self.num_init_features, kernel_size=3, padding=1, name="conv0")(x)
            x = BatchNorm(relu=True, dtype=self.dtype, name="norm0")(x, train)
        else:
            x = conv(self.num_init_features, kernel_size=7, stride=2, padding=3, name="conv0")(x)
            x = BatchNorm(relu=True, dtype=self.dtype, name="norm0")(x, train)
            x = CONV_PLANS[self.conv_impl].max_pool(x, 3, 2, 1)
        features = self.num_init_features
        for i, num_layers in enumerate(self.block_config):
            x, moments = DenseBlock(
                num_layers=num_layers,
                growth_rate=self.growth_rate,
                bn_size=self.bn_size,
                remat=self.remat,
                conv_impl=self.conv_impl,
                dtype=self.dtype,
                name=f"denseblock{i + 1}",
            )(x, train, with_moments=True)
            features += num_layers * self.growth_rate
            if i != len(self.block_config) - 1:
                features //= 2
                x = Transition(
                    features, conv_impl=self.conv_impl, dtype=self.dtype, name=f"transition{i + 1}"
                )(x, train, moments)
        x = BatchNorm(relu=True, dtype=self.dtype, name="norm5")(x, train, moments)
        x = jnp.mean(x.astype(jnp.float32), axis=(1, 2))
        return _classifier(self.num_outputs)(x)


def _classifier(num_outputs: int) -> nn.Dense:
    return nn.Dense(
        num_outputs, kernel_init=_dense_init, bias_init=nn.initializers.zeros, name="classifier"
    )


def init_classifier(rng: jax.Array, in_features: int, num_outputs: int) -> dict[str, Array]:
    """Fresh classifier parameters ``{"kernel": [in, out], "bias": [out]}`` as the model inits them.

    Used to put a new head on imported features (e.g. one logit on ImageNet features).
    """
    return _classifier(num_outputs).init(rng, jnp.zeros((1, in_features), jnp.float32))["params"]


def with_conv_impl(model: nn.Module, conv_impl: str | None = None, backend: str | None = None):
    """``model`` with its convolutions set: ``conv_impl``, or the backend's measured default
    (:data:`DEFAULT_CONV_IMPL`); a model without a ``conv_impl`` field comes back as it is.

    Raises:
      ValueError: for an unknown ``conv_impl``, or one given for a model without the field.
    """
    V.check_choice("conv_impl", conv_impl, (*CONV_IMPLS, None))
    if not hasattr(model, "conv_impl"):
        if conv_impl is not None:
            raise ValueError(f"conv_impl={conv_impl!r} but {type(model).__name__} has no conv_impl")
        return model
    backend = backend or jax.default_backend()
    return model.clone(conv_impl=conv_impl or DEFAULT_CONV_IMPL.get(backend, "xla"))


def min_input_size(model: nn.Module) -> int:
    """Smallest image side for which ``model`` keeps at least one pixel before pooling (1 for a
    model that is not a DenseNet)."""
    if not isinstance(model, DenseNet):
        return 1
    transitions = len(model.block_config) - 1
    return (1 if model.small_inputs else 4) * 2**transitions


def validate_images(x: Any, *, min_size: int = 1, name: str = "x") -> None:
    """Raises ValueError unless ``x`` is a floating ``[N, H, W, C]`` batch at least ``min_size``
    on each side, naming ``x`` as ``name`` (traced arrays are checked by shape and dtype only)."""
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        raise ValueError(f"{name} must be an array of images [N, H, W, C], got {type(x).__name__}")
    if len(shape) != 4:
        raise ValueError(f"{name} must have shape [N, H, W, C] (NHWC), got shape {tuple(shape)}")
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(
            f"{name} must be floating point (scale images to float first), got dtype {dtype}"
        )
    _, h, w, c = shape
    if c > 4 and h <= 4:
        raise ValueError(
            f"{name} has {c} channels on the last axis and {h} on axis 1: the model takes "
            f"NHWC images, got shape {tuple(shape)} (transpose NCHW input first)"
        )
    if h < min_size or w < min_size:
        raise ValueError(
            f"{name} images must be at least {min_size}x{min_size} for this model, got {h}x{w}"
        )


# ----------------------------------------------------------------------------------------------
# Configurations
# ----------------------------------------------------------------------------------------------


def densenet121(
    num_outputs: int = 1,
    *,
    remat: bool = False,
    dtype: Dtype = jnp.float32,
    conv_impl: ConvImpl = "xla",
) -> DenseNet:
    """DenseNet-121 as torchvision defines it (blocks 6-12-24-16, growth 32, bn_size 4, 64 maps),
    with ``num_outputs`` logits per image (torchvision's ImageNet head has 1000); the other
    arguments as in :func:`densenet_small`."""
    _check_common(num_outputs, conv_impl)
    return DenseNet(
        block_config=(6, 12, 24, 16),
        growth_rate=32,
        bn_size=4,
        num_init_features=64,
        num_outputs=num_outputs,
        small_inputs=False,
        remat=remat,
        dtype=dtype,
        conv_impl=conv_impl,
    )


def densenet_small(
    num_outputs: int = 1,
    *,
    block_config: Sequence[int] = (2, 4, 4),
    growth_rate: int = 12,
    bn_size: int = 4,
    num_init_features: int = 24,
    remat: bool = False,
    dtype: Dtype = jnp.float32,
    conv_impl: ConvImpl = "xla",
) -> DenseNet:
    """A small DenseNet for 28-64 px images on the CPU (3x3 stem, no max-pool).

    Args:
        num_outputs: logits per image.
        block_config: dense layers per block.
        growth_rate: maps added per dense layer.
        bn_size: bottleneck width as a multiple of ``growth_rate``.
        num_init_features: maps after the stem convolution.
        remat: recompute dense layers in the backward pass to save memory.
        conv_impl: ``"xla"``, ``"matmul"`` or ``"mixed"``.
    """
    _check_common(num_outputs, conv_impl)
    for name, value in (
        ("growth_rate", growth_rate),
        ("bn_size", bn_size),
        ("num_init_features", num_init_features),
    ):
        V.check_count(name, value)
    if len(block_config) == 0 or any(int(b) < 1 for b in block_config):
        raise ValueError(
            f"block_config must be a non-empty list of positive ints, got {block_config!r}"
        )
    return DenseNet(
        block_config=tuple(int(b) for b in block_config),
        growth_rate=int(growth_rate),
        bn_size=int(bn_size),
        num_init_features=int(num_init_features),
        num_outputs=num_outputs,
        small_inputs=True,
        remat=remat,
        dtype=dtype,
        conv_impl=conv_impl,
    )


def _check_common(num_outputs: int, conv_impl: str) -> None:
    V.check_count("num_outputs", num_outputs)
    V.check_choice("conv_impl", conv_impl, CONV_IMPLS)


def _densenet_tiny(num_outputs: int) -> DenseNet:
    # Two blocks of one layer: for smoke runs and tests, where compile time dominates.
    return densenet_small(num_outputs, block_config=(1, 1), growth_rate=4, num_init_features=8)


register_model("densenet_tiny", _densenet_tiny, inputs=("images",))  # blocks 1-1, growth 4
register_model("densenet_small", densenet_small, inputs=("images",))  # blocks 2-4-4
register_model("densenet121", densenet121, inputs=("images",))  # the paper's
