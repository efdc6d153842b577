"""Binning, calibration curves, calibration metrics, beta sweeps and the loss-calibration test;
the smooth calibration error and smooth reliability diagram (Blasiok & Nakkiran 2023).

Notation follows Caplin, Martin & Marx, *Calibrating for Class Weights by Modeling Machine
Learning* (the paper). Scores ``a`` are positive-class confidence scores in ``[0, 1]`` (binary) or
rows of class scores ``a[..., n]`` (multiclass); labels are ``{0, 1}`` (binary) or class indices.

Conventions shared by every function here:

* **Bins** are right-closed, ``(e_b, e_{b+1}]``, except that the first bin also holds its lower
  edge: bin ``b`` of a score ``s`` is ``searchsorted(edges[1:-1], s, side="left")``, exactly as in
  scikit-learn's ``calibration_curve``. Ties therefore always share a bin, and a score of exactly 0
  or 1 falls in the first or last bin.
* **Quantile edges** (the paper's deciles for ``n_bins=10``) are the ``b / n_bins`` quantiles of the
  scores with linear interpolation (``np.percentile``'s default, as scikit-learn uses). They are
  computed from the scores as observed, unweighted, so reweighting (sample or bootstrap weights)
  keeps the bins fixed. Repeated quantiles (ties across a quantile) give duplicate edges; the bins
  between duplicates are empty.
* **Empty bins** have ``count == 0`` and ``NaN`` means; metrics skip them.
* **Validation**: when arrays are concrete, bad input raises ``ValueError`` naming the argument.
  Under ``jax.jit`` values cannot be inspected; instead every result that depends on an invalid
  entry is NaN (never a plausible wrong number): a NaN score, a binary label outside ``{0, 1}``
  or a multiclass label outside ``[0, k)``, and a negative weight all give NaN. A NaN score or
  bad label in one bin of a curve makes that bin's means NaN and leaves the other bins intact.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.losses import BinaryLoss, log_loss
from iml.scoring import (
    loss_corrected_score,
    optimal_score,
)
from iml.spec import LossLike, LossSpec, beta_key, loss_grid, loss_spec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "METRICS",
    "MULTICLASS_METRICS",
    "RENORMALISED",
    "BetaSweep",
    "BinnedStatistics",
    "CalibrationCurve",
    "ECEComparison",
    "LossCalibrationCurve",
    "LossCalibrationTest",
    "SmoothCalibrationCurve",
    "SmoothECE",
    "TestPower",
    "assign_bins",
    "auroc",
    "beta_key",
    "beta_sweep",
    "bin_edges",
    "binned_statistics",
    "brier_score",
    "calibration_curve",
    "calibration_error_from_statistics",
    "clopper_pearson_interval",
    "compare_ece",
    "ece_intervals",
    "expected_calibration_error",
    "loss_calibration_curve",
    "loss_calibration_power",
    "loss_calibration_test",
    "loss_corrected_scores",
    "markdown_by_loss",
    "mean_log_loss",
    "multiclass_ece_intervals",
    "multiclass_score_metrics",
    "paired_comparison",
    "score_metrics",
    "score_metrics_by_row",
    "scores_from_logits",
    "smooth_calibration_curve",
    "smooth_ece",
    "table_by_loss",
]

STRATEGIES = ("quantile", "uniform")


# ----------------------------------------------------------------------------------------------
# Validation (only where arrays are concrete: under jit nothing can be checked)
# ----------------------------------------------------------------------------------------------


def _check_n_bins(n_bins: int) -> None:
    V.check_count("n_bins", n_bins)


def _check_strategy(strategy: str) -> None:
    V.check_choice("strategy", strategy, STRATEGIES)


def _check_weights(sample_weight: ArrayLike | None, n: int) -> None:
    w = V.concrete_value(sample_weight)
    if w is None:
        return
    V.check_shape("sample_weight", w, (n,))
    V.check_weights("sample_weight", w)


def _check_binary(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None = None,
    n_bins: int | None = None,
    scores_name: str = "scores",
) -> None:
    """Raise ``ValueError`` on bad binary input (a no-op for traced arrays)."""
    s, y = V.concrete_value(scores), V.concrete_value(labels)
    if s is not None:
        if s.ndim != 1:
            raise ValueError(f"{scores_name} must be one-dimensional, got shape {s.shape}")
        if s.size == 0:
            raise ValueError(f"{scores_name} is empty")
        V.check_unit(scores_name, s)
        if n_bins is not None and s.size < n_bins:
            raise ValueError(f"{scores_name} has {s.size} observations, fewer than n_bins={n_bins}")
    if y is not None:
        if y.ndim != 1:
            raise ValueError(f"labels must be one-dimensional, got shape {y.shape}")
        if s is not None and y.shape != s.shape:
            raise ValueError(f"labels has shape {y.shape} but {scores_name} has shape {s.shape}")
        if y.size == 0:
            raise ValueError("labels is empty")
        if not np.all((y == 0) | (y == 1)):
            bad = np.unique(y[(y != 0) & (y != 1)])[:5]
            raise ValueError(f"labels must be 0 or 1 for binary scores, found {bad}")
    n = s.shape[0] if s is not None else (y.shape[0] if y is not None else None)
    if n is not None:
        _check_weights(sample_weight, n)


def _weights(sample_weight: ArrayLike | None, like: Array) -> Array:
    """Weights as floats; under jit a negative weight becomes NaN (so results are NaN)."""
    if sample_weight is None:
        return jnp.ones(like.shape[:1], like.dtype)
    w = jnp.asarray(sample_weight, like.dtype)
    return jnp.where(w >= 0, w, jnp.nan)


def _labels(labels: ArrayLike, like: Array) -> Array:
    """Binary labels as floats; under jit a label outside {0, 1} becomes NaN."""
    y = jnp.asarray(labels).astype(like.dtype)
    return jnp.where((y == 0) | (y == 1), y, jnp.nan)


def _class_labels_invalid(labels: Array, n_classes: int) -> Array:
    """Whether any multiclass label is outside ``[0, n_classes)`` (checked under jit)."""
    return jnp.any((labels < 0) | (labels >= n_classes))


def _float(x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    return x.astype(jnp.result_type(x.dtype, jnp.float32))


# ----------------------------------------------------------------------------------------------
# Binning
# ----------------------------------------------------------------------------------------------


def bin_edges(scores: ArrayLike, n_bins: int = 10, strategy: str = "quantile") -> Array:
    """Bin edges for a calibration curve.

    Args:
      scores: scores in ``[0, 1]``, shape ``(n,)``.
      n_bins: number of bins.
      strategy: ``"quantile"`` (edges at the ``b / n_bins`` quantiles of ``scores``, linear
        interpolation as in ``np.percentile``; the paper's deciles for ``n_bins=10``) or
        ``"uniform"`` (``n_bins`` equal widths on ``[0, 1]``).

    Returns:
      Nondecreasing edges, shape ``(n_bins + 1,)``. Quantile edges may repeat where scores tie.
    """
    _check_n_bins(n_bins)
    _check_strategy(strategy)
    s = _float(scores)
    q = jnp.linspace(0.0, 1.0, n_bins + 1, dtype=s.dtype)
    if strategy == "uniform":
        return q
    return jnp.quantile(s, q, method="linear")


def assign_bins(scores: ArrayLike, edges: ArrayLike) -> Array:
    """Bin index of every score: bins are ``(e_b, e_{b+1}]`` and the first holds ``e_0`` too.

    Scores below the first edge go to bin 0 and above the last edge to the last bin, so every score
    is assigned (as in scikit-learn's ``calibration_curve``).

    Args:
      scores: any shape.
      edges: nondecreasing, shape ``(n_bins + 1,)``.

    Returns:
      Integer bin indices in ``[0, n_bins)``, the shape of ``scores``.
    """
    edges = jnp.asarray(edges)
    return jnp.searchsorted(edges[1:-1], jnp.asarray(scores, edges.dtype), side="left").astype(
        jnp.int32
    )


class BinnedStatistics(NamedTuple):
    """Weighted per-bin sums, the sufficient statistics of every binned metric here.

    Attributes:
      count: sum of weights per bin, ``(..., n_bins)``.
      score_sum: sum of weight x score per bin.
      label_sum: sum of weight x label per bin.
      weight_sq_sum: sum of squared weights per bin (for effective sample sizes).
    """

    count: Array
    score_sum: Array
    label_sum: Array
    weight_sq_sum: Array


def binned_statistics(
    scores: ArrayLike, labels: ArrayLike, bins: ArrayLike, n_bins: int, weights: ArrayLike
) -> BinnedStatistics:
    """Weighted per-bin sums of a fixed bin assignment (jit/vmap-safe).

    ``weights`` may carry leading batch axes (e.g. bootstrap replicates): the sums of all of them
    are one matrix product. A NaN score or a label outside {0, 1} makes its own bin's sums NaN and
    no other bin's.
    """
    s, w = _float(scores), jnp.asarray(weights)
    y = _labels(labels, s)
    w = w.astype(s.dtype)
    nan = jnp.isnan(s) | jnp.isnan(y)
    s, y = jnp.where(nan, 0.0, s), jnp.where(nan, 0.0, y)
    features = jnp.stack([jnp.ones_like(s), s, y, nan.astype(s.dtype)])
    count, score_sum, label_sum, nan_count = _unstack(_weighted_bin_sums(w, features, bins, n_bins))
    weight_sq = _weighted_bin_sums(w * w, jnp.ones_like(s)[None], bins, n_bins)[..., 0, :]
    score_sum = jnp.where(nan_count > 0, jnp.nan, score_sum)
    label_sum = jnp.where(nan_count > 0, jnp.nan, label_sum)
    return BinnedStatistics(count, score_sum, label_sum, weight_sq)


def _unstack(x: Array) -> list[Array]:
    return [x[..., k, :] for k in range(x.shape[-2])]


def _bin_matrix(features: Array, bins: ArrayLike, n_bins: int) -> Array:
    """``M[i, (k, b)] = features[k, i] 1[bins_i = b]``, shape ``(n, k * n_bins)``."""
    onehot = jax.nn.one_hot(jnp.asarray(bins), n_bins, dtype=features.dtype)
    k, n = features.shape
    return (features.T[:, :, None] * onehot[:, None, :]).reshape(n, k * n_bins)


def _weighted_bin_sums(weights: Array, features: Array, bins: ArrayLike, n_bins: int) -> Array:
    """``sum_i weights[..., i] features[k, i] 1[bins_i = b]``, shape ``(..., k, n_bins)``.

    One matrix product with :func:`_bin_matrix` rather than a scatter, so that a batch of weight
    vectors (bootstrap replicates, or ``vmap``) is a single product; scatters batched by ``vmap``
    are slow on CPU. ``features`` must be finite (``0 * inf`` would leak across bins).
    """
    m = _bin_matrix(features, bins, n_bins)
    out = jnp.matmul(weights, m, precision=jax.lax.Precision.HIGHEST)
    return out.reshape(*weights.shape[:-1], features.shape[0], n_bins)


def _safe_div(num: Array, den: Array) -> Array:
    """``num / den`` where ``den > 0``, NaN elsewhere (empty bins)."""
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), jnp.nan)


# ----------------------------------------------------------------------------------------------
# Binomial confidence interval of an event rate
# ----------------------------------------------------------------------------------------------


def _beta_quantile(q: Array, a: Array, b: Array, n_steps: int = 64) -> Array:
    """The ``q`` quantile of ``Beta(a, b)``: the root of ``I_x(a, b) = q`` by bisection on [0, 1].

    JAX has the regularized incomplete beta function ``I_x(a, b)`` (``betainc``) but no beta
    quantile; ``I_x`` increases in ``x``, so bisection converges, to float resolution after 64
    halvings. Broadcasts over its arguments; ``a, b > 0``.
    """
    q, a, b = jnp.broadcast_arrays(q, a, b)

    def halve(_, bounds: tuple[Array, Array]) -> tuple[Array, Array]:
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        below = jax.scipy.special.betainc(a, b, mid) < q
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = jax.lax.fori_loop(0, n_steps, halve, (jnp.zeros_like(q), jnp.ones_like(q)))
    return 0.5 * (lo + hi)


def clopper_pearson_interval(
    events: ArrayLike, count: ArrayLike, confidence: ArrayLike = 0.95
) -> Array:
    """Clopper-Pearson ("exact") confidence interval of a binomial rate ``events / count``.

    With ``k`` events out of ``n`` and ``alpha = 1 - confidence``, the interval is the pair of
    beta quantiles (Clopper & Pearson, Biometrika 26(4), 1934; Brown, Cai & DasGupta,
    Statistical Science 16(2), 2001, eq. 4)::

        lower = Beta^{-1}(alpha / 2; k, n - k + 1)      (0 when k = 0),
        upper = Beta^{-1}(1 - alpha / 2; k + 1, n - k)  (1 when k = n),

    whose coverage is at least ``confidence`` for every true rate. With no event the upper bound
    has the closed form ``1 - (alpha / 2)^(1 / n)`` (used as such), and with every trial an event
    the lower bound is ``(alpha / 2)^(1 / n)``. Non-integer ``k`` and ``n`` (effective counts of
    weighted data, see :class:`CalibrationCurve`) enter the same beta quantiles.

    Pure and elementwise: works under ``jax.jit`` and ``jax.vmap`` (the bounds are found by
    bisection, so they carry no gradient).

    Args:
      events: number of events ``k``, any shape.
      count: number of trials ``n`` (broadcast against ``events``); ``n = 0`` (an empty bin)
        gives NaN bounds.
      confidence: coverage in ``(0, 1)``.

    Returns:
      ``(2, *shape)``: row 0 the lower bounds, row 1 the upper bounds.

    Raises:
      ValueError: on concrete input with ``events < 0``, ``count < events``, NaN, or
        ``confidence`` outside ``(0, 1)`` (under jit those entries give NaN).
    """
    k_np, n_np = V.concrete_value(events), V.concrete_value(count)
    V.check_open_unit("confidence", confidence)
    V.check_interval("events", events, 0.0, np.inf, open_low=False, open_high=False)
    V.check_interval("count", count, 0.0, np.inf, open_low=False, open_high=False)
    if k_np is not None and n_np is not None and np.any(k_np > n_np):
        raise ValueError("events exceeds count")
    k = _float(events)
    n = jnp.asarray(count, k.dtype)
    k, n = jnp.broadcast_arrays(k, n)
    half_alpha = 0.5 * (1.0 - jnp.asarray(confidence, k.dtype))
    valid = (k >= 0) & (k <= n) & (n > 0) & (half_alpha > 0) & (half_alpha < 0.5)
    none, every = k <= 0, k >= n
    # Placeholder shape parameters where a bound has a closed form (betainc needs a, b > 0).
    lower = _beta_quantile(half_alpha, jnp.where(none, 1.0, k), jnp.where(none, 1.0, n - k + 1))
    upper = _beta_quantile(
        1.0 - half_alpha, jnp.where(every, 1.0, k + 1), jnp.where(every, 1.0, n - k)
    )
    safe_n = jnp.where(n > 0, n, 1.0)
    lower = jnp.where(none, 0.0, jnp.where(every, half_alpha ** (1.0 / safe_n), lower))
    upper = jnp.where(every, 1.0, jnp.where(none, 1.0 - half_alpha ** (1.0 / safe_n), upper))
    return jnp.where(valid, jnp.stack([lower, upper]), jnp.nan)


# ----------------------------------------------------------------------------------------------
# Calibration curve (Definition 1, Figures 1 and 4)
# ----------------------------------------------------------------------------------------------


class CalibrationCurve(NamedTuple):
    """A binned calibration curve (a pytree).

    Attributes:
      mean_score: weighted mean score per bin, ``(n_bins,)``; NaN in an empty bin.
      event_rate: weighted rate of label 1 per bin (the empirical ``P(y = 1 | a)`` of
        Definition 1); NaN in an empty bin.
      count: sum of weights per bin (the number of observations when unweighted); 0 if empty.
      edges: bin edges, ``(n_bins + 1,)``.
      event_rate_binomial_interval: :func:`clopper_pearson_interval` of ``event_rate``,
        ``(2, n_bins)``, always computed. Unweighted, from the bin's events and count; weighted,
        from Kish's effective count ``n_eff = count^2 / sum(w^2)`` and ``event_rate * n_eff``
        events. A bin without events gets ``[0, 1 - (alpha / 2)^(1 / n_eff)]``; NaN if empty.
      mean_score_interval: bootstrap percentile interval of ``mean_score``, ``(2, n_bins)``
        (row 0 lower, row 1 upper), or ``None`` without bootstrap. NaN where the bin is empty in
        every replicate.
      event_rate_interval: the same for ``event_rate``.
    """

    mean_score: Array
    event_rate: Array
    count: Array
    edges: Array
    event_rate_binomial_interval: Array
    mean_score_interval: Array | None = None
    event_rate_interval: Array | None = None


def _bootstrap_counts(key: Array, n: int, n_bootstrap: int) -> Array:
    """Multinomial resampling multiplicities: ``(n_bootstrap, n)`` counts, each row summing to n.

    Indices are random 32-bit integers modulo ``n`` (a relative bias below ``n / 2**32``), which
    compiles much faster on CPU than ``jax.random.randint``.
    """
    idx = (jax.random.bits(key, (n_bootstrap, n), jnp.uint32) % jnp.uint32(n)).astype(jnp.int32)
    rows = jnp.arange(n_bootstrap)[:, None]
    return jnp.zeros((n_bootstrap, n), jnp.float32).at[rows, idx].add(1.0)


def _percentile_interval(samples: Array, confidence: float, axis: int = 0) -> Array:
    """Percentile bootstrap interval along ``axis``, NaNs (empty bins) ignored: ``(2, ...)``."""
    lo = (1.0 - confidence) / 2.0
    return jnp.nanquantile(samples, jnp.array([lo, 1.0 - lo]), axis=axis)


def _check_bootstrap(n_bootstrap: int, key: Array | None, confidence: float) -> None:
    V.check_count("n_bootstrap", n_bootstrap, 0)
    if n_bootstrap > 0 and key is None:
        raise ValueError("key (a jax.random key) is required when n_bootstrap > 0")
    V.check_open_unit("confidence", confidence)


def calibration_curve(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    sample_weight: ArrayLike | None = None,
    *,
    n_bootstrap: int = 0,
    key: Array | None = None,
    confidence: float = 0.95,
) -> CalibrationCurve:
    """The binned calibration curve of binary scores (Definition 1; the paper's Figures 1, 4).

    Scores are calibrated when the curve lies on the diagonal: ``event_rate == mean_score``.
    Unlike scikit-learn, empty bins are kept (with ``count == 0`` and NaN means) so that the
    output has a fixed shape and can be jitted and vmapped.

    Args:
      scores: positive-class scores in ``[0, 1]``, shape ``(n,)``.
      labels: labels in ``{0, 1}``, shape ``(n,)``.
      n_bins: number of bins.
      strategy: ``"quantile"`` (the paper's deciles for ``n_bins=10``) or ``"uniform"``.
      sample_weight: non-negative weights, shape ``(n,)``; they weight the means and counts but not
        the quantile edges.
      n_bootstrap: number of nonparametric bootstrap replicates (observations resampled with
        replacement, bins held fixed) for percentile intervals; 0 for none.
      key: ``jax.random`` key, required when ``n_bootstrap > 0``.
      confidence: coverage of the intervals (the binomial one, always computed, and the
        bootstrap ones).

    Returns:
      A :class:`CalibrationCurve`.

    Raises:
      ValueError: on concrete bad input (see the module docstring for traced input).
    """
    _check_n_bins(n_bins)
    _check_strategy(strategy)
    _check_binary(scores, labels, sample_weight, n_bins)
    _check_bootstrap(n_bootstrap, key, confidence)
    return _calibration_curve(
        scores, labels, sample_weight, key, n_bins, strategy, n_bootstrap, confidence
    )


@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7))
def _calibration_curve(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None,
    key: Array | None,
    n_bins: int,
    strategy: str,
    n_bootstrap: int,
    confidence: float,
) -> CalibrationCurve:
    s = _float(scores)
    w = _weights(sample_weight, s)
    edges = bin_edges(s, n_bins, strategy)
    bins = assign_bins(s, edges)
    st = binned_statistics(s, labels, bins, n_bins, w)
    mean_score = _safe_div(st.score_sum, st.count)
    event_rate = _safe_div(st.label_sum, st.count)
    # Kish's effective count n_eff = count^2 / sum(w^2); exactly the count when unweighted.
    design = _safe_div(st.count, st.weight_sq_sum)
    n_eff = jnp.where(st.count > 0, st.count * design, 0.0)
    events = jnp.minimum(jnp.where(st.count > 0, st.label_sum * design, 0.0), n_eff)
    binomial = clopper_pearson_interval(events, n_eff, confidence)
    if n_bootstrap == 0:
        return CalibrationCurve(mean_score, event_rate, st.count, edges, binomial)
    counts = _bootstrap_counts(key, s.shape[0], n_bootstrap)
    boot = binned_statistics(s, labels, bins, n_bins, w * counts)  # one product for all
    return CalibrationCurve(
        mean_score,
        event_rate,
        st.count,
        edges,
        binomial,
        _percentile_interval(_safe_div(boot.score_sum, boot.count), confidence),
        _percentile_interval(_safe_div(boot.label_sum, boot.count), confidence),
    )


# ----------------------------------------------------------------------------------------------
# Metrics: ECE (binned and debiased), Brier score, log loss, AUROC
# ----------------------------------------------------------------------------------------------

NORMS = ("l1", "l2", "max")
MULTICLASS_MODES = ("top_label", "classwise")


def _check_multiclass(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None, n_bins: int | None
) -> None:
    """Raise ``ValueError`` on bad multiclass input: scores ``(n, k)``, labels in ``[0, k)``."""
    s, y = V.concrete_value(scores), V.concrete_value(labels)
    if s is not None:
        if s.ndim != 2 or s.shape[1] < 2:
            raise ValueError(f"multiclass scores must have shape (n, k>=2), got {s.shape}")
        if s.shape[0] == 0:
            raise ValueError("scores is empty")
        V.check_unit("scores", s)
        if n_bins is not None and s.shape[0] < n_bins:
            raise ValueError(f"scores has {s.shape[0]} observations, fewer than n_bins={n_bins}")
    if y is not None:
        if s is not None:
            V.check_shape("labels", y, s.shape[:1])
        if s is not None and not np.all((y >= 0) & (y < s.shape[1]) & (y == np.round(y))):
            raise ValueError(f"labels must be class indices in [0, {s.shape[1]})")
    if s is not None:
        _check_weights(sample_weight, s.shape[0])


def _check_scores_labels(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None, n_bins: int | None
) -> int:
    """Validate binary (1-D scores) or multiclass (2-D scores) input; return the scores' ndim."""
    ndim = jnp.ndim(scores)
    if ndim == 1:
        _check_binary(scores, labels, sample_weight, n_bins)
    elif ndim == 2:
        _check_multiclass(scores, labels, sample_weight, n_bins)
    else:
        raise ValueError(f"scores must have shape (n,) or (n, k), got {jnp.shape(scores)}")
    return ndim


def calibration_error_from_statistics(
    stats: BinnedStatistics, norm: str = "l1", debias: bool = False
) -> Array:
    """Binned calibration error from per-bin sums (batched over leading axes).

    With ``p_b`` the bin's share of the weight and ``d_b`` its mean score minus its event rate:
    ``l1`` is ``sum_b p_b |d_b|`` (the usual ECE), ``l2`` is ``sqrt(sum_b p_b d_b^2)`` and ``max``
    is ``max_b |d_b|`` over nonempty bins. With ``debias`` (``l2`` only) each squared gap is
    reduced by the sampling variance of the bin's event rate, ``r_b (1 - r_b) / (n_b - 1)``, the
    debiased estimator of Kumar, Liang & Ma (2019, "Verified Uncertainty Calibration"), and the
    square root is taken of its positive part; ``n_b`` is the bin's effective sample size
    ``(sum w)^2 / sum w^2`` (its count when unweighted), and bins with ``n_b <= 1`` keep their
    plug-in term.

    Args:
      stats: per-bin sums, arrays ``(..., n_bins)``.
      norm: ``"l1"``, ``"l2"`` or ``"max"``.
      debias: subtract the binomial noise (``norm="l2"`` only).

    Returns:
      The calibration error, shape ``(...)``.
    """
    V.check_choice("norm", norm, NORMS)
    if debias and norm != "l2":
        raise ValueError("debias is defined for norm='l2' only (Kumar, Liang & Ma 2019)")
    filled = stats.count > 0
    safe_count = jnp.where(filled, stats.count, 1.0)
    gap = jnp.where(filled, (stats.score_sum - stats.label_sum) / safe_count, 0.0)
    share = stats.count / jnp.sum(stats.count, axis=-1, keepdims=True)
    if norm == "l1":
        return jnp.sum(share * jnp.abs(gap), axis=-1)
    if norm == "max":
        return jnp.max(jnp.abs(gap), axis=-1)
    sq = jnp.square(gap)
    if debias:
        rate = jnp.where(filled, stats.label_sum / safe_count, 0.0)
        n_eff = jnp.square(stats.count) / jnp.where(filled, stats.weight_sq_sum, 1.0)
        noise = rate * (1.0 - rate) / jnp.where(n_eff > 1.0, n_eff - 1.0, 1.0)
        sq = sq - jnp.where(n_eff > 1.0, noise, 0.0)
        return jnp.sqrt(jnp.maximum(jnp.sum(share * sq, axis=-1), 0.0))
    return jnp.sqrt(jnp.sum(share * sq, axis=-1))


_EMPTY_STATS = BinnedStatistics(*np.ones((4, 1), np.float32))


def _binary_ece(
    scores: Array,
    labels: Array,
    weights: Array,
    n_bins: int,
    strategy: str,
    norm: str,
    debias: bool,
) -> Array:
    edges = bin_edges(scores, n_bins, strategy)
    stats = binned_statistics(scores, labels, assign_bins(scores, edges), n_bins, weights)
    return calibration_error_from_statistics(stats, norm, debias)


def expected_calibration_error(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    sample_weight: ArrayLike | None = None,
    *,
    norm: str = "l1",
    debias: bool = False,
    multiclass: str = "top_label",
) -> Array:
    """Expected calibration error: the binned distance of the calibration curve from the diagonal.

    Measures the failure of Definition 1 (``a = P(y | a)``). See
    :func:`calibration_error_from_statistics` for the norms and the debiased estimator.

    Args:
      scores: binary positive-class scores ``(n,)`` or multiclass scores ``(n, k)``.
      labels: ``{0, 1}`` labels ``(n,)``, or class indices in ``[0, k)`` for multiclass.
      n_bins: number of bins.
      strategy: ``"quantile"`` (equal mass, the paper's deciles) or ``"uniform"``.
      sample_weight: non-negative weights ``(n,)``.
      norm: ``"l1"`` (ECE), ``"l2"`` (RMS calibration error) or ``"max"`` (MCE).
      debias: the debiased ``l2`` estimator of Kumar, Liang & Ma (2019).
      multiclass: for ``(n, k)`` scores, ``"top_label"`` (calibration of the top score as the
        probability that the top class is right) or ``"classwise"`` (the mean over classes of the
        binary error of class ``j``'s scores against ``labels == j``).

    Returns:
      A scalar.
    """
    _check_n_bins(n_bins)
    _check_strategy(strategy)
    V.check_choice("multiclass", multiclass, MULTICLASS_MODES)
    _check_scores_labels(scores, labels, sample_weight, n_bins)
    calibration_error_from_statistics(_EMPTY_STATS, norm, debias)  # validates norm and debias
    return _expected_calibration_error(
        scores, labels, sample_weight, n_bins, strategy, norm, debias, multiclass
    )


@functools.partial(jax.jit, static_argnums=(3, 4, 5, 6, 7))
def _expected_calibration_error(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None,
    n_bins: int,
    strategy: str,
    norm: str,
    debias: bool,
    multiclass: str,
) -> Array:
    s = _float(scores)
    w = _weights(sample_weight, s)
    y = jnp.asarray(labels)
    if s.ndim == 1:
        return _binary_ece(s, y, w, n_bins, strategy, norm, debias)
    if multiclass == "top_label":
        correct = jnp.argmax(s, axis=-1) == y
        error = _binary_ece(jnp.max(s, axis=-1), correct, w, n_bins, strategy, norm, debias)
    else:
        onehot = jax.nn.one_hot(y, s.shape[1], dtype=s.dtype)
        per_class = jax.vmap(
            lambda sk, yk: _binary_ece(sk, yk, w, n_bins, strategy, norm, debias), in_axes=1
        )(s, onehot)
        error = jnp.mean(per_class)
    return jnp.where(_class_labels_invalid(y, s.shape[1]), jnp.nan, error)


def _weighted_mean(values: Array, weights: Array) -> Array:
    return jnp.sum(weights * values) / jnp.sum(weights)


def brier_score(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
) -> Array:
    """Mean squared error of the scores: ``(a - y)^2`` (binary) or ``sum_k (a_k - 1{y=k})^2``.

    Args:
      scores: binary ``(n,)`` or multiclass ``(n, k)`` scores.
      labels: ``{0, 1}`` or class indices.
      sample_weight: non-negative weights ``(n,)``.

    Returns:
      The weighted mean, a scalar.
    """
    ndim = _check_scores_labels(scores, labels, sample_weight, None)
    s = _float(scores)
    w = _weights(sample_weight, s)
    y = jnp.asarray(labels)
    if ndim == 1:
        return _weighted_mean(jnp.square(s - _labels(y, s)), w)
    per_obs = jnp.sum(jnp.square(s - jax.nn.one_hot(y, s.shape[1], dtype=s.dtype)), axis=-1)
    return jnp.where(_class_labels_invalid(y, s.shape[1]), jnp.nan, _weighted_mean(per_obs, w))


def mean_log_loss(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
) -> Array:
    """Mean cross-entropy ``-log a_y`` of the scores (no clipping: a score of 0 on the true class
    gives ``inf``).

    Args:
      scores: binary ``(n,)`` or multiclass ``(n, k)`` scores.
      labels: ``{0, 1}`` or class indices.
      sample_weight: non-negative weights ``(n,)``.

    Returns:
      The weighted mean, a scalar.
    """
    ndim = _check_scores_labels(scores, labels, sample_weight, None)
    s = _float(scores)
    w = _weights(sample_weight, s)
    y = jnp.asarray(labels)
    if ndim == 1:
        y = _labels(y, s)
        per_obs = jnp.where(y == 1, -jnp.log(s), -jnp.log1p(-s))
        return _weighted_mean(jnp.where(jnp.isnan(y), jnp.nan, per_obs), w)
    per_obs = -jnp.log(jnp.take_along_axis(s, y[:, None].astype(jnp.int32), axis=-1)[:, 0])
    return jnp.where(_class_labels_invalid(y, s.shape[1]), jnp.nan, _weighted_mean(per_obs, w))


def _binary_auroc(scores: Array, positive: Array, weights: Array) -> Array:
    """Weighted Mann-Whitney statistic: P(score of a positive > of a negative) + P(tie) / 2."""
    order = jnp.argsort(scores)
    s_sorted = scores[order]
    neg_w = (weights * (1.0 - positive))[order]
    cum = jnp.concatenate([jnp.zeros(1, neg_w.dtype), jnp.cumsum(neg_w)])
    lo = jnp.searchsorted(s_sorted, scores, side="left")
    hi = jnp.searchsorted(s_sorted, scores, side="right")
    below, tied = cum[lo], cum[hi] - cum[lo]
    pos_w = weights * positive
    area = jnp.sum(pos_w * (below + 0.5 * tied)) / (jnp.sum(pos_w) * jnp.sum(neg_w))
    return jnp.where(jnp.any(jnp.isnan(scores)), jnp.nan, area)


def auroc(scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None) -> Array:
    """Area under the ROC curve, ties counted one half (the Mann-Whitney statistic).

    For multiclass scores ``(n, k)``, the unweighted mean over classes of the one-vs-rest AUROC
    (scikit-learn's ``multi_class="ovr", average="macro"``). NaN where a class has no positive or
    no negative observation.

    Args:
      scores: binary ``(n,)`` or multiclass ``(n, k)`` scores.
      labels: ``{0, 1}`` or class indices.
      sample_weight: non-negative weights ``(n,)``.

    Returns:
      A scalar in ``[0, 1]``.
    """
    ndim = _check_scores_labels(scores, labels, sample_weight, None)
    s = _float(scores)
    w = _weights(sample_weight, s)
    y = jnp.asarray(labels)
    if ndim == 1:
        return _binary_auroc(s, _labels(y, s), w)
    onehot = jax.nn.one_hot(y, s.shape[1], dtype=s.dtype)
    area = jnp.mean(jax.vmap(lambda sk, yk: _binary_auroc(sk, yk, w), in_axes=1)(s, onehot))
    return jnp.where(_class_labels_invalid(y, s.shape[1]), jnp.nan, area)


# ----------------------------------------------------------------------------------------------
# Loss calibration (Definition 2): the gap, the curve of Figure 3, and the test
# ----------------------------------------------------------------------------------------------


def _binary_loss(loss: LossLike) -> LossSpec:
    """The one binary loss that loss calibration is judged against (:func:`iml.loss_spec`)."""
    spec = loss_spec(loss)
    if spec.multiclass:
        raise ValueError(f"loss must be a binary loss here; got the {spec.describe()}")
    if spec.batch_shape:
        raise ValueError(
            f"loss must be one loss, not a batch of shape {spec.batch_shape}; map over a batch "
            "with jax.vmap"
        )
    return spec


def _label_losses(spec: LossSpec) -> tuple[Callable[[Array], Array], Callable[[Array], Array]]:
    """``a -> L(a, 1)`` and ``a -> L(a, 0)``."""
    return (lambda a: spec.loss(a, jnp.ones_like(a)), lambda a: spec.loss(a, jnp.zeros_like(a)))


class _LossSums(NamedTuple):
    """Per-bin sums that determine the loss-calibration gap (all linear in the weights)."""

    count: Array  # sum w
    positives: Array  # sum w y
    loss_pos: Array  # sum w y L(a, 1)
    loss_neg: Array  # sum w (1 - y) L(a, 0)


def _loss_matrices(bins: Array, n_bins: int, l_pos: Array, l_neg: Array) -> tuple[Array, Array]:
    """Bin matrices ``(M0, M1)`` with ``_LossSums(w, y) = w @ M0 + (w * y) @ M1`` (all linear).

    Rows: count, positives, finite parts of ``y L(a, 1)`` and ``(1 - y) L(a, 0)``, and flags of
    infinite and NaN losses, so that an infinite loss (a score of 0 or 1 with the other label)
    makes its own bin's sum infinite without ``0 * inf`` leaking into other bins.
    """
    fin_pos = jnp.where(jnp.isfinite(l_pos), l_pos, 0.0)
    fin_neg = jnp.where(jnp.isfinite(l_neg), l_neg, 0.0)
    inf_pos = (l_pos == jnp.inf).astype(l_pos.dtype)
    inf_neg = (l_neg == jnp.inf).astype(l_neg.dtype)
    nan_pos = jnp.isnan(l_pos).astype(l_pos.dtype)
    nan_neg = jnp.isnan(l_neg).astype(l_neg.dtype)
    one, zero = jnp.ones_like(fin_pos), jnp.zeros_like(fin_pos)
    f0 = jnp.stack([one, zero, zero, fin_neg, zero, inf_neg, nan_neg])
    f1 = jnp.stack([zero, one, fin_pos, -fin_neg, inf_pos, -inf_neg, nan_pos - nan_neg])
    return _bin_matrix(f0, bins, n_bins), _bin_matrix(f1, bins, n_bins)


def _loss_sums(weights: Array, labels: Array, matrices: tuple[Array, Array]) -> _LossSums:
    """Per-bin loss sums for weights and labels ``(..., n)`` (broadcast), ``(..., n_bins)``."""
    m0, m1 = matrices
    hp = jax.lax.Precision.HIGHEST
    y = labels.astype(weights.dtype)
    flat = jnp.matmul(weights, m0, precision=hp) + jnp.matmul(weights * y, m1, precision=hp)
    out = flat.reshape(*flat.shape[:-1], 7, -1)
    count, positives, loss_pos, loss_neg, inf_pos, inf_neg, nan = _unstack(out)
    nan = nan > 0
    loss_pos = jnp.where(nan, jnp.nan, jnp.where(inf_pos > 0, jnp.inf, loss_pos))
    loss_neg = jnp.where(nan, jnp.nan, jnp.where(inf_neg > 0, jnp.inf, loss_neg))
    return _LossSums(count, positives, loss_pos, loss_neg)


def _loss_reduction(
    sums: _LossSums, optimal: Callable[[Array], Array], loss_pos: Callable, loss_neg: Callable
) -> tuple[Array, Array]:
    """Per bin: the loss of the bin's scores minus the loss of the best single alternative
    ``a' = c(event rate)`` (Definition 2's wholesale switch). Returns (reduction, a')."""
    filled = sums.count > 0
    rate = jnp.where(filled, sums.positives / jnp.where(filled, sums.count, 1.0), 0.5)
    best = optimal(rate)
    negatives = sums.count - sums.positives
    alt = jnp.where(sums.positives > 0, sums.positives * loss_pos(best), 0.0) + jnp.where(
        negatives > 0, negatives * loss_neg(best), 0.0
    )
    # Only a truly empty bin counts 0; a NaN count (invalid input under jit) stays NaN.
    empty = sums.count == 0
    reduction = jnp.where(empty, 0.0, sums.loss_pos + sums.loss_neg - alt)
    return reduction, jnp.where(filled, best, jnp.nan)


class LossCalibrationCurve(NamedTuple):
    """The loss calibration curve of the paper's Figure 3 (a pytree).

    Attributes:
      mean_score: mean raw score per bin, ``(n_bins,)`` (NaN if empty).
      event_rate: rate of label 1 per bin, the bin's empirical posterior (NaN if empty).
      count: sum of weights per bin.
      edges: bin edges, ``(n_bins + 1,)``.
      optimal_score: ``c(event_rate)``, the score the rule assigns to the bin's empirical
        posterior (NaN if empty). Loss calibration (Def. 2) holds when it matches ``mean_score``.
      posterior_grid: posteriors ``gamma`` (logit-spaced on ``[1e-4, 1 - 1e-4]``), ``(n_grid,)``.
      optimal_score_grid: the theoretical map ``c(gamma)`` on the grid: plotting
        ``(optimal_score_grid, posterior_grid)`` next to ``(mean_score, event_rate)`` is Fig. 3.
      event_rate_interval: bootstrap interval of ``event_rate``, ``(2, n_bins)``, or ``None``.
    """

    mean_score: Array
    event_rate: Array
    count: Array
    edges: Array
    optimal_score: Array
    posterior_grid: Array
    optimal_score_grid: Array
    event_rate_interval: Array | None = None


def loss_calibration_curve(
    scores: ArrayLike,
    labels: ArrayLike,
    loss: LossLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    sample_weight: ArrayLike | None = None,
    *,
    n_grid: int = 200,
    n_bootstrap: int = 0,
    key: Array | None = None,
    confidence: float = 0.95,
) -> LossCalibrationCurve:
    """The empirical calibration curve against the theoretical map ``c`` (Figure 3, Prop. 2).

    If the scores are loss-calibrated (Definition 2), the points ``(mean_score, event_rate)`` lie
    on the curve ``a = c(gamma)``: for a class weight ``beta`` it is ``c^beta`` of eq.
    ``choice-b1``; for any other differentiable loss, the generic rule
    ``iml.scoring.optimal_score_for_loss``.

    Args:
      scores: raw positive-class scores ``(n,)`` of a model trained with the loss.
      labels: ``{0, 1}`` labels ``(n,)``.
      loss: the binary loss the model was trained with, as :func:`iml.loss_spec` reads it: a
        class weight ``beta`` in ``(0, 1)`` (the beta-weighted log loss), a
        :class:`iml.LossSpec`, a loss name or any differentiable ``L(a, y)``.
      n_bins: number of bins.
      strategy: ``"quantile"`` or ``"uniform"``.
      sample_weight: non-negative weights ``(n,)``.
      n_grid: number of points of the theoretical curve.
      n_bootstrap: replicates for the event rates' percentile intervals (0 for none).
      key: ``jax.random`` key, required when ``n_bootstrap > 0``.
      confidence: coverage of the intervals.

    Returns:
      A :class:`LossCalibrationCurve`.
    """
    spec = _binary_loss(loss)
    curve = calibration_curve(
        scores,
        labels,
        n_bins,
        strategy,
        sample_weight,
        n_bootstrap=n_bootstrap,
        key=key,
        confidence=confidence,
    )
    grid = jax.nn.sigmoid(jnp.linspace(-9.21024, 9.21024, n_grid))  # logit(1e-4) .. logit(1-1e-4)
    filled = curve.count > 0
    best = jnp.where(filled, spec.optimal_score(jnp.where(filled, curve.event_rate, 0.5)), jnp.nan)
    return LossCalibrationCurve(
        curve.mean_score,
        curve.event_rate,
        curve.count,
        curve.edges,
        best,
        grid,
        spec.optimal_score(grid),
        curve.event_rate_interval,
    )


class LossCalibrationTest(NamedTuple):
    """Result of :func:`loss_calibration_test` (a pytree).

    Attributes:
      loss_reduction: per bin, the loss that switching all of the bin's scores to ``a'`` would
        save, divided by the total weight (so the bins sum to ``gap``); 0 for empty bins. It can be
        negative: the bin's own scores may discriminate better than any single score.
      gap: the total per observation, the test statistic.
      p_value: parametric-bootstrap p-value under H0 (the scores are loss-calibrated).
      gap_interval: nonparametric-bootstrap percentile interval of ``gap``, ``(2,)``.
      null_gaps: the gaps of the labels simulated under H0, ``(n_bootstrap,)``.
      optimal_score: ``a' = c(event rate)`` per bin (NaN if empty).
      count: sum of weights per bin.
      edges: bin edges.
    """

    loss_reduction: Array
    gap: Array
    p_value: Array
    gap_interval: Array
    null_gaps: Array
    optimal_score: Array
    count: Array
    edges: Array


def loss_calibration_test(
    scores: ArrayLike,
    labels: ArrayLike,
    loss: LossLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    sample_weight: ArrayLike | None = None,
    *,
    n_bootstrap: int = 200,
    key: Array | None = None,
    confidence: float = 0.95,
) -> LossCalibrationTest:
    """Test of loss calibration (Definition 2) by a wholesale switch of each bin's scores.

    For each bin ``b`` (scores binned as in :func:`calibration_curve`), the statistic compares the
    loss of the bin's own scores with the loss of the best single alternative, the rule applied to
    the bin's empirical posterior, ``a'_b = c(event rate of b)``::

        reduction_b = sum_{i in b} w_i [L(a_i, y_i) - L(a'_b, y_i)],
        gap = sum_b reduction_b / sum_i w_i.

    Definition 2 says no switch reduces the loss. With binned, non-constant scores the gap of a
    loss-calibrated model is not exactly 0 (negative where scores discriminate within a bin,
    positive by sampling noise), so it is judged against its distribution under H0, obtained by a
    parametric bootstrap: by Prop. 4, under H0 each label is ``y* ~ Bernoulli(c^{-1}(a))`` (the
    loss-corrected score; for a general loss ``iml.scoring.loss_corrected_score_for_loss``); the
    gap is recomputed on the simulated labels (bins fixed) and
    ``p = (1 + #{null gap >= observed gap}) / (1 + n_bootstrap)``. The interval of the gap
    resamples observations (nonparametric bootstrap, bins fixed).

    Under jit, with unvalidated input, a NaN loss-corrected score (a general loss whose rule is not
    invertible at some score) makes the p-value NaN.

    Args:
      scores: raw positive-class scores ``(n,)`` in ``[0, 1]``.
      labels: ``{0, 1}`` labels ``(n,)``.
      loss: the binary loss the model was trained with, as :func:`iml.loss_spec` reads it: a
        class weight ``beta`` in ``(0, 1)`` (the beta-weighted log loss, eq. ``b-loss-bin``;
        ``loss_spec("squared", beta=...)`` for the weighted Brier score), a
        :class:`iml.LossSpec`, a loss name or any differentiable ``L(a, y)``.
      n_bins: number of bins.
      strategy: ``"quantile"`` or ``"uniform"``.
      sample_weight: non-negative weights ``(n,)``.
      n_bootstrap: replicates, for the null distribution and for the interval each.
      key: ``jax.random`` key (required).
      confidence: coverage of the interval.

    Returns:
      A :class:`LossCalibrationTest`. A score of exactly 0 or 1 with the opposite label makes the
      log-loss gap infinite (such a label is impossible under H0): ``p = 1 / (1 + n_bootstrap)``.
    """
    _check_n_bins(n_bins)
    _check_strategy(strategy)
    _check_binary(scores, labels, sample_weight, n_bins)
    V.check_count("n_bootstrap", n_bootstrap)
    _check_bootstrap(n_bootstrap, key, confidence)
    spec = _binary_loss(loss)
    return _loss_calibration_test(
        scores,
        labels,
        sample_weight,
        key,
        spec,
        n_bins,
        strategy,
        n_bootstrap,
        confidence,
    )


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8))
def _loss_calibration_test(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None,
    key: Array,
    spec: LossSpec,
    n_bins: int,
    strategy: str,
    n_bootstrap: int,
    confidence: float,
) -> LossCalibrationTest:
    loss_pos, loss_neg = _label_losses(spec)
    a = _float(scores)
    y = _labels(labels, a)
    w = _weights(sample_weight, a)
    edges = bin_edges(a, n_bins, strategy)
    bins = assign_bins(a, edges)
    matrices = _loss_matrices(bins, n_bins, loss_pos(a), loss_neg(a))

    def gap_of(labels_: Array, weights_: Array) -> tuple[Array, Array]:
        sums = _loss_sums(weights_, labels_, matrices)
        reduction, best = _loss_reduction(sums, spec.optimal_score, loss_pos, loss_neg)
        return reduction / jnp.sum(weights_, axis=-1, keepdims=True), best

    reduction, best = gap_of(y, w)
    gap = jnp.sum(reduction)
    key_null, key_boot = jax.random.split(key)
    posterior = spec.loss_corrected_score(a)

    # H0 labels for all replicates at once (B x n); their gaps are one matrix product.
    uniforms = jax.random.uniform(key_null, (n_bootstrap, a.shape[0]), a.dtype)
    y_star = (uniforms < posterior).astype(a.dtype)
    null_gaps = jnp.sum(gap_of(y_star, w)[0], axis=-1)
    exceed = jnp.sum(null_gaps >= gap)
    p_value = (1.0 + exceed) / (1.0 + n_bootstrap)
    p_value = jnp.where(jnp.any(jnp.isnan(posterior)) | jnp.isnan(gap), jnp.nan, p_value)
    counts = _bootstrap_counts(key_boot, a.shape[0], n_bootstrap)
    boot = jnp.sum(gap_of(y, w * counts)[0], axis=-1)
    interval = _percentile_interval(boot, confidence)
    count = _weighted_bin_sums(w, jnp.ones_like(w)[None], bins, n_bins)[0]
    return LossCalibrationTest(reduction, gap, p_value, interval, null_gaps, best, count, edges)


def ece_intervals(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    *,
    n_bootstrap: int = 200,
    key: Array | None = None,
    confidence: float = 0.95,
) -> Array:
    """Bootstrap percentile intervals of the ECE of every row of ``scores [m, N]``: ``[m, 2]``.

    Each replicate resamples the observations (multinomial counts, the same rows for every row
    of ``scores``, so rows compare on equal draws) with each row's bins held fixed at its own
    quantiles; the ECE is then one weighted sum per bin, a single matrix product for all
    replicates. The interval covers the evaluation data's sampling noise.

    Args:
      scores: ``[m, N]`` binary scores (or ``[N]`` for one row).
      labels: ``{0, 1}`` labels ``[N]``.
      n_bins, strategy: as :func:`expected_calibration_error`.
      n_bootstrap: replicates.
      key: ``jax.random`` key (required).
      confidence: coverage.
    """
    a = np.asarray(scores)
    one = a.ndim == 1
    a = a[None] if one else a
    _check_n_bins(n_bins)
    _check_strategy(strategy)
    for row in a:
        _check_binary(row, labels, None, n_bins)
    V.check_count("n_bootstrap", n_bootstrap, 2)
    _check_bootstrap(n_bootstrap, key, confidence)
    out = _ece_intervals(a, labels, key, n_bins, strategy, n_bootstrap, confidence)
    return out[0] if one else out


@functools.partial(jax.jit, static_argnums=(3, 4, 5, 6))
def _ece_intervals(scores, labels, key, n_bins, strategy, n_bootstrap, confidence) -> Array:
    a = _float(scores)
    y = jnp.broadcast_to(_labels(labels, a[0]), a.shape)
    replicates = _ece_replicates(a, y, key, n_bins, strategy, n_bootstrap)
    return jax.lax.map(lambda r: _percentile_interval(r, confidence), replicates)


def _ece_replicates(
    scores: Array, labels: Array, key: Array, n_bins: int, strategy: str, n_bootstrap: int
) -> Array:
    """The ECE of every row of ``scores [m, N]`` against its row of ``labels [m, N]`` in each
    bootstrap replicate, ``[m, B]``: the same resampled observations for every row, each row's
    bins fixed at its own quantiles."""
    counts = _bootstrap_counts(key, scores.shape[1], n_bootstrap)  # [B, N]
    total = jnp.sum(counts, axis=1)

    def row(pair: tuple[Array, Array]) -> Array:
        s, y = pair
        bins = assign_bins(s, bin_edges(s, n_bins, strategy))
        gap = jax.nn.one_hot(bins, n_bins, dtype=s.dtype) * (s - y)[:, None]  # [N, S]
        sums = jnp.matmul(counts, gap, precision=jax.lax.Precision.HIGHEST)  # [B, S]
        return jnp.sum(jnp.abs(sums), axis=1) / total

    return jax.lax.map(row, (scores, labels))


def multiclass_ece_intervals(
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    *,
    n_bootstrap: int = 200,
    key: Array | None = None,
    confidence: float = 0.95,
) -> dict[str, Array]:
    """Bootstrap percentile intervals of the top-label and the class-wise ECE (l1, quantile
    bins; :func:`expected_calibration_error`) of every score matrix ``scores [m, N, n]``:
    ``{"top_label_ece": [m, 2], "classwise_ece": [m, 2]}``.

    As :func:`ece_intervals`: each replicate resamples the observations, the same ones for every
    matrix and class, with bins fixed; the class-wise ECE's replicate is the mean of its classes'
    ECEs on the same draw.
    """
    a = np.asarray(scores)
    if a.ndim != 3 or a.shape[-1] < 2:
        raise ValueError(f"scores must be [m, N, n] class scores, got shape {a.shape}")
    y = np.asarray(labels)
    V.check_shape("labels", y, a.shape[1:2])
    _check_n_bins(n_bins)
    V.check_count("n_bootstrap", n_bootstrap, 2)
    _check_bootstrap(n_bootstrap, key, confidence)
    top, classwise = _multiclass_ece_intervals(a, y, key, n_bins, n_bootstrap, confidence)
    return {"top_label_ece": top, "classwise_ece": classwise}


@functools.partial(jax.jit, static_argnums=(3, 4, 5))
def _multiclass_ece_intervals(scores, labels, key, n_bins, n_bootstrap, confidence):
    s = _float(scores)
    m, n, k = s.shape
    y = jnp.asarray(labels)
    correct = (jnp.argmax(s, axis=-1) == y).astype(s.dtype)
    top = _ece_replicates(jnp.max(s, axis=-1), correct, key, n_bins, "quantile", n_bootstrap)
    per_class = jnp.moveaxis(s, -1, 1).reshape(m * k, n)
    onehot = jnp.broadcast_to(jax.nn.one_hot(y, k, dtype=s.dtype).T, (m, k, n)).reshape(m * k, n)
    classes = _ece_replicates(per_class, onehot, key, n_bins, "quantile", n_bootstrap)
    classwise = jnp.mean(classes.reshape(m, k, n_bootstrap), axis=1)
    return tuple(
        jax.lax.map(lambda r: _percentile_interval(r, confidence), r) for r in (top, classwise)
    )


class ECEComparison(NamedTuple):
    """Two ECEs on the same observations, their difference and ratio, with paired intervals.

    Attributes:
      ece: ``[2]`` the ECE of the first and of the second scores.
      ece_interval: ``[2, 2]`` their percentile intervals (rows: lower, upper).
      difference, difference_interval: ``ECE_1 - ECE_2`` and its interval ``[2]``.
      ratio, ratio_interval: ``ECE_1 / ECE_2`` and its interval ``[2]``.
    """

    ece: Array
    ece_interval: Array
    difference: Array
    difference_interval: Array
    ratio: Array
    ratio_interval: Array


def compare_ece(
    first: ArrayLike,
    second: ArrayLike,
    labels: ArrayLike,
    second_labels: ArrayLike | None = None,
    n_bins: int = 10,
    strategy: str = "quantile",
    *,
    n_bootstrap: int = 1000,
    key: Array | None = None,
    confidence: float = 0.95,
) -> ECEComparison:
    """Whether one set of scores is better calibrated than another: both ECEs, their difference
    and their ratio, each with a paired bootstrap percentile interval.

    Each replicate draws the observations with replacement, the same rows for both sets of
    scores, and recomputes both ECEs with their bins (the whole estimator is resampled), so the
    intervals of the difference and of the ratio carry the correlation of the two ECEs.

    Args:
      first, second: binary scores ``(n,)`` on the same observations.
      labels: their ``{0, 1}`` labels ``(n,)``; ``second_labels`` the second's where they differ
        (for instance two classes' indicators of the same rows).
      n_bins, strategy: as :func:`expected_calibration_error`.
      n_bootstrap: replicates.
      key: ``jax.random`` key (required).
      confidence: coverage of each interval.
    """
    _check_n_bins(n_bins)
    _check_strategy(strategy)
    second_labels = labels if second_labels is None else second_labels
    _check_binary(first, labels, None, n_bins, scores_name="first")
    _check_binary(second, second_labels, None, n_bins, scores_name="second")
    if np.shape(first) != np.shape(second):
        raise ValueError(
            f"first and second must score the same observations; got shapes {np.shape(first)} "
            f"and {np.shape(second)}"
        )
    V.check_count("n_bootstrap", n_bootstrap, 2)
    _check_bootstrap(n_bootstrap, key, confidence)
    return _compare_ece(
        first, second, labels, second_labels, key, n_bins, strategy, n_bootstrap, confidence
    )


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8))
def _compare_ece(
    first, second, labels, second_labels, key, n_bins, strategy, n_bootstrap, confidence
):
    a, b = _float(first), _float(second)
    y, z = _labels(labels, a), _labels(second_labels, b)

    def both(rows: Array) -> Array:
        return jnp.stack(
            [
                expected_calibration_error(a[rows], y[rows], n_bins, strategy),
                expected_calibration_error(b[rows], z[rows], n_bins, strategy),
            ]
        )

    return paired_comparison(both, a.shape[0], n_bootstrap, key, confidence)


