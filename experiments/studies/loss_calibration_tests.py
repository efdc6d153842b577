"""Size and power of four candidate tests of loss calibration (Definition 2), by simulation.

Each regime row draws one set of scores (a Gaussian agent of precision ``d`` at prior ``pi``
on ``N`` observations: ``x ~ N(d y, 1)``, calibrated posterior ``g(x)``, raw score
``a = c^beta(g)`` of a model trained with the beta-weighted log loss), then simulates label
sets *conditional on those scores*, as every candidate's null is conditional on the scores:
under H0 ``y ~ Bernoulli(g)`` (the scores are loss-calibrated, Proposition 4); under an
alternative ``y ~ Bernoulli(q)`` with ``q`` one of

* ``odds x1.5``, ``odds x2``, ``odds x0.5``: ``logit q = logit g + log r`` everywhere (for the
  beta-weighted log loss, scores calibrated for the beta whose odds differ by ``r``);
* ``top decile x2``: ``logit q = logit g + log 2`` in the top decile of the scores only (the
  under-confident top decile of the default digits run);
* ``neighbour in 64``: odds x1.157, the neighbouring beta of the 64-beta grid from 0.01 to
  0.99 (equal steps in logit).

The candidates, each at level 0.05 on the same label sets:

* ``loss_gap``: the loss of each bin's scores minus that of the best single score (Definition
  2's wholesale switch) on 10 quantile bins, summed (the tables' former statistic); p-value
  from a parametric bootstrap null of ``--null`` H0 label sets;
* ``binomial_holm``: each bin's positives against the exact binomial, Holm's step-down over
  the bins, on the adaptive bins (10 quantile bins merged until each holds at least 10 expected
  positives and negatives): the former NIAS;
* ``hosmer_lemeshow``: ``T = sum_s (O_s - E_s)^2 / V_s`` (observed and expected positives, the
  null variance ``sum g (1 - g)``) on the adaptive bins, against chi-square with ``S`` degrees
  of freedom (the posteriors are given, not fitted); :func:`iml.calibration.calibration_test`;
* ``hosmer_lemeshow_m5``: the same with bins merged to 5 expected positives and negatives;
* ``hosmer_lemeshow_q10``: the same statistic on the 10 quantile bins without merging;
* ``smooth_ece``: the smooth ECE of the corrected scores (Blasiok & Nakkiran 2023) with a
  parametric bootstrap null.

A bootstrap null is drawn once per row and shared by its data sets, which is what each data
set's own parametric bootstrap would draw (the scores, hence the null, are the same). A row
with fewer than two adaptive bins leaves the tests on them "not testable"; the record gives
the fraction testable and rates over all data sets (a not-testable set does not reject).

Run from the repository root (about ten minutes on 2 cores)::

    python -m experiments.studies.loss_calibration_tests \\
        --out docs/results/loss_calibration_tests/rows.jsonl
    python -m experiments.studies.loss_calibration_tests --quick
    python -m experiments.studies.loss_calibration_tests \\
        --render docs/results/loss_calibration_tests/rows.jsonl   # the README's tables

Each printed line is one regime row as JSON: its settings, the number of adaptive bins, and
per scenario and candidate the rejection rate and its Monte Carlo standard error.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc
from scipy.special import expit, logit
from scipy.stats import chi2

from experiments.benchmarks._harness import machine
from iml.calibration import calibration_test, holm_adjusted, smooth_ece
from iml.calibration.binning import assign_bins, bin_edges
from iml.calibration.loss_calibration import loss_matrices, loss_reduction, loss_sums
from iml.power import rate_text
from iml.spec import loss_spec

CANDIDATES = (
    "loss_gap",
    "binomial_holm",
    "hosmer_lemeshow",
    "hosmer_lemeshow_m5",
    "hosmer_lemeshow_q10",
    "smooth_ece",
)
SCENARIOS = {  # name -> (log odds shift, top decile only)
    "null": (0.0, False),
    "odds x1.5": (float(np.log(1.5)), False),
    "odds x2": (float(np.log(2.0)), False),
    "odds x0.5": (float(np.log(0.5)), False),
    "top decile x2": (float(np.log(2.0)), True),
    "neighbour in 64": (float((logit(0.99) - logit(0.01)) / 63), False),
}
# The stored runs' regimes (N, prior, precision d fitted to their information) and sparse ones.
REGIMES = [
    {"label": "digits", "n": 1797, "prior": 0.101, "precision": 2.78},
    {"label": "pneumoniamnist", "n": 5856, "prior": 0.73, "precision": 2.93},
    {"label": "letter", "n": 20000, "prior": 0.038, "precision": 1.47},
    {"label": "adult", "n": 48842, "prior": 0.239, "precision": 1.84},
    {"label": "chestxray14 pneumonia", "n": 112120, "prior": 0.0128, "precision": 1.0},
    {"label": "balanced", "n": 10000, "prior": 0.5, "precision": 1.5},
    {"label": "sparse", "n": 500, "prior": 0.5, "precision": 1.5},
    {"label": "sparse", "n": 500, "prior": 0.05, "precision": 2.0},
    {"label": "sparse", "n": 500, "prior": 0.01, "precision": 2.0},
]
LEVEL = 0.05


def simulate_scores(n: int, prior: float, precision: float, seed: int) -> np.ndarray:
    """Calibrated posteriors ``g`` of a Gaussian agent: ``x ~ N(d y, 1)``, ``y ~ B(prior)``."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < prior
    x = rng.normal(size=n) + precision * y
    return expit(logit(prior) + precision * x - 0.5 * precision**2).astype(np.float32)


