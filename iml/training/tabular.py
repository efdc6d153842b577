"""The ensemble trainer on one in-memory table: thousands of small members as one program.

This is how the sweeps (:mod:`iml.pipeline.sweep`) train: for every loss of a grid
(:func:`iml.loss_grid`), every seed and every rotation of the nested cross-validation
(:mod:`iml.data.folds`), one member of a small Flax model (:mod:`iml.models.small`) is trained on
the rotation's training rows under its own loss. Each member is the ensemble trainer's
(:mod:`iml.training.member`: its own Adam state and learning rate, plateau decay and early
stopping on its own validation loss), configured by :data:`TABULAR_DEFAULTS`. Only where batches
come from differs from :mod:`iml.training.trainer`: the whole table lives on the device, an epoch
is one jitted ``lax.scan`` over minibatches (:mod:`iml.training.tabular_program`), and the
``K = n_seeds x n_losses x n_rotations`` members, on axes ``[seed, loss, rotation]``, share each
minibatch's rows: the members of a seed share its order and initialisation (common random
numbers), and a rotation's training mask weights the rows that count for its members.

Logistic members under the beta-weighted and the B-weighted log loss and the class-weighted
softmax cross-entropy are convex problems, which the default solver fits to their optimum
(:mod:`iml.training.exact`). Early-stopped Adam stops where the validation loss stops falling,
which where the weighted loss is nearly flat (a small ``beta`` on a rare class) can be far from
the optimum: the scores are then not loss-calibrated (Definition 2) and no correction can make
them calibrated. The B-weighted log loss of eq. ``b-loss-multi`` splits by class, output ``c``
being the logistic regression of ``1{y = c}`` in which row ``i`` weighs ``B[y_i, c]``; the
class-weighted softmax cross-entropy is multinomial logistic regression with row ``i`` weighted
``w[y_i]``.

The ridge is part of the fit a correction inverts: a heavily shrunk model reports scores less
extreme than the optimal rule's. By default (``l2 = "auto"``) each member's coefficient is chosen on
its own validation folds by its own loss, on features standardised on its training folds: the
smallest penalty whose validation loss the rows cannot tell from the lowest
(:func:`chosen_penalty`), or, with ``l2_choice = "lowest_loss"``, the lowest, as a scikit-learn
pipeline of ``StandardScaler`` and ``LogisticRegressionCV`` would at each weight. The exact solver
compares a beta-weighted member's levels at a tenfold looser tolerance than it fits, and carries
only the chosen level on to the full one: levels whose validation losses lie within that looser
fit's error of each other are tied, and either may be kept.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from numpy.typing import ArrayLike
from tqdm.auto import tqdm

from iml import _validation as V
from iml import losses as L
from iml._device import ELEMENTAL_EMITTERS, library_products_only, to_device
from iml.data.folds import FoldSplit
from iml.grids import LossGrid, loss_grid
from iml.models.small import LogisticRegression
from iml.spec import LossLike, LossSpec
from iml.training.exact import (
    beta_weighted_sample_weights,
    compile_ahead,
    fit_weighted_logistic,
    path_batch,
)
from iml.training.exact_design import Design
from iml.training.exact_multinomial import fit_weighted_softmax
from iml.training.tabular_program import (
    Data,
    blocked,
    epoch_fn,
    init_state,
    member_logits,
    member_test_logits,
    standardized_rows,
)
from iml.training.train_config import TrainConfig

Array = jax.Array

__all__ = [
    "TABULAR_DEFAULTS",
    "MemberFit",
    "check_labels",
    "check_table_config",
    "out_of_fold_logits",
    "table_solver",
    "train_tabular",
]

# The looser tolerance, over ``config.tol``, at which a grid's levels of penalty are compared.
_SCREEN = 10.0

TABULAR_DEFAULTS = TrainConfig(
    learning_rate=0.01,
    batch_size=512,
    eval_batch_size=1024,
    plateau_patience=2,
    min_rel_delta=1e-4,
    flip=False,
    normalize="none",
    l2="auto",
    standardize=True,
)
"""The trainer's configuration for a table's small models: the ridge chosen per member on its
validation folds from :data:`~iml.training.L2_GRID` (``l2="auto"``), on features standardised on
its training folds; where Adam trains (models and losses the exact solver does not fit): 0.01 on
minibatches of 512 rows shared by the members of a seed, the learning rate divided by 10 after 2
epochs without a relative improvement of 1e-4, early stopping after 5, validation in blocks of
1,024 rows; no image flips or normalisation. The default of :func:`train_tabular` and of the
sweeps."""


class MemberFit(NamedTuple):
    """Members trained together, on axes ``[seed, loss, rotation]``.

    Attributes:
      params: the best parameters of every member (a dict of stacked arrays).
      best_val: each member's best validation loss.
      best_epoch: the epoch (1-based) of that loss (Newton steps, for the exact solver).
      epochs_run: epochs the program ran (until every member stopped or ``max_epochs``; the
        most Newton steps of any member, for the exact solver).
      test_logits: logits of each member on its rotation's test rows, ``[S, nb, R, T]``
        (rotation ``r``'s rows are ``splits[r].test``; entries past its length are padding).
      l2: each member's ridge coefficient ``[S, nb, R]``, in the config's units: the one
        ``l2 = "auto"`` chose from ``l2_grid``, or the config's number.
      hessians: for the exact solver, the Hessians formed for each member at its chosen
        coefficient ``[S, nb, R]`` (summed over the classes of the B-weighted loss); None for
        Adam.
    """

    params: dict[str, np.ndarray]
    best_val: np.ndarray
    best_epoch: np.ndarray
    epochs_run: int
    test_logits: np.ndarray
    l2: np.ndarray | None = None
    hessians: np.ndarray | None = None


def check_labels(labels: ArrayLike, n: int, losses: LossSpec) -> np.ndarray:
    y = np.asarray(labels)
    V.check_shape("labels", y, (n,))
    if not losses.multiclass:
        if not np.isin(y, (0, 1)).all():
            raise ValueError("labels must be 0 or 1 (the losses are binary)")
        if y.min() == y.max():
            raise ValueError("labels hold a single class; both 0 and 1 are needed")
        return y.astype(np.int32)
    k = losses.n_classes
    if y.dtype.kind not in "iu" and not np.array_equal(y, np.round(y)):
        raise ValueError("labels must be class indices (integers)")
    if y.size and (y.min() < 0 or y.max() >= k):
        raise ValueError(f"labels must be class indices in [0, {k}) for the {k}-class losses")
    return y.astype(np.int32)


def check_table_config(config: TrainConfig, name: str = "config") -> TrainConfig:
    """Check that ``config`` (the argument ``name``) is a :class:`TrainConfig` a table can take,
    and return it with the image settings left at ``None`` set for feature rows
    (:meth:`TrainConfig.for_inputs`): no flips, no normalisation.

    Raises:
      ValueError: naming ``name`` and what is wrong: image flips or normalisation set
        explicitly.
    """
    if not isinstance(config, TrainConfig):
        raise ValueError(f"{name} must be a TrainConfig, got {type(config).__name__}")
    if config.flip or config.normalize not in (None, "none"):
        raise ValueError(
            f"{name}.flip and {name}.normalize apply to images; a table's config leaves them "
            "unset (None) or sets flip=False, normalize='none'"
        )
    return config.for_inputs(images=False)


def table_solver(model: nn.Module, record: L.LossRecord, solver: str = "auto") -> str:
    """The solver that trains a table's members, decided here for every caller: ``"exact"``
    where it fits ``model`` under losses of ``record`` (logistic regression under a loss with
    an exact form, :attr:`iml.losses.LossRecord.exact`) and ``solver`` is not ``"adam"``; else
    ``"adam"``.

    Raises:
      ValueError: for ``solver="exact"`` where the exact solver does not fit, naming the
        losses it fits.
    """
    fits = isinstance(model, LogisticRegression) and record.exact is not None
    if solver == "exact" and not fits:
        exact = sorted(n for n in L.registered() if L.lookup(n).exact is not None)
        raise ValueError(
            f"the exact solver fits logistic regression under a loss with an exact form "
            f"({', '.join(exact)}), not {type(model).__name__} under the {record.title}; use "
            "'adam'"
        )
    return "exact" if fits and solver != "adam" else "adam"


def _check_model(model: nn.Module, x: np.ndarray, losses: LossSpec) -> None:
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a Flax module, got {type(model).__name__}")
    want = (2, losses.n_classes) if losses.multiclass else (2,)

    def logits(rows: Array) -> Array:
        return model.init_with_output(jax.random.key(0), rows, train=False)[0]

    got = jax.eval_shape(logits, jax.ShapeDtypeStruct((2, x.shape[1]), jnp.float32)).shape
    if got != want:
        raise ValueError(
            f"model returns logits of shape {got} on 2 rows; the {losses.describe()} needs "
            f"{want} (a small model's n_outputs: 1 for a binary loss, the classes otherwise)"
        )


def train_tabular(
    model: nn.Module,
    features: ArrayLike,
    labels: ArrayLike,
    splits: Sequence[FoldSplit],
    losses: LossLike | LossGrid,
    seeds: ArrayLike,
    config: TrainConfig = TABULAR_DEFAULTS,
    *,
    progress: bool | str = False,
) -> MemberFit:
    """Train ``len(seeds) x len(losses) x len(splits)`` members of ``model`` on one table.

    Member ``(s, b, r)`` minimises loss ``b`` of the grid (for a beta, the beta-weighted
    cross-entropy, eq. ``b-loss-bin``) over the training rows of ``splits[r]``. Where the exact
    solver applies (:func:`table_solver`) and ``config.solver`` allows, every member is
    fitted to its optimum by full-batch Newton steps, and all seeds share it; otherwise member
    ``(s, b, r)`` trains by the ensemble trainer's Adam steps from the initialisation and the
    minibatch order of ``seeds[s]``. Members are independent: training one alone (one loss, seed
    and split) gives the same parameters.

    The ridge: ``config.l2`` a number, or ``"auto"``, which fits each member at every coefficient
    of ``config.l2_grid`` and keeps, per (seed, loss, rotation), the fit that ``config.l2_choice``
    picks from its losses of its own on the rotation's validation rows (:func:`chosen_penalty`),
    inside the one program. With ``config.standardize`` the ridge is that of features
    standardised on each rotation's training rows: the exact solver's coefficients stay in the
    features' own units; Adam's members see the standardised features (their parameters and test
    logits are in those units).

    Args:
      model: a Flax module on rows ``[n, d]``, e.g. :func:`iml.models.build_model`;
        ``[n]`` logits for a binary loss, ``[n, classes]`` for a multiclass one.
      features: ``[N, d]`` inputs.
      labels: ``[N]`` labels in ``{0, 1}``, or class indices for multiclass losses.
      splits: rotations of the nested cross-validation (:func:`iml.data.nested_cv_splits`).
      losses: ``[nb]`` class weights in ``(0, 1)``, or any grid :func:`loss_grid` reads.
      seeds: ``[S]`` non-negative integer seeds.
      config: the trainer's configuration (default :data:`TABULAR_DEFAULTS`); ``eval_batch_size``
        is the block of validation and test rows scored at once. Tables take no image flips or
        normalisation.
      progress: show a tqdm bar over epochs (a string is used as its description).

    Returns:
      A :class:`MemberFit` (NumPy arrays).
    """
    config = check_table_config(config)
    x = np.asarray(features, dtype=np.float32)
    grid = loss_grid(losses)
    spec = grid.spec
    s = np.asarray(V.check_seeds("seeds", seeds), np.int64)
    if x.ndim != 2:
        raise ValueError(f"features must be [N, d]; got shape {x.shape}")
    y = check_labels(labels, x.shape[0], spec)
    _check_model(model, x, spec)
    if not splits:
        raise ValueError("splits is empty")
    n = x.shape[0]
    train_mask = np.zeros((len(splits), n), np.float32)
    for r, split in enumerate(splits):
        train_mask[r, split.train] = 1.0
        if split.val.size == 0:
            raise ValueError(f"rotation {split.rotation} has no validation rows (early stopping)")
    solver = table_solver(model, spec.record, config.solver)
    if config.l2_scale == "per_weight" and spec.record.row_weight is None:
        raise ValueError(
            "config.l2_scale='per_weight' measures the ridge against a loss's class weights; "
            f"the {spec.describe()} has none known (use l2_scale='paper')"
        )
    if solver == "exact":
        return _fit_exactly(x, y, splits, grid, s, train_mask, config)
    return _train_by_adam(model, x, y, splits, spec, s, train_mask, config, progress, grid.keys)


def diverged_message(
    diverged: np.ndarray,
    seeds: np.ndarray,
    keys: Sequence[str],
    splits: Sequence[FoldSplit],
    spec: LossSpec,
    shown: int = 5,
) -> str:
    """What to say of members stopped for a non-finite loss or gradient: ``diverged [S, nb, G,
    R]`` (seed, loss, ridge level, rotation). Names the first ``shown`` (seed, loss, rotation)
    members, and, for a loss without a logit form, suggests one: its loss computed from the
    scores rounds to ``log 0`` once a score rounds to 0 or 1, where a logit form stays finite."""
    members = np.argwhere(diverged.any(axis=2))
    named = [f"seed {seeds[i]}, loss {keys[b]}, rotation {splits[r].rotation}"
             for i, b, r in members[:shown]]  # fmt: skip
    more = f" and {len(members) - shown} more" if len(members) > shown else ""
    message = (
        f"{len(members)} of {int(np.prod(diverged.shape)) // diverged.shape[2]} members (seed, "
        f"loss, rotation) stopped for a non-finite loss or gradient at "
        f"{int(diverged.sum())} of {diverged.size} fits and keep their best parameters: "
        + "; ".join(named)
        + more
    )
    if spec.record.logits_loss is None:
        return message + (
            f". The {spec.describe()} has no logit form: give its LossRecord a logits_loss (its "
            "loss computed from the model's logits), which stays finite where the scores round "
            "to 0 or 1; or lower the learning rate"
        )
    return message + "; lower the learning rate"


def _train_by_adam(
    model: nn.Module,
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[FoldSplit],
    spec: LossSpec,
    s: np.ndarray,
    train_mask: np.ndarray,
    config: TrainConfig,
    progress: bool | str,
    keys: Sequence[str],
) -> MemberFit:
    """The members by the ensemble trainer's Adam steps; with ``l2 = "auto"`` every (seed, loss,
    rotation) trains at each coefficient of the grid, and keeps the one ``config.l2_choice``
    picks. ``keys`` name the losses in a warning."""
    n = x.shape[0]
    levels = _ridge_levels(config)
    (nb,), G, R = spec.batch_shape, len(levels), len(splits)
    share = train_mask / train_mask.sum(axis=1, keepdims=True)
    totals = _total_weights(spec, y, share, config)  # [nb, R]
    # The grid rides on the loss axis: loss i at level g is entry i * G + g.
    l2 = np.repeat(totals, G, axis=0) * np.tile(levels, nb)[:, None]
    losses = spec if G == 1 else jax.tree.map(lambda a: jnp.repeat(a, G, axis=0), spec)
    center, scale = _standardizer(x, train_mask, config.standardize)
    val_idx, val_weight = blocked([split.val for split in splits], config.eval_batch_size)
    data = Data(
        x=jnp.asarray(x),
        y=jnp.asarray(y, jnp.int32 if spec.multiclass else jnp.float32),
        train_mask=jnp.asarray(train_mask),
        val_idx=jnp.asarray(val_idx),
        val_weight=jnp.asarray(val_weight),
        losses=losses,
        seeds=jnp.asarray(s, jnp.uint32),
        l2=jnp.asarray(l2, jnp.float32),
        center=jnp.asarray(center),
        scale=jnp.asarray(scale),
    )
    state = init_state(model, config, data)
    epoch = epoch_fn(model, config, n)
    bar = None
    if progress:
        desc = progress if isinstance(progress, str) else "epochs"
        bar = tqdm(total=config.max_epochs, desc=desc, leave=False, file=sys.stderr)
    epochs_run = 0
    try:
        for e in range(config.max_epochs):
            state = epoch(state, data, jnp.asarray(e, jnp.int32))
            epochs_run = e + 1
            n_active = int(jnp.sum(~state.stopped))
            if bar is not None:
                bar.update(1)
                bar.set_postfix(active=n_active)
            if n_active == 0:
                break
    finally:
        if bar is not None:
            bar.close()
    S = len(s)
    diverged = np.asarray(state.diverged).reshape(S, nb, G, R)
    if diverged.any():
        warnings.warn(diverged_message(diverged, s, keys, splits, spec), RuntimeWarning,
                      stacklevel=2)  # fmt: skip
    # Each (seed, loss, rotation) keeps a level by config.l2_choice (chosen_penalty): of lowest
    # validation loss at its best epoch, or from its validation rows' losses there.
    variables = {"params": state.best_params, "batch_stats": state.best_batch_stats}
    chosen = np.argmin(np.asarray(state.best_val_loss).reshape(S, nb, G, R), axis=2)
    if G > 1 and config.l2_choice != "lowest_loss":
        moments = _adam_penalty_moments(model, variables, data, losses, G)
        _, chosen = chosen_level(moments, jnp.asarray(levels), config.l2_choice)
        chosen = np.asarray(chosen)

    def pick(a: Array) -> np.ndarray:
        a = np.asarray(a).reshape(S, nb, G, R, *np.shape(a)[3:])
        index = chosen.reshape(S, nb, 1, R, *([1] * (a.ndim - 4)))
        return np.take_along_axis(a, index, axis=2)[:, :, 0]

    best = jax.tree.map(pick, variables)
    test_idx, _ = blocked([split.test for split in splits], config.eval_batch_size)
    logits = member_test_logits(model, best, data.x, jnp.asarray(test_idx), data.center, data.scale)
    return MemberFit(
        params=best["params"],
        best_val=pick(state.best_val_loss),
        best_epoch=pick(state.best_epoch),
        epochs_run=epochs_run,
        test_logits=np.asarray(logits),
        l2=levels[chosen],
    )


def _fit_exactly(
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[FoldSplit],
    grid: LossGrid,
    seeds: np.ndarray,
    train_mask: np.ndarray,
    config: TrainConfig,
) -> MemberFit:
    """Every (loss, rotation) member at its optimum, shared by all seeds (a convex problem); with
    ``l2 = "auto"``, at each coefficient of ``config.l2_grid``, keeping the one that
    ``config.l2_choice`` picks from its losses on the rotation's validation rows."""
    spec = grid.spec
    levels = _ridge_levels(config)
    share = train_mask / train_mask.sum(axis=1, keepdims=True)  # [R, N]
    # The members are solved on the features over their standard deviations (all rows, 1 where
    # constant; zeros stay zeros), where the gradient's tolerance means the same for every
    # feature, and their coefficients are taken back to the features' units.
    sd = np.std(x.astype(np.float64), axis=0)
    unit = np.where(sd > 1e-6 * np.maximum(1.0, np.abs(x).max(axis=0)), sd, 1.0)
    xs = x / unit
    # A ridge on standardised features, (l2 / 2) sum_j w'_j^2, is (l2 / 2) sum_j sigma_j^2 w_j^2
    # in the features' own units (w_j = w'_j / sigma_j; centring moves only the intercept, which
    # has no penalty): so the members of every rotation share one design. Each member's
    # multipliers [m, R, d] are the variances on its training rows times its total weight.
    _, scale = _standardizer(x, train_mask, config.standardize)
    totals = _total_weights(spec, y, share, config)
    penalty = totals[..., None] * np.square(scale.astype(np.float64))[None] / unit**2
    # A path of class weights (the binary members' case below) starts compiling its first Newton
    # program while the design's table and the sample weights are made. The binary and
    # one-vs-rest fits sum no objectives (objective=False): only their coefficients are used.
    binary = spec.record.exact == "logistic"
    first = path_batch(spec.batch_shape[0], len(train_mask), len(y)) if binary else 0
    ahead = functools.partial(compile_ahead, members=first, objective=False) if binary else None
    options = {"tol": config.tol, "max_iter": config.max_newton_steps,
               "design": Design.of(xs, shapes_known=ahead), "penalty_scale": penalty}  # fmt: skip
    if spec.record.exact == "one_vs_rest":
        B = np.asarray(spec.params["B"], np.float64)  # [m, n, n]
        parts = []
        for c in range(spec.n_classes):
            # output c: the logistic regression of 1{y = c} whose row i weighs B[y_i, c]
            weights = (B[:, y, c][:, None, :] * share[None]).astype(np.float32)
            parts.append(fit_weighted_logistic(xs, y == c, weights, l2=levels, objective=False,
                                               **options))  # fmt: skip
        fit = jax.tree.map(lambda *a: np.stack(a, axis=-1), *parts)  # classes last
        most = {"iterations": fit.iterations.max(axis=-1), "grad_norm": fit.grad_norm.max(axis=-1)}
        fit = fit._replace(hessians=fit.hessians.sum(axis=-1), **most)
    elif spec.record.exact == "softmax":
        w = np.asarray(spec.params["class_weights"], np.float64)  # [m, n]
        weights = (w[:, y][:, None, :] * share[None]).astype(np.float32)
        fit = fit_weighted_softmax(xs, y, weights, spec.n_classes, l2=levels, **options)
    else:
        weights = beta_weighted_sample_weights(y, grid.weights, train_mask)  # [m, R, N]
        b = np.asarray(grid.weights, np.float64)
        path = np.log(b) - np.log1p(-b)  # a path in logit(beta): warm starts
        if len(levels) > 1:
            return _fit_beta_levels(x, y, splits, xs, unit, weights, path, levels, spec,
                                    seeds, config, options)  # fmt: skip
        fit = fit_weighted_logistic(xs, y, weights, l2=levels, path=path, objective=False,
                                    **options)  # fmt: skip
    coef = fit.coef / (unit[:, None] if spec.multiclass else unit)  # [G, m, R, d(, n)]
    intercept, steps, grads, hessians = fit.intercept, fit.iterations, fit.grad_norm, fit.hessians
    val, best = _validation_losses_exact(spec, x, y, splits, coef, intercept, levels,
                                         config.l2_choice, config.eval_batch_size)  # fmt: skip

    def chosen(a: np.ndarray) -> np.ndarray:
        return _at_levels(a, best)

    coef, intercept, steps, grads, hessians = map(chosen, (coef, intercept, steps, grads, hessians))
    return _exact_member_fit(x, splits, seeds, config, coef, intercept, steps, grads,
                             hessians, chosen(val), levels[best], stacklevel=4)  # fmt: skip


