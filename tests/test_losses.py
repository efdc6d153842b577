"""Tests for iml.losses: properness (Definition 4), the weighted losses and the logit forms, and
the registry: every record's parts agree with each other, jitted or not."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import parameterized
from jax.test_util import check_grads

from iml import losses as L

A = jnp.array([1e-4, 0.02, 0.3, 0.5, 0.77, 0.999])


@pytest.fixture
def x64():
    """Float64 for references computed with the probability forms."""
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", False)


def elementwise_grad(f, a, y):
    return jax.vmap(jax.grad(f), in_axes=(0, None))(a, y)


@pytest.mark.parametrize(
    ("loss", "weight"),
    [
        (L.log_loss, L.log_loss_weight),
        (L.squared_loss, L.squared_loss_weight),
        (L.proper_loss(lambda t: 1.0 / jnp.sqrt(t * (1.0 - t))), None),
    ],
    ids=["log", "squared", "user_weight"],
)
def test_base_losses_are_strictly_proper(loss, weight):
    # eq. proper: dL(a,1)/da = w(a)(a - 1) and dL(a,0)/da = w(a) a with the same w > 0.
    d_pos = elementwise_grad(loss, A, 1.0)
    d_neg = elementwise_grad(loss, A, 0.0)
    w_from_pos = d_pos / (A - 1.0)
    w_from_neg = d_neg / A
    np.testing.assert_allclose(w_from_pos, w_from_neg, rtol=1e-5)
    assert np.all(w_from_pos > 0)
    if weight is not None:
        np.testing.assert_allclose(w_from_pos, weight(A), rtol=1e-5)


def test_proper_loss_from_log_weight_is_log_loss_up_to_a_constant():
    built = L.proper_loss(L.log_loss_weight)
    a = jnp.asarray(np.linspace(1e-3, 1 - 1e-3, 101), jnp.float32)
    for y in (0.0, 1.0):
        np.testing.assert_allclose(built(a, y), L.log_loss(a, y) - np.log(2.0), atol=2e-6)


def test_proper_loss_values_are_consistent_with_its_exact_derivative(x64):
    # The custom JVP returns w(a)(a - y); finite differences of the quadrature values must agree.
    built = L.proper_loss(lambda t: 2.0 + jnp.sin(6.0 * t))
    a = jnp.asarray([0.1, 0.4, 0.8], jnp.float64)
    check_grads(lambda x: built(x, 1.0), (a,), order=1, modes=["fwd", "rev"], atol=1e-6)
    check_grads(lambda x: built(x, 0.0), (a,), order=1, modes=["fwd", "rev"], atol=1e-6)


def test_beta_weighted_loss_weights_each_class():
    beta = 0.9
    np.testing.assert_allclose(
        L.beta_weighted_loss(A, 1.0, beta), beta * L.log_loss(A, 1.0), rtol=1e-6
    )
    np.testing.assert_allclose(
        L.beta_weighted_loss(A, 0.0, beta, L.squared_loss),
        (1 - beta) * L.squared_loss(A, 0.0),
        rtol=1e-6,
    )
    # beta = 1/2 is half the unweighted loss.
    np.testing.assert_allclose(L.beta_weighted_loss(A, 1.0, 0.5), 0.5 * L.log_loss(A, 1.0))


def test_beta_weighted_loss_broadcasts_a_grid_of_betas():
    betas = jnp.array([0.1, 0.5, 0.99])
    out = L.beta_weighted_loss(A[None, :], 1.0, betas[:, None])
    assert out.shape == (3, A.shape[0])


@pytest.mark.parametrize("beta", [1e-6, 0.3, 0.99, 1 - 1e-6])
def test_sigmoid_cross_entropy_matches_probability_form_and_is_stable(beta):
    z = np.linspace(-20.0, 20.0, 41)
    for y in (0.0, 1.0):
        ours = L.beta_weighted_sigmoid_cross_entropy(jnp.asarray(z, jnp.float32), y, beta)
        beta = float(np.float32(beta))  # the weight as the float32 computation sees it
        # float64 reference: -log sigmoid(z) = log(1 + exp(-z)).
        ref = beta * np.logaddexp(0.0, -z) if y else (1 - beta) * np.logaddexp(0.0, z)
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-30)
    extreme = L.beta_weighted_sigmoid_cross_entropy(jnp.array([-1e4, 1e4]), 1.0, beta)
    np.testing.assert_allclose(extreme, [beta * 1e4, 0.0], rtol=1e-6)


def test_log_loss_logits_matches_probabilities():
    z = np.linspace(-30.0, 30.0, 61)
    for y in (0.0, 1.0):
        ref = np.logaddexp(0.0, -z) if y else np.logaddexp(0.0, z)
        np.testing.assert_allclose(
            L.log_loss_logits(jnp.asarray(z, jnp.float32), y), ref, rtol=1e-5
        )


def test_matrix_weighted_loss_with_binary_weights_is_twice_the_beta_loss(x64):
    # eq. b-loss-multi with rows (1-beta, 1-beta), (beta, beta) and complementary scores
    # (1 - a, a) is the binary eq. b-loss-bin counted once per class.
    beta = 0.8
    a = jnp.asarray(np.asarray(A), jnp.float64)
    B = jnp.array([[1 - beta, 1 - beta], [beta, beta]])
    scores = jnp.stack([1.0 - a, a], axis=-1)
    for y in (0, 1):
        labels = jnp.full(A.shape, y)
        np.testing.assert_allclose(
            L.matrix_weighted_loss(scores, labels, B),
            2.0 * L.beta_weighted_loss(a, float(y), beta),
            rtol=1e-12,
        )


def test_matrix_weighted_loss_by_hand():
    a = jnp.array([0.2, 0.5, 0.9])
    B = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    by_hand = 4.0 * -np.log(1 - 0.2) + 5.0 * -np.log(0.5) + 6.0 * -np.log(1 - 0.9)
    np.testing.assert_allclose(L.matrix_weighted_loss(a, 1, B), by_hand, rtol=1e-6)


def test_class_weighted_softmax_cross_entropy_matches_probability_form(x64):
    logits = 5.0 * np.random.default_rng(0).normal(size=(7, 4)).astype(np.float32)
    labels = jnp.arange(7) % 4
    w = np.array([1.0, 3.0, 0.5, 2.0], np.float32)
    ours = L.class_weighted_softmax_cross_entropy(jnp.asarray(logits), labels, jnp.asarray(w))
    assert ours.dtype == jnp.float32
    ref = L.class_weighted_cross_entropy(
        jax.nn.softmax(jnp.asarray(logits, jnp.float64)), labels, jnp.asarray(w, jnp.float64)
    )
    np.testing.assert_allclose(ours, ref, rtol=1e-6)


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


def test_losses_are_differentiable_under_jit():
    def total(z):
        return jnp.sum(L.beta_weighted_sigmoid_cross_entropy(z, jnp.array([0.0, 1.0, 1.0]), 0.9))

    z = jnp.array([-1.0, 0.5, 2.0])
    check_grads(total, (z,), order=2, modes=["fwd", "rev"], atol=1e-2, rtol=1e-2)
    g = jax.jit(jax.grad(total))(z)
    expected = np.array([0.1 * jax.nn.sigmoid(-1.0), 0.9 * (jax.nn.sigmoid(0.5) - 1), 0.0])
    expected[2] = 0.9 * (jax.nn.sigmoid(2.0) - 1)
    np.testing.assert_allclose(g, expected, rtol=1e-5)


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


# ----------------------------------------------------------------------------------------------
# The registry: each record's loss, logit form, rule, inverse and l* agree
# ----------------------------------------------------------------------------------------------

W3 = np.array([1.0, 4.0, 0.5], np.float32)
B3 = np.array([[1.0, 0.4, 0.7], [0.5, 2.0, 0.3], [0.9, 0.6, 1.5]], np.float32)
#: One loss of each built-in record, at weights away from 1/2.
EXAMPLES = {
    "log": {"beta": 0.9},
    "squared": {"beta": 0.8},
    "focal": {"gamma": 1.5, "alpha": 0.7},
    "matrix": {"B": B3},
    "class_weighted_softmax": {"class_weights": W3},
    "softmax_focal": {"gamma": 1.0, "class_weights": W3},
}


def test_every_built_in_loss_has_a_record_and_an_example():
    assert set(L.registered()) >= set(EXAMPLES)
    for name, params in EXAMPLES.items():
        record = L.lookup(name)
        values, n = record.make(**params)
        assert set(values) == set(record.event_ndims) and n == (3 if record.multiclass else 2)
        chex.assert_trees_all_equal_shapes(
            values, {k: np.zeros((3,) * d) for k, d in record.event_ndims.items()}
        )


class RecordsAgree(chex.TestCase):
    """For each record: the logit form is the loss of the linked scores; the rule's scores
    minimise the expected loss's first-order condition and the inverse maps them back; l* is the
    expected loss at the rule's scores. Under jit and without."""

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.named_parameters(*((name, name) for name in EXAMPLES))
    def test_record_parts_agree(self, name):
        from iml.spec import loss_spec

        spec = loss_spec(name, **EXAMPLES[name])
        key = jax.random.PRNGKey(0)
        if spec.multiclass:
            z = jax.random.normal(key, (6, 3))
            y = jnp.array([0, 1, 2, 0, 1, 2])
            gamma = jax.random.dirichlet(key, jnp.ones(3), (6,))
        else:
            z = jax.random.normal(key, (6,)) * 2.0
            y = jnp.array([0, 1, 0, 1, 1, 0])
            gamma = jnp.array([0.05, 0.2, 0.4, 0.6, 0.8, 0.95])

        logits_loss = self.variant(lambda z, y: spec.logits_loss(z, y))
        loss_of_link = self.variant(lambda z, y: spec.loss(spec.link(z), y))
        np.testing.assert_allclose(logits_loss(z, y), loss_of_link(z, y), rtol=2e-5, atol=1e-6)

        rule = self.variant(spec.optimal_score)
        inverse = self.variant(spec.loss_corrected_score)
        a = rule(gamma)
        chex.assert_shape(a, gamma.shape)
        chex.assert_type(a, jnp.float32)
        np.testing.assert_allclose(inverse(a), gamma, atol=2e-4)

        best = self.variant(spec.minimised_expected_loss)(gamma)
        chex.assert_shape(best, gamma.shape[:-1] if spec.multiclass else gamma.shape)
        if spec.multiclass:
            per_class = [spec.loss(a, jnp.full(a.shape[:-1], k)) for k in range(3)]
            expected = jnp.sum(gamma * jnp.stack(per_class, -1), -1)
        else:
            expected = gamma * spec.loss(a, 1) + (1 - gamma) * spec.loss(a, 0)
        np.testing.assert_allclose(best, expected, rtol=1e-4, atol=1e-6)


