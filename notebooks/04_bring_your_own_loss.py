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
# # 04 · Bring your own loss
#
# The closed forms of Propositions 2 and 3 cover class-weighted *proper* losses. The model of the
# paper is more general: for **any** loss $L$, a Bayesian decision-maker with posterior $\gamma$
# reports $c^L(\gamma) = \arg\min_a \sum_y \gamma_y L(a, y)$ (eq. 5), and when that rule is
# single-valued and invertible the loss-corrected score $(c^L)^{-1}(a)$ recovers the probability
# of the label from a loss-calibrated model (Proposition 4, eq. 11; Proposition 5).
#
# This notebook extends the model to a loss of your own:
#
# 1. get its optimal scoring rule (`iml.optimal_score_for_loss`) and its loss correction
#    (`iml.loss_corrected_score_for_loss`), both from automatic differentiation;
# 2. verify the rule's first-order conditions (`iml.check_first_order_conditions`) and that it is
#    invertible (`iml.check_invertibility`) -- and see a non-invertible loss flagged;
# 3. test whether a model is loss-calibrated for it (Definition 2,
#    `iml.calibration.loss_calibration_test`), on simulated models.
#
# The worked example is the focal loss of Lin et al. (2017), which is not proper, so its rule has
# no closed form in the paper; the second example is a proper loss defined by its weight function.

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import iml
from iml import losses
from iml.calibration import loss_calibration_test, loss_calibration_verdict

# %% [markdown]
# ## 1. A loss is a function `loss(a, y, *params)`
#
# The generic functions take a binary loss as a JAX function of the positive-class score `a`, the
# label `y` (0.0 or 1.0) and any extra parameters, elementwise. `iml.losses.focal_loss` is
#
# $$L_{\rm focal}(a, y) = -2\alpha\, y\, (1-a)^{f} \log a - 2(1-\alpha)(1-y)\, a^{f}\log(1-a),$$
#
# with focusing parameter $f$ (called `gamma` in Lin et al. and in the function's signature; here
# $\gamma$ is the posterior) and positive-class weight $\alpha$. With $f = 0$ it is twice the
# $\beta$-weighted log loss of eq. 7 with $\beta = \alpha$, so its rule is Proposition 2's.
#
# `iml.optimal_score_for_loss(loss, gamma, *params)` solves eq. 5 by bisection on the first-order
# condition $\gamma L'(a, 1) + (1 - \gamma) L'(a, 0) = 0$, with $L' = \partial L/\partial a$ from
# `jax.jvp`.

# %%
gammas = jnp.linspace(0.005, 0.995, 199)
focus_values = (0.0, 1.0, 2.0, 5.0)
rules = {
    (focus, alpha): iml.optimal_score_for_loss(losses.focal_loss, gammas, focus, alpha)
    for alpha in (0.5, 0.25)
    for focus in focus_values
}

# f = 0 is (weighted) log loss: the identity at alpha = 1/2, Proposition 2's rule otherwise.
assert float(jnp.max(jnp.abs(rules[0.0, 0.5] - gammas))) < 1e-5
assert float(jnp.max(jnp.abs(rules[0.0, 0.25] - iml.optimal_score(gammas, 0.25)))) < 1e-5
# Focusing pulls scores towards 1/2: a focal model is underconfident by design.
assert bool(jnp.all(jnp.abs(rules[2.0, 0.5] - 0.5) < jnp.abs(gammas - 0.5) + 1e-6))

fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
for ax, alpha in zip(axes, (0.5, 0.25), strict=True):
    for focus in focus_values:
        ax.plot(gammas, rules[focus, alpha], label=f"f = {focus:g}")
    ax.plot([0, 1], [0, 1], color="gray", ls="--", lw=0.8, zorder=0)
    ax.set(xlabel=r"posterior $\gamma$", title=rf"focal loss, $\alpha$ = {alpha}")
    ax.legend(title="focusing")
axes[0].set_ylabel(r"optimal score $c^L(\gamma)$")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. Verify the rule: first-order conditions and invertibility
#
# A numerically found rule is only as good as the assumptions of the solver (one sign change of
# the expected loss's derivative). `iml.check_first_order_conditions` re-derives the gradient and
# curvature of the expected loss at the rule's scores by autodiff: the residual must vanish and
# the curvature be positive. Reporting the posterior itself is *not* optimal for the focal loss.

# %%
focus, alpha = 2.0, 0.25
check_gammas = jnp.linspace(0.01, 0.99, 99)


def focal_rule(gamma):
    return iml.optimal_score_for_loss(losses.focal_loss, gamma, focus, alpha)


def focal(a, y):
    return losses.focal_loss(a, y, focus, alpha)


