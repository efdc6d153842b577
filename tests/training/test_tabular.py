"""The tabular trainer (``iml.training.tabular``): members of every loss on a table, by the exact
solver or by Adam, their out-of-fold logits, what it refuses, a ridge per unit of weight, and
standardised fits equal to scikit-learn's pipeline on the training rows."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from _sweep_tables import LOGISTIC, TRAIN, D, N, simulated_table, table_config, three_class_table

from iml import loss_spec
from iml.data.folds import assign_folds, nested_cv, nested_cv_splits
from iml.models import MLP, LogisticRegression
from iml.training import DataSource, MemberSpec, TrainConfig, train_ensemble
from iml.training.tabular import (
    NEAR_LOWEST,
    chosen_level,
    chosen_penalty,
    out_of_fold_logits,
    penalty_moments,
    train_tabular,
)


def _sklearn_fit(x, y, s, l2):
    """The same minimiser by scikit-learn: C sum_i w_i l_i + ||w||^2 / 2 with w_i = s_i / (l2 C)."""
    from sklearn.linear_model import LogisticRegression

    keep = s > 0
    scale = 1.0 / s[keep].min()
    clf = LogisticRegression(C=1.0 / (l2 * scale), tol=1e-12, max_iter=100_000)
    clf.fit(x[keep], y[keep], sample_weight=s[keep] * scale)
    return clf.coef_[0], clf.intercept_[0]


def _matrix_objective(spec, w, b, x, y, l2):
    import jax.numpy as jnp

    return jnp.mean(spec.logits_loss(x @ w + b, y)) + 0.5 * l2 * jnp.sum(jnp.square(w))


@pytest.mark.slow
def test_matrix_weighted_members_sit_at_the_optimum_of_their_own_loss(three_class_table):
    """The exact solver's members against the loss specification itself: the gradient of each
    member's B-weighted training objective, by automatic differentiation, vanishes; and each
    class's output is scikit-learn's weighted logistic regression of that class."""

    import jax

    from iml import loss_grid
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular
    from iml.training.tabular import table_solver

    x, y, splits, B = three_class_table
    l2 = 1e-3
    model = build_model("logistic", 3)
    spec = loss_grid(B).spec
    assert table_solver(model, spec.record) == "exact"
    # solver "auto": exact here; the objective's ridge is on the features as they are
    config = dataclasses.replace(TABULAR_DEFAULTS, l2=l2, standardize=False)
    fit = train_tabular(model, x, y, splits, B, [0, 3], config)
    assert fit.params["w"].shape == (2, 3, 4, 5, 3) and fit.params["b"].shape == (2, 3, 4, 3)
    np.testing.assert_array_equal(fit.params["w"][0], fit.params["w"][1])  # seeds share it
    assert fit.best_epoch.max() == fit.epochs_run <= TABULAR_DEFAULTS.max_newton_steps
    grad = jax.grad(_matrix_objective, argnums=(1, 2))
    for k in range(3):
        for r, split in enumerate(splits):
            w, b = fit.params["w"][0, k, r], fit.params["b"][0, k, r]
            rows = split.train
            gw, gb = grad(spec[k], w, b, x[rows], y[rows], l2)
            assert max(np.abs(gw).max(), np.abs(gb).max()) < 1e-5, (k, r)
            # the validation loss is the member's own loss on its validation rows
            val = _matrix_objective(spec[k], w, b, x[split.val], y[split.val], 0.0)
            assert fit.best_val[0, k, r] == pytest.approx(float(val), rel=1e-5)
            # and its test logits are the model's on its test rows
            test = x[split.test] @ w + b
            np.testing.assert_allclose(fit.test_logits[0, k, r, : len(split.test)], test, atol=1e-5)
    # class c's output: weights B[y_i, c] on the indicator of class c
    k, r, c = 2, 1, 2
    rows = splits[r].train
    s = B[k][y[rows], c] / len(rows)
    coef, intercept = _sklearn_fit(x[rows], (y[rows] == c).astype(np.int32), s, l2)
    np.testing.assert_allclose(fit.params["w"][0, k, r][:, c], coef, atol=2e-4)
    assert fit.params["b"][0, k, r][c] == pytest.approx(intercept, abs=2e-4)


@pytest.mark.slow
def test_exact_matrix_members_reach_a_lower_objective_than_adam(three_class_table):

    from iml import loss_grid
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular

    x, y, splits, B = three_class_table
    model = build_model("logistic", 3)
    spec = loss_grid(B).spec
    exact = train_tabular(model, x, y, splits, B, [0], TABULAR_DEFAULTS)
    adam = dataclasses.replace(TABULAR_DEFAULTS, solver="adam", learning_rate=0.05, max_epochs=20)
    trained = train_tabular(model, x, y, splits, B, [0], adam)
    for k in range(3):
        for r, split in enumerate(splits):
            rows = split.train

            def objective(fit, k=k, r=r, rows=rows):
                w, b = fit.params["w"][0, k, r], fit.params["b"][0, k, r]
                return float(_matrix_objective(spec[k], w, b, x[rows], y[rows], 0.0))

            assert objective(exact) <= objective(trained) + 1e-6, (k, r)


BETAS = [0.5, 0.9]


@pytest.fixture(scope="module")
def simulated() -> tuple[np.ndarray, np.ndarray]:
    return simulated_table()


K = 3


@pytest.fixture(scope="module")
def three_classes() -> tuple[np.ndarray, np.ndarray]:
    return three_class_table()


def test_out_of_fold_takes_each_observation_from_its_test_rotation():
    rng = np.random.default_rng(3)
    y = (rng.random(300) < 0.3).astype(int)
    fold_ids, splits = nested_cv(300, labels=y, seed=2)
    t = max(len(s.test) for s in splits)
    # Logit of member (s, b, r) on its t-th test row: encodes rotation, beta and seed.
    logits = np.arange(10)[None, None, :, None] + 100 * np.arange(2)[None, :, None, None]
    logits = np.broadcast_to(logits + 1000 * np.arange(3)[:, None, None, None], (3, 2, 10, t))
    oof = out_of_fold_logits(logits.astype(np.float32), splits, 300)
    rotation_of = np.empty(300, int)
    for r, split in enumerate(splits):
        rotation_of[split.test] = r
    expected = rotation_of[None, None] + 100 * np.arange(2)[None, :, None]
    np.testing.assert_array_equal(oof, expected + 1000 * np.arange(3)[:, None, None])
    # With the default rotations a fold's rotation is the fold id's position in the cycle.
    assert len({tuple(np.unique(fold_ids[s.test])) for s in splits}) == 10
    with pytest.raises(ValueError, match="several rotations"):
        out_of_fold_logits(np.zeros((1, 1, 2, t), np.float32), [splits[0], splits[0]], 300)


@pytest.mark.slow
def test_a_table_member_trains_as_the_ensemble_trainer_trains_it(simulated):
    """One trainer, two feeds: with one minibatch per epoch (so that row order does not matter),
    a member trained on the device-resident table follows the same path as the same member
    streamed from the host by train_ensemble: same initial parameters, steps, validation and
    epoch-end rule."""
    x, y = simulated
    _, splits = nested_cv(len(y), labels=y, seed=0)
    split = splits[2]
    model = LogisticRegression()
    fields = {"max_epochs": 8, "learning_rate": 0.2, "patience": 3, "eval_batch_size": 64,
              "l2": 0.0, "standardize": False}  # fmt: skip
    table = train_tabular(
        model, x, y, [split], [0.8], [5], table_config(**fields, batch_size=len(y), solver="adam")
    )
    member = MemberSpec(beta=0.8, seed=5, train_idx=split.train, val_idx=split.val)
    streamed = table_config(**fields, batch_size=len(split.train), member_batching="vmap")
    states, history = train_ensemble(
        model, [member], DataSource.from_arrays(x, y), streamed, progress=False
    )
    assert len(history[0].val_loss) == table.epochs_run
    assert int(states.best_epoch[0]) == int(table.best_epoch[0, 0, 0])
    np.testing.assert_allclose(float(states.best_val_loss[0]), table.best_val[0, 0, 0], rtol=1e-5)
    for name in ("w", "b"):
        np.testing.assert_allclose(
            np.asarray(states.best_params[name][0]), table.params[name][0, 0, 0], atol=1e-5
        )


@pytest.mark.slow
def test_adam_seeds_differ_but_agree_closely_on_a_convex_problem(simulated):
    x, y = simulated
    _, splits = nested_cv(len(y), labels=y, seed=0)
    config = table_config(**TRAIN, solver="adam")
    fit = train_tabular(LOGISTIC, x, y, splits[:2], [0.9], [0, 1], config)
    t = len(splits[0].test)
    spread = np.abs(fit.test_logits[0, 0, 0, :t] - fit.test_logits[1, 0, 0, :t])
    assert 0 < np.median(spread) < 0.1
    assert (fit.best_epoch >= 1).all() and (fit.best_epoch <= TRAIN["max_epochs"]).all()


@pytest.mark.slow
def test_mlp_members_train(simulated):
    x, y = simulated
    _, splits = nested_cv(N, labels=y)
    config = table_config(max_epochs=2, batch_size=256, learning_rate=0.05)
    fit = train_tabular(MLP(hidden=4), x, y, splits[:1], [0.9], [0], config)
    assert fit.params["w1"].shape == (1, 1, 1, D, 4)
    assert np.isfinite(fit.best_val).all() and fit.epochs_run == 2
    logits = jax.numpy.asarray(fit.test_logits)
    assert logits.shape[:3] == (1, 1, 1) and bool(jax.numpy.isfinite(logits).all())


@pytest.mark.slow
def test_members_the_exact_solver_could_not_finish_are_reported(simulated):
    x, y = simulated
    _, splits = nested_cv(len(y), labels=y, seed=0)
    config = table_config(max_newton_steps=1)
    with pytest.warns(RuntimeWarning, match=r"2 of 2 members stopped .*max_newton_steps"):
        train_tabular(LOGISTIC, x, y, splits[:2], [0.5], [0], config)


@pytest.mark.slow
def test_matrix_weighted_members_train_independently(three_classes):
    x, y = three_classes
    B = np.ones((2, K, K))
    B[1, 0, 2] = 5.0
    splits = nested_cv_splits(assign_folds(N, n_folds=5, labels=y), n_folds=5)[:2]
    config = table_config(**TRAIN, solver="adam")
    model = LogisticRegression(n_outputs=K)
    together = train_tabular(model, x, y, splits, B, [0], config)
    assert together.params["w"].shape == (1, 2, 2, D, K)
    assert together.test_logits.shape[-1] == K
    alone = train_tabular(model, x, y, [splits[1]], B[1:], [0], config)
    np.testing.assert_allclose(alone.params["w"][0, 0, 0], together.params["w"][0, 1, 1], atol=1e-4)
    # the exact solver's members are independent too
    exact = table_config(**TRAIN, solver="exact")
    together = train_tabular(model, x, y, splits, B, [0], exact)
    alone = train_tabular(model, x, y, [splits[1]], B[1:], [0], exact)
    np.testing.assert_allclose(alone.params["w"][0, 0, 0], together.params["w"][0, 1, 1], atol=1e-5)
    focal = loss_spec("softmax_focal", gamma=2.0, class_weights=np.ones((1, K)))
    with pytest.raises(ValueError, match=r"exact solver fits logistic regression under a loss "
                       r"with an exact form \(class_weighted_softmax, log, matrix\), not "
                       "LogisticRegression under the"):  # fmt: skip
        train_tabular(model, x, y, splits, focal, [0], exact)
    with pytest.raises(ValueError, match=r"class indices in \[0, 3\)"):
        train_tabular(model, x, y + 1, splits, B, [0], config)
    with pytest.raises(ValueError, match=r"logits of shape \(2,\) on 2 rows.*needs \(2, 3\)"):
        train_tabular(LOGISTIC, x, y, splits, B, [0], config)
    with pytest.raises(ValueError, match=r"flip and config\.normalize apply to images"):
        train_tabular(model, x, y, splits, B, [0], TrainConfig(flip=True))
    with pytest.raises(ValueError, match=r"flip and config\.normalize apply to images"):
        train_tabular(model, x, y, splits, B, [0], TrainConfig(normalize="imagenet"))


@pytest.mark.slow
def test_adam_members_keep_the_grids_penalty_of_lowest_validation_loss(simulated):
    """l2='auto', l2_choice='lowest_loss' under Adam: each (seed, loss, rotation) trains at every
    penalty of the grid and keeps the one whose own run has the lowest best validation loss;
    with standardisation, on each rotation's standardised features."""
    x, y = simulated
    _, splits = nested_cv(len(y), labels=y, seed=0)
    splits = splits[:3]
    fields = {**TRAIN, "max_epochs": 10, "solver": "adam", "standardize": True}
    del fields["l2"]
    grid = (1e-4, 0.3)
    auto = train_tabular(LOGISTIC, x, y, splits, BETAS, [0, 1],
                         table_config(**fields, l2="auto", l2_grid=grid,
                                      l2_choice="lowest_loss"))  # fmt: skip
    alone = [train_tabular(LOGISTIC, x, y, splits, BETAS, [0, 1], table_config(**fields, l2=l2))
             for l2 in grid]  # fmt: skip
    vals = np.stack([fit.best_val for fit in alone])  # [G, S, nb, R]
    pick = np.argmin(vals, axis=0)
    np.testing.assert_array_equal(auto.l2, np.asarray(grid)[pick])
    np.testing.assert_allclose(auto.best_val, vals.min(axis=0), rtol=1e-5)
    for g, fit in enumerate(alone):
        here = pick == g
        np.testing.assert_allclose(auto.params["w"][here], fit.params["w"][here], atol=1e-5)
        np.testing.assert_allclose(auto.test_logits[here], fit.test_logits[here], atol=1e-4)
    # the heavy penalty shrinks the weights: the grid's levels were really trained apart
    assert np.abs(alone[1].params["w"]).max() < np.abs(alone[0].params["w"]).max()


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["matrix", "class_weighted_softmax"])
def test_a_ridge_per_unit_of_weight_ignores_a_common_factor_of_the_weights(three_class_table, loss):
    """Under l2_scale='per_weight', multiplying every sample weight by 5 (B -> 5B, w -> 5w)
    leaves each member's fit unchanged; in the paper's units it weakens the ridge 5-fold."""
    import dataclasses

    from iml import loss_spec
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular

    x, y, splits, B = three_class_table
    model = build_model("logistic", 3)

    def losses(factor):
        if loss == "matrix":
            return factor * B
        return loss_spec(loss, class_weights=factor * np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 10.0]]))

    def coef(scale, factor):
        config = dataclasses.replace(TABULAR_DEFAULTS, l2=0.05, l2_scale=scale)
        return train_tabular(model, x, y, splits[:2], losses(factor), [0], config).params["w"]

    np.testing.assert_allclose(coef("per_weight", 5.0), coef("per_weight", 1.0), atol=2e-5)
    paper = np.abs(coef("paper", 5.0) - coef("paper", 1.0)).max()
    assert paper > 1e-2


