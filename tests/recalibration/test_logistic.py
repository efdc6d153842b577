"""Tests of iml.recalibration.logistic: Platt scaling, beta calibration and temperature scaling,
against scikit-learn's and scipy's fits."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _training_helpers import RUNS_LONG
from scipy.optimize import minimize, minimize_scalar
from scipy.special import log_softmax
from sklearn.linear_model import LogisticRegression

import iml
from iml.recalibration import (
    BetaCalibration,
    BetaCalibrationParams,
    TemperatureScaling,
    beta_calibration_fit,
    beta_calibration_transform,
    platt_fit,
    platt_transform,
    temperature_fit,
    temperature_transform,
)
from iml.recalibration.logistic import GRADIENT_TOL

# ---------------------------------------------------------------------------------------------
# Platt scaling
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("weighted", [False, True])
def test_platt_matches_sklearn_logistic_regression_on_logits(binary_data, weighted):
    s, y, w = binary_data
    w = w if weighted else None
    params = platt_fit(s, y, w)
    features = np.log(s / (1.0 - s))[:, None]
    lr = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(features, y, sample_weight=w)
    np.testing.assert_allclose(float(params.slope), lr.coef_[0, 0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(float(params.intercept), lr.intercept_[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(
        platt_transform(params, s), lr.predict_proba(features)[:, 1], atol=1e-4
    )


@pytest.mark.parametrize("features", ["platt", "beta"])
def test_newton_stops_at_the_gradient_floor_where_all_50_steps_give_the_same_map(
    binary_data, features
):
    """Platt's and beta calibration's Newton fits stop at GRADIENT_TOL of the total weight: a
    handful of steps, where running all 50 (tol 0: full steps that only round keep being taken)
    gives the same coefficients to float32 round-off."""
    from iml.recalibration.logistic import GRADIENT_TOL, _beta_features
    from iml.recalibration.newton import logistic_newton

    s, y, w = binary_data
    s, y, w = (jnp.asarray(a, jnp.float32) for a in (s, y, w))
    if features == "platt":
        X, start = jnp.stack([jnp.log(s / (1 - s)), jnp.ones_like(s)], 1), jnp.array([1.0, 0.0])
    else:
        X, start = jnp.stack([*_beta_features(s), jnp.ones_like(s)], 1), jnp.array([1.0, 1.0, 0.0])
    stopped = logistic_newton(X, y, w, start, max_iter=50, tol=GRADIENT_TOL * jnp.sum(w))
    every = logistic_newton(X, y, w, start, max_iter=50)
    assert int(stopped.iterations) <= 10 and int(every.iterations) == 50
    np.testing.assert_allclose(stopped.theta, every.theta, rtol=1e-5, atol=1e-6)


def test_platt_is_jittable_and_smoothed_targets_survive_one_class_data():
    s = jnp.linspace(0.01, 0.5, 30)
    y = jnp.zeros(30, jnp.int32)
    params = jax.jit(lambda a, b: platt_fit(a, b, smooth_targets=True))(s, y)
    p = platt_transform(params, s)
    assert np.all(np.isfinite(p))
    # With no positive, Platt's targets are 1/(N- + 2) for every observation: the fit's mean.
    np.testing.assert_allclose(float(jnp.mean(p)), 1.0 / 32.0, rtol=1e-3)


_S = np.array([0.1, 0.4, 0.8])
_Y = np.array([0, 1, 1])


# ---------------------------------------------------------------------------------------------
# Beta calibration
# ---------------------------------------------------------------------------------------------


def _beta_design(s, columns=(0, 1)):
    """Float64 ``[ln s, -ln(1 - s)]`` (the chosen columns) and an intercept column."""
    s = np.asarray(s, np.float64)
    features = np.stack([np.log(s), -np.log1p(-s)], axis=1)[:, list(columns)]
    return np.concatenate([features, np.ones((s.size, 1))], axis=1)


def _logistic_mle(X, y, w=None):
    """The weighted logistic-regression MLE by scipy's trust-region Newton, in float64."""
    w = np.ones(len(y)) if w is None else np.asarray(w, np.float64)
    y = np.asarray(y, np.float64)

    def nll(theta):
        z = X @ theta
        return np.sum(w * (np.logaddexp(0.0, z) - y * z))

    def grad(theta):
        return X.T @ (w * (1.0 / (1.0 + np.exp(-(X @ theta))) - y))

    def hess(theta):
        p = 1.0 / (1.0 + np.exp(-(X @ theta)))
        return (X * (w * p * (1.0 - p))[:, None]).T @ X

    start = np.zeros(X.shape[1])
    result = minimize(nll, start, jac=grad, hess=hess, method="trust-exact", options={"gtol": 1e-7})
    # Converged (up to float64 rounding of the sums, which trust-exact can flag as failure):
    # the parameter error is at most |gradient| / (smallest curvature, here above 10).
    assert np.abs(grad(result.x)).max() < 1e-4, result.message
    return result.x


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.mark.parametrize("weighted", [False, True])
def test_beta_calibration_matches_scipy_logistic_fit_on_log_features(binary_data, weighted):
    s, y, w = binary_data
    w = w if weighted else None
    params = beta_calibration_fit(s.astype(np.float32), y, w)
    X = _beta_design(s.astype(np.float32))
    expected = _logistic_mle(X, y, w)
    assert expected[0] > 0 and expected[1] > 0  # the unconstrained optimum is admissible
    np.testing.assert_allclose([params.a, params.b, params.c], expected, atol=1e-3)
    np.testing.assert_allclose(
        beta_calibration_transform(params, s.astype(np.float32)), _sigmoid(X @ expected), atol=1e-5
    )
    # The class is a thin layer over the pure functions.
    out = BetaCalibration().fit(s, y, w).transform(s)
    np.testing.assert_allclose(out, beta_calibration_transform(params, s), atol=1e-7)


