# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · What the machine learns: revealed experiments across class weights
#
# The paper separates *what* a model learned -- its statistical experiment: the signals it
# forms and the Bayesian posteriors they carry -- from *how* it reports, the optimal scoring
# rule $c^\beta$ (Proposition 2). Notebooks 01-04 are about the second half. This one is about
# the first: does reweighting the loss change what a network learns, and which economic model of
# learning explains how? It follows Caplin & Dean (2015, *AER*) and Caplin, Martin & Marx (2025,
# *Modeling machine learning: a cognitive economic approach*, *JET*), with `iml.revealed`.
#
# From the scores of $K$ models trained under losses $L_1, \dots, L_K$ (here $\beta_k$-weighted
# log losses, eq. 7) on the same labelled observations:
#
# * **revealed experiment**: model $k$'s scores, cut into deciles, are its signals $s$, with
#   probabilities $P_k(s)$ and posteriors $\gamma_{k,s} = P_k(y = 1 \mid s)$; the bins of raw and
#   loss-corrected scores coincide, because $c^\beta$ is increasing;
# * **value matrix** $G[k, j] = -\sum_s P_j(s)\, \ell^*_k(\gamma_{j,s})$, with
#   $\ell^*_k(\gamma) = \min_a [\gamma L_k(a, 1) + (1 - \gamma) L_k(a, 0)]$: the value, in
#   decision problem $k$, of the experiment learned under loss $j$, re-scored optimally for $k$;
# * **mutual information** $I_k$ (nats): how much model $k$ learned about the label;
# * **NIS** (no improving switches): *capacity-constrained* learning -- one feasible set of
#   experiments, whatever the loss -- implies $G[k, k] \ge G[k, j]$ for all $j, k$;
# * **NIAC** (no improving attention cycles): *costly* learning -- any cost of experiments --
#   implies $\sum_i G[k_i, k_i] \ge \sum_i G[k_i, k_{i+1}]$ around every cycle of models;
# * **revealed costs**: costly learning implies $C_k - C_j \le G[k, k] - G[k, j]$, which bounds
#   each cost relative to a reference model; with Shannon cost $C_k = \lambda I_k$, the same
#   inequalities give an interval for $\lambda$.
#
# Sections: (1) a learner with Shannon cost, solved exactly; (2) simulated capacity-constrained
# and costly agents, through `reveal`'s bootstrap tests; (3) the stored digits run; (4) models of
# three classes.

# %%
import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

import iml
from iml import revealed as R
from iml.power import rate_text

# Paths below are relative to the repository root; Jupyter starts the kernel in notebooks/.
if not Path("docs/results").is_dir() and Path("../docs/results").is_dir():
    os.chdir("..")
RUN = Path("docs/results/reproduce_digits")

BETAS = np.array([0.5, 0.7, 0.9, 0.99], np.float32)
np.set_printoptions(precision=4, suppress=True)


def with_intervals(values, interval, digits=3):
    """``value [low, high]`` for each value and its ``[2, K]`` interval."""
    return ", ".join(
        f"{v:.{digits}f} [{a:.{digits}f}, {b:.{digits}f}]"
        for v, a, b in zip(values, *interval, strict=True)
    )


def signal_count(rep):
    """The signals each model keeps (bins or cells with observations), as ``S`` or ``S1-S2``."""
    counts = (np.asarray(rep.experiments.probability) > 0).sum(axis=1)
    low, high = int(counts.min()), int(counts.max())
    return f"{low}" if low == high else f"{low}-{high}"


def describe_test(name, t, signals):
    """One line on a bootstrap margin test (``report.nis_test`` or ``report.niac_test``): its
    margin, lower bound and p-value, its verdict at the 5% level and the signals it ran on."""
    return (
        f"{name:4s} margin {float(t.margin):+.5f}, lower bound {float(t.lower_bound):+.5f}, "
        f"p = {float(t.p_value):.3f}: {'rejected' if bool(t.violated) else 'not rejected'} "
        f"({signals} signals per model)"
    )