@pytest.mark.slow
def test_standardised_fits_are_scikit_learns_pipeline_on_the_training_rows(rare_class_table):
    """standardize=True: the members are StandardScaler + LogisticRegression fitted on each
    rotation's training rows (the ridge on the standardised coefficients), with coefficients in
    the features' own units."""
    import dataclasses

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from iml.data.folds import nested_cv_splits
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular

    x, y, _ = rare_class_table
    x = x * np.array([1.0, 10.0, 0.1, 3.0, 1.0, 50.0], np.float32) + 2.0  # scales apart
    splits = nested_cv_splits(np.arange(len(y)) % 10)[:2]
    l2, beta = 1e-2, 0.8
    config = dataclasses.replace(TABULAR_DEFAULTS, l2=l2, standardize=True)
    fit = train_tabular(build_model("logistic"), x, y, splits, [beta], [0], config)
    raw_config = dataclasses.replace(config, standardize=False)
    unscaled = train_tabular(build_model("logistic"), x, y, splits, [beta], [0], raw_config)
    for r, split in enumerate(splits):
        rows = split.train
        # scikit-learn's C sum_i w_i l_i + ||w'||^2 / 2 over C n is the mean loss + l2 / 2 ||w'||^2
        clf = LogisticRegression(C=1.0 / (l2 * len(rows)), class_weight={0: 1 - beta, 1: beta},
                                 tol=1e-12, max_iter=10_000)  # fmt: skip
        pipe = make_pipeline(StandardScaler(), clf).fit(x[rows], y[rows])
        ours = x[split.test] @ fit.params["w"][0, 0, r] + fit.params["b"][0, 0, r]
        theirs = pipe.decision_function(x[split.test])
        np.testing.assert_allclose(ours, theirs, atol=1e-3)  # a gradient below 1e-6, in float32
        raw = x[split.test] @ unscaled.params["w"][0, 0, r] + unscaled.params["b"][0, 0, r]
        assert np.abs(raw - theirs).max() > 0.05  # the ridge on the features as they are