def test_beta_calibration_special_case_is_the_loss_correction():
    # logit (c^beta)^{-1}(s) = logit s - logit beta: a = b = 1, c = -logit(beta).
    s = np.linspace(1e-4, 1 - 1e-4, 501).astype(np.float32)
    for beta in (0.1, 0.5, 0.9, 0.99):
        params = BetaCalibrationParams(a=1.0, b=1.0, c=-np.log(beta / (1 - beta)))
        np.testing.assert_allclose(
            beta_calibration_transform(params, s),
            iml.loss_corrected_score(s, beta),
            rtol=2e-6,
            atol=1e-7,
        )


@pytest.mark.slow
@pytest.mark.parametrize("beta", [0.9, 0.99])
def test_beta_calibration_recovers_the_loss_correction_on_the_papers_model(beta):
    # Posteriors gamma (logit-normal), labels y ~ Bernoulli(gamma), and the scores of a
    # loss-calibrated algorithm trained with weight beta, s = c^beta(gamma) (Proposition 2).
    # The true beta-calibration map is then a = b = 1, c = -logit(beta) (Corollary 1).
    rng = np.random.default_rng(11)
    n = 200_000
    gamma = _sigmoid(rng.normal(-3.0, 2.0, size=n))  # a 13% class
    y = (rng.uniform(size=n) < gamma).astype(np.int32)
    s = np.asarray(iml.optimal_score(gamma.astype(np.float32), beta))
    params = jax.jit(beta_calibration_fit, compiler_options=RUNS_LONG)(s, y)
    truth = np.array([1.0, 1.0, -np.log(beta / (1 - beta))])
    # Tolerance: the MLE's standard errors from the Fisher information at the truth,
    # sqrt(diag((X' diag(gamma (1 - gamma)) X)^-1)), which shrink as 1/sqrt(n): at n = 200,000
    # about 0.01-0.03, and 0.07 for a at beta = 0.99, where few scores lie far below 1 to pin
    # the ln s term down. Five of them bound each estimation error (a Gaussian tail of 6e-7).
    X = _beta_design(s)
    fisher = (X * (gamma * (1 - gamma))[:, None]).T @ X
    se = np.sqrt(np.diag(np.linalg.inv(fisher)))
    assert se.max() < 0.1
    estimate = np.array([params.a, params.b, params.c], np.float64)
    assert np.all(np.abs(estimate - truth) <= 5 * se), (estimate, truth, se)
    # The fitted map then agrees with the loss correction wherever the scores lie: its logit
    # differs by at most 5 (se_a |ln s| + se_b |ln(1 - s)| + se_c), the probability by a quarter
    # of that (the sigmoid's slope is at most 1/4).
    q = np.asarray(beta_calibration_transform(params, s), np.float64)
    corrected = np.asarray(iml.loss_corrected_score(s, beta), np.float64)
    bound = 0.25 * 5 * (np.abs(X[:, :2]) @ se[:2] + se[2]) + 1e-6
    assert np.all(np.abs(q - corrected) <= bound)
    assert np.mean(np.abs(q - corrected)) < 0.005


def _beta_map_data(a, b, c, n=5000, seed=3):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.01, 0.99, size=n).astype(np.float32)
    X = _beta_design(s)
    y = (rng.uniform(size=n) < _sigmoid(X @ np.array([a, b, c]))).astype(np.int32)
    return s, y, X


