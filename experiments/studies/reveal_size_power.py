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

* **misreported** (with ``--misreport``): capacity-constrained agents, but the middle agent
  reports for the class-weight odds ``beta / (1 - beta)`` multiplied by ``--misreport`` instead
  of its own. NIAS fails for that one model among ``K``: NIAS's rate is its power against one
  misreported model. In every other scenario each agent reports optimally, so NIAS's rate is a
  size.

The regimes of the real runs are set by ``--prior``, ``--n``, ``--models`` and the centre
precision ``--precision``: a precise model at a low prior leaves its lowest deciles with a
handful of positives (``min_bin_positives``, the fewest expected in any model's bin in the
population), the sparse bins where the bootstrap's approximation is weakest. ``--strategy``
and ``--min-count`` choose the bins (``iml.revealed.reveal``'s ``quantile`` deciles or its
``adaptive`` bins).

What each test faces is stated, not assumed: every line carries the population margins
(``nis_margin``, ``niac_margin``: ``iml.revealed.nis_check`` and ``niac_check`` of the value
matrix of the agents' population experiments, their signals cut at the deciles of their
distributions as ``reveal`` cuts the scores), positive exactly when the learning model fails.

Each line printed is one scenario as JSON: the settings, ``precision`` (``d`` at the lowest and
at the highest beta), the population margins, ``nis_rejection`` and ``niac_rejection`` (the
fractions of the data sets in which ``reveal`` declares the violation at ``confidence`` 0.95)
and ``nias_rejection`` (NIAS rejected for any model), with their Monte Carlo standard errors,
and the seconds taken (the first scenario's include compilation). Each scenario runs as one
jitted ``lax.map`` over data sets; every scenario draws from the same keys.

Run from the repository root (K = 64 takes some minutes on a laptop CPU)::

    python -m experiments.studies.reveal_size_power --models 4 --n 10000 --bootstrap 200 \\
        --datasets 500
    python -m experiments.studies.reveal_size_power --models 64 --out size_power_64.jsonl
    python -m experiments.studies.reveal_size_power --quick
    python -m experiments.studies.reveal_size_power --models 64 --n 20000 --prior 0.04 \\
        --precision 3 --strategy adaptive --misreport 2

``--regimes FILE`` runs the rows of a JSON list of settings (each a dict of these options) and
writes one line per scenario and row; ``experiments/configs/reveal_regimes.json`` holds the
regimes of the stored runs (digits, PneumoniaMNIST, NIH, Adult, Letter).
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

from experiments.sync_docs import Table
from iml import power as P
from iml import revealed as R

CENTRE_PRECISION = 1.5
DELTAS = (0.0, -0.1, -0.3, 0.1, 0.3)
QUICK = {"n": 2000, "bootstrap": 40, "datasets": 8}
FULL = {"n": 10_000, "bootstrap": 200, "datasets": 500}


def betas_for(n_models: int) -> np.ndarray:
    """The betas of ``n_models`` agents: the paper's four at K = 4, else logit-spaced."""
    if n_models == 4:
        return np.array([0.5, 0.7, 0.9, 0.99], np.float32)
    return (1.0 / (1.0 + np.exp(-np.linspace(0.0, np.log(99.0), n_models)))).astype(np.float32)


def rejection_rates(
    n_models: int,
    n: int,
    n_bootstrap: int,
    n_datasets: int,
    prior: float,
    deltas: tuple[float, ...] = DELTAS,
    seed: int = 0,
    *,
    precision: float = CENTRE_PRECISION,
    strategy: str = "quantile",
    n_bins: int = 10,
    min_count: int | None = None,
    misreport: float | None = None,
    label: str | None = None,
) -> Iterator[dict]:
    """One record per scenario (:func:`iml.power.rejection_rates`): how often ``reveal``
    rejects NIS, NIAC and NIAS over ``n_datasets`` data sets, one scenario per ``delta`` and a
    ``misreported`` one when ``misreport`` is given.

    Every scenario uses the same keys (common random numbers), so differences between scenarios
    come from the precisions, not from the draws.
    """
    betas = betas_for(n_models)
    scenarios = [(delta, 1.0) for delta in deltas]
    if misreport is not None:
        scenarios.append((0.0, float(misreport)))
    for delta, factor in scenarios:
        d = P.precisions(n_models, delta, precision)
        reported = P.misreported_weights(betas, factor).astype(np.float32)
        population = P.gaussian_population(betas, d, prior, n_bins)
        start = time.perf_counter()
        rates = P.rejection_rates(
            jnp.asarray(betas), jnp.asarray(reported), jnp.asarray(d), prior, n,
            n_datasets=n_datasets, n_bootstrap=n_bootstrap, key=jax.random.key(seed),
            n_bins=n_bins, strategy=strategy, min_count=min_count,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        yield {
            **({"regime": label} if label else {}),
            "models": n_models,
            "n": n,
            "prior": prior,
            "bootstrap": n_bootstrap,
            "datasets": n_datasets,
            "seed": seed,
            "strategy": strategy,
            "n_bins": n_bins,
            "min_count": (R.MIN_COUNT if min_count is None else min_count)
            if strategy == "adaptive"
            else None,
            "scenario": P.scenario_name(delta, factor),
            "delta": delta,
            "misreport": factor,
            "precision": [round(float(d[0]), 4), round(float(d[-1]), 4)],
            "nis_margin": float(f"{population.nis_margin:.3g}") + 0.0,  # + 0.0: no -0.0
            "niac_margin": float(f"{population.niac_margin:.3g}") + 0.0,
            "min_bin_positives": round(population.min_positives * n, 1),
            "min_bin_negatives": round(population.min_negatives * n, 1),
            **{
                f"{test}_{what}": value
                for test in ("nis", "niac", "nias")
                for what, value in (
                    ("rejection", float(rates[test].mean())),
                    ("se", round(P.standard_error(rates[test]), 4)),
                )
            },
            **information_coverage(rates, population.information, strategy, factor),
            "seconds": round(seconds, 1),
        }


def information_coverage(
    rates: dict[str, np.ndarray], truth: np.ndarray, strategy: str, factor: float
) -> dict[str, float | None]:
    """How often each agent's ``I_k`` interval covers its population decile information
    (``truth`` ``[K]``), over data sets and agents: the basic (reverse percentile) interval
    ``2 I - [q_high, q_low]`` that ``reveal`` reports (clipped at 0), and the percentile
    interval ``[q_low, q_high]``, its reflection (exact where the lower end was not clipped).
    Only quantile bins of agents reporting for their own loss have that truth (adaptive bins
    merge deciles per data set); ``None`` otherwise."""
    if strategy != "quantile" or factor != 1.0:
        return {"information_truth": None, "information_estimate": None,
                "coverage_percentile": None, "coverage_basic": None}  # fmt: skip
    info, (low, high) = rates["information"], np.moveaxis(rates["information_interval"], 1, 0)
    basic = (low <= truth) & (truth <= high)
    percentile = (2.0 * info - high <= truth) & (truth <= 2.0 * info - low)
    return {
        "information_truth": round(float(np.mean(truth)), 5),
        "information_estimate": round(float(np.mean(info)), 5),
        "coverage_percentile": round(float(np.mean(percentile)), 4),
        "coverage_basic": round(float(np.mean(basic)), 4),
    }


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", type=int, nargs="+", default=[4], help="K, one or more (default 4)")
    p.add_argument("--n", type=int, default=None, help="observations per data set (10,000)")
    p.add_argument("--bootstrap", type=int, default=None, help="replicates per reveal() (200)")
    p.add_argument("--datasets", type=int, default=None, help="data sets per scenario (500)")
    p.add_argument("--prior", type=float, default=0.1, help="P(y = 1) (default 0.1)")
    p.add_argument(
        "--precision", type=float, default=CENTRE_PRECISION, help="centre precision d (1.5)"
    )
    p.add_argument(
        "--deltas",
        type=float,
        nargs="+",
        default=list(DELTAS),
        help="precision differences between the extreme betas (default 0 -0.1 -0.3 0.1 0.3)",
    )
    p.add_argument("--strategy", choices=R.STRATEGIES, default="quantile", help="the bins")
    p.add_argument("--bins", type=int, default=10, help="bins per model (default 10)")
    p.add_argument("--min-count", type=int, default=None, help="adaptive bins' least count")
    p.add_argument(
        "--misreport", type=float, default=None, help="add the misreported scenario (odds factor)"
    )
    p.add_argument("--regimes", type=Path, default=None, help="JSON list of settings to run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="N = 2,000, 40 replicates, 8 data sets")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON lines to FILE")
    args = p.parse_args(argv)
    defaults = QUICK if args.quick else FULL
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in ("n", "bootstrap", "datasets", "bins"):
        if getattr(args, name) < (2 if name in ("bootstrap", "bins") else 1):
            p.error(f"--{name} must be a positive integer (--bootstrap and --bins at least 2)")
    if min(args.models) < 2:
        p.error("--models must be at least 2")
    if not 0.0 < args.prior < 1.0:
        p.error("--prior must lie in (0, 1)")
    if args.precision <= 0:
        p.error("--precision must be positive")
    if args.misreport is not None and args.misreport <= 0:
        p.error("--misreport must be a positive odds factor")
    return args


# The settings a --regimes row may give, with the command line's values as defaults.
_ROW_KEYS = ("label", "models", "n", "prior", "precision", "bootstrap", "datasets", "deltas",
             "strategy", "bins", "min_count", "misreport")  # fmt: skip


def _rows(args: argparse.Namespace) -> list[dict]:
    base = {
        "models": args.models, "n": args.n, "prior": args.prior, "precision": args.precision,
        "bootstrap": args.bootstrap, "datasets": args.datasets, "deltas": args.deltas,
        "strategy": args.strategy, "bins": args.bins, "min_count": args.min_count,
        "misreport": args.misreport, "label": None,
    }  # fmt: skip
    if args.regimes is None:
        return [base]
    rows = json.loads(args.regimes.read_text())
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise SystemExit(f"{args.regimes}: expected a JSON list of settings objects")
    out = []
    for i, row in enumerate(rows):
        unknown = set(row) - set(_ROW_KEYS)
        if unknown:
            raise SystemExit(f"{args.regimes}: row {i} has unknown settings {sorted(unknown)}")
        merged = {**base, **row}
        if args.quick:
            merged.update(QUICK)
        if isinstance(merged["models"], int):
            merged["models"] = [merged["models"]]
        out.append(merged)
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    args = _parse(argv)
    if args.out is not None:
        args.out.write_text("")
    records = []
    for row in _rows(args):
        for n_models in row["models"]:
            stream = rejection_rates(
                n_models, row["n"], row["bootstrap"], row["datasets"], row["prior"],
                tuple(row["deltas"]), args.seed, precision=row["precision"],
                strategy=row["strategy"], n_bins=row["bins"], min_count=row["min_count"],
                misreport=row["misreport"], label=row["label"],
            )  # fmt: skip
            for record in stream:
                line = json.dumps(record)
                print(line, flush=True)
                if args.out is not None:
                    with args.out.open("a") as f:
                        f.write(line + "\n")
                records.append(record)
    return records


RECORD = Path(__file__).resolve().parents[2] / "docs/results/revealed/size_power_regimes.jsonl"


def regimes_table(records: list[dict]) -> str:
    """The Markdown table of the regimes' rejection rates, one row per line of ``--out``."""

    def precision(d: list[float]) -> str:
        return f"{d[0]:g}" if d[0] == d[1] else f"{d[0]:g}→{d[1]:g}"

    def scenario(r: dict) -> str:
        return (
            f"misreported (×{r['misreport']:g})"
            if r["scenario"] == "misreported"
            else r["scenario"]
        )

    lines = [
        "| regime | K | N | prior | d | bins | replicates | data sets | min. positives per bin "
        "| scenario | NIS | NIAC | NIAS |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        bins = "deciles" if r["strategy"] == "quantile" else r["strategy"]
        rates = " | ".join(P.rate_text(r[f"{t}_rejection"], r["datasets"], percent=True)
                           for t in ("nis", "niac", "nias"))  # fmt: skip
        lines.append(
            f"| {r['regime']} | {r['models']} | {r['n']:,} | {r['prior']:g} "
            f"| {precision(r['precision'])} | {bins} | {r['bootstrap']:,} | {r['datasets']} "
            f"| {r['min_bin_positives']:.1f} | {scenario(r)} | {rates} |"
        )
    return "\n".join(lines)


def stored_regimes_table() -> str:
    """:func:`regimes_table` of the stored record (``docs/results/revealed``)."""
    return regimes_table([json.loads(line) for line in RECORD.read_text().splitlines() if line])


#: The generated tables of docs/results/revealed/README.md (:mod:`experiments.sync_docs`).
TABLES = [
    Table("reveal_size_power regimes", "docs/results/revealed/README.md", stored_regimes_table)
]


if __name__ == "__main__":
    main()
