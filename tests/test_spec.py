"""Tests of iml.spec: one type for the loss, every kind round-trips under jit and vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

from iml import losses as L
from iml.spec import LOSSES, LossSpec, loss_spec

B3 = np.array([[1.0, 0.4, 0.7], [0.5, 2.0, 0.3], [0.9, 0.6, 1.5]])
W3 = np.array([1.0, 4.0, 0.5])


def weighted_squared(a, y, beta):
    """A user's own loss: the beta-weighted Brier score, written out."""
    return jnp.where(y == 1, beta * (1.0 - a) ** 2, (1.0 - beta) * a**2)


def class_weighted_ce(a, y, w):
    return -w[y] * jnp.log(a[y])


# Every kind, binary and multiclass: (spec, posteriors to round-trip, tolerance).
BINARY_GAMMA = np.array([0.02, 0.1, 0.3, 0.5, 0.8, 0.97])
SIMPLEX_GAMMA = np.array(
    [[0.2, 0.5, 0.3], [0.05, 0.15, 0.8], [0.6, 0.3, 0.1], [1 / 3, 1 / 3, 1 / 3]]
)
SPECS = {
    "beta": (lambda: loss_spec(0.9), BINARY_GAMMA, 1e-5),
    "squared": (lambda: loss_spec("squared", beta=0.2), BINARY_GAMMA, 1e-5),
    "focal": (lambda: loss_spec("focal", gamma=2.0, alpha=0.25), BINARY_GAMMA, 1e-4),
    "callable": (lambda: loss_spec(weighted_squared, 0.7), BINARY_GAMMA, 1e-4),
    "matrix": (lambda: loss_spec(B3), SIMPLEX_GAMMA, 1e-4),
    "class_weighted": (
        lambda: loss_spec("class_weighted_softmax", class_weights=W3),
        SIMPLEX_GAMMA,
        1e-5,
    ),
    "softmax_focal": (
        lambda: loss_spec("softmax_focal", gamma=1.0, class_weights=W3),
        SIMPLEX_GAMMA,
        2e-3,
    ),
    "callable_multiclass": (
        lambda: loss_spec(class_weighted_ce, W3, n_classes=3),
        SIMPLEX_GAMMA,
        2e-3,
    ),
}


#: The kinds whose rule or inverse is solved numerically: their round trips compile the solvers,
#: seconds each, so they run with the slow tests.
SOLVED = {"focal", "callable", "softmax_focal", "callable_multiclass"}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in SOLVED else n for n in sorted(SPECS)],
)
def test_every_kind_round_trips_eagerly_under_jit_and_under_vmap(name):
    make, gamma, tol = SPECS[name]
    spec = make()
    assert spec.multiclass == (gamma.ndim == 2)

    def round_trip(s, g):
        return s.loss_corrected_score(s.optimal_score(g))

    eager = round_trip(spec, gamma)
    np.testing.assert_allclose(eager, gamma, atol=tol)
    jitted = jax.jit(round_trip)(spec, gamma)
    # a rule solved numerically (its round trip's tolerance above 1e-5) meets rounding that
    # differs between the eager and the compiled program, amplified by the solver
    np.testing.assert_allclose(jitted, eager, atol=min(tol, 1e-4))
    # vmap over posteriors, one at a time.
    mapped = jax.vmap(round_trip, in_axes=(None, 0))(spec, gamma)
    np.testing.assert_allclose(mapped, gamma, atol=tol)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_optimal_scores_minimise_the_expected_loss(name):
    make, gamma, _ = SPECS[name]
    spec = make()
    a = np.asarray(spec.optimal_score(gamma), np.float64)
    best = np.asarray(spec.minimised_expected_loss(gamma), np.float64)
    rng = np.random.default_rng(0)
    for g, a_g, l_g in zip(gamma, a, best, strict=True):
        for _ in range(20):
            if spec.multiclass:
                other = np.clip(a_g + 0.02 * rng.normal(size=a_g.shape), 1e-4, 1 - 1e-4)
                if spec.name != "matrix":  # simplex scores: perturb within the simplex
                    other = other / other.sum()
                value = sum(g[k] * float(spec.loss(other, k)) for k in range(3))
            else:
                other = float(np.clip(a_g + 0.05 * rng.normal(), 1e-4, 1 - 1e-4))
                value = g * float(spec.loss(other, 1)) + (1 - g) * float(spec.loss(other, 0))
            assert value >= l_g - 1e-5 * max(1.0, abs(l_g))