def paired_comparison(
    statistic: Callable[[Array], Array],
    n: int,
    n_bootstrap: int,
    key: Array,
    confidence: float = 0.95,
) -> ECEComparison:
    """:func:`compare_ece`'s paired bootstrap for any two statistics of the same ``n`` rows:
    ``statistic(rows) -> [2]`` on the row indices of a replicate (``arange(n)`` for the estimate),
    the rows drawn from ``key`` as :func:`compare_ece` draws them. Works under ``jax.jit``."""
    estimate = statistic(jnp.arange(n))
    rows = jax.random.randint(key, (n_bootstrap, n), 0, n)
    draws = jax.lax.map(statistic, rows)  # [B, 2]
    interval = functools.partial(_percentile_interval, confidence=confidence)
    return ECEComparison(
        estimate,
        interval(draws),
        estimate[0] - estimate[1],
        interval(draws[:, 0] - draws[:, 1]),
        estimate[0] / estimate[1],
        interval(draws[:, 0] / draws[:, 1]),
    )


class TestPower(NamedTuple):
    """A test's rejection rate over simulated data sets (a pytree).

    Attributes:
      rate: the fraction of data sets in which the test rejected at ``1 - confidence``.
      standard_error: its Monte Carlo standard error ``sqrt(rate (1 - rate) / n)``.
      rejected: each data set's verdict ``(n_simulations,)``.
    """

    rate: Array
    standard_error: Array
    rejected: Array