@pytest.mark.slow
def test_members_that_diverge_are_named_and_a_loss_without_a_logit_form_is_told_of_one(simulated):
    import jax.numpy as jnp

    from iml import losses as L
    from iml.training.tabular import diverged_message

    x, y = simulated
    splits = nested_cv_splits(np.arange(N) % 10)[:2]

    def fragile(a, y, beta):  # the weighted log loss, NaN for scores above 0.6
        log_loss = jnp.where(jnp.asarray(y) == 1, -beta * jnp.log(a), -(1 - beta) * jnp.log1p(-a))
        return jnp.where(a > 0.6, jnp.nan, log_loss)

    def make(beta=0.5):
        return {"beta": L.as_parameter("beta", beta)}, 2

    L.register(L.LossRecord(name="fragile_test", title="fragile loss", make=make, loss=fragile,
                            event_ndims={"beta": 0}, class_weight="beta"))  # fmt: skip
    try:
        spec = loss_spec("fragile_test", beta=[0.5, 0.9])
        config = table_config(solver="adam", max_epochs=2, learning_rate=0.5, l2=0.0)
        with pytest.warns(RuntimeWarning) as caught:
            train_tabular(LOGISTIC, x, y, splits, spec, [0], config)
        (message,) = [str(w.message) for w in caught if "non-finite" in str(w.message)]
        assert "seed 0, loss 0.5, rotation 0" in message
        assert "has no logit form: give its LossRecord a logits_loss" in message
    finally:
        L.unregister("fragile_test")
    # With a logit form the advice is the learning rate's; past five members, a count.
    diverged = np.zeros((1, 8, 1, 2), bool)
    diverged[0, :, 0, 1] = True
    keys = [f"0.{i}" for i in range(1, 9)]
    message = diverged_message(diverged, np.array([3]), keys, splits, loss_spec("log", beta=0.5))
    assert message.startswith("8 of 16 members (seed, loss, rotation) stopped")
    assert f"seed 3, loss 0.1, rotation {splits[1].rotation}" in message
    assert "and 3 more; lower the learning rate" in message and "logit form" not in message


