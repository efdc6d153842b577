"""The one loop of every run: each batch trained once, stored, read back on resuming."""

import numpy as np
import pytest
from _sweep_tables import LOGISTIC, TRAIN, simulated_table, table_config

from iml import loss_grid
from iml.pipeline import train_plan as TP
from iml.pipeline.plan import make_plan
from iml.pipeline.store import RunStore, member_entry
from iml.training import DataSource
from iml.training.train import train

BETAS = [0.5, 0.8, 0.9]


@pytest.fixture(scope="module")
def problem():
    x, y = simulated_table()
    x, y = x[:600], y[:600]
    grid = loss_grid(BETAS)
    plan = make_plan(len(y), losses=grid.keys, seeds=(0,), labels=y, n_folds=4,
                     losses_per_batch=2)  # fmt: skip
    return x, y, grid, plan


def _run(problem, store=None, **kwargs):
    x, y, grid, plan = problem
    return list(TP.train_plan(
        plan, lambda batch: [grid.spec[m.loss] for m in batch.members], LOGISTIC,
        DataSource.from_arrays(x, y), table_config(**TRAIN), store=store, progress=False,
        **kwargs,
    ))  # fmt: skip


def test_each_batch_is_trained_as_train_trains_it_and_stored_once(problem, tmp_path, monkeypatch):
    x, y, grid, plan = problem
    assert len(plan.batches) == 2  # two losses, then one
    store = RunStore(tmp_path / "run")
    store.open_run({"what": "test"}, devices=[])
    first = _run(problem, store)
    assert [(b.batch.index, b.trained) for b in first] == [(0, True), (1, True)]
    batch = plan.batches[1]
    specs = batch.member_specs([grid.spec[m.loss] for m in batch.members])
    direct = train(LOGISTIC, specs, DataSource.from_arrays(x, y), table_config(**TRAIN),
                   progress=False)  # fmt: skip
    expected = member_entry(direct, batch.described(), [s.test_idx for s in specs], 40)
    assert sorted(first[1].entry) == sorted(expected)
    for name, values in expected.items():
        np.testing.assert_array_equal(first[1].entry[name], values, err_msg=name)
        np.testing.assert_array_equal(store.load_arrays(batch.key)[name], values, err_msg=name)

    # Started again: nothing is trained; stored batches are read, or skipped.
    monkeypatch.setattr(TP, "train", lambda *a, **k: pytest.fail("trained again"))
    again = _run(problem, store)
    assert [b.trained for b in again] == [False, False]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.entry["test_scores"], b.entry["test_scores"])
    assert _run(problem, store, read_stored=False) == []


def test_a_crash_keeps_the_stored_batches_and_the_rest_trains_on_resuming(
    problem, tmp_path, monkeypatch
):
    store = RunStore(tmp_path / "run")
    store.open_run({"what": "test"}, devices=[])
    real, calls = TP.train, []

    def crash_second(*args, **kwargs):
        calls.append(len(args[1]))
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        return real(*args, **kwargs)

    monkeypatch.setattr(TP, "train", crash_second)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _run(problem, store)
    assert list(store.keys("batches")) == ["batches/batch-0000"]
    resumed = _run(problem, store)
    assert [b.trained for b in resumed] == [False, True] and len(calls) == 3


_AUTOTUNER = "INTERNAL: Failed to get configs for: 269 out of 1029 instructions."
_ILLEGAL_ADDRESS = (
    "INTERNAL: CUDA error: Failed to check stream capturing status: CUDA_ERROR_ILLEGAL_ADDRESS: "
    "an illegal memory access was encountered [executable_name='jit_member_train_step']"
)
_ON_THE_GPU = r"failed on the GPU \(XLA's autotuner or a CUDA illegal address\)"


@pytest.mark.parametrize(
    ("failure", "error", "what"),
    [
        ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9.1GiB", MemoryError,
         "ran out of device memory"),
        # how 62 and 48 DenseNet-121s in one program failed on an H200, where 32 ran
        (_AUTOTUNER, RuntimeError, _ON_THE_GPU),
        (_ILLEGAL_ADDRESS, RuntimeError, _ON_THE_GPU),
    ],
)  # fmt: skip
def test_a_batch_too_large_for_the_device_names_the_setting_that_splits_it(
    problem, monkeypatch, failure, error, what
):
    def fail(*args, **kwargs):
        raise RuntimeError(failure)

    monkeypatch.setattr(TP, "train", fail)
    members = len(problem[3].batches[0].members)
    with pytest.raises(
        error,
        match=rf"batch 0: {members} members trained in one program {what}; "
        rf".*--config\.train\.members_per_batch={members // 2}, or with fewer validation images "
        r"per member and step \(--config\.train\.eval_batch_size, now 1024\), in a new output "
        r"directory",
    ) as err:
        _run(problem)
    assert str(err.value.__cause__) == failure


def test_other_failures_propagate_as_raised(problem, monkeypatch):
    x, y, grid, _ = problem
    one = make_plan(len(y), losses=grid.keys, seeds=(0,), labels=y, n_folds=4,
                    members_per_batch=1)  # fmt: skip

    def untuned(*args, **kwargs):
        raise RuntimeError(_AUTOTUNER)

    # a single member has no smaller batch to try
    monkeypatch.setattr(TP, "train", untuned)
    with pytest.raises(RuntimeError, match=r"^INTERNAL: Failed to get configs"):
        _run((x, y, grid, one))
    monkeypatch.setattr(TP, "train", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        _run(problem)
