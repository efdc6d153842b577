"""Revealed experiments: the statistical experiment of each of ``K`` models on common labels,
the probability ``P_k(s)`` of each signal and its posterior ``gamma_{k,s} = P_k(y = 1 | s)``
(binary) or ``gamma_{k,s,c} = P_k(y = c | s)`` (``n`` classes), counted from discrete signals
(a batch of observation weights is one matrix product), read off each model's binned scores or
cells of its loss-corrected class posteriors (:mod:`iml.revealed.bins`), or given directly; and
what they are worth: the value matrix ``G[k, j] = -sum_s P_j(s) l*_k(gamma_{j,s})``, the value
in decision problem ``k`` of the experiment learned under loss ``j``, the mutual information
``I_k`` of each experiment, and the information it carries about each class."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlogy

from iml import _validation as V
from iml.calibration._checks import as_float, as_labels, as_weights, check_n_bins
from iml.revealed.bins import (
    as_min_count,
    cell_signals,
    check_class_scores,
    check_scores,
    signals_from_scores,
)
from iml.revealed.losses import as_losses, loss_corrected, minimised_losses
from iml.spec import LossLike, LossSpec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "RevealedExperiments",
    "class_information",
    "experiments_from_posteriors",
    "experiments_from_signals",
    "mutual_information",
    "revealed_experiments",
    "value_matrix",
]

_HIGHEST = jax.lax.Precision.HIGHEST


class RevealedExperiments(NamedTuple):
    """The statistical experiments of ``K`` models (a pytree; leading axes are batches).

    Binary experiments have posteriors ``[..., K, S]`` (of the positive class); experiments on
    ``n`` classes carry a class axis last, ``[..., K, S, n]`` (rows on the simplex), and their
    prior ``[..., K, n]``.

    Attributes:
      probability: ``P_k(s)``, the probability of signal ``s`` of model ``k``, ``[..., K, S]``.
      posterior: ``gamma_{k,s} = P_k(y = 1 | s)``, ``[..., K, S]``, or
        ``gamma_{k,s,c} = P_k(y = c | s)``, ``[..., K, S, n]``; the prior where ``P_k(s) = 0``
        (a value that changes nothing below).
      prior: ``pi = sum_s P_k(s) gamma_{k,s}``, ``[..., K]`` or ``[..., K, n]`` (Bayes
        plausibility; one value for experiments revealed from common labels).
    """

    probability: Array
    posterior: Array
    prior: Array


def check_weight(weight: ArrayLike | None, n: int) -> None:
    """Observation weights ``[..., N]``: leading axes are batches (bootstrap replicates)."""
    if weight is None:
        return
    shape = np.shape(weight)
    if not shape or shape[-1] != n:
        raise ValueError(f"weight must have shape [..., {n}]; got {shape}")
    w = V.concrete_value(weight)
    if w is None:
        return
    V.check_weights("weight", w)


def experiments_from_signals(
    signals: ArrayLike,
    labels: ArrayLike,
    n_signals: int,
    weight: ArrayLike | None = None,
    *,
    n_classes: int | None = None,
) -> RevealedExperiments:
    """Revealed experiments from discrete signals: ``P_k(s)`` and ``gamma_{k,s}`` by counting.

    ``P_k(s) = sum_i w_i 1[s_ki = s] / sum_i w_i`` and
    ``gamma_{k,s} = sum_i w_i y_i 1[s_ki = s] / sum_i w_i 1[s_ki = s]`` (with ``n_classes``,
    ``gamma_{k,s,c}`` the same with ``1[y_i = c]`` for ``y_i``). The sums are one matrix
    product with the signals' indicator matrix, so a batch of weight vectors (for instance the
    resampling counts of bootstrap replicates, :func:`paired_bootstrap_weights`) costs one
    product and resamples every model with the same observations.

    Args:
      signals: integer signals ``[K, N]`` in ``[0, n_signals)``, one row per model.
      labels: ``{0, 1}`` labels ``[N]``, or class indices in ``[0, n_classes)``.
      n_signals: the number of signals ``S``.
      weight: non-negative observation weights ``[..., N]``; leading axes are batches.
      n_classes: the class count ``n`` of class labels (``None``: binary labels).

    Returns:
      :class:`RevealedExperiments` with ``probability`` ``[..., K, S]`` and ``posterior``
      ``[..., K, S]`` (binary) or ``[..., K, S, n]``.

    Raises:
      ValueError: naming ``signals``, ``labels``, ``weight`` or ``n_classes``.
    """
    check_n_bins(n_signals)
    shape = np.shape(signals)
    if len(shape) != 2 or 0 in shape:
        raise ValueError(f"signals must be a non-empty [K, N] array; got shape {shape}")
    s = V.concrete_value(signals)
    if s is not None and not np.issubdtype(s.dtype, np.integer):
        raise ValueError(f"signals must be integers (signal indices); got dtype {s.dtype}")
    if s is not None and ((s < 0).any() or (s >= n_signals).any()):
        raise ValueError(
            f"signals must lie in [0, n_signals={n_signals}); got min {s.min()}, max {s.max()}"
        )
    n = shape[1]
    if n_classes is None:
        y = V.concrete_value(labels)
        if y is not None and (y.shape != (n,) or not np.isin(y, (0, 1)).all()):
            raise ValueError(f"labels must be a [{n}] array of 0s and 1s; got shape {y.shape}")
    else:
        V.check_count("n_classes", n_classes, 2)
        check_class_labels(labels, n, n_classes)
    check_weight(weight, n)
    return _experiments_from_signals(signals, labels, weight, n_signals, n_classes)


def check_class_labels(labels: ArrayLike, n: int, n_classes: int) -> None:
    """Class indices ``[N]`` in ``[0, n_classes)``."""
    if np.shape(labels) != (n,):
        raise ValueError(f"labels must have shape [{n}]; got {np.shape(labels)}")
    y = V.concrete_value(labels)
    if y is not None and not np.all((y >= 0) & (y < n_classes) & (y == np.round(y))):
        raise ValueError(f"labels must be class indices in [0, {n_classes})")


def class_onehot(labels: ArrayLike, n_classes: int) -> Array:
    """``1[y_i = c]`` ``[N, n]`` (float32); a row of NaN for a label outside ``[0, n)``."""
    y = jnp.asarray(labels)
    onehot = jax.nn.one_hot(y, n_classes, dtype=jnp.float32)
    inside = (y >= 0) & (y < n_classes)
    return jnp.where(inside[:, None], onehot, jnp.nan)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _experiments_from_signals(
    signals, labels, weight, n_signals, n_classes=None
) -> RevealedExperiments:
    indicator = signal_indicator(signals, n_signals)
    if n_classes is None:
        y = as_labels(labels, indicator)
        w = as_weights(weight, y) if weight is not None else jnp.ones_like(y)
    else:
        y = class_onehot(labels, n_classes)
        w = as_weights(weight, y[:, 0]) if weight is not None else jnp.ones(y.shape[:1])
    return experiments_from_sums(*signal_sums(w, y, indicator, n_signals))


def signal_indicator(
    signals: ArrayLike,
    n_signals: int,
    positive_rows: int | None = None,
    integer: bool = False,
) -> Array | tuple[Array, Array]:
    """``M[(k, s), i] = 1[s_ki = s]``, ``[K * S, N]``: the signals' indicator matrix, an
    observation per column (the layout of ``signals``, so no transpose is made, and the one in
    which XLA's CPU multiplies fastest, ``docs/results/reveal``); with ``positive_rows`` below
    ``N``, its columns in two blocks, ``(M[:, :positive_rows], M[:, positive_rows:])``, made
    apart (for :func:`signal_sums`' positives first). Float32, or int8 with ``integer``: then
    :func:`signal_sums` multiplies in integers (its weights must be integers in ``[0, 127]``)."""
    s = jnp.asarray(signals)
    dtype = jnp.int8 if integer else jnp.float32
    levels = jnp.arange(n_signals, dtype=jnp.int32)[None, :, None]  # int8 signals compare in int32

    def indicator(block: Array) -> Array:
        return (block[:, None, :] == levels).astype(dtype).reshape(-1, block.shape[1])

    if positive_rows is None or positive_rows >= s.shape[1]:
        return indicator(s)
    return indicator(s[:, :positive_rows]), indicator(s[:, positive_rows:])


def signal_sums(
    w: Array,
    y: Array,
    indicator: Array | tuple[Array, Array],
    n_signals: int,
    positive_rows: int | None = None,
) -> tuple[Array, Array]:
    """Weighted counts and positives per model and signal, ``[..., K, S]`` each; with class
    labels ``y`` one-hot ``[N, n]``, the counts ``[..., K, S]`` and each class's count
    ``[..., K, S, n]``, from one product.

    ``positive_rows``: every positive observation is among the first ``positive_rows`` (the
    observations sorted by label), so the positives' product needs only those rows (binary
    labels). With the indicator in the two blocks of :func:`signal_indicator`, the leading
    block's counts and positives are one product and the other rows' counts another: the
    arithmetic of one product over all rows and one over the leading block, without copying
    either block out of a whole indicator. A count is then the sum of its two blocks' sums
    (equal to the whole sum where the weights are integers, as unit weights and resampling
    counts are; else within float32 rounding).

    An int8 indicator (``signal_indicator(integer=True)``) takes weights that are integers in
    ``[0, 127]`` (unit weights times resampling counts): the products are int8 with int32 sums,
    exact and equal to the float32 ones (whose sums of such integers are exact below
    ``2**24``), and several times faster on a CPU with AVX-512 VNNI
    (:func:`iml._device.integer_products`). Such weights may come as int8 already (with int8
    labels), and are then not converted. A float weight that is NaN (a label or weight that
    :func:`~iml.calibration._checks.as_labels` or ``as_weights`` rejected under ``jit``) makes its
    row of sums NaN.
    """
    if not isinstance(indicator, tuple) and positive_rows is not None and y.ndim == 1:
        if positive_rows < y.shape[-1]:  # a whole indicator: its blocks are copied out
            indicator = (indicator[:, :positive_rows], indicator[:, positive_rows:])
    if isinstance(indicator, tuple):  # binary labels, positives among the leading rows
        head, tail = indicator
        rows = head.shape[1]
        lhs = jnp.stack([w[..., :rows], (w * y)[..., :rows]], axis=-2)  # [..., 2, rows]
        sums = _times_indicator(lhs, head)
        count = sums[..., 0, :] + _times_indicator(w[..., rows:], tail)
        shape = (*count.shape[:-1], -1, n_signals)
        return count.reshape(shape), sums[..., 1, :].reshape(shape)
    if y.ndim == 2:  # one-hot class labels [N, n]
        lhs = jnp.concatenate([w[..., None, :], w[..., None, :] * y.T], axis=-2)
        sums = _times_indicator(lhs, indicator)  # [..., 1 + n, K S]
        count = sums[..., 0, :].reshape((*sums.shape[:-2], -1, n_signals))
        per_class = sums[..., 1:, :].reshape((*sums.shape[:-2], y.shape[1], -1, n_signals))
        return count, jnp.moveaxis(per_class, -3, -1)
    lhs = jnp.stack([w, w * y], axis=-2)  # [..., 2, N]: one product for both sums
    sums = _times_indicator(lhs, indicator)
    shape = (*sums.shape[:-2], -1, n_signals)
    return sums[..., 0, :].reshape(shape), sums[..., 1, :].reshape(shape)


def _times_indicator(lhs: Array, indicator: Array) -> Array:
    """``lhs [..., m, rows] @ indicator [K S, rows]^T`` in float32; for an int8 indicator, in
    int8 with int32 sums (``lhs`` integers in ``[0, 127]``), a row of ``lhs`` holding NaN giving
    NaN."""
    contract = (((1,), (1,)), ((), ()))
    if indicator.dtype != jnp.int8:
        rows = lhs.reshape(-1, lhs.shape[-1])
        sums = jax.lax.dot_general(rows, indicator, contract, precision=_HIGHEST)
        return sums.reshape(*lhs.shape[:-1], indicator.shape[0])
    rows = lhs.reshape(-1, lhs.shape[-1]).astype(jnp.int8)
    # XLA's CPU product of a single int8 row is several times slower than of two rows
    # (docs/results/reveal, "Resampling sums in int8"): a lone row goes in twice
    twice = rows.shape[0] == 1
    sums = jax.lax.dot_general(jnp.concatenate([rows, rows]) if twice else rows, indicator,
                               contract, preferred_element_type=jnp.int32)  # fmt: skip
    sums = sums[: rows.shape[0]].reshape(*lhs.shape[:-1], indicator.shape[0])
    if lhs.dtype == jnp.int8:  # integers already: no NaN to carry
        return sums.astype(jnp.float32)
    nan = jnp.any(jnp.isnan(lhs), axis=-1, keepdims=True)
    return jnp.where(nan, jnp.nan, sums.astype(jnp.float32))


def experiments_from_sums(count: Array, positives: Array) -> RevealedExperiments:
    """The experiments of counts ``[..., K, S]`` and positives ``[..., K, S]`` (or class counts
    ``[..., K, S, n]``)."""
    total = jnp.sum(count, axis=-1)  # [..., K], equal for every model
    if positives.ndim == count.ndim + 1:  # class counts: signals on the second-last axis
        prior = jnp.sum(positives, axis=-2) / total[..., None]
        filled = (count > 0)[..., None]
        safe = jnp.where(filled, count[..., None], 1.0)
        posterior = jnp.where(filled, positives / safe, prior[..., None, :])
        return RevealedExperiments(count / total[..., None], posterior, prior)
    prior = jnp.sum(positives, axis=-1) / total
    filled = count > 0
    posterior = jnp.where(filled, positives / jnp.where(filled, count, 1.0), prior[..., None])
    return RevealedExperiments(count / total[..., None], posterior, prior)


def revealed_experiments(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    weight: ArrayLike | None = None,
    *,
    losses: LossLike | Sequence[LossLike] | None = None,
    min_count: int | None = None,
) -> RevealedExperiments:
    """The revealed experiment of each model from its scores: its bins are its signals.

    Class scores ``[K, N, n]`` (losses of ``n`` classes, ``losses`` required) are read through
    their cells instead: each observation's loss-corrected posterior, by its top class and a
    quantile of its confidence within that class (:func:`iml.revealed.bins.cell_signals`),
    with ``n_bins`` confidence quantiles per class and ``n * n_bins`` signals; ``"adaptive"``
    merges adjacent quantiles of a class alike for every model, ``"quantile"`` keeps them.

    Binary scores: each model's scores are binned as :func:`iml.calibration.calibration_curve`
    bins them (by default at the deciles of that model's own scores); bin ``s`` of model ``k``
    is its signal, with probability ``P_k(s)`` and posterior ``gamma_{k,s} = P_k(y = 1 | s)``.
    Optimal scoring rules are increasing, so raw and loss-corrected scores give the same
    experiment.

    Args:
      scores: ``[K, N]``, one row per model.
      labels: ``[N]`` labels in ``{0, 1}``, common to the models.
      n_bins: signals per model.
      strategy: ``"quantile"`` (per model), ``"uniform"``, or ``"adaptive"``: the ``n_bins``
        quantile bins merged, in score order and alike for every model, until each holds at
        least ``min_count`` expected positives and negatives under each model's own
        loss-corrected scores ``(c^{L_k})^{-1}(a)``; merged bins leave signals with
        ``P_k(s) = 0``. Needs ``losses``.
      weight: non-negative observation weights ``[..., N]`` (leading axes are batches, e.g.
        bootstrap replicates); the bins are computed from the unweighted scores and stay fixed.
      losses: for ``"adaptive"``.
      min_count: the least expected positives and negatives of an adaptive bin
        (default :data:`MIN_COUNT`).

    Returns:
      :class:`RevealedExperiments` ``[..., K, n_bins]``, or ``[..., K, n n_bins]`` with
      posteriors ``[..., K, n n_bins, n]`` for class scores.

    Raises:
      ValueError: naming the argument: ``scores`` of another shape or outside ``[0, 1]``,
        ``labels``, ``strategy``, ``weight``, or class scores without ``losses``.
    """
    if np.ndim(scores) == 3:
        n_models, n, n_classes = np.shape(scores)
        if losses is None:
            raise ValueError("class scores [K, N, n] need the models' losses (losses=...)")
        check_class_scores(scores, labels, n_bins, strategy)
        check_weight(weight, n)
        specs = as_losses(losses, n_models, n_classes)
        posteriors = loss_corrected(specs, jnp.asarray(scores, jnp.float32))
        signals = cell_signals(posteriors, n_bins, strategy, as_min_count(min_count))
        return _experiments_from_signals(signals, labels, weight, n_classes * n_bins, n_classes)
    check_scores(scores, labels, n_bins, strategy)
    check_weight(weight, np.shape(scores)[1])
    specs = None if losses is None else as_losses(losses, np.shape(scores)[0])
    signals = signals_from_scores(scores, n_bins, strategy, specs, as_min_count(min_count))
    return _experiments_from_signals(signals, labels, weight, n_bins)


def experiments_from_posteriors(
    probability: ArrayLike, posterior: ArrayLike
) -> RevealedExperiments:
    """Experiments given directly by their signal probabilities and posteriors.

    Args:
      probability: ``P_k(s)`` ``[..., K, S]``, non-negative, summing to one over ``s``.
      posterior: ``gamma_{k,s}`` ``[..., K, S]`` in ``[0, 1]``, or class posteriors
        ``gamma_{k,s,c}`` ``[..., K, S, n]`` with rows on the simplex.

    Returns:
      :class:`RevealedExperiments` with ``prior = sum_s P_k(s) gamma_{k,s}``.

    Raises:
      ValueError: naming ``probability`` or ``posterior``.
    """
    shape, gshape = np.shape(probability), np.shape(posterior)
    classes = len(gshape) == len(shape) + 1 and gshape[:-1] == shape
    if (gshape != shape and not classes) or len(shape) < 2:
        raise ValueError(
            "probability and posterior must have the same shape [..., K, S] (or posterior "
            f"[..., K, S, n]); got {shape} and {gshape}"
        )
    V.check_simplex("probability", probability)
    if classes:
        if gshape[-1] < 2:
            raise ValueError(f"posterior must have n >= 2 classes; got shape {gshape}")
        V.check_simplex("posterior", posterior)
    else:
        V.check_unit("posterior", posterior)
    p, g = as_float(probability), as_float(posterior)
    unit = (g >= 0) & (g <= 1)
    if classes:
        unit = jnp.all(unit, axis=-1)
    valid = jnp.all(p >= 0, axis=-1) & jnp.all(unit, axis=-1)
    if classes:
        prior = jnp.einsum("...s,...sc->...c", p, g, precision=_HIGHEST)
        return RevealedExperiments(p, g, V.nan_unless(valid[..., None], prior))
    prior = V.nan_unless(valid, jnp.sum(p * g, axis=-1))
    return RevealedExperiments(p, g, prior)


def check_experiments(experiments: RevealedExperiments) -> int:
    if not isinstance(experiments, RevealedExperiments):
        raise ValueError(
            f"experiments must be RevealedExperiments; got {type(experiments).__name__}"
        )
    shape = np.shape(experiments.probability)
    gshape = np.shape(experiments.posterior)
    if len(shape) < 2 or (gshape != shape and gshape[:-1] != shape):
        raise ValueError(
            "experiments must have probability [..., K, S] and posterior of that shape or "
            f"[..., K, S, n]; got {shape} and {gshape}"
        )
    return shape[-2]


def n_classes_of(experiments: RevealedExperiments) -> int | None:
    """The class count ``n`` of experiments with class posteriors; ``None`` for binary ones."""
    if np.ndim(experiments.posterior) == np.ndim(experiments.probability) + 1:
        return np.shape(experiments.posterior)[-1]
    return None


def value_matrix(experiments: RevealedExperiments, losses: LossLike | Sequence[LossLike]) -> Array:
    """The value matrix ``G[k, j] = -sum_s P_j(s) l*_k(gamma_{j,s})``.

    ``G[k, j]`` is the value, in decision problem ``k`` (loss ``L_k``), of the experiment learned
    under loss ``j`` when its posteriors are re-scored optimally for ``k``; ``l*_k`` is
    :meth:`iml.LossSpec.minimised_expected_loss`, which keeps the paper's normalisation of the
    weights (``beta`` and ``1 - beta``), so that values compare across losses.
    ``G[k, k] - G[k, j] < 0`` says that training under ``j`` and correcting afterwards does better
    on ``k``'s own loss than training under ``k``.

    One code path for any number of classes: for experiments with class posteriors
    ``[..., K, S, n]``, ``l*_k(gamma) = min_a sum_c gamma_c L_k(a, c)`` of each loss of ``n``
    class scores (the B-weighted loss, eq. ``b-loss-multi``; the class-weighted softmax; the
    multiclass focal loss; any registered loss), in closed form where its record has one and
    otherwise the loss at its optimal score (eq. ``choice``). Two classes with the
    class-weighted softmax of weights ``(1 - beta, beta)`` give the binary path's ``G``.

    Args:
      experiments: :class:`RevealedExperiments` ``[..., K, S]`` (posteriors ``[..., K, S]`` or
        ``[..., K, S, n]``).
      losses: the ``K`` losses, one per decision problem (a sequence, or one batched
        :class:`~iml.LossSpec` of batch shape ``(K,)``): binary for binary posteriors, of ``n``
        class scores for class posteriors.

    Returns:
      ``G`` ``[..., K, K]`` (row: decision problem; column: experiment).

    Raises:
      ValueError: naming ``experiments`` or ``losses``.
    """
    n_models = check_experiments(experiments)
    return value_matrix_of(experiments, as_losses(losses, n_models, n_classes_of(experiments)))


@jax.jit
def value_matrix_of(experiments: RevealedExperiments, losses: LossSpec | list[LossSpec]) -> Array:
    table = minimised_losses(losses, experiments.posterior)  # [..., K_exp, S, K_loss]
    # A contraction rather than a sum of products: XLA's CPU fusion of the latter with the
    # table is much slower.
    return -jnp.einsum("...js,...jsk->...kj", experiments.probability, table, precision=_HIGHEST)


def mutual_information(experiments: RevealedExperiments) -> Array:
    """``I_k = sum_{s,y} P_k(s, y) log[P_k(s, y) / (P_k(s) P(y))]`` in nats, ``0 log 0 = 0``.

    Computed as ``sum_s P_k(s) KL(gamma_{k,s} || pi)``, the divergence over the two labels or,
    for class posteriors ``[..., K, S, n]``, over the ``n`` classes. Optimal binary scoring
    rules are monotone, so rank bins of raw and of loss-corrected scores give the same ``I_k``.

    Returns:
      ``I`` ``[..., K]``.

    Raises:
      ValueError: naming ``experiments``.
    """
    check_experiments(experiments)
    return mutual_information_of(experiments)


@jax.jit
def mutual_information_of(experiments: RevealedExperiments) -> Array:
    g = experiments.posterior
    p = experiments.probability
    if g.ndim == p.ndim + 1:  # class posteriors [..., K, S, n]
        pi = experiments.prior[..., None, :]
        kl = jnp.sum(xlogy(g, g) - xlogy(g, pi), axis=-1)
    else:
        pi = experiments.prior[..., None]
        kl = xlogy(g, g) - xlogy(g, pi) + xlogy(1.0 - g, 1.0 - g) - xlogy(1.0 - g, 1.0 - pi)
    return jnp.sum(jnp.where(p > 0, p * kl, 0.0), axis=-1)


def class_information(experiments: RevealedExperiments) -> Array:
    """The information each experiment carries about each class: the one-vs-rest mutual
    information ``I_{k,c} = sum_s P_k(s) KL(Bern(gamma_{k,s,c}) || Bern(pi_c))`` in nats.

    ``I_{k,c}`` is the mutual information between model ``k``'s signal and the event
    ``y = c``; it is at most ``I_k`` (a function of the label carries no more information than
    the label). For binary experiments both classes' values equal ``I_k``.

    Args:
      experiments: :class:`RevealedExperiments` with posteriors ``[..., K, S]`` or
        ``[..., K, S, n]``.

    Returns:
      ``[..., K, n]`` (``n = 2`` for binary experiments).

    Raises:
      ValueError: naming ``experiments``.
    """
    check_experiments(experiments)
    return class_information_of(experiments)


@jax.jit
def class_information_of(experiments: RevealedExperiments) -> Array:
    g, p, pi = experiments.posterior, experiments.probability, experiments.prior
    if g.ndim == p.ndim:  # binary: classes 0 and 1
        g = jnp.stack([1.0 - g, g], axis=-1)
        pi = jnp.stack([1.0 - pi, pi], axis=-1)
    pi = pi[..., None, :]
    kl = xlogy(g, g) - xlogy(g, pi) + xlogy(1.0 - g, 1.0 - g) - xlogy(1.0 - g, 1.0 - pi)
    return jnp.sum(jnp.where(p[..., None] > 0, p[..., None] * kl, 0.0), axis=-2)