right = iml.check_first_order_conditions(focal, focal_rule, check_gammas)
truthful = iml.check_first_order_conditions(focal, lambda g: g, check_gammas)
print(
    f"focal rule: residual {float(right.residual):.1e}, min curvature "
    f"{float(right.min_curvature):.2f}, passed {right.passed()}"
)
print(f"report gamma: residual {float(truthful.residual):.2f}, passed {truthful.passed()}")
assert right.passed() and float(right.residual) < 1e-4
assert not truthful.passed() and float(truthful.residual) > 0.1

# %% [markdown]
# Proposition 4 needs $c^L$ single-valued and invertible. Because the first-order condition is
# linear in $\gamma$, the posterior for which a score $a$ is optimal has a closed form in the
# loss's derivatives,
#
# $$\gamma(a) = \frac{L'(a, 0)}{L'(a, 0) - L'(a, 1)},$$
#
# which is `iml.loss_corrected_score_for_loss`. `iml.check_invertibility` evaluates it on a grid of
# scores and checks that it exists everywhere (derivatives of opposite sign, a minimum rather than
# a maximum) and increases strictly with $a$.

# %%
report = iml.check_invertibility(losses.focal_loss, focus, alpha)
print("focal loss invertible:", bool(report.invertible))
assert bool(report.invertible)

scores = focal_rule(check_gammas)
corrected = iml.loss_corrected_score_for_loss(losses.focal_loss, scores, focus, alpha)
round_trip = float(jnp.max(jnp.abs(corrected - check_gammas)))
print(f"max |(c^L)^-1(c^L(gamma)) - gamma| = {round_trip:.1e}")
assert round_trip < 1e-4

# %% [markdown]
# ## 3. A loss from your own weight function (Definition 4)
#
# Every differentiable strictly proper binary loss is determined, up to a constant per label, by a
# positive weight function $w$ through eq. 6: $\partial L(a, y)/\partial a = w(a)(a - y)$.
# `iml.losses.proper_loss(w)` builds the loss by quadrature, with the exact derivative. Here
# $w(t) = t^{-1/2}(1 - t)^{-1/2}$, between log loss ($w = 1/(t(1-t))$) and squared loss
# ($w = 2$) in how hard it punishes confident mistakes.


# %%
def weight(t):
    return 1.0 / jnp.sqrt(t * (1.0 - t))


my_loss = losses.proper_loss(weight)
a_grid = jnp.linspace(0.01, 0.99, 99)
for y in (0.0, 1.0):
    slope = jax.vmap(jax.grad(my_loss), in_axes=(0, None))(a_grid, y)
    assert jnp.allclose(slope, weight(a_grid) * (a_grid - y), rtol=1e-5)

# Strictly proper: the optimal score is the posterior, and the first-order conditions agree.
truth = iml.optimal_score_for_loss(my_loss, check_gammas)
assert float(jnp.max(jnp.abs(truth - check_gammas))) < 1e-5
assert iml.check_first_order_conditions(my_loss, lambda g: g, check_gammas).passed()
assert bool(iml.check_invertibility(my_loss).invertible)

fig, ax = plt.subplots(figsize=(5.5, 3.6))
for name, loss in [
    ("log loss", losses.log_loss),
    ("squared loss", losses.squared_loss),
    (r"$w = 1/\sqrt{t(1-t)}$", my_loss),
]:
    ax.plot(a_grid, loss(a_grid, 1.0) - loss(0.5, 1.0), label=name)
ax.set(xlabel="score $a$", ylabel=r"$L(a, 1) - L(1/2, 1)$", title="loss on a positive label")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# Class-weighting this loss (eq. 7) gives exactly the rule of Proposition 2 and the correction of
# Corollary 1, whatever $w$ is -- the generic, autodiff-based functions reproduce the closed forms.


# %%
def weighted_my_loss(a, y, beta):
    return losses.beta_weighted_loss(a, y, beta, my_loss)


for beta in (0.9, 0.99):
    rule = iml.optimal_score_for_loss(weighted_my_loss, check_gammas, beta)
    assert float(jnp.max(jnp.abs(rule - iml.optimal_score(check_gammas, beta)))) < 1e-5
    inverse = iml.loss_corrected_score_for_loss(weighted_my_loss, a_grid, beta)
    assert float(jnp.max(jnp.abs(inverse - iml.loss_corrected_score(a_grid, beta)))) < 1e-5
print("weighted user loss: Proposition 2 and Corollary 1 reproduced")

