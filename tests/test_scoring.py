"""Tests for iml.scoring: Propositions 2-4, Corollary 1, generic rules and the FOC check."""

import functools
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iml import losses as L
from iml import scoring as S
from iml.scoring import checks, generic

unit = st.floats(0.0, 1.0, allow_nan=False, width=64)
interior = st.floats(1e-6, 1 - 1e-6, allow_nan=False, width=64)
betas = st.floats(1e-6, 1 - 1e-6, allow_nan=False, width=64)


def c_ref(gamma, beta):
    """Proposition 2 exactly as printed, evaluated in exact rational arithmetic."""
    gamma, beta = Fraction(float(gamma)), Fraction(float(beta))
    return float(beta * gamma / (1 - beta - gamma + 2 * beta * gamma))


def g_ref(a, beta):
    """Corollary 1 exactly as printed, evaluated in exact rational arithmetic."""
    a, beta = Fraction(float(a)), Fraction(float(beta))
    return float((1 - beta) * a / (beta + (1 - 2 * beta) * a))


@pytest.fixture
def x64():
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", False)


# ----------------------------------------------------------------------------------------------
# Binary closed forms
# ----------------------------------------------------------------------------------------------


def round_trip_tolerance(p, mid):
    """Rounding bound for p -> mid -> p in float64.

    Both maps are shifts in the logit, and rounding ``mid`` perturbs its logit by at most
    ``eps / min(mid, 1 - mid)``; the logit perturbation moves ``p`` by ``p (1 - p)`` times that.
    """
    eps = np.finfo(np.float64).eps
    return 8 * eps * (p + p * (1 - p) / max(min(mid, 1 - mid), 1e-300)) + 1e-300


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


def test_overscoring_and_underscoring_follow_beta():
    gamma = jnp.linspace(0.05, 0.95, 19)
    assert np.all(S.optimal_score(gamma, 0.9) > gamma)
    assert np.all(S.optimal_score(gamma, 0.1) < gamma)


def test_float32_accuracy_at_extreme_weights_and_scores():
    # beta in [1e-6, 1 - 1e-6] and scores within 1e-7 of 0 and 1, against float64 references,
    # in relative terms for the score and (through the logit form) for its complement.
    beta64 = np.array([1e-6, 1e-3, 0.3, 0.5, 0.99, 1 - 1e-6])
    a64 = np.array([0.0, 1e-7, 1e-5, 0.01, 0.5, 0.99, 1 - 1e-5, 1 - 1e-7, 1.0])
    beta32, a32 = beta64.astype(np.float32), a64.astype(np.float32)
    b, a = np.float64(beta32)[:, None], np.float64(a32)[None, :]
    ours = np.asarray(S.loss_corrected_score(a32[None, :], beta32[:, None]))
    assert ours.dtype == np.float32
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


def test_grid_of_betas_against_scores_is_one_call():
    scores = jnp.linspace(0.0, 1.0, 7)
    grid = jnp.array([0.1, 0.5, 0.9, 0.99])
    out = S.loss_corrected_score(scores[None, :], grid[:, None])
    assert out.shape == (4, 7)
    for i, beta in enumerate(np.asarray(grid)):
        np.testing.assert_allclose(out[i], S.loss_corrected_score(scores, beta), rtol=1e-6)


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


@pytest.mark.parametrize(
    ("B", "match"),
    [
        (np.ones((2, 3)), "square"),
        (
            np.array([[1.0, -1.0], [1.0, 1.0]]),
            r"B must lie in \(0, inf\) without NaN; got min -1",
        ),
        (np.array([[1.0, np.nan], [1.0, 1.0]]), r"B must lie in \(0, inf\) without NaN; got 1 NaN"),
        (np.ones((3, 3)), "classes"),
    ],
)
def test_bad_weight_matrices_are_rejected(B, match):
    with pytest.raises(ValueError, match=match):
        S.loss_corrected_score_multiclass(np.array([0.3, 0.7]), B)


def test_posteriors_off_the_simplex_are_rejected():
    with pytest.raises(ValueError, match="sum to 1"):
        S.optimal_score_multiclass(np.array([0.3, 0.3]), np.ones((2, 2)))


# ----------------------------------------------------------------------------------------------
# Multiclass (Proposition 3 and its inverse)
# ----------------------------------------------------------------------------------------------