def loss_calibration_power(
    scores: ArrayLike,
    true_loss: LossLike,
    tested_loss: LossLike,
    n_bins: int = 10,
    strategy: str = "quantile",
    *,
    n_simulations: int = 200,
    n_bootstrap: int = 200,
    key: Array | None = None,
    confidence: float = 0.95,
) -> TestPower:
    """How often :func:`loss_calibration_test` under ``tested_loss`` rejects scores that are
    loss-calibrated under ``true_loss``: its power against that alternative at these scores.

    Each simulated data set keeps ``scores`` and draws labels ``y ~ Bernoulli(g)`` with
    ``g = (c^{true})^{-1}(a)`` (Proposition 4: the labels of a model calibrated under the true
    loss), then tests loss calibration under ``tested_loss``. With ``tested_loss == true_loss`` the
    rate is the test's size. A low power against a neighbouring loss (say beta = 1/2 when the
    truth is 10/11) says that a non-rejection cannot tell the two apart.

    Args:
      scores: raw positive-class scores ``(n,)`` in ``[0, 1]``, the scores to simulate labels for.
      true_loss, tested_loss: binary losses (as :func:`loss_calibration_test` reads ``loss``).
      n_bins, strategy, n_bootstrap, confidence: as :func:`loss_calibration_test`.
      n_simulations: simulated data sets.
      key: ``jax.random`` key (required).
    """
    _check_n_bins(n_bins)
    _check_strategy(strategy)
    a = V.concrete_value(scores)
    if a is not None:
        V.check_shape("scores", a, (np.shape(a)[0],))
        V.check_unit("scores", a)
    V.check_count("n_simulations", n_simulations)
    V.check_count("n_bootstrap", n_bootstrap)
    _check_bootstrap(n_bootstrap, key, confidence)
    truth, tested = _binary_loss(true_loss), _binary_loss(tested_loss)
    return _loss_calibration_power(
        scores, truth, tested, key, n_bins, strategy, n_simulations, n_bootstrap, confidence
    )


