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
# # 03 · The paper's Figures 1-4 from a stored run
#
# The paper's evidence is four figures drawn from the ensemble scores of networks trained with
# the $\beta$-weighted log loss (eq. 7) at $\beta = 0.5, 0.9, 0.99$:
#
# * **Figure 1**: decile calibration curves of the raw scores against the 45-degree line of
#   calibration (Definition 1, eq. 1);
# * **Figure 2**: the curves a *loss-calibrated* model (Definition 2, eq. 2) would show, the
#   optimal scoring rule $a = c^\beta(\gamma)$ of Proposition 2 (eq. 8);
# * **Figure 3**: Figures 1 and 2 superimposed: each weight's deciles beside its theoretical
#   curve. The figure tests nothing; the test of Definition 2 is the table's loss-calibration
#   test, whose verdicts are printed under it;
# * **Figure 4**: calibration curves of the loss-corrected scores
#   $g^\beta(a) = (c^\beta)^{-1}(a)$ (Corollary 1, eqs. 3 and 12), calibrated when the raw
#   scores are loss-calibrated (Propositions 4 and 5); its legend carries the table's verdicts.
#
# This notebook reads the run that `iml reproduce` stored in `docs/results/reproduce_digits/`
# (the README's default experiment: a small DenseNet on scikit-learn's digits, "8" against the
# rest), draws the four figures with `iml.plots`, shows the run's summary table, and says what
# they show -- every number in the text below is read from the run's files, not typed in.

# %%
# %matplotlib inline
# (a Jupyter magic: it shows the figures of iml.plots, built without pyplot, with display())
import json
import os
from pathlib import Path

import jax
import numpy as np
from IPython.display import Markdown, display

import iml
from iml.calibration import (
    beta_key,
    calibration_curve,
    compare_ece,
    loss_calibration_curve,
    score_metrics,
)
from iml.config import flatten
from iml.pipeline import RunStore, load_ensemble
from iml.pipeline.run_config import as_config
from iml.plots import (
    figure1_calibration_curves,
    figure2_theoretical_curves,
    figure3_loss_calibration,
    figure4_loss_corrected,
)
from iml.recalibration import BASELINES, cross_fit

# Paths below are relative to the repository root; Jupyter starts the kernel in notebooks/.
if not Path("docs/results").is_dir() and Path("../docs/results").is_dir():
    os.chdir("..")
RUN = Path("docs/results/reproduce_digits")
assert (RUN / "manifest.json").exists() and (RUN / "ensemble_scores.npz").exists(), (
    f"no stored run with ensemble scores in {RUN}: make one with `iml reproduce --out {RUN}`"
)

# %% [markdown]
# ## 1. The run
#
# A run directory is an `iml.pipeline.RunStore`: `manifest.json` records the configuration,
# package versions and command; `batches/` holds every ensemble member's test scores; the report
# (`iml reproduce` ends with it, `iml figures` redraws it) adds `ensemble_scores.npz`,
# `table.json`/`table.md` and `figures/`. The configuration has sections (`data`, `model`,
# `loss`, `train`, `eval`); `iml.pipeline.run_config.as_config` reads it into the locked config
# that `iml reproduce` runs with.

# %%
store = RunStore(RUN)
manifest = store.manifest()
config = as_config(manifest["config"])
print("command: iml", " ".join(manifest["command"][1:]))
values = flatten(config)
for key in (
    "data.name",
    "model.name",
    "loss.betas",
    "data.n_folds",
    "data.n_val_folds",
    "data.n_test_folds",
    "plan.seeds",
):
    print(f"  {key:18s} {values[key]}")
print(f"  {'train.max_epochs':18s} {config.train.max_epochs} (at most)")
print(f"  members            {manifest['num_members']}, examples {manifest['num_examples']}")

# %% [markdown]
# ## 2. The ensemble scores
#
# `ensemble_scores.npz` (read with `store.load_arrays("ensemble_scores")`) holds, per $\beta$,
# each observation's mean test score over the members whose test fold holds it (`scores`, NaN
# where none does; with `config.eval.average = "logit"`, the score of their mean logit), their
# number (`sizes`) and the labels. Where the member batches are stored too,
# `iml.pipeline.load_ensemble` re-aggregates them, and the two must agree.