def random_simplex(key, n, m):
    return jax.random.dirichlet(key, jnp.ones(n), (m,))


def test_weights_depending_only_on_true_class_give_proportional_correction():
    # B[y, y'] = w_y: c_y(gamma) = gamma_y w_y / sum gamma w, so gamma_y ∝ a_y / w_y.
    w = jnp.array([1.0, 4.0, 0.5, 2.0])
    B = jnp.tile(w[:, None], (1, 4))
    gamma = random_simplex(jax.random.PRNGKey(1), 4, 16)
    a = S.optimal_score_multiclass(gamma, B)
    np.testing.assert_allclose(a.sum(-1), 1.0, rtol=1e-5)
    expected = (a / w) / jnp.sum(a / w, axis=-1, keepdims=True)
    np.testing.assert_allclose(S.loss_corrected_score_multiclass(a, B), expected, atol=2e-6)
    np.testing.assert_allclose(S.loss_corrected_score_class_weighted(a, w), expected, atol=2e-6)


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1), n=st.sampled_from([2, 3, 5]))
def test_multiclass_round_trip_for_random_positive_B(seed, n):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    B = jnp.exp(jax.random.normal(k1, (n, n)))
    gamma = random_simplex(k2, n, 4)
    with jax.enable_x64(True):
        B64, g64 = jnp.asarray(B, jnp.float64), jnp.asarray(gamma, jnp.float64)
        g64 = g64 / g64.sum(-1, keepdims=True)
        a = S.optimal_score_multiclass(g64, B64)
        recovered, residual = S.loss_corrected_score_multiclass(a, B64, return_residual=True)
        np.testing.assert_allclose(recovered, g64, atol=1e-9)
        assert np.all(residual < 1e-10)
        np.testing.assert_allclose(S.optimal_score_multiclass(recovered, B64), a, atol=1e-10)


@given(gamma=interior, beta=betas)
def test_two_classes_agree_with_the_binary_rule(gamma, beta):
    # eq. b-loss-multi with rows (1 - beta, 1 - beta) and (beta, beta) is eq. b-loss-bin.
    B = np.array([[1 - beta, 1 - beta], [beta, beta]])
    with jax.enable_x64(True):
        a = S.optimal_score_multiclass(np.array([1 - gamma, gamma]), B)
        np.testing.assert_allclose(a[1], c_ref(gamma, beta), rtol=1e-10)
        np.testing.assert_allclose(a.sum(), 1.0, rtol=1e-12)
        back = S.loss_corrected_score_multiclass(a, B)
    # Scores this close to 0 and 1 carry only rounding-limited information about gamma.
    assert abs(float(back[1]) - gamma) <= round_trip_tolerance(gamma, float(a[1]))


def _one_vs_rest_reference(a, B, iters=20_000):
    """The per-output inverse in NumPy float64, written from the definition: output ``j``'s
    negatives weigh ``b_j = sum_{y != j} q_y B[y, j]`` with ``q`` the other posteriors
    normalised among themselves, and ``gamma_j = a_j b_j / (a_j b_j + (1 - a_j) B[j, j])``;
    plain fixed-point steps from the uniform posterior."""
    a, B = np.asarray(a, np.float64), np.asarray(B, np.float64)
    n = B.shape[0]
    gamma = np.full(n, 1.0 / n)
    for _ in range(iters):
        b = np.array([
            sum(gamma[y] * B[y, j] for y in range(n) if y != j)
            / sum(gamma[y] for y in range(n) if y != j)
            for j in range(n)
        ])  # fmt: skip
        gamma = a * b / (a * b + (1 - a) * np.diag(B))
    return gamma


def _per_output_rule(gamma, B):
    """Each output's binary rule (Proposition 2 at ``beta' = B[j, j] / (B[j, j] + b_j)``) at the
    ``q`` of ``gamma``, in NumPy float64: Proposition 3's rule where ``gamma`` sums to one."""
    gamma, B = np.asarray(gamma, np.float64), np.asarray(B, np.float64)
    n = B.shape[0]
    out = np.empty(n)
    for j in range(n):
        others = [y for y in range(n) if y != j]
        b = sum(gamma[y] * B[y, j] for y in others) / sum(gamma[y] for y in others)
        out[j] = gamma[j] * B[j, j] / (gamma[j] * B[j, j] + (1 - gamma[j]) * b)
    return out