@pytest.mark.parametrize(
    ("truth", "dropped"),
    [((-0.7, 2.0, 0.0), 0), ((2.0, -0.7, 0.0), 1)],
    ids=["a_negative", "b_negative"],
)
def test_beta_calibration_refits_without_the_feature_whose_coefficient_is_negative(truth, dropped):
    s, y, X = _beta_map_data(*truth)
    unconstrained = _logistic_mle(X, y)
    assert unconstrained[dropped] < 0  # the premise: the plain fit leaves the admissible set
    kept = 1 - dropped
    refit = _logistic_mle(X[:, [kept, 2]], y)
    assert refit[0] > 0
    params = jax.jit(beta_calibration_fit)(s, y)
    got = np.array([params.a, params.b, params.c])
    assert got[dropped] == 0.0
    np.testing.assert_allclose(got[[kept, 2]], refit, atol=1e-3)
    # Eager and jitted fits select the same model; the map is non-decreasing.
    eager = beta_calibration_fit(s, y)
    np.testing.assert_allclose([eager.a, eager.b, eager.c], got, atol=1e-6)
    q = beta_calibration_transform(params, np.linspace(0.001, 0.999, 999))
    assert np.all(np.diff(np.asarray(q)) >= 0)


def test_beta_calibration_of_backward_scores_is_the_constant_positive_rate():
    # Labels more likely at low scores: every fit has a negative coefficient, so a = b = 0 and
    # the map is the logit of the weighted positive rate.
    s, y, _ = _beta_map_data(-1.0, -1.0, 0.0)
    w = np.random.default_rng(4).uniform(0.5, 2.0, size=s.size)
    params = beta_calibration_fit(s, y, w)
    assert float(params.a) == 0.0 and float(params.b) == 0.0
    rate = np.sum(w * y) / np.sum(w)
    # Newton stops once the mean gradient, rate - q, is within GRADIENT_TOL: c within
    # GRADIENT_TOL / (q (1 - q)) of the logit, and a tenth more for the float32 rounding of the
    # gradient it stops on.
    bound = 1.1 * GRADIENT_TOL / (rate * (1 - rate))
    np.testing.assert_allclose(float(params.c), np.log(rate / (1 - rate)), rtol=0, atol=bound)
    np.testing.assert_allclose(beta_calibration_transform(params, s), rate, rtol=1e-5)


def test_beta_calibration_jits_and_vmaps_over_replicates(binary_data):
    s, y, w = binary_data
    # Replicates that select different models: the admissible fit, a = 0, b = 0 and a = b = 0.
    replicates = [(s, y)] + [
        _beta_map_data(*truth, n=s.size, seed=5)[:2]
        for truth in ((-0.7, 2.0, 0.0), (2.0, -0.7, 0.0), (-1.0, -1.0, 0.0))
    ]
    S = np.stack([r[0] for r in replicates]).astype(np.float32)
    Y = np.stack([r[1] for r in replicates])
    W = np.stack([w] * len(replicates))
    fit = jax.jit(jax.vmap(beta_calibration_fit))
    batched = fit(S, Y, W)
    chex.assert_shape(batched.a, (len(replicates),))
    for i in range(len(replicates)):
        alone = beta_calibration_fit(S[i], Y[i], W[i])
        np.testing.assert_allclose(
            [batched.a[i], batched.b[i], batched.c[i]], [alone.a, alone.b, alone.c], atol=1e-5
        )
    assert float(batched.a[1]) == 0.0 and float(batched.b[2]) == 0.0
    assert float(batched.a[3]) == 0.0 and float(batched.b[3]) == 0.0
    q = jax.vmap(beta_calibration_transform)(batched, S)
    chex.assert_equal_shape([q, S])
    assert np.all(np.isfinite(q))


@pytest.mark.parametrize(
    ("scores", "labels", "weights", "kwargs", "message"),
    [
        (_S, np.array([0, 2, 1]), None, {}, "labels"),
        (_S, np.array([0, 1]), None, {}, "labels"),
        (np.array([0.1, np.nan, 0.8]), _Y, None, {}, "scores"),
        (np.array([0.1, 1.4, 0.8]), _Y, None, {}, "scores"),
        (np.stack([_S, _S], axis=1), _Y, None, {}, "scores"),
        (np.array([]), np.array([]), None, {}, "scores"),
        (_S, _Y, np.array([1.0, -1.0, 1.0]), {}, "sample_weight"),
        (_S, _Y, np.array([1.0, 1.0]), {}, "sample_weight"),
        (_S, _Y, None, {"n_iter": 0}, "n_iter"),
    ],
)
def test_beta_calibration_bad_input_raises_value_error_naming_the_argument(
    scores, labels, weights, kwargs, message
):
    with pytest.raises(ValueError, match=message):
        beta_calibration_fit(scores, labels, weights, **kwargs)
    with pytest.raises(ValueError, match=message):
        BetaCalibration(**kwargs).fit(scores, labels, weights)


