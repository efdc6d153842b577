"""Binning, calibration curves, calibration metrics, beta sweeps and the loss-calibration test.

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
  Under ``jax.jit`` nothing can be checked: NaN scores propagate to NaN results, labels are used
  as given (a binary label other than 1 counts as negative), and negative weights are used as given.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "BinnedStatistics",
    "CalibrationCurve",
    "assign_bins",
    "auroc",
    "bin_edges",
    "binned_statistics",
    "brier_score",
    "calibration_curve",
    "calibration_error_from_statistics",
    "expected_calibration_error",
    "mean_log_loss",
]

STRATEGIES = ("quantile", "uniform")


# ----------------------------------------------------------------------------------------------
# Validation (only where arrays are concrete: under jit nothing can be checked)
# ----------------------------------------------------------------------------------------------


def _concrete(x: ArrayLike | None) -> np.ndarray | None:
    """``x`` as a NumPy array, or ``None`` when it is a tracer (inside jit/vmap/grad)."""
    if x is None:
        return None
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _check_n_bins(n_bins: int) -> None:
    if not isinstance(n_bins, int | np.integer) or isinstance(n_bins, bool) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")


def _check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")


def _check_weights(sample_weight: ArrayLike | None, n: int) -> None:
    w = _concrete(sample_weight)
    if w is None:
        return
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("sample_weight contains NaN or infinite values")
    if np.any(w < 0):
        raise ValueError("sample_weight contains negative values")
    if n and not np.sum(w) > 0:
        raise ValueError("sample_weight sums to zero")


def _check_binary(
    scores: ArrayLike,
    labels: ArrayLike,
    sample_weight: ArrayLike | None = None,
    n_bins: int | None = None,
    scores_name: str = "scores",
) -> None:
    """Raise ``ValueError`` on bad binary input (a no-op for traced arrays)."""
    s, y = _concrete(scores), _concrete(labels)
    if s is not None:
        if s.ndim != 1:
            raise ValueError(f"{scores_name} must be one-dimensional, got shape {s.shape}")
        if s.size == 0:
            raise ValueError(f"{scores_name} is empty")
        if np.any(np.isnan(s)):
            raise ValueError(f"{scores_name} contains NaN")
        if np.any((s < 0) | (s > 1)):
            raise ValueError(f"{scores_name} has values outside [0, 1]")
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
    if sample_weight is None:
        return jnp.ones(like.shape[:1], like.dtype)
    return jnp.asarray(sample_weight, like.dtype)


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
    """Weighted per-bin sums of a fixed bin assignment (segment sums; jit/vmap-safe)."""
    s, y, w = _float(scores), jnp.asarray(labels), jnp.asarray(weights)
    y = y.astype(s.dtype)
    w = w.astype(s.dtype)
    bins = jnp.asarray(bins)

    def seg(v: Array) -> Array:
        return jax.ops.segment_sum(v, bins, num_segments=n_bins)

    return BinnedStatistics(seg(w), seg(w * s), seg(w * y), seg(w * w))


def _safe_div(num: Array, den: Array) -> Array:
    """``num / den`` where ``den > 0``, NaN elsewhere (empty bins)."""
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), jnp.nan)


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
      mean_score_interval: bootstrap percentile interval of ``mean_score``, ``(2, n_bins)``
        (row 0 lower, row 1 upper), or ``None`` without bootstrap. NaN where the bin is empty in
        every replicate.
      event_rate_interval: the same for ``event_rate``.
    """

    mean_score: Array
    event_rate: Array
    count: Array
    edges: Array
    mean_score_interval: Array | None = None
    event_rate_interval: Array | None = None


def _bootstrap_counts(key: Array, n: int, n_bootstrap: int) -> Array:
    """Multinomial resampling multiplicities: ``(n_bootstrap, n)`` counts, each row summing to n."""

    def one(k: Array) -> Array:
        idx = jax.random.randint(k, (n,), 0, n)
        return jnp.zeros(n, jnp.float32).at[idx].add(1.0)

    return jax.lax.map(one, jax.random.split(key, n_bootstrap), batch_size=16)


def _percentile_interval(samples: Array, confidence: float, axis: int = 0) -> Array:
    """Percentile bootstrap interval along ``axis``, NaNs (empty bins) ignored: ``(2, ...)``."""
    lo = (1.0 - confidence) / 2.0
    return jnp.nanquantile(samples, jnp.array([lo, 1.0 - lo]), axis=axis)


