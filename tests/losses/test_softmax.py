"""Tests of iml.losses.softmax: the class-weighted softmax cross-entropy."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml import losses as L


class ClassWeightedSoftmax(chex.TestCase):
    """The logit form against the probability form in float64, jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_class_weighted_softmax_cross_entropy_matches_probability_form(self):
        with jax.enable_x64(True):
            logits = 5.0 * np.random.default_rng(0).normal(size=(7, 4)).astype(np.float32)
            labels = jnp.arange(7) % 4
            w = np.array([1.0, 3.0, 0.5, 2.0], np.float32)
            ours = self.variant(L.class_weighted_softmax_cross_entropy)(
                jnp.asarray(logits), labels, jnp.asarray(w)
            )
            chex.assert_type(ours, jnp.float32)
            ref = L.class_weighted_cross_entropy(
                jax.nn.softmax(jnp.asarray(logits, jnp.float64)),
                labels,
                jnp.asarray(w, jnp.float64),
            )
            np.testing.assert_allclose(ours, ref, rtol=1e-6)


@pytest.mark.slow
def test_softmax_losses_have_finite_gradients_at_extreme_logits():
    logits = jnp.array([[30.0, -30.0, 0.0], [-30.0, 30.0, 0.0], [0.0, 0.0, 0.0]])
    labels = jnp.array([0, 0, 1])
    w = jnp.array([1.0, 2.0, 3.0])
    for fn in (
        lambda z: L.class_weighted_softmax_cross_entropy(z, labels, w).sum(),
        lambda z: L.softmax_focal_loss(z, labels, 2.0, w).sum(),
    ):
        g = jax.grad(fn)(logits)
        assert np.all(np.isfinite(g))
        # The gradient of the weighted cross-entropy is w_y (softmax(z) - onehot(y)).
    g = jax.grad(lambda z: L.class_weighted_softmax_cross_entropy(z, labels, w).sum())(logits)
    expected = w[labels][:, None] * (jax.nn.softmax(logits) - jax.nn.one_hot(labels, 3))
    np.testing.assert_allclose(g, expected, atol=1e-6)
