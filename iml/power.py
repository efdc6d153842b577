"""Size and power of :func:`iml.revealed.reveal`'s tests, by simulation at a run's N, K and prior.

A test's *size* is how often it rejects a learning model that holds; its *power*, how often it
rejects one that fails. Both come from data sets of Bayesian agents with Gaussian signals
(:func:`iml.revealed.simulate_gaussian_agents`): agent ``k`` sees ``x_k ~ N(d_k y, 1)`` and
reports the optimal score of its posterior under its loss ``L_k``. The precisions are
``d_k = d + delta r_k`` with ``r_k`` evenly spaced from -1/2 (the first loss) to 1/2 (the last):

* ``delta = 0``, **capacity**: one experiment for every loss. NIS and NIAC both hold, every
  inequality binding: their rates are sizes at the least-favourable null.
* ``delta < 0``, **falling**: precision falls along the losses. The first agents' experiments
  are better for every loss, so NIS fails; its rate is NIS's power.
* ``delta > 0``, **rising**: reversed costly agents (precision rising where its value falls):
  no cost of experiments rationalises them, so NIAC fails (and NIS); the rates are powers.
* **misreported**: capacity-constrained agents, but the middle one reports under another loss
  than its own (the weight's odds multiplied by a factor): NIAS fails for one model among ``K``.
  In every other scenario each agent reports optimally, so NIAS's rate is a size.

What each scenario is in the population is stated, not assumed: :func:`gaussian_population`
gives the agents' population experiments (their signals cut at the quantiles of their
distributions) and the NIS and NIAC margins of their value matrix, positive exactly when the
learning model fails, and the fewest positives and negatives any bin holds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtr

from iml import revealed as R
from iml.calibration import clopper_pearson_interval
from iml.revealed.bins import as_min_count
from iml.spec import LossSpec

__all__ = [
    "TESTS",
    "Population",
    "bisect_precision",
    "gaussian_population",
    "matched_precision",
    "misreported_weights",
    "precisions",
    "rejection_rates",
    "scenario_name",
    "standard_error",
]


#: The tests whose rejections are simulated: NIS, NIAC and NIAS.
TESTS = ("nis", "niac", "nias")


class Population(NamedTuple):
    """The agents' experiments in the population and what they make of the tests.

    Attributes:
      nis_margin, niac_margin: of the population value matrix (positive: the model fails).
      min_positives, min_negatives: the fewest positives and negatives of any bin, as
        fractions of the observations.
      information: each agent's mutual information in nats ``[K]``.
    """

    nis_margin: float
    niac_margin: float
    min_positives: float
    min_negatives: float
    information: np.ndarray


def precisions(n_models: int, delta: float, centre: float) -> np.ndarray:
    """``d_k = centre + delta r_k``, ``r`` evenly spaced from -1/2 to 1/2 along the losses."""
    return (centre + delta * np.linspace(-0.5, 0.5, n_models)).astype(np.float32)


def misreported_weights(weights: Sequence[float], factor: float) -> np.ndarray:
    """The weights the agents report for: the middle one's odds ``w / (1 - w)`` times ``factor``
    (for a weight in ``(0, 1)``; any other weight is multiplied by ``factor``)."""
    out = np.array(weights, np.float64)
    k = len(out) // 2
    if 0.0 < out[k] < 1.0:
        odds = factor * out[k] / (1.0 - out[k])
        out[k] = odds / (1.0 + odds)
    else:
        out[k] = factor * out[k]
    return out


def scenario_name(delta: float, misreport: float = 1.0) -> str:
    if misreport != 1.0:
        return "misreported"
    return "capacity" if delta == 0 else ("falling" if delta < 0 else "rising")


def gaussian_population(
    losses: LossSpec | Sequence, precision: np.ndarray, prior: float, n_bins: int = 10
) -> Population:
    """The population experiments of Gaussian agents, their signals cut at the ``n_bins``
    quantiles of their distributions ``F(x) = (1 - pi) Phi(x) + pi Phi(x - d_k)`` (bisection),
    and the NIS and NIAC margins of their value matrix under ``losses``."""
    d = np.asarray(precision, np.float64).reshape(-1, 1)
    q = np.arange(1, n_bins) / n_bins
    low, high = np.full((d.shape[0], q.size), -40.0), np.full((d.shape[0], q.size), 40.0)
    for _ in range(80):
        mid = 0.5 * (low + high)
        below = (1.0 - prior) * ndtr(mid) + prior * ndtr(mid - d) < q
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    edges = np.concatenate(
        [np.full_like(d, -np.inf), 0.5 * (low + high), np.full_like(d, np.inf)], 1
    )
    positive = prior * np.diff(ndtr(edges - d), axis=1)
    probability = positive + (1.0 - prior) * np.diff(ndtr(edges), axis=1)
    experiments = R.experiments_from_posteriors(probability, positive / probability)
    information = np.asarray(R.mutual_information(experiments), np.float64)
    fewest = float(positive.min()), float((probability - positive).min())
    if d.shape[0] < 2:  # one agent: no pair of agents for NIS or NIAC to compare
        return Population(0.0, 0.0, *fewest, information)
    G = R.value_matrix(experiments, losses)
    return Population(
        float(R.nis_check(G).margin), float(R.niac_check(G).margin), *fewest, information
    )


def bisect_precision(info: Callable[[float], float], information: float, steps: int) -> float:
    """The precision ``d`` in ``[0.001, 12]`` at which ``info(d)``, increasing in ``d``, reaches
    ``information`` nats, by ``steps`` bisections (12 where even ``info(12)`` falls short).

    Raises:
      ValueError: for ``information`` that is not positive.
    """
    if not information > 0:
        raise ValueError(f"information must be positive nats; got {information}")
    low, high = 1e-3, 12.0
    if info(high) < information:
        return high
    for _ in range(steps):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if info(mid) < information else (low, mid)
    return 0.5 * (low + high)


def matched_precision(information: float, prior: float, n_bins: int = 10) -> float:
    """The precision ``d`` whose population experiment (``n_bins`` quantile bins) carries
    ``information`` nats at ``prior``: the Gaussian agent as informative as a run's models."""

    def info(d: float) -> float:
        return float(gaussian_population([0.5], np.array([d]), prior, n_bins).information[0])

    return bisect_precision(info, information, 40)