@pytest.mark.slow
def test_exact_members_keep_the_grids_penalty_of_lowest_validation_loss(rare_class_table):
    """l2='auto', l2_choice='lowest_loss' under the exact solver: each member's fit is the one
    at the penalty whose fit at that penalty alone has the lowest validation loss, at its
    optimum."""
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS

    x, y, _ = rare_class_table
    splits = nested_cv_splits(np.arange(len(y)) % 10)[:3]
    grid, betas = (1e-4, 1e-2, 1.0), [0.1, 0.5, 0.9]
    model = build_model("logistic")
    auto = train_tabular(model, x, y, splits, betas, [0],
                         dataclasses.replace(TABULAR_DEFAULTS, l2_grid=grid,
                                             l2_choice="lowest_loss"))  # fmt: skip
    alone = [
        train_tabular(
            model, x, y, splits, betas, [0], dataclasses.replace(TABULAR_DEFAULTS, l2=level)
        )
        for level in grid
    ]
    val = np.stack([fit.best_val[0] for fit in alone])  # [G, m, R]
    best = np.argmin(val, axis=0)
    np.testing.assert_array_equal(auto.l2[0], np.asarray(grid)[best])
    for g, fit in enumerate(alone):
        chosen = best == g
        np.testing.assert_allclose(auto.best_val[0][chosen], val[g][chosen], rtol=1e-5)
        np.testing.assert_allclose(auto.params["w"][0][chosen], fit.params["w"][0][chosen],
                                   atol=1e-3)  # fmt: skip