def _fit_beta_levels(
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[FoldSplit],
    xs: np.ndarray,
    unit: np.ndarray,
    weights: np.ndarray,
    path: np.ndarray,
    levels: np.ndarray,
    spec: LossSpec,
    seeds: np.ndarray,
    config: TrainConfig,
    options: dict,
) -> MemberFit:
    """The beta-weighted members (``weights [m, R, N]`` on the features over ``unit``, ``xs``)
    at every penalty of ``levels``, each member keeping the one ``config.l2_choice`` picks from its
    losses of its own on its validation rows: the levels are compared at a tolerance :data:`_SCREEN`
    times looser than ``config.tol`` (levels whose validation losses lie within that fit's error of
    each other are tied, and either may be kept), and only the chosen level's fit is then carried on
    to ``config.tol``, from there, with the data curvature of its last Hessian. The steps and
    Hessians reported are those of both fits."""
    screen_tol = _SCREEN * config.tol
    screen = fit_weighted_logistic(xs, y, weights, l2=levels, path=path, keep_curvature=True,
                                   objective=False, **{**options, "tol": screen_tol})  # fmt: skip
    _, best = _validation_losses_exact(spec, x, y, splits, screen.coef / unit, screen.intercept,
                                       levels, config.l2_choice,
                                       config.eval_batch_size)  # fmt: skip

    def chosen(a: np.ndarray) -> np.ndarray:
        return _at_levels(a, best)

    penalty = options["penalty_scale"] * levels[best][..., None]
    start = (chosen(screen.coef), chosen(screen.intercept), chosen(screen.curvature))
    screen = screen._replace(curvature=None)
    fit = fit_weighted_logistic(xs, y, weights, l2=1.0, start=start, objective=False,
                                **{**options, "penalty_scale": penalty})  # fmt: skip
    coef = fit.coef / unit
    val = _validation_losses_exact(spec, x, y, splits, coef[None], fit.intercept[None],
                                   np.ones(1))[0][0]  # fmt: skip
    return _exact_member_fit(x, splits, seeds, config, coef, fit.intercept,
                             chosen(screen.iterations) + fit.iterations, fit.grad_norm,
                             chosen(screen.hessians) + fit.hessians, val, levels[best],
                             stacklevel=5)  # fmt: skip