def test_beta_log_minimised_loss_is_z_times_entropy_and_matches_a_numerical_minimum():
    # The reference sees the same float32 inputs as the library.
    gamma = np.linspace(0.01, 0.99, 23).astype(np.float32).astype(np.float64)
    for beta in (0.01, 0.3, 0.5, 0.9, 0.999):
        beta = float(np.float32(beta))
        spec = loss_spec(beta)
        got = np.asarray(spec.minimised_expected_loss(gamma), np.float64)
        z = beta * gamma + (1 - beta) * (1 - gamma)
        c = beta * gamma / z
        entropy = -(c * np.log(c) + (1 - c) * np.log(1 - c))
        np.testing.assert_allclose(got, z * entropy, rtol=1e-5)
        for g, value in zip(gamma, got, strict=True):

            def expected(t, g=g, beta=beta):
                a = 1 / (1 + np.exp(-t))
                return -beta * g * np.log(a) - (1 - beta) * (1 - g) * np.log1p(-a)

            numeric = minimize_scalar(expected, bounds=(-30, 30), method="bounded").fun
            assert value == pytest.approx(numeric, rel=1e-5, abs=1e-7)


def test_minimised_loss_at_certain_posteriors_is_zero_not_nan():
    np.testing.assert_array_equal(loss_spec(0.3).minimised_expected_loss(np.array([0.0, 1.0])), 0)
    one_hot = np.eye(3)
    np.testing.assert_allclose(loss_spec(B3).minimised_expected_loss(one_hot), 0, atol=1e-7)
    np.testing.assert_allclose(
        loss_spec("class_weighted_softmax", class_weights=W3).minimised_expected_loss(one_hot),
        0,
        atol=1e-7,
    )


def test_closed_forms_agree_with_the_generic_rule_of_the_same_loss():
    gamma = BINARY_GAMMA
    closed = loss_spec("squared", beta=0.2)
    generic = loss_spec(weighted_squared, 0.2)
    np.testing.assert_allclose(closed.optimal_score(gamma), generic.optimal_score(gamma), atol=1e-5)
    np.testing.assert_allclose(
        closed.minimised_expected_loss(gamma), generic.minimised_expected_loss(gamma), rtol=1e-4
    )
    # B-weighted log loss: Proposition 3's closed form against the generic rule on the box.
    matrix = loss_spec(B3)
    box = loss_spec(lambda a, y, B: L.matrix_weighted_loss(a, y, B), B3, n_classes=3, domain="box")
    g = SIMPLEX_GAMMA
    np.testing.assert_allclose(matrix.optimal_score(g), box.optimal_score(g), atol=1e-4)
    np.testing.assert_allclose(
        matrix.minimised_expected_loss(g), box.minimised_expected_loss(g), rtol=1e-4
    )
    # Class-weighted cross-entropy: closed form against a numerical minimum on the simplex.
    spec = loss_spec("class_weighted_softmax", class_weights=W3)
    for row, value in zip(g, np.asarray(spec.minimised_expected_loss(g)), strict=True):

        def expected(z, row=row):
            a = np.exp(z - z.max())
            a = a / a.sum()
            return -np.sum(row * W3 * np.log(a))

        assert value == pytest.approx(minimize(expected, np.zeros(3)).fun, rel=1e-5)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_logits_loss_is_the_loss_of_the_linked_scores_and_stays_finite(name):
    spec = SPECS[name][0]()
    rng = np.random.default_rng(1)
    if spec.multiclass:
        z = rng.normal(size=(5, 3)).astype(np.float32)
        y = np.array([0, 1, 2, 1, 0])
        link = jax.nn.sigmoid if spec.name == "matrix" else jax.nn.softmax
    else:
        z = rng.normal(size=5).astype(np.float32)
        y = np.array([0, 1, 1, 0, 1])
        link = jax.nn.sigmoid
    np.testing.assert_allclose(spec.logits_loss(z, y), spec.loss(link(z), y), rtol=1e-5)
    extreme = 80.0 * np.sign(z) + z
    value = spec.logits_loss(extreme, y)
    grad = jax.grad(lambda t: jnp.sum(spec.logits_loss(t, y)))(extreme)
    if spec.name != "callable":  # a user's own loss on probabilities has no stable logit form
        assert np.isfinite(value).all() and np.isfinite(grad).all()


