"""References shared by the tests of iml.scoring (tests/scoring/): Proposition 2 in exact
arithmetic, the rounding bound of a round trip, random posteriors, a loss of one's own, and one
whose rule is not invertible on a range of scores."""

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np

from iml import losses as L


def c_ref(gamma, beta):
    """Proposition 2 exactly as printed, evaluated in exact rational arithmetic."""
    gamma, beta = Fraction(float(gamma)), Fraction(float(beta))
    return float(beta * gamma / (1 - beta - gamma + 2 * beta * gamma))


def round_trip_tolerance(p, mid):
    """Rounding bound for p -> mid -> p in float64.

    Both maps are shifts in the logit, and rounding ``mid`` perturbs its logit by at most
    ``eps / min(mid, 1 - mid)``; the logit perturbation moves ``p`` by ``p (1 - p)`` times that.
    """
    eps = np.finfo(np.float64).eps
    return 8 * eps * (p + p * (1 - p) / max(min(mid, 1 - mid), 1e-300)) + 1e-300


def random_simplex(key, n, m):
    return jax.random.dirichlet(key, jnp.ones(n), (m,))


def user_loss():
    """A strictly proper loss of the researcher's own, from its weight function."""
    return L.proper_loss(lambda t: 1.0 / jnp.sqrt(t * (1.0 - t)))


def dented_weight(t):
    """A weight function negative on (0.3, 0.4): the loss of :func:`iml.losses.proper_loss` then
    has two local minima for posteriors near there."""
    return (t - 0.35) ** 2 - 0.0025


def dented_partial_losses():
    """``L(x, 1)`` and ``L(x, 0)`` of the dented weight in float64, integrated exactly from the
    anchor 1/2 as :func:`iml.losses.proper_loss` does."""
    w = np.polynomial.Polynomial([0.12, -0.7, 1.0])
    t = np.polynomial.Polynomial([0.0, 1.0])
    pos, neg = (w * (1 - t)).integ(), (w * t).integ()
    return (lambda x: pos(0.5) - pos(x)), (lambda x: neg(x) - neg(0.5))