def _at_levels(a: np.ndarray, best: np.ndarray) -> np.ndarray:
    """``a [G, *best.shape, ...]`` at each member's level ``best`` (indices into ``G``):
    ``[*best.shape, ...]``, each member's trailing block taken whole."""
    rest = a.shape[1 + best.ndim :]
    blocks = a.reshape(a.shape[0], best.size, *rest)
    return blocks[best.ravel(), np.arange(best.size)].reshape(*best.shape, *rest)


def _exact_member_fit(
    x: np.ndarray,
    splits: Sequence[FoldSplit],
    seeds: np.ndarray,
    config: TrainConfig,
    coef: np.ndarray,
    intercept: np.ndarray,
    steps: np.ndarray,
    grads: np.ndarray,
    hessians: np.ndarray,
    val: np.ndarray,
    l2: np.ndarray,
    stacklevel: int,
) -> MemberFit:
    """The :class:`MemberFit` of exact members at their chosen penalties ``l2 [m, R]`` (``coef
    [m, R, d(, n)]`` in the features' units, their validation losses ``val [m, R]``), shared by
    all ``seeds``, with their test rows' logits; warns (at ``stacklevel``) of members stopped
    above ``config.tol``."""
    stopped = grads > config.tol
    if stopped.any():
        warnings.warn(
            f"{int(stopped.sum())} of {stopped.size} members stopped with a gradient of up to "
            f"{float(np.max(grads[stopped])):.2g} (tol {config.tol:g}): "
            "raise max_newton_steps, or l2 if classes separate",
            RuntimeWarning,
            stacklevel=stacklevel,
        )
    n_seeds = len(seeds)

    def per_seed(a: np.ndarray) -> np.ndarray:
        return np.broadcast_to(np.asarray(a), (n_seeds, *np.shape(a)))

    params = {"w": per_seed(coef), "b": per_seed(intercept)}
    test_idx, _ = blocked([split.test for split in splits], config.eval_batch_size)
    return MemberFit(
        params=params,
        best_val=per_seed(val).astype(np.float32),
        best_epoch=per_seed(steps),
        epochs_run=int(np.max(steps)),
        test_logits=per_seed(_linear_test_logits(x, test_idx, coef, intercept)),
        l2=per_seed(l2),
        hessians=per_seed(hessians),
    )


