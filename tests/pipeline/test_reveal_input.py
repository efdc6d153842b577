"""What reveal reads from a run (``iml.pipeline.reveal_input``): a sweep or a reproduce run's member
batches, under the run's own loss, each seed's scores, the run's ridge, and a sweep that has not
finished named."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from _sweep_tables import TRAIN, N, simulated_table, table_config, write_sweep_scores

from iml.grids import loss_family
from iml.pipeline import sweep as S
from iml.pipeline.reveal import intervals_cover
from iml.pipeline.reveal_input import load_reveal_input, reveal_input
from iml.pipeline.store import RunStore
from iml.revealed import simulate_gaussian_agents
from iml.spec import loss_spec

SWEEP_BETAS = [0.5, 0.9]


@pytest.fixture(scope="module")
def simulated() -> tuple[np.ndarray, np.ndarray]:
    return simulated_table()


def test_reveal_names_a_sweep_that_has_not_finished(simulated, tmp_path):
    from iml.pipeline.reveal_input import load_reveal_input

    x, y = simulated
    plan = S.plan_sweep(x, y, None, SWEEP_BETAS, train=table_config(**TRAIN))
    store = RunStore(tmp_path / "run")
    store.open_run(plan.run_config, kind="table", devices=[])
    store.save_arrays("data/folds", labels=y, fold_ids=plan.fold_ids)  # as a sweep's first step
    with pytest.raises(ValueError, match="an `iml sweep` run that has not finished"):
        load_reveal_input(store.root)


ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "docs" / "results" / "reproduce_digits"


BETAS = np.asarray([0.3, 0.5, 0.8, 0.95])


def test_a_reproduce_run_is_read_from_its_member_batches_as_its_report_pooled_them():
    inputs = load_reveal_input(DIGITS)  # the report's ensemble_scores.npz is not read
    with np.load(DIGITS / "ensemble_scores.npz") as reported:
        np.testing.assert_array_equal(inputs.scores, reported["scores"].astype(np.float32))
        np.testing.assert_array_equal(inputs.labels, reported["labels"])
    assert inputs.loss == loss_family("log") and inputs.kind == "images"


def test_scores_given_directly_are_of_kind_arrays_and_a_command_s_name_is_refused():
    """The kind of a record is the manifest's (images, table) or "arrays" for scores given
    directly; a command's name, as earlier records said, is refused."""
    scores, labels = np.full((2, 10), 0.5), np.arange(10) % 2
    assert reveal_input([0.5, 0.7], scores, labels, loss_family("log")).kind == "arrays"
    for kind in ("sweep", "reproduce"):
        with pytest.raises(ValueError, match="kind must be one of"):
            reveal_input([0.5, 0.7], scores, labels, loss_family("log"), kind=kind)


def test_a_focal_sweep_is_revealed_under_its_own_loss(tmp_path):
    alphas = [0.5, 0.75, 0.9]
    loss = loss_spec("focal", gamma=np.full(3, 2.0), alpha=np.asarray(alphas))
    scores, labels = simulate_gaussian_agents(jax.random.key(1), [0.5] * 3, 1.5, 0.2, 100)
    inputs = load_reveal_input(write_sweep_scores(tmp_path, scores, labels, alphas, loss=loss))
    assert inputs.loss == loss_family("focal", gamma=2.0) and inputs.betas.tolist() == alphas
    assert inputs.kind == "table" and inputs.scores.shape == (3, 100)


@pytest.mark.parametrize("focal", [False, True])
def test_a_sweeps_loss_weights_and_ridge_are_read_from_its_record(focal, tmp_path):
    weights = [0.5, 0.75, 0.9]
    loss = loss_spec("focal", gamma=np.full(3, 2.0), alpha=np.asarray(weights)) if focal else None
    scores, labels = simulate_gaussian_agents(jax.random.key(2), weights, 1.5, 0.2, 100)
    train = {"l2": "auto", "l2_grid": [1e-3, 1e-2], "l2_scale": "paper", "standardize": True}
    got = load_reveal_input(write_sweep_scores(tmp_path, scores, labels, weights, loss=loss,
                                               train=train))  # fmt: skip
    np.testing.assert_array_equal(got.scores, np.asarray(scores, np.float32))
    assert got.betas.tolist() == weights
    assert got.loss == (loss_family("focal", gamma=2.0) if focal else loss_family("log"))
    assert got.ridge["l2"] == "auto" and got.ridge["l2_grid"] == [1e-3, 1e-2]
    assert got.kind == "table" and got.average == "score"


