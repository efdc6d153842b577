"""Tests of iml.losses._registry: every record's parts (the loss, its logit form, rule, inverse
and minimised expected loss) agree with each other, jitted or not; records are checked and
registered by name."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import parameterized

from iml import losses as L

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
    with pytest.raises(ValueError, match="prior_shift needs a class_weight"):
        L.LossRecord(**good, prior_shift=True)
    # only the beta-weighted log loss's weight shifts the prior (eq. correct-prior)
    assert [n for n in L.registered() if L.lookup(n).prior_shift] == ["log"]
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


def test_a_loss_is_shipped_until_it_is_replaced_and_a_new_one_never_is():
    import dataclasses

    shipped = L.lookup("log")
    shipped_names = ("log", "squared", "matrix", "class_weighted_softmax", "focal", "softmax_focal")
    assert all(L.is_shipped(name) for name in shipped_names)
    try:
        L.register(dataclasses.replace(shipped), replace=True)  # equal parts, another record
        assert not L.is_shipped("log")
        L.register(dataclasses.replace(shipped, name="log_again"))
        assert not L.is_shipped("log_again")
    finally:
        L.register(shipped, replace=True)
        if "log_again" in L.registered():
            L.unregister("log_again")
    assert L.is_shipped("log") and not L.is_shipped("no such loss")