def _least_penalty(losses: np.ndarray, levels) -> int:
    """The rule of l2_choice='least_penalty' for one member, written apart: ``losses [G, V]``."""
    mean = losses.mean(axis=1)
    gap = losses - losses[int(np.argmin(mean))]
    se = gap.std(axis=1, ddof=1) / np.sqrt(losses.shape[1])
    near = [g for g in range(len(levels)) if gap[g].mean() <= NEAR_LOWEST * se[g]]
    return min(near, key=lambda g: levels[g])


def test_the_least_penalty_near_the_lowest_validation_loss_is_chosen():
    """chosen_penalty against the rule written apart, on members whose levels (in no order)
    differ by a few standard errors or by none; padding rows count for nothing, a level whose
    loss is not finite is never kept, and 'lowest_loss' is the plain argmin."""
    rng = np.random.default_rng(0)
    levels = np.array([1e-2, 1e-6, 1.0, 1e-4])
    G, M, V = len(levels), 200, 50
    base = rng.gamma(2.0, 0.3, size=(M, V))
    shift = rng.normal(scale=0.03, size=(G, M, 1))  # level effects near one standard error
    losses = np.clip(base[None] + shift + rng.normal(scale=0.05, size=(G, M, V)), 0.0, None)
    padded = np.concatenate([losses, np.full((G, M, 7), np.inf)], axis=-1)  # padding: any value
    weight = np.concatenate([np.ones(V), np.zeros(7)])
    mean, chosen = chosen_penalty(padded, weight, levels)
    want = [_least_penalty(losses[:, m], levels) for m in range(M)]
    np.testing.assert_array_equal(np.asarray(chosen), want)
    np.testing.assert_allclose(np.asarray(mean), losses.mean(axis=-1), rtol=1e-5)
    # the sums of blocks of rows are those of all the rows, and choose the same
    halves = penalty_moments(padded[..., :30], weight[:30])
    halves = penalty_moments(padded[..., 30:], weight[30:], halves)
    whole = penalty_moments(losses, np.ones(V))
    for got, full in zip(halves, whole, strict=True):
        np.testing.assert_allclose(got, full, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(chosen_level(halves, levels)[1]), want)
    lowest = np.argmin(losses.mean(axis=-1), axis=0)
    assert (levels[want] <= levels[lowest]).all() and (np.asarray(want) != lowest).sum() >= 5
    _, plain = chosen_penalty(padded, weight, levels, "lowest_loss")
    np.testing.assert_array_equal(np.asarray(plain), lowest)
    broken = losses.copy()
    broken[1, :, 0] = np.nan  # the smallest penalty's fit failed
    _, chosen = chosen_penalty(broken, np.ones(V), levels)
    assert (np.asarray(chosen) != 1).all()


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["exact", "adam"])
def test_members_keep_the_least_penalty_near_their_lowest_validation_loss(simulated, solver):
    """l2='auto' (l2_choice='least_penalty', the default) under either solver: each member
    keeps the level the rule gives from its fits' losses on each validation row, computed here
    from the fits at each penalty alone."""
    x, y = simulated
    _, splits = nested_cv(len(y), labels=y, seed=0)
    splits = splits[:3]
    fields = {**TRAIN, "max_epochs": 10, "solver": solver, "standardize": False}
    del fields["l2"]
    grid = (1e-1, 1e-4, 1e-2)
    auto = train_tabular(LOGISTIC, x, y, splits, BETAS, [0],
                         table_config(**fields, l2="auto", l2_grid=grid))  # fmt: skip
    alone = [train_tabular(LOGISTIC, x, y, splits, BETAS, [0], table_config(**fields, l2=l2))
             for l2 in grid]  # fmt: skip
    want = np.zeros(auto.l2.shape[1:], int)  # [nb, R]
    for b, beta in enumerate(BETAS):
        for r, split in enumerate(splits):
            rows = []
            for fit in alone:
                w, c = fit.params["w"][0, b, r].reshape(-1), fit.params["b"][0, b, r].reshape(())
                z = x[split.val].astype(np.float64) @ w + c
                t = y[split.val]
                rows.append(np.where(t == 1, beta, 1 - beta) * (np.logaddexp(0, z) - t * z))
            want[b, r] = _least_penalty(np.array(rows), grid)
    np.testing.assert_array_equal(auto.l2[0], np.asarray(grid)[want])


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_exact_members_test_logits_on_the_host_equal_the_models_own(n_outputs):
    # The exact path's test logits (x @ w + b per rotation, on the host) against the logistic
    # model's forward pass in the compiled program of the Adam path.
    import jax.numpy as jnp

    from iml.training.tabular import _linear_test_logits
    from iml.training.tabular_program import blocked, member_test_logits

    rng = np.random.default_rng(5)
    n, d, m, R = 90, 4, 3, 2
    x = rng.normal(size=(n, d)).astype(np.float32)
    out = () if n_outputs == 1 else (n_outputs,)
    coef = rng.normal(size=(m, R, d, *out)).astype(np.float32)
    intercept = rng.normal(size=(m, R, *out)).astype(np.float32)
    idx, _ = blocked([np.arange(0, 30), np.arange(50, 71)], 16)  # padded: 32 rows each
    ours = _linear_test_logits(x, idx, coef, intercept)
    params = {"params": {"w": jnp.asarray(coef[None]), "b": jnp.asarray(intercept[None])}}
    model = LogisticRegression(n_outputs=n_outputs)
    theirs = np.asarray(member_test_logits(model, params, jnp.asarray(x), jnp.asarray(idx),
                                           jnp.zeros((R, d)), jnp.ones((R, d))))[0]  # fmt: skip
    assert ours.shape == theirs.shape == (m, R, 32, *out) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    # and against float64 by hand: member 1, rotation 1, its third test row (row 52)
    expected = x[52].astype(np.float64) @ coef[1, 1].astype(np.float64) + intercept[1, 1]
    np.testing.assert_allclose(ours[1, 1, 2], expected, rtol=1e-5)