def test_a_sweeps_ridge_is_stated_with_what_it_means_for_niac():
    from iml.pipeline.reveal_input import ridge_of

    fixed = ridge_of({"l2": 1e-4, "l2_scale": "paper", "standardize": False})
    assert fixed["l2"] == 1e-4 and fixed["l2_grid"] is None
    assert "one fixed penalty, as NIAC and the cost bounds assume" in fixed["note"]
    per_weight = ridge_of({"l2": 1e-4, "l2_scale": "per_weight", "standardize": True})
    assert "changes with the class weight" in per_weight["note"]
    assert "standardised on the training folds" in per_weight["note"]
    assert ridge_of({"l2": "auto", "l2_grid": [1.0]})["l2_scale"] == "paper"
    chosen = ridge_of({"l2": "auto", "l2_grid": [1.0], "l2_choice": "least_penalty"})["note"]
    assert "validation folds (l2_choice 'least_penalty') from [1.0]" in chosen
    assert ridge_of({"learning_rate": 0.01}) is None  # a record that holds no ridge


def test_a_sweep_with_several_seeds_gives_reveal_each_seeds_scores(tmp_path):
    """An Adam sweep's seeds differ: its member batches keep each seed's scores, and `iml reveal`
    resamples them with the rows."""
    scores, labels = simulate_gaussian_agents(jax.random.key(5), BETAS, 1.5, 0.2, N)
    base = np.asarray(scores, np.float64)
    rng = np.random.default_rng(0)
    members = np.clip(base[:, None] + rng.normal(0, 0.02, (4, 3, N)), 1e-4, 1 - 1e-4)
    write_sweep_scores(tmp_path, members, labels, BETAS, seeds=[0, 1, 2])
    inputs = load_reveal_input(tmp_path)
    assert inputs.seeds == (0, 1, 2) and inputs.seed_scores.shape == (3, 4, N)
    np.testing.assert_allclose(inputs.seed_scores[1], members[:, 1], rtol=1e-6)
    assert inputs.seeds_per_model() == [[0, 1, 2]] * 4
    assert "over its training seeds (3 a model)" in intervals_cover(inputs)


def three_class_grid():
    """The class-weighted softmax at the last class's weights 1, 2 and 4 (3 classes)."""
    weights = np.ones((3, 3))
    weights[:, 2] = [1.0, 2.0, 4.0]
    return loss_spec("class_weighted_softmax", class_weights=weights)


def test_a_multiclass_sweep_is_read_with_its_grid_and_class_scores(tmp_path):
    """A sweep over a grid of class weights of a softmax loss: its raw class scores [K, N, n]
    (not corrected), and its grid's keys naming the models."""
    losses = three_class_grid()
    scores, labels = simulate_gaussian_agents(jax.random.key(3), losses, 1.5, (0.4, 0.4, 0.2), 300)
    scores = np.asarray(scores, np.float32)
    keys = ["ones", "w[2]=2", "w[2]=4"]
    run = write_sweep_scores(tmp_path, scores, labels, loss=losses, keys=keys)
    got = load_reveal_input(run)
    assert got.multiclass and got.keys == keys and got.kind == "table"
    assert got.loss is None and got.betas.size == 0 and got.n_stored == 300
    assert got.scores.shape == (3, 300, 3) and got.labels.shape == (300,)
    np.testing.assert_array_equal(got.scores, scores)
    np.testing.assert_array_equal(got.labels, np.asarray(labels))
    assert got.seeds_per_model() == [[], [], []]