def test_beta_calibration_transform_checks_its_input():
    with pytest.raises(ValueError, match="not fitted"):
        BetaCalibration().transform(_S)
    fitted = BetaCalibration().fit(_S, _Y)
    with pytest.raises(ValueError, match="scores"):
        fitted.transform(np.array([0.2, -0.1]))


# ---------------------------------------------------------------------------------------------
# Temperature scaling
# ---------------------------------------------------------------------------------------------


def test_temperature_matches_scipy_minimisation_binary_and_multiclass():
    rng = np.random.default_rng(2)
    n, k = 800, 4
    true_logits = rng.normal(size=(n, k)) * 1.5
    labels = np.array([rng.choice(k, p=np.exp(log_softmax(z))) for z in true_logits])
    logits = 2.5 * true_logits  # overconfident: T should be near 2.5

    def nll(t):
        return -np.mean(log_softmax(logits / t, axis=1)[np.arange(n), labels])

    expected = minimize_scalar(nll, bounds=(0.05, 50), method="bounded", options={"xatol": 1e-9})
    got = temperature_fit(logits, labels)
    np.testing.assert_allclose(float(got), expected.x, rtol=1e-4)
    probs = temperature_transform(got, logits)
    np.testing.assert_allclose(np.sum(probs, axis=1), 1.0, rtol=1e-5)

    z = logits[:, 0] - logits[:, 1]
    yb = (labels == 0).astype(np.int32)

    def nll_binary(t):
        return np.mean(np.logaddexp(0.0, -z / t) * yb + np.logaddexp(0.0, z / t) * (1 - yb))

    expected = minimize_scalar(nll_binary, bounds=(0.05, 50), method="bounded")
    np.testing.assert_allclose(float(temperature_fit(z, yb)), expected.x, rtol=1e-4)
    # The class maps probabilities to logits itself (moderate logits: float32 probabilities).
    z_mod = z / 4.0

    def nll_mod(t):
        return np.mean(np.logaddexp(0.0, -z_mod / t) * yb + np.logaddexp(0.0, z_mod / t) * (1 - yb))

    t_mod = minimize_scalar(nll_mod, bounds=(0.01, 50), method="bounded").x
    sb = 1.0 / (1.0 + np.exp(-z_mod))
    out = TemperatureScaling().fit(sb, yb).transform(sb)
    np.testing.assert_allclose(out, 1.0 / (1.0 + np.exp(-z_mod / t_mod)), atol=1e-4)


def test_binary_temperature_keeps_to_its_range_where_the_optimum_leaves_it():
    """Logits that rank every label backwards have their NLL falling as ``1/T`` falls below 0:
    the temperature stops at the top of its range, ``e^12``, where the multiclass bisection
    (on the same problem as two classes) stops too."""
    z = np.linspace(-3.0, 3.0, 100)
    y = (z < 0).astype(np.int32)
    assert float(temperature_fit(z, y)) == pytest.approx(np.exp(12.0), rel=1e-5)
    two = np.stack([z, np.zeros_like(z)], axis=1)  # class 0's logit z: the binary problem
    assert float(temperature_fit(two, 1 - y)) == pytest.approx(np.exp(12.0), rel=1e-3)


def test_beta_calibration_of_a_stack_of_weights_is_each_rows_own_fit():
    """BetaCalibration's folds fitted as one stack (``_fit_folds``, as a cross-fit runs them)
    equal each row's own fit, where rows need no refit, a refit without one feature, or the
    positive rate alone: the refits run for the stack, each row keeps its own candidate."""
    rng = np.random.default_rng(8)
    n = 900
    s = np.clip(rng.beta(2.0, 2.0, size=n), 1e-3, 1 - 1e-3).astype(np.float32)
    third = np.arange(n) % 3
    rising = rng.random(n) < s  # labels that rise with the score
    falling = rng.random(n) < 1.0 - s  # fall
    late = rng.random(n) < np.where(s < 0.5, 0.3, s - 0.2)  # rise only above 1/2
    y = np.select([third == 0, third == 1], [rising, late], falling).astype(np.float32)
    weights = np.stack([third == 0, third == 2, third == 1]).astype(np.float32)
    cal = BetaCalibration()
    stacked = cal._fit_folds(s, y, weights)
    for row, w in enumerate(weights):
        alone = beta_calibration_fit(s, y, w)
        for got, want in zip(stacked, alone, strict=True):
            np.testing.assert_allclose(float(got[row]), float(want), rtol=1e-5, atol=1e-6)
    assert float(stacked.a[0]) > 0 and float(stacked.b[0]) > 0  # no refit
    assert float(stacked.a[1]) == float(stacked.b[1]) == 0.0  # backwards: the rate alone
    assert float(stacked.a[2]) == 0.0 < float(stacked.b[2])  # refitted without ln s
