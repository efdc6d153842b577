"""Optimal scoring rules and their inverses: the loss-corrected confidence score.

The paper models a trained classifier as a Bayesian decision-maker that reports the score
minimising its expected loss under its posterior (eq. ``choice``):

    c^L(gamma) = argmin_a  sum_y gamma_y L(a, y).

For class-weighted proper losses the rule has closed forms (Propositions 2 and 3) and inverting
it recovers probabilities from miscalibrated scores (Proposition 4, Corollary 1). For any other
differentiable loss the rule is found here from its first-order condition by automatic
differentiation, and its inverse comes from the loss's gradients (the first-order condition is
linear in the posterior).

One kind of rule per module, all of whose public names are imported here:

* :mod:`~iml.scoring.binary`: Proposition 2 and Corollary 1, in probabilities and logits.
* :mod:`~iml.scoring.multiclass`: Proposition 3 and its per-output inverse; class-weighted softmax.
* :mod:`~iml.scoring.generic`: the rule and inverse of any differentiable loss, by autodiff.
* :mod:`~iml.scoring.checks`: first-order conditions and invertibility, checked by autodiff.
* :mod:`~iml.scoring._common`: array and loss types, one floating dtype, the logit and its
  inverse, the odds tilt.
* :mod:`~iml.scoring._autodiff`: a loss's derivatives, the binary solver and inverse they share.

Conventions
-----------
* Binary functions take the positive-class score or posterior and broadcast with NumPy rules, so
  a grid of weights against a vector of scores is one call:
  ``loss_corrected_score(scores[None, :], betas[:, None])`` has shape ``[n_beta, n_scores]``.
* Multiclass functions put classes on the last axis; weight matrices are ``B[y, y']`` with rows
  the true class ``y`` and columns the scored class ``y'`` (eq. ``b-loss-multi``).
* Every rule and correction is pure and works under ``jax.jit``, ``jax.vmap`` and ``jax.grad``
  (the checkers, :func:`check_first_order_conditions` and :func:`check_invertibility`, are meant
  to be called directly and validate eagerly). Called on concrete arrays, bad input raises
  ``ValueError`` naming the argument; under a transformation, outputs that depend on an invalid
  entry are NaN (never a plausible wrong number).
* Equation labels are the paper's (``choice``, ``b-loss-bin``, ...); in the compiled paper they
  are numbered (5) choice, (6) proper, (7) b-loss-bin, (8) choice-b1, (9) b-loss-multi,
  (10) Proposition 3, (11) invert, (12) loss-c-bin, (13) correct-prior.
* Binary closed forms are accurate to a few ulps in float32 over ``beta`` in ``[1e-6, 1 - 1e-6]``
  and all scores in ``[0, 1]`` (no cancellation: both terms of every denominator are positive).
  The logit forms are exact shifts and keep full precision for scores near 0 and 1.
"""

# The types of a user's loss and of the generic multiclass rules' domain, for annotations.
from iml.scoring._common import BinaryLossFn as BinaryLossFn
from iml.scoring._common import MulticlassLossFn as MulticlassLossFn
from iml.scoring.binary import (
    loss_corrected_logit,
    loss_corrected_score,
    loss_corrected_score_into,
    optimal_logit,
    optimal_score,
)
from iml.scoring.checks import (
    FirstOrderConditionReport,
    InvertibilityReport,
    check_first_order_conditions,
    check_invertibility,
)
from iml.scoring.generic import Domain as Domain
from iml.scoring.generic import (
    loss_corrected_score_for_loss,
    loss_corrected_score_multiclass_for_loss,
    optimal_score_for_loss,
    optimal_score_multiclass_for_loss,
)
from iml.scoring.multiclass import (
    loss_corrected_score_class_weighted,
    loss_corrected_score_multiclass,
    optimal_score_class_weighted,
    optimal_score_multiclass,
)

__all__ = [
    "FirstOrderConditionReport",
    "InvertibilityReport",
    "check_first_order_conditions",
    "check_invertibility",
    "loss_corrected_logit",
    "loss_corrected_score",
    "loss_corrected_score_class_weighted",
    "loss_corrected_score_for_loss",
    "loss_corrected_score_into",
    "loss_corrected_score_multiclass",
    "loss_corrected_score_multiclass_for_loss",
    "optimal_logit",
    "optimal_score",
    "optimal_score_class_weighted",
    "optimal_score_for_loss",
    "optimal_score_multiclass",
    "optimal_score_multiclass_for_loss",
]
