"""One member's state and steps (``iml.training.member``): preprocessing, the end of an epoch (best
kept, plateau decay, early stop), Adam steps on any loss, idle members, and the ways of batching
members."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from _training_helpers import (
    TinyCNN,
    tiny_images,
)

from iml.losses import beta_weighted_sigmoid_cross_entropy
from iml.spec import loss_spec
from iml.training import (
    TrainConfig,
    adam,
    batch_members,
    end_of_epoch,
    init_member_state,
    member_in_place,
    member_train_step,
    preprocess,
    skip_idle_members,
)


def _one_member(seed: int = 0, lr: float = 1e-2):
    model = TinyCNN()
    images, labels = tiny_images(16)
    variables = model.init(jax.random.key(seed), jnp.zeros((1, 8, 8, 1)), train=False)
    return model, init_member_state(variables, adam(), lr), jnp.asarray(images), labels


def test_preprocess_flips_and_normalises_like_numpy():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(3, 4, 5, 3), dtype=np.uint8)
    flips = np.array([True, False, True])
    got = np.asarray(preprocess(jnp.asarray(images), jnp.asarray(flips), "imagenet"))
    ref = images.astype(np.float64) / 255.0
    ref[flips] = ref[flips][:, :, ::-1, :]
    ref = (ref - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_end_of_epoch_keeps_best_decays_lr_on_plateau_and_stops_early():
    params = {"w": jnp.zeros(2)}
    state = init_member_state({"params": params, "batch_stats": {}}, adam(), 1e-2)
    kw = dict(patience=3, plateau_patience=2, lr_factor=0.1)
    losses = [1.0, 0.5, 0.7, 0.6, 0.8]
    for epoch, loss in enumerate(losses):
        state = state.replace(params={"w": jnp.full(2, float(epoch))})
        state = end_of_epoch(state, jnp.asarray(loss), epoch, **kw)
        if epoch == 1:
            assert float(state.lr) == pytest.approx(1e-2)
        if epoch == 3:  # two epochs without improvement: one decay
            assert float(state.lr) == pytest.approx(1e-3)
            assert not bool(state.stopped)
    assert bool(state.stopped) and not bool(state.diverged) and int(state.stop_epoch) == 4
    assert float(state.best_val_loss) == 0.5
    np.testing.assert_array_equal(state.best_params["w"], [1.0, 1.0])  # epoch 1's parameters
    frozen = end_of_epoch(state.replace(params={"w": jnp.full(2, 9.0)}), 0.1, 5, **kw)
    assert float(frozen.best_val_loss) == 0.5 and int(frozen.stop_epoch) == 4


@pytest.mark.parametrize(
    ("lr", "min_lr", "rates"),
    [
        (1e-2, 0.0, [1e-3, 1e-4, 1e-5, 1e-6]),  # the paper's schedule: no floor
        (1e-2, 3e-4, [1e-3, 3e-4, 3e-4, 3e-4]),  # decayed to the floor, then held there
        (1e-4, 3e-4, [1e-4, 1e-4, 1e-4, 1e-4]),  # a rate below the floor is left as it is
    ],
)
def test_plateau_decay_stops_at_the_floor_of_the_learning_rate(lr, min_lr, rates):
    state = init_member_state({"params": {"w": jnp.ones(1)}}, adam(), lr)
    kw = dict(patience=10, plateau_patience=1, lr_factor=0.1, min_lr=min_lr)
    state = end_of_epoch(state, jnp.asarray(1.0), 0, **kw)
    got = []
    for epoch in range(1, 5):  # no improvement: a decay after every epoch
        state = end_of_epoch(state, jnp.asarray(2.0), epoch, **kw)
        got.append(float(state.lr))
    np.testing.assert_allclose(got, rates, rtol=1e-6)
    with pytest.raises(ValueError, match=r"TrainConfig\.min_lr must be a finite number >= 0"):
        TrainConfig(min_lr=-1e-3)


def test_end_of_epoch_stops_a_member_with_non_finite_validation_loss():
    state = init_member_state({"params": {"w": jnp.ones(1)}}, adam(), 1e-3)
    state = end_of_epoch(state, jnp.nan, 0, patience=5, plateau_patience=5, lr_factor=0.1)
    assert bool(state.stopped) and bool(state.diverged) and int(state.stop_epoch) == 0


@pytest.mark.slow
def test_member_train_step_is_an_adam_step_on_the_beta_weighted_loss():
    model, state, images, labels = _one_member()
    flips = jnp.zeros(16, bool)
    beta = 0.3
    step = jax.jit(functools.partial(member_train_step, model, adam()))
    new = step(state, images, labels, flips, True, beta)

    # Independent reference: optax.adam on the same loss, written out here.
    def loss_fn(params):
        x = (images.astype(jnp.float32) / 255.0 - 0.449) / 0.226
        out, _ = model.apply(
            {"params": params, "batch_stats": state.batch_stats},
            x,
            train=True,
            mutable=["batch_stats"],
        )
        return jnp.mean(beta_weighted_sigmoid_cross_entropy(out[:, 0], labels, beta))

    reference = optax.adam(1e-2, b1=0.9, b2=0.999)
    grads = jax.jit(jax.grad(loss_fn))(state.params)
    updates, _ = reference.update(grads, reference.init(state.params), state.params)
    expected = optax.apply_updates(state.params, updates)
    for got, want in zip(jax.tree.leaves(new.params), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert int(new.step) == 1 and float(new.loss_sum) == pytest.approx(float(loss_fn(state.params)))
    changed = jax.tree.leaves(
        jax.tree.map(lambda a, b: bool(jnp.any(a != b)), new.batch_stats, state.batch_stats)
    )
    assert all(changed)


@pytest.mark.slow
def test_member_train_step_takes_any_loss_specification():
    model, state, images, labels = _one_member()
    flips = jnp.zeros(16, bool)
    focal = loss_spec("focal", gamma=2.0, alpha=0.8)
    step = jax.jit(functools.partial(member_train_step, model, adam()))
    new = step(state, images, labels, flips, True, focal)

    def loss_fn(params):  # the focal loss of Lin et al., written out from the scores
        x = (images.astype(jnp.float32) / 255.0 - 0.449) / 0.226
        out, _ = model.apply({"params": params, "batch_stats": state.batch_stats}, x,
                             train=True, mutable=["batch_stats"])  # fmt: skip
        a = jax.nn.sigmoid(out[:, 0])
        pos = -2 * 0.8 * (1 - a) ** 2 * jnp.log(a)
        neg = -2 * 0.2 * a**2 * jnp.log1p(-a)
        return jnp.mean(jnp.where(labels == 1, pos, neg))

    reference = optax.adam(1e-2, b1=0.9, b2=0.999)
    grads = jax.grad(loss_fn)(state.params)
    updates, _ = reference.update(grads, reference.init(state.params), state.params)
    expected = optax.apply_updates(state.params, updates)
    for got, want in zip(jax.tree.leaves(new.params), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert float(new.loss_sum) == pytest.approx(float(loss_fn(state.params)), rel=1e-5)


@pytest.mark.slow
def test_stopped_or_inactive_member_does_not_change():
    model, state, images, labels = _one_member()
    flips = jnp.zeros(16, bool)
    step = jax.jit(functools.partial(member_train_step, model, adam()))
    skipping = jax.jit(skip_idle_members(functools.partial(member_train_step, model, adam())))
    for st, active in [(state.replace(stopped=jnp.asarray(True)), True), (state, False)]:
        for f in (step, skipping):
            new = f(st, images, labels, flips, active, 0.5)
            for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(st), strict=True):
                np.testing.assert_array_equal(a, b)
    # A live member: skip_idle_members takes the step (compiled inside a cond: to rounding).
    for a, b in zip(
        jax.tree.leaves(skipping(state, images, labels, flips, True, 0.5)),
        jax.tree.leaves(step(state, images, labels, flips, True, 0.5)),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


@pytest.mark.slow
def test_vmap_map_and_loop_member_batching_agree_with_single_member_steps():
    model = TinyCNN()
    images, labels = tiny_images(32)
    states = [_one_member(seed)[1] for seed in range(2)]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    x = jnp.asarray(images.reshape(2, 16, 8, 8, 1))
    y = jnp.asarray(labels.reshape(2, 16))
    flips = jnp.asarray(np.random.default_rng(0).random((2, 16)) < 0.5)
    betas = jnp.asarray([0.2, 0.7])
    active = jnp.asarray([True, True])
    step = functools.partial(member_train_step, model, adam())
    single = jax.jit(step)
    singles = [single(states[i], x[i], y[i], flips[i], active[i], betas[i]) for i in range(2)]
    for batching in ("vmap", "map"):
        out = jax.jit(batch_members(step, batching))(stacked, x, y, flips, active, betas)
        for i in range(2):
            member = jax.tree.map(lambda a, i=i: a[i], out)
            for a, b in zip(jax.tree.leaves(member), jax.tree.leaves(singles[i]), strict=True):
                np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    looped = jax.jit(member_in_place(step), donate_argnums=0)
    out = jax.tree.map(jnp.copy, stacked)
    for i in range(2):
        out = looped(out, x, y, flips, active, betas, i)
    for i in range(2):
        member = jax.tree.map(lambda a, i=i: a[i], out)
        for a, b in zip(jax.tree.leaves(member), jax.tree.leaves(singles[i]), strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    with pytest.raises(ValueError, match="member_batching"):
        batch_members(step, "scan")
