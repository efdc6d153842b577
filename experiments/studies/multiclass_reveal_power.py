"""Size and power of :func:`iml.revealed.reveal`'s tests for models of ``n`` classes, and the
coverage of its information interval, on simulated agents with a known experiment.

Each data set holds the scores of ``K`` Bayesian agents of ``n`` classes
(:func:`iml.revealed.simulate_gaussian_agents` with a prior vector): agent ``k`` sees
``x_k ~ N(d_k e_y, I_n)``, forms its posterior ``softmax(log pi + d_k x_k)`` and reports the
optimal score of it under its own loss, so every agent is loss-calibrated by construction. The
grid of losses raises the weight of the last class, ``w[n-1] = 1, 2, 4, 8`` (``K = 4``): the
class-weighted softmax (``class_weighted_softmax``, ``w[2]=...``) or the B-weighted log loss
(``matrix``, ``B[2,2]=...``). The precisions are ``d_k = d + delta r_k``, ``r_k`` evenly
spaced from -1/2 (the first loss) to 1/2 (the last):

* ``capacity`` (``delta = 0``): one experiment for every loss. NIS and NIAC hold, every
  inequality binding; NIAS holds. All three rates are sizes, to stay near 5%.
* ``rising`` (``delta > 0``): precision rises along the grid. The Gaussian experiment with the
  larger ``d`` is Blackwell-more informative, so better for every loss: NIS fails and its rate
  is NIS's power. (Costly learning rationalises precision rising where a loss values it more,
  so NIAC's rate stays a size or near it.)
* ``misreported``: capacity-constrained agents, but the third agent (``w[2] = 4``) reports its
  posterior uncorrected (the optimal score of the unweighted loss): NIAS fails for one model
  among ``K``; its rate is NIAS's power.
* ``shannon``: four Shannon agents (:func:`iml.revealed.shannon_agent`, cost ``lambda`` a nat
  of mutual information), on the grid ``w[2] = 2, 4, 8, 16``: each buys the experiment its
  loss values net of that cost, a costly-learning model, so NIAC and NIAS are sizes; their
  experiments differ, so NIS's rate is its power against them. ``lambda_covered`` is how
  often the point estimates' interval of Shannon costs (:func:`iml.revealed.
  shannon_lambda_interval`) holds the agents' ``lambda``.
* ``channel``: two agents (``w[2] = 1, 4``) whose signal is a symmetric channel of the
  class (right with probability 0.7): each top class holds one posterior, so the population
  information of the cells is the channel's, known exactly; ``coverage`` is how often the 95%
  bootstrap interval of each agent's ``I_k`` covers it (the smaller of the two), and NIS, NIAC
  and NIAS are sizes (one experiment, binding).

Each row runs ``--datasets`` data sets as one jitted ``lax.map``; the record
(``docs/results/multiclass_reveal_power/record.json``) holds the settings, each row's rates
and Monte Carlo standard errors, and the seconds taken, and its README renders the table.

Run from the repository root::

    python -m experiments.studies.multiclass_reveal_power               # 500 data sets a row
    python -m experiments.studies.multiclass_reveal_power --quick       # 20, not recorded
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from experiments.sync_docs import Table
from iml import loss_spec
from iml import power as P
from iml import revealed as R

RECORD = Path(__file__).resolve().parents[2] / "docs/results/multiclass_reveal_power/record.json"
HEAVY = (1.0, 2.0, 4.0, 8.0)


def grid(family: str, heavy) -> object:
    """The losses of the grid: the last class's weight ``heavy`` ``[K]`` for 3 classes."""
    heavy = np.asarray(heavy, np.float64)
    if family == "matrix":
        B = np.ones((heavy.size, 3, 3))
        B[:, 2, 2] = heavy
        return loss_spec(B)
    weights = np.ones((heavy.size, 3))
    weights[:, 2] = heavy
    return loss_spec("class_weighted_softmax", class_weights=weights)


def channel(prior: np.ndarray, accuracy: float, n_models: int) -> R.RevealedExperiments:
    """The symmetric channel: the signal is the class with probability ``accuracy``."""
    n = prior.size
    rates = np.full((n, n), (1.0 - accuracy) / (n - 1))
    np.fill_diagonal(rates, accuracy)
    joint = prior[:, None] * rates
    probability = joint.sum(0)
    posterior = (joint / probability).T
    return R.experiments_from_posteriors(
        np.tile(probability, (n_models, 1)), np.tile(posterior, (n_models, 1, 1))
    )