def binary_entropy(g):
    g = np.asarray(g, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.nan_to_num(g * np.log(g)) - np.nan_to_num((1 - g) * np.log1p(-g))


# %% [markdown]
# ## 1. A learner with Shannon cost
#
# A *Shannon agent* pays $\lambda$ per nat of mutual information. With prior $\pi$, it chooses a
# distribution of posteriors with mean $\pi$ (Bayes plausibility) to maximise
# $E[-\ell^*(\gamma) + \lambda H(\gamma)]$: its value is the **concave envelope** of
# $N(\gamma) = -\ell^*(\gamma) + \lambda H(\gamma)$ at $\pi$, and its posteriors are where the
# envelope's chord through $\pi$ touches $N$. Under the $\beta$-weighted log loss,
# $\gamma(1 - \gamma) N''(\gamma) = \beta(1 - \beta)/Z(\gamma) - \lambda$ with
# $Z = \beta\gamma + (1 - \beta)(1 - \gamma)$, so $N$ is convex where $Z$ is small and concave
# elsewhere, and two posteriors suffice. `R.shannon_agent` finds them.
#
# At $\pi = 0.05$ and $\lambda = 0.3$ the agents at $\beta = 0.5$ and $0.7$ learn the label
# outright, and those at $0.9$ and $0.99$ learn less: at $\beta = 0.99$ the loss puts weight
# $0.99 \pi + 0.01 (1 - \pi) \approx 0.06$ on the problem, against $0.5$ at $\beta = 0.5$, so
# information is worth less.

# %%
PI, LAM = 0.05, 0.3
agents = R.shannon_agent(BETAS, PI, LAM)
info = np.asarray(R.mutual_information(agents))
for beta, p, g, i in zip(BETAS, agents.probability, agents.posterior, info, strict=True):
    print(
        f"beta={beta:<5g} posteriors {np.asarray(g).round(3)} with probabilities "
        f"{np.asarray(p).round(4)}, I = {i:.3f} nats"
    )
np.testing.assert_allclose(agents.posterior[:, 0], 0.0, atol=1e-6)
np.testing.assert_allclose(agents.posterior[:, 1], [1.0, 1.0, 0.578, 0.068], atol=1e-3)
np.testing.assert_allclose(info, [0.199, 0.199, 0.140, 0.016], atol=1e-3)

G = np.asarray(R.value_matrix(agents, BETAS))
nis, niac = R.nis_check(G), R.niac_check(G)
lam = R.shannon_lambda_interval(G, info)
print("G[k, j] - G[k, k] (row: decision problem, column: experiment):")
print(G - np.diag(G)[:, None])
print(f"NIS margin {float(nis.margin):+.4f}: violated where {np.argwhere(nis.violations).tolist()}")
print(f"NIAC margin {float(niac.margin) + 0.0:+.1e} (minimum cycle mean; <= 0: NIAC satisfied)")
print(f"lambda interval [{float(lam.lower):.3f}, {float(lam.upper):.3f}] (true lambda {LAM})")
assert float(nis.margin) > 0.02 and bool(nis.violations[3, 0])  # NIS violated
assert float(niac.margin) <= 1e-7 and not bool(niac.negative_cycle)  # NIAC satisfied
assert abs(float(lam.lower) - 0.220) < 2e-3 and abs(float(lam.upper) - 0.428) < 2e-3
assert float(lam.lower) < LAM < float(lam.upper)

# %% [markdown]
# These are the agents' exact experiments, with no sampling, so the checks are exact. NIS is
# violated: the $\beta = 0.99$ agent's own problem would be better served by the $\beta = 0.5$
# agent's (perfectly informative) experiment -- it chose to learn less because learning costs,
# not because it could not. NIAC is satisfied, as it must be for any costly learner, and the
# revealed $\lambda$ interval contains the true $\lambda = 0.3$.
#
# The figure shows the construction for $\beta = 0.9$: $N$, its concave envelope (the upper
# hull of $N$ on a fine grid, computed here independently of `shannon_agent`), and the agent's
# two posteriors, where the chord through $\pi$ touches $N$.


# %%
def concave_envelope(x, y):
    """The least concave function above the points ``(x, y)`` (``x`` increasing): upper hull."""
    hull = []
    for i in range(len(x)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (y[b] - y[a]) * (x[i] - x[a]) <= (y[i] - y[a]) * (x[b] - x[a]):
                hull.pop()  # b lies on or below the chord from a to i
            else:
                break
        hull.append(i)
    return np.interp(x, x[hull], y[hull])


k = 2  # beta = 0.9
grid = np.linspace(0.0, 1.0, 4001)
spec = iml.loss_spec(float(BETAS[k]))
N = -np.asarray(spec.minimised_expected_loss(jnp.asarray(grid)), np.float64)
N += LAM * binary_entropy(grid)
envelope = concave_envelope(grid, N)
g_low, g_high = np.asarray(agents.posterior[k], np.float64)
p_high = float(agents.probability[k, 1])


def N_at(g):
    loss = float(spec.minimised_expected_loss(jnp.asarray(g, jnp.float32)))
    return -loss + LAM * float(binary_entropy(g))


chord_at_prior = (1 - p_high) * N_at(g_low) + p_high * N_at(g_high)
print(
    f"beta={BETAS[k]:g}: envelope at pi {np.interp(PI, grid, envelope):.5f}, "
    f"the agent's value {chord_at_prior:.5f}"
)
assert abs(np.interp(PI, grid, envelope) - chord_at_prior) < 1e-4

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for ax, xmax in zip(axes, (1.0, 0.7), strict=True):
    shown = grid <= xmax
    ax.plot(grid[shown], N[shown], label=r"$N(\gamma) = -\ell^*(\gamma) + \lambda H(\gamma)$")
    ax.plot(grid[shown], envelope[shown], ls="--", label="concave envelope")
    ax.plot([g_low, g_high], [N_at(g_low), N_at(g_high)], "o", color="C3", label="posteriors")
    ax.axvline(PI, color="gray", lw=0.8, ls=":", label=rf"prior $\pi$ = {PI}")
    ax.set(xlabel=r"posterior $\gamma$", xlim=(0, xmax))
axes[0].set(ylabel=r"$N(\gamma)$", title=rf"$\beta$ = {BETAS[k]:g}, $\lambda$ = {LAM}")
axes[1].set(title="near the prior")
axes[0].legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. Capacity-constrained against costly agents
#
# Now agents who see Gaussian signals (`R.simulate_gaussian_agents`): agent $k$ observes
# $x_k \sim N(d_k y, 1)$, forms its posterior and reports $c^{\beta_k}$ of it; $N = 10{,}000$
# observations at $\pi = 0.1$.
#
# * **Capacity-constrained**: the same precision $d_k = 1.5$ for every $\beta$ -- one experiment,
#   whatever the loss. By construction NIS and NIAC are satisfied for these agents.
# * **Costly**: each agent buys the precision that maximises its value minus a known cost
#   $\kappa d^2$ ($\kappa = 0.003$). Its value of precision $V_k(d)$ is computed below by
#   quadrature. Less is at stake at high $\beta$, so the $\beta = 0.99$ agent buys far less
#   precision. By construction NIS is violated and NIAC satisfied for these agents.
#
# `R.reveal` estimates everything with a paired bootstrap (the same resample for every model) and
# declares NIS or NIAC violated only when the bootstrap lower bound of its margin is above zero.
# The critical value comes from the recentred bootstrap at the least-favourable null (every
# inequality binding), so that the test keeps its size however many pairs or cycles it compares.
# On any one data set, a test at the 5% level still rejects a true learning model about one
# time in twenty; `python -m experiments.studies.reveal_size_power` measures how often, at
# K = 4 and K = 64. The verdicts printed below are `reveal`'s, each with its p-value and the
# signals it ran on; their power against these agents is not computed here.

# %%
PRIOR, N_OBS, KAPPA = 0.1, 10_000, 0.003


def gaussian_value(beta, precisions, prior):
    """``V(d) = -E[l*(gamma(x))]`` for ``x ~ N(d y, 1)``, by quadrature on a fine grid of ``x``."""
    x = np.linspace(-10.0, 14.0, 4001)[:, None]
    density = [np.exp(-0.5 * (x - m) ** 2) / np.sqrt(2 * np.pi) for m in (0.0, precisions)]
    mixture = (1 - prior) * density[0] + prior * density[1]
    gamma = prior * density[1] / mixture
    loss = np.asarray(iml.loss_spec(float(beta)).minimised_expected_loss(jnp.asarray(gamma)))
    return -(mixture * loss).sum(0) * (x[1, 0] - x[0, 0])


d_grid = np.linspace(0.0, 4.0, 401)
values = np.stack([gaussian_value(b, d_grid, PRIOR) for b in BETAS])
costly_d = d_grid[np.argmax(values - KAPPA * d_grid**2, axis=1)]
precisions = {"capacity-constrained": np.full(4, 1.5), "costly": costly_d}
print(f"costly precisions {costly_d} for betas {BETAS}")
assert np.all(np.diff(costly_d) <= 0) and costly_d[-1] < costly_d[0] - 1

# The same draws for both kinds of agent: only the precisions differ. Decile bins here: the
# revealed cost bounds bound the costs of the *binned* experiments, and deciles keep them close
# to the agents' own (the default adaptive bins merge the sparse lowest deciles, a coarser view).
key_data, key_boot = jax.random.split(jax.random.key(1))
reports = {}
for name, d in precisions.items():
    scores, labels = R.simulate_gaussian_agents(key_data, BETAS, d, PRIOR, N_OBS)
    reports[name] = jax.device_get(
        R.reveal(scores, labels, BETAS, 10, "quantile", n_bootstrap=300, key=key_boot, nias=False)
    )

for name, rep in reports.items():
    print(f"{name}:")
    print(" ", describe_test("NIS", rep.nis_test, signal_count(rep)))
    print(" ", describe_test("NIAC", rep.niac_test, signal_count(rep)))
    print("  I_k", with_intervals(rep.information, rep.information_interval))

capacity, costly = reports["capacity-constrained"], reports["costly"]
assert not capacity.nis_test.violated and not capacity.niac_test.violated
assert costly.nis_test.violated and not costly.niac_test.violated
# Equal precision: these agents were built to learn the same, and every marginal I_k interval
# overlaps every other. That checks the simulation only: overlapping marginal intervals of paired
# estimates do not test a difference.
assert capacity.information_interval[0].max() <= capacity.information_interval[1].min()

# %% [markdown]
# The value matrices relative to their diagonals, $G[k, j] - G[k, k]$: a positive entry says that
# problem $k$ is better served by model $j$'s experiment, re-scored for $k$, than by its own --
# a violation of NIS. Pairs whose simultaneous bootstrap lower bound is above zero
# (`report.nis_pairs`) are boxed. Each panel has its own colour scale.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
gains = {
    name: rep.value_matrix - np.diag(rep.value_matrix)[:, None] for name, rep in reports.items()
}
for ax, (name, gain) in zip(axes, gains.items(), strict=True):
    limit = np.abs(gain).max()
    image = ax.imshow(gain, cmap="RdBu_r", vmin=-limit, vmax=limit)
    for (row, col), value in np.ndenumerate(gain):
        ax.text(col, row, f"{value:+.4f}", ha="center", va="center", fontsize=8)
        if reports[name].nis_pairs[row, col]:
            ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, lw=2, ec="k"))
    ticks = [f"{b:g}" for b in BETAS]
    ax.set(xticks=range(4), yticks=range(4), xticklabels=ticks, yticklabels=ticks)
    ax.set(xlabel=r"experiment of $\beta_j$", ylabel=r"decision problem $\beta_k$", title=name)
    fig.colorbar(image, ax=ax, label=r"$G[k, j] - G[k, k]$", shrink=0.85)
