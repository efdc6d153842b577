"""Tests of iml.scoring.binary: the binary closed forms, Proposition 2 and Corollary 1, in
probabilities and logits."""

from fractions import Fraction

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _scoring_references import c_ref, round_trip_tolerance
from hypothesis import given
from hypothesis import strategies as st

from iml import scoring as S

unit = st.floats(0.0, 1.0, allow_nan=False, width=64)
interior = st.floats(1e-6, 1 - 1e-6, allow_nan=False, width=64)
betas = st.floats(1e-6, 1 - 1e-6, allow_nan=False, width=64)


def g_ref(a, beta):
    """Corollary 1 exactly as printed, evaluated in exact rational arithmetic."""
    a, beta = Fraction(float(a)), Fraction(float(beta))
    return float((1 - beta) * a / (beta + (1 - 2 * beta) * a))


@given(gamma=unit, beta=betas)
def test_inverse_undoes_optimal_score(gamma, beta):
    with jax.enable_x64(True):
        a = S.optimal_score(gamma, beta)
        back = float(S.loss_corrected_score(a, beta))
    assert abs(back - gamma) <= round_trip_tolerance(gamma, float(a))


@given(a=unit, beta=betas)
def test_optimal_score_undoes_inverse(a, beta):
    with jax.enable_x64(True):
        gamma = S.loss_corrected_score(a, beta)
        back = float(S.optimal_score(gamma, beta))
    assert abs(back - a) <= round_trip_tolerance(a, float(gamma))


@given(gamma=interior, beta=betas)
def test_closed_forms_match_the_paper_formulas(gamma, beta):
    with jax.enable_x64(True):
        # Correct to a few ulps of the exact value, where the printed form would cancel.
        eps = np.finfo(np.float64).eps
        np.testing.assert_allclose(S.optimal_score(gamma, beta), c_ref(gamma, beta), rtol=4 * eps)
        np.testing.assert_allclose(
            S.loss_corrected_score(gamma, beta), g_ref(gamma, beta), rtol=4 * eps
        )


@given(g1=interior, g2=interior, beta=betas)
def test_optimal_score_increases_in_gamma(g1, g2, beta):
    lo, hi = sorted((g1, g2))
    with jax.enable_x64(True):
        assert S.optimal_score(lo, beta) <= S.optimal_score(hi, beta)
        # Strictly, in logits: logit c = logit gamma + logit beta.
        z_lo, z_hi = np.log(lo / (1 - lo)), np.log(hi / (1 - hi))
        if z_hi > z_lo:
            assert S.optimal_logit(z_hi, beta) > S.optimal_logit(z_lo, beta)


@given(gamma=interior, beta=betas)
def test_optimal_score_is_symmetric_in_beta_and_gamma(gamma, beta):
    with jax.enable_x64(True):
        np.testing.assert_allclose(
            S.optimal_score(gamma, beta), S.optimal_score(beta, gamma), rtol=1e-13
        )


@given(gamma=unit)
def test_half_weight_is_the_identity(gamma):
    assert S.optimal_score(gamma, 0.5) == pytest.approx(gamma, rel=1e-6, abs=1e-12)
    assert S.loss_corrected_score(gamma, 0.5) == pytest.approx(gamma, rel=1e-6, abs=1e-12)


@given(beta=betas)
def test_score_at_an_even_posterior_is_beta(beta):
    assert S.optimal_score(0.5, beta) == pytest.approx(np.float32(beta), rel=1e-6)


@given(a=unit, beta=betas)
def test_correction_equals_undersampling_correction(a, beta):
    # Dal Pozzolo et al. (2015): h(a) = d a / (1 + (d - 1) a) with d = (1 - beta) / beta.
    d = (1 - beta) / beta
    h = d * a / (1 + (d - 1) * a)
    with jax.enable_x64(True):
        np.testing.assert_allclose(S.loss_corrected_score(a, beta), h, rtol=1e-10, atol=1e-300)