# %%
stored = store.load_arrays("ensemble_scores")
betas = tuple(float(b) for b in stored["betas"])
labels = np.asarray(stored["labels"])
assert betas == tuple(float(b) for b in config.loss.betas)
assert stored["scores"].shape == stored["sizes"].shape == (len(betas), len(labels))
assert set(np.unique(labels)) <= {0, 1}

if any(True for _ in store.keys("batches")):
    ensemble = load_ensemble(store, betas, len(labels), config.eval.average)
    assert np.array_equal(ensemble.sizes, stored["sizes"])
    assert np.allclose(ensemble.scores, stored["scores"], rtol=0, atol=1e-12, equal_nan=True)
    print("member batches re-aggregated: identical to ensemble_scores.npz")

print(f"{len(labels):,} observations, {int(labels.sum())} positive ({labels.mean():.1%})")
scores_by_beta, labels_by_beta = {}, {}
for row, beta in enumerate(betas):
    sizes = stored["sizes"][row]
    have = sizes > 0
    # as the run's report: observations with a score, clipped away from exactly 0 and 1
    scores_by_beta[beta] = np.clip(stored["scores"][row][have], 1e-7, 1 - 1e-7)
    labels_by_beta[beta] = labels[have]
    print(
        f"beta={beta:g}: {int(have.sum()):,} scored, ensemble size {sizes[have].min()}-"
        f"{sizes.max()} (mean {sizes[have].mean():.1f})"
    )

# %% [markdown]
# ## 3. The summary table
#
# `table.md` is `table.json` as Markdown: per $\beta$, the ECE (l1, deciles), the debiased l2 ECE
# (Kumar, Liang & Ma), Brier score, log loss and AUROC of the raw ensemble scores, of their
# loss-corrected scores (nothing fitted), and of five recalibration baselines fitted by
# cross-fitting over the outer folds; below each, the loss-calibration test of the raw scores.

# %%
table = json.loads((RUN / "table.json").read_text())
display(Markdown((RUN / "table.md").read_text()))

# %% [markdown]
# The table is reproducible from the stored scores: recomputing the metrics of the raw and the
# loss-corrected scores (`iml.pipeline.report.score_metrics`) gives the stored numbers (a metric
# the library gained after the run was stored is not in its table, and is not checked). The
# prior-shift correction (Section 4 of the paper, eq. 13) coincides with the loss correction,
# as the paper notes, so their rows agree too.

# %%
assert list(table) == [beta_key(beta) for beta in betas]
n_bins = int(config.eval.n_bins)
for beta in betas:
    s, y = scores_by_beta[beta], labels_by_beta[beta]
    corrected = np.asarray(iml.loss_corrected_score(s.astype(np.float32), beta))
    for method, values in (("raw", s), ("loss_corrected", corrected)):
        recomputed = score_metrics(values, y, n_bins)
        stored = table[beta_key(beta)][method]
        shared = [metric for metric in recomputed if metric in stored]
        assert {"ece", "brier", "log_loss", "auroc"} <= set(shared), shared
        for metric in shared:
            assert abs(recomputed[metric] - stored[metric]) < 1e-5, (beta, method, metric)
    for metric, value in table[beta_key(beta)]["loss_corrected"].items():  # ECE intervals too
        other = table[beta_key(beta)]["prior_shift"][metric]
        np.testing.assert_allclose(value, other, atol=1e-4, err_msg=f"{beta} {metric}")
print("table.json reproduced from ensemble_scores.npz")

# %% [markdown]
# ## 4. Figure 1: calibration curves of the raw scores
#
# Each point is a decile of one model's scores: its mean score against its event rate, on log-log
# axes, with a Clopper-Pearson 95% interval for the rate. A decile without a positive (event rate
# 0, which a log axis cannot show) is drawn as an open downward triangle at the axes' floor, with
# a bar up to the upper Clopper-Pearson bound of its rate.

# %%
fig1 = figure1_calibration_curves(scores_by_beta, labels_by_beta, n_bins)
display(fig1)

curves = {
    beta: calibration_curve(scores_by_beta[beta], labels_by_beta[beta], n_bins) for beta in betas
}
for beta, curve in curves.items():
    rate, mean = np.asarray(curve.event_rate), np.asarray(curve.mean_score)
    drawn = rate > 0
    above = int(np.sum(mean[drawn] > rate[drawn]))
    print(
        f"beta={beta:g}: {int(drawn.sum())} of {n_bins} deciles have a positive; "
        f"in {above} of them the mean score exceeds the event rate"
    )
