"""Tests of iml.losses.beta: properness (Definition 4), the beta-weighted losses and their logit
forms."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import parameterized
from jax.test_util import check_grads

from iml import losses as L

A = jnp.array([1e-4, 0.02, 0.3, 0.5, 0.77, 0.999])


def elementwise_grad(f, a, y):
    return jax.vmap(jax.grad(f), in_axes=(0, None))(a, y)


class BetaWeightedLosses(chex.TestCase):
    """The base losses, the beta-weighted losses and their logit forms, jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.named_parameters(
        ("log", L.log_loss, L.log_loss_weight),
        ("squared", L.squared_loss, L.squared_loss_weight),
        ("user_weight", L.proper_loss(lambda t: 1.0 / jnp.sqrt(t * (1.0 - t))), None),
    )
    def test_base_losses_are_strictly_proper(self, loss, weight):
        # eq. proper: dL(a,1)/da = w(a)(a - 1) and dL(a,0)/da = w(a) a with the same w > 0.
        gradient = self.variant(lambda a, y: elementwise_grad(loss, a, y))
        d_pos = gradient(A, 1.0)
        d_neg = gradient(A, 0.0)
        w_from_pos = d_pos / (A - 1.0)
        w_from_neg = d_neg / A
        np.testing.assert_allclose(w_from_pos, w_from_neg, rtol=1e-5)
        assert np.all(w_from_pos > 0)
        if weight is not None:
            np.testing.assert_allclose(w_from_pos, weight(A), rtol=1e-5)

    @chex.variants(with_jit=True, without_jit=True)
    def test_proper_loss_from_log_weight_is_log_loss_up_to_a_constant(self):
        built = self.variant(L.proper_loss(L.log_loss_weight))
        a = jnp.asarray(np.linspace(1e-3, 1 - 1e-3, 101), jnp.float32)
        for y in (0.0, 1.0):
            np.testing.assert_allclose(built(a, y), L.log_loss(a, y) - np.log(2.0), atol=2e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_beta_weighted_loss_weights_each_class(self):
        beta = 0.9
        weighted = self.variant(L.beta_weighted_loss)
        np.testing.assert_allclose(weighted(A, 1.0, beta), beta * L.log_loss(A, 1.0), rtol=1e-6)
        weighted_squared = self.variant(
            lambda a, y, b: L.beta_weighted_loss(a, y, b, L.squared_loss)
        )
        np.testing.assert_allclose(
            weighted_squared(A, 0.0, beta),
            (1 - beta) * L.squared_loss(A, 0.0),
            rtol=1e-6,
        )
        # beta = 1/2 is half the unweighted loss.
        np.testing.assert_allclose(weighted(A, 1.0, 0.5), 0.5 * L.log_loss(A, 1.0))

    @chex.variants(with_jit=True, without_jit=True)
    def test_beta_weighted_loss_broadcasts_a_grid_of_betas(self):
        betas = jnp.array([0.1, 0.5, 0.99])
        out = self.variant(L.beta_weighted_loss)(A[None, :], 1.0, betas[:, None])
        chex.assert_shape(out, (3, A.shape[0]))

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.parameters(1e-6, 0.3, 0.99, 1 - 1e-6)
    def test_sigmoid_cross_entropy_matches_probability_form_and_is_stable(self, beta):
        cross_entropy = self.variant(L.beta_weighted_sigmoid_cross_entropy)
        z = np.linspace(-20.0, 20.0, 41)
        for y in (0.0, 1.0):
            ours = cross_entropy(jnp.asarray(z, jnp.float32), y, beta)
            beta = float(np.float32(beta))  # the weight as the float32 computation sees it
            # float64 reference: -log sigmoid(z) = log(1 + exp(-z)).
            ref = beta * np.logaddexp(0.0, -z) if y else (1 - beta) * np.logaddexp(0.0, z)
            np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-30)
        extreme = cross_entropy(jnp.array([-1e4, 1e4]), 1.0, beta)
        np.testing.assert_allclose(extreme, [beta * 1e4, 0.0], rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_log_loss_logits_matches_probabilities(self):
        log_loss_logits = self.variant(L.log_loss_logits)
        z = np.linspace(-30.0, 30.0, 61)
        for y in (0.0, 1.0):
            ref = np.logaddexp(0.0, -z) if y else np.logaddexp(0.0, z)
            np.testing.assert_allclose(
                log_loss_logits(jnp.asarray(z, jnp.float32), y), ref, rtol=1e-5
            )


def test_proper_loss_values_are_consistent_with_its_exact_derivative(x64):
    # The custom JVP returns w(a)(a - y); finite differences of the quadrature values must agree.
    built = L.proper_loss(lambda t: 2.0 + jnp.sin(6.0 * t))
    a = jnp.asarray([0.1, 0.4, 0.8], jnp.float64)
    check_grads(lambda x: built(x, 1.0), (a,), order=1, modes=["fwd", "rev"], atol=1e-6)
    check_grads(lambda x: built(x, 0.0), (a,), order=1, modes=["fwd", "rev"], atol=1e-6)


@pytest.mark.slow
def test_losses_are_differentiable_under_jit():
    def total(z):
        return jnp.sum(L.beta_weighted_sigmoid_cross_entropy(z, jnp.array([0.0, 1.0, 1.0]), 0.9))

    z = jnp.array([-1.0, 0.5, 2.0])
    check_grads(total, (z,), order=2, modes=["fwd", "rev"], atol=1e-2, rtol=1e-2)
    g = jax.jit(jax.grad(total))(z)
    expected = np.array([0.1 * jax.nn.sigmoid(-1.0), 0.9 * (jax.nn.sigmoid(0.5) - 1), 0.0])
    expected[2] = 0.9 * (jax.nn.sigmoid(2.0) - 1)
    np.testing.assert_allclose(g, expected, rtol=1e-5)