def reveal_known(ex, losses, n: int, n_bins: int, n_bootstrap: int, key: jax.Array):
    """:func:`iml.revealed.reveal` of one data set of ``n`` observations drawn from the known
    experiments ``ex``, each agent reporting the optimal score of its signal's posterior under
    its own loss."""
    key_data, key_boot = jax.random.split(key)
    signals, labels = R.simulate_observations(key_data, ex, n)
    posterior = jnp.take_along_axis(ex.posterior, signals[..., None], axis=1)
    scores = jax.vmap(type(losses).optimal_score)(losses, posterior)
    return R.reveal(scores, labels, losses, n_bins, n_bootstrap=n_bootstrap, key=key_boot)


def channel_rates(args: argparse.Namespace, key: jax.Array, n_bins: int) -> dict:
    losses = grid("class_weighted_softmax", (1.0, 4.0))
    ex = channel(np.asarray(args.prior), 0.7, 2)
    truth = R.mutual_information(ex)

    @jax.jit
    def run(keys):
        def one(k):
            report = reveal_known(ex, losses, args.n, n_bins, args.bootstrap, k)
            # reveal reports the basic (reverse percentile) interval 2 I - [q_high, q_low],
            # clipped at 0; the percentile interval [q_low, q_high] is its reflection (exact
            # where the lower end was not clipped)
            low, high = report.information_interval
            info = report.information
            basic = (low <= truth) & (truth <= high)
            covered = (2.0 * info - high <= truth) & (truth <= 2.0 * info - low)
            return (report.nis_test.violated, report.niac_test.violated,
                    jnp.any(report.nias.violated), covered, basic, info)  # fmt: skip

        return jax.lax.map(one, keys)

    out = jax.device_get(run(jax.random.split(key, args.datasets)))
    nis, niac, nias, covered, basic, info = (np.asarray(x) for x in out)
    k = int(np.argmin(covered.mean(0)))  # the agent whose interval covers least
    return {"nis": nis, "niac": niac, "nias": nias, "coverage": covered[:, k],
            "basic_coverage": basic[:, k], "information": [float(x) for x in truth],
            "mean_information": [float(x) for x in info.mean(0)]}  # fmt: skip


SHANNON_HEAVY = (2.0, 4.0, 8.0, 16.0)


def shannon_rates(args: argparse.Namespace, key: jax.Array, family: str, lam: float) -> dict:
    losses = grid(family, SHANNON_HEAVY)
    ex = R.shannon_agent(losses, np.asarray(args.prior), lam)
    truth = R.mutual_information(ex)

    @jax.jit
    def run(keys):
        def one(k):
            report = reveal_known(ex, losses, args.n, args.bins, args.bootstrap, k)
            cost = report.shannon
            covered = ~cost.rejected & (cost.lower <= lam) & (lam <= cost.upper)
            return (report.nis_test.violated, report.niac_test.violated,
                    jnp.any(report.nias.violated), covered, report.information)  # fmt: skip

        return jax.lax.map(one, keys)

    out = jax.device_get(run(jax.random.split(key, args.datasets)))
    nis, niac, nias, covered, info = (np.asarray(x) for x in out)
    # the agents' own G and I (no sampling): the interval of lambda they reveal
    population = R.shannon_lambda_interval(R.value_matrix(ex, losses), truth)
    return {"nis": nis, "niac": niac, "nias": nias, "lambda_covered": covered,
            "information": [float(x) for x in truth],
            "mean_information": [float(x) for x in info.mean(0)],
            "signals": [int(x) for x in np.sum(np.asarray(ex.probability) > 0, axis=-1)],
            "population_lambda": [float(population.lower), float(population.upper)]}  # fmt: skip


def rates(rejected: dict) -> dict:
    out = {}
    for name, values in rejected.items():
        if name in ("information", "mean_information", "signals", "population_lambda"):
            out["true_" + name if name == "information" else name] = values
            continue
        values = np.asarray(values)
        out[name] = float(values.mean())
        out[f"{name}_se"] = P.standard_error(values)
    return out


ROWS = (
    ("capacity", "class_weighted_softmax", 0.0),
    ("rising", "class_weighted_softmax", 0.05),
    ("rising", "class_weighted_softmax", 0.1),
    ("rising", "class_weighted_softmax", 0.2),
    ("rising", "class_weighted_softmax", 0.5),
    ("misreported", "class_weighted_softmax", 0.0),
    ("capacity", "matrix", 0.0),
    ("rising", "matrix", 0.1),
    ("rising", "matrix", 0.5),
    ("misreported", "matrix", 0.0),
    ("channel", "class_weighted_softmax", 0.0),
    ("channel", "class_weighted_softmax", 1.0),  # one confidence quantile per class
    ("shannon", "class_weighted_softmax", 1.3),  # delta: the agents' lambda
    ("shannon", "matrix", 2.4),
)