def test_the_validation_program_sums_without_the_library_and_gives_the_same_moments():
    # The exact members' validation moments, compiled with iml._device.library_products_only,
    # against the same function compiled without those options, on padded blocks of rows.
    import jax.numpy as jnp

    from iml._device import ELEMENTAL_EMITTERS, library_products_only
    from iml.grids import loss_grid
    from iml.training import tabular as T
    from iml.training.tabular_program import blocked

    rng = np.random.default_rng(7)
    n, d, G, m, R = 700, 6, 2, 3, 2
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (rng.uniform(size=n) < 0.3).astype(np.float32)
    spec = loss_grid(np.array([0.2, 0.5, 0.9])).spec
    idx, weight = blocked([np.arange(0, 250), np.arange(300, 611)], 128)  # padded blocks
    coef = rng.normal(scale=0.3, size=(G, m, R, d)).astype(np.float32)
    intercept = rng.normal(scale=0.3, size=(G, m, R)).astype(np.float32)
    args = (spec, jnp.asarray(x), jnp.asarray(y), jnp.asarray(idx), jnp.asarray(weight),
            jnp.asarray(coef), jnp.asarray(intercept))  # fmt: skip
    ours = T._exact_penalty_moments(*args)
    plain = jax.jit(T._exact_moments, compiler_options=ELEMENTAL_EMITTERS)(*args)
    np.testing.assert_array_equal(np.asarray(ours.n), [250, 311])
    for got, want in zip(ours, plain, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    # the mean loss by hand: level 1, member 2 (beta 0.9), rotation 1
    z = x[300:611] @ coef[1, 2, 1] + intercept[1, 2, 1]
    t = y[300:611]
    by_hand = np.mean(-(0.9 * t * np.log(1 / (1 + np.exp(-z)))
                        + 0.1 * (1 - t) * np.log(1 / (1 + np.exp(z)))))  # fmt: skip
    np.testing.assert_allclose(float(ours.total[1, 2, 1]) / 311, by_hand, rtol=1e-5)
    if library_products_only():  # the library's fusions in its program are products alone
        text = T._penalty_moments_program().lower(*args).compile().as_text()
        fused = [line for line in text.splitlines() if "__ynn_fusion" in line and " = " in line]
        assert not any("reduce" in line.split("metadata=")[-1] for line in fused), fused