fig.tight_layout()
plt.show()
assert not capacity.nis_pairs.any() and costly.nis_pairs[3, 0]

# %% [markdown]
# What each model learned, $I_k$ against $\beta$ with 95% bootstrap intervals, and, for the
# costly agents, the revealed bounds on each cost relative to the $\beta = 0.5$ model against the
# true cost differences $\kappa (d_k^2 - d_1^2)$. Where a cycle nearly binds -- the $\beta = 0.5$
# and $0.7$ agents buy almost the same precision -- the revealed interval shrinks to nearly a
# point, and that point carries the sampling noise of $G$; the bootstrap intervals of its ends
# (the bars) are what to compare with the truth.

# %%
true_costs = KAPPA * (costly_d**2 - costly_d[0] ** 2)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for offset, (name, rep) in zip((-0.004, 0.004), reports.items(), strict=True):
    lo, hi = rep.information_interval
    axes[0].errorbar(
        BETAS + offset,
        rep.information,
        yerr=[rep.information - lo, hi - rep.information],
        fmt="o-",
        capsize=3,
        label=name,
    )
axes[0].set(xlabel=r"$\beta$", ylabel=r"$I_k$ (nats)", title="what each model learned")
axes[0].legend(fontsize=8)
low, high = costly.cost_lower_interval[0], costly.cost_upper_interval[1]
axes[1].vlines(BETAS, low, high, color="C1", lw=6, alpha=0.4, label="revealed bounds (95%)")
axes[1].plot(BETAS, true_costs, "kx", label=r"true $C_k - C_1$")
axes[1].set(xlabel=r"$\beta$", ylabel="cost relative to $\\beta$ = 0.5", title="costly agents")
axes[1].legend(fontsize=8)
fig.tight_layout()
plt.show()
print("true cost differences ", true_costs)
print("revealed bounds, point", costly.cost_bounds.lower, costly.cost_bounds.upper)
assert np.all((low - 1e-4 <= true_costs) & (true_costs <= high + 1e-4))

