"""Flax DenseNets laid out like torchvision's, and the import of torchvision's weights."""

from iml.models.densenet import (
    CONV_IMPLS,
    BatchNorm,
    Conv,
    DenseBlock,
    DenseLayer,
    DenseNet,
    Transition,
    densenet121,
    densenet_small,
    min_input_size,
    validate_images,
)

__all__ = [
    "CONV_IMPLS",
    "BatchNorm",
    "Conv",
    "DenseBlock",
    "DenseLayer",
    "DenseNet",
    "Transition",
    "densenet121",
    "densenet_small",
    "min_input_size",
    "validate_images",
]
