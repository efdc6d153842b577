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
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtr

from iml import revealed as R
from iml.calibration import clopper_pearson_interval
from iml.revealed.bins import as_min_count
from iml.spec import LossSpec

ArrayLike = jax.typing.ArrayLike

__all__ = [
    "POWER_DELTA",
    "POWER_MISREPORT",
    "TESTS",
    "Population",
    "bisect_precision",
    "gaussian_population",
    "matched_class_precision",
    "matched_precision",
    "misreported_weights",
    "precisions",
    "rejection_rates",
    "scenario_name",
    "simulated_class_power",
    "simulated_power",
    "standard_error",
]


#: The tests whose rejections are simulated: NIS, NIAC and NIAS.
TESTS = ("nis", "niac", "nias")
#: The alternatives a run's tests are simulated against (:func:`simulated_power`): precision
#: moving by this much between the grid's ends, and the middle model's reported odds multiplied
#: by this factor.
POWER_DELTA = 0.3
POWER_MISREPORT = 2.0


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


def simulated_power(
    loss: Callable[[ArrayLike], LossSpec],
    weights: ArrayLike,
    labels: ArrayLike,
    prior: float,
    information: float,
    *,
    n_bins: int,
    n_datasets: int,
    n_bootstrap: int,
    seed: int,
    rejected: Mapping[str, bool] | None = None,
    say: Callable[[str], None] = lambda message: None,
) -> dict[str, Any]:
    """Size and power of :func:`iml.revealed.reveal`'s tests on a binary run's data: ``K``
    models trained under ``loss(w)`` at the class weights ``weights [K]`` (a
    :class:`iml.grids.LossFamily`), on the run's labels ``labels [N]`` (every data set holds its
    ``N`` observations with its number of positives), at the run's ``prior``.

    Gaussian agents at the run's class weights, with the precision ``d`` whose population
    experiment carries ``information`` nats (the run's median ``I_k``): at ``d`` for all
    (``capacity``: the sizes of NIS, NIAC and NIAS), falling by :data:`POWER_DELTA` along the
    weights (NIS's power), rising by it (NIAC's power), and with the middle model reporting its
    odds times :data:`POWER_MISREPORT` (NIAS's power). Each scenario runs ``n_datasets`` data
    sets with ``n_bootstrap`` paired replicates, in adaptive bins of at most ``n_bins``, from
    ``jax.random.key(seed + 1)``. A test the run ``rejected`` (``{test: bool}``) has its size
    simulated but not its power.

    Returns:
      The record: the agents, ``d``, each scenario's rates (with their Monte Carlo standard
      errors), ``size`` per test, and ``power`` per test simulated against its alternative.
    """
    weights = np.asarray(weights, np.float64)
    labels = np.asarray(labels)
    K, n = len(weights), len(labels)
    positives = int(np.sum(labels == 1))
    d = matched_precision(information, prior, n_bins)
    losses = loss(weights)
    key = jax.random.key(seed + 1)
    scenarios = {
        "capacity": (0.0, 1.0),
        "falling": (-POWER_DELTA, 1.0),
        "rising": (POWER_DELTA, 1.0),
        "misreported": (0.0, POWER_MISREPORT),
    }
    alternatives = {
        "nis": ("falling", f"precision falling by {POWER_DELTA} along the class weights"),
        "niac": ("rising", f"precision rising by {POWER_DELTA} along the class weights"),
        "nias": ("misreported", f"the middle model reporting its odds times {POWER_MISREPORT}"),
    }

    def simulate(name: str, tests: tuple[str, ...]) -> dict[str, Any]:
        delta, factor = scenarios[name]
        precision = precisions(K, delta, d)
        reported = loss(misreported_weights(weights, factor))
        population = gaussian_population(losses, precision, prior, n_bins)
        rejections = rejection_rates(
            losses, reported, precision, prior, n, n_datasets=n_datasets,
            n_bootstrap=n_bootstrap, key=key, n_bins=n_bins, positives=positives, tests=tests,
        )  # fmt: skip
        return {
            "precision": [round(float(precision[0]), 4), round(float(precision[-1]), 4)],
            "misreport": factor,
            "nis_margin": float(f"{population.nis_margin:.3g}") + 0.0,
            "niac_margin": float(f"{population.niac_margin:.3g}") + 0.0,
            **{test: _rate(rejections[test]) for test in tests},
        }

    rates = _scenario_rates(simulate, alternatives, rejected or {}, n_datasets, say)
    agents = (f"Gaussian signals x ~ N(d y, 1), each reporting optimally for its loss, on the "
              f"run's labels ({n} observations, {positives} positive)")  # fmt: skip
    return _power_record(agents, d, information, n_datasets, n_bootstrap, rates, alternatives)


