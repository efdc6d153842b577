"""Tests of the beta-ensemble trainer: steps, early stopping, sharding, NaN members, checkpoints."""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from _training_helpers import (
    FAST_COMPILE,
    TinyCNN,
    flat_params,
    tiny_config,
    tiny_images,
    tiny_members,
)
from sklearn.metrics import roc_auc_score

from iml.losses import beta_weighted_sigmoid_cross_entropy
from iml.spec import loss_spec
from iml.training import (
    DataSource,
    EnsembleCheckpointer,
    MemberSpec,
    TrainConfig,
    adam,
    batch_members,
    end_of_epoch,
    epoch_order,
    init_member_state,
    make_mesh,
    member_in_place,
    member_train_step,
    per_device_members,
    predict_ensemble,
    preprocess,
    resolve_member_batching,
    skip_idle_members,
    train_ensemble,
    use_cpu_cores_as_devices,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DISTRIBUTED_TIMEOUT_S = 150


@pytest.fixture(scope="module")
def tiny_data() -> DataSource:
    images, labels = tiny_images()
    return DataSource.from_arrays(images, labels)


@pytest.fixture(scope="module")
def trained(tiny_data):
    """One ensemble run on a 2 x 2 mesh of simulated devices, shared by several tests.

    The worker of the kill-and-restart test trains on the same mesh, so the two must agree bitwise.
    """
    mesh = make_mesh(4, 8, devices=jax.devices()[:4], ensemble_size=2)
    states, history = train_ensemble(
        TinyCNN(), tiny_members(), tiny_data, tiny_config(), mesh=mesh, progress=False
    )
    return states, history, mesh


# ----------------------------------------------------------------------------------------------
# Pure pieces
# ----------------------------------------------------------------------------------------------


def test_epoch_order_is_a_function_of_seed_member_and_epoch():
    train = np.arange(5, 45)
    a, fa = epoch_order(3, 1, 2, train, 8, True)
    b, fb = epoch_order(3, 1, 2, train, 8, True)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fa, fb)
    assert a.shape == (5, 8) and len(np.unique(a)) == 40 and set(a.ravel()) <= set(train)
    for other in [(4, 1, 2), (3, 0, 2), (3, 1, 3)]:
        assert not np.array_equal(epoch_order(*other, train, 8, True)[0], a)
    many_flips = epoch_order(3, 1, 2, np.arange(4000), 8, True)[1]
    assert abs(many_flips.mean() - 0.5) < 0.05
    assert not epoch_order(3, 1, 2, train, 8, False)[1].any()


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


def _one_member(seed: int = 0, lr: float = 1e-2):
    model = TinyCNN()
    images, labels = tiny_images(16)
    variables = model.init(jax.random.key(seed), jnp.zeros((1, 8, 8, 1)), train=False)
    return model, init_member_state(variables, adam(), lr), jnp.asarray(images), labels


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


# ----------------------------------------------------------------------------------------------
# The trainer
# ----------------------------------------------------------------------------------------------


def test_ensemble_learns_and_returns_a_history_per_member(trained, tiny_data):
    states, history, _ = trained
    assert len(history) == 4
    for h in history:
        assert len(h.train_loss) == len(h.val_loss) == len(h.lr) == 3
        assert h.val_loss[-1] < h.val_loss[0]
        assert h.best_val_loss == min(h.val_loss)
    assert states.lr.sharding.spec == jax.sharding.PartitionSpec("ensemble")
    val = np.arange(72, 96)
    scores = predict_ensemble(TinyCNN(), states, tiny_data, val, tiny_config())
    labels = np.asarray(tiny_data.labels)[val]
    for s in scores:
        assert s.shape == (24,) and np.all((s > 0) & (s < 1))
        assert roc_auc_score(labels, s) > 0.9


def test_beta_orders_the_mean_score_as_the_weighting_predicts(trained, tiny_data):
    # A larger positive-class weight beta pushes optimal scores up (Proposition 2's direction).
    states, _, _ = trained
    scores = predict_ensemble(TinyCNN(), states, tiny_data, np.arange(96), tiny_config())
    betas = [0.2, 0.5, 0.8, 0.35]
    order = np.argsort(betas)
    means = np.array([s.mean() for s in scores])[order]
    assert means[0] < means[-1]


