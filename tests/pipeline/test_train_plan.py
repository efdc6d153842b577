"""The one loop of every run: each batch trained once, stored, read back on resuming."""

import jax
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


@pytest.mark.slow
def test_each_batch_is_trained_as_train_trains_it_and_stored_once(problem, tmp_path, monkeypatch):
    x, y, grid, plan = problem
    assert len(plan.batches) == 2  # two losses, then one
    store = RunStore(tmp_path / "run")
    store.open_run({"what": "test"}, kind="table", devices=[])
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


@pytest.mark.slow
def test_a_crash_keeps_the_stored_batches_and_the_rest_trains_on_resuming(
    problem, tmp_path, monkeypatch
):
    store = RunStore(tmp_path / "run")
    store.open_run({"what": "test"}, kind="table", devices=[])
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


@pytest.mark.slow
def test_a_share_trains_its_batches_only_and_reads_the_stored_others(problem, tmp_path):
    """One process's share of a run on several (``share``): its batches trained and stored on the
    devices given, another share's neither trained nor yielded until stored."""
    store = RunStore(tmp_path / "run")
    store.open_run({"what": "test"}, kind="table", devices=[])
    devices = jax.local_devices()[:1]
    mine = _run(problem, store, share=lambda index: index == 1, devices=devices)
    assert [(b.batch.index, b.trained) for b in mine] == [(1, True)]
    assert list(store.keys("batches")) == ["batches/batch-0001"]
    others = _run(problem, store, share=lambda index: index == 0)
    assert [(b.batch.index, b.trained) for b in others] == [(0, True), (1, False)]
    whole = _run(problem, RunStore(tmp_path / "whole"))
    for a, b in zip(others, whole, strict=True):
        np.testing.assert_array_equal(a.entry["test_scores"], b.entry["test_scores"])


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
        rf".*--config\.plan\.members_per_batch={members // 2}, or with fewer validation images "
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


# ----------------------------------------------------------------------------------------------
# A batch trained in parts: members_per_call, and calls too large for the device halved
# ----------------------------------------------------------------------------------------------

_OUT_OF_MEMORY = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9.1GiB"


@pytest.fixture(scope="module")
def images():
    """One batch of three members of the tiny CNN, trained whole: the plan, data, config and
    the batch's entry. Batches of 7 images put every member whole on one device whatever the
    members of a call (iml.training.make_mesh), so that members agree bit for bit."""
    from _training_helpers import TinyCNN, tiny_config, tiny_images

    x, y = tiny_images(n=120)
    plan = make_plan(len(y), betas=[0.2, 0.5, 0.8], seeds=(3,), labels=y, n_folds=5,
                     n_val_folds=1, rotations=[0])  # fmt: skip
    config = tiny_config(batch_size=7, max_epochs=2)
    data = DataSource.from_arrays(x, y)
    (whole,) = TP.train_plan(plan, lambda b: [None] * len(b.members), TinyCNN(), data, config,
                             progress=False)  # fmt: skip
    return plan, data, config, whole.entry


def _image_run(images, store=None, **kwargs):
    from _training_helpers import TinyCNN

    plan, data, config, _ = images
    return list(TP.train_plan(plan, lambda b: [None] * len(b.members), TinyCNN(), data, config,
                              store=store, progress=False, **kwargs))  # fmt: skip


def _same_entry(got, whole, split_sizes):
    assert sorted(got) == sorted([*whole, "split_sizes"])
    np.testing.assert_array_equal(got["split_sizes"], split_sizes)
    for name, values in whole.items():
        np.testing.assert_array_equal(got[name], values, err_msg=name)


@pytest.mark.slow
def test_a_batch_trained_in_parts_is_stored_as_trained_whole(images, tmp_path):
    store = RunStore(tmp_path / "run")
    store.open_run({"what": "test"}, kind="table", devices=[])
    (got,) = _image_run(images, store, members_per_call=2, checkpoint=True)
    _same_entry(got.entry, images[3], [2, 1])
    _same_entry(store.load_arrays(got.batch.key), images[3], [2, 1])
    assert not (store.root / "checkpoints").exists()  # each part's, removed with the batch's


@pytest.mark.slow
def test_a_call_out_of_memory_is_halved_down_to_members_that_fit(images, tmp_path, monkeypatch):
    real, calls = TP.train, []

    def small_device(model, members, *args, **kwargs):
        calls.append([m.position for m in members])
        if len(members) > 1:
            raise RuntimeError(_OUT_OF_MEMORY)
        return real(model, members, *args, **kwargs)

    monkeypatch.setattr(TP, "train", small_device)
    store = RunStore(tmp_path / "run")
    store.open_run({"what": "test"}, kind="table", devices=[])
    with pytest.warns(RuntimeWarning) as warned:
        (got,) = _image_run(images, store, halve_too_large=True, checkpoint=True)
    said = [str(w.message) for w in warned]
    assert [text.rsplit("; ", 1)[1] for text in said] == [
        "training them as 2 and 1", "training them as 1 and 1"]  # fmt: skip
    for text, n in zip(said, (3, 2), strict=True):
        assert text.startswith(f"batch 0: {n} members in one program were too large for the "
                               f"device ({_OUT_OF_MEMORY})")  # fmt: skip
    # the whole batch, its first half, which is halved again, then its second half
    assert calls == [[None] * 3, [0, 1], [0], [1], [2]]
    _same_entry(got.entry, images[3], [1, 1, 1])
    _same_entry(store.load_arrays(got.batch.key), images[3], [1, 1, 1])

    # a member that does not fit alone is named, with the setting that makes it smaller
    def no_room(*args, **kwargs):
        raise RuntimeError(_OUT_OF_MEMORY)

    monkeypatch.setattr(TP, "train", no_room)
    with pytest.raises(MemoryError, match=r"^batch 0: 1 member trained in one program ran out "
                       r"of device memory; run again with fewer validation images per member "
                       r"and step \(--config\.train\.eval_batch_size, now 8\)"), \
            pytest.warns(RuntimeWarning, match="training them as") as warned:  # fmt: skip
        _image_run(images, halve_too_large=True)
    assert len(warned) == 2  # 3 members, then 2
    # without halving (members_per_batch set by the user), the batch's size is named
    with pytest.raises(MemoryError, match=r"^batch 0: 3 members .*members_per_batch=1, or"):
        _image_run(images)