def test_unit_weights_leave_every_score_as_it_is():
    # B all ones: every output's rule is the identity. A projection onto the simplex would move
    # (.95, .6, .05, .02, .01) to (.675, .325, 0, 0, 0).
    a = jnp.array([0.95, 0.6, 0.05, 0.02, 0.01])
    gamma, residual = S.loss_corrected_score_multiclass(a, jnp.ones((5, 5)), return_residual=True)
    np.testing.assert_array_equal(gamma, a)
    assert float(residual) == 0.0
    # Bit for bit over random rows with exact 0s and 1s, and for any common weight.
    rng = np.random.default_rng(0)
    rows = rng.uniform(size=(200, 7)).astype(np.float32)
    rows[:5, 0], rows[5:10, 1] = 0.0, 1.0
    for weight in (1.0, 0.1, 3.0):
        np.testing.assert_array_equal(
            S.loss_corrected_score_multiclass(rows, np.full((7, 7), weight, np.float32)), rows
        )


def test_columns_with_equal_off_diagonal_weights_invert_each_output_by_corollary_1(x64):
    # Column j: negatives weigh c_j whatever the other posteriors, so output j is the binary rule
    # at beta'_j = d_j / (d_j + c_j), inverted in closed form.
    d = np.array([1.0, 10.0, 0.3, 2.0])
    c = np.array([1.0, 1.0, 4.0, 0.5])
    B = np.tile(c, (4, 1))
    np.fill_diagonal(B, d)
    rng = np.random.default_rng(1)
    a = rng.uniform(size=(50, 4))
    gamma, residual = S.loss_corrected_score_multiclass(a, B, return_residual=True)
    expected = S.loss_corrected_score(a, d / (d + c))
    np.testing.assert_allclose(gamma, expected, rtol=1e-15, atol=0)
    assert np.all(residual < 1e-14)  # rounding
    np.testing.assert_array_equal(gamma[:, 0], a[:, 0])  # d == c: the identity, exactly
    assert np.ptp(gamma.sum(-1)) > 0.5  # not forced onto the simplex
    # B[8,8] = 10 on ten classes: class 8 at beta' = 10/11 (float32, to its rounding against the
    # float64 Corollary 1), the other nine untouched.
    B8 = np.ones((10, 10), np.float32)
    B8[8, 8] = 10.0
    a8 = rng.uniform(size=(30, 10)).astype(np.float32)
    with jax.enable_x64(False):
        gamma8 = S.loss_corrected_score_multiclass(a8, B8)
    assert gamma8.dtype == np.float32
    exact = S.loss_corrected_score(a8[:, 8].astype(np.float64), 10 / 11)
    np.testing.assert_allclose(gamma8[:, 8], exact, rtol=3e-7)
    np.testing.assert_array_equal(np.delete(gamma8, 8, axis=1), np.delete(a8, 8, axis=1))


def test_multiclass_round_trip_in_float32():
    # A posterior on the simplex is a fixed point: outputs simulated by Proposition 3's rule are
    # inverted exactly, whatever positive B couples the outputs.
    rng = np.random.default_rng(2)
    for n in (3, 5, 10):
        B = np.exp(rng.normal(size=(n, n))).astype(np.float32)
        gamma = rng.dirichlet(np.ones(n), size=200).astype(np.float32)
        a = S.optimal_score_multiclass(gamma, B)
        recovered, residual = S.loss_corrected_score_multiclass(a, B, return_residual=True)
        np.testing.assert_allclose(recovered, gamma, atol=1e-5)
        assert float(residual.max()) < 1e-5, n


def test_off_image_scores_satisfy_every_output_condition_without_summing_to_one(x64):
    # Real outputs need not lie in the image of Proposition 3's rule: two classes both scored 0.9.
    # Each output is still inverted at the weight its negatives carry given the other posteriors.
    B = jnp.array([[1.0, 2.0, 0.5], [1.5, 1.0, 1.0], [0.7, 3.0, 2.0]], jnp.float64)
    a = jnp.array([0.9, 0.9, 0.05], jnp.float64)
    gamma, residual = S.loss_corrected_score_multiclass(a, B, return_residual=True)
    assert float(residual) < 1e-12
    np.testing.assert_allclose(_per_output_rule(gamma, B), a, atol=1e-12)
    np.testing.assert_allclose(gamma, _one_vs_rest_reference(a, B), atol=1e-12)
    assert float(gamma.sum()) > 1.5  # one posterior per output: not renormalised
    # On the simplex, the per-output rule is Proposition 3's.
    g = np.array([0.5, 0.3, 0.2])
    np.testing.assert_allclose(_per_output_rule(g, B), S.optimal_score_multiclass(g, B))