def test_one_device_with_map_batching_trains_the_same_ensemble_as_four_with_the_default(
    trained, tiny_data
):
    states4, history4, _ = trained
    one = make_mesh(4, 8, devices=jax.devices()[:1])
    assert one.devices.size == 1
    states1, history1 = train_ensemble(
        TinyCNN(),
        tiny_members(),
        tiny_data,
        tiny_config(member_batching="map"),
        mesh=one,
        progress=False,
    )
    for a, b in zip(history1, history4, strict=True):
        np.testing.assert_allclose(a.val_loss, b.val_loss, rtol=1e-4)
    f1, f4 = flat_params(states1), flat_params(states4)
    for name in f1:
        np.testing.assert_allclose(f1[name], f4[name], rtol=1e-3, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("batching", ["loop", "map"])
def test_whole_members_per_device_train_the_same_ensemble(batching, trained, tiny_data):
    # A mesh whose data axis is 1: each of 2 devices steps its own 2 members in turn, validation
    # too; 'loop' with one-device programs, 'map' inside one shard_map program. The fixture
    # splits every batch over 2 devices.
    states4, history4, _ = trained
    mesh = make_mesh(4, 1, devices=jax.devices()[:2])
    assert dict(mesh.shape) == {"ensemble": 2, "data": 1}
    states, history = train_ensemble(
        TinyCNN(),
        tiny_members(),
        tiny_data,
        tiny_config(member_batching=batching),
        mesh=mesh,
        progress=False,
    )
    assert states.lr.sharding.spec == jax.sharding.PartitionSpec("ensemble")
    assert {sh.device for sh in states.step.addressable_shards} == set(jax.devices()[:2])
    for a, b in zip(history, history4, strict=True):
        np.testing.assert_allclose(a.val_loss, b.val_loss, rtol=1e-4)
    f, f4 = flat_params(states), flat_params(states4)
    for name in f:
        np.testing.assert_allclose(f[name], f4[name], rtol=1e-3, atol=1e-5, err_msg=name)


def test_init_variables_start_every_member_from_the_same_weights():
    from iml.training.trainer import init_ensemble

    model = TinyCNN()
    variables = model.init(jax.random.key(7), jnp.zeros((1, 8, 8, 1)), train=False)
    mesh = make_mesh(4, 8, devices=jax.devices()[:2])
    states = init_ensemble(
        model, tiny_members(), (8, 8, 1), tiny_config(), mesh, init_variables=variables
    )
    for got, want in zip(
        jax.tree.leaves(states.params), jax.tree.leaves(variables["params"]), strict=True
    ):
        for member in range(4):
            np.testing.assert_array_equal(got[member], want)
    seeded = init_ensemble(model, tiny_members(), (8, 8, 1), tiny_config(), mesh)
    # by default each member starts from its own seed
    assert any(not np.array_equal(a[0], a[1]) for a in jax.tree.leaves(seeded.params))


def test_trains_the_project_densenet_with_the_convolutions_it_was_built_with(tiny_data):
    from iml.models import densenet_small, with_conv_impl

    model = densenet_small(block_config=(1, 1), growth_rate=4, num_init_features=8)
    model = with_conv_impl(model, "matmul")
    config = tiny_config(max_epochs=1, member_batching="vmap")
    assert model.conv_impl == "matmul" and resolve_member_batching(config) == "vmap"
    assert resolve_member_batching(tiny_config(), backend="cpu") == "map"
    assert resolve_member_batching(tiny_config(), backend="gpu") == "vmap"
    mesh = make_mesh(4, 8, devices=jax.devices()[:4], ensemble_size=2)
    states, history = train_ensemble(
        model, tiny_members(), tiny_data, config, mesh=mesh, progress=False
    )
    assert all(len(h.val_loss) == 1 and np.isfinite(h.val_loss[0]) for h in history)
    # Members differ in seed and beta, so they end with different parameters.
    kernels = np.asarray(jax.tree.leaves(states.best_params)[0])
    assert kernels.shape[0] == 4 and not np.allclose(kernels[0], kernels[1])


def test_diverging_members_are_stopped_and_named_while_the_others_go_on():
    images, labels = tiny_images()
    images = images.astype(np.float32) / 255.0
    members = tiny_members()
    poisoned = members[1].train_idx[:4]
    images[poisoned] = np.nan  # only member 1's fold holds these images
    members[2] = MemberSpec(**{**members[2].__dict__, "lr": 1e30})  # overflows to inf/NaN
    members[3] = MemberSpec(**{**members[3].__dict__, "train_idx": members[0].train_idx})
    assert not np.isin(poisoned, np.concatenate([members[0].train_idx, members[0].val_idx])).any()
    with pytest.warns(RuntimeWarning) as record:
        states, history = train_ensemble(
            TinyCNN(),
            members,
            DataSource.from_arrays(images, labels),
            tiny_config(),
            mesh=make_mesh(4, 8, ensemble_size=4),
            progress=False,
        )
    messages = [str(w.message) for w in record]
    assert any("member 1 (beta=0.5, seed=11, fold=1)" in m for m in messages)
    assert any("member 2 (beta=0.8, seed=12, fold=0)" in m for m in messages)
    for k in (1, 2):
        assert history[k].diverged and history[k].stopped_epoch == 0
    for k in (0, 3):
        assert not history[k].diverged and len(history[k].val_loss) == 3
        assert history[k].val_loss[-1] < history[k].val_loss[0]
    for leaf in jax.tree.leaves(states.best_params):
        assert np.all(np.isfinite(np.asarray(leaf)))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(images=np.zeros((96, 8, 8), np.uint8)), "images \\[n, H, W, C\\]"),
        (dict(images=np.zeros((96, 8, 8, 1), np.int32)), "uint8 or floating"),
        (dict(labels=np.full(96, 2.0)), "labels must be finite and in \\[0, 1\\]"),
        (dict(labels=np.full(96, np.nan)), "labels must be finite"),
        (dict(beta=1.5), "beta must lie in \\(0, 1\\)"),
        (dict(train_idx=np.arange(90, 100)), "train_idx must index"),
        (dict(train_idx=np.arange(4)), "fewer than one batch"),
        (dict(val_idx=np.array([], np.int64)), "val_idx must be a non-empty"),
        (dict(beta=None), "neither a beta nor a loss"),
        (dict(images=np.zeros((96, 64), np.float32)), "flip and config.normalize apply to images"),
    ],
)
def test_bad_input_raises_before_training(change, match, tiny_data):
    images, labels = tiny_images()
    images = change.pop("images", images)
    labels = change.pop("labels", labels)
    member = MemberSpec(**{**tiny_members(k=1)[0].__dict__, **change})
    data = DataSource(images.__getitem__, labels)
    with pytest.raises(ValueError, match=match):
        train_ensemble(TinyCNN(), [member], data, tiny_config(), progress=False)