# %% [markdown]
# ## 3. A stored run: the digits reproduction
#
# `iml reproduce` (the README's default experiment) trained small DenseNets on scikit-learn's
# digits, "8" against the rest at 4 px, with $\beta = 0.5, 0.9, 0.99$; `ensemble_scores.npz` in
# `docs/results/reproduce_digits/` holds each observation's ensemble score per $\beta$ (`scores`
# `[3, N]`), the members behind it (`sizes`) and the `labels`. The three models are compared on
# the observations that every $\beta$ scored. `reveal` also runs NIAS here: is each model's
# reporting optimal for its own revealed posteriors (loss calibration, Definition 2)?

# %%
with np.load(RUN / "ensemble_scores.npz") as npz:
    stored = dict(npz)
keep = np.all(stored["sizes"] > 0, axis=0)
run_betas = np.asarray(stored["betas"], np.float32)
# float32 sigmoids round to exactly 0 or 1; clip as the run's report does
run_scores = np.clip(stored["scores"][:, keep], 1e-7, 1 - 1e-7)
run_labels = stored["labels"][keep]
print(
    f"{keep.sum():,} of {keep.size:,} observations scored by every beta {run_betas}, "
    f"{run_labels.mean():.1%} positive"
)
N_REPLICATES = 1000
run = jax.device_get(
    R.reveal(run_scores, run_labels, run_betas, n_bootstrap=N_REPLICATES, key=jax.random.key(0))
)
run_signals = signal_count(run)
# The adaptive bins merge the deciles alike for every model; print only the signals they keep.
kept = np.asarray(run.experiments.probability).sum(axis=0) > 0
positives_per_signal = np.round(
    run.experiments.posterior * run.experiments.probability * keep.sum()
)[:, kept]
print(f"positives per signal, the {kept.sum()} signals left after merging (rows: beta):")
print(positives_per_signal.astype(int))
print("I_k", with_intervals(run.information, run.information_interval))
print("G[k, j] - G[k, k]:")
print(run.value_matrix - np.diag(run.value_matrix)[:, None])
print(describe_test("NIS", run.nis_test, run_signals))
print(describe_test("NIAC", run.niac_test, run_signals))
print("NIAS p-values", run.nias.p_value, "violated", run.nias.violated)
print("cost bounds", run.cost_bounds.lower, run.cost_bounds.upper)
print("lambda", run.shannon, run.lambda_lower_interval, run.lambda_upper_interval)
assert run.value_matrix.shape == (3, 3) and np.all(np.isfinite(run.value_matrix))
assert np.all(run.information_interval[0] <= run.information)
assert np.all(run.information <= run.information_interval[1])

