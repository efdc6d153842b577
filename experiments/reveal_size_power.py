"""Size and power of the NIS and NIAC tests of ``iml.revealed.reveal`` on simulated agents.

Each data set holds the scores of ``K`` Bayesian agents
(:func:`iml.revealed.simulate_gaussian_agents`), one per beta (K = 4: 0.5, 0.7, 0.9, 0.99;
otherwise a logit-spaced grid from 0.5 to 0.99), on the same ``N`` observations with prior
``pi``: agent ``k`` sees its own Gaussian signal ``x_k ~ N(d_k y, 1)`` and reports
``c^beta_k`` of its posterior. The precisions are ``d_k = 1.5 + delta r_k``, with ``r_k``
evenly spaced from -1/2 (beta = 0.5) to 1/2 (beta = 0.99), so ``delta`` is the difference in
precision between the extreme betas. A test's *size* is how often it rejects a learning model
that holds; its *power*, how often it rejects one that fails:

* ``delta = 0``, **capacity**: capacity-constrained agents, one experiment (equal precision)
  whatever the loss. NIS and NIAC both hold: both rates are sizes, which should stay near
  ``1 - confidence`` = 0.05, at K = 64 as at K = 4.
* ``delta < 0``, **falling**: precision falls with beta, the direction costly learning takes
  here (a costly learner buys less precision where less is at stake, and the weight
  ``beta pi + (1 - beta)(1 - pi)`` of the loss falls from 0.5 to 0.108 at ``pi`` = 0.1). NIS
  fails: the low-beta experiment is more informative, so better for every loss, and the
  high-beta agents would switch to it. Its rate is NIS's power. NIAC fails only slightly:
  at ``pi`` = 0.1 the value of precision still rises with beta from 0.5 to about 0.7, so the
  most precise agents form an improving cycle worth a small fraction (a twentieth or so) of the
  rising ramp's. NIAC's rate there is close to a size.
* ``delta > 0``, **rising**: reversed costly agents, precision rising with beta where its
  value falls. No cost of experiments rationalises that; NIAC fails, and NIS too: both rates
  are powers.

What each test faces is stated, not assumed: every line carries the population margins
(``nis_margin``, ``niac_margin``: ``iml.revealed.nis_check`` and ``niac_check`` of the value
matrix of the agents' population experiments, their signals cut at the deciles of their
distributions as ``reveal`` cuts the scores), positive exactly when the learning model fails.

Each line printed is one scenario as JSON: the settings, ``precision`` (``d`` at the lowest and
at the highest beta), the population margins, ``nis_rejection`` and ``niac_rejection`` (the
fractions of the data sets in which ``reveal`` declares the violation at ``confidence`` 0.95)
with their Monte Carlo standard errors, and the seconds taken (the first scenario's include
compilation). Each scenario runs as one jitted ``lax.map`` over data sets; every scenario
draws from the same keys.

Run from the repository root (K = 64 takes some minutes on a laptop CPU)::

    python -m experiments.reveal_size_power --models 4 --n 10000 --bootstrap 200 --datasets 500
    python -m experiments.reveal_size_power --models 64 --out size_power_64.jsonl
    python -m experiments.reveal_size_power --quick
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtr

from iml import revealed as R

CENTRE_PRECISION = 1.5
DELTAS = (0.0, -0.1, -0.3, 0.1, 0.3)
QUICK = {"n": 2000, "bootstrap": 40, "datasets": 8}


def betas_for(n_models: int) -> np.ndarray:
    """The betas of ``n_models`` agents: the paper's four at K = 4, else logit-spaced."""
    if n_models == 4:
        return np.array([0.5, 0.7, 0.9, 0.99], np.float32)
    return (1.0 / (1.0 + np.exp(-np.linspace(0.0, np.log(99.0), n_models)))).astype(np.float32)


def precisions(n_models: int, delta: float) -> np.ndarray:
    """``d_k = 1.5 + delta r_k``, ``r`` evenly spaced from -1/2 to 1/2 in the order of beta."""
    return (CENTRE_PRECISION + delta * np.linspace(-0.5, 0.5, n_models)).astype(np.float32)


def population_margins(
    betas: np.ndarray, precision: np.ndarray, prior: float, n_bins: int = 10
) -> tuple[float, float]:
    """The NIS and NIAC margins of the agents' experiments in the population.

    Agent ``k``'s signal ``x ~ N(d_k y, 1)`` cut at the quantiles of its distribution
    ``F(x) = (1 - pi) Phi(x) + pi Phi(x - d_k)`` (found by bisection) gives ``P_k(s)`` and
    ``gamma_{k,s}`` exactly; the margins are those of their value matrix.
    """
    d = np.asarray(precision, np.float64)[:, None]
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
    G = R.value_matrix(experiments, betas)
    return float(R.nis_check(G).margin), float(R.niac_check(G).margin)