gids = {line.get_gid() for line in fig1.axes[0].get_lines()}
assert {"diagonal"} | {f"data-{beta_key(beta)}" for beta in betas} <= gids

# %% [markdown]
# ## 5. Figure 2: the theoretical curves (Proposition 2)
#
# A loss-calibrated model reports $c^\beta(\gamma)$ when the probability is $\gamma$, so among
# the cases scored $a$ the event rate is $(c^\beta)^{-1}(a)$: the curve $(c^\beta(\gamma),
# \gamma)$. It needs no data; $\beta = 1/2$ is the 45-degree line, and larger weights bend the
# curve to the right -- overscoring, by a factor that approaches $\beta/(1-\beta)$ as the
# probability goes to 0.

# %%
fig2 = figure2_theoretical_curves(betas)
display(fig2)
theory = {line.get_gid(): line for line in fig2.axes[0].get_lines()}
for beta in betas:
    a, gamma = theory[f"theory-{beta_key(beta)}"].get_data()
    assert np.allclose(a, iml.optimal_score(gamma, beta), rtol=1e-5)  # eq. 8

# %% [markdown]
# ## 6. Figure 3: data against theory (Definition 2)
#
# Figures 1 and 2 together. `iml.calibration.loss_calibration_curve` gives the numbers behind it:
# per decile, the score $c^\beta(\text{event rate})$ that the rule assigns to the decile's
# event rate, to compare with the decile's mean score. The run's loss-calibration test (in the
# table; `iml.calibration.loss_calibration_test`) is another comparison: it bins the observations
# by their corrected scores $g^\beta(a)$, merges adjacent bins until each holds 10 expected
# positives and negatives, and compares each bin's positives with the sum of its corrected scores
# (a Hosmer-Lemeshow-type chi-square, with one degree of freedom per bin). Its verdicts, Holm
# over the run's weights, are printed below the numbers.

# %%
fig3 = figure3_loss_calibration(scores_by_beta, labels_by_beta, n_bins)
display(fig3)
for beta in betas:
    lc = loss_calibration_curve(scores_by_beta[beta], labels_by_beta[beta], beta, n_bins)
    drawn = np.asarray(lc.event_rate) > 0
    mean, best = np.asarray(lc.mean_score)[drawn], np.asarray(lc.optimal_score)[drawn]
    print(
        f"beta={beta:g}: decile mean scores {np.round(mean, 3)}\n"
        f"{'':10s} c^beta(event rate) {np.round(best, 3)}"
    )
verdicts = {beta: table[beta_key(beta)]["raw"]["loss_calibration"]["verdict"] for beta in betas}
for beta in betas:
    print(f"beta={beta:g}: loss calibration (Definition 2, the table's test): {verdicts[beta]}")

# %% [markdown]
# ## 7. Figure 4: the loss-corrected scores (Corollary 1, Proposition 5)
#
# The same deciles, with each score replaced by its loss-corrected score $g^\beta(a)$ before
# averaging. Calibrated curves lie on the 45-degree line; whether these are is the table's
# test, whose verdict each legend entry carries.

# %%
fig4 = figure4_loss_corrected(scores_by_beta, labels_by_beta, n_bins, verdicts=verdicts)
display(fig4)
gids = {line.get_gid() for line in fig4.axes[0].get_lines()}
assert {"diagonal"} | {f"data-{beta_key(beta)}" for beta in betas} <= gids

# %% [markdown]
# ## 8. What this run shows
#
# Generated from `table.json` (ECE: l1 over deciles) and from the scores, so it stays true when
# the run is redone. Each comparison of two ECEs on the same observations is a difference with
# its paired bootstrap 95% interval (`iml.calibration.compare_ece`, 1000 replicates, key 0): raw
# − corrected, and corrected − the fitted baseline with the smallest ECE in the table, refitted
# here by the run's cross-fitting over its outer folds (its ECE checked against the table's).

# %%
unweighted = min(betas, key=lambda b: abs(b - 0.5))
top = max(betas)
folds = store.load_arrays("data/folds")
assert np.array_equal(np.asarray(folds["labels"]), labels)
sizes_by_row = store.load_arrays("ensemble_scores")["sizes"]
have_by_beta = {beta: sizes_by_row[row] > 0 for row, beta in enumerate(betas)}
KEY, REPLICATES = jax.random.key(0), 1000