def matched_class_precision(
    information: float,
    losses: LossSpec,
    prior: Sequence[float],
    n: int,
    n_bins: int,
    key: jax.Array,
) -> float:
    """The precision ``d`` of Gaussian agents of ``c`` classes
    (:func:`iml.revealed.simulate_gaussian_agents`: ``x ~ N(d e_y, I_c)`` at the class
    probabilities ``prior`` ``[c]``) whose revealed experiment, on ``n`` simulated observations
    in the adaptive cells of ``n_bins`` confidence quantiles per class, carries ``information``
    nats (the plug-in :func:`iml.revealed.mutual_information`, as a run's ``I_k``): bisection
    over ``d`` in ``[0.001, 12]`` with the same draws at every ``d``, for the agent of the
    grid's first loss (``losses`` batched ``(K,)``; the agents' information does not depend on
    their loss).

    Raises:
      ValueError: for ``information`` that is not positive.
    """
    first = jax.tree.map(lambda leaf: jnp.asarray(leaf)[:1], losses)

    def info(d: float) -> float:
        scores, labels = R.simulate_gaussian_agents(key, first, np.array([d], np.float32),
                                                    tuple(prior), n)  # fmt: skip
        experiments = R.revealed_experiments(scores, labels, n_bins, "adaptive", losses=first)
        return float(np.asarray(R.mutual_information(experiments))[0])

    return bisect_precision(info, information, 30)


def _misreporting(losses: LossSpec, k: int) -> LossSpec:
    """The grid ``losses`` (batched ``(K,)``) with model ``k`` reporting for the first loss."""
    return jax.tree.map(lambda leaf: jnp.asarray(leaf).at[k].set(jnp.asarray(leaf)[0]), losses)