def adaptive_bins(g: np.ndarray, bins: np.ndarray, n_bins: int, m: float) -> np.ndarray:
    """Quantile bins merged in order until each holds ``m`` expected positives and negatives."""
    pos = np.bincount(bins, g, n_bins)
    neg = np.bincount(bins, 1.0 - g, n_bins)
    group, p, q, groups = 0, 0.0, 0.0, []
    for s in range(n_bins):
        p, q = p + pos[s], q + neg[s]
        groups.append(group)
        if p >= m and q >= m:
            group, p, q = group + 1, 0.0, 0.0
    groups = np.asarray(groups)
    last = groups[-1]
    if last > 0 and (p > 0 or q > 0) and not (p >= m and q >= m):
        groups[groups == last] = last - 1  # a short last run joins the bin below
    return groups[bins]


def binomial_two_sided(observed, n, expected):
    """``min(1, 2 min(P(X <= O), P(X >= O)))`` for ``X ~ Binomial(n, E / n)``: each bin's p-value
    of the per-bin binomial candidate (Hoeffding's bound makes it valid for a sum of unequal
    Bernoullis)."""
    q = jnp.clip(expected / jnp.maximum(n, 1.0), 0.0, 1.0)
    o = jnp.clip(jnp.round(observed), 0.0, n)
    lower = jnp.where(o >= n, 1.0, betainc(jnp.maximum(n - o, 1.0), o + 1.0, 1.0 - q))
    upper = jnp.where(o <= 0, 1.0, betainc(jnp.maximum(o, 1.0), n - o + 1.0, q))
    return jnp.minimum(1.0, 2.0 * jnp.minimum(lower, upper))


def one_hot(bins: np.ndarray, n: int) -> jnp.ndarray:
    return jax.nn.one_hot(jnp.asarray(bins), n, dtype=jnp.float32)


def labels(key, q: np.ndarray, count: int) -> jnp.ndarray:
    return (jax.random.uniform(key, (count, q.size)) < jnp.asarray(q)).astype(jnp.float32)