@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7, 8))
def _loss_calibration_power(
    scores, truth, tested, key, n_bins, strategy, n_simulations, n_bootstrap, confidence
) -> TestPower:
    a = _float(scores)
    posterior = truth.loss_corrected_score(a)

    def one(k: Array) -> Array:
        k_labels, k_test = jax.random.split(k)
        y = (jax.random.uniform(k_labels, a.shape, a.dtype) < posterior).astype(jnp.int32)
        result = _loss_calibration_test(
            a, y, None, k_test, tested, n_bins, strategy, n_bootstrap, confidence
        )
        return result.p_value <= 1.0 - confidence

    rejected = jax.lax.map(one, jax.random.split(key, n_simulations))
    rate = jnp.mean(rejected.astype(jnp.float32))
    return TestPower(rate, jnp.sqrt(rate * (1.0 - rate) / n_simulations), rejected)


# ----------------------------------------------------------------------------------------------
# Beta sweep: calibration of the loss-corrected scores for many class weights at once
# ----------------------------------------------------------------------------------------------


class BetaSweep(NamedTuple):
    """Calibration of the loss-corrected scores ``g^beta(a)`` for every ``beta`` (a pytree).

    The bins are the quantile bins of the raw scores, which are those of every set of corrected
    scores (``g^beta`` is strictly increasing), so counts and event rates do not depend on beta.

    Attributes:
      betas: ``(m,)``.
      edges: quantile edges of the raw scores, ``(n_bins + 1,)``.
      count: sum of weights per bin, ``(n_bins,)``.
      event_rate: rate of label 1 per bin, ``(n_bins,)`` (NaN if empty).
      mean_score: mean loss-corrected score per bin, ``(m, n_bins)`` (NaN if empty).
      ece: calibration error of the corrected scores, ``(m,)``.
      loss_calibration_gap: the gap of :func:`loss_calibration_test` of the raw scores under
        the beta-weighted base loss, per observation, ``(m,)``.
      smooth_ece: the smooth calibration error of the corrected scores (:func:`smooth_ece`, at
        its fixed-point bandwidth), ``(m,)``; a point estimate, without bootstrap interval.
      event_rate_interval: ``(2, n_bins)`` percentile bootstrap interval (``None`` without
        bootstrap); likewise ``mean_score_interval`` ``(2, m, n_bins)``, ``ece_interval``
        ``(2, m)`` and ``gap_interval`` ``(2, m)``.
    """

    betas: Array
    edges: Array
    count: Array
    event_rate: Array
    mean_score: Array
    ece: Array
    loss_calibration_gap: Array
    smooth_ece: Array
    event_rate_interval: Array | None = None
    mean_score_interval: Array | None = None
    ece_interval: Array | None = None
    gap_interval: Array | None = None


