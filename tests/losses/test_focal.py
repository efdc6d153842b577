"""Tests of iml.losses.focal: the binary and multiclass focal losses."""

import jax
import jax.numpy as jnp
import numpy as np

from iml import losses as L

A = jnp.array([1e-4, 0.02, 0.3, 0.5, 0.77, 0.999])


def test_focal_loss_without_focusing_is_weighted_log_loss():
    for y in (0.0, 1.0):
        np.testing.assert_allclose(
            L.focal_loss(A, y, gamma=0.0, alpha=0.7),
            2.0 * L.beta_weighted_loss(A, y, 0.7),
            rtol=1e-6,
        )


def test_focal_loss_down_weights_confident_correct_predictions():
    # Lin et al. (2017): the factor (1 - a)^gamma shrinks the loss of well-classified examples.
    confident = jnp.array(0.95)
    ratio = L.focal_loss(confident, 1.0, 2.0) / L.focal_loss(confident, 1.0, 0.0)
    np.testing.assert_allclose(ratio, 0.05**2, rtol=1e-5)


def test_sigmoid_focal_loss_matches_probability_form_and_is_stable(x64):
    z = np.linspace(-12.0, 12.0, 25, dtype=np.float32)
    for y in (0.0, 1.0):
        ours = L.sigmoid_focal_loss(jnp.asarray(z), y, 2.0, 0.25)
        ref = L.focal_loss(jax.nn.sigmoid(jnp.asarray(z, jnp.float64)), y, 2.0, 0.25)
        np.testing.assert_allclose(ours, ref, rtol=1e-5)
    assert np.all(np.isfinite(L.sigmoid_focal_loss(jnp.array([-200.0, 200.0]), 1.0)))


def test_softmax_focal_loss_matches_probability_form_and_is_stable(x64):
    logits = np.array([[1.0, 2.0, 3.0], [10.0, -5.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    labels = jnp.array([0, 0, 2])
    w = np.array([2.0, 1.0, 0.5], np.float32)
    ours = L.softmax_focal_loss(jnp.asarray(logits), labels, 2.0, jnp.asarray(w))
    ref = L.focal_loss_multiclass(
        jax.nn.softmax(jnp.asarray(logits, jnp.float64)), labels, 2.0, jnp.asarray(w, jnp.float64)
    )
    np.testing.assert_allclose(ours, ref, rtol=1e-5)
    extreme = L.softmax_focal_loss(jnp.array([[500.0, -500.0]], jnp.float32), jnp.array([1]), 2.0)
    np.testing.assert_allclose(extreme, [1000.0], rtol=1e-6)
