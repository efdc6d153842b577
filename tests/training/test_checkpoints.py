"""An ensemble's checkpoints (``iml.training.checkpoints``): a round trip that ignores a step not
finalized."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from iml.training import (
    EnsembleCheckpointer,
)


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