# `reveal` gives marginal intervals of I_k; the models are scored on the same observations, so a
# difference needs the paired replicates. `python -m experiments.studies.revealed_information`
# redraws `iml reveal`'s replicates of this run (same key, same bins) and stores each difference
# with the percentile interval of its replicates. Its replicates are this report's: the basic
# interval printed above is 2 I_k minus the record's percentile interval, reversed.
DIFFERENCES = Path("docs/results/revealed/information_differences.json")
differences = next(r for r in json.loads(DIFFERENCES.read_text()) if r["run"] == "digits")
np.testing.assert_allclose(differences["information"], run.information, atol=1e-4)
np.testing.assert_allclose(
    2 * run.information - np.asarray(differences["information_interval"])[::-1],
    run.information_interval,
    atol=2e-3,
)
print(f"paired differences ({DIFFERENCES}):")
for pair in differences["differences"]:
    lo, hi = pair["interval"]
    print(
        f"  I({pair['first']:g}) - I({pair['second']:g}) = {pair['difference']:+.4f} "
        f"[{lo:+.4f}, {hi:+.4f}]"
    )

# The simulated size and power of `iml reveal`'s tests at this run's N, K and prior are in the
# run's `iml reveal` record; its NIS and NIAC tests are the ones above.
REVEALED = Path("docs/results/revealed/reproduce_digits/revealed.json")
revealed_record = json.loads(REVEALED.read_text())
for name, t in (("nis", run.nis_test), ("niac", run.niac_test)):
    assert abs(revealed_record[name]["p_value"] - float(t.p_value)) < 0.01
    assert abs(revealed_record[name]["margin"] - float(t.margin)) < 1e-4