def rejection_rates(
    losses: LossSpec | Sequence,
    reported: LossSpec | Sequence,
    precision: np.ndarray,
    prior: float | Sequence[float],
    n: int,
    *,
    n_datasets: int,
    n_bootstrap: int,
    key: jax.Array,
    n_bins: int = 10,
    strategy: str = "adaptive",
    min_count: int | None = None,
    positives: int | None = None,
    tests: Sequence[str] = TESTS,
) -> dict[str, np.ndarray]:
    """How often :func:`iml.revealed.reveal` rejects NIS, NIAC and NIAS (for any model) over
    ``n_datasets`` data sets of agents trained under ``losses`` who report under ``reported``.
    A prior vector ``[n]`` simulates agents of ``n`` classes
    (:func:`iml.revealed.simulate_gaussian_agents`), with losses of ``n`` class scores.

    ``tests``: the tests whose rates are wanted (a subset of :data:`TESTS`). The others are not
    run: without NIS and NIAC no data set is bootstrapped (NIAS alone is
    :func:`iml.revealed.nias_test`), and without NIAS no model is tested. The rates of the tests
    run equal those of a call with every test (the same draws).

    ``positives`` (binary agents): every data set holds this many positives, first, as a run's
    labels are fixed and the bootstrap resamples its rows (the agents' posteriors still use the
    prior); each data set's labels are drawn from the prior where it is None. Fixed labels come
    positives first, so the bootstrap's sums of positives need only their rows (about a quarter
    less arithmetic at a prior of 0.24).

    Raises:
      ValueError: for ``positives`` outside ``[1, n - 1]``, or given with a prior vector; for
        ``tests`` empty or naming another test.

    Returns:
      Each test of ``tests``: a ``[n_datasets]`` boolean array of rejections; and, where NIS or
      NIAC ran, ``"information"`` ``[n_datasets, K]``, each data set's ``I_k``, with
      ``"information_interval"`` ``[n_datasets, 2, K]``, the interval ``reveal`` reports.
    """
    unknown = sorted(set(tests) - set(TESTS))
    if unknown or not tests:
        raise ValueError(f"tests must be a non-empty subset of {TESTS}; got {tuple(tests)!r}")
    tests = tuple(t for t in TESTS if t in tests)

    prior = float(prior) if np.ndim(prior) == 0 else tuple(float(x) for x in np.ravel(prior))
    if positives is not None:
        if isinstance(prior, tuple):
            raise ValueError("positives is for binary agents; agents of n classes draw labels")
        if not isinstance(positives, int | np.integer) or not 1 <= positives <= int(n) - 1:
            raise ValueError(
                f"positives must be an integer in [1, {int(n) - 1}]; got {positives!r}"
            )
        positives = int(positives)
    sizes = {"prior": prior, "n": int(n), "n_datasets": int(n_datasets),
             "n_bootstrap": int(n_bootstrap), "n_bins": int(n_bins)}  # fmt: skip
    rejected = _rejections(losses, reported, precision, key, **sizes, strategy=strategy,
                           min_count=min_count, positives=positives, tests=tests)  # fmt: skip
    return {name: np.asarray(value) for name, value in jax.device_get(rejected).items()}