@pytest.mark.slow
def test_a_multiclass_sweep_with_several_seeds_gives_reveal_each_seeds_class_scores(tmp_path):
    """As for binary sweeps: each seed's own class scores ``[M, K, N, c]``, on the observations
    every seed scored, pooled as the run pools; the record's intervals then cover the seeds."""
    from iml.pipeline.reveal import reveal_run

    losses = three_class_grid()
    scores, labels = simulate_gaussian_agents(jax.random.key(4), losses, 1.5, (0.4, 0.4, 0.2), 300)
    rng = np.random.default_rng(2)
    noisy = np.log(np.asarray(scores, np.float64))[:, None] + rng.normal(0, 0.3, (3, 3, 300, 3))
    members = np.exp(noisy) / np.exp(noisy).sum(-1, keepdims=True)
    run = write_sweep_scores(tmp_path / "run", members, labels, loss=losses,
                             keys=["ones", "w[2]=2", "w[2]=4"], seeds=[0, 1, 2])  # fmt: skip
    got = load_reveal_input(run)
    assert got.multiclass and got.seeds == (0, 1, 2)
    assert got.seed_scores.shape == (3, 3, 300, 3)
    np.testing.assert_allclose(got.seed_scores[1], members[:, 1], rtol=1e-6)
    np.testing.assert_allclose(got.scores, members.mean(1), rtol=1e-5)
    assert got.seeds_per_model() == [[0, 1, 2]] * 3
    assert "over its training seeds (3 a model)" in intervals_cover(got)
    record = reveal_run(got, tmp_path / "out", n_bins=5, n_bootstrap=20, formats=(),
                        power_datasets=0)  # fmt: skip
    assert record["seeds"] == [[0, 1, 2]] * 3
    assert "over its training seeds" in record["intervals"]


def test_multiclass_runs_merge_by_their_losses_keys_pooling_a_loss_over_its_runs(tmp_path):
    """Two sweeps of one grid's losses (the second repeating w[2]=2 under another seed): one
    input over the three keys, w[2]=2 pooled over both runs' members, each seed kept."""
    from iml.pipeline.reveal_input import load_reveal_input as merge_class_runs

    losses = three_class_grid()
    scores, labels = simulate_gaussian_agents(jax.random.key(8), losses, 1.5, (0.4, 0.4, 0.2), 200)
    rng = np.random.default_rng(3)
    noisy = np.log(np.asarray(scores, np.float64))[:, None] + rng.normal(0, 0.3, (3, 2, 200, 3))
    members = np.exp(noisy) / np.exp(noisy).sum(-1, keepdims=True)  # [loss, seed, N, c]
    keys = ["ones", "w[2]=2", "w[2]=4"]

    def sweep(name, rows, seed, y=labels):
        return write_sweep_scores(tmp_path / name, members[rows, seed:seed + 1], y,
                                  loss=losses[rows], keys=keys[rows], seeds=[seed])  # fmt: skip

    first, second = sweep("a", slice(0, 2), 0), sweep("b", slice(1, 3), 1)
    got = load_reveal_input([first, second])
    assert got.keys == ["ones", "w[2]=2", "w[2]=4"] and got.run == f"{first} + {second}"
    np.testing.assert_allclose(got.scores[0], members[0, 0], rtol=1e-6)
    np.testing.assert_allclose(got.scores[1], members[1].mean(0), rtol=1e-6)
    np.testing.assert_allclose(got.scores[2], members[2, 1], rtol=1e-6)
    assert got.seeds == (0, 1) and got.seeds_per_model() == [[0], [0, 1], [1]]
    np.testing.assert_allclose(got.seed_scores[1, 1], members[1, 1], rtol=1e-6)
    assert "over its training seeds (1 to 2 a model)" in intervals_cover(got)
    again = sweep("c", slice(1, 2), 0)
    with pytest.raises(ValueError, match=r"w\[2\]=2 with seed 0 was trained in both"):
        merge_class_runs([first, again])
    other = sweep("d", slice(2, 3), 0, labels[::-1])
    with pytest.raises(ValueError, match="other observations"):
        merge_class_runs([first, other])
    binary = write_sweep_scores(tmp_path / "e", members[:2, 0, :, 0], labels % 2, BETAS[:2])
    with pytest.raises(ValueError, match="is a binary run"):
        merge_class_runs([first, binary])
    with pytest.raises(ValueError, match="given more than once"):
        merge_class_runs([first, first])