def simulated_class_power(
    losses: LossSpec,
    keys: Sequence[str],
    n: int,
    prior: Sequence[float],
    information: float,
    *,
    n_bins: int,
    n_datasets: int,
    n_bootstrap: int,
    seed: int,
    rejected: Mapping[str, bool] | None = None,
    say: Callable[[str], None] = lambda message: None,
) -> dict[str, Any]:
    """Size and power of :func:`iml.revealed.reveal`'s tests on a multiclass run's data: ``K``
    models trained under the grid ``losses`` (batched ``(K,)``, its losses named ``keys``) on
    ``n`` observations of ``c`` classes at the class probabilities ``prior [c]``
    (:func:`rejection_rates` with a prior vector).

    Gaussian agents of ``c`` classes at the grid's losses, with the precision ``d`` whose
    revealed experiment carries ``information`` nats (the run's median ``I_k``;
    :func:`matched_class_precision`): at ``d`` for all (``capacity``: the sizes of NIS, NIAC and
    NIAS, every inequality binding), rising by :data:`POWER_DELTA` along the grid (``d_k = d +
    delta r_k``, ``r`` from -1/2 to 1/2; the agent with the larger ``d`` is Blackwell-more
    informative: NIS's power), falling by it (NIAC's rate against the opposite order), and with
    the middle model reporting the optimal scores of the grid's first loss, its posteriors
    uncorrected for its own (NIAS's power, for one model among ``K``). Each scenario runs
    ``n_datasets`` data sets of ``n`` observations with ``n_bootstrap`` paired replicates, from
    ``jax.random.key(seed + 1)``. A test the run ``rejected`` (``{test: bool}``) has its size
    simulated but not its power.

    Returns:
      The record, as :func:`simulated_power`'s.
    """
    K = len(keys)
    prior = [float(x) for x in np.asarray(prior, np.float64)]
    prior = list(np.asarray(prior) / np.sum(prior))
    key = jax.random.key(seed + 1)
    say("matching the simulated agents' information to the run's")
    d = matched_class_precision(information, losses, prior, max(n, 10_000), n_bins,
                                jax.random.fold_in(key, 1))  # fmt: skip
    middle = K // 2
    scenarios = {
        "capacity": (0.0, losses),
        "rising": (POWER_DELTA, losses),
        "falling": (-POWER_DELTA, losses),
        "misreported": (0.0, _misreporting(losses, middle)),
    }
    rising = precisions(K, POWER_DELTA, d)
    alternatives = {
        "nis": ("rising", f"precision rising by {POWER_DELTA} along the grid (d from "
                          f"{round(float(rising[0]), 4)} to {round(float(rising[-1]), 4)})"),
        "niac": ("falling", f"precision falling by {POWER_DELTA} along the grid"),
        "nias": ("misreported", f"the middle model ({keys[middle]}) reporting the optimal scores "
                                f"of the first loss ({keys[0]})"),
    }  # fmt: skip

    def simulate(name: str, tests: tuple[str, ...]) -> dict[str, Any]:
        delta, reported = scenarios[name]
        precision = precisions(K, delta, d)
        rejections = rejection_rates(
            losses, reported, precision, tuple(prior), n, n_datasets=n_datasets,
            n_bootstrap=n_bootstrap, key=key, n_bins=n_bins, tests=tests,
        )  # fmt: skip
        return {
            "precision": [round(float(precision[0]), 4), round(float(precision[-1]), 4)],
            "misreported_model": middle if name == "misreported" else None,
            **{test: _rate(rejections[test]) for test in tests},
        }

    rates = _scenario_rates(simulate, alternatives, rejected or {}, n_datasets, say)
    agents = (f"Gaussian signals x ~ N(d e_y, I_{len(prior)}) over {len(prior)} classes at the "
              "run's class frequencies, each reporting optimally for its loss")  # fmt: skip
    return _power_record(agents, d, information, n_datasets, n_bootstrap, rates, alternatives)


def _scenario_rates(
    simulate: Callable[[str, tuple[str, ...]], dict[str, Any]],
    alternatives: Mapping[str, tuple[str, str]],
    rejected: Mapping[str, bool],
    n_datasets: int,
    say: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    """``simulate(scenario, tests)`` of the scenarios a verdict needs: ``capacity`` for every
    test's size, and a test's alternative (``{test: (scenario, text)}``) only where the test did
    not reject (``rejected``), for a rejection states no power. Each scenario runs only the
    tests it is needed for (:func:`rejection_rates`' ``tests``)."""
    needed = {"capacity": TESTS}
    for test, (name, _) in alternatives.items():
        if not rejected.get(test, False):
            needed[name] = (*needed.get(name, ()), test)
    rates = {}
    for name, tests in needed.items():
        said = ", ".join(test.upper() for test in tests)
        say(f"simulating {n_datasets} data sets like the run's: {name} ({said})")
        rates[name] = simulate(name, tests)
    return rates


def _power_record(
    agents: str,
    d: float,
    information: float,
    n_datasets: int,
    n_bootstrap: int,
    rates: Mapping[str, Any],
    alternatives: Mapping[str, tuple[str, str]],
) -> dict[str, Any]:
    """The record of a simulation of the tests: each scenario's rejection rates, the sizes
    (``capacity``) and the power of each test simulated against its alternative
    (``{test: (scenario, text)}``; a test that rejected has none, :func:`_scenario_rates`)."""
    return {
        "agents": agents,
        "precision": round(d, 4),
        "information": information,
        "datasets": n_datasets,
        "bootstrap": n_bootstrap,
        "scenarios": rates,
        "size": {test: rates["capacity"][test] for test in TESTS},
        "power": {
            test: {"against": text, "scenario": name, **rates[name][test]}
            for test, (name, text) in alternatives.items()
            if test in rates.get(name, {})
        },
    }


def _rate(rejected: np.ndarray) -> dict[str, float]:
    return {"rate": float(np.mean(rejected)), "se": round(standard_error(rejected), 4)}


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