def _prefix_products(weights: Array, values: Array, boundaries: Array, tile: int) -> Array:
    """``sum_{i < k} weights[r, i] * values[i, j]`` at every boundary ``k``: ``(K, R, J)``.

    A matrix product per tile of ``tile`` rows, a cumulative sum over tiles, and one masked
    partial-tile product per boundary: exact, with static shapes for traced boundaries, at the cost
    of one ``(R, n) @ (n, J)`` product plus ``K`` small ones. Requires ``n % tile == 0`` and
    every boundary ``< n``.
    """
    r, n = weights.shape
    t = n // tile
    per_tile = jnp.einsum(
        "rtc,tcj->trj",
        weights.reshape(r, t, tile),
        values.reshape(t, tile, -1),
        precision=jax.lax.Precision.HIGHEST,
    )
    cumulative = jnp.concatenate([jnp.zeros_like(per_tile[:1]), jnp.cumsum(per_tile, axis=0)])

    def at(k: Array) -> Array:
        i = k // tile
        w_tile = jax.lax.dynamic_slice_in_dim(weights, i * tile, tile, axis=1)
        w_tile = jnp.where(jnp.arange(tile) < k - i * tile, w_tile, 0.0)
        v_tile = jax.lax.dynamic_slice_in_dim(values, i * tile, tile, axis=0)
        return cumulative[i] + jnp.matmul(w_tile, v_tile, precision=jax.lax.Precision.HIGHEST)

    return jax.vmap(at)(boundaries)