class ClosedForms(chex.TestCase):
    """The closed forms on arrays and grids of weights, jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_overscoring_and_underscoring_follow_beta(self):
        optimal_score = self.variant(S.optimal_score)
        gamma = jnp.linspace(0.05, 0.95, 19)
        assert np.all(optimal_score(gamma, 0.9) > gamma)
        assert np.all(optimal_score(gamma, 0.1) < gamma)

    @chex.variants(with_jit=True, without_jit=True)
    def test_grid_of_betas_against_scores_is_one_call(self):
        loss_corrected_score = self.variant(S.loss_corrected_score)
        scores = jnp.linspace(0.0, 1.0, 7)
        grid = jnp.array([0.1, 0.5, 0.9, 0.99])
        out = loss_corrected_score(scores[None, :], grid[:, None])
        chex.assert_shape(out, (4, 7))
        for i, beta in enumerate(np.asarray(grid)):
            np.testing.assert_allclose(out[i], S.loss_corrected_score(scores, beta), rtol=1e-6)


def test_float32_accuracy_at_extreme_weights_and_scores():
    # beta in [1e-6, 1 - 1e-6] and scores within 1e-7 of 0 and 1, against float64 references,
    # in relative terms for the score and (through the logit form) for its complement.
    beta64 = np.array([1e-6, 1e-3, 0.3, 0.5, 0.99, 1 - 1e-6])
    a64 = np.array([0.0, 1e-7, 1e-5, 0.01, 0.5, 0.99, 1 - 1e-5, 1 - 1e-7, 1.0])
    beta32, a32 = beta64.astype(np.float32), a64.astype(np.float32)
    b, a = np.float64(beta32)[:, None], np.float64(a32)[None, :]
    ours = np.asarray(S.loss_corrected_score(a32[None, :], beta32[:, None]))
    chex.assert_type(ours, np.float32)
    ref = (1 - b) * a / ((1 - b) * a + b * (1 - a))
    np.testing.assert_allclose(ours, ref, rtol=4 * np.finfo(np.float32).eps, atol=0)
    compiled = jax.jit(S.loss_corrected_score)(a32[None, :], beta32[:, None])
    np.testing.assert_allclose(compiled, ref, rtol=4 * np.finfo(np.float32).eps, atol=0)
    into = S.loss_corrected_score_into(jnp.zeros(ours.shape), a32[None, :], beta32[:, None])
    np.testing.assert_allclose(into, ref, rtol=4 * np.finfo(np.float32).eps, atol=0)
    ours_c = np.asarray(S.optimal_score(a32[None, :], beta32[:, None]))
    ref_c = b * a / (b * a + (1 - b) * (1 - a))
    np.testing.assert_allclose(ours_c, ref_c, rtol=4 * np.finfo(np.float32).eps, atol=0)
    # Logit form: exact to rounding even where 1 - score is below float32 resolution of 1.
    inner = a32[1:-1]
    logits = np.log(np.float64(inner)) - np.log1p(-np.float64(inner))
    ours_z = np.asarray(S.loss_corrected_logit(logits.astype(np.float32)[None, :], beta32[:, None]))
    ref_z = logits[None, :] - (np.log(b) - np.log1p(-b))
    np.testing.assert_allclose(ours_z, ref_z, rtol=1e-6, atol=2e-6)


def test_jit_vmap_and_grad_agree_with_the_closed_form():
    scores = jnp.array([0.1, 0.4, 0.8])
    grid = jnp.array([0.2, 0.7])
    jitted = jax.jit(S.loss_corrected_score)(scores[None, :], grid[:, None])
    mapped = jax.vmap(S.loss_corrected_score, in_axes=(None, 0))(scores, grid)
    np.testing.assert_allclose(jitted, mapped, rtol=1e-6)
    # d/da of (1-b) a / ((1-b) a + b (1-a)) = b (1-b) / ((1-b) a + b (1-a))^2.
    beta = 0.7
    grad = jax.vmap(jax.grad(S.loss_corrected_score), in_axes=(0, None))(scores, beta)
    den = (1 - beta) * scores + beta * (1 - scores)
    np.testing.assert_allclose(grad, beta * (1 - beta) / den**2, rtol=1e-5)
    # and with respect to beta: d/db = -a (1-a) / den^2.
    grad_b = jax.grad(S.loss_corrected_score, argnums=1)(0.4, beta)
    np.testing.assert_allclose(grad_b, -0.4 * 0.6 / ((1 - beta) * 0.4 + beta * 0.6) ** 2, rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("beta", [0.0, 1.0, -0.2, 1.5, float("nan")])
def test_beta_outside_open_unit_interval_is_rejected(beta):
    with pytest.raises(ValueError, match="beta"):
        S.loss_corrected_score(0.3, beta)
    with pytest.raises(ValueError, match="beta"):
        S.optimal_score(0.3, beta)


@pytest.mark.parametrize("a", [-0.1, 1.2, float("nan")])
def test_scores_outside_unit_interval_are_rejected(a):
    with pytest.raises(ValueError, match="a must lie in"):
        S.loss_corrected_score(jnp.array([0.2, a]), 0.9)
    with pytest.raises(ValueError, match="gamma"):
        S.optimal_score(jnp.array([0.2, a]), 0.9)


def test_mismatched_shapes_are_rejected():
    with pytest.raises(ValueError, match="broadcast"):
        S.loss_corrected_score(jnp.ones(3) * 0.5, jnp.ones(4) * 0.5)


def test_invalid_input_under_jit_is_nan_not_a_number():
    out = jax.jit(S.loss_corrected_score)(jnp.array([0.3, 1.5, jnp.nan, 0.3]), 0.9)
    assert np.isfinite(out[0]) and np.isfinite(out[3])
    assert np.all(np.isnan(out[1:3]))
    out = jax.jit(S.loss_corrected_score)(jnp.array([0.3, 0.4]), 1.0)
    assert np.all(np.isnan(out))


def test_loss_corrected_score_into_reuses_the_buffer_and_matches():
    scores = jnp.linspace(0.0, 1.0, 11)
    grid = jnp.array([0.05, 0.5, 0.97])
    buffer = jnp.zeros((3, 11), jnp.float32)
    out = S.loss_corrected_score_into(buffer, scores[None, :], grid[:, None])
    eps = np.finfo(np.float32).eps  # fused compiled code may round differently by an ulp
    ref = S.loss_corrected_score(scores[None, :], grid[:, None])
    np.testing.assert_allclose(out, ref, rtol=2 * eps)
    assert buffer.is_deleted()  # donated: its memory now holds the result
    again = S.loss_corrected_score_into(out, scores[None, :] * 0.5, grid[:, None])
    ref = S.loss_corrected_score(scores[None, :] * 0.5, grid[:, None])
    np.testing.assert_allclose(again, ref, rtol=2 * eps)
    with pytest.raises(ValueError, match="out must be"):
        S.loss_corrected_score_into(jnp.zeros((2, 11)), scores[None, :], grid[:, None])
    with pytest.raises(ValueError, match="beta"):
        S.loss_corrected_score_into(again, scores[None, :], jnp.array([[0.1], [1.0], [0.3]]))
