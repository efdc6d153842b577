"""Exact fits of weighted logistic regressions (``iml.training.exact``), against scikit-learn: every
member at its optimum, with a penalty where the data are separable, to near float precision, and
along a path of betas; each member solved on its own whatever the batch, and a coefficient whose
optimum is at infinity kept moving."""

import contextlib
import logging

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from iml.training.exact import beta_weighted_sample_weights, fit_weighted_logistic


def _objective(x, y, s, coef, intercept, l2):
    z = x.astype(np.float64) @ np.asarray(coef, np.float64) + float(intercept)
    return np.dot(s, np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * np.sum(np.square(coef))


def _sklearn_fit(x, y, s, l2):
    """The same minimiser by scikit-learn: C sum_i w_i l_i + ||w||^2 / 2 with w_i = s_i / (l2 C)."""
    keep = s > 0
    scale = 1.0 / s[keep].min()
    clf = LogisticRegression(C=1.0 / (l2 * scale), tol=1e-12, max_iter=100_000)
    clf.fit(x[keep], y[keep], sample_weight=s[keep] * scale)
    return clf.coef_[0], clf.intercept_[0]


@pytest.mark.slow
def test_every_member_reaches_scikit_learns_optimum(rare_class_table):
    x, y, mask = rare_class_table
    betas = np.array([0.01, 0.5, 0.99])
    l2 = 1e-3
    S = beta_weighted_sample_weights(y, betas, mask)
    assert S.shape == (3, 2, len(y))
    np.testing.assert_allclose(S.sum(-1), [[(b * y + (1 - b) * (1 - y)) @ m / m.sum() for m in mask]
                                           for b in betas], rtol=1e-5)  # fmt: skip
    fit = fit_weighted_logistic(x, y, S, l2=l2, tol=1e-6)
    assert fit.coef.shape == (3, 2, 6) and fit.intercept.shape == (3, 2)
    assert np.all(fit.converged) and np.all(fit.grad_norm <= 1e-6)
    for b in range(3):
        for r in range(2):
            s = S[b, r].astype(np.float64)
            coef, intercept = _sklearn_fit(x, y, s, l2)
            ours = _objective(x, y, s, fit.coef[b, r], fit.intercept[b, r], l2)
            theirs = _objective(x, y, s, coef, intercept, l2)
            assert ours <= theirs * (1 + 1e-6), (betas[b], r)
            assert ours == pytest.approx(theirs, rel=1e-6)
            assert float(fit.objective[b, r]) == pytest.approx(ours, rel=1e-5)
            np.testing.assert_allclose(fit.coef[b, r], coef, atol=2e-3)


@pytest.mark.slow
def test_separable_data_needs_a_penalty_for_a_finite_optimum():
    x = np.array([[-2.0], [-1.0], [1.0], [2.0]], np.float32)
    y = np.array([0, 0, 1, 1])
    weights = np.full((1, 4), 0.25, np.float32)
    free = fit_weighted_logistic(x, y, weights, max_iter=30)
    assert float(free.coef[0, 0]) > 5.0  # no minimiser: the weights grow
    ridge = fit_weighted_logistic(x, y, weights, l2=0.1)
    assert bool(ridge.converged[0]) and 0.5 < float(ridge.coef[0, 0]) < 5.0
    # The penalised optimum: the gradient of the objective vanishes there.
    z = x[:, 0] * float(ridge.coef[0, 0]) + float(ridge.intercept[0])
    p = 1 / (1 + np.exp(-z))
    assert abs(0.25 * np.dot(p - y, x[:, 0]) + 0.1 * float(ridge.coef[0, 0])) < 1e-5


@pytest.mark.slow
def test_uci_adult_members_at_extreme_betas_match_scikit_learn(shared_data_path):
    from iml.data.tabular import read_adult

    table, split = read_adult(shared_data_path("uci-adult"))
    train = split == "train"
    x, y = np.asarray(table.features, np.float32)[train], np.asarray(table.labels)[train]
    mask = (np.arange(len(y)) % 10 != 0).astype(np.float32)[None, :]
    l2 = 1e-4
    S = beta_weighted_sample_weights(y, np.array([0.01, 0.99]), mask)
    fit = fit_weighted_logistic(x, y, S, l2=l2)
    assert np.all(fit.converged)
    for b in range(2):
        s = S[b, 0].astype(np.float64)
        coef, intercept = _sklearn_fit(x, y, s, l2)
        ours = _objective(x, y, s, fit.coef[b, 0], fit.intercept[b, 0], l2)
        assert ours == pytest.approx(_objective(x, y, s, coef, intercept, l2), rel=1e-6)


def test_one_hot_columns_that_sum_to_the_intercept_need_no_penalty():
    rng = np.random.default_rng(2)
    n = 2000
    category = rng.integers(0, 3, n)
    numeric = rng.normal(size=n)
    x = np.column_stack([np.eye(3)[category], numeric]).astype(np.float32)  # rank-deficient
    logit = np.array([-2.0, -1.0, 0.5])[category] + 1.2 * numeric
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    S = beta_weighted_sample_weights(y, np.array([0.1, 0.9]), np.ones((1, n), np.float32))
    fit = fit_weighted_logistic(x, y, S)
    assert np.all(fit.converged) and np.isfinite(fit.coef).all()
    for b in range(2):
        s = S[b, 0].astype(np.float64)
        clf = LogisticRegression(C=np.inf, tol=1e-12, max_iter=100_000)
        clf.fit(x, y, sample_weight=s * n)
        theirs = _objective(x, y, s, clf.coef_[0], clf.intercept_[0], 0.0)
        ours = _objective(x, y, s, fit.coef[b, 0], fit.intercept[b, 0], 0.0)
        assert ours == pytest.approx(theirs, rel=1e-6)


@pytest.fixture(scope="module")
def large_rare_class_table():
    """40,000 rows: 12 normal features and a 30-level one-hot category, 10% positive."""
    rng = np.random.default_rng(0)
    n, d = 40_000, 12
    category = rng.integers(0, 30, n)
    numeric = rng.normal(size=(n, d))
    x = np.column_stack([numeric, np.eye(30)[category]]).astype(np.float32)
    logit = -2.5 + numeric @ rng.normal(size=d) * 0.7 + rng.normal(size=30)[category]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    mask = (np.arange(n)[None, :] % 5 != np.arange(5)[:, None]).astype(np.float32)
    betas = 1 / (1 + np.exp(-np.linspace(-4.6, 4.6, 16)))  # 0.01 to 0.99, even in logit
    return x, y, beta_weighted_sample_weights(y, betas, mask), betas


@pytest.fixture(scope="module")
def large_cold_fit(large_rare_class_table):
    x, y, S, _ = large_rare_class_table
    return fit_weighted_logistic(x, y, S, l2=1e-4, tol=1e-7)


@pytest.mark.slow
def test_members_reach_a_tolerance_near_float_precision(large_cold_fit):
    # A line search that summed its trial objectives in another order than the current one
    # (vmapped over the halvings) stalled 13 of these 80 members between 1e-7 and 2e-6.
    fit = large_cold_fit
    assert np.all(fit.converged) and np.max(fit.grad_norm) <= 1e-7
    assert np.max(fit.iterations) <= 12


@pytest.mark.slow
def test_a_path_of_betas_reaches_the_same_optima_in_fewer_steps(
    large_rare_class_table, large_cold_fit
):
    x, y, S, betas = large_rare_class_table
    cold = large_cold_fit
    path = np.log(betas / (1 - betas))
    warm = fit_weighted_logistic(x, y, S, l2=1e-4, tol=1e-7, path=path, chunk=10)
    assert np.all(warm.converged)
    np.testing.assert_allclose(warm.objective, cold.objective, rtol=1e-6)
    np.testing.assert_allclose(warm.coef, cold.coef, atol=2e-3)
    assert warm.coef.shape == (16, 5, 42) and warm.hessians.shape == (16, 5)
    # Only the middle step starts cold; the anchors start from a solved neighbour, and the steps
    # between them borrow an anchor's Hessian, and many form none of their own.
    assert np.mean(warm.hessians) < 0.5 * np.mean(cold.hessians)
    assert np.mean(warm.hessians == 0) > 0.3
    # The steps are solved in the order of their path values, whatever order they come in.
    shuffled = np.random.default_rng(1).permutation(16)
    again = fit_weighted_logistic(
        x, y, S[shuffled], l2=1e-4, tol=1e-7, path=path[shuffled], chunk=10
    )
    np.testing.assert_allclose(again.coef, warm.coef[shuffled], atol=1e-6)
    np.testing.assert_array_equal(again.hessians, warm.hessians[shuffled])


def test_every_batch_of_a_path_has_one_shape(rare_class_table, monkeypatch):
    # 50 betas: three segments, so batches of three steps (six members of two rotations); the
    # last batch of the other steps is filled up with repeats, whose results are dropped.
    from iml.training import exact

    x, y, mask = rare_class_table
    betas = 1 / (1 + np.exp(-np.linspace(-4.0, 4.0, 50)))
    S = beta_weighted_sample_weights(y, betas, mask)
    shapes = []
    newton = exact._newton

    def recorded(design, y, S, *args, **kwargs):
        shapes.append(S.shape)
        return newton(design, y, S, *args, **kwargs)

    monkeypatch.setattr(exact, "_newton", recorded)
    path = fit_weighted_logistic(x, y, S, l2=1e-4, tol=1e-7, path=np.log(betas / (1 - betas)))
    assert set(shapes) == {(6, x.shape[0])} and len(shapes) == 17
    monkeypatch.setattr(exact, "_newton", newton)
    alone = fit_weighted_logistic(x, y, S, l2=1e-4, tol=1e-7)
    assert np.all(path.converged)
    np.testing.assert_allclose(path.objective, alone.objective, rtol=1e-6)
    # each member starts from its own neighbour's optimum: starts or Hessians handed to another
    # member of the batch still reach the optima, but with more steps and Hessians than these
    assert np.sum(path.iterations) <= 0.6 * np.sum(alone.iterations)
    assert np.sum(path.hessians) <= 0.15 * np.sum(alone.hessians)


def test_a_path_must_match_the_first_axis():
    args = {"features": np.zeros((4, 2)), "labels": np.array([0, 1, 0, 1])}
    with pytest.raises(ValueError, match=r"path must have shape \(2,\), got \(3,\)"):
        fit_weighted_logistic(**args, sample_weights=np.ones((2, 1, 4)), path=[0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="path must be finite; 1 entries are not"):
        fit_weighted_logistic(**args, sample_weights=np.ones((2, 1, 4)), path=[0.0, np.nan])
    with pytest.raises(ValueError, match=r"sample_weights must be \[P, \.\.\., N\] with a path"):
        fit_weighted_logistic(**args, sample_weights=np.ones(4), path=[0.0])


@pytest.mark.slow
def test_members_are_independent_of_each_other(rare_class_table):
    x, y, mask = rare_class_table
    S = beta_weighted_sample_weights(y, np.array([0.05, 0.9]), mask)
    together = fit_weighted_logistic(x, y, S.reshape(4, -1), l2=1e-3, chunk=3)
    alone = fit_weighted_logistic(x, y, S.reshape(4, -1)[2:3], l2=1e-3)
    np.testing.assert_allclose(together.coef[2], alone.coef[0], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_a_coefficient_whose_optimum_is_at_infinity_keeps_moving_along_a_path():
    # Without a penalty, the level whose rows are all negative has its optimum at -infinity: its
    # Hessian eigenvalue shrinks as its coefficient falls. Steps that dropped eigenvalues below
    # 1e-6 of the largest stopped moving it, and 10 of these 128 members, started from their
    # neighbours' optima, then stalled above the tolerance until the step limit.
    rng = np.random.default_rng(1)
    n, levels, scale = 20_000, 50, 5.0
    category = rng.integers(0, levels, n)
    numeric = rng.normal(size=(n, 4)) * scale
    logit = -2.0 + numeric @ np.array([1.0, -0.6, 0.4, 0.2]) / scale
    logit += rng.normal(size=levels)[category]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    y[category == 0] = 0
    x = np.column_stack([numeric, np.eye(levels)[category]]).astype(np.float32)
    mask = (np.arange(n)[None, :] % 5 != np.arange(2)[:, None]).astype(np.float32)
    betas = 1 / (1 + np.exp(-np.linspace(-4.6, 4.6, 64)))
    S = beta_weighted_sample_weights(y, betas, mask)
    fit = fit_weighted_logistic(x, y, S, path=np.log(betas / (1 - betas)))
    assert np.all(fit.converged) and np.max(fit.iterations) <= 20
    assert np.all(fit.coef[:, :, 4] < -5.0)  # the all-negative level, far out towards -infinity


def test_accelerated_chord_steps_reach_the_same_optima_in_fewer_steps(monkeypatch):
    # A grid of penalties from 1 down to 1e-6 on a table with four one-hot categories, each level
    # from the level above with its Hessians: the chord steps there converge linearly, and
    # Anderson's acceleration of them takes fewer. Without it (its clip 0), every step is the
    # chord step.
    from iml.training import exact

    rng = np.random.default_rng(2)
    n, levels = 6000, 12
    numeric = rng.normal(size=(n, 4))
    logit, columns = -2.0 + numeric @ np.array([1.0, -0.6, 0.4, 0.2]), [numeric]
    for _ in range(4):  # four categories, some of their levels rare
        category = rng.choice(levels, n, p=rng.dirichlet(np.full(levels, 0.5)))
        logit = logit + rng.normal(size=levels)[category]
        columns.append(np.eye(levels)[category])
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
    x = np.column_stack(columns).astype(np.float32)
    mask = (np.arange(n)[None, :] % 5 != np.arange(2)[:, None]).astype(np.float32)
    S = beta_weighted_sample_weights(y, np.array([0.05, 0.3, 0.7, 0.95]), mask)
    grid = 10.0 ** -np.arange(7.0)

    def fitted(clip):
        monkeypatch.setattr(exact, "_ANDERSON_CLIP", clip)
        exact._newton.clear_cache()  # the clip is read when the program is made
        try:
            return fit_weighted_logistic(x, y, S, l2=grid, tol=1e-7)
        finally:
            monkeypatch.undo()
            exact._newton.clear_cache()

    plain, faster = fitted(0.0), fitted(exact._ANDERSON_CLIP)
    assert np.all(plain.converged) and np.all(faster.converged)
    np.testing.assert_allclose(faster.objective, plain.objective, rtol=1e-6)
    below = slice(1, None)  # the levels started from the level above
    assert np.sum(faster.iterations[below]) <= 0.9 * np.sum(plain.iterations[below])


@pytest.mark.slow
def test_members_started_near_their_optimum_need_one_hessian_and_fewer_steps(rare_class_table):
    x, y, mask = rare_class_table
    S = beta_weighted_sample_weights(y, np.array([0.05, 0.5, 0.95]), mask)
    cold = fit_weighted_logistic(x, y, S, l2=1e-3, tol=1e-6)
    loose = fit_weighted_logistic(x, y, S, l2=1e-3, tol=1e-3)
    warm = fit_weighted_logistic(x, y, S, l2=1e-3, tol=1e-6, start=(loose.coef, loose.intercept))
    assert np.all(warm.converged)
    np.testing.assert_allclose(warm.objective, cold.objective, rtol=1e-6)
    assert np.all(warm.iterations <= cold.iterations) and np.all(warm.hessians == 1)
    assert np.all(cold.hessians > 1)  # one Hessian a step from a cold start


def test_a_kept_curvature_is_the_datas_hessian_at_its_last_renewal(rare_class_table):
    x, y, mask = rare_class_table
    S = beta_weighted_sample_weights(y, np.array([0.1, 0.7]), mask)
    fit = fit_weighted_logistic(x, y, S, l2=[1e-2, 1e-4], tol=1e-6, keep_curvature=True)
    assert fit.curvature.shape == (2, 2, 2, 7, 7)
    assert fit_weighted_logistic(x, y, S, l2=1e-4, tol=1e-6).curvature is None
    # The first level, solved from a cold start with a Hessian every step: X^T diag(s p (1 - p)) X
    # in float64 at its fit, with the intercept's column last (the last renewal came a step or
    # two before the fit)
    X = np.concatenate([x, np.ones((len(y), 1), np.float32)], axis=1).astype(np.float64)
    z = fit.coef[0].astype(np.float64) @ x.T.astype(np.float64) + fit.intercept[0][..., None]
    p = 1.0 / (1.0 + np.exp(-z))
    reference = np.einsum("...n,ni,nj->...ij", S * p * (1.0 - p), X, X)
    scale = np.abs(reference).max(axis=(-2, -1), keepdims=True)
    assert np.all(fit.hessians[0] >= 4)
    assert np.max(np.abs(fit.curvature[0] - reference) / scale) < 2e-3
    # The second level starts from the first's curvature: members that formed no Hessian of
    # their own keep it; those that did have moved away from it
    kept, renewed = fit.hessians[1] == 0, fit.hessians[1] > 0
    assert kept.any() and renewed.any()
    np.testing.assert_array_equal(fit.curvature[1][kept], fit.curvature[0][kept])
    moved = np.abs(fit.curvature[1] - fit.curvature[0]).max(axis=(-2, -1)) / scale[..., 0, 0]
    assert np.all(moved[renewed] > 1e-3)


@pytest.mark.slow
def test_a_start_with_its_curvature_needs_fewer_hessians_for_the_same_optimum(rare_class_table):
    # Carrying a looser fit on to the tolerance, as a default sweep carries its chosen penalty's
    # fit: from the looser fit's curvature, members renew their Hessians only where they converge
    # slowly, not all in the first step.
    x, y, mask = rare_class_table
    betas = 1 / (1 + np.exp(-np.linspace(-3.0, 3.0, 16)))
    S = beta_weighted_sample_weights(y, betas, mask)
    loose = fit_weighted_logistic(x, y, S, l2=1e-3, tol=1e-4, keep_curvature=True)
    plain = fit_weighted_logistic(x, y, S, l2=1e-3, tol=1e-7, start=(loose.coef, loose.intercept))
    start = (loose.coef, loose.intercept, loose.curvature)
    carried = fit_weighted_logistic(x, y, S, l2=1e-3, tol=1e-7, start=start)
    assert np.all(plain.converged) and np.all(carried.converged)
    np.testing.assert_allclose(carried.objective, plain.objective, rtol=1e-6)
    np.testing.assert_allclose(carried.coef, plain.coef, atol=1e-4)
    assert np.all(plain.hessians == 1)
    assert np.sum(carried.hessians) <= 0.5 * np.sum(plain.hessians)


def test_a_start_is_checked():
    args = {"features": np.zeros((4, 2)), "labels": np.array([0, 1, 0, 1])}
    start = (np.zeros((2, 1, 2)), np.zeros((2, 1)))
    with pytest.raises(ValueError, match="start and path both"):
        fit_weighted_logistic(**args, sample_weights=np.ones((2, 1, 4)), path=[0.0, 1.0],
                              start=start)  # fmt: skip
    with pytest.raises(ValueError, match=r"start coef must have shape \(2, 1, 2\)"):
        fit_weighted_logistic(
            **args, sample_weights=np.ones((2, 1, 4)), start=(start[0][0], start[1])
        )
    with pytest.raises(ValueError, match="start must be finite"):
        fit_weighted_logistic(**args, sample_weights=np.ones((2, 1, 4)),
                              start=(start[0], np.full((2, 1), np.nan)))  # fmt: skip
    with pytest.raises(ValueError, match=r"start must be \(coef, intercept\) or .* got 1 entries"):
        fit_weighted_logistic(**args, sample_weights=np.ones((2, 1, 4)), start=start[:1])
    curvature = np.broadcast_to(np.eye(3), (2, 1, 3, 3))
    with pytest.raises(ValueError, match=r"start curvature must have shape \(2, 1, 3, 3\)"):
        fit_weighted_logistic(**args, sample_weights=np.ones((2, 1, 4)),
                              start=(*start, curvature[..., :2, :2]))  # fmt: skip
    with pytest.raises(ValueError, match="start curvature must be finite"):
        fit_weighted_logistic(**args, sample_weights=np.ones((2, 1, 4)),
                              start=(*start, curvature * np.nan))  # fmt: skip


@pytest.mark.slow
def test_a_large_batchs_last_members_finish_in_a_batch_of_their_own(rare_class_table, monkeypatch):
    # 160 members, 140 started at their optimum: once no more than 20 are active, the other 20
    # go on in a batch of 32 (padded with repeats).
    from iml.training import exact

    x, y, mask = rare_class_table
    betas = 1 / (1 + np.exp(-np.linspace(-4.0, 4.0, 80)))
    S = beta_weighted_sample_weights(y, betas, mask).reshape(160, -1)
    alone = fit_weighted_logistic(x, y, S, l2=1e-4, tol=1e-7)
    coef, intercept = alone.coef.copy(), alone.intercept.copy()
    coef[140:], intercept[140:] = 0.0, 0.0
    sizes = []
    newton = exact._newton

    def recorded(design, y, S, *args, **kwargs):
        sizes.append(S.shape[0])
        return newton(design, y, S, *args, **kwargs)

    monkeypatch.setattr(exact, "_newton", recorded)
    together = fit_weighted_logistic(x, y, S, l2=1e-4, tol=1e-7, start=(coef, intercept))
    assert sizes == [160, 32]
    assert np.all(together.converged)
    np.testing.assert_allclose(together.objective, alone.objective, rtol=1e-6)
    assert np.all(together.iterations[140:] > together.iterations[:140].max())
    # the same batches without the objectives' sums: the same members
    unsummed = fit_weighted_logistic(x, y, S, l2=1e-4, tol=1e-7, start=(coef, intercept),
                                     objective=False)  # fmt: skip
    assert sizes == [160, 32, 160, 32] and unsummed.objective is None
    np.testing.assert_array_equal(unsummed.coef, together.coef)
    np.testing.assert_array_equal(unsummed.iterations, together.iterations)


def test_a_large_batch_takes_the_same_steps_as_a_small_one_would(rare_class_table, monkeypatch):
    # A batch of at least exact._LARGE members re-tries its line searches and factors its renewed
    # members a share at a time; each member's steps are those of the batch solved whole.
    from iml.training import exact

    x, y, mask = rare_class_table
    betas = 1 / (1 + np.exp(-np.linspace(-4.0, 4.0, 80)))
    S = beta_weighted_sample_weights(y, betas, mask).reshape(160, -1)
    grid = np.array([1.0, 1e-2, 1e-4, 1e-6])  # each level from the level above, lagged Hessians
    exact._newton.clear_cache()
    large = fit_weighted_logistic(x, y, S, l2=grid, tol=1e-7)
    monkeypatch.setattr(exact, "_LARGE", 10**9)
    exact._newton.clear_cache()
    try:
        whole = fit_weighted_logistic(x, y, S, l2=grid, tol=1e-7)
    finally:
        exact._newton.clear_cache()
    assert np.all(large.converged)
    assert np.all(np.sum(large.hessians[1:], axis=1) > 0)  # slow members renewed at each level
    np.testing.assert_array_equal(large.iterations, whole.iterations)
    np.testing.assert_array_equal(large.hessians, whole.hessians)
    np.testing.assert_allclose(large.objective, whole.objective, rtol=1e-6)


def test_work_in_chunks_covers_the_wanted_members_only():
    import jax.numpy as jnp

    from iml.training.exact import _chosen, _in_chunks

    want = jnp.asarray(np.random.default_rng(0).uniform(size=50) < 0.3).at[3].set(True)
    values = jnp.arange(50, dtype=jnp.float32) + 1.0

    def f(k):
        return values if k is None else values[k]

    expected = np.where(np.asarray(want), np.asarray(values), 0.0)
    for m in (4, 7, 50, 64):  # several rounds, one round, all members at once
        np.testing.assert_array_equal(_in_chunks(want, f, m), expected)
    np.testing.assert_array_equal(_in_chunks(jnp.zeros(50, bool), f, 64), np.zeros(50))
    first = np.asarray(_chosen(want, 4))
    assert np.all(np.asarray(want)[first]) and len(set(first.tolist())) == 4
    np.testing.assert_array_equal(_chosen(want, 50), np.arange(50))


def test_a_large_batchs_line_searches_in_shares_take_the_same_steps(rare_class_table, monkeypatch):
    # Hessians a ten-thousandth of the data's make every member's first steps far too long: the
    # line searches take further trials for all 128 members (16 at a time in a large batch),
    # steps that fail every trial are damped (their members factored again), and slow members
    # get new Hessians (only theirs factored again).
    import jax.numpy as jnp

    from iml.training import exact
    from iml.training.exact_design import Design, data_hessians

    x, y, mask = rare_class_table
    betas = 1 / (1 + np.exp(-np.linspace(-4.0, 4.0, 64)))
    weights = beta_weighted_sample_weights(y, betas, mask).reshape(128, -1)
    S = jnp.asarray(weights)
    design, labels = Design.of(x), jnp.asarray(y, jnp.float32)
    theta = np.zeros((128, x.shape[1] + 1), np.float32)
    theta[:, -1] = exact.intercept_optima(weights, y)
    p = 1 / (1 + np.exp(-theta[:, -1:]))
    H = 1e-4 * data_hessians(design, S * jnp.asarray(p * (1 - p)))
    P = jnp.full(theta.shape, 1e-3, jnp.float32).at[:, -1].set(0.0)

    def solve():
        exact._newton.clear_cache()
        solved = exact._newton(design, labels, S, P, jnp.asarray(theta), H, jnp.float32(1e-6),
                               jnp.int32(50), jnp.int32(0), jnp.int32(0))  # fmt: skip
        return [np.asarray(a) for a in solved]

    try:
        large = solve()
        monkeypatch.setattr(exact, "_LARGE", 10**9)
        whole = solve()
    finally:
        exact._newton.clear_cache()
    theta_l, grad_l, _, objective_l, iterations_l, hessians_l = large
    assert np.all(np.max(np.abs(grad_l), axis=1) <= 1e-6)
    np.testing.assert_array_equal(iterations_l, whole[4])
    np.testing.assert_array_equal(hessians_l, whole[5])
    np.testing.assert_allclose(objective_l, whole[3], rtol=1e-6)
    np.testing.assert_allclose(theta_l, whole[0], atol=1e-5)


def test_intercept_optima_zero_the_gradient_of_an_intercept_alone(rare_class_table):
    from iml.training.exact import intercept_optima

    _, y, mask = rare_class_table
    betas = np.array([0.02, 0.3, 0.9])
    s = beta_weighted_sample_weights(y, betas, mask).reshape(-1, len(y))
    one_class = np.where(y == 1, 0.0, 1.0).astype(np.float32)[None]  # weight on negatives only
    s = np.concatenate([s, one_class])
    b = intercept_optima(s, y)
    assert b.shape == (len(s),)
    # the weighted log loss's derivative in b, sum_i s_i (sigmoid(b) - y_i), in float64
    s64 = s[:-1].astype(np.float64)
    p = 1 / (1 + np.exp(-b[:-1, None].astype(np.float64)))  # [K, 1]
    gradient = np.sum(s64 * (p - y[None]), axis=1)
    total = s64.sum(axis=1)
    assert np.all(np.abs(gradient) <= 1e-6 * total), gradient / total
    assert b[-1] == 0.0  # no positive weight: the intercept starts at 0


def test_a_path_of_fits_makes_only_its_newton_program():
    # Starts, weights, scalars and the design's table of pair products reach the device from the
    # host: a fit compiles its Newton program alone, and no program for a conversion, a gather,
    # the table or the cold start (rows and features of a size no other test uses, so nothing
    # is cached).
    x, y, s, path = _small_path(3, 1237)
    with _jax_log() as logged:
        fit = fit_weighted_logistic(x, y, s, l2=1e-3, path=path)
    messages = [message for _, message in logged]
    names = {m.split("jit(")[1].split(")")[0] for m in messages if m.startswith("Compiling jit(")}
    assert "_newton" in names, messages
    assert names == {"_newton"}, names
    assert np.all(fit.grad_norm <= 1e-6)


@pytest.mark.parametrize(("objective", "n"), [(True, 1301), (False, 1311)])
def test_a_newton_program_compiled_ahead_is_the_one_the_fit_runs(objective, n):
    # The design's shapes start the path's first Newton program compiling in a thread
    # (compile_ahead, asked for by Design.of): XLA compiles the program once, in that thread,
    # for the batch size the fit then runs (another size would be compiled again, on the
    # fit's own thread), and a second design of the same shapes starts no thread (rows of a
    # size no other test uses, so nothing is cached). A fit that sums no objectives runs the
    # program compiled ahead for such fits.
    import functools

    from iml.training import exact
    from iml.training.exact_design import Design

    x, y, s, path = _small_path(4, n)
    ahead = functools.partial(exact.compile_ahead, members=exact.path_batch(5, 3, n),
                              objective=objective)  # fmt: skip
    with _jax_log() as logged:
        fit = fit_weighted_logistic(x, y, s, l2=1e-3, path=path, objective=objective,
                                    design=Design.of(x, shapes_known=ahead))  # fmt: skip
        Design.of(x, shapes_known=ahead)  # asked before: no thread
        assert not exact._AHEAD
    compiled = [thread for thread, message in logged
                if message.startswith("Finished XLA compilation of jit(_newton)")]  # fmt: skip
    assert compiled == ["iml-compile-ahead"], compiled
    assert np.all(fit.grad_norm <= 1e-6)


def test_a_fit_that_sums_no_objectives_fits_the_same_members():
    # objective=False leaves out the last pass over the rows, and nothing else: the members,
    # their steps and their Hessians are the same bits.
    x, y, s, path = _small_path(7, 1319)
    summed = fit_weighted_logistic(x, y, s, l2=[1e-2, 1e-3], path=path)
    unsummed = fit_weighted_logistic(x, y, s, l2=[1e-2, 1e-3], path=path, objective=False)
    assert unsummed.objective is None and summed.objective.shape == (2, 5, 3)
    assert np.isfinite(summed.objective).all()
    for name in ("coef", "intercept", "grad_norm", "iterations", "hessians"):
        np.testing.assert_array_equal(getattr(unsummed, name), getattr(summed, name), name)


def test_a_compile_ahead_that_fails_is_logged_and_the_fit_compiles_its_own(monkeypatch, caplog):
    import functools

    from iml.training import exact
    from iml.training.exact_design import Design

    def broken(*args, **kwargs):
        raise RuntimeError("no program")

    monkeypatch.setattr(exact, "_newton", type("Broken", (), {"lower": staticmethod(broken)}))
    rng = np.random.default_rng(5)
    n = 1303
    x = rng.normal(size=(n, 2)).astype(np.float32)
    with caplog.at_level(logging.WARNING, logger=exact.__name__):
        Design.of(x, shapes_known=functools.partial(exact.compile_ahead, members=4))
        exact._join_ahead()
    assert "compiling the Newton program ahead failed" in caplog.text
    assert "no program" in caplog.text
    monkeypatch.undo()
    y = (x[:, 0] > 0).astype(np.int32)
    s = beta_weighted_sample_weights(y, np.array([0.3, 0.6]), np.ones((2, n), np.float32))
    fit = fit_weighted_logistic(x, y, s.reshape(4, n), l2=1e-3)
    assert np.all(fit.grad_norm <= 1e-6)


# JAX warns at any fork; the child here reads two Python containers and leaves
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_a_forked_child_forgets_the_programs_its_parent_compiled_ahead():
    import functools
    import os

    from iml.training import exact
    from iml.training.exact_design import Design

    x = np.random.default_rng(6).normal(size=(1307, 2)).astype(np.float32)
    Design.of(x, shapes_known=functools.partial(exact.compile_ahead, members=4))
    assert exact._ASKED  # the parent asked
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing asked, no thread to wait for
        os.write(write, b"1" if not exact._ASKED and not exact._AHEAD else b"0")
        os._exit(0)
    os.close(write)
    try:
        got = os.read(read, 1)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    exact._join_ahead()
    assert got == b"1"


@contextlib.contextmanager
def _jax_log():
    """JAX's log while inside, compiles included, from every thread: ``[(thread name,
    message)]``, filled as they are logged."""
    import jax

    logged: list[tuple[str, str]] = []

    class Heard(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logged.append((record.threadName, record.getMessage()))

    heard, logger = Heard(), logging.getLogger("jax")
    logger.addHandler(heard)
    before = jax.config.jax_log_compiles
    jax.config.update("jax_log_compiles", True)  # in every thread, not only this one
    try:
        yield logged
    finally:
        jax.config.update("jax_log_compiles", before)
        logger.removeHandler(heard)


def _small_path(seed: int, n: int):
    """``(x [n, 3], y [n], s [5, 3, n], path [5])``: a path of 5 betas over 3 rotations of all
    rows, on a table of ``n`` rows (a size no other test uses keeps its programs its own)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x[:, 0]))).astype(np.int32)
    betas = 1 / (1 + np.exp(-np.linspace(-2.0, 2.0, 5)))
    s = beta_weighted_sample_weights(y, betas, np.ones((3, n), np.float32))
    return x, y, s, np.log(betas / (1 - betas))


def test_compiling_ahead_names_a_bad_count():
    from iml.training import exact
    from iml.training.exact_design import Design

    shapes = []
    Design.of(np.ones((8, 2), np.float32), shapes_known=shapes.append)
    with pytest.raises(ValueError, match="members must be an integer >= 1"):
        exact.compile_ahead(shapes[0], 0)
    with pytest.raises(ValueError, match="n_rows must be an integer >= 1"):
        exact.path_batch(5, 3, 0)


def test_compiling_ahead_asks_once_for_each_shape_and_objective(monkeypatch):
    # A program that sums the objectives and one that does not are two programs: each is asked
    # for once, whatever the order of the asks.
    import threading

    from iml.training import exact
    from iml.training.exact_design import Design

    asked = []
    monkeypatch.setattr(
        exact, "_compiled_or_logged", lambda objective, *args: asked.append(objective)
    )
    monkeypatch.setattr(exact, "_ASKED", set())
    monkeypatch.setattr(exact, "_AHEAD", [])
    monkeypatch.setattr(exact, "_AHEAD_LOCK", threading.Lock())
    shapes = []
    Design.of(np.ones((9, 2), np.float32), shapes_known=shapes.append)
    for objective in (True, False, True, False):
        exact.compile_ahead(shapes[0], 4, objective=objective)
    exact.compile_ahead(shapes[0], 8, objective=False)
    exact._join_ahead()
    assert sorted(asked) == [False, False, True]  # the threads may run in any order


@pytest.mark.parametrize("K", [8, 128])
def test_a_first_step_without_renewals_is_the_chord_step_of_the_hessians_given(K):
    # With renew_first = 0 and no member slow yet, the first step factors the Hessians it was
    # given (with the ridge and the floor of 1e-6 of each one's largest curvature) and takes
    # their chord step: a small batch factors all its members at once, a large one in groups.
    import jax.numpy as jnp

    from iml.training import exact
    from iml.training.exact_design import FLOOR, Design

    rng = np.random.default_rng(11)
    n = 1327
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x[:, 0]))).astype(np.float32)
    S = (rng.uniform(0.5, 1.5, size=(K, n)) / n).astype(np.float32)
    design = Design.of(x)
    X = np.asarray(design.X, np.float64)
    theta = (0.1 * rng.normal(size=(K, 4))).astype(np.float32)
    P = np.full((K, 4), 1e-2, np.float32)
    P[:, -1] = 0.0
    z = theta.astype(np.float64) @ X.T
    p = 1 / (1 + np.exp(-z))
    v = S * p * (1 - p)
    H = np.einsum("kn,ni,nj->kij", v, X, X)  # the data's curvature at the start
    g = (S * (p - y)) @ X + P * theta
    A = (
        H
        + np.stack([np.diag(row) for row in P])
        + FLOOR * np.eye(4) * H.max(axis=(1, 2))[:, None, None]
    )
    chord = np.linalg.solve(A, g[..., None])[..., 0]
    solved = exact._newton(design, jnp.asarray(y), jnp.asarray(S), jnp.asarray(P),
                           jnp.asarray(theta), jnp.asarray(H, jnp.float32), jnp.float32(1e-12),
                           jnp.int32(1), jnp.int32(0), jnp.int32(0))  # fmt: skip
    assert np.asarray(solved.hessians).sum() == 0  # no renewal: the given Hessians were used
    np.testing.assert_allclose(np.asarray(solved.theta), theta - chord, rtol=1e-3, atol=1e-5)