simulated = revealed_record["simulated"]
for name in ("nis", "niac", "nias"):
    size, power = simulated["size"][name], simulated["power"][name]
    print(
        f"{name.upper():4s} simulated size {rate_text(size['rate'], simulated['datasets'])}, "
        f"power {rate_text(power['rate'], simulated['datasets'])} against {power['against']} "
        f"({simulated['datasets']} data sets)"
    )

# %% [markdown]
# ### What the run says
#
# The text below is written from the report's numbers and from the two records it names.

# %%
switch = run.value_matrix - np.diag(run.value_matrix)[:, None]
beta_text = [f"{b:g}" for b in run_betas]


def power_text(name):
    """The simulated power of test ``name`` against its stated alternative, from the record."""
    power = simulated["power"][name]
    return (
        f"its power, simulated at this run's N, K and prior (`{REVEALED}`, "
        f"{simulated['datasets']} data sets), is {rate_text(power['rate'], simulated['datasets'])} "
        f"against {power['against']}"
    )


def difference_text(pair):
    lo, hi = pair["interval"]
    text = (
        f"$I_{{{pair['first']:g}}} - I_{{{pair['second']:g}}}$ = {pair['difference']:+.4f} "
        f"[{lo:+.4f}, {hi:+.4f}]: equal information "
    )
    if lo > 0 or hi < 0:
        return text + "rejected"
    return text + (
        "not rejected (its power is not computed; the interval admits differences up to "
        f"{max(-lo, hi):.3f} nats)"
    )


lines = [
    "* **Does reweighting change what is learned?** $I_k$ = "
    + with_intervals(run.information, run.information_interval)
    + f" nats at $\\beta$ = {', '.join(beta_text)} ({run_signals} signals per model; marginal "
    "95% intervals, which do not test a difference between these paired estimates). Paired "
    f"differences with their 95% percentile intervals over the same {N_REPLICATES:,} bootstrap "
    f"replicates (`{DIFFERENCES}`; each at the 95% level, not adjusted for the "
    f"{len(differences['differences'])} comparisons): "
    + "; ".join(difference_text(pair) for pair in differences["differences"])
    + "."
]
if run.nis_test.violated:
    pairs = [
        f"$\\beta$ = {beta_text[k]} from $\\beta$ = {beta_text[j]}'s ({switch[k, j]:+.4f})"
        for k, j in np.argwhere(run.nis_pairs)
    ]
    lines.append(
        "* **Capacity-constrained learning (NIS)** is rejected (margin "
        f"{float(run.nis_test.margin):.4f}, lower bound {float(run.nis_test.lower_bound):.4f}, "
        f"p = {float(run.nis_test.p_value):.3f}, {run_signals} signals per model; simulated size "
        f"{rate_text(simulated['size']['nis']['rate'], simulated['datasets'])}): some problems are "
        "better served by another "
        "model's experiment, re-scored: " + "; ".join(pairs) + "."
    )
else:
    lines.append(
        "* **Capacity-constrained learning (NIS)** is not rejected "
        f"(p = {float(run.nis_test.p_value):.3f}, {run_signals} signals per model); "
        + power_text("nis")
        + "."
    )
niac_numbers = (
    f"margin {float(run.niac_test.margin):+.4f}, lower bound "
    f"{float(run.niac_test.lower_bound):+.4f}, p = {float(run.niac_test.p_value):.3f}, "
    f"{run_signals} signals per model"
)
if run.niac_test.violated:
    lines.append(f"* **Costly learning (NIAC)** is rejected ({niac_numbers}).")
else:
    lines.append(
        f"* **Costly learning (NIAC)** is not rejected ({niac_numbers}); "
        + power_text("niac")
        + "."
    )