def test_renormalising_is_a_separate_option_that_sums_to_one(x64):
    B = jnp.array([[1.0, 2.0, 0.5], [1.5, 1.0, 1.0], [0.7, 3.0, 2.0]], jnp.float64)
    a = jnp.array([[0.9, 0.9, 0.05], [0.2, 0.3, 0.1]], jnp.float64)
    gamma = S.loss_corrected_score_multiclass(a, B)
    renormalised, residual = S.loss_corrected_score_multiclass(
        a, B, renormalise=True, return_residual=True
    )
    np.testing.assert_allclose(renormalised.sum(-1), 1.0, rtol=1e-15)
    np.testing.assert_allclose(renormalised, gamma / gamma.sum(-1, keepdims=True), rtol=1e-15)
    # Its residual is Proposition 3's, how far the simplex posterior is from explaining a.
    expected = np.max(np.abs(S.optimal_score_multiclass(renormalised, B) - a), axis=-1)
    np.testing.assert_allclose(residual, expected, rtol=1e-12)
    assert np.all(residual > 0.05)
    assert np.isnan(S.loss_corrected_score_multiclass(jnp.zeros(3), B, renormalise=True)).all()


def test_the_multiclass_inverse_agrees_under_jit_vmap_and_grad():
    rng = np.random.default_rng(3)
    B = np.exp(rng.normal(size=(4, 4))).astype(np.float32)
    a = rng.uniform(0.01, 0.99, size=(64, 4)).astype(np.float32)
    eager, residual = S.loss_corrected_score_multiclass(a, B, return_residual=True)
    jitted = jax.jit(functools.partial(S.loss_corrected_score_multiclass, return_residual=True))
    np.testing.assert_allclose(jitted(a, B)[0], eager, atol=1e-6)
    np.testing.assert_allclose(jitted(a, B)[1], residual, atol=1e-6)
    rows = jax.vmap(S.loss_corrected_score_multiclass, in_axes=(0, None))(a, B)
    np.testing.assert_allclose(rows, eager, atol=1e-6)
    stack = np.stack([B, np.ones((4, 4), np.float32), B.T])
    per_matrix = jax.vmap(S.loss_corrected_score_multiclass, in_axes=(None, 0))(a, stack)
    np.testing.assert_allclose(per_matrix[0], eager, atol=1e-6)
    np.testing.assert_array_equal(per_matrix[1], a)
    np.testing.assert_allclose(per_matrix[2], S.loss_corrected_score_multiclass(a, B.T), atol=1e-6)
    # Derivatives by the implicit function theorem at the fixed point, against central
    # differences in float64.
    with jax.enable_x64(True):
        B64, a64 = jnp.asarray(B, jnp.float64), jnp.asarray(a[0], jnp.float64)
        w = jnp.array([1.0, -2.0, 0.5, 3.0])

        def f(x, M):
            return jnp.dot(w, S.loss_corrected_score_multiclass(x, M))

        grad_a, grad_B = jax.grad(f, argnums=(0, 1))(a64, B64)
        h = 1e-6
        for i in range(4):
            e = jnp.zeros(4).at[i].set(h)
            assert float(grad_a[i]) == pytest.approx(
                float(f(a64 + e, B64) - f(a64 - e, B64)) / (2 * h), rel=1e-6
            )
        E = jnp.zeros((4, 4)).at[2, 1].set(h)
        assert float(grad_B[2, 1]) == pytest.approx(
            float(f(a64, B64 + E) - f(a64, B64 - E)) / (2 * h), rel=1e-6
        )