# %% [markdown]
# ## 4. A loss whose rule cannot be inverted
#
# Not every loss elicits a posterior. Two deliberately bad ones:
#
# * **absolute loss** $|a - y|$: the expected loss $\gamma(1 - a) + (1 - \gamma)a$ is linear in
#   $a$, so the rule jumps from 0 to 1 at $\gamma = 1/2$ -- every score in between is optimal
#   only for $\gamma = 1/2$, and no score reveals any other posterior;
# * **root loss** $\sqrt{|a - y|}$: the first-order condition has a solution,
#   $a = (1-\gamma)^2 / ((1-\gamma)^2 + \gamma^2)$, but it is a *maximum* of the (concave)
#   expected loss, so the minimisers are again the scores 0 and 1.
#
# Both are flagged: `check_invertibility` fails, the loss correction is NaN instead of a plausible
# wrong number, and for the root loss the first-order check sees the negative curvature. Run
# these checks before trusting `optimal_score_for_loss` with a new loss: its solver assumes the
# expected loss has a single minimum (one sign change of its derivative), which the root loss
# violates.


# %%
def absolute_loss(a, y):
    return jnp.abs(a - y)


def root_loss(a, y):
    return jnp.sqrt(jnp.abs(a - y))


for name, loss in [("absolute", absolute_loss), ("root", root_loss)]:
    bad = iml.check_invertibility(loss)
    corrected_bad = iml.loss_corrected_score_for_loss(loss, a_grid)
    print(
        f"{name} loss: invertible {bool(bad.invertible)}, "
        f"NaN corrections {int(jnp.isnan(corrected_bad).sum())}/{a_grid.size}"
    )
    assert not bool(bad.invertible)
    assert bool(jnp.all(jnp.isnan(corrected_bad)))


def root_stationary(gamma):
    """Where the root loss's expected-loss derivative vanishes: a = (1-g)^2 / ((1-g)^2 + g^2)."""
    return (1 - gamma) ** 2 / ((1 - gamma) ** 2 + gamma**2)


stationary = iml.check_first_order_conditions(root_loss, root_stationary, check_gammas)
print(
    f"root loss, its stationary points: residual {float(stationary.residual):.1e}, "
    f"min curvature {float(stationary.min_curvature):.2f}"
)
assert float(stationary.residual) < 1e-3 and float(stationary.min_curvature) < 0
assert not stationary.passed()

step = iml.optimal_score_for_loss(absolute_loss, check_gammas)
assert bool(jnp.all(step[check_gammas < 0.5] < 1e-6)) and bool(
    jnp.all(step[check_gammas > 0.5] > 1 - 1e-6)
)

fig, ax = plt.subplots(figsize=(8, 3.6))
ax.plot(check_gammas, focal_rule(check_gammas), label=rf"focal, f = {focus:g}, $\alpha$ = {alpha}")
ax.plot(check_gammas, step, label="absolute loss (step)")
ax.plot(
    check_gammas, root_stationary(check_gammas), ls=":", label="root loss: stationary (a maximum)"
)
ax.set(xlabel=r"posterior $\gamma$", ylabel=r"optimal score $c^L(\gamma)$")
ax.set_title("An invertible rule, and two losses without one")
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 5. Is a model loss-calibrated for your loss?
#
# Definition 2: scores are *loss-calibrated* to $L$ when no wholesale switch of one reported
# score for another lowers the loss. By Proposition 5, for an invertible rule this holds exactly
# when the loss-corrected scores are *calibrated* (Definition 1): the event rate among cases with
# corrected score $g$ is $g$.
#
# We simulate the paper's model (Section 3; its signal-based representation, Definition 3) for a
# decision-maker trained with the focal loss ($f = 2$, $\alpha = 0.25$): posteriors
# $\gamma \sim \mathrm{Beta}(2, 5)$, labels $y \sim \mathrm{Bernoulli}(\gamma)$, reported scores
# $a = c^L(\gamma)$. As a control, a *truthful* model ($a = \gamma$, as trained with log loss)
# reports the posterior itself.
#
# `iml.calibration.loss_calibration_test(scores, labels, loss)` tests Definition 2: it corrects
# the scores with the loss's inverse rule, bins them by deciles of the corrected score (merging
# bins until each holds 10 expected positives and negatives) and compares each bin's positives
# with their expectation, a chi-square statistic with one degree of freedom per bin. Its verdict
# states its bins, and a non-rejection its power against odds twice or half the corrected ones.
# Each model is tested for the focal loss and for log loss.

# %%
rng = np.random.default_rng(0)
n_cases = 200_000
posterior = rng.beta(2.0, 5.0, size=n_cases)
labels = (rng.random(n_cases) < posterior).astype(np.float64)

focal_scores = np.asarray(focal_rule(jnp.asarray(posterior, jnp.float32)), np.float64)
focal_corrected = np.asarray(
    iml.loss_corrected_score_for_loss(losses.focal_loss, focal_scores, focus, alpha), np.float64
)
truthful_scores = posterior
truthful_corrected = np.asarray(
    iml.loss_corrected_score_for_loss(losses.focal_loss, truthful_scores, focus, alpha), np.float64
)
assert not np.isnan(focal_corrected).any() and not np.isnan(truthful_corrected).any()