@pytest.mark.slow
def test_a_batched_specification_maps_like_a_loop_over_its_members():
    betas = np.array([0.05, 0.5, 0.9, 0.999])
    specs = loss_spec(betas)
    assert specs.batch_shape == (4,) and not specs.multiclass
    scores = np.linspace(0.01, 0.99, 7)
    corrected = jax.jit(jax.vmap(LossSpec.loss_corrected_score, in_axes=(0, None)))(specs, scores)
    for k, beta in enumerate(betas):
        one = loss_spec(float(beta))
        np.testing.assert_allclose(corrected[k], one.loss_corrected_score(scores), rtol=1e-6)
        np.testing.assert_allclose(specs[k].params["beta"], beta, rtol=1e-7)
    # A stack of matrices, and focal losses batched over gamma.
    stack = np.stack([B3, B3.T, np.ones((3, 3))])
    mspecs = loss_spec(stack)
    assert mspecs.batch_shape == (3,) and mspecs.n_classes == 3
    optimal = jax.vmap(LossSpec.optimal_score, in_axes=(0, None))(mspecs, SIMPLEX_GAMMA)
    np.testing.assert_allclose(optimal[1], loss_spec(B3.T).optimal_score(SIMPLEX_GAMMA), rtol=1e-6)
    focal = loss_spec("focal", gamma=np.array([0.0, 1.0, 3.0]), alpha=0.5)
    values = jax.vmap(LossSpec.optimal_score, in_axes=(0, None))(focal, BINARY_GAMMA)
    # gamma = 0 with alpha = 1/2 is the log loss: truthful scores.
    np.testing.assert_allclose(values[0], BINARY_GAMMA, atol=1e-5)
    # A batch of class weights with one focusing parameter: every leaf carries the batch.
    sfocal = loss_spec("softmax_focal", gamma=1.0, class_weights=np.stack([W3, np.ones(3)]))
    assert sfocal.batch_shape == (2,) and sfocal.params["gamma"].shape == (2,)
    pair = jax.vmap(LossSpec.optimal_score, in_axes=(0, None))(sfocal, SIMPLEX_GAMMA[:2])
    np.testing.assert_allclose(pair[1], sfocal[1].optimal_score(SIMPLEX_GAMMA[:2]), atol=1e-5)
    with pytest.raises(IndexError, match="not batched"):
        loss_spec(0.5)[0]


def test_the_b_weighted_correction_inverts_each_output_and_does_not_renormalise():
    from iml import loss_corrected_score_multiclass
    from iml.calibration import loss_corrected_scores

    rng = np.random.default_rng(0)
    a = rng.uniform(0.01, 0.99, (6, 3)).astype(np.float32)  # independent sigmoids
    corrected = loss_spec(B3).loss_corrected_score(a)
    np.testing.assert_allclose(corrected, loss_corrected_score_multiclass(a, B3), rtol=1e-6)
    assert np.abs(np.asarray(corrected).sum(-1) - 1).max() > 0.3  # rows off the simplex
    # A grid with unit weights: its member leaves the scores as they are, bit for bit.
    stack = loss_spec(np.stack([B3, np.ones((3, 3))]))
    grid = loss_corrected_scores(stack, np.stack([a, a]))
    np.testing.assert_array_equal(grid[1], a)
    np.testing.assert_allclose(grid[0], corrected, rtol=1e-6)


def test_invalid_parameters_become_nan_under_jit():
    def corrected(beta, a):
        return loss_spec(beta).loss_corrected_score(a)

    out = jax.jit(corrected)(jnp.float32(1.5), jnp.array([0.2, 0.7]))
    assert np.isnan(out).all()
    lstar = jax.jit(lambda b: loss_spec(b).minimised_expected_loss(jnp.array([0.3])))(-0.1)
    assert np.isnan(lstar).all()
    bad_b = jnp.asarray(B3).at[0, 1].set(-1.0)
    lstar_b = jax.jit(lambda b: loss_spec(b).minimised_expected_loss(SIMPLEX_GAMMA))(bad_b)
    assert np.isnan(lstar_b).all()


