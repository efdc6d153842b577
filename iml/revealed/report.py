"""Everything at once, with paired bootstrap inference: :func:`reveal` finds the revealed
experiments of ``K`` models (binary, or of ``n`` classes), the value matrix, mutual information
and the information about each class, NIS, NIAC, the cost bounds, the Shannon ``lambda`` and
NIAS, each bootstrap replicate reweighting the same observations for
every model (and, given each model's training seeds, resampling those too), and returns a
:class:`RevealedReport`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _device
from iml import _validation as V
from iml._bootstrap import (
    basic_interval,
    check_bootstrap,
    check_resampling,
    order_statistic_interval,
    poisson_counts,
    resampled_seeds,
    resampling_counts,
)
from iml.calibration._checks import as_labels, as_weights
from iml.revealed.bins import (
    as_min_count,
    bin_signals,
    cell_signals,
    check_class_scores,
    check_scores,
    merged_signals,
    signals_from_scores,
)
from iml.revealed.experiments import (
    RevealedExperiments,
    check_weight,
    class_information_of,
    class_onehot,
    experiments_from_sums,
    mutual_information_of,
    signal_indicator,
    signal_sums,
    value_matrix_of,
)
from iml.revealed.learning_tests import (
    CostBounds,
    NIACCheck,
    NIASTest,
    NISCheck,
    edge_weights,
    min_cycle_mean,
    niac_check_of,
    nias_of,
    nias_of_cells,
    nis_check_of,
    revealed_cost_bounds_of,
    switch_gains,
)
from iml.revealed.losses import as_losses, loss_corrected
from iml.revealed.shannon import LambdaInterval, shannon_lambda_interval_of
from iml.spec import LossLike, LossSpec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["MarginTest", "RevealedReport", "reveal"]

# Replicates per chunk of the paired bootstrap: about this many resampling weights at a time
# (128 MiB of float32). A chunk's signal sums are one product [replicates, N] x [N, K S]; XLA's
# CPU product is several times less efficient with a few dozen rows than with a few hundred.
_CHUNK_ELEMENTS = 2**25


class MarginTest(NamedTuple):
    """A one-sided bootstrap test that a margin (NIS or NIAC) is above zero.

    Attributes:
      margin: the estimate.
      lower_bound: its lower confidence bound at ``confidence``.
      critical_value: the least-favourable-null critical value of the statistic.
      p_value: the bootstrap p-value ``(1 + #{T* >= T}) / (1 + n)`` over the ``n`` null draws.
      violated: ``lower_bound > 0``: the learning model is rejected.
    """

    margin: Array
    lower_bound: Array
    critical_value: Array
    p_value: Array
    violated: Array


class RevealedReport(NamedTuple):
    """Everything :func:`reveal` finds (a pytree of arrays; intervals are ``[2, ...]``).

    Attributes:
      experiments: the revealed experiments ``[K, S]``.
      value_matrix, value_matrix_interval: ``G [K, K]`` and its percentile interval.
      information, information_interval: ``I_k`` in nats ``[K]`` and its basic bootstrap
        interval (clipped at 0; see :func:`reveal`).
      nis: the point check (margin, violating pairs).
      nis_test: the bootstrap test of its margin (studentized pairs).
      nis_pairs: pairs ``(k, j)`` whose own lower bound of ``G[k, j] - G[k, k]`` is above zero at
        the simultaneous level, ``[K, K]``.
      niac: the point check (margin = minus the minimum cycle mean, the cycle).
      niac_test: the bootstrap test of its margin.
      cost_bounds: revealed bounds on ``C_k - C_ref``.
      cost_lower_interval, cost_upper_interval: percentile intervals of each bound over the
        replicates in which the bounds are feasible, ``[2, K]``.
      cost_feasible_fraction: the fraction of replicates in which NIAC holds exactly.
      shannon: the ``lambda`` interval.
      lambda_lower_interval, lambda_upper_interval: percentile intervals of its ends, ``[2]``.
      nias: NIAS across the models (:func:`nias_test`), or ``None`` when not run.
      class_information, class_information_interval: the information about each class
        (:func:`class_information`, one-vs-rest) ``[K, n]`` (``n = 2`` for binary models) and
        its basic bootstrap interval ``[2, K, n]`` (clipped at 0).
    """

    experiments: RevealedExperiments
    value_matrix: Array
    value_matrix_interval: Array
    information: Array
    information_interval: Array
    nis: NISCheck
    nis_test: MarginTest
    nis_pairs: Array
    niac: NIACCheck
    niac_test: MarginTest
    cost_bounds: CostBounds
    cost_lower_interval: Array
    cost_upper_interval: Array
    cost_feasible_fraction: Array
    shannon: LambdaInterval
    lambda_lower_interval: Array
    lambda_upper_interval: Array
    nias: NIASTest | None
    class_information: Array
    class_information_interval: Array


def reveal(
    scores: ArrayLike,
    labels: ArrayLike,
    losses: LossLike | Sequence[LossLike],
    n_bins: int = 10,
    strategy: str = "adaptive",
    weight: ArrayLike | None = None,
    *,
    n_bootstrap: int = 1000,
    key: Array | None = None,
    confidence: float = 0.95,
    reference: int = 0,
    resampling: str = "poisson",
    nias: bool = True,
    min_count: int | None = None,
    seed_scores: ArrayLike | None = None,
    seed_average: str = "score",
) -> RevealedReport:
    """Revealed experiments of ``K`` models and tests of learning models, with paired bootstrap.

    From the scores of models trained under ``losses`` on common labels: the revealed experiments
    (:func:`revealed_experiments`), the value matrix ``G`` (:func:`value_matrix`), mutual
    information ``I_k`` and the information about each class, NIS, NIAC, the revealed cost
    bounds, the Shannon ``lambda`` interval and, optionally, NIAS per model (:func:`nias_test`).

    Models of ``n`` classes: ``scores`` ``[K, N, n]``, class ``labels`` and losses of ``n``
    class scores. Their signals are the cells of their loss-corrected posteriors
    (:func:`iml.revealed.bins.cell_signals`: ``n_bins`` confidence quantiles per top class,
    ``"adaptive"`` merging them alike for every model), ``n n_bins`` in all; everything below
    then runs on the class posteriors of the cells, by the same code, and NIAS is the
    multinomial test of each model's adaptive cells (:func:`multinomial_calibration_test`).

    Inference. Each bootstrap replicate reweights the observations by one vector of resampling
    counts shared by every model (paired; :func:`paired_bootstrap_weights`), with every model's
    bins held fixed. ``G``, the cost bounds and the ends of the ``lambda`` interval get
    percentile intervals (order statistics, rounded outward). ``I_k`` and the information about
    each class get basic intervals, ``2 I - [upper, lower]`` of those order statistics, clipped
    at 0: the plug-in information is biased upward where bins hold few labels of a class, and
    the percentile interval, sitting on the biased replicates, then covers the truth less often
    than its level (``docs/results/revealed``, information coverage). Where the bias exceeds
    the sampling noise (hundreds of cells), the basic interval lies below the estimate. NIS and
    NIAC are tested at the least-favourable null, where every inequality binds, by the
    recentred bootstrap: a margin is a maximum over many noisy inequalities, biased upward, so
    its critical value ``c`` is a ``confidence`` quantile of the maximum of the *recentred*
    replicate statistics, which holds the size however many pairs or cycles are compared
    (``K = 4`` or ``64``):

    * NIS (studentized maximum over pairs): ``D = G[k, j] - G[k, k]``, ``se`` its bootstrap
      standard deviation over the first half of the replicates, ``T* = max_{k != j} (D* - D) /
      se`` over the second half (so that the statistic ``max D / se`` and its null share the same
      noisy ``se``; with one set of replicates for both the test over-rejects at a few hundred
      replicates). The bounds ``D - c se`` hold for every pair at once, and the margin's lower
      bound is ``max (D - c se)``; ``nis_pairs`` marks the pairs whose own bound is positive.
    * NIAC (minimum cycle mean, :func:`niac_check`): ``T* = -mu*(w* - w)`` over the replicates'
      edge weights ``w*``, and the margin's lower bound is ``margin - c``. Cycles cannot be
      studentized one by one (there are too many), and rescaling the edges would change which
      cycles are negative; the mean keeps the units of ``G``.

    A learning model is rejected only when the lower bound is above zero; where its inequalities
    are slack the test is conservative. The bootstrap approximates the bins' posteriors well
    when each bin holds enough positives and negatives; deciles of precise models at rare labels
    do not (digits' lowest deciles hold 0 positives), and there NIS over-rejects. The default
    ``"adaptive"`` bins merge deciles until each holds :data:`MIN_COUNT` expected positives and
    negatives; ``experiments.studies.reveal_size_power`` simulates the tests' size and power under
    each binning (``docs/results/revealed``).

    Args:
      losses: the ``K`` binary losses the models were trained with.
      n_bins, strategy: the bins (signals) of each model (:func:`revealed_experiments`);
        ``"adaptive"`` by default (see above).
      weight: non-negative observation weights ``[N]``.
      n_bootstrap: paired bootstrap replicates (at least 2; hundreds for the tests' levels).
      key: ``jax.random`` key (required).
      confidence: the level of intervals and lower bounds (tests at ``1 - confidence``).
      reference: the model whose cost is 0 in the cost bounds.
      resampling: ``"poisson"`` or ``"multinomial"`` counts (:func:`paired_bootstrap_weights`).
      nias: whether to run NIAS (:func:`nias_test`: each model's loss-calibration test on its
        own bins, Holm over the models).
      min_count: the least expected positives and negatives of an ``"adaptive"`` bin (class
        scores: of each class in a cell, and the least expected count of a category NIAS tests
        on its own, :func:`multinomial_calibration_test`).
      seed_scores: ``[M, K, N]`` (class scores: ``[M, K, N, n]``) the scores of each model's
        training seeds (each seed's own ensemble), NaN rows for the seeds a model lacks;
        ``scores`` is then their pool. Each replicate also resamples, per model, its seeds with
        replacement, pools the drawn seeds' scores and bins them (or cuts their cells) anew, so
        that the intervals and tests cover the noise of training between seeds as well as that
        of the evaluation rows.
      seed_average: how drawn seeds pool: ``"score"`` (their mean score) or ``"logit"`` (the
        score of their mean logit; for class scores the softmax of their mean log score), as
        the run's ensembles pool members.
    """
    classes = np.ndim(scores) == 3
    if classes:
        check_class_scores(scores, labels, n_bins, strategy)
    else:
        check_scores(scores, labels, n_bins, strategy)
    n_models, n = np.shape(scores)[:2]
    if n_models < 2:
        raise ValueError(f"scores must hold at least 2 models to compare; got K = {n_models}")
    if weight is not None:
        V.check_shape("weight", weight, (n,))
    check_weight(weight, n)
    V.check_count("n_bootstrap", n_bootstrap, 2)
    check_bootstrap(n_bootstrap, key, confidence)
    if not isinstance(reference, int | np.integer) or not 0 <= reference < n_models:
        raise ValueError(f"reference must be a model index in [0, {n_models}); got {reference!r}")
    check_resampling(resampling)
    n_classes = np.shape(scores)[2] if classes else None
    specs = as_losses(losses, n_models, n_classes)
    key_boot = jax.random.split(key)[0]  # the bootstrap draws from the first half of the key
    V.check_choice("seed_average", seed_average, ("score", "logit"))
    seeds = None
    if seed_scores is not None:
        seeds = _check_seed_scores(seed_scores, np.shape(scores)[:2], np.shape(scores)[2:])
    if classes:
        posteriors = loss_corrected(specs, jnp.asarray(scores, jnp.float32))
        signals = cell_signals(posteriors, n_bins, strategy, as_min_count(min_count))
        n_signals = n_classes * int(n_bins)
    else:
        signals = signals_from_scores(scores, n_bins, strategy, specs, as_min_count(min_count))
        n_signals = int(n_bins)
    # Unit weights rather than None: weighted and unweighted calls share one compiled program.
    weights = np.ones(n, np.float32) if weight is None else weight
    # With concrete labels, positives go first (the bins do not depend on the order), and the
    # positives' sums need only a leading block of rows, rounded up to a sixteenth of N so that
    # data sets of similar prevalence share one compiled program. Labels that already come
    # positives first (as a simulation may draw them) need no reordering.
    positive_rows, ordered = n, (signals, labels, weights)
    y = V.concrete_value(labels)
    if not classes and y is not None:
        positive = np.ravel(y) == 1
        step = -(-n // 16)
        rows = min(n, max(1, -(-int(positive.sum()) // step)) * step)
        if not np.any(positive[1:] & ~positive[:-1]):
            positive_rows = rows
        elif V.is_concrete(signals, weights):
            order = np.argsort(~positive, kind="stable")
            positive_rows = rows
            ordered = (signals[:, order], y[order], np.asarray(weights)[order])
            if seeds is not None:
                seeds = seeds[:, :, order]
    # How a replicate bins resampled seeds; without seeds the bins are fixed, and leaving the
    # strategy out lets the strategies of one number of signals share one compiled program.
    bins = None if seeds is None else (strategy, as_min_count(min_count), seed_average)
    # Unit weights times Poisson counts (at most 5) are small integers: their sums are made
    # in int8 where the device multiplies int8 faster, with the same exact sums.
    integer = weight is None and resampling == "poisson" and _device.integer_products()
    report = _reveal(
        *ordered,
        specs,
        key_boot,
        n_signals,
        int(n_bootstrap),
        float(confidence),
        int(reference),
        resampling,
        positive_rows,
        seeds,
        bins,
        n_classes,
        integer,
    )
    if nias and classes:
        cells = signals
        if strategy != "adaptive":
            cells = cell_signals(posteriors, n_bins, "adaptive", as_min_count(min_count))
        least = float(as_min_count(min_count))  # also the least count of a category
        result = nias_of_cells(
            posteriors, cells, labels, weight, n_signals, float(confidence), least
        )
        report = report._replace(nias=result)
    elif nias:
        result = nias_of(
            scores, labels, specs, weight, int(n_bins), as_min_count(min_count), float(confidence)
        )
        report = report._replace(nias=result)
    return report


def _margin_test(
    margin: Array, statistic: Array, null: Array, confidence: float
) -> tuple[MarginTest, Array]:
    """Reject when ``statistic`` exceeds the critical value ``c`` of its bootstrap ``null``.

    ``c`` is the order statistic of rank ``ceil(confidence (n + 1))`` of the ``n`` null draws
    (``inf`` when there are too few), so that, were the statistic exchangeable with the draws,
    ``P(statistic > c) <= 1 - confidence`` exactly; the p-value is
    ``(1 + #{null >= statistic}) / (1 + n)``. The lower bound is ``margin - c``.
    """
    n = null.shape[0]
    rank = int(np.ceil(confidence * (n + 1)))
    c = jnp.sort(null)[rank - 1] if rank <= n else jnp.asarray(jnp.inf, null.dtype)
    p_value = (1.0 + jnp.sum(null >= statistic)) / (1.0 + n)
    return MarginTest(margin, margin - c, c, p_value, statistic > c), c


def bootstrap_chunks(n_bootstrap: int, n: int) -> tuple[int, int]:
    """``(chunks, replicates per chunk)``: about ``_CHUNK_ELEMENTS`` weights at a time."""
    target = max(1, min(n_bootstrap, _CHUNK_ELEMENTS // n))
    chunks = -(-n_bootstrap // target)
    return chunks, -(-n_bootstrap // chunks)


def _check_seed_scores(
    seed_scores: ArrayLike, models_rows: tuple[int, int], classes: tuple[int, ...]
) -> np.ndarray:
    """``[M, K, N]`` (or class scores ``[M, K, N, n]``) float32 seed scores: each seed's row
    of a model complete or all NaN, and every model with at least one seed."""
    s = np.asarray(seed_scores, np.float32)
    n_models, n = models_rows
    if s.ndim != 3 + len(classes) or s.shape[1:] != (n_models, n, *classes):
        shape = ", ".join(str(d) for d in (n_models, n, *classes))
        axes = "seeds, models, observations" + (", classes" if classes else "")
        raise ValueError(f"seed_scores must have shape [M, {shape}] ({axes}); got {s.shape}")
    finite = np.isfinite(s).reshape(*s.shape[:3], -1).all(axis=3)
    complete, empty = finite.all(axis=2), (~finite).all(axis=2)
    if not (complete | empty).all():
        m, k = np.argwhere(~(complete | empty))[0]
        raise ValueError(
            f"seed_scores[{m}, {k}] scores some observations but not all; keep the observations "
            "every seed scored"
        )
    if not complete.any(axis=0).all():
        k = int(np.flatnonzero(~complete.any(axis=0))[0])
        raise ValueError(f"seed_scores holds no seed of model {k}")
    if ((s < 0) | (s > 1))[np.isfinite(s)].any():
        raise ValueError("seed_scores must lie in [0, 1]")
    return s


def _reveal(
    signals: Array,
    labels: ArrayLike,
    weight: ArrayLike,
    losses: LossSpec | list[LossSpec],
    key: Array,
    n_signals: int,
    n_bootstrap: int,
    confidence: float,
    reference: int,
    resampling: str,
    positive_rows: int,
    seed_scores: Array | None,
    bins: tuple[str, int, str] | None,
    n_classes: int | None = None,
    integer: bool = False,
) -> RevealedReport:
    """The report as two programs: the value matrices and information of the estimate and of
    every replicate (:func:`_replicates`, compiled for each number of observations), and the
    tests and intervals from them (:func:`_inference`, compiled once for every ``K`` models,
    signals and replicates, whatever the number of observations)."""
    estimate, replicates = _replicates(
        signals, labels, weight, losses, key, n_signals, n_bootstrap, resampling, positive_rows,
        seed_scores, bins, n_classes, integer,
    )  # fmt: skip
    return _inference(estimate, replicates, confidence, reference)


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8, 10, 11, 12))
def _replicates(signals, labels, weight, losses, key, n_signals, n_bootstrap, resampling,
                positive_rows, seed_scores, bins, n_classes, integer):  # fmt: skip
    """``(experiments, G, I, class I)`` of the observations as weighted, and ``(G, (I, class
    I))`` of each of the ``n_bootstrap`` replicates: ``[B, K, K]``, ``[B, K]``, ``[B, ...]``.
    ``integer``: unit weights and Poisson counts (at most 5), whose signal sums are made in int8
    (:func:`~iml.revealed.experiments.signal_sums`)."""
    indicator = signal_indicator(signals, n_signals, positive_rows, integer)
    if n_classes is None:
        y = as_labels(labels, jnp.zeros((), jnp.float32))
        w = as_weights(weight, y)
    else:  # one-hot class labels [N, n]
        y = class_onehot(labels, n_classes)
        w = as_weights(weight, y[:, 0])

    def statistics(sums: tuple[Array, Array]):
        experiments = experiments_from_sums(*sums)
        G = value_matrix_of(experiments, losses)
        info = (mutual_information_of(experiments), class_information_of(experiments))
        return experiments, G, info

    def weighted_sums(weights: Array, ind: Array | tuple[Array, Array] = indicator):
        return signal_sums(weights, y, ind, n_signals, positive_rows)

    def counted_sums(counts: Array) -> tuple[Array, Array]:
        # Unit weights resampled by int8 Poisson counts, summed with int8 labels: the sums of
        # weighted_sums(counts), without converting [B, N] floats. An invalid label (NaN in y,
        # which reveal's checks keep out of concrete labels) makes every positives sum NaN.
        y8 = jnp.where(jnp.isnan(y), 0.0, y).astype(jnp.int8)
        count, positives = signal_sums(counts, y8, indicator, n_signals, positive_rows)
        return count, jnp.where(jnp.any(jnp.isnan(y)), jnp.nan, positives)

    experiments, G, (info, class_info) = statistics(weighted_sums(w))
    chunks, size = bootstrap_chunks(n_bootstrap, y.shape[0])
    n_observations = y.shape[0]

    def seed_replicate(args: tuple[Array, Array]) -> tuple[Array, Array]:
        key_seed, counts = args
        scores = resampled_seeds(key_seed, seed_scores, bins[2])
        strategy, m = bins[0], bins[1]
        if n_classes is not None:  # the cells of the pooled scores' posteriors
            posteriors = loss_corrected(losses, scores)
            signals_b = cell_signals(posteriors, n_signals // n_classes, strategy, m)
        else:
            signals_b = bin_signals(
                scores, n_signals, "uniform" if strategy == "uniform" else "quantile"
            )
            if strategy == "adaptive":
                signals_b = merged_signals(scores, signals_b, losses, n_signals, m)
        ind = signal_indicator(signals_b, n_signals, positive_rows, integer)
        _, G_b, info_b = statistics(weighted_sums(w * counts, ind))
        return G_b, info_b

    # Binary labels resampled by Poisson counts of unit weights: the counts made in int8.
    int8_counts = (integer and resampling == "poisson" and weight is None and n_classes is None
                   and seed_scores is None)  # fmt: skip

    def replicate_chunk(key_chunk: Array):
        if int8_counts:
            counts = poisson_counts(key_chunk, n_observations, size, jnp.int8)
            _, G_b, info_b = statistics(counted_sums(counts))
            return G_b, info_b
        counts = resampling_counts(key_chunk, n_observations, size, resampling)
        if seed_scores is None:
            _, G_b, info_b = statistics(weighted_sums(w * counts))
            return G_b, info_b
        keys = jax.random.split(jax.random.fold_in(key_chunk, 1), size)
        return jax.lax.map(seed_replicate, (keys, counts))

    out = jax.lax.map(replicate_chunk, jax.random.split(key, chunks))
    replicates = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:])[:n_bootstrap], out)
    return (experiments, G, info, class_info), replicates


@functools.partial(jax.jit, static_argnums=(2, 3))
def _inference(estimate, replicates, confidence: float, reference: int) -> RevealedReport:
    """NIS, NIAC, the cost bounds, the Shannon cost's lambda and every interval, from the
    estimate and the replicates of :func:`_replicates`."""
    experiments, G, info, class_info = estimate
    G_b, (info_b, class_b) = replicates
    n_bootstrap = G_b.shape[0]
    E = edge_weights(G)
    switch = switch_gains(G)
    niac_star = -min_cycle_mean(edge_weights(G_b) - E)  # recentred
    bounds = revealed_cost_bounds_of(G_b, reference)
    shannon = shannon_lambda_interval_of(G_b, info_b, 1e-6)
    interval = functools.partial(order_statistic_interval, confidence=confidence)

    # NIS: studentized maximum over pairs, recentred at the estimate. The standard errors come
    # from the first half of the replicates and the null distribution from the second, so that
    # the statistic and its null share one (noisy) scaling.
    off = ~jnp.eye(G.shape[-1], dtype=bool)
    switch_b = switch_gains(G_b)
    half = n_bootstrap // 2
    se = jnp.std(switch_b[:half], axis=0)
    se = jnp.maximum(se, 1e-6 * jnp.max(se) + jnp.finfo(se.dtype).tiny)
    t_star = (switch_b[half:] - switch) / se
    nis_star = jnp.max(jnp.where(off, t_star, -jnp.inf), axis=(-2, -1))
    nis_stat = jnp.max(jnp.where(off, switch / se, -jnp.inf))
    nis = nis_check_of(G)
    nis_test, c_nis = _margin_test(nis.margin, nis_stat, nis_star, confidence)
    lower = jnp.where(off, switch - c_nis * se, -jnp.inf)
    nis_test = nis_test._replace(lower_bound=jnp.max(lower))

    # NIAC: minimum cycle mean, recentred at the estimate.
    niac = niac_check_of(G)
    niac_test, _ = _margin_test(niac.margin, niac.margin, niac_star, confidence)

    # The percentile intervals from two stacks of replicate statistics [B, ...]: the
    # information's alone, so that a caller reading only its interval (a simulation of the
    # tests) leaves the other stack to XLA to drop; every other interval from one stack.
    K = G.shape[-1]
    lam_lower = jnp.where(shannon.rejected, jnp.nan, shannon.lower)
    lam_upper = jnp.where(shannon.rejected, jnp.nan, shannon.upper)
    n_class_info = class_info.size
    stacked = [
        G_b.reshape(-1, K * K),
        class_b.reshape(-1, n_class_info),
        bounds.lower,
        bounds.upper,
        lam_lower[:, None],
        lam_upper[:, None],
    ]
    sizes = np.cumsum([x.shape[1] for x in stacked])[:-1]
    parts = jnp.split(interval(jnp.concatenate(stacked, axis=1)), sizes, axis=1)
    G_iv, class_iv, lower_iv, upper_iv, lam_lower_iv, lam_upper_iv = parts
    info_iv = interval(info_b)
    # The plug-in information is biased upward, most where bins hold few labels of a class; the
    # basic interval reflects the replicates about the estimate, against that bias.
    info_iv = basic_interval(info, info_iv, floor=0.0)
    class_iv = basic_interval(class_info.reshape(-1), class_iv, floor=0.0)

    return RevealedReport(
        experiments=experiments,
        value_matrix=G,
        value_matrix_interval=G_iv.reshape(2, K, K),
        information=info,
        information_interval=info_iv,
        nis=nis,
        nis_test=nis_test,
        nis_pairs=lower > 0,
        niac=niac,
        niac_test=niac_test,
        cost_bounds=revealed_cost_bounds_of(G, reference),
        cost_lower_interval=lower_iv,
        cost_upper_interval=upper_iv,
        cost_feasible_fraction=jnp.mean(bounds.feasible.astype(jnp.float32)),
        shannon=shannon_lambda_interval_of(G, info, 1e-6),
        lambda_lower_interval=lam_lower_iv[:, 0],
        lambda_upper_interval=lam_upper_iv[:, 0],
        nias=None,
        class_information=class_info,
        class_information_interval=class_iv.reshape(2, *class_info.shape),
    )