def beta_sweep(
    scores: ArrayLike,
    labels: ArrayLike,
    betas: ArrayLike,
    n_bins: int = 10,
    n_bootstrap: int = 200,
    key: Array | None = None,
    *,
    sample_weight: ArrayLike | None = None,
    norm: str = "l1",
    debias: bool = False,
    base_loss: BinaryLoss = log_loss,
    confidence: float = 0.95,
    beta_chunk: int = 64,
    tile: int = 1024,
) -> BetaSweep:
    """Calibration curves, ECE and loss-calibration gaps of ``g^beta(a)`` for every beta at once.

    For each candidate weight ``beta``, the loss-corrected scores ``g^beta(a)`` (Cor. 1) are binned
    into the quantile bins (deciles for ``n_bins=10``) and compared with the event rates; by
    Prop. 5 they are calibrated exactly when the raw scores are loss-calibrated to ``L^beta``,
    whose gap (:func:`loss_calibration_test`'s statistic) is reported beside, with the bin-free
    smooth calibration error of the corrected scores (:func:`smooth_ece`).

    The work is arranged so that only what depends on beta is recomputed per beta: the scores are
    sorted once (quantile bins are contiguous runs of the sorted scores), the bootstrap
    replicates are multinomial weight vectors drawn once, the per-bin label and loss sums of every
    replicate are computed once, and the per-bin sums of corrected scores of all replicates come
    from one matrix product per chunk of ``beta_chunk`` betas (:func:`_prefix_products`). The
    bootstrap is exact (observations resampled, bins held fixed), not an approximation.

    Args:
      scores: raw positive-class scores ``(n,)`` in ``[0, 1]``.
      labels: ``{0, 1}`` labels ``(n,)``.
      betas: candidate class weights ``(m,)`` in ``(0, 1)``.
      n_bins: number of quantile bins.
      n_bootstrap: bootstrap replicates for the intervals (0 for none).
      key: ``jax.random`` key, required when ``n_bootstrap > 0``.
      sample_weight: non-negative weights ``(n,)``.
      norm: ECE norm, ``"l1"``, ``"l2"`` or ``"max"``.
      debias: Kumar, Liang & Ma's debiased estimator (``norm="l2"``).
      base_loss: strictly proper base loss of the beta-weighted loss (for the gap).
      confidence: coverage of the intervals.
      beta_chunk: betas per matrix product (bounds memory: ``n x beta_chunk`` floats).
      tile: rows per tile of the product.

    Returns:
      A :class:`BetaSweep`.
    """
    _check_n_bins(n_bins)
    _check_binary(scores, labels, sample_weight, n_bins)
    _check_bootstrap(n_bootstrap, key, confidence)
    V.check_choice("norm", norm, NORMS)
    if debias and norm != "l2":
        raise ValueError("debias is defined for norm='l2' only (Kumar, Liang & Ma 2019)")
    if V.concrete_value(betas) is not None:
        V.check_betas("betas", betas, distinct=False)
    return _beta_sweep(
        scores,
        labels,
        betas,
        sample_weight,
        key,
        n_bins,
        n_bootstrap,
        norm,
        debias,
        base_loss,
        confidence,
        beta_chunk,
        tile,
    )