def row(regime: dict, datasets: int, n_null: int, beta: float, seed: int) -> dict:
    g = simulate_scores(regime["n"], regime["prior"], regime["precision"], seed)
    spec = loss_spec(beta)
    a = np.asarray(spec.optimal_score(jnp.asarray(g)), np.float32)
    # Deciles of the raw scores for the loss gap (as the tables binned them), of the corrected
    # scores for the others (as the library's test bins them; the same order, up to ties).
    a_bins = np.asarray(assign_bins(jnp.asarray(a), bin_edges(jnp.asarray(a), 10, "quantile")))
    q_bins = np.asarray(assign_bins(jnp.asarray(g), bin_edges(jnp.asarray(g), 10, "quantile")))
    merged = adaptive_bins(g.astype(np.float64), q_bins, 10, 10.0)
    merged5 = adaptive_bins(g.astype(np.float64), q_bins, 10, 5.0)
    n_merged, n_merged5 = int(merged.max()) + 1, int(merged5.max()) + 1
    m_q, m_a, m_5 = one_hot(q_bins, 10), one_hot(merged, n_merged), one_hot(merged5, n_merged5)
    gj = jnp.asarray(g)
    top = g >= np.quantile(g, 0.9)
    matrices = loss_matrices(
        jnp.asarray(a_bins), 10, spec.loss(jnp.asarray(a), 1.0), spec.loss(jnp.asarray(a), 0.0)
    )

    @jax.jit
    def gap(y):
        sums = loss_sums(jnp.ones_like(y), y, matrices)
        lp = lambda c: spec.loss(c, jnp.ones_like(c))  # noqa: E731
        ln = lambda c: spec.loss(c, jnp.zeros_like(c))  # noqa: E731
        return jnp.sum(loss_reduction(sums, spec.optimal_score, lp, ln)[0], -1) / y.shape[-1]

    @jax.jit
    def smooth(y):
        return jax.lax.map(lambda yy: smooth_ece(gj, yy).ece, y, batch_size=16)

    def hl(y, m):
        o, e, v = y @ m, gj @ m, (gj * (1 - gj)) @ m
        return jnp.sum((o - e) ** 2 / v, -1), m.shape[1]

    def binomial(y, m):
        o, e, n = y @ m, gj @ m, jnp.ones_like(gj) @ m
        p = binomial_two_sided(o, jnp.broadcast_to(n, o.shape), jnp.broadcast_to(e, o.shape))
        p = jnp.where(n > 0, p, jnp.nan)  # empty bins are not tests
        return jnp.nanmin(jax.vmap(holm_adjusted)(p), -1)

    key = jax.random.key(seed)
    null_key, key = jax.random.split(key)
    null_y = labels(null_key, g, n_null)
    null_gap, null_smooth = np.asarray(gap(null_y)), np.asarray(smooth(null_y))
    out = {**regime, "beta": beta, "datasets": datasets, "null_draws": n_null,
           "adaptive_bins": n_merged, "adaptive_bins_m5": n_merged5, "min_expected_q10": float(min(
               (gj @ m_q).min(), ((1 - gj) @ m_q).min())), "rates": {}}  # fmt: skip
    seconds = {c: 0.0 for c in CANDIDATES}
    for name, (shift, top_only) in SCENARIOS.items():
        q = expit(logit(g.astype(np.float64)) + np.where(top | (not top_only), shift, 0.0))
        key, k = jax.random.split(key)
        y = labels(k, q, datasets)
        p = {}
        t0 = time.perf_counter()
        stat = np.asarray(gap(y))
        p["loss_gap"] = (1 + (null_gap[None] >= stat[:, None]).sum(1)) / (1 + n_null)
        t1 = time.perf_counter()
        p["binomial_holm"] = np.asarray(binomial(y, m_a)) if n_merged >= 2 else np.ones(datasets)
        t2 = time.perf_counter()
        t, dof = hl(y, m_a)
        p["hosmer_lemeshow"] = chi2.sf(np.asarray(t), dof) if n_merged >= 2 else np.ones(datasets)
        t, dof = hl(y, m_5)
        p["hosmer_lemeshow_m5"] = (
            chi2.sf(np.asarray(t), dof) if n_merged5 >= 2 else np.ones(datasets)
        )
        t3 = time.perf_counter()
        t, dof = hl(y, m_q)
        p["hosmer_lemeshow_q10"] = chi2.sf(np.asarray(t), dof)
        t4 = time.perf_counter()
        stat = np.asarray(smooth(y))
        p["smooth_ece"] = (1 + (null_smooth[None] >= stat[:, None]).sum(1)) / (1 + n_null)
        t5 = time.perf_counter()
        timed = (
            "loss_gap",
            "binomial_holm",
            "hosmer_lemeshow",
            "hosmer_lemeshow_q10",
            "smooth_ece",
        )
        for c, dt in zip(timed, np.diff([t0, t1, t2, t3, t4, t5]), strict=True):
            seconds[c] += float(dt)
        rates = {}
        for c in CANDIDATES:
            rate = float(np.mean(p[c] <= LEVEL))
            rates[c] = {"rate": rate, "se": float(np.sqrt(rate * (1 - rate) / datasets))}
        out["rates"][name] = rates
    # The library's test on the first H0 data set: the study's statistic is the shipped one.
    check = calibration_test(g, np.asarray(null_y[0]), n_bins=10, min_count=10)
    t, dof = hl(null_y[:1], m_a)
    out["library_agrees"] = bool(
        int(check.n_bins) == n_merged
        and np.isclose(float(check.statistic), float(t[0]), rtol=1e-3, atol=1e-2)
    )
    out["seconds"] = seconds
    return out