def test_bad_multiclass_scores_raise_and_are_nan_under_jit():
    B = np.ones((3, 3))
    with pytest.raises(ValueError, match=r"a must lie in \[0, 1\]"):
        S.loss_corrected_score_multiclass(np.array([0.2, 1.5, 0.3]), B)
    with pytest.raises(ValueError, match="a must have the 3 classes of B"):
        S.loss_corrected_score_multiclass(np.array([0.2, 0.5]), B)
    with pytest.raises(ValueError, match="num_iters must be an integer >= 1"):
        S.loss_corrected_score_multiclass(np.array([0.2, 0.5, 0.3]), B, num_iters=0)
    with pytest.raises(ValueError, match="tol must be a finite number > 0"):
        S.loss_corrected_score_multiclass(np.array([0.2, 0.5, 0.3]), B, tol=-1.0)
    B = np.array([[1.0, 2.0, 0.5], [1.5, 1.0, 1.0], [0.7, 3.0, 2.0]], np.float32)
    a = np.array([[0.2, 0.5, 0.3], [0.2, np.nan, 0.3], [0.2, 1.5, 0.3]], np.float32)
    out, residual = jax.jit(
        functools.partial(S.loss_corrected_score_multiclass, return_residual=True)
    )(a, B)
    assert np.isfinite(out[0]).all() and np.isfinite(residual[0])
    assert np.isnan(out[1:]).all() and np.isnan(residual[1:]).all()
    assert np.isnan(jax.jit(S.loss_corrected_score_multiclass)(a[0], -B)).all()


@pytest.mark.parametrize("n", [2, 3, 26, generic._PAIRWISE_PROJECTION_MAX + 1])
def test_simplex_projection_is_the_nearest_point_of_the_simplex(n, x64):
    """Both ways of projecting (all pairs of entries up to 64 classes, a sort above) against the
    optimality conditions of the projection: ``x = max(v - theta, 0)`` on the simplex, which
    holds for one ``theta`` only; with ties, large and tiny entries."""
    rng = np.random.default_rng(n)
    v = rng.normal(size=(200, n)) * rng.choice([1e-3, 1.0, 30.0], size=(200, 1))
    v[:20, 1] = v[:20, 0]  # ties
    v[20:30] = 0.25  # a whole row of ties
    x = np.asarray(generic._project_to_simplex(jnp.asarray(v)))
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-12)
    assert np.all(x >= 0)
    # KKT: on the support x = v - theta, off it v <= theta, with one theta per row
    support = x > 0
    theta = np.where(support, v - x, np.nan)
    theta_row = np.nanmean(theta, axis=-1, keepdims=True)
    np.testing.assert_allclose(
        np.where(support, theta, theta_row), np.broadcast_to(theta_row, v.shape), atol=1e-12
    )
    assert np.all(np.where(support, True, v <= theta_row + 1e-12))
    # and nearer to v than random points of the simplex
    other = rng.dirichlet(np.ones(n), size=200)
    assert np.all(np.sum((x - v) ** 2, -1) <= np.sum((other - v) ** 2, -1) + 1e-12)


# ----------------------------------------------------------------------------------------------
# Generic rules by automatic differentiation
# ----------------------------------------------------------------------------------------------


def user_loss():
    """A strictly proper loss of the researcher's own, from its weight function."""
    return L.proper_loss(lambda t: 1.0 / jnp.sqrt(t * (1.0 - t)))


def brute_force_minimiser(loss, gamma, *params, n=50_001):
    grid = jnp.asarray(np.linspace(1e-6, 1 - 1e-6, n), jnp.float64)
    expected = gamma * loss(grid, 1.0, *params) + (1 - gamma) * loss(grid, 0.0, *params)
    return float(grid[jnp.argmin(expected)])


@pytest.mark.parametrize(
    ("name", "loss", "params", "closed_form"),
    [
        ("log", L.beta_weighted_loss, (0.9,), lambda g: c_ref(g, 0.9)),
        (
            "squared",
            lambda a, y, b: L.beta_weighted_loss(a, y, b, L.squared_loss),
            (0.2,),
            lambda g: c_ref(g, 0.2),
        ),
        (
            "user_weight",
            lambda a, y, b: L.beta_weighted_loss(a, y, b, user_loss()),
            (0.97,),
            lambda g: c_ref(g, 0.97),
        ),
        ("focal", L.focal_loss, (2.0, 0.5), None),
    ],
)
def test_brute_force_minimiser_matches_the_rule(x64, name, loss, params, closed_form):
    gammas = [0.02, 0.3, 0.5, 0.85]
    rule = S.optimal_score_for_loss(loss, jnp.asarray(gammas, jnp.float64), *params)
    for gamma, a in zip(gammas, np.asarray(rule), strict=True):
        assert a == pytest.approx(brute_force_minimiser(loss, gamma, *params), abs=3e-5)
        if closed_form is not None:
            assert a == pytest.approx(closed_form(gamma), rel=1e-9)


