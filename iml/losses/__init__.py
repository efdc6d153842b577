"""Losses as pure JAX functions, one module per family, and the registry that names them.

Notation follows Caplin, Martin & Marx, *Calibrating for Class Weights by Modeling Machine
Learning* (the paper). Each family module holds its losses (on scores, and their stable logit
forms) and registers one record per loss it offers (:class:`LossRecord`):

* :mod:`iml.losses.beta`: the strictly proper base losses and their beta-weighted forms, eq.
  ``b-loss-bin`` (records ``"log"`` and ``"squared"``);
* :mod:`iml.losses.matrix`: the B-weighted multiclass log loss, eq. ``b-loss-multi``
  (``"matrix"``);
* :mod:`iml.losses.softmax`: the class-weighted softmax cross-entropy
  (``"class_weighted_softmax"``);
* :mod:`iml.losses.focal`: the binary and multiclass focal losses (``"focal"``,
  ``"softmax_focal"``).

A new loss is one :func:`register` call, from any file: ``iml.loss_spec(name, **params)`` then
builds it, and the sweep, the ensemble, the loss correction and ``iml reveal`` take it by name.
Binary losses take the positive-class score ``a [...]`` and labels ``y`` in ``{0, 1}``;
multiclass ones take ``a [..., n]`` with classes last and integer labels ``[...]``.
"""

from iml.losses import beta, focal, matrix, softmax
from iml.losses._registry import (
    GridWeight,
    LossRecord,
    as_parameter,
    entropy_term,
    is_shipped,
    lookup,
    mark_shipped,
    register,
    registered,
    unregister,
)
from iml.losses.beta import (
    BinaryLoss,
    WeightFunction,
    beta_weighted_loss,
    beta_weighted_sigmoid_cross_entropy,
    log_loss,
    log_loss_logits,
    log_loss_weight,
    proper_loss,
    squared_loss,
    squared_loss_weight,
)
from iml.losses.focal import (
    focal_loss,
    focal_loss_multiclass,
    sigmoid_focal_loss,
    softmax_focal_loss,
)
from iml.losses.matrix import matrix_weighted_loss, matrix_weighted_sigmoid_cross_entropy
from iml.losses.softmax import class_weighted_cross_entropy, class_weighted_softmax_cross_entropy

__all__ = [
    "BinaryLoss",
    "GridWeight",
    "LossRecord",
    "WeightFunction",
    "as_parameter",
    "beta",
    "beta_weighted_loss",
    "beta_weighted_sigmoid_cross_entropy",
    "class_weighted_cross_entropy",
    "class_weighted_softmax_cross_entropy",
    "entropy_term",
    "focal",
    "focal_loss",
    "focal_loss_multiclass",
    "is_shipped",
    "log_loss",
    "log_loss_logits",
    "log_loss_weight",
    "lookup",
    "matrix",
    "matrix_weighted_loss",
    "matrix_weighted_sigmoid_cross_entropy",
    "proper_loss",
    "register",
    "registered",
    "sigmoid_focal_loss",
    "softmax",
    "softmax_focal_loss",
    "squared_loss",
    "squared_loss_weight",
    "unregister",
]

mark_shipped()  # the losses of the family modules above
