"""Tests of iml.losses.matrix: the B-weighted multiclass log loss."""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from iml import losses as L

A = jnp.array([1e-4, 0.02, 0.3, 0.5, 0.77, 0.999])


class MatrixWeightedLoss(chex.TestCase):
    """The B-weighted log loss against the binary loss and a hand computation, jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_matrix_weighted_loss_with_binary_weights_is_twice_the_beta_loss(self):
        # eq. b-loss-multi with rows (1-beta, 1-beta), (beta, beta) and complementary scores
        # (1 - a, a) is the binary eq. b-loss-bin counted once per class.
        with jax.enable_x64(True):
            loss = self.variant(L.matrix_weighted_loss)
            beta = 0.8
            a = jnp.asarray(np.asarray(A), jnp.float64)
            B = jnp.array([[1 - beta, 1 - beta], [beta, beta]])
            scores = jnp.stack([1.0 - a, a], axis=-1)
            for y in (0, 1):
                labels = jnp.full(A.shape, y)
                np.testing.assert_allclose(
                    loss(scores, labels, B),
                    2.0 * L.beta_weighted_loss(a, float(y), beta),
                    rtol=1e-12,
                )

    @chex.variants(with_jit=True, without_jit=True)
    def test_matrix_weighted_loss_by_hand(self):
        a = jnp.array([0.2, 0.5, 0.9])
        B = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
        by_hand = 4.0 * -np.log(1 - 0.2) + 5.0 * -np.log(0.5) + 6.0 * -np.log(1 - 0.9)
        np.testing.assert_allclose(
            self.variant(L.matrix_weighted_loss)(a, 1, B), by_hand, rtol=1e-6
        )