@functools.partial(jax.jit, static_argnums=tuple(range(5, 13)))
def _beta_sweep(
    scores: ArrayLike,
    labels: ArrayLike,
    betas: ArrayLike,
    sample_weight: ArrayLike | None,
    key: Array | None,
    n_bins: int,
    n_bootstrap: int,
    norm: str,
    debias: bool,
    base_loss: BinaryLoss,
    confidence: float,
    beta_chunk: int,
    tile: int,
) -> BetaSweep:
    a = _float(scores)
    n = a.shape[0]
    betas = jnp.asarray(betas, a.dtype)
    m = betas.shape[0]
    w = _weights(sample_weight, a)

    # Sort once; quantile bins are contiguous runs of the sorted scores.
    order = jnp.argsort(a)
    a_sorted, y_sorted, w_sorted = a[order], _labels(labels, a)[order], w[order]
    edges = bin_edges(a, n_bins, "quantile")
    bins = assign_bins(a_sorted, edges)
    boundaries = jnp.searchsorted(bins, jnp.arange(n_bins + 1), side="left")

    # Row 0: the sample itself; rows 1..B: bootstrap replicates (multinomial multiplicities).
    if n_bootstrap > 0:
        multiplicity = _bootstrap_counts(key, n, n_bootstrap)
        replicate_w = jnp.concatenate([w_sorted[None], w_sorted * multiplicity])
    else:
        replicate_w = w_sorted[None]

    # Everything linear in the weights but independent of beta, for all replicates at once.
    l_pos = base_loss(a_sorted, jnp.ones_like(a_sorted))
    l_neg = base_loss(a_sorted, jnp.zeros_like(a_sorted))
    sums = _loss_sums(replicate_w, y_sorted, _loss_matrices(bins, n_bins, l_pos, l_neg))
    ones = jnp.ones_like(a_sorted)[None]
    weight_sq = _weighted_bin_sums(replicate_w * replicate_w, ones, bins, n_bins)[:, 0]

    # Pad observations to whole tiles (zero weight) so every boundary k <= n lies in a tile.
    n_pad = (n // tile + 1) * tile
    w_pad = jnp.pad(replicate_w, ((0, 0), (0, n_pad - n)))
    a_pad = jnp.pad(a_sorted, (0, n_pad - n))
    n_chunks = -(-m // beta_chunk)
    betas_pad = jnp.pad(betas, (0, n_chunks * beta_chunk - m), constant_values=0.5)

    def smooth_of(corrected: Array) -> Array:
        s, y, w_, invalid = _smooth_inputs(corrected, y_sorted, w_sorted)
        ece = _smooth_ece_of(s, y, w_, None, SMOOTH_GRID, _SMOOTH_BISECTION).ece
        return jnp.where(invalid, jnp.nan, ece)

    def chunk(beta_c: Array):
        corrected = loss_corrected_score(a_pad[:, None], beta_c[None, :])  # (n_pad, J)
        prefix = _prefix_products(w_pad, corrected, boundaries, tile)  # (K, R, J)
        score_sum = jnp.moveaxis(prefix[1:] - prefix[:-1], 0, -1)  # (R, J, n_bins)
        stats = BinnedStatistics(
            sums.count[:, None], score_sum, sums.positives[:, None], weight_sq[:, None]
        )
        ece = calibration_error_from_statistics(stats, norm, debias)  # (R, J)
        scaled = _LossSums(
            sums.count[:, None],
            sums.positives[:, None],
            beta_c[None, :, None] * sums.loss_pos[:, None],
            (1.0 - beta_c[None, :, None]) * sums.loss_neg[:, None],
        )
        reduction, _ = _loss_reduction(
            scaled,
            lambda g: optimal_score(g, beta_c[None, :, None]),
            lambda s: beta_c[None, :, None] * base_loss(s, jnp.ones_like(s)),
            lambda s: (1.0 - beta_c[None, :, None]) * base_loss(s, jnp.zeros_like(s)),
        )
        gap = jnp.sum(reduction, axis=-1) / jnp.sum(sums.count, axis=-1)[:, None]  # (R, J)
        mean = _safe_div(score_sum, sums.count[:, None])
        smooth = jax.vmap(smooth_of, in_axes=1)(corrected[:n])
        if n_bootstrap == 0:
            return mean[0], ece[0], gap[0], smooth
        return (
            mean[0],
            ece[0],
            gap[0],
            smooth,
            _percentile_interval(mean[1:], confidence),
            _percentile_interval(ece[1:], confidence),
            _percentile_interval(gap[1:], confidence),
        )

    out = jax.lax.map(chunk, betas_pad.reshape(n_chunks, beta_chunk))

    def unchunk(x: Array, interval: bool = False) -> Array:
        if interval:  # (chunks, 2, J, ...) -> (2, m, ...)
            x = jnp.moveaxis(x, 1, 0)
            return x.reshape(2, n_chunks * beta_chunk, *x.shape[3:])[:, :m]
        return x.reshape(n_chunks * beta_chunk, *x.shape[2:])[:m]

    count = sums.count[0]
    event_rate = _safe_div(sums.positives[0], count)
    result = BetaSweep(
        betas,
        edges,
        count,
        event_rate,
        unchunk(out[0]),
        unchunk(out[1]),
        unchunk(out[2]),
        unchunk(out[3]),
    )
    if n_bootstrap == 0:
        return result
    return result._replace(
        event_rate_interval=_percentile_interval(
            _safe_div(sums.positives[1:], sums.count[1:]), confidence
        ),
        mean_score_interval=unchunk(out[4], True),
        ece_interval=unchunk(out[5], True),
        gap_interval=unchunk(out[6], True),
    )


# ----------------------------------------------------------------------------------------------
# Smooth calibration error and smooth reliability diagram (Blasiok & Nakkiran 2023)
# ----------------------------------------------------------------------------------------------

SMOOTH_GRID = 1001  # grid nodes on [0, 1]: spacing 1e-3, the bandwidth search's resolution
_MIN_BANDWIDTH = 1e-3  # bandwidths below this count as too small in the search (relplot's eps)
_SMOOTH_BISECTION = 10  # halvings of [0, 1]: the bandwidth to 2**-10 < _MIN_BANDWIDTH


class SmoothECE(NamedTuple):
    """Result of :func:`smooth_ece` (a pytree).

    Attributes:
      ece: the smooth calibration error ``smECE_sigma``, a scalar in ``[0, 1]``.
      bandwidth: the kernel bandwidth ``sigma`` it was computed with: the fixed point
        ``smECE_sigma = sigma`` when none was given.
    """

    ece: Array
    bandwidth: Array


class SmoothCalibrationCurve(NamedTuple):
    """The smooth reliability diagram of Blasiok & Nakkiran (2023) (a pytree).

    Attributes:
      grid: the evaluation points ``t_j = j / (n_grid - 1)``, ``(n_grid,)``.
      event_rate: the Nadaraya-Watson estimate of ``P(y = 1 | a = t)`` with the reflected
        Gaussian kernel, ``(n_grid,)``; NaN where no score lies within reach of the kernel
        (the weight there underflows to 0), like an empty bin.
      density: the kernel density of the scores (integrates to about 1), ``(n_grid,)``.
      bandwidth: the kernel bandwidth ``sigma``.
      ece: the smooth calibration error at that bandwidth.
      event_rate_interval: percentile bootstrap band of ``event_rate``, ``(2, n_grid)``
        (row 0 lower, row 1 upper; observations resampled, bandwidth held fixed), or ``None``.
    """

    grid: Array
    event_rate: Array
    density: Array
    bandwidth: Array
    ece: Array
    event_rate_interval: Array | None = None


def _check_smooth_options(bandwidth: ArrayLike | None, n_grid: int, n_bisection: int) -> None:
    V.check_count("n_grid", n_grid, 3)
    V.check_count("n_bisection", n_bisection)
    b = V.concrete_value(bandwidth)
    if b is not None and (b.ndim != 0 or not np.isfinite(b) or not b > 0):
        raise ValueError(f"bandwidth must be a positive scalar or None, got {bandwidth!r}")


def _linear_binning(scores: Array, values: Array, n_grid: int) -> Array:
    """``values (..., n)`` spread onto the grid nodes by linear interpolation: ``(..., n_grid)``.

    A score between nodes ``j`` and ``j + 1`` gives them the shares ``1 - u`` and ``u`` of its
    value (``u`` its relative position), so smoothing the result with a kernel sampled on the grid
    approximates the kernel sum over the scores to second order in the grid spacing.
    """
    position = jnp.clip(scores, 0.0, 1.0) * (n_grid - 1)
    lower = jnp.clip(jnp.floor(position), 0, n_grid - 2).astype(jnp.int32)
    upper_share = position - lower
    out = jnp.zeros((*values.shape[:-1], n_grid), values.dtype)
    out = out.at[..., lower].add(values * (1.0 - upper_share))
    return out.at[..., lower + 1].add(values * upper_share)


def _periodic_gaussian(bandwidth: Array, n_grid: int, dtype) -> Array:
    """The Gaussian density of scale ``bandwidth`` wrapped with period 2, sampled at the offsets
    ``j h`` (``h = 1 / (n_grid - 1)``, ``j < 2 (n_grid - 1)``): images within 4 of the origin,
    enough for every bandwidth up to 1."""
    offsets = jnp.arange(2 * (n_grid - 1), dtype=dtype) / (n_grid - 1)
    images = offsets[None, :] + jnp.array([-4.0, -2.0, 0.0, 2.0], dtype)[:, None]
    z = images / bandwidth
    return jnp.sum(jnp.exp(-0.5 * z * z), axis=0) / (jnp.sqrt(2.0 * jnp.pi) * bandwidth)


def _reflected_smooth(grid_values: Array, bandwidth: Array) -> Array:
    """``sum_b v_b K(t_a, t_b)`` for node values ``v (..., n_grid)``, by FFT.

    ``K`` is the reflected Gaussian kernel, the density at ``t_a`` of ``t_b + sigma Z`` folded
    back into ``[0, 1]`` at both ends: ``sum_k phi((t_a - t_b + 2k) / sigma) + phi((t_a + t_b
    + 2k) / sigma)`` over ``sigma``. Folding is periodic with period 2, so the sum is one circular
    convolution of the mirrored values with :func:`_periodic_gaussian`; a value at an end node
    counts twice, since its mirror image coincides with it. Float32 FFT errors are about
    ``1e-7`` of the largest output: harmless in integrals, see :func:`_reflected_kernel_matrix`
    where small values matter.
    """
    n_grid = grid_values.shape[-1]
    ends = jnp.ones(n_grid, grid_values.dtype).at[jnp.array([0, n_grid - 1])].set(2.0)
    v = grid_values * ends
    mirrored = jnp.concatenate([v, v[..., -2:0:-1]], axis=-1)
    kernel = _periodic_gaussian(bandwidth, n_grid, grid_values.dtype)
    out = jnp.fft.irfft(jnp.fft.rfft(mirrored) * jnp.fft.rfft(kernel), n=mirrored.shape[-1])
    return out[..., :n_grid]


def _reflected_kernel_matrix(bandwidth: Array, n_grid: int, dtype) -> Array:
    """The matrix of :func:`_reflected_smooth`, ``K[b, a] = g(a - b) + g(a + b)`` (``g`` the
    periodic Gaussian), for exact products where the smoothed values are tiny (sparse tails)."""
    g = _periodic_gaussian(bandwidth, n_grid, dtype)
    idx = jnp.arange(n_grid)
    period = 2 * (n_grid - 1)
    return g[(idx[None, :] - idx[:, None]) % period] + g[(idx[None, :] + idx[:, None]) % period]


def _trapezoid_sum(x: Array) -> Array:
    """Trapezoid-rule sum over the last (grid) axis, in units of the grid spacing."""
    return jnp.sum(x, axis=-1) - 0.5 * (x[..., 0] + x[..., -1])


def _smooth_ece_at(binned: Array, bandwidth: Array) -> Array:
    """``smECE_sigma`` from the binned weighted residuals and weights, ``binned (2, n_grid)``."""
    weighted_residual, weight = _reflected_smooth(binned, bandwidth)
    return _trapezoid_sum(jnp.abs(weighted_residual)) / _trapezoid_sum(weight)


def _fixed_point_bandwidth(ece_at: Callable[[Array], Array], n_bisection: int, dtype) -> Array:
    """The bandwidth ``sigma*`` with ``smECE_sigma* = sigma*``, by bisection on ``[0, 1]``.

    ``smECE_sigma`` decreases in ``sigma`` (Blasiok & Nakkiran 2023), so ``sigma - smECE_sigma``
    has one root. Like relplot, the result is the upper end of the last bracket (a bandwidth at
    least its own error), and bandwidths below ``_MIN_BANDWIDTH`` count as too small. The upper
    end 1 is never too small, since ``smECE_sigma <= 1``.
    """

    def halve(_, bracket):
        lower, upper = bracket
        middle = 0.5 * (lower + upper)
        too_small = (middle < _MIN_BANDWIDTH) | (middle < ece_at(middle))
        return jnp.where(too_small, middle, lower), jnp.where(too_small, upper, middle)

    start = (jnp.zeros((), dtype), jnp.ones((), dtype))
    return jax.lax.fori_loop(0, n_bisection, halve, start)[1]


def _smooth_inputs(
    scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None
) -> tuple[Array, Array, Array, Array]:
    """Scores, labels and weights as floats, and whether any entry is invalid (under jit)."""
    s = _float(scores)
    y = _labels(labels, s)
    w = _weights(sample_weight, s)
    invalid = jnp.any(jnp.isnan(s) | (s < 0) | (s > 1) | jnp.isnan(y) | jnp.isnan(w))
    clean = ~(jnp.isnan(s) | jnp.isnan(y) | jnp.isnan(w))
    s, y, w = jnp.where(clean, s, 0.0), jnp.where(clean, y, 0.0), jnp.where(clean, w, 0.0)
    return s, y, w, invalid


def _smooth_ece_of(
    s: Array, y: Array, w: Array, bandwidth: ArrayLike | None, n_grid: int, n_bisection: int
) -> SmoothECE:
    """:func:`smooth_ece` of clean inputs (also used, vmapped over betas, by the beta sweep)."""
    binned = _linear_binning(s, jnp.stack([w * (y - s), w]), n_grid)
    ece_at = functools.partial(_smooth_ece_at, binned)
    if bandwidth is None:
        sigma = _fixed_point_bandwidth(ece_at, n_bisection, s.dtype)
    else:
        sigma = jnp.asarray(bandwidth, s.dtype)
        sigma = jnp.where(sigma > 0, sigma, jnp.nan)
    return SmoothECE(ece_at(sigma), sigma)


def smooth_ece(
    scores: ArrayLike,
    labels: ArrayLike,
    bandwidth: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
    *,
    n_grid: int = SMOOTH_GRID,
    n_bisection: int = _SMOOTH_BISECTION,
) -> SmoothECE:
    """The smooth calibration error of Blasiok & Nakkiran (2023), with no bins.

    "Smooth ECE: Principled Reliability Diagrams via Kernel Smoothing" (ICLR 2024,
    arXiv:2309.12236). The residuals ``r_i = y_i - a_i`` are smoothed by the Nadaraya-Watson
    estimator with the reflected Gaussian kernel ``K_sigma`` (a Gaussian folded back into
    ``[0, 1]`` at both ends), ``r_hat(t) = sum_i w_i r_i K(t, a_i) / sum_i w_i K(t, a_i)``, and
    weighted by the kernel density of the scores ``delta_hat(t)``::

        smECE_sigma = integral over [0, 1] of |r_hat(t)| delta_hat(t) dt.

    Without a ``bandwidth``, ``sigma`` is the fixed point ``smECE_sigma = sigma`` (the paper's
    choice, which makes the measure consistent), found by ``n_bisection`` halvings of ``[0, 1]``
    as in the authors' ``relplot`` package. The kernel sums are computed on ``n_grid`` nodes
    (scores spread onto them by linear interpolation) and the integral by the trapezoid rule;
    bandwidths much below the grid spacing ``1 / (n_grid - 1)`` are resolved poorly.

    Jittable and vmappable: ``jax.vmap(smooth_ece, in_axes=(0, None))(scores_by_beta, labels)``
    gives every row's error and bandwidth. Calibrated scores give ``smECE`` near 0.

    Args:
      scores: positive-class scores in ``[0, 1]``, shape ``(n,)``.
      labels: labels in ``{0, 1}``, shape ``(n,)``.
      bandwidth: a fixed kernel bandwidth ``sigma > 0``, or ``None`` for the fixed point.
      sample_weight: non-negative weights ``(n,)``.
      n_grid: grid nodes on ``[0, 1]``.
      n_bisection: halvings in the bandwidth search.

    Returns:
      A :class:`SmoothECE` ``(ece, bandwidth)``.

    Raises:
      ValueError: on concrete bad input; under jit, a NaN or out-of-range score, a bad label, a
        negative weight or a non-positive bandwidth makes both outputs NaN.
    """
    _check_smooth_options(bandwidth, n_grid, n_bisection)
    _check_binary(scores, labels, sample_weight)
    return _smooth_ece(scores, labels, bandwidth, sample_weight, n_grid, n_bisection)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _smooth_ece(
    scores: ArrayLike,
    labels: ArrayLike,
    bandwidth: ArrayLike | None,
    sample_weight: ArrayLike | None,
    n_grid: int,
    n_bisection: int,
) -> SmoothECE:
    s, y, w, invalid = _smooth_inputs(scores, labels, sample_weight)
    result = _smooth_ece_of(s, y, w, bandwidth, n_grid, n_bisection)
    return jax.tree.map(lambda x: jnp.where(invalid, jnp.nan, x), result)


def smooth_calibration_curve(
    scores: ArrayLike,
    labels: ArrayLike,
    bandwidth: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
    *,
    n_grid: int = SMOOTH_GRID,
    n_bisection: int = _SMOOTH_BISECTION,
    n_bootstrap: int = 0,
    key: Array | None = None,
    confidence: float = 0.95,
) -> SmoothCalibrationCurve:
    """The smooth reliability diagram of Blasiok & Nakkiran (2023): no bins, no empty bins.

    The curve is the kernel regression of the labels on the scores,
    ``t -> sum_i w_i y_i K(t, a_i) / sum_i w_i K(t, a_i)`` with the reflected Gaussian kernel of
    :func:`smooth_ece` at its bandwidth (the fixed point ``smECE_sigma = sigma`` unless one is
    given), drawn with the scores' kernel density, as in the authors' ``relplot`` package.
    Calibrated scores follow the diagonal where the density is high. The optional band is the
    percentile interval of the curve over bootstrap resamples of the observations, with the
    bandwidth held fixed (as ``relplot`` draws it).

    Args:
      scores: positive-class scores in ``[0, 1]``, shape ``(n,)``.
      labels: labels in ``{0, 1}``, shape ``(n,)``.
      bandwidth: a fixed kernel bandwidth ``sigma > 0``, or ``None`` for the fixed point.
      sample_weight: non-negative weights ``(n,)``.
      n_grid: grid nodes on ``[0, 1]`` (the curve's points).
      n_bisection: halvings in the bandwidth search.
      n_bootstrap: bootstrap replicates for the band (0 for none).
      key: ``jax.random`` key, required when ``n_bootstrap > 0``.
      confidence: coverage of the band.

    Returns:
      A :class:`SmoothCalibrationCurve`.

    Raises:
      ValueError: on concrete bad input; under jit, bad entries make every output NaN.
    """
    _check_smooth_options(bandwidth, n_grid, n_bisection)
    _check_binary(scores, labels, sample_weight)
    _check_bootstrap(n_bootstrap, key, confidence)
    return _smooth_calibration_curve(
        scores, labels, bandwidth, sample_weight, key, n_grid, n_bisection, n_bootstrap, confidence
    )


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8))
def _smooth_calibration_curve(
    scores: ArrayLike,
    labels: ArrayLike,
    bandwidth: ArrayLike | None,
    sample_weight: ArrayLike | None,
    key: Array | None,
    n_grid: int,
    n_bisection: int,
    n_bootstrap: int,
    confidence: float,
) -> SmoothCalibrationCurve:
    s, y, w, invalid = _smooth_inputs(scores, labels, sample_weight)
    ece, sigma = _smooth_ece_of(s, y, w, bandwidth, n_grid, n_bisection)
    kernel = _reflected_kernel_matrix(sigma, n_grid, s.dtype)

    def rate_and_weight(weights: Array) -> tuple[Array, Array]:
        binned = _linear_binning(s, jnp.stack([weights * y, weights], axis=-2), n_grid)
        smoothed = jnp.matmul(binned, kernel, precision=jax.lax.Precision.HIGHEST)
        positives, weight = smoothed[..., 0, :], smoothed[..., 1, :]
        return jnp.clip(_safe_div(positives, weight), 0.0, 1.0), weight

    event_rate, weight = rate_and_weight(w)
    density = weight / jnp.sum(w)
    grid = jnp.linspace(0.0, 1.0, n_grid, dtype=s.dtype)
    curve = SmoothCalibrationCurve(grid, event_rate, density, sigma, ece)
    if n_bootstrap > 0:
        counts = _bootstrap_counts(key, s.shape[0], n_bootstrap)
        band = _percentile_interval(rate_and_weight(w * counts)[0], confidence)
        curve = curve._replace(event_rate_interval=band)
    nan = functools.partial(jnp.where, invalid, jnp.nan)
    return curve._replace(
        **{k: nan(v) for k, v in curve._asdict().items() if k != "grid" and v is not None}
    )


