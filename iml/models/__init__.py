"""The models: Flax DenseNets laid out like torchvision's (and the import of torchvision's
weights), and the small models of the sweeps (logistic regression, a one-hidden-layer MLP)."""

from collections.abc import Callable

import flax.linen as nn

from iml.models.densenet import (
    CONV_IMPLS,
    DEFAULT_CONV_IMPL,
    BatchNorm,
    Conv,
    DenseBlock,
    DenseLayer,
    DenseNet,
    Transition,
    batch_moments,
    densenet121,
    densenet_small,
    init_classifier,
    min_input_size,
    validate_images,
    with_conv_impl,
)
from iml.models.small import (
    MLP,
    SMALL_MODELS,
    LogisticRegression,
    build_small_model,
    weight_norm,
)
from iml.models.torchvision_weights import (
    densenet_variables_from_state_dict,
    load_torchvision_densenet,
    normalize_legacy_keys,
    read_torch_state_dict,
    torchvision_key,
    variables_to_torchvision_state_dict,
)

__all__ = [
    "CONV_IMPLS",
    "DEFAULT_CONV_IMPL",
    "IMAGE_MODELS",
    "MLP",
    "SMALL_MODELS",
    "BatchNorm",
    "Conv",
    "DenseBlock",
    "DenseLayer",
    "DenseNet",
    "LogisticRegression",
    "Transition",
    "batch_moments",
    "build_image_model",
    "build_small_model",
    "densenet121",
    "densenet_small",
    "densenet_variables_from_state_dict",
    "init_classifier",
    "load_torchvision_densenet",
    "min_input_size",
    "normalize_legacy_keys",
    "read_torch_state_dict",
    "torchvision_key",
    "validate_images",
    "variables_to_torchvision_state_dict",
    "weight_norm",
    "with_conv_impl",
]


def _densenet_tiny(num_outputs: int) -> nn.Module:
    # Two blocks of one layer: for smoke runs and tests, where compile time dominates.
    return densenet_small(
        num_outputs=num_outputs, block_config=(1, 1), growth_rate=4, num_init_features=8
    )


#: The image models of ``iml reproduce``, by name: each builds an unbound Flax module with
#: ``num_outputs`` logits. A new model is one entry here. (The small models of the sweeps are
#: :data:`SMALL_MODELS`.)
IMAGE_MODELS: dict[str, Callable[[int], nn.Module]] = {
    "densenet_tiny": _densenet_tiny,  # blocks 1-1, growth 4
    "densenet_small": lambda num_outputs: densenet_small(num_outputs=num_outputs),  # blocks 2-4-4
    "densenet121": lambda num_outputs: densenet121(num_outputs=num_outputs),  # the paper's
}


def build_image_model(name: str, num_outputs: int = 1) -> nn.Module:
    """The image model ``name`` of :data:`IMAGE_MODELS` with ``num_outputs`` logits.

    Raises:
      ValueError: for an unknown name.
    """
    if name not in IMAGE_MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {list(IMAGE_MODELS)}")
    return IMAGE_MODELS[name](num_outputs)
