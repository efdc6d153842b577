"""An ensemble's checkpoints (``iml.training.checkpoints``): a round trip that ignores a step not
finalized, through orbax or (one process of several alone) its own files."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml.training import (
    EnsembleCheckpointer,
    make_mesh,
)
from iml.training.sharding import state_sharding


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