def test_config_round_trip_for_every_named_loss():
    for name in ("beta", "squared", "focal", "matrix", "class_weighted", "softmax_focal"):
        spec = SPECS[name][0]()
        again = loss_spec(spec.to_config())
        assert again.name == spec.name
        assert jax.tree.structure(again) == jax.tree.structure(spec)
        for x, y in zip(jax.tree.leaves(spec), jax.tree.leaves(again), strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-7)
        assert spec.describe()
    with pytest.raises(ValueError, match="callable loss cannot be stored"):
        loss_spec(weighted_squared, 0.5).to_config()
    assert loss_spec(loss_spec(0.3)).params["beta"] == pytest.approx(0.3)
    assert set(LOSSES) >= {"log", "squared", "focal", "class_weighted_softmax", "matrix"}


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((1.5,), {}, r"beta must lie in \(0, 1\)"),
        ((np.nan,), {}, "beta must lie"),
        (("log",), {"beta": 0.0}, "beta must lie"),
        (("hinge",), {}, "unknown loss 'hinge'"),
        (("focal",), {"gamma": -1.0}, "gamma must lie in"),
        (("focal",), {"alpha": 1.0}, "alpha must lie in"),
        (("focal",), {"beta": 0.3}, "the 'focal' loss: .*beta"),
        (("matrix",), {"B": np.ones((2, 3))}, "B must be a square"),
        (
            (np.array([[1.0, -1.0], [1.0, 1.0]]),),
            {},
            r"B must lie in \(0, inf\) without NaN; got min -1, max 1",
        ),
        (
            ("class_weighted_softmax",),
            {"class_weights": [1.0, 0.0]},
            r"class_weights must lie in \(0, inf\)",
        ),
        ((np.ones((2, 3)),), {}, "got an array of shape"),
        (({"beta": 0.5},), {}, "needs a 'name'"),
        ((weighted_squared,), {"beta": 0.5}, "positionally"),
        ((weighted_squared,), {"n_classes": 1}, "n_classes must be"),
        ((weighted_squared,), {"domain": "sphere"}, "domain must be"),
    ],
)
def test_bad_specifications_raise_naming_the_parameter(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        loss_spec(*args, **kwargs)


@pytest.mark.slow
def test_the_readme_figures_of_the_loss_specification():
    """README: ``loss_spec(0.9).minimised_expected_loss([0.3])`` is ~0.1729 nats, and the focal
    loss's rule inverts to the posteriors it was given."""
    assert float(loss_spec(0.9).minimised_expected_loss(jnp.array([0.3]))[0]) == pytest.approx(
        0.1729, abs=5e-5
    )
    focal = loss_spec("focal", gamma=2.0)
    gamma = jnp.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(
        focal.loss_corrected_score(focal.optimal_score(gamma)), gamma, atol=1e-5
    )


def test_link_gives_the_scores_that_logits_loss_scores():
    z = jnp.array([[0.3, -1.2, 2.0], [1.0, 0.0, -0.5]])
    y = jnp.array([2, 0])
    B = jnp.ones((3, 3)).at[0, 2].set(4.0)
    for spec, link in [
        (loss_spec(B), jax.nn.sigmoid),  # one sigmoid per class: Proposition 3's box
        (loss_spec("class_weighted_softmax", class_weights=jnp.array([1.0, 2.0, 3.0])),
         lambda v: jax.nn.softmax(v, axis=-1)),
        (loss_spec("softmax_focal", gamma=1.0, class_weights=jnp.ones(3)),
         lambda v: jax.nn.softmax(v, axis=-1)),
    ]:  # fmt: skip
        np.testing.assert_allclose(spec.link(z), link(z), rtol=1e-6)
        np.testing.assert_allclose(spec.logits_loss(z, y), spec.loss(spec.link(z), y), rtol=1e-5)
    for spec in (loss_spec(0.9), loss_spec("focal", gamma=2.0, alpha=0.25)):
        np.testing.assert_allclose(spec.link(z[0]), jax.nn.sigmoid(z[0]), rtol=1e-6)


def test_an_unknown_loss_is_an_error_never_another_loss():
    with pytest.raises(ValueError, match=r"unknown loss 'hinge'; the registered losses are \["):
        loss_spec("hinge")
    stray = LossSpec("weighted", {"beta": jnp.asarray(0.9)})  # a kind that is not registered
    with pytest.raises(ValueError, match="unknown loss 'weighted'"):
        stray.loss(jnp.asarray(0.5), 1)
    with pytest.raises(ValueError, match="unknown loss 'weighted'"):
        stray.optimal_score(jnp.asarray(0.5))