@functools.partial(
    jax.jit,
    static_argnames=(
        "prior",
        "n",
        "n_datasets",
        "n_bootstrap",
        "n_bins",
        "strategy",
        "min_count",
        "positives",
        "tests",
    ),
)
def _rejections(losses, reported, precision, key, *, prior, n, n_datasets, n_bootstrap, n_bins,
                strategy, min_count, positives, tests):  # fmt: skip
    """:func:`rejection_rates`' data sets, one program for every scenario of the same sizes,
    settings and tests (the losses, the reported losses and the precisions are its arguments)."""
    # Fixed labels are a constant of the program: reveal sees them concrete, positives first.
    fixed = None if positives is None else (np.arange(n) < positives).astype(np.int32)

    def one(k: jax.Array):
        key_data, key_boot = jax.random.split(k)
        scores, labels = R.simulate_gaussian_agents(key_data, reported, precision, prior, n,
                                                    labels=fixed)  # fmt: skip
        labels = labels if fixed is None else fixed
        if "nis" not in tests and "niac" not in tests:  # NIAS alone: no bootstrap
            nias = R.nias_test(scores, labels, losses, n_bins, min_count=as_min_count(min_count))
            return {"nias": jnp.any(nias.violated)}
        report = R.reveal(
            scores,
            labels,
            losses,
            n_bins,
            strategy,
            n_bootstrap=n_bootstrap,
            key=key_boot,
            nias="nias" in tests,
            min_count=min_count,
        )
        rejected = {"nis": report.nis_test.violated, "niac": report.niac_test.violated}
        if "nias" in tests:
            rejected["nias"] = jnp.any(report.nias.violated)
        return {"information": report.information,
                "information_interval": report.information_interval,
                **{test: rejected[test] for test in tests}}  # fmt: skip

    return jax.lax.map(one, jax.random.split(key, n_datasets))


def standard_error(rejected: np.ndarray) -> float:
    """The Monte Carlo standard error of a rejection rate."""
    return rate_standard_error(float(np.mean(rejected)), np.size(rejected))


def rate_standard_error(rate: float, n: int) -> float:
    """The Monte Carlo standard error of a rejection ``rate`` over ``n`` simulated data sets,
    ``sqrt(rate (1 - rate) / n)``."""
    return float(np.sqrt(rate * (1.0 - rate) / n))


def rate_text(rate: float, n: int, percent: bool = False) -> str:
    """A rejection rate over ``n`` simulated data sets with its Monte Carlo standard error,
    ``"0.052 (se 0.010)"`` (``percent``: ``"5.2% (se 1.0)"``); at 0 or 1, where that error is
    0, the end of its Clopper-Pearson 95% interval instead, ``"0.000 (at most 0.007)"``."""
    scale, digits, unit = (100.0, 1, "%") if percent else (1.0, 3, "")

    def shown(x: float) -> str:
        return f"{scale * x:.{digits}f}"

    k = round(rate * n)
    if 0 < k < n:
        return f"{shown(rate)}{unit} (se {shown(rate_standard_error(rate, n))})"
    low, high = (float(x) for x in clopper_pearson_interval(k, n))
    bound = f"at most {shown(high)}" if k == 0 else f"at least {shown(low)}"
    return f"{shown(rate)}{unit} ({bound})"