def test_generic_rule_in_float32_reaches_extreme_scores():
    gamma = jnp.array([0.0, 1e-7, 1e-4, 0.5, 1 - 1e-4, 1.0], jnp.float32)
    a = S.optimal_score_for_loss(L.beta_weighted_loss, gamma, 0.99)
    ref = [c_ref(g, np.float32(0.99)) for g in np.asarray(gamma)]
    np.testing.assert_allclose(a, ref, rtol=1e-5)


def test_generic_inverse_matches_closed_form_and_undoes_the_rule():
    a = jnp.linspace(0.001, 0.999, 50)
    for beta in (0.1, 0.9, 0.999):
        gamma = S.loss_corrected_score_for_loss(L.beta_weighted_loss, a, beta)
        np.testing.assert_allclose(gamma, S.loss_corrected_score(a, beta), rtol=5e-5)
    focal = functools.partial(L.focal_loss, gamma=3.0, alpha=0.25)
    gam = jnp.linspace(0.01, 0.99, 25)
    scores = S.optimal_score_for_loss(focal, gam)
    np.testing.assert_allclose(S.loss_corrected_score_for_loss(focal, scores), gam, atol=2e-5)


def test_generic_inverse_at_scores_of_exactly_zero_and_one():
    gamma = S.loss_corrected_score_for_loss(L.beta_weighted_loss, jnp.array([0.0, 1.0]), 0.9)
    np.testing.assert_array_equal(gamma, [0.0, 1.0])


def test_gradient_of_generic_rule_uses_implicit_function_theorem():
    gamma = jnp.array([0.1, 0.5, 0.8])

    def total(g, b):
        return S.optimal_score_for_loss(L.beta_weighted_loss, g, b).sum()

    grads = jax.grad(total, argnums=(0, 1))(gamma, 0.9)
    ref = jax.grad(lambda g, b: S.optimal_score(g, b).sum(), argnums=(0, 1))(gamma, 0.9)
    np.testing.assert_allclose(grads[0], ref[0], rtol=1e-4)
    np.testing.assert_allclose(grads[1], ref[1], rtol=1e-4)


def test_generic_rule_vmaps_over_a_grid_of_weights():
    grid = jnp.array([0.3, 0.6, 0.95])
    gamma = jnp.array([0.05, 0.5, 0.9])
    out = jax.vmap(lambda b: S.optimal_score_for_loss(L.beta_weighted_loss, gamma, b))(grid)
    np.testing.assert_allclose(out, S.optimal_score(gamma[None, :], grid[:, None]), rtol=1e-5)
    broadcast = S.optimal_score_for_loss(L.beta_weighted_loss, gamma[None, :], grid[:, None])
    np.testing.assert_allclose(broadcast, out, rtol=1e-6)


def test_non_invertible_rules_are_detected():
    # Negative squared loss has its expected loss maximised where the FOC holds; absolute loss
    # makes every score optimal at gamma = 1/2. Neither rule can be inverted.
    for loss in (lambda a, y: -L.squared_loss(a, y), lambda a, y: jnp.abs(a - y)):
        report = S.check_invertibility(loss)
        assert not bool(report.invertible)
        assert np.all(np.isnan(S.loss_corrected_score_for_loss(loss, jnp.array([0.3, 0.6]))))
    for loss, params in ((L.log_loss, ()), (L.focal_loss, (2.0,)), (L.focal_loss, (5.0, 0.9))):
        assert bool(S.check_invertibility(loss, *params).invertible)


