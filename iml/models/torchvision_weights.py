"""Import torchvision DenseNet weights (e.g. the ImageNet ``densenet121`` .pth) into ``DenseNet``.

torchvision names a DenseNet's tensors ``features.conv0.weight``,
``features.denseblock1.denselayer1.norm1.weight``, ``features.transition1.conv.weight``,
``features.norm5.running_var``, ``classifier.weight`` and so on; the Flax ``DenseNet`` uses the same
module names, so the import is a renaming plus layout changes: convolution kernels go from torch's
OIHW to HWIO, the classifier's ``[out, in]`` matrix is transposed, batch norm ``weight``/``bias``
become ``scale``/``bias`` and ``running_mean``/``running_var`` the ``batch_stats`` ``mean``/``var``.

The published ImageNet checkpoint predates a renaming in torchvision and spells the dense layers'
tensors ``denselayer1.norm.1.weight`` instead of ``denselayer1.norm1.weight`` (also ``conv.2``,
``relu.1``); ``normalize_legacy_keys`` maps those to the current names as torchvision does when it
loads them.

torch is an optional dependency (the ``reference`` extra) and is imported only where a file is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from flax.traverse_util import flatten_dict, unflatten_dict

from iml import _validation as V
from iml.models.densenet import DenseNet, init_classifier, min_input_size

__all__ = [
    "densenet_variables_from_state_dict",
    "load_torchvision_densenet",
    "normalize_legacy_keys",
    "read_torch_state_dict",
    "torchvision_key",
    "variables_to_torchvision_state_dict",
]

# "denselayer1.norm.1.weight" -> "denselayer1.norm1.weight" (torchvision's own fix of old files)
_LEGACY_KEY = re.compile(
    r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var))$"
)
_LEAF_TO_TORCH = {
    ("params", "kernel"): "weight",
    ("params", "scale"): "weight",
    ("params", "bias"): "bias",
    ("batch_stats", "mean"): "running_mean",
    ("batch_stats", "var"): "running_var",
}
_IGNORED_SUFFIXES = (".num_batches_tracked",)


# ----------------------------------------------------------------------------------------------
# Names and layouts
# ----------------------------------------------------------------------------------------------


def normalize_legacy_keys(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict with legacy torchvision DenseNet keys (``norm.1``, ``conv.2``) renamed to
    current ones, and without the ``module.`` prefix that ``torch.nn.DataParallel`` adds; order
    is kept."""
    out: dict[str, Any] = {}
    for key, value in state_dict.items():
        new = key.removeprefix("module.")
        match = _LEGACY_KEY.match(new)
        if match:
            new = match.group(1) + match.group(2)
        out[new] = value
    return out


def torchvision_key(path: tuple[str, ...]) -> str:
    """The torchvision state-dict key of a Flax variable at ``(collection, *modules, leaf)``.

    Args:
        path: e.g. ``("params", "denseblock1", "denselayer1", "norm1", "scale")``.

    Returns:
        e.g. ``"features.denseblock1.denselayer1.norm1.weight"``.

    Raises:
        ValueError: if the path is not a DenseNet variable.
    """
    collection, *modules, leaf = path
    if (collection, leaf) not in _LEAF_TO_TORCH or not modules:
        raise ValueError(f"path {path!r} is not a DenseNet variable")
    prefix = "" if modules[0] == "classifier" else "features."
    return prefix + ".".join(modules) + "." + _LEAF_TO_TORCH[(collection, leaf)]


def _layout(path: tuple[str, ...], value: np.ndarray, *, to_torch: bool) -> np.ndarray:
    """A kernel in the other library's layout: convolutions OIHW <-> HWIO, linear layers
    ``[out, in]`` <-> ``[in, out]``; other arrays as they are."""
    if path[-1] == "kernel" and value.ndim == 4:
        return value.transpose(3, 2, 0, 1) if to_torch else value.transpose(2, 3, 1, 0)
    if path[-1] == "kernel" and value.ndim == 2:
        return value.T
    return value


