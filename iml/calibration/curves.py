"""The binned calibration curve of binary scores (Definition 1; the paper's Figures 1 and 4):
per bin, the mean score against the event rate, with the event rate's Clopper-Pearson interval
and optional bootstrap intervals of both."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from iml._bootstrap import bootstrap_counts, check_bootstrap, percentile_interval
from iml.calibration._checks import (
    as_float,
    as_weights,
    check_binary,
    check_n_bins,
    check_strategy,
)
from iml.calibration.binning import assign_bins, bin_edges, binned_statistics, safe_div
from iml.calibration.intervals import clopper_pearson_interval

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = ["CalibrationCurve", "calibration_curve"]


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
      ValueError: on concrete bad input (see :mod:`iml.calibration` for traced input).
    """
    check_n_bins(n_bins)
    check_strategy(strategy)
    check_binary(scores, labels, sample_weight, n_bins)
    check_bootstrap(n_bootstrap, key, confidence)
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
    s = as_float(scores)
    w = as_weights(sample_weight, s)
    edges = bin_edges(s, n_bins, strategy)
    bins = assign_bins(s, edges)
    st = binned_statistics(s, labels, bins, n_bins, w)
    mean_score = safe_div(st.score_sum, st.count)
    event_rate = safe_div(st.label_sum, st.count)
    # Kish's effective count n_eff = count^2 / sum(w^2); exactly the count when unweighted.
    design = safe_div(st.count, st.weight_sq_sum)
    n_eff = jnp.where(st.count > 0, st.count * design, 0.0)
    events = jnp.minimum(jnp.where(st.count > 0, st.label_sum * design, 0.0), n_eff)
    binomial = clopper_pearson_interval(events, n_eff, confidence)
    if n_bootstrap == 0:
        return CalibrationCurve(mean_score, event_rate, st.count, edges, binomial)
    counts = bootstrap_counts(key, s.shape[0], n_bootstrap)
    boot = binned_statistics(s, labels, bins, n_bins, w * counts)  # one product for all
    return CalibrationCurve(
        mean_score,
        event_rate,
        st.count,
        edges,
        binomial,
        percentile_interval(safe_div(boot.score_sum, boot.count), confidence),
        percentile_interval(safe_div(boot.label_sum, boot.count), confidence),
    )