def test_generic_multiclass_rules_match_closed_forms():
    gamma = random_simplex(jax.random.PRNGKey(7), 4, 8)
    w = jnp.array([1.0, 5.0, 2.0, 0.3])
    a = S.optimal_score_multiclass_for_loss(L.class_weighted_cross_entropy, gamma, w)
    exact = S.optimal_score_class_weighted(gamma, w)
    np.testing.assert_allclose(a, exact, atol=5e-5)
    # the generic inverse of the exact scores (the inverse scales an error in the scores by up
    # to max(w) / min(w), so the generic scores' 5e-5 would blur it)
    back = S.loss_corrected_score_multiclass_for_loss(L.class_weighted_cross_entropy, exact, w)
    np.testing.assert_allclose(back, gamma, atol=1e-5)
    B = jnp.exp(jax.random.normal(jax.random.PRNGKey(8), (4, 4)))
    a_box = S.optimal_score_multiclass_for_loss(L.matrix_weighted_loss, gamma, B, domain="box")
    np.testing.assert_allclose(a_box, S.optimal_score_multiclass(gamma, B), atol=5e-5)
    back_box, residual = S.loss_corrected_score_multiclass_for_loss(
        L.matrix_weighted_loss, a_box, B, domain="box", return_residual=True
    )
    np.testing.assert_allclose(back_box, gamma, atol=1e-4)
    assert np.all(residual < 1e-3)


def test_focal_multiclass_correction_round_trips():
    gamma = random_simplex(jax.random.PRNGKey(9), 3, 6)
    focal = functools.partial(L.focal_loss_multiclass, gamma=2.0)
    a = S.optimal_score_multiclass_for_loss(focal, gamma)
    # Focal loss is not proper: its optimal scores are less confident than the posterior.
    top = jnp.argmax(gamma, axis=-1)
    assert np.all(
        jnp.take_along_axis(a, top[:, None], -1) < jnp.take_along_axis(gamma, top[:, None], -1)
    )
    np.testing.assert_allclose(
        S.loss_corrected_score_multiclass_for_loss(focal, a), gamma, atol=2e-4
    )


# ----------------------------------------------------------------------------------------------
# First-order conditions by automatic differentiation
# ----------------------------------------------------------------------------------------------

BINARY_GAMMAS = jnp.asarray(np.linspace(0.01, 0.99, 33), jnp.float32)


@pytest.mark.parametrize(
    ("loss", "rule", "weights"),
    [
        (L.log_loss, lambda g: g, None),
        (L.squared_loss, lambda g: g, None),
        (user_loss(), lambda g: g, None),
        (L.beta_weighted_loss, S.optimal_score, 0.9),
        (lambda a, y, b: L.beta_weighted_loss(a, y, b, L.squared_loss), S.optimal_score, 0.02),
        (
            lambda a, y, b: L.beta_weighted_loss(a, y, b, user_loss()),
            S.optimal_score,
            0.7,
        ),
        (L.focal_loss, lambda g, f: S.optimal_score_for_loss(L.focal_loss, g, f), 2.0),
    ],
    ids=["log", "squared", "user_weight", "beta_log", "beta_squared", "beta_user", "focal"],
)
def test_foc_check_passes_for_every_builtin_binary_loss(loss, rule, weights):
    report = S.check_first_order_conditions(loss, rule, BINARY_GAMMAS, weights)
    assert float(report.residual) < 1e-4
    assert float(report.min_curvature) > 0
    assert report.passed()


def test_foc_check_passes_for_multiclass_losses():
    gamma = random_simplex(jax.random.PRNGKey(11), 3, 12)
    B = jnp.array([[1.0, 2.0, 0.5], [1.5, 1.0, 1.0], [0.7, 3.0, 2.0]])
    w = jnp.array([1.0, 4.0, 0.25])
    focal = functools.partial(L.focal_loss_multiclass, gamma=2.0)
    cases = [
        (L.matrix_weighted_loss, S.optimal_score_multiclass, B, "box"),
        (L.class_weighted_cross_entropy, S.optimal_score_class_weighted, w, "simplex"),
        (focal, lambda g: S.optimal_score_multiclass_for_loss(focal, g), None, "simplex"),
    ]
    for loss, rule, weights, domain in cases:
        report = S.check_first_order_conditions(loss, rule, gamma, weights, domain=domain)
        assert float(report.residual) < 1e-3, (domain, report.residual)
        assert float(report.min_curvature) > 0