def _linear_test_logits(
    x: np.ndarray, idx: np.ndarray, coef: np.ndarray, intercept: np.ndarray
) -> np.ndarray:
    """The logistic models' logits ``x @ w + b`` (:class:`iml.models.LogisticRegression`) of
    members ``coef [m, R, d(, n)]``, ``intercept [m, R(, n)]`` on their rotation's (padded) test
    rows ``idx [R, n_blocks, block]``: ``[m, R, T(, n)]`` float32, computed on the host (one
    matrix product a rotation, of all its members at once, which needs no compiled program)."""
    m, R, d = coef.shape[0], coef.shape[1], x.shape[1]
    w = np.asarray(coef, np.float32).reshape(m, R, d, -1)  # [m, R, d, k]
    k = w.shape[-1]
    rows = idx.reshape(R, -1)
    out = np.empty((m, R, rows.shape[1], k), np.float32)
    for r in range(R):
        if k == 1:  # [m, d] @ [d, T]
            np.matmul(w[:, r, :, 0], x[rows[r]].T, out=out[:, r, :, 0])
            continue
        # [T, d] @ [d, m k]: the members' columns side by side
        z = np.matmul(x[rows[r]], w[:, r].transpose(1, 0, 2).reshape(d, m * k))
        out[:, r] = z.reshape(-1, m, k).transpose(1, 0, 2)
    out += np.asarray(intercept, np.float32).reshape(m, R, 1, k)
    return out.reshape(m, R, rows.shape[1], *coef.shape[3:])