def test_members_with_a_multiclass_loss_train_and_predict_class_scores():
    rng = np.random.default_rng(0)
    n = 96
    classes = rng.integers(0, 3, n)
    images = (rng.integers(0, 80, (n, 8, 8, 1)) + 60 * classes[:, None, None, None]).astype(
        np.uint8
    )
    data = DataSource.from_arrays(images, classes.astype(np.float32))
    weights = [np.ones(3), np.array([1.0, 1.0, 5.0])]
    # Two members that differ in their loss only (one seed, one fold).
    base = tiny_members(n, k=1)[0]
    members = [
        dataclasses.replace(base, loss=loss_spec("class_weighted_softmax", class_weights=w))
        for w in weights
    ]
    config = tiny_config(max_epochs=6, learning_rate=1e-2)
    states, history = train_ensemble(TinyCNN(outputs=3), members, data, config, progress=False)
    assert all(np.isfinite(h.val_loss).all() for h in history)
    assert history[0].val_loss[-1] < history[0].val_loss[0]
    test = np.arange(72, n)
    scores = predict_ensemble(TinyCNN(outputs=3), states, data, test, config,
                              loss=members[0].loss_spec())  # fmt: skip
    assert scores[0].shape == (24, 3)
    np.testing.assert_allclose(scores[0].sum(-1), 1.0, atol=1e-5)
    # The member weighting class 2 by 5 scores it higher (c_2 = 5 g_2 / (1 + 4 g_2) > g_2).
    assert scores[1][:, 2].mean() > scores[0][:, 2].mean() + 0.05, (
        scores[0].mean(0),
        scores[1].mean(0),
    )
    mixed = [members[0], dataclasses.replace(members[1], loss=loss_spec(0.5))]
    with pytest.raises(ValueError, match="losses of one kind"):
        train_ensemble(TinyCNN(outputs=3), mixed, data, config, progress=False)
    bad = DataSource.from_arrays(images, np.full(n, 3.0, np.float32))
    with pytest.raises(ValueError, match=r"class indices in \[0, 3\)"):
        train_ensemble(TinyCNN(outputs=3), members, bad, config, progress=False)