def run_rows(args: argparse.Namespace) -> list[dict]:
    rows = []
    for i, (scenario, family, delta) in enumerate(ROWS):
        start = time.perf_counter()
        key = jax.random.key(args.seed + i)
        n_bins = args.bins
        if scenario == "shannon":
            rejected = shannon_rates(args, key, family, delta)
            precision = None
        elif scenario == "channel":
            # delta names the channel row's quantiles per class: 0 for --bins, else delta
            n_bins = args.bins if delta == 0.0 else int(delta)
            rejected = channel_rates(args, key, n_bins)
            precision = None
        else:
            losses = grid(family, HEAVY)
            reported = losses
            if scenario == "misreported":
                heavy = np.asarray(HEAVY)
                heavy[2] = 1.0
                reported = grid(family, heavy)
            d = P.precisions(len(HEAVY), delta, args.precision)
            rejected = P.rejection_rates(
                losses, reported, d, tuple(args.prior), args.n, n_datasets=args.datasets,
                n_bootstrap=args.bootstrap, key=key, n_bins=args.bins,
            )  # fmt: skip
            rejected = {test: rejected[test] for test in ("nis", "niac", "nias")}
            precision = [float(d[0]), float(d[-1])]
        row = {"scenario": scenario, "loss": family, "bins": n_bins,
               "delta": delta if scenario not in ("channel", "shannon") else 0.0,
               "lambda": delta if scenario == "shannon" else None, "precision": precision,
               **rates(rejected), "seconds": round(time.perf_counter() - start, 1)}  # fmt: skip
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def table(record: dict) -> str:
    """The Markdown table of the record's rows: rejection rates at level 5% (Monte Carlo SE)."""

    def rate(row: dict, name: str) -> str:
        return f"{100 * row[name]:.1f}% ({100 * row[name + '_se']:.1f})"

    lines = [
        "| scenario | loss | agents | quantiles per class | NIS | NIAC | NIAS "
        "| I coverage (percentile) | I coverage (basic) | I true / mean estimate "
        "| lambda in its interval |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in record["rows"]:
        d = row["precision"]
        if row.get("lambda") is not None:
            shown = f"Shannon, lambda {row['lambda']:g}"
        else:
            shown = "channel 0.7" if d is None else f"d {d[0]:g}→{d[1]:g}"
        coverage = basic = info = covered = ""
        if "coverage" in row:
            coverage, basic = rate(row, "coverage"), rate(row, "basic_coverage")
            truth, mean = row["true_information"][0], row["mean_information"]
            info = f"{truth:.4f} / {', '.join(f'{m:.4f}' for m in mean)}"
        if "lambda_covered" in row:
            covered = rate(row, "lambda_covered")
            info = (f"{', '.join(f'{t:.4f}' for t in row['true_information'])} / "
                    f"{', '.join(f'{m:.4f}' for m in row['mean_information'])}")  # fmt: skip
        lines.append(
            f"| {row['scenario']} | {row['loss']} | {shown} | {row['bins']} | {rate(row, 'nis')} "
            f"| {rate(row, 'niac')} | {rate(row, 'nias')} | {coverage} | {basic} | {info} "
            f"| {covered} |"
        )
    return "\n".join(lines)


def stored_table() -> str:
    """:func:`table` of the stored record."""
    return table(json.loads(RECORD.read_text()))


#: The generated table of docs/results/multiclass_reveal_power/README.md.
TABLES = [
    Table(
        "multiclass_reveal_power rows",
        "docs/results/multiclass_reveal_power/README.md",
        stored_table,
    )
]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=500)
    parser.add_argument("--n", type=int, default=2000, help="observations per data set")
    parser.add_argument("--bootstrap", type=int, default=200, help="paired replicates")
    parser.add_argument("--bins", type=int, default=5, help="confidence quantiles per class")
    parser.add_argument("--precision", type=float, default=1.5, help="the centre precision d")
    parser.add_argument("--prior", type=float, nargs=3, default=[0.4, 0.4, 0.2])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="20 data sets, not recorded")
    parser.add_argument("--out", type=Path, default=None, help=f"record (default {RECORD})")
    args = parser.parse_args(argv)
    if args.quick:
        args.datasets = 20
    return args


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    settings = {k: v for k, v in vars(args).items() if k not in ("quick", "out")}
    rows = run_rows(args)
    record = {
        "study": "multiclass_reveal_power",
        "command": "python -m experiments.studies.multiclass_reveal_power",
        "settings": {
            **settings,
            "models": len(HEAVY),
            "heavy_weights": list(HEAVY),
            "shannon_heavy_weights": list(SHANNON_HEAVY),
            "classes": 3,
            "confidence": 0.95,
        },
        "machine": f"{platform.machine()} {platform.processor()} ({jax.devices()[0].platform})",
        "rows": rows,
    }
    if not args.quick:
        out = args.out or RECORD
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=1) + "\n")
    print(table(record))
    return record


if __name__ == "__main__":
    main()
