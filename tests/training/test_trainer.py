"""The ensemble trainer (``iml.training.trainer``): an ensemble learns on any mesh and member
batching, diverging members stop, multiclass members, checkpoints resumed after a kill, and two
processes joined by jax.distributed; its checkpoints' round trip ignores a step not finalized,
through orbax or (one process of several alone) its own files."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _training_helpers import (
    FAST_COMPILE,
    TinyCNN,
    flat_params,
    free_port,
    tiny_config,
    tiny_images,
    tiny_members,
    wait_for,
)
from sklearn.metrics import roc_auc_score

from iml.spec import loss_spec
from iml.training import (
    DataSource,
    EnsembleCheckpointer,
    MemberSpec,
    make_mesh,
    predict_ensemble,
    resolve_member_batching,
    train_ensemble,
)
from iml.training.sharding import state_sharding

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
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
# The trainer
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
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


@pytest.mark.slow
def test_beta_orders_the_mean_score_as_the_weighting_predicts(trained, tiny_data):
    # A larger positive-class weight beta pushes optimal scores up (Proposition 2's direction).
    states, _, _ = trained
    scores = predict_ensemble(TinyCNN(), states, tiny_data, np.arange(96), tiny_config())
    betas = [0.2, 0.5, 0.8, 0.35]
    order = np.argsort(betas)
    means = np.array([s.mean() for s in scores])[order]
    assert means[0] < means[-1]


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["XLA_FLAGS"] = FAST_COMPILE  # the helper adds its devices
    return env


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_parameters(tmp_path, trained):
    ckpt, out = tmp_path / "ckpt", tmp_path / "resumed.npz"
    command = [sys.executable, str(TESTS / "_training_helpers.py"), "train", str(out), str(ckpt)]
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_two_processes_train_the_same_ensemble_as_one(tmp_path, trained):
    out = tmp_path / "distributed.npz"
    env = _worker_env()
    port = free_port()
    logs = [tmp_path / f"process{i}.log" for i in range(2)]
    procs = []
    try:
        for i in range(2):
            command = [
                sys.executable,
                str(TESTS / "_training_helpers.py"),
                "distributed",
                str(out),
                str(port),
                str(i),
            ]
            with open(logs[i], "w") as log:
                procs.append(
                    subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
                )
    except BaseException:
        wait_for(procs, 0)  # ends the processes already started
        raise
    wait_for(procs, DISTRIBUTED_TIMEOUT_S, stop_on_failure=True)
    output = "\n".join(f"--- process {i}\n{log.read_text()[-3000:]}" for i, log in enumerate(logs))
    assert [p.returncode for p in procs] == [0, 0], output

    # The one-process result: the shared fixture (2 x 2 mesh; sharding changes only rounding).
    states, history, _ = trained
    got = np.load(out)
    np.testing.assert_allclose(got["val_loss"], [h.val_loss for h in history], rtol=1e-4)
    want = flat_params(states)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-3, atol=1e-5, err_msg=name)


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


def test_a_local_checkpoint_keeps_the_newest_steps_and_restores_onto_the_state_s_devices(tmp_path):
    mesh = make_mesh(2, 1, jax.local_devices()[:2])
    state = {"w": jnp.arange(6.0).reshape(2, 3), "n": jnp.asarray([1, 2], jnp.int32)}
    state = jax.device_put(state, state_sharding(mesh, state))
    ckpt = EnsembleCheckpointer(tmp_path / "c", max_to_keep=2, local=True)
    assert ckpt.latest_step() is None
    for step in (1, 2, 5):
        ckpt.save(step, jax.tree.map(lambda x, s=step: x * s, state), {"step": step})
    # what a run killed while writing step 9 leaves behind: the atomic write's temporary file
    (tmp_path / "c" / ".9.npz.1234.tmp").write_bytes(b"\x00" * 10)
    ckpt.close()
    reopened = EnsembleCheckpointer(tmp_path / "c", local=True)
    assert reopened.all_steps() == [2, 5] and reopened.latest_step() == 5
    restored, meta = reopened.restore(5, state)
    assert meta == {"step": 5}
    for name in state:
        np.testing.assert_array_equal(restored[name], state[name] * 5)
        assert restored[name].sharding == state[name].sharding
    with pytest.raises(FileNotFoundError):
        reopened.restore(1, state)


@pytest.mark.slow
def test_a_member_whose_loss_turns_non_finite_is_named_and_told_of_a_logit_form():
    import jax.numpy as jnp

    from iml import loss_spec
    from iml import losses as L

    def fragile(a, y, beta):  # the weighted log loss, NaN for scores above 0.3
        log_loss = jnp.where(jnp.asarray(y) == 1, -beta * jnp.log(a), -(1 - beta) * jnp.log1p(-a))
        return jnp.where(a > 0.3, jnp.nan, log_loss)

    L.register(L.LossRecord(name="fragile_host_test", title="fragile loss", loss=fragile,
                            make=lambda beta=0.5: ({"beta": L.as_parameter("beta", beta)}, 2),
                            event_ndims={"beta": 0}, class_weight="beta"))  # fmt: skip
    try:
        images, labels = tiny_images()
        members = [dataclasses.replace(m, beta=None, loss=loss_spec("fragile_host_test", beta=0.5))
                   for m in tiny_members(k=2)]  # fmt: skip
        data = DataSource(images.__getitem__, labels)
        with pytest.warns(RuntimeWarning, match="has no logit form: give its LossRecord a "):
            _, history = train_ensemble(TinyCNN(), members, data, tiny_config(max_epochs=1),
                                        progress=False)  # fmt: skip
        assert all(h.diverged for h in history)
    finally:
        L.unregister("fragile_host_test")