SHORT = {
    "loss_gap": "loss gap",
    "binomial_holm": "binomial, Holm",
    "hosmer_lemeshow": "HL, m = 10",
    "hosmer_lemeshow_m5": "HL, m = 5",
    "hosmer_lemeshow_q10": "HL, deciles",
    "smooth_ece": "smooth ECE",
}


def render(rows: list[dict]) -> str:
    """The record as Markdown: per regime row, each scenario's rejection rate by candidate
    (size under ``null``, power otherwise), and the bins the merged candidates were left with."""
    lines = []
    for r in rows:
        lines += [
            f"**{r['label']}**: N = {r['n']:,}, prior {r['prior']}, precision d = "
            f"{r['precision']}; adaptive bins: {r['adaptive_bins']} (m = 10), "
            f"{r['adaptive_bins_m5']} (m = 5); {r['datasets']} data sets per scenario",
            "",
            "| scenario | " + " | ".join(SHORT[c] for c in CANDIDATES) + " |",
            "|---" * (len(CANDIDATES) + 1) + "|",
        ]
        for scenario, rates in r["rates"].items():
            cells = [rate_text(rates[c]["rate"], r["datasets"]) for c in CANDIDATES]
            lines.append(f"| {scenario} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--datasets", type=int, default=500, help="label sets per scenario and row")
    p.add_argument("--null", type=int, default=1000, help="H0 draws of the bootstrap nulls")
    p.add_argument("--beta", type=float, default=0.9, help="the class weight of the raw scores")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="two small rows, 50 data sets")
    p.add_argument("--out", type=Path, default=None, help="append each row's JSON line here")
    p.add_argument("--render", type=Path, default=None, help="print a record's tables and stop")
    args = p.parse_args(argv)
    if args.render is not None:
        print(render([json.loads(line) for line in args.render.read_text().splitlines()]))
        return 0
    regimes, datasets, n_null = REGIMES, args.datasets, args.null
    if args.quick:
        regimes, datasets, n_null = [REGIMES[0], REGIMES[-2]], 50, 100
    for i, regime in enumerate(regimes):
        out = row(regime, datasets, n_null, args.beta, args.seed + i)
        out.update(machine())
        line = json.dumps(out)
        print(line, flush=True)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with args.out.open("a") as f:
                f.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