def scenario_name(delta: float) -> str:
    return "capacity" if delta == 0 else ("falling" if delta < 0 else "rising")


def rejection_rates(
    n_models: int,
    n: int,
    n_bootstrap: int,
    n_datasets: int,
    prior: float,
    deltas: tuple[float, ...] = DELTAS,
    seed: int = 0,
) -> Iterator[dict]:
    """One record per ``delta``: how often ``reveal`` rejects NIS and NIAC over ``n_datasets``.

    Every scenario uses the same keys (common random numbers), so differences between scenarios
    come from the precisions, not from the draws.
    """
    betas = jnp.asarray(betas_for(n_models))

    def one(key: jax.Array, precision: jax.Array) -> tuple[jax.Array, jax.Array]:
        key_data, key_boot = jax.random.split(key)
        scores, labels = R.simulate_gaussian_agents(key_data, betas, precision, prior, n)
        report = R.reveal(scores, labels, betas, n_bootstrap=n_bootstrap, key=key_boot, nias=False)
        return report.nis_test.violated, report.niac_test.violated

    run = jax.jit(lambda keys, d: jax.lax.map(lambda key: one(key, d), keys))
    keys = jax.random.split(jax.random.key(seed), n_datasets)
    for delta in deltas:
        d = precisions(n_models, delta)
        nis_margin, niac_margin = population_margins(np.asarray(betas), d, prior)
        start = time.perf_counter()
        nis, niac = (np.asarray(x, np.float64) for x in jax.device_get(run(keys, jnp.asarray(d))))
        seconds = time.perf_counter() - start
        yield {
            "models": n_models,
            "n": n,
            "prior": prior,
            "bootstrap": n_bootstrap,
            "datasets": n_datasets,
            "seed": seed,
            "scenario": scenario_name(delta),
            "delta": delta,
            "precision": [round(float(d[0]), 4), round(float(d[-1]), 4)],
            "nis_margin": float(f"{nis_margin:.3g}") + 0.0,  # + 0.0: no -0.0
            "niac_margin": float(f"{niac_margin:.3g}") + 0.0,
            "nis_rejection": float(nis.mean()),
            "nis_se": _standard_error(nis),
            "niac_rejection": float(niac.mean()),
            "niac_se": _standard_error(niac),
            "seconds": round(seconds, 1),
        }


def _standard_error(rejected: np.ndarray) -> float:
    p = float(rejected.mean())
    return round(float(np.sqrt(p * (1.0 - p) / rejected.size)), 4)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", type=int, nargs="+", default=[4], help="K, one or more (default 4)")
    p.add_argument("--n", type=int, default=None, help="observations per data set (10,000)")
    p.add_argument("--bootstrap", type=int, default=None, help="replicates per reveal() (200)")
    p.add_argument("--datasets", type=int, default=None, help="data sets per scenario (500)")
    p.add_argument("--prior", type=float, default=0.1, help="P(y = 1) (default 0.1)")
    p.add_argument(
        "--deltas",
        type=float,
        nargs="+",
        default=list(DELTAS),
        help="precision differences between the extreme betas (default 0 -0.1 -0.3 0.1 0.3)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="N = 2,000, 40 replicates, 8 data sets")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON lines to FILE")
    args = p.parse_args(argv)
    defaults = QUICK if args.quick else {"n": 10_000, "bootstrap": 200, "datasets": 500}
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in ("n", "bootstrap", "datasets"):
        if getattr(args, name) < (2 if name == "bootstrap" else 1):
            p.error(f"--{name} must be a positive integer (--bootstrap at least 2)")
    if min(args.models) < 2:
        p.error("--models must be at least 2")
    if not 0.0 < args.prior < 1.0:
        p.error("--prior must lie in (0, 1)")
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    args = _parse(argv)
    if args.out is not None:
        args.out.write_text("")
    records = []
    for n_models in args.models:
        settings = (n_models, args.n, args.bootstrap, args.datasets, args.prior)
        for record in rejection_rates(*settings, tuple(args.deltas), args.seed):
            line = json.dumps(record)
            print(line, flush=True)
            if args.out is not None:
                with args.out.open("a") as f:
                    f.write(line + "\n")
            records.append(record)
    return records


if __name__ == "__main__":
    main()