# ----------------------------------------------------------------------------------------------
# Conversion
# ----------------------------------------------------------------------------------------------


def densenet_variables_from_state_dict(
    state_dict: Mapping[str, Any],
    model: DenseNet,
    *,
    head: Literal["load", "init"] = "load",
    rng: jax.Array | None = None,
    in_channels: int | None = None,
) -> dict[str, Any]:
    """Converts a torchvision DenseNet state dict into ``model``'s Flax variables.

    Every tensor of the state dict must match a variable of ``model`` by name and shape, and every
    variable must be present (``num_batches_tracked`` counters are ignored).

    Args:
        state_dict: tensor name -> array (numpy, torch tensors or anything ``np.asarray`` takes);
            legacy names are accepted.
        model: the Flax ``DenseNet`` the weights are for (its ``num_outputs`` must match the file's
            classifier unless ``head="init"``).
        head: ``"load"`` takes the classifier from the file; ``"init"`` ignores the file's
            classifier and initialises a fresh one for ``model.num_outputs`` (fine-tuning an
            ImageNet network on a new task).
        rng: key for the fresh classifier when ``head="init"`` (default ``jax.random.key(0)``).
        in_channels: channels of the images the model will see, when they differ from the
            file's (ImageNet: 3). For 1 channel the first convolution's kernel is summed over
            its input channels, so a grayscale image gives what its 3-channel copy would; for
            ``c`` channels the kernel's input channels are repeated cyclically and scaled by
            ``3 / c`` (timm's ``adapt_input_conv``).

    Returns:
        ``{"params": ..., "batch_stats": ...}`` of float32 arrays for ``model.apply``.

    Raises:
        ValueError: naming the first key of the state dict that the model lacks or whose shape
            differs, or the first model variable the state dict lacks; or a bad ``head`` or
            ``in_channels``.
    """
    if head not in ("load", "init"):
        raise ValueError(f"head must be 'load' or 'init', got {head!r}")
    sd = normalize_legacy_keys(state_dict)
    if in_channels is not None:
        sd = _adapt_input_channels(sd, in_channels)
    sd = {k: v for k, v in sd.items() if not k.endswith(_IGNORED_SUFFIXES)}
    if head == "init":
        sd = {k: v for k, v in sd.items() if not k.startswith("classifier.")}

    conv0 = sd.get("features.conv0.weight")
    in_channels = int(np.shape(conv0)[1]) if conv0 is not None and np.ndim(conv0) == 4 else 3
    size = max(min_input_size(model), 32)
    dummy = jnp.zeros((1, size, size, in_channels), jnp.float32)
    key = jax.random.key(0) if rng is None else rng
    template = jax.eval_shape(model.init, key, dummy)
    template_flat = flatten_dict(
        {c: template[c] for c in ("params", "batch_stats") if c in template}
    )
    expected = {torchvision_key(path): path for path in template_flat}

    converted: dict[tuple[str, ...], Any] = {}
    for name, value in sd.items():
        path = expected.get(name)
        if path is None:
            raise ValueError(
                f"state_dict key {name!r} does not match any variable of the model "
                f"(block_config={tuple(model.block_config)}, num_outputs={model.num_outputs})"
            )
        array = _layout(path, np.asarray(_as_numpy(value), dtype=np.float32), to_torch=False)
        want = tuple(template_flat[path].shape)
        if array.shape != want:
            raise ValueError(
                f"state_dict key {name!r} has shape {tuple(np.shape(value))}, which does not fit "
                f"the model: expected {want} after conversion to Flax layout, got {array.shape}"
            )
        converted[path] = jnp.asarray(array)
    for name, path in expected.items():
        if path in converted:
            continue
        if head == "init" and name.startswith("classifier."):
            kernel_shape = template_flat[("params", "classifier", "kernel")].shape
            fresh = init_classifier(key, kernel_shape[0], kernel_shape[1])
            converted[path] = fresh[path[-1]]
            continue
        raise ValueError(f"state_dict lacks key {name!r} that the model needs")
    return unflatten_dict(converted)


