"""A loss of one's own as a plugin file: the beta-weighted spherical loss, registered in ``iml``
as ``"spherical"`` when this file is imported (``iml sweep --import spherical.py --loss
spherical``, or ``iml.plugins.import_plugin("spherical.py")`` from Python).

The spherical score of a score ``a`` is ``S(a, y) = a_y / ||a||``, with ``a_1 = a`` and
``a_0 = 1 - a``; the loss is ``-beta_y S(a, y)``, with ``beta_1 = beta`` and
``beta_0 = 1 - beta``. The score is strictly proper, so the loss's optimal score is the
beta-tilted posterior of Proposition 2, and its inverse Corollary 1's. Only the loss is given
here: ``iml`` finds its rule and the rule's inverse by automatic differentiation.
"""

import jax
import jax.numpy as jnp

from iml import losses


@jax.custom_jvp
def spherical_scores(a):
    """``(S(a, 1), S(a, 0))``. Their derivatives are given in closed form below: differentiated
    as written, the quotient cancels to float32 noise for scores near 0 and 1, and the check
    that ``iml`` runs before training (``iml.check_invertibility``) would refuse the loss."""
    norm = jnp.sqrt(a**2 + (1.0 - a) ** 2)
    return a / norm, (1.0 - a) / norm


@spherical_scores.defjvp
def _spherical_scores_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    cube = (a**2 + (1.0 - a) ** 2) ** 1.5
    return spherical_scores(a), ((1.0 - a) / cube * da, -a / cube * da)


def spherical(a, y, beta):
    """``-beta S(a, 1)`` for a positive, ``-(1 - beta) S(a, 0)`` for a negative; elementwise."""
    positive, negative = spherical_scores(jnp.asarray(a))
    return jnp.where(jnp.asarray(y) == 1, -beta * positive, -(1.0 - beta) * negative)


losses.register(
    losses.LossRecord(
        name="spherical",
        title="beta-weighted spherical loss",
        loss=spherical,
        make=lambda beta=0.5: ({"beta": losses.as_parameter("beta", beta)}, 2),
        event_ndims={"beta": 0},
        class_weight="beta",
    )
)