def test_foc_check_flags_a_wrong_rule():
    # Reporting the posterior itself is not optimal under a weighted loss.
    report = S.check_first_order_conditions(
        L.beta_weighted_loss, lambda g, b: g, BINARY_GAMMAS, 0.9
    )
    assert float(report.residual) > 0.5
    assert not report.passed()
    B = jnp.array([[1.0, 2.0], [3.0, 1.0]])
    gamma = random_simplex(jax.random.PRNGKey(12), 2, 5)
    report = S.check_first_order_conditions(
        L.matrix_weighted_loss, lambda g, B: g, gamma, B, domain="box"
    )
    assert float(report.residual) > 0.1
    # A rule at a maximum: stationary, but the curvature check fails.
    neg = S.check_first_order_conditions(
        lambda a, y: -L.squared_loss(a, y), lambda g: g, BINARY_GAMMAS
    )
    assert float(neg.residual) < 1e-6
    assert float(neg.min_curvature) < 0 and not neg.passed()


def test_foc_check_rejects_boundary_posteriors():
    with pytest.raises(ValueError, match="posteriors"):
        S.check_first_order_conditions(L.log_loss, lambda g: g, jnp.array([0.0, 0.5]))


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


def test_generic_rule_finds_the_global_minimum_among_several():
    # Root loss sqrt|a - y| makes the expected loss concave: its minimum is at a boundary, 1 for
    # gamma > 1/2 and 0 below, with a local minimum at the other end.
    def root(a, y):
        return jnp.sqrt(jnp.abs(a - y))

    a = S.optimal_score_for_loss(root, jnp.array([0.2, 0.45, 0.55, 0.9]))
    np.testing.assert_allclose(a, [0.0, 0.0, 1.0, 1.0], atol=1e-6)

    # A double well in the logit, tilted by gamma:
    # E(z) = (z^2 - 4)^2 / 10 + 0.3 z (gamma - 1/2), whose global minimum is near z = -2 for
    # gamma > 1/2, with a local one near z = +2.
    def wells(a, y):
        z = jnp.log(a) - jnp.log1p(-a)
        return (z * z - 4.0) ** 2 / 10.0 + (y - 0.5) * 0.3 * z

    gamma = 0.7
    z = np.linspace(-8, 8, 160_001)
    expected = (z * z - 4.0) ** 2 / 10.0 + 0.3 * z * (gamma - 0.5)
    best = 1 / (1 + np.exp(-z[np.argmin(expected)]))
    assert best < 0.5
    ours = S.optimal_score_for_loss(wells, jnp.array([gamma]))
    np.testing.assert_allclose(ours, [best], atol=1e-4)


def _neg_spherical(a, y, beta):
    """The beta-weighted spherical scoring rule as a loss: its expected loss is flat to float32
    precision near the minimum (within 1e-8 of -1 at beta = 0.99)."""
    a = jnp.asarray(a)
    norm = jnp.sqrt(a**2 + (1 - a) ** 2)
    return jnp.where(y == 1, -beta * a / norm, -(1 - beta) * (1 - a) / norm)


def test_generic_rule_finds_minima_of_nearly_flat_expected_losses():
    # The spherical rule is proper, so at beta its optimal score is the beta-tilted posterior
    # (Proposition 2's closed form); the loss values alone cannot tell 0.99987 from 0.9999969.
    gamma = jnp.array([0.2, 0.5, 0.9, 0.99969, 0.999999])
    a = S.optimal_score_for_loss(_neg_spherical, gamma, 0.99)
    np.testing.assert_allclose(a, S.optimal_score(gamma, 0.99), rtol=2e-6)
    report = S.check_invertibility(_neg_spherical, 0.99)
    assert bool(report.invertible) and bool(jnp.all(report.round_trip))


def test_invertibility_fails_when_the_round_trip_misses(monkeypatch):
    # A solver that lands 0.01 in the logit beside the minimum: the inverse is still fine
    # pointwise and increasing, so only the round trip can catch it.
    exact = checks.solve_binary_rule_jit

    def off(loss, gamma, params):
        a = exact(loss, gamma, params)
        return jax.nn.sigmoid(jnp.log(a) - jnp.log1p(-a) + 0.01)

    assert bool(S.check_invertibility(L.log_loss).invertible)
    monkeypatch.setattr(checks, "solve_binary_rule_jit", off)
    report = S.check_invertibility(L.log_loss)
    assert bool(report.increasing) and bool(jnp.all(report.pointwise))
    assert not bool(report.invertible)
    # all but where float32 posteriors near 1 stand for a range of scores wider than 0.01
    assert float(jnp.mean(report.round_trip)) < 0.1