def test_bad_config_and_mesh_raise():
    with pytest.raises(ValueError, match="batch_size"):
        TrainConfig(batch_size=0)
    with pytest.raises(ValueError, match=r"TrainConfig\.batch_size must be an integer"):
        TrainConfig(batch_size=16.5)
    with pytest.raises(ValueError, match=r"TrainConfig\.l2 must be a finite number >= 0"):
        TrainConfig(l2=-1.0)
    with pytest.raises(ValueError, match=r"TrainConfig\.solver must be one of"):
        TrainConfig(solver="lbfgs")
    with pytest.raises(ValueError, match="solver 'exact' fits a table's logistic regression"):
        images, labels = tiny_images()
        train_ensemble(
            TinyCNN(), tiny_members(k=1), DataSource.from_arrays(images, labels),
            tiny_config(solver="exact"), progress=False,
        )  # fmt: skip
    with pytest.raises(ValueError, match="member_batching"):
        TrainConfig(member_batching="pmap")
    with pytest.raises(ValueError, match="normalize"):
        TrainConfig(normalize="cifar")
    split = make_mesh(2, 8, devices=jax.devices()[:4])  # members' batches split over devices
    with pytest.raises(ValueError, match=r"whole members on each device \(data axis 1\)"):
        per_device_members(lambda x: x, split)
    images, labels = tiny_images()
    with pytest.raises(ValueError, match="ensemble axis"):
        train_ensemble(
            TinyCNN(),
            tiny_members(k=3),
            DataSource.from_arrays(images, labels),
            tiny_config(),
            mesh=make_mesh(4, 8, ensemble_size=4),
            progress=False,
        )


def test_images_changing_shape_mid_run_raise(trained):
    images, labels = tiny_images()
    calls = []

    def get_batch(idx):
        calls.append(1)
        return images[idx] if len(calls) < 3 else images[idx][:, :4]

    with pytest.raises(ValueError, match="first batch"):
        train_ensemble(
            TinyCNN(),
            tiny_members(),
            DataSource(get_batch, labels),
            tiny_config(),
            mesh=trained[2],
            progress=False,
        )


# ----------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------


def test_checkpoint_round_trip_ignores_an_unfinalized_step(tmp_path):
    state = {"w": jnp.arange(6.0).reshape(2, 3), "n": jnp.asarray([1, 2], jnp.int32)}
    ckpt = EnsembleCheckpointer(tmp_path)
    ckpt.save(3, state, {"epoch": 1})
    ckpt.close()
    # What a run killed in the middle of writing step 7 leaves behind: orbax's temporary folder.
    partial = tmp_path / "7.orbax-checkpoint-tmp-1234567"
    partial.mkdir()
    (partial / "garbage").write_bytes(b"\x00" * 10)
    reopened = EnsembleCheckpointer(tmp_path)
    assert reopened.latest_step() == 3 and reopened.all_steps() == [3]
    restored, meta = reopened.restore(3, state)
    reopened.close()
    assert meta == {"epoch": 1}
    np.testing.assert_array_equal(restored["w"], state["w"])
    np.testing.assert_array_equal(restored["n"], state["n"])


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["XLA_FLAGS"] = FAST_COMPILE  # the helper adds its devices
    return env