def _check_bootstrap(n_bootstrap: int, key: Array | None, confidence: float) -> None:
    if not isinstance(n_bootstrap, int | np.integer) or n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be a non-negative integer, got {n_bootstrap!r}")
    if n_bootstrap > 0 and key is None:
        raise ValueError("key (a jax.random key) is required when n_bootstrap > 0")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")


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
      confidence: coverage of the intervals.

    Returns:
      A :class:`CalibrationCurve`.

    Raises:
      ValueError: on concrete bad input (see the module docstring for traced input).
    """
    _check_n_bins(n_bins)
    _check_strategy(strategy)
    _check_binary(scores, labels, sample_weight, n_bins)
    _check_bootstrap(n_bootstrap, key, confidence)
    s = _float(scores)
    w = _weights(sample_weight, s)
    edges = bin_edges(s, n_bins, strategy)
    bins = assign_bins(s, edges)
    st = binned_statistics(s, labels, bins, n_bins, w)
    mean_score = _safe_div(st.score_sum, st.count)
    event_rate = _safe_div(st.label_sum, st.count)
    if n_bootstrap == 0:
        return CalibrationCurve(mean_score, event_rate, st.count, edges)
    counts = _bootstrap_counts(key, s.shape[0], n_bootstrap)
    boot = jax.vmap(lambda m: binned_statistics(s, labels, bins, n_bins, w * m))(counts)
    return CalibrationCurve(
        mean_score,
        event_rate,
        st.count,
        edges,
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
    s, y = _concrete(scores), _concrete(labels)
    if s is not None:
        if s.ndim != 2 or s.shape[1] < 2:
            raise ValueError(f"multiclass scores must have shape (n, k>=2), got {s.shape}")
        if s.shape[0] == 0:
            raise ValueError("scores is empty")
        if np.any(np.isnan(s)):
            raise ValueError("scores contains NaN")
        if np.any((s < 0) | (s > 1)):
            raise ValueError("scores has values outside [0, 1]")
        if n_bins is not None and s.shape[0] < n_bins:
            raise ValueError(f"scores has {s.shape[0]} observations, fewer than n_bins={n_bins}")
    if y is not None:
        if s is not None and y.shape != s.shape[:1]:
            raise ValueError(f"labels must have shape ({s.shape[0]},), got {y.shape}")
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
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
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
    if multiclass not in MULTICLASS_MODES:
        raise ValueError(f"multiclass must be one of {MULTICLASS_MODES}, got {multiclass!r}")
    ndim = _check_scores_labels(scores, labels, sample_weight, n_bins)
    s = _float(scores)
    w = _weights(sample_weight, s)
    y = jnp.asarray(labels)
    if ndim == 1:
        return _binary_ece(s, y, w, n_bins, strategy, norm, debias)
    if multiclass == "top_label":
        correct = jnp.argmax(s, axis=-1) == y
        return _binary_ece(jnp.max(s, axis=-1), correct, w, n_bins, strategy, norm, debias)
    onehot = jax.nn.one_hot(y, s.shape[1], dtype=s.dtype)
    per_class = jax.vmap(
        lambda sk, yk: _binary_ece(sk, yk, w, n_bins, strategy, norm, debias), in_axes=1
    )(s, onehot)
    return jnp.mean(per_class)


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
        per_obs = jnp.square(s - y.astype(s.dtype))
    else:
        per_obs = jnp.sum(jnp.square(s - jax.nn.one_hot(y, s.shape[1], dtype=s.dtype)), axis=-1)
    return _weighted_mean(per_obs, w)


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
        per_obs = jnp.where(y == 1, -jnp.log(s), -jnp.log1p(-s))
    else:
        per_obs = -jnp.log(jnp.take_along_axis(s, y[:, None].astype(jnp.int32), axis=-1)[:, 0])
    return _weighted_mean(per_obs, w)


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
    return jnp.sum(pos_w * (below + 0.5 * tied)) / (jnp.sum(pos_w) * jnp.sum(neg_w))


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
        return _binary_auroc(s, y.astype(s.dtype), w)
    onehot = jax.nn.one_hot(y, s.shape[1], dtype=s.dtype)
    return jnp.mean(jax.vmap(lambda sk, yk: _binary_auroc(sk, yk, w), in_axes=1)(s, onehot))