@functools.partial(jax.jit, static_argnums=(0, 4))
def _adam_penalty_moments(
    model: nn.Module, variables: Any, data: Data, losses: LossSpec, levels: int
) -> PenaltyMoments:
    """The :class:`PenaltyMoments` of each Adam member on its rotation's validation rows, a block
    of rows at a time (as its epochs validate): ``losses`` on the members' axis ``[S, nb * G,
    R]``, loss ``i`` at level ``g`` being entry ``i * G + g``; the moments on ``[G, S, nb, R]``."""
    logits = member_logits(model)
    per_loss = jax.vmap(lambda spec, z, y: spec.logits_loss(z, y), in_axes=(0, 1, None),
                        out_axes=1)  # fmt: skip

    def block(total: PenaltyMoments | None, rows: tuple[Array, Array]):
        i, w = rows  # [R, block]
        z = logits(variables, standardized_rows(data.center, data.scale, data.x[i]))
        loss = per_loss(losses, z, data.y[i])  # [S, nb * G, R, block]
        S, M = loss.shape[:2]
        loss = jnp.moveaxis(loss.reshape(S, M // levels, levels, *loss.shape[2:]), 2, 0)
        return penalty_moments(loss, w, total), None

    return _summed_over_blocks(block, data.val_idx, data.val_weight)


def _validation_losses_exact(
    spec: LossSpec,
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[FoldSplit],
    coef: np.ndarray,
    intercept: np.ndarray,
    levels: np.ndarray,
    choice: str = "lowest_loss",
    block: int = 1024,
) -> tuple[np.ndarray, np.ndarray]:
    """The mean loss ``[G, m, R]`` of every member at every penalty of ``levels [G]`` on its
    rotation's validation rows (its own loss, :meth:`iml.LossSpec.logits_loss`), for ``coef
    [G, m, R, d(, n)]``, and the level each member keeps ``[m, R]`` by ``choice``
    (:func:`chosen_level`); the rows are taken ``block`` at a time."""
    idx, weight = blocked([split.val for split in splits], block)
    labels = to_device(y, np.int32 if spec.multiclass else np.float32)
    moments = _exact_penalty_moments(spec, to_device(x), labels, to_device(idx),
                                     to_device(weight), to_device(coef),
                                     to_device(intercept))  # fmt: skip
    if len(levels) == 1:  # nothing to choose between: the one level's mean loss
        total = np.asarray(moments.total)  # [1, m, R]
        return total / np.asarray(moments.n), np.zeros(total.shape[1:], np.int32)
    mean, best = chosen_level(moments, to_device(levels), choice)
    return np.asarray(mean), np.asarray(best)


def _exact_penalty_moments(
    spec: LossSpec, x: Array, y: Array, idx: Array, weight: Array, coef: Array, intercept: Array
) -> PenaltyMoments:
    """The :class:`PenaltyMoments` ``[G, m, R]`` of every member's fits ``coef [G, m, R, d(,
    n)]`` on its rotation's validation rows ``idx [R, n_blocks, block]`` (``weight``: 1 on a
    row, 0 on padding), a block at a time, in one program (:func:`_penalty_moments_program`)."""
    return _penalty_moments_program()(spec, x, y, idx, weight, coef, intercept)


@functools.cache
def _penalty_moments_program() -> Callable:
    """:func:`_exact_moments` jitted with XLA's elemental emitters and, where XLA has the
    option, its kernel library's reductions left out (:func:`iml._device.library_products_only`):
    options decided once a process, at the first call."""
    return jax.jit(_exact_moments,
                   compiler_options={**ELEMENTAL_EMITTERS, **library_products_only()})  # fmt: skip


def _exact_moments(
    spec: LossSpec, x: Array, y: Array, idx: Array, weight: Array, coef: Array, intercept: Array
) -> PenaltyMoments:
    """:func:`_exact_penalty_moments`, traced."""

    def block(total: PenaltyMoments | None, rows: tuple[Array, Array]):
        i, w = rows  # [R, block]
        features, labels = x[i], y[i]  # [R, block, d], [R, block]

        def level(args):
            c, b = args  # [m, R, d(, n)], [m, R(, n)]
            z = jnp.einsum("rvd,mrd...->mrv...", features, c, precision=jax.lax.Precision.HIGHEST)
            z = z + jnp.expand_dims(b, 2)
            return jax.vmap(lambda s, zm: s.logits_loss(zm, labels))(spec, z)  # [m, R, block]

        return penalty_moments(jax.lax.map(level, (coef, intercept)), w, total), None

    return _summed_over_blocks(block, idx, weight)


def _summed_over_blocks(block: Callable, idx: Array, weight: Array) -> PenaltyMoments:
    """``block(total, (idx_b, weight_b))`` over the blocks of rows ``idx [R, n_blocks, size]``
    (and their ``weight``) in a scan from zero moments (``block(None, rows)`` gives a block's
    own): the block is traced and compiled once, in the scan's body alone."""
    blocks = (jnp.swapaxes(idx, 0, 1), jnp.swapaxes(weight, 0, 1))
    first = jax.tree.map(lambda a: a[0], blocks)
    shapes = jax.eval_shape(lambda rows: block(None, rows)[0], first)
    zeros = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)
    total, _ = jax.lax.scan(block, zeros, blocks)
    return total


#: How far, in standard errors of the paired difference, a level's mean validation loss may lie
#: above the lowest and still be chosen under ``l2_choice = "least_penalty"``.
NEAR_LOWEST = 0.5


class PenaltyMoments(NamedTuple):
    """Sums over a member's validation rows, for each ridge level ``g`` of ``G``, from which
    :func:`chosen_level` chooses: the rows' count ``n [...]``, their losses' sum ``total [G,
    ...]``, and, with ``d_g = loss_g - loss_0`` on each row (against the first level, which keeps
    the sums small where the levels differ little), ``shifted [G, ...]``, the sum of ``d_g``, and
    ``products [G, G, ...]``, the sums of ``d_g d_h``. Sums of blocks of rows add."""

    n: Array
    total: Array
    shifted: Array
    products: Array


def penalty_moments(
    losses: Array, weight: Array, total: PenaltyMoments | None = None
) -> PenaltyMoments:
    """The :class:`PenaltyMoments` of ``losses [G, ..., V]`` on rows of ``weight [..., V]`` (1 on
    a validation row, 0 on padding, whose loss counts for nothing whatever it is), added to
    ``total`` where given."""
    on = weight > 0
    loss = jnp.where(on, losses, 0.0)
    d = loss - loss[:1]
    moments = PenaltyMoments(
        jnp.sum(weight, axis=-1),
        jnp.sum(loss * weight, axis=-1),
        jnp.sum(d * weight, axis=-1),
        jnp.einsum("g...v,h...v->gh...", d * weight, d),
    )
    return moments if total is None else jax.tree.map(jnp.add, total, moments)


@functools.partial(jax.jit, static_argnames="choice")
def chosen_level(
    moments: PenaltyMoments, levels: Array, choice: str = "least_penalty"
) -> tuple[Array, Array]:
    """The ridge level a member keeps under ``l2 = "auto"`` (:data:`iml.training.L2_CHOICES`),
    from its fits' :class:`PenaltyMoments` at each penalty of ``levels [G]``.

    With ``choice = "lowest_loss"`` it keeps the level of lowest mean validation loss, as
    scikit-learn's ``LogisticRegressionCV`` does. With ``"least_penalty"``, ``D_g`` is the mean
    over the rows of ``loss_g - loss_lowest`` and ``se_g`` its standard error, paired over the
    rows (``sqrt(sum (diff - D_g)^2 / (n - 1) / n)``), and the member keeps the smallest penalty
    with ``D_g <= NEAR_LOWEST * se_g``: a penalty the rows cannot tell from a smaller one only
    shrinks the scores towards the prior, and the loss-corrected scores of a shrunk model are
    under-confident (``docs/results/well_specified_sweeps``). A level whose mean loss is not
    finite is never kept while another is; where no level's is, the first is.

    Returns:
      ``(mean [G, ...], chosen [...])``: every level's mean validation loss, and the index into
      ``levels`` each member keeps.
    """
    n = moments.n
    mean = moments.total / n  # [G, ...]
    lowest = jnp.argmin(jnp.where(jnp.isfinite(mean), mean, jnp.inf), axis=0)
    if choice == "lowest_loss":
        return mean, lowest
    G = mean.shape[0]
    at = jnp.take_along_axis(moments.shifted, lowest[None], axis=0)  # [1, ...]
    gap_mean = (moments.shifted - at) / n
    own = jnp.diagonal(moments.products, axis1=0, axis2=1)  # [..., G]
    own = jnp.moveaxis(own, -1, 0)  # [G, ...]
    index = jnp.broadcast_to(lowest[None, None], (1, G, *lowest.shape))
    cross = jnp.take_along_axis(moments.products, index, axis=0)[0]  # [G, ...]: sum d_b d_g
    at_own = jnp.take_along_axis(own, lowest[None], axis=0)
    squares = own - 2.0 * cross + at_own  # sum over rows of (d_g - d_lowest)^2
    spread = jnp.maximum(squares - n * jnp.square(gap_mean), 0.0)
    se = jnp.sqrt(spread / jnp.maximum(n - 1, 1) / n)
    near = gap_mean <= NEAR_LOWEST * se  # [G, ...], true at the lowest level
    key = jnp.where(near, levels.reshape(-1, *([1] * (near.ndim - 1))), jnp.inf)
    return mean, jnp.where(jnp.any(near, axis=0), jnp.argmin(key, axis=0), lowest)


def chosen_penalty(
    losses: Array, weight: Array, levels: Array, choice: str = "least_penalty"
) -> tuple[Array, Array]:
    """:func:`chosen_level` of members with losses ``losses [G, ..., V]`` on their validation rows
    (``weight [..., V]``: 1 on a row, 0 on padding)."""
    return chosen_level(penalty_moments(jnp.asarray(losses), jnp.asarray(weight)),
                        jnp.asarray(levels), choice)  # fmt: skip


def _ridge_levels(config: TrainConfig) -> np.ndarray:
    """The ridge coefficients a member is fitted at: ``config.l2_grid`` where ``l2 = "auto"``,
    else the one number."""
    return np.asarray(config.l2_grid if config.l2 == "auto" else [config.l2], np.float64)


def _total_weights(
    spec: LossSpec, y: np.ndarray, share: np.ndarray, config: TrainConfig
) -> np.ndarray:
    """Each member's total sample weight ``[m, R]`` under ``l2_scale = "per_weight"``: the mean
    over its training rows (``share [R, N]``) of the weight its loss puts on a row of its label,
    summed over the outputs (``beta`` or ``1 - beta``; a focal loss's ``alpha`` or ``1 - alpha``;
    ``sum_c B[y, c]``; ``w[y]``); else 1."""
    if config.l2_scale != "per_weight":
        return np.ones((spec.batch_shape[0], share.shape[0]))
    p = {k: np.asarray(v, np.float64) for k, v in spec.params.items()}
    (m,) = spec.batch_shape
    weight = spec.record.row_weight
    rows = np.stack([weight(y, **{k: v[i] for k, v in p.items()}) for i in range(m)])
    return rows @ share.T


def _standardizer(
    x: np.ndarray, train_mask: np.ndarray, standardize: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Each rotation's feature centre and scale ``[R, d]`` on its training rows (the mean and
    standard deviation, 1 where a feature is constant there, as ``StandardScaler`` does), or 0
    and 1."""
    R, d = train_mask.shape[0], x.shape[1]
    if not standardize:
        return np.zeros((R, d), np.float32), np.ones((R, d), np.float32)
    mask = train_mask.astype(np.float64)
    count = mask.sum(axis=1, keepdims=True)
    mean = mask @ x.astype(np.float64) / count
    var = mask @ np.square(x.astype(np.float64)) / count - np.square(mean)
    constant = var <= 1e-12 * np.maximum(1.0, np.square(mean))
    scale = np.sqrt(np.where(constant, 1.0, var))
    return mean.astype(np.float32), scale.astype(np.float32)


def out_of_fold_logits(fit_logits: np.ndarray, splits: Sequence[FoldSplit], n: int) -> np.ndarray:
    """Each observation's test logit per (seed, loss): ``[S, nb, N(, n_classes)]``, NaN where
    never tested.

    Observation ``i`` takes the logit of the rotation whose test fold holds it; with the default
    rotations (one full cycle) that rotation is unique.

    Raises:
      ValueError: if an observation is in the test fold of more than one rotation.
    """
    out = np.full((*fit_logits.shape[:2], n, *fit_logits.shape[4:]), np.nan, dtype=np.float32)
    times = np.zeros(n, np.int64)
    for r, split in enumerate(splits):
        out[:, :, split.test] = fit_logits[:, :, r, : len(split.test)]
        times[split.test] += 1
    if (times > 1).any():
        raise ValueError("an observation is in the test fold of several rotations")
    return out
