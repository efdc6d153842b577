"""Tests of iml.scoring.multiclass: the multiclass closed forms, Proposition 3 and its per-output
inverse, and the class-weighted softmax."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _scoring_references import c_ref, random_simplex, round_trip_tolerance
from hypothesis import given, settings
from hypothesis import strategies as st

from iml import calibration as cal
from iml import scoring as S

interior = st.floats(1e-6, 1 - 1e-6, allow_nan=False, width=64)
betas = st.floats(1e-6, 1 - 1e-6, allow_nan=False, width=64)


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


@pytest.mark.slow
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


@pytest.mark.slow
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
    chex.assert_type(gamma8, np.float32)
    exact = S.loss_corrected_score(a8[:, 8].astype(np.float64), 10 / 11)
    np.testing.assert_allclose(gamma8[:, 8], exact, rtol=3e-7)
    np.testing.assert_array_equal(np.delete(gamma8, 8, axis=1), np.delete(a8, 8, axis=1))


@pytest.mark.slow
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


class MulticlassInverse(chex.TestCase):
    """Proposition 3's rule and its per-output inverse on small arrays, jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    @pytest.mark.slow
    def test_weights_depending_only_on_true_class_give_proportional_correction(self):
        # B[y, y'] = w_y: c_y(gamma) = gamma_y w_y / sum gamma w, so gamma_y ∝ a_y / w_y.
        optimal = self.variant(S.optimal_score_multiclass)
        inverse = self.variant(S.loss_corrected_score_multiclass)
        class_weighted = self.variant(S.loss_corrected_score_class_weighted)
        w = jnp.array([1.0, 4.0, 0.5, 2.0])
        B = jnp.tile(w[:, None], (1, 4))
        gamma = random_simplex(jax.random.PRNGKey(1), 4, 16)
        a = optimal(gamma, B)
        np.testing.assert_allclose(a.sum(-1), 1.0, rtol=1e-5)
        expected = (a / w) / jnp.sum(a / w, axis=-1, keepdims=True)
        np.testing.assert_allclose(inverse(a, B), expected, atol=2e-6)
        np.testing.assert_allclose(class_weighted(a, w), expected, atol=2e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_unit_weights_leave_every_score_as_it_is(self):
        # B all ones: every output's rule is the identity. A projection onto the simplex would
        # move (.95, .6, .05, .02, .01) to (.675, .325, 0, 0, 0).
        inverse = self.variant(S.loss_corrected_score_multiclass)
        with_residual = self.variant(
            functools.partial(S.loss_corrected_score_multiclass, return_residual=True)
        )
        a = jnp.array([0.95, 0.6, 0.05, 0.02, 0.01])
        gamma, residual = with_residual(a, jnp.ones((5, 5)))
        np.testing.assert_array_equal(gamma, a)
        assert float(residual) == 0.0
        # Bit for bit over random rows with exact 0s and 1s, and for any common weight.
        rng = np.random.default_rng(0)
        rows = rng.uniform(size=(200, 7)).astype(np.float32)
        rows[:5, 0], rows[5:10, 1] = 0.0, 1.0
        for weight in (1.0, 0.1, 3.0):
            np.testing.assert_array_equal(inverse(rows, np.full((7, 7), weight, np.float32)), rows)

    @chex.variants(with_jit=True, without_jit=True)
    @pytest.mark.slow
    def test_off_image_scores_satisfy_every_output_condition_without_summing_to_one(self):
        # Real outputs need not lie in the image of Proposition 3's rule: two classes both scored
        # 0.9. Each output is still inverted at the weight its negatives carry given the other
        # posteriors.
        with jax.enable_x64(True):
            with_residual = self.variant(
                functools.partial(S.loss_corrected_score_multiclass, return_residual=True)
            )
            B = jnp.array([[1.0, 2.0, 0.5], [1.5, 1.0, 1.0], [0.7, 3.0, 2.0]], jnp.float64)
            a = jnp.array([0.9, 0.9, 0.05], jnp.float64)
            gamma, residual = with_residual(a, B)
            assert float(residual) < 1e-12
            np.testing.assert_allclose(_per_output_rule(gamma, B), a, atol=1e-12)
            np.testing.assert_allclose(gamma, _one_vs_rest_reference(a, B), atol=1e-12)
            assert float(gamma.sum()) > 1.5  # one posterior per output: not renormalised
            # On the simplex, the per-output rule is Proposition 3's.
            g = np.array([0.5, 0.3, 0.2])
            np.testing.assert_allclose(
                _per_output_rule(g, B), self.variant(S.optimal_score_multiclass)(g, B)
            )

    @chex.variants(with_jit=True, without_jit=True)
    @pytest.mark.slow
    def test_renormalising_is_a_separate_option_that_sums_to_one(self):
        with jax.enable_x64(True):
            inverse = self.variant(S.loss_corrected_score_multiclass)
            renormalising = self.variant(
                functools.partial(
                    S.loss_corrected_score_multiclass, renormalise=True, return_residual=True
                )
            )
            B = jnp.array([[1.0, 2.0, 0.5], [1.5, 1.0, 1.0], [0.7, 3.0, 2.0]], jnp.float64)
            a = jnp.array([[0.9, 0.9, 0.05], [0.2, 0.3, 0.1]], jnp.float64)
            gamma = inverse(a, B)
            renormalised, residual = renormalising(a, B)
            np.testing.assert_allclose(renormalised.sum(-1), 1.0, rtol=1e-15)
            np.testing.assert_allclose(
                renormalised, gamma / gamma.sum(-1, keepdims=True), rtol=1e-15
            )
            # Its residual is Proposition 3's, how far the simplex posterior is from explaining a.
            expected = np.max(np.abs(S.optimal_score_multiclass(renormalised, B) - a), axis=-1)
            np.testing.assert_allclose(residual, expected, rtol=1e-12)
            assert np.all(residual > 0.05)
            assert np.isnan(renormalising(jnp.zeros(3), B)[0]).all()


@pytest.mark.slow
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


@pytest.mark.slow
def test_one_vs_rest_logistic_regressions_on_digits_are_corrected_output_by_output():
    # The B-weighted one-vs-rest model fitted by scikit-learn: output c is a logistic regression
    # of 1{y = c} with positives weighted B[c, c] and negatives B[y, c] (here 1), out of fold.
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    from iml import loss_corrected_score_multiclass

    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(x, y))

    def output(c, positive_weight):
        scores = np.empty(len(y))
        for train, test in folds:
            model = LogisticRegression(class_weight={0: 1.0, 1: positive_weight}, max_iter=500)
            model.fit(x[train], y[train] == c)
            scores[test] = model.predict_proba(x[test])[:, 1]
        return scores

    unweighted = np.stack([output(c, 1.0) for c in range(10)], axis=-1).astype(np.float32)
    weighted = unweighted.copy()  # B[8,8] = 10 changes output 8 alone
    weighted[:, 8] = output(8, 10.0)
    ones = np.ones((10, 10), np.float32)
    B = ones.copy()
    B[8, 8] = 10.0
    np.testing.assert_array_equal(loss_corrected_score_multiclass(unweighted, ones), unweighted)
    corrected = np.asarray(loss_corrected_score_multiclass(weighted, B))

    def ece_of_8(scores):
        return float(cal.expected_calibration_error(scores[:, 8], (y == 8).astype(np.int32)))

    # About 0.079 raw and 0.009 corrected, against 0.019 for the unweighted output.
    raw, fixed, reference = ece_of_8(weighted), ece_of_8(corrected), ece_of_8(unweighted)
    assert fixed < raw / 2 and fixed < 2 * reference
    assert weighted[:, 8].mean() > (y == 8).mean() + 0.05  # the weight inflates class 8
    np.testing.assert_array_equal(np.delete(corrected, 8, 1), np.delete(weighted, 8, 1))
