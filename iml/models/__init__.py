"""The models: Flax DenseNets laid out like torchvision's (and the import of torchvision's
weights), and the small models of the sweeps (logistic regression, a one-hidden-layer MLP)."""

from iml.models.densenet import (
    CONV_IMPLS,
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
)
from iml.models.small import SMALL_MODELS, init_small_model, small_model_logits, weight_norm
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
    "SMALL_MODELS",
    "BatchNorm",
    "Conv",
    "DenseBlock",
    "DenseLayer",
    "DenseNet",
    "Transition",
    "batch_moments",
    "densenet121",
    "densenet_small",
    "densenet_variables_from_state_dict",
    "init_classifier",
    "init_small_model",
    "load_torchvision_densenet",
    "min_input_size",
    "normalize_legacy_keys",
    "read_torch_state_dict",
    "small_model_logits",
    "torchvision_key",
    "validate_images",
    "variables_to_torchvision_state_dict",
    "weight_norm",
]