focal_spec = iml.loss_spec("focal", gamma=focus, alpha=alpha)
models = {"focal model": focal_scores, "truthful model": truthful_scores}
tested_for = {"focal loss": focal_spec, "log loss": "log"}
tests = {
    (model, name): loss_calibration_test(scores, labels, loss, n_bootstrap=0)
    for model, scores in models.items()
    for name, loss in tested_for.items()
}
for (model, name), test in tests.items():
    verdict = loss_calibration_verdict(float(test.p_value), int(test.n_bins), float(test.power))
    print(f"{model}, loss-calibrated for the {name}? {verdict}")

# Each model is rejected for the loss it was not trained with, and not rejected for its own,
# with power against the stated alternative near 1 at this N.
for model, own, other in (("focal model", "focal loss", "log loss"),
                          ("truthful model", "log loss", "focal loss")):  # fmt: skip
    assert float(tests[model, own].p_value) > 0.05 and float(tests[model, own].power) > 0.9
    assert float(tests[model, other].p_value) < 1e-6


def binned_calibration(scores, labels, values, n_bins=10):
    """Per decile of ``scores``: mean of ``values``, event rate and its standard error."""
    edges = np.quantile(scores, np.linspace(0.0, 1.0, n_bins + 1))
    bins = np.clip(np.searchsorted(edges, scores, side="right") - 1, 0, n_bins - 1)
    counts = np.bincount(bins, minlength=n_bins)
    mean_value = np.bincount(bins, weights=values, minlength=n_bins) / counts
    rate = np.bincount(bins, weights=labels, minlength=n_bins) / counts
    stderr = np.sqrt(rate * (1.0 - rate) / counts)
    return mean_value, rate, stderr


curves = {
    "focal model, raw scores": binned_calibration(focal_scores, labels, focal_scores),
    "focal model, loss-corrected": binned_calibration(focal_scores, labels, focal_corrected),
    "truthful model, raw scores": binned_calibration(truthful_scores, labels, truthful_scores),
    "truthful model, focal-corrected": binned_calibration(
        truthful_scores, labels, truthful_corrected
    ),
}

# %%
curve_gammas = jnp.linspace(0.005, 0.9, 300)
fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharey=True)
panels = {
    "focal model": ("focal model, raw scores", "focal model, loss-corrected"),
    "truthful model": ("truthful model, raw scores", "truthful model, focal-corrected"),
}
for ax, (title, keys) in zip(axes, panels.items(), strict=True):
    for key, marker in zip(keys, ("o", "s"), strict=True):
        mean_value, rate, stderr = curves[key]
        ax.errorbar(mean_value, rate, yerr=2 * stderr, fmt=marker, ms=4, capsize=2, label=key)
    ax.plot(
        focal_rule(curve_gammas),
        curve_gammas,
        color="C3",
        lw=1,
        label=r"focal loss-calibration curve $(c^L(\gamma), \gamma)$",
    )
    ax.plot([0, 1], [0, 1], color="gray", ls="--", lw=0.8, label="calibrated (45°)")
    ax.set(xlim=(0, 0.9), ylim=(0, 0.9), xlabel="mean score in the decile", title=title)
    ax.legend(fontsize=8, loc="upper left")
axes[0].set_ylabel("event rate in the decile (± 2 s.e.)")
fig.tight_layout()
plt.show()

# %% [markdown]
# The raw scores of the focal model lie on its *loss-calibration curve*
# $(c^L(\gamma), \gamma)$ -- the analogue for this loss of the paper's Figures 2 and 3 -- and the
# loss correction moves them onto the diagonal. The figure's bins are deciles of the raw scores,
# which hold the same cases as deciles of the corrected scores (the correction is increasing),
# with bars of two standard errors; the verdicts above are the tests of these comparisons.
#
# ## Summary
#
# | step | function |
# | --- | --- |
# | optimal scoring rule of any loss (eq. 5) | `iml.optimal_score_for_loss` |
# | loss-corrected score (Proposition 4, eq. 11) | `iml.loss_corrected_score_for_loss` |
# | first- and second-order conditions | `iml.check_first_order_conditions` |
# | invertibility on a grid | `iml.check_invertibility` |
# | test of loss calibration (Definition 2) | `iml.calibration.loss_calibration_test` |
# | a proper loss from its weight function (Definition 4, eq. 6) | `iml.losses.proper_loss` |
#
# Multiclass losses work the same way with `iml.optimal_score_multiclass_for_loss` and
# `iml.loss_corrected_score_multiclass_for_loss` (scores on the simplex or in the box).
