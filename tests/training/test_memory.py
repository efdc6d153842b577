"""How many members fit on a device (``iml.training.memory``): XLA's memory analysis of the
trainer's programs at two and three members, and the bytes a batch may take."""

import jax
import numpy as np
import pytest
from _training_helpers import TinyCNN, tiny_config

from iml.training.memory import (
    FREE_MEMORY_MARGIN,
    MemoryEstimate,
    estimate_member_memory,
    free_device_memory,
    memory_budget,
    program_bytes,
)


@pytest.fixture(scope="module")
def estimate():
    return estimate_member_memory(TinyCNN(), 0.8, (8, 8, 1), tiny_config())


@pytest.mark.slow
def test_each_member_adds_bytes_and_the_programs_grow_by_them(estimate):
    assert estimate.member_bytes > 0
    assert estimate.program_bytes == {2: estimate.bytes_for(2), 3: estimate.bytes_for(3)}
    # a member holds its parameters, its best ones and Adam's two moments of them
    image = jax.ShapeDtypeStruct((1, 8, 8, 1), np.float32)
    params = jax.eval_shape(TinyCNN().init, jax.random.key(0), image)["params"]
    assert estimate.member_bytes >= 4 * sum(x.size * 4 for x in jax.tree.leaves(params))


@pytest.mark.slow
def test_the_members_chosen_for_a_budget_fit_it_and_one_more_would_not(estimate):
    for k in (1, 3, 40):
        for budget in (estimate.bytes_for(k), estimate.bytes_for(k + 1) - 1):
            assert estimate.members_within(budget) == k
            assert estimate.bytes_for(k) <= budget < estimate.bytes_for(k + 1)
    assert estimate.members_within(estimate.bytes_for(1) - 1) == 0  # not even one
    assert MemoryEstimate(0, 10, {}).members_within(10) > 10**9  # members that take nothing


@pytest.mark.slow
@pytest.mark.parametrize("batching", ["map", "vmap"])
def test_the_members_chosen_for_a_budget_fit_it_by_the_analysis_of_their_own_programs(batching):
    config = tiny_config(member_batching=batching)
    estimate = estimate_member_memory(TinyCNN(), 0.8, (8, 8, 1), config)
    for k in (1, 2, 3, 5, 8):
        budget = estimate.bytes_for(k) + estimate.member_bytes // 2
        assert estimate.members_within(budget) == k
        assert program_bytes(TinyCNN(), 0.8, (8, 8, 1), config, k) <= budget
    # 'loop' steps one member at a time, as 'map' does, and is measured so
    if batching == "map":
        loop = tiny_config(member_batching="loop")
        assert estimate_member_memory(TinyCNN(), 0.8, (8, 8, 1), loop) == estimate


class _Device:
    def __init__(self, stats):
        self.stats = stats

    def memory_stats(self):
        return self.stats


def test_the_budget_is_the_one_given_else_a_margin_of_the_free_memory():
    if jax.default_backend() == "cpu":  # no memory statistics: no limit
        assert free_device_memory() is None and memory_budget() is None
    assert memory_budget(12345) == 12345
    gpu = _Device({"bytes_limit": 1000, "bytes_in_use": 200})
    assert free_device_memory(gpu) == 800
    assert memory_budget(0, gpu) == int(FREE_MEMORY_MARGIN * 800)
    assert memory_budget(5, gpu) == 5