def test_binary_sweeps_join_by_their_class_weights_as_reproduce_runs_do(tmp_path):
    """Two sweeps of one loss, the second repeating beta 0.5 under another seed and adding
    0.95: one input over the class weights in order, 0.5 pooled over both runs' members."""
    scores, labels = simulate_gaussian_agents(jax.random.key(6), BETAS, 1.5, 0.2, N)
    rng = np.random.default_rng(4)
    members = np.clip(np.asarray(scores, np.float64)[:, None] + rng.normal(0, 0.02, (4, 2, N)),
                      1e-4, 1 - 1e-4)  # fmt: skip
    first = write_sweep_scores(tmp_path / "a", members[[1, 2], :1], labels, BETAS[[1, 2]],
                               seeds=[0])  # fmt: skip
    second = write_sweep_scores(tmp_path / "b", members[[3, 1], 1:], labels, BETAS[[3, 1]],
                                seeds=[1])  # fmt: skip
    got = load_reveal_input([first, second])
    assert got.betas.tolist() == [0.5, 0.8, 0.95] and got.kind == "table"
    assert got.loss == loss_family("log") and got.run == f"{first} + {second}"
    np.testing.assert_allclose(got.scores[0], members[1].mean(0), rtol=1e-6)
    np.testing.assert_allclose(got.scores[2], members[3, 1], rtol=1e-6)
    assert got.seeds == (0, 1) and got.seeds_per_model() == [[0, 1], [0], [1]]
    again = write_sweep_scores(tmp_path / "c", members[[1]], labels, BETAS[[1]], seeds=[0, 1])
    with pytest.raises(ValueError, match=r"beta 0\.5 with seed 0 was trained in both"):
        load_reveal_input([first, again])
    focal = write_sweep_scores(tmp_path / "d", members[:2, 0], labels,
                               loss=loss_spec("focal", gamma=np.full(2, 2.0), alpha=BETAS[:2]),
                               keys=["0.3", "0.5"])  # fmt: skip
    with pytest.raises(ValueError, match="was trained under another loss than"):
        load_reveal_input([first, focal])
    with pytest.raises(ValueError, match="is another kind of run than"):
        load_reveal_input([first, DIGITS])


def test_a_focal_run_on_images_is_keyed_by_the_betas_its_config_gives(tmp_path):
    """A run on images of the focal loss stores its members at the plan's betas
    (0.123456789); its grid is keyed by them as the config gives them, not by their float32
    values (0.12345679), as a grid of the log loss is: each member finds its row."""
    import shutil

    run = tmp_path / "focal"
    shutil.copytree(DIGITS, run, ignore=shutil.ignore_patterns("figures", "table.*"))
    odd = 0.123456789
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["config"]["loss"] |= {"name": "focal", "betas": [0.5, 0.9, odd],
                                   "params": {"gamma": 2.0}}  # fmt: skip
    (run / "manifest.json").write_text(json.dumps(manifest))
    for path in (run / "batches").glob("*.npz"):
        with np.load(path) as stored:
            arrays = dict(stored)
        arrays["beta"] = np.where(arrays["beta"] == 0.99, odd, arrays["beta"])
        np.savez(path, **arrays)
    got = load_reveal_input(run)
    assert got.loss.name == "focal" and got.keys == ["0.5", "0.9", "0.123456789"]
    want = load_reveal_input(DIGITS)
    np.testing.assert_array_equal(got.scores, want.scores)  # the same members, rows renamed
    with pytest.raises(ValueError, match="no run given"):
        load_reveal_input([])


def test_a_multiclass_input_is_checked_by_its_classes(tmp_path):
    from iml.grids import loss_grid
    from iml.pipeline.reveal_input import check_reveal_input, class_input

    grid = loss_grid(three_class_grid())
    scores = np.full((3, 40, 3), 1.0 / 3.0)
    sizes = np.ones((3, 40), int)
    sizes[1, 7] = 0  # unscored by the second model: left out
    scores[2, 9] = np.nan  # nor scored by the third
    kept = class_input(grid, scores, np.arange(40) % 3, sizes, run="r")
    assert kept.scores.shape == (3, 38, 3) and kept.n_stored == 40
    np.testing.assert_array_equal(kept.labels, np.delete(np.arange(40) % 3, [7, 9]))
    one_class = class_input(grid, scores, np.zeros(40, int), run="r")
    with pytest.raises(ValueError, match="share one class"):
        check_reveal_input(one_class, 5)
    outside = class_input(grid, scores, np.arange(40) % 4, run="r")
    with pytest.raises(ValueError, match=r"labels outside the 3 classes"):
        check_reveal_input(outside, 5)
    with pytest.raises(ValueError, match=r"scores must be \[K=3, N, c\]"):
        class_input(grid, scores[:2], np.arange(40) % 3)