# ----------------------------------------------------------------------------------------------
# Metric tables: the rows of the reports' and sweeps' tables
# ----------------------------------------------------------------------------------------------

#: The metrics of one binary score vector (:func:`score_metrics`), in table order.
METRICS = ("ece", "ece_debiased", "smooth_ece", "brier", "log_loss", "auroc")
#: The metrics of one multiclass score matrix (:func:`multiclass_score_metrics`), in table order.
MULTICLASS_METRICS = ("top_label_ece", "classwise_ece", "brier", "log_loss", "accuracy")
#: The method of :func:`table_by_loss` for the B-weighted loss's corrected one-vs-rest posteriors
#: divided by their row's sum (``iml.loss_corrected_score_multiclass(..., renormalise=True)``).
RENORMALISED = "loss_corrected_renormalised"
_CLIP = 1e-7


def score_metrics(scores: ArrayLike, labels: ArrayLike, n_bins: int = 10) -> dict[str, float]:
    """The :data:`METRICS` of binary scores, as floats: ECE (l1, quantile bins), the debiased ECE
    (l2, Kumar, Liang & Ma 2019), the smooth ECE (Blasiok & Nakkiran 2023), the Brier score, the
    log loss and the AUROC. Scores are clipped to ``[1e-7, 1 - 1e-7]`` first."""
    return score_metrics_by_row(np.asarray(scores)[None], labels, n_bins)[0]


def score_metrics_by_row(
    scores: ArrayLike, labels: ArrayLike, n_bins: int = 10
) -> list[dict[str, float]]:
    """:func:`score_metrics` of every row of ``scores [m, N]`` against the same ``labels [N]``,
    computed in one compiled program (the metrics vmapped over blocks of rows), which is several
    times faster than a loop over the rows. The values equal each row's alone to float32
    rounding."""
    s = np.clip(np.asarray(scores, np.float64), _CLIP, 1 - _CLIP).astype(np.float32)
    y = np.asarray(labels, np.int32)
    if s.ndim < 2 or s.shape[0] == 0:
        raise ValueError(f"scores must be [m, N] with m >= 1, got shape {s.shape}")
    for row in s:
        _check_binary(row, y, None, n_bins)
    values = np.asarray(_metric_rows(jnp.asarray(s), jnp.asarray(y), n_bins), np.float64)
    return [dict(zip(METRICS, map(float, row), strict=True)) for row in values]


# Rows that score_metrics_by_row vmaps at once (its memory: this many rows' sorts and kernels).
_METRIC_ROWS = 64


@functools.partial(jax.jit, static_argnums=2)
def _metric_rows(scores: Array, labels: Array, n_bins: int) -> Array:
    def one(s: Array) -> Array:  # the public metrics; their checks are no-ops when traced
        return jnp.stack(
            [
                expected_calibration_error(s, labels, n_bins, "quantile"),
                expected_calibration_error(s, labels, n_bins, "quantile", norm="l2", debias=True),
                smooth_ece(s, labels).ece,
                brier_score(s, labels),
                mean_log_loss(s, labels),
                auroc(s, labels),
            ]
        )

    return jax.lax.map(one, scores, batch_size=_METRIC_ROWS)


def multiclass_score_metrics(
    scores: ArrayLike, labels: ArrayLike, n_bins: int = 10
) -> dict[str, float]:
    """The :data:`MULTICLASS_METRICS` of class scores ``[N, n]``, as floats.

    ``top_label_ece`` and ``classwise_ece`` are :func:`expected_calibration_error` (l1, quantile
    bins) of the top score and the mean over classes; ``brier`` sums over classes; ``log_loss``
    is ``-log a_y`` of the true class's score; ``accuracy`` is that of the top score. Scores are
    taken as the model reports them (rows need not sum to one: a one-vs-rest model's do not) and
    clipped to ``[1e-7, 1 - 1e-7]``.
    """
    s = np.clip(np.asarray(scores, np.float64), _CLIP, 1 - _CLIP).astype(np.float32)
    y = np.asarray(labels, np.int32)
    return {
        "top_label_ece": float(expected_calibration_error(s, y, n_bins, "quantile")),
        "classwise_ece": float(
            expected_calibration_error(s, y, n_bins, "quantile", multiclass="classwise")
        ),
        "brier": float(brier_score(s, y)),
        "log_loss": float(mean_log_loss(s, y)),
        "accuracy": float(np.mean(np.argmax(s, axis=-1) == y)),
    }


# ----------------------------------------------------------------------------------------------
# A grid of losses: scores, corrections and the table of their metrics
# ----------------------------------------------------------------------------------------------


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, np.float64)))


def scores_from_logits(losses: LossSpec, logits: ArrayLike) -> np.ndarray:
    """The scores ``[m, ...]`` that logits ``[m, ...]`` of a grid's members stand for
    (:meth:`iml.LossSpec.link` of each loss), in float64."""
    if not losses.multiclass:  # every binary loss reads its logit through the sigmoid
        return _sigmoid(logits)
    z = jnp.asarray(logits, jnp.float32)
    spec = jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.float32), losses)
    return np.asarray(jax.vmap(LossSpec.link)(spec, z), np.float64)


def loss_corrected_scores(losses: LossSpec, scores: ArrayLike) -> np.ndarray:
    """The loss-corrected scores ``(c^L)^{-1}(a)`` of every loss of a grid (Proposition 4;
    Corollary 1 for a beta): ``scores [m, N(, n)]``, row ``i`` corrected by loss ``i``."""
    a = jnp.asarray(np.clip(np.asarray(scores, np.float64), 0.0, 1.0), jnp.float32)
    return np.asarray(jax.vmap(LossSpec.loss_corrected_score)(losses, a), np.float64)


def table_by_loss(
    losses: LossLike,
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    corrected: ArrayLike | None = None,
    *,
    ece_bootstrap: int = 0,
    key: Array | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Metrics of the raw and loss-corrected scores of every loss: ``table[key][method][metric]``.

    Keys are :func:`iml.grid_keys` (for a beta grid, the exact betas). Methods: ``"raw"`` (the
    ensemble's scores ``a``) and ``"loss_corrected"`` (``(c^L)^{-1}(a)``, Proposition 4;
    ``g^beta(a)``, Corollary 1, for a beta); for the B-weighted loss (``"matrix"``), whose
    corrected one-vs-rest posteriors need not sum to one, also
    ``"loss_corrected_renormalised"``: those posteriors divided by their row's sum, so that the
    effect of renormalising is reported apart from the correction's. Metrics: :data:`METRICS` for
    binary
    losses (``"ece"`` over ``n_bins`` quantile bins, the paper's deciles, ...) and
    :data:`MULTICLASS_METRICS` for multiclass ones (top-label and class-wise
    ECE, Brier score, log loss, accuracy).

    Args:
      losses: the grid of ``m`` losses (:func:`iml.loss_grid`: e.g. an array of betas).
      scores: ``[m, N]`` raw scores per loss, or ``[m, N, n]`` class scores.
      labels: ``[N]`` labels.
      n_bins: bins of the calibration errors.
      corrected: the loss-corrected scores, where the caller has them already
        (:func:`loss_corrected_scores` of ``scores``); computed here otherwise.
      ece_bootstrap: replicates of each ECE's 95% percentile interval (the same resampled rows
        for every loss and method), recorded as ``"ece_interval": [low, high]`` for binary losses
        (:func:`ece_intervals`), ``"top_label_ece_interval"`` and ``"classwise_ece_interval"``
        for multiclass ones (:func:`multiclass_ece_intervals`); 0 for none.
      key: ``jax.random`` key of those replicates (required with ``ece_bootstrap``).
    """
    grid = loss_grid(losses)
    spec = grid.spec
    (m,) = spec.batch_shape
    a = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    shape = (m, y.shape[0], *((spec.n_classes,) if spec.multiclass else ()))
    V.check_shape("scores", a, shape)
    if corrected is None:
        corrected = loss_corrected_scores(spec, a)
    else:
        V.check_shape("corrected", corrected, shape)
    corrected = np.asarray(corrected, np.float64)
    if spec.multiclass:
        methods = {
            "raw": [multiclass_score_metrics(row, y, n_bins) for row in a],
            "loss_corrected": [multiclass_score_metrics(row, y, n_bins) for row in corrected],
        }
        if spec.record.domain == "box":  # one sigmoid per class: rows need not sum to one
            # As loss_corrected_score_multiclass(..., renormalise=True): a row of zeros is NaN.
            with np.errstate(invalid="ignore", divide="ignore"):
                renormalised = corrected / corrected.sum(axis=-1, keepdims=True)
            methods[RENORMALISED] = [
                multiclass_score_metrics(row, y, n_bins) for row in renormalised
            ]
        if ece_bootstrap:  # every loss and method on the same resampled rows
            stacked = {"raw": a, "loss_corrected": corrected}
            if RENORMALISED in methods:
                stacked[RENORMALISED] = renormalised
            clipped = np.clip(np.concatenate(list(stacked.values())), _CLIP, 1 - _CLIP)
            intervals = multiclass_ece_intervals(clipped.astype(np.float32), y, n_bins,
                                                 n_bootstrap=ece_bootstrap, key=key)  # fmt: skip
            for metric, values in intervals.items():
                values = np.asarray(values, np.float64).reshape(len(stacked), m, 2)
                for method, rows in zip(stacked, values, strict=True):
                    for row, interval in zip(methods[method], rows, strict=True):
                        row[f"{metric}_interval"] = interval.tolist()
    else:
        stacked = np.concatenate([a, corrected])
        both = score_metrics_by_row(stacked, y, n_bins)
        if ece_bootstrap:
            clipped = np.clip(stacked, _CLIP, 1 - _CLIP).astype(np.float32)
            intervals = np.asarray(
                ece_intervals(clipped, y, n_bins, n_bootstrap=ece_bootstrap, key=key), np.float64
            )
            for row, interval in zip(both, intervals, strict=True):
                row["ece_interval"] = interval.tolist()
        methods = {"raw": both[:m], "loss_corrected": both[m:]}
    return {
        key: {method: rows[i] for method, rows in methods.items()}
        for i, key in enumerate(grid.keys)
    }


def _interval_text(interval: Sequence[float]) -> str:
    return f"[{interval[0]:.4f}, {interval[1]:.4f}]"


def markdown_by_loss(table: dict[str, dict[str, dict[str, float]]], key_name: str = "beta") -> str:
    """The table as Markdown: one row per loss (its exact key), raw and loss-corrected metrics,
    the renormalised corrected ones (``renorm.``) where the table has them, and the median of a
    sweep's members' ridge coefficients where its rows hold them (``row["l2"]``)."""
    metrics = METRICS if "auroc" in next(iter(table.values()))["raw"] else MULTICLASS_METRICS
    methods = {"raw": "raw", "loss_corrected": "corr."}
    if any(RENORMALISED in row for row in table.values()):
        methods[RENORMALISED] = "renorm."
    header = [key_name] + [f"{label} {k}" for k in metrics for label in methods.values()]
    ridge = all("l2" in row for row in table.values())  # a sweep's members' ridge coefficients
    if ridge:
        header.append("l2 (median)")
    # each ECE's interval, after the ECE columns, where every row has it
    with_ci = [k for k in metrics if all(f"{k}_interval" in row["raw"] for row in table.values())]
    for metric in reversed(with_ci):
        at = header.index(f"{list(methods.values())[-1]} {metric}") + 1
        header[at:at] = [f"{label} {metric} 95% CI" for label in methods.values()]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, row in table.items():
        cells = [key]  # the exact key (beta_key): close betas stay apart
        for metric in metrics:
            cells += [f"{row[m][metric]:.4f}" if m in row else "" for m in methods]
            if metric in with_ci:
                cells += [_interval_text(row[m][f"{metric}_interval"]) if m in row else ""
                          for m in methods]  # fmt: skip
        if ridge:
            cells.append(f"{float(np.median(row['l2'])):.3g}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
