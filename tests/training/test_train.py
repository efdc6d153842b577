"""``iml.training.train``: one entry point that picks the feed (the whole table on the device
for a full grid of members on rows, batches from the host otherwise) and gives every member's
test scores in one form, equal to what the feed it picked gives when called itself."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from _training_helpers import TinyCNN, tiny_config, tiny_images, tiny_members

from iml import loss_spec
from iml.data.folds import assign_folds, nested_cv_splits
from iml.models import LogisticRegression
from iml.training import (
    TABULAR_DEFAULTS,
    DataSource,
    MemberSpec,
    member_grid,
    predict_ensemble,
    train,
    train_ensemble,
    train_tabular,
)


def _table(n: int = 240, d: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x @ np.array([1.5, -1.0, 0.5]) + rng.normal(size=n) > 0.8).astype(np.int32)
    splits = nested_cv_splits(assign_folds(n, n_folds=5, labels=y, seed=0), n_folds=5)
    return x, y, splits


def _grid(seeds, specs, splits):
    return [MemberSpec(beta=None, seed=s, train_idx=sp.train, val_idx=sp.val, test_idx=sp.test,
                       fold=sp.rotation, loss=spec)
            for s in seeds for spec in specs for sp in splits]  # fmt: skip


@pytest.mark.slow
def test_a_full_grid_on_rows_is_held_on_the_device_as_train_tabular_holds_it():
    x, y, splits = _table()
    betas = np.array([0.3, 0.7])
    members = _grid([0], [loss_spec(b) for b in betas], splits)
    config = dataclasses.replace(TABULAR_DEFAULTS, l2=1e-3)
    trained = train(LogisticRegression(), members, DataSource.from_arrays(x, y), config,
                    progress=False)  # fmt: skip
    assert (trained.feed, trained.solver) == ("table", "exact") and trained.history is None
    fit = train_tabular(LogisticRegression(), x, y, splits, betas, [0], config)
    for k, (b, r) in enumerate((b, r) for b in range(2) for r in range(len(splits))):
        want = fit.test_logits[0, b, r, : len(splits[r].test)]
        np.testing.assert_array_equal(trained.test_logits[k], want)
        np.testing.assert_allclose(trained.test_scores[k], 1 / (1 + np.exp(-want.astype(float))),
                                   rtol=1e-10)  # fmt: skip
    np.testing.assert_array_equal(trained.best_val_loss, np.ravel(fit.best_val))
    np.testing.assert_array_equal(trained.l2, np.ravel(fit.l2))


def test_the_grid_is_read_from_members_in_any_order_and_anything_else_is_none():
    _, _, splits = _table()
    specs = [loss_spec(0.3), loss_spec(0.7)]
    seeds, losses, found, at = member_grid(_grid([4, 2], specs, splits))
    assert seeds.tolist() == [4, 2] and len(losses) == 2 and len(found) == len(splits)
    assert at.tolist() == list(range(2 * 2 * len(splits)))  # given in grid order
    assert all(np.array_equal(a.test, b.test) for a, b in zip(found, splits, strict=True))
    members = _grid([0, 1], specs, splits)
    shuffled = [members[k] for k in np.random.default_rng(0).permutation(len(members))]
    seeds, losses, found, at = member_grid(shuffled)
    for k, m in zip(at, shuffled, strict=True):  # each member at its place in the grid
        s, b, r = np.unravel_index(k, (len(seeds), len(losses), len(found)))
        assert seeds[s] == m.seed and found[r].test is m.test_idx
        assert float(losses[b].params["beta"]) == float(m.loss.params["beta"])
    assert member_grid(members[:-1]) is None  # a member short
    assert member_grid([*members[:-1], members[0]]) is None  # one given twice, one missing
    moved = members[:]
    moved[1] = dataclasses.replace(moved[1], test_idx=moved[1].test_idx[:-1])
    assert member_grid(moved) is None  # a rotation's rows differ between its members


@pytest.mark.slow
def test_members_in_another_order_train_the_same():
    x, y, splits = _table()
    members = _grid([0], [loss_spec(0.3), loss_spec(0.7)], splits)
    config = dataclasses.replace(TABULAR_DEFAULTS, l2=1e-3)
    data = DataSource.from_arrays(x, y)
    ordered = train(LogisticRegression(), members, data, config, progress=False)
    order = np.random.default_rng(1).permutation(len(members))
    shuffled = train(LogisticRegression(), [members[k] for k in order], data, config,
                     progress=False)  # fmt: skip
    assert shuffled.feed == "table"
    for got, k in zip(shuffled.test_logits, order, strict=True):
        np.testing.assert_array_equal(got, ordered.test_logits[k])
    np.testing.assert_array_equal(shuffled.l2, ordered.l2[order])


@pytest.mark.slow
def test_images_and_partial_grids_are_fed_from_the_host_as_train_ensemble_feeds_them():
    images, labels = tiny_images()
    members = [dataclasses.replace(m, test_idx=m.val_idx) for m in tiny_members(k=2)]
    config = tiny_config()
    source = DataSource.from_arrays(images, labels)
    trained = train(TinyCNN(), members, source, config, progress=False)
    assert (trained.feed, trained.solver) == ("host", "adam") and trained.test_logits is None
    states, history = train_ensemble(TinyCNN(), members, source, config, progress=False)
    want = predict_ensemble(TinyCNN(), states, source, [m.test_idx for m in members], config)
    for got, expected in zip(trained.test_scores, want, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert [h.best_val_loss for h in trained.history] == [h.best_val_loss for h in history]
    assert all(1 <= e <= config.max_epochs for e in trained.best_epoch)


def test_members_without_test_rows_or_none_at_all_are_refused():
    images, labels = tiny_images()
    source = DataSource.from_arrays(images, labels)
    with pytest.raises(ValueError, match="members is empty"):
        train(TinyCNN(), [], source)
    with pytest.raises(ValueError, match=r"member 0 \(beta=0.2.*has no test_idx"):
        train(TinyCNN(), tiny_members(k=2), source)