def paired(first, second, y):
    """ECE of each, and ``first - second`` with its paired 95% interval, as printed text."""
    c = compare_ece(first, second, y, n_bins=n_bins, n_bootstrap=REPLICATES, key=KEY)
    (lo, hi), d = np.asarray(c.difference_interval), float(c.difference)
    side = "excludes 0" if lo > 0 or hi < 0 else "includes 0"
    return np.asarray(c.ece), lo, f"{d:.4f} [{lo:.4f}, {hi:.4f}] (interval {side})"


def refit(method, beta):
    """The baseline's cross-fitted scores, as the run's table fits them."""
    s, y = scores_by_beta[beta], labels_by_beta[beta]
    order = np.argsort(s, kind="stable")
    out = np.empty(len(s))
    out[order] = cross_fit(
        BASELINES[method](beta), s[order], y[order], folds["fold_ids"][have_by_beta[beta]][order]
    )
    return out


lines, lows = [], {}
for beta in betas:
    row = table[beta_key(beta)]
    s, y = scores_by_beta[beta], labels_by_beta[beta]
    corrected = np.asarray(iml.loss_corrected_score(s.astype(np.float32), beta))
    raw_ece, corrected_ece = row["raw"]["ece"], row["loss_corrected"]["ece"]
    # prior_shift is the loss correction again (section 3), not a fitted baseline
    fitted = {
        m: v["ece"] for m, v in row.items() if m not in ("raw", "loss_corrected", "prior_shift")
    }
    best = min(fitted, key=fitted.get)
    if beta == 0.5:
        raw_vs = "the same scores: at beta = 1/2 the correction is the identity"
    else:
        eces, lows[beta], text = paired(s, corrected, y)
        assert np.allclose(eces, [raw_ece, corrected_ece], atol=1e-4)
        raw_vs = f"raw − corrected ECE {text}"
    eces, _, text = paired(corrected, refit(best, beta), y)
    # A refit reproduces the table's ECE to float rounding, which can move tied scores (an
    # isotonic map's steps) across a decile edge: about 2e-4 between XLA optimisation levels.
    assert np.allclose(eces, [corrected_ece, fitted[best]], atol=1e-3), (beta, best, eces)
    verdict = row["raw"]["loss_calibration"]["verdict"]
    lines.append(
        f"* **beta = {beta:g}**: raw ECE {raw_ece:.4f}, loss-corrected {corrected_ece:.4f}; "
        f"{raw_vs}. The fitted baseline with the smallest ECE in the table is {best} "
        f"({fitted[best]:.4f}): corrected − {best} ECE {text}. Loss calibration to its own "
        f"weight (Definition 2, Holm over the run's weights): {verdict}. AUROC "
        f"{row['raw']['auroc']:.4f}."
    )
if np.array_equal(have_by_beta[top], have_by_beta[unweighted]):  # the same observations
    top_corrected = iml.loss_corrected_score(scores_by_beta[top].astype(np.float32), top)
    _, _, text = paired(np.asarray(top_corrected), scores_by_beta[unweighted], labels_by_beta[top])
    lines.append(
        f"\nFigure 4: the beta = {top:g} model's loss-corrected ECE minus the unweighted "
        f"(beta = {unweighted:g}) model's raw ECE, on the same observations: {text}."
    )
display(Markdown("\n".join(lines)))

# At the largest weight the interval of raw - corrected ECE lies above 0.
assert lows[top] > 0

# %% [markdown]
# ### Reading the figures with care
#
# * Where the event is not rare and the task is easy, many deciles contain no positive at all;
#   the figures draw each as an open triangle at the axes' floor with a bar up to its
#   Clopper-Pearson upper bound, which says only that its rate lies below that bound. The cell
#   under Figure 1 counts, for this run, the deciles with a positive. When only two or three
#   such points per weight remain, the table's ECE, which counts every decile, is the fuller
#   summary.
# * Figure 3 compares a decile's mean *raw* score with a non-linear theoretical curve: where a
#   decile's scores spread widely, the mean score and the mean corrected score disagree (Jensen's
#   inequality). Figure 4 averages the corrected scores and is the direct check of
#   Proposition 5.
# * With one seed and one test fold per rotation, each observation's "ensemble" is a single
#   member (the ensemble sizes above); the paper averages several members to remove training
#   noise.
# * The fitted baselines use the labels of the other folds, which the loss correction never
#   sees; the correction also keeps whatever miscalibration the unweighted model has (the
#   beta = 0.5 row). Temperature scaling has no intercept, so it cannot undo the shift in logits
#   that a class weight makes (eq. 12).