if run.cost_bounds.feasible:
    bounds = ", ".join(
        f"$\\beta$ = {beta_text[k]}: [{run.cost_bounds.lower[k]:+.4f}, "
        f"{run.cost_bounds.upper[k]:+.4f}] (95% intervals of the ends reach "
        f"{run.cost_lower_interval[0, k]:+.4f} and {run.cost_upper_interval[1, k]:+.4f})"
        for k in range(1, len(run_betas))
    )
    lines.append(
        f"* **Revealed costs**, relative to $\\beta$ = {beta_text[0]} (the bounds exist in "
        f"{float(run.cost_feasible_fraction):.0%} of the bootstrap replicates, those whose "
        f"estimates satisfy NIAC exactly): {bounds}. Negative values say that the weighted "
        f"models' experiments cost less than the $\\beta$ = {beta_text[0]} model's."
    )
lam_ends = (
    f"the 95% intervals of its ends are [{run.lambda_lower_interval[0]:.3f}, "
    f"{run.lambda_lower_interval[1]:.3f}] (lower) and [{run.lambda_upper_interval[0]:.3f}, "
    f"{run.lambda_upper_interval[1]:.3f}] (upper)"
)
if not run.shannon.rejected:
    lam_text = (
        f"the point estimates leave $\\lambda \\in$ [{float(run.shannon.lower):.3f}, "
        f"{float(run.shannon.upper):.3f}]; " + lam_ends
    )
else:
    lam_text = (
        "no single $\\lambda$ fits the point estimates (the pairs bound it below by "
        f"{float(run.shannon.lower):.3f} and above by {float(run.shannon.upper):.3f}); "
        f"{lam_ends}. `reveal` runs no sized test of one $\\lambda$, so as a test at a stated "
        "level it is not testable here; whether the intervals of the ends overlap tests nothing"
    )
lines.append(f"* **Shannon cost with one $\\lambda$**: {lam_text}.")
better = [
    f"$\\beta$ = {beta_text[k]} by {switch[k, 0]:+.4f}"
    + (" (significant" if run.nis_pairs[k, 0] else " (not significant")
    + " at the simultaneous 95% level)"
    for k in range(1, len(run_betas))
    if switch[k, 0] > 0
]
lines.append(
    "* **Train unweighted and correct afterwards?** "
    + (
        f"The $\\beta$ = {beta_text[0]} model's experiment, re-scored optimally, beats the "
        "weighted model on its own weighted loss at " + ", ".join(better) + "."
        if better
        else "At the point estimates each weighted model does best on its own loss."
    )
)
nias_flagged = [beta_text[k] for k in np.flatnonzero(run.nias.violated)]
lines.append(
    "* **NIAS** (loss calibration per model, Holm-adjusted): "
    + (
        f"rejected at $\\beta$ = {', '.join(nias_flagged)}"
        if nias_flagged
        else "not rejected at any $\\beta$"
    )
    + " (Holm-adjusted p = "
    + ", ".join(f"{p:.2g}" if p > 0 else "< 1e-38" for p in np.asarray(run.nias.p_value))
    + "; "
    + ", ".join(str(int(b)) for b in np.asarray(run.nias.test.n_bins))
    + " bins)"
    + ("" if nias_flagged else "; " + power_text("nias"))
    + ". NIAS is about reporting, not learning: the value matrix re-scores every model's "
    "revealed posteriors optimally, whatever the model reported."
)
lines.append(
    f"* **Caveat.** With {keep.sum():,} observations and {int(run_labels.sum())} positives, the "
    f"adaptive bins keep {run_signals} signals per model, the lowest holding "
    f"{int(positives_per_signal[:, 0].min())} to {int(positives_per_signal[:, 0].max())} "
    "positives (by model). The bootstrap approximates the posteriors of signals with few "
    "positives less well."
)
display(Markdown("\n".join(lines)))


# %% [markdown]
# ## 4. Models of three classes
#
# The same questions for models of $n$ classes. A model's signals are now the *cells* of the
# simplex of its loss-corrected posteriors (Proposition 4): its top class, then a quantile of its
# confidence within that class, merged alike for every model until each cell expects 10
# observations of its top class and 10 of the others. A cell's revealed posterior is a
# distribution over the classes, and everything above -- $G$, NIS, NIAC, the cost bounds -- runs
# on those posteriors unchanged; NIAS becomes one multinomial chi-square per model over its
# cells. `reveal` also gives the information each model carries about each class, one class
# against the rest, $I_{k,c}$.
#
# Four agents of three classes (class frequencies 0.4, 0.4, 0.2) see $x_k \sim N(d_k e_y, I_3)$
# and report under the class-weighted softmax loss, the weight of class 2 at 1, 2, 4 and 8.
# Capacity-constrained agents share $d = 1.5$; the others gain precision along the grid, $d$ from
# 1.25 to 1.75, so the later experiments are more informative for every loss: by construction
# NIS is violated for these agents.

