"""Tests of iml.losses.focal: the binary and multiclass focal losses."""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from iml import losses as L

A = jnp.array([1e-4, 0.02, 0.3, 0.5, 0.77, 0.999])


class FocalLosses(chex.TestCase):
    """The focal losses against the weighted log loss and their probability forms (float64),
    jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_focal_loss_without_focusing_is_weighted_log_loss(self):
        focal = self.variant(L.focal_loss)
        for y in (0.0, 1.0):
            np.testing.assert_allclose(
                focal(A, y, gamma=0.0, alpha=0.7),
                2.0 * L.beta_weighted_loss(A, y, 0.7),
                rtol=1e-6,
            )

    @chex.variants(with_jit=True, without_jit=True)
    def test_focal_loss_down_weights_confident_correct_predictions(self):
        # Lin et al. (2017): the factor (1 - a)^gamma shrinks the loss of well-classified examples.
        focal = self.variant(L.focal_loss)
        confident = jnp.array(0.95)
        ratio = focal(confident, 1.0, 2.0) / focal(confident, 1.0, 0.0)
        np.testing.assert_allclose(ratio, 0.05**2, rtol=1e-5)

    @chex.variants(with_jit=True, without_jit=True)
    def test_sigmoid_focal_loss_matches_probability_form_and_is_stable(self):
        with jax.enable_x64(True):
            sigmoid_focal = self.variant(L.sigmoid_focal_loss)
            z = np.linspace(-12.0, 12.0, 25, dtype=np.float32)
            for y in (0.0, 1.0):
                ours = sigmoid_focal(jnp.asarray(z), y, 2.0, 0.25)
                ref = L.focal_loss(jax.nn.sigmoid(jnp.asarray(z, jnp.float64)), y, 2.0, 0.25)
                np.testing.assert_allclose(ours, ref, rtol=1e-5)
            assert np.all(np.isfinite(sigmoid_focal(jnp.array([-200.0, 200.0]), 1.0)))

    @chex.variants(with_jit=True, without_jit=True)
    def test_softmax_focal_loss_matches_probability_form_and_is_stable(self):
        with jax.enable_x64(True):
            softmax_focal = self.variant(L.softmax_focal_loss)
            logits = np.array([[1.0, 2.0, 3.0], [10.0, -5.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
            labels = jnp.array([0, 0, 2])
            w = np.array([2.0, 1.0, 0.5], np.float32)
            ours = softmax_focal(jnp.asarray(logits), labels, 2.0, jnp.asarray(w))
            ref = L.focal_loss_multiclass(
                jax.nn.softmax(jnp.asarray(logits, jnp.float64)),
                labels,
                2.0,
                jnp.asarray(w, jnp.float64),
            )
            np.testing.assert_allclose(ours, ref, rtol=1e-5)
            extreme = softmax_focal(jnp.array([[500.0, -500.0]], jnp.float32), jnp.array([1]), 2.0)
            np.testing.assert_allclose(extreme, [1000.0], rtol=1e-6)