def test_a_record_states_its_parts_consistently():
    def loss(a, y, w):
        return -w * jnp.log(a)

    good = {"name": "mine", "title": "t", "make": lambda w=1.0: ({"w": w}, 2), "loss": loss,
            "event_ndims": {"w": 0}}  # fmt: skip
    with pytest.raises(ValueError, match="link"):
        L.LossRecord(**good, link="tanh")
    with pytest.raises(ValueError, match="class_weight"):
        L.LossRecord(**good, class_weight="beta")  # not one of its parameters
    with pytest.raises(ValueError, match="grid_weight"):
        L.LossRecord(**good, grid_weight=L.GridWeight("w", 1, "w"))  # a binary loss
    with pytest.raises(ValueError, match="identifier"):
        L.LossRecord(**{**good, "name": "my loss"})
    with pytest.raises(ValueError, match="stands for a user's loss function"):
        L.register(L.LossRecord(**{**good, "name": "callable"}))
    with pytest.raises(ValueError, match="registered already"):
        L.register(L.lookup("log"))
    with pytest.raises(ValueError, match=r"unknown loss 'mine'; the registered losses are"):
        L.unregister("mine")
    record = L.register(L.LossRecord(**good))
    try:
        assert L.lookup("mine") is record and "mine" in L.registered()
    finally:
        L.unregister("mine")
    assert "mine" not in L.registered()