# %%
class_weights = np.ones((4, 3))
class_weights[:, 2] = [1.0, 2.0, 4.0, 8.0]
class_losses = iml.loss_spec("class_weighted_softmax", class_weights=class_weights)
CLASS_FREQUENCIES = np.array([0.4, 0.4, 0.2])
class_precisions = {
    "capacity-constrained": np.full(4, 1.5),
    "rising precision": np.linspace(1.25, 1.75, 4),
}
key_data, key_boot = jax.random.split(jax.random.key(5))
class_reports = {}
for name, d in class_precisions.items():
    scores, labels = R.simulate_gaussian_agents(key_data, class_losses, d, CLASS_FREQUENCIES, 2000)
    class_reports[name] = jax.device_get(
        R.reveal(scores, labels, class_losses, 5, n_bootstrap=200, key=key_boot)
    )

for name, rep in class_reports.items():
    print(f"{name} (signals: the non-empty cells):")
    print(" ", describe_test("NIS", rep.nis_test, signal_count(rep)))
    print(" ", describe_test("NIAC", rep.niac_test, signal_count(rep)))
    print("  NIAS Holm-adjusted p per model", np.asarray(rep.nias.p_value))
    print("  I_k", with_intervals(rep.information, rep.information_interval))

class_capacity, class_rising = class_reports.values()
assert not class_capacity.nis_test.violated and not class_capacity.niac_test.violated
assert class_rising.nis_test.violated
assert not np.any(class_capacity.nias.violated) and not np.any(class_rising.nias.violated)

# %% [markdown]
# How often these verdicts come out as they did is measured, not assumed:
# `python -m experiments.studies.multiclass_reveal_power` ran `reveal` on 500 such data sets per
# scenario (record in `docs/results/multiclass_reveal_power/`). The rates below are read from it.

# %%
power_record = json.loads(Path("docs/results/multiclass_reveal_power/record.json").read_text())
data_sets = power_record["settings"]["datasets"]
for row in power_record["rows"]:
    if row["loss"] == "class_weighted_softmax" and row["scenario"] in ("capacity", "rising"):
        d0, d1 = row["precision"]
        rates = {t: rate_text(row[t], data_sets, percent=True) for t in ("nis", "niac", "nias")}
        print(
            f"{row['scenario']:9s} d {d0:g} to {d1:g} ({data_sets} data sets): NIS rejects "
            f"{rates['nis']}, NIAC {rates['niac']}, NIAS {rates['nias']}"
        )

# %% [markdown]
# What each model learned about each class, $I_{k,c}$ with 95% bootstrap intervals, along the
# weight of class 2. The capacity-constrained agents share one precision, so they were built to
# learn the same at every weight; the rising agents' precision rises for all three classes. Below
# the figure: the rising agents' point estimates of $I_{k,c}$ at weight 8 against weight 1, for
# each class. No paired interval is computed for these differences, so they describe the
# estimates and test nothing.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
grid = class_weights[:, 2]
for ax, (name, rep) in zip(axes, class_reports.items(), strict=True):
    info, (low, high) = rep.class_information, rep.class_information_interval
    for c in range(3):
        shift = grid * (1 + 0.03 * (c - 1))
        ax.errorbar(shift, info[:, c], yerr=[info[:, c] - low[:, c], high[:, c] - info[:, c]],
                    fmt="o-", capsize=3, label=f"class {c}")  # fmt: skip
    ax.set(xscale="log", xlabel="weight of class 2", title=name)
axes[0].set_ylabel(r"$I_{k,c}$ (nats, one class against the rest)")
axes[0].legend(fontsize=8)
fig.tight_layout()
plt.show()
rising_info = class_rising.class_information
for c in range(3):
    print(
        f"rising precision, class {c}: I_k,c {rising_info[0, c]:.3f} at weight {grid[0]:g}, "
        f"{rising_info[-1, c]:.3f} at weight {grid[-1]:g} (point estimates)"
    )
assert np.all(rising_info[-1] > rising_info[0])