def test_use_cpu_cores_as_devices_before_and_after_jax_starts():
    # In this process JAX has started (8 devices from conftest): nothing changes.
    assert len(jax.devices("cpu")) == 8
    assert use_cpu_cores_as_devices() == 8 == len(jax.devices("cpu"))
    code = (
        "import os, jax; from iml.training import use_cpu_cores_as_devices; "
        "n = use_cpu_cores_as_devices(); "
        "assert n == len(os.sched_getaffinity(0)) == len(jax.devices('cpu')), n; print(n)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_worker_env(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) == len(os.sched_getaffinity(0))


def test_killed_run_resumes_to_the_same_parameters(tmp_path, trained):
    ckpt, out = tmp_path / "ckpt", tmp_path / "resumed.npz"
    command = [sys.executable, str(HERE / "_training_helpers.py"), "train", str(out), str(ckpt)]
    proc = subprocess.Popen(
        [*command, "0.05"],
        env=_worker_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if ckpt.exists() and any(p.name.isdigit() for p in ckpt.iterdir()):
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"worker ended before it could be killed:\n{proc.stdout.read()}"
        time.sleep(0.3)  # land somewhere later in the run, possibly mid-save
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    finished = subprocess.run(
        [*command, "0"], env=_worker_env(), capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    resumed_from = finished.stdout.split("resumed_from=")[1].split()[0]
    assert resumed_from != "None" and int(resumed_from) > 0

    # The uninterrupted run: the shared fixture, trained here on the same mesh of the same devices.
    states, _, _ = trained
    want = flat_params(states)
    got = np.load(out)
    assert set(got.files) == set(want)
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_progress_bar_can_be_shown(trained, tiny_data, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train_ensemble(
            TinyCNN(),
            tiny_members(),
            tiny_data,
            tiny_config(max_epochs=1),
            mesh=trained[2],
            progress=True,
        )
    err = capsys.readouterr().err
    assert "ensemble" in err and "1/1" in err


# ----------------------------------------------------------------------------------------------
# Several hosts: two processes joined by jax.distributed over loopback
# ----------------------------------------------------------------------------------------------
# Each process has four CPU devices; the ('ensemble', 'data') mesh spans all eight, so every step
# exchanges data between the processes (gloo collectives).


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_train_the_same_ensemble_as_one(tmp_path, trained):
    out = tmp_path / "distributed.npz"
    env = _worker_env()
    port = _free_port()
    logs = [tmp_path / f"process{i}.log" for i in range(2)]
    procs = []
    try:
        for i in range(2):
            command = [
                sys.executable,
                str(HERE / "_training_helpers.py"),
                "distributed",
                str(out),
                str(port),
                str(i),
            ]
            with open(logs[i], "w") as log:
                procs.append(
                    subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
                )
        deadline = time.monotonic() + DISTRIBUTED_TIMEOUT_S
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            if any(p.poll() not in (None, 0) for p in procs):
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    output = "\n".join(f"--- process {i}\n{log.read_text()[-3000:]}" for i, log in enumerate(logs))
    assert [p.returncode for p in procs] == [0, 0], output

    # The one-process result: the shared fixture (2 x 2 mesh; sharding changes only rounding).
    states, history, _ = trained
    got = np.load(out)
    np.testing.assert_allclose(got["val_loss"], [h.val_loss for h in history], rtol=1e-4)
    want = flat_params(states)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-3, atol=1e-5, err_msg=name)


def test_failures_of_a_large_program_are_told_apart_as_xla_words_them():
    from iml.training import is_gpu_kernel_failure, is_out_of_memory

    root = Path(__file__).resolve().parents[1] / "docs" / "results" / "gpu_h200"
    # the errors that 62 and 48 DenseNet-121 members at 224 px raised on an H200, as the logs
    # kept them: the autotuner's (62, 48), and the compiled program's illegal address (48 with
    # the autotuner off)
    raised = [
        line
        for log in ("2026-11-27/log_paper.txt", "2026-11-28/log_k48.txt")
        for line in (root / log).read_text().splitlines()
        if line.startswith("jax.errors.JaxRuntimeError")
    ]
    assert len(raised) == 3
    assert sum("Failed to get configs for" in line for line in raised) == 2
    assert sum("CUDA_ERROR_ILLEGAL_ADDRESS" in line for line in raised) >= 1
    memory = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9.10GiB."
    for line in raised:
        assert is_gpu_kernel_failure(RuntimeError(line)) and not is_out_of_memory(
            RuntimeError(line)
        )
    assert is_out_of_memory(RuntimeError(memory)) and not is_gpu_kernel_failure(
        RuntimeError(memory)
    )
    assert not is_gpu_kernel_failure(ZeroDivisionError("division by zero"))