def _adapt_input_channels(sd: dict[str, Any], channels: int) -> dict[str, Any]:
    """``sd`` with ``features.conv0.weight`` (OIHW) made to take ``channels`` input channels."""
    V.check_count("in_channels", channels)
    name = "features.conv0.weight"
    if name not in sd:
        raise ValueError(f"state_dict lacks key {name!r}, whose input channels are to be adapted")
    kernel = np.asarray(_as_numpy(sd[name]), dtype=np.float32)
    have = kernel.shape[1]
    if channels == have:
        return sd
    if channels == 1:
        adapted = kernel.sum(axis=1, keepdims=True)
    else:
        reps = -(-channels // have)
        adapted = np.tile(kernel, (1, reps, 1, 1))[:, :channels] * (have / channels)
    return {**sd, name: adapted}


def variables_to_torchvision_state_dict(variables: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The inverse of ``densenet_variables_from_state_dict``: Flax variables -> torchvision names.

    Args:
        variables: ``{"params": ..., "batch_stats": ...}`` of a ``DenseNet``.

    Returns:
        torchvision key -> numpy array in torch layout (no ``num_batches_tracked``).
    """
    flat = flatten_dict({c: variables[c] for c in ("params", "batch_stats") if c in variables})
    return {torchvision_key(p): _layout(p, np.asarray(v), to_torch=True) for p, v in flat.items()}


def _as_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        return value.detach().cpu().numpy()
    return np.asarray(value)


# ----------------------------------------------------------------------------------------------
# Files (torch imported here only)
# ----------------------------------------------------------------------------------------------


def read_torch_state_dict(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Reads a .pth state dict (tensors only, ``weights_only=True``) into numpy arrays.

    A checkpoint that wraps the state dict as ``{"state_dict": ...}`` is unwrapped.

    Args:
        path: the .pth file.

    Returns:
        tensor name -> numpy array, in file order.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file does not hold a state dict.
        ImportError: if torch is not installed (``pip install 'iml[reference]'``).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"weights file {os.fspath(path)!r} does not exist")
    try:  # imported here: torch is the optional `reference` extra
        import torch
    except ImportError as err:  # pragma: no cover - torch is the optional `reference` extra
        raise ImportError("reading .pth weights needs torch: pip install 'iml[reference]'") from err
    obj = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
    if isinstance(obj, Mapping) and "state_dict" in obj and isinstance(obj["state_dict"], Mapping):
        obj = obj["state_dict"]
    if not isinstance(obj, Mapping) or not all(hasattr(v, "shape") for v in obj.values()):
        raise ValueError(f"weights file {os.fspath(path)!r} does not hold a state dict of tensors")
    return {str(k): _as_numpy(v) for k, v in obj.items()}


def load_torchvision_densenet(
    path: str | os.PathLike[str],
    model: DenseNet,
    *,
    head: Literal["load", "init"] = "load",
    rng: jax.Array | None = None,
    in_channels: int | None = None,
) -> dict[str, Any]:
    """Reads a torchvision DenseNet .pth file (e.g. ``densenet121-a639ec97.pth``) for ``model``.

    Args:
        path: the local .pth file (current or legacy key names).
        model: the Flax ``DenseNet``, e.g. ``densenet121(num_outputs=1000)``.
        head: ``"load"`` or ``"init"`` (see ``densenet_variables_from_state_dict``).
        rng: key for a fresh classifier when ``head="init"``.
        in_channels: channels of the images, when they differ from the file's (see
            ``densenet_variables_from_state_dict``).

    Returns:
        ``{"params": ..., "batch_stats": ...}`` for ``model.apply``.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: naming the first key that does not fit the model.
    """
    return densenet_variables_from_state_dict(
        read_torch_state_dict(path), model, head=head, rng=rng, in_channels=in_channels
    )
