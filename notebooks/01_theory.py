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
# # 01 · The theory: weighted losses, optimal scores and their inverses
#
# This notebook walks through Section 3 of Caplin, Martin & Marx, *Calibrating for Class Weights
# by Modeling Machine Learning* (the paper; numbers below refer to its equations, definitions and
# propositions) with the functions of `iml` that implement them.
#
# The paper models a trained classifier as a Bayesian decision-maker: from a signal it forms a
# posterior $\gamma$ over labels (eq. 4) and reports the score that minimises its expected loss,
#
# $$c^L(\gamma) = \arg\min_{a} \sum_y \gamma_y L(a, y) \qquad \text{(eq. 5)}.$$
#
# A class-weighted loss makes this rule differ from the identity, so scores are miscalibrated by
# design; inverting the rule (Proposition 4) recovers the probabilities: the *loss-corrected
# confidence score*.
#
# We work in float64 here so that every comparison with a formula is exact to rounding; the library
# works in float32 as well (its tests check the accuracy there).

# %%
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import iml
from iml import losses

BETAS = (0.5, 0.9, 0.99)  # the paper's positive-class weights (Figures 1-4)

# %% [markdown]
# ## 1. Strictly proper losses and their weight functions (Definition 4, eq. 6)
#
# A binary loss $L(a, y)$ of the positive-class score $a \in (0, 1)$ is *differentiable and
# strictly proper* when
#
# $$\frac{\partial L(a, 1)}{\partial a} = w(a)(a - 1), \qquad
#   \frac{\partial L(a, 0)}{\partial a} = w(a)\,a, \qquad w(a) > 0 \qquad \text{(eq. 6)}.$$
#
# Log loss has $w(a) = 1/(a(1-a))$ and squared loss $w(a) = 2$. We check eq. 6 with `jax.grad`.

# %%
a_grid = jnp.linspace(0.01, 0.99, 99)
for name, loss, weight in [
    ("log loss", losses.log_loss, losses.log_loss_weight),
    ("squared loss", losses.squared_loss, losses.squared_loss_weight),
]:
    for y in (0.0, 1.0):
        slope = jax.vmap(jax.grad(lambda a, y=y, loss=loss: loss(a, y)))(a_grid)
        gap = float(jnp.max(jnp.abs(slope - weight(a_grid) * (a_grid - y))))
        print(f"{name}, y={y:.0f}: max |dL/da - w(a)(a - y)| = {gap:.1e}")
        assert gap < 1e-9

# %% [markdown]
# Because $w > 0$, the expected loss $\gamma L(a,1) + (1-\gamma) L(a,0)$ has derivative
# $w(a)(a - \gamma)$: it falls until $a = \gamma$ and rises after. A strictly proper loss makes
# the truthful report $c^L(\gamma) = \gamma$ optimal.
#
# ## 2. Class weights (eq. 7) and the optimal scoring rule (Proposition 2, eq. 8)
#
# The $\beta$-weighted loss multiplies the loss on positives by $\beta$ and on negatives by
# $1 - \beta$:
#
# $$L^\beta(a, y) = \beta\, y\, L(a, y) + (1 - \beta)(1 - y) L(a, y) \qquad \text{(eq. 7)}.$$
#
# Its expected loss under posterior $\gamma$ is $\gamma\beta L(a,1) + (1-\gamma)(1-\beta) L(a,0)$.
# Below, for a posterior $\gamma = 0.2$, the expected weighted log loss as a function of the score,
# with its minimum on a fine grid (dot) and the closed-form minimiser of Proposition 2 (dashed).

# %%
gamma0 = 0.2
scores = jnp.linspace(1e-4, 1 - 1e-4, 20_001)
fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), sharex=True)
for ax, beta in zip(axes, BETAS, strict=True):
    expected = gamma0 * losses.beta_weighted_loss(scores, 1.0, beta) + (
        1 - gamma0
    ) * losses.beta_weighted_loss(scores, 0.0, beta)
    grid_argmin = float(scores[jnp.argmin(expected)])
    closed_form = float(iml.optimal_score(gamma0, beta))
    assert abs(grid_argmin - closed_form) < 1e-4  # the grid spacing is 5e-5
    ax.plot(scores, expected, color="C0")
    ax.plot(grid_argmin, float(jnp.min(expected)), "o", color="C3", label="grid minimum")
    ax.axvline(closed_form, ls="--", color="C3", label=rf"$c^\beta(\gamma)$ = {closed_form:.3f}")
    ax.axvline(gamma0, ls=":", color="gray", label=rf"posterior $\gamma$ = {gamma0}")
    ax.set_ylim(0, 3 * float(expected[len(scores) // 2]))
    ax.set_title(rf"$\beta$ = {beta}")
    ax.set_xlabel("score $a$")
    ax.legend(fontsize=8)
axes[0].set_ylabel(r"expected weighted log loss")
fig.tight_layout()
plt.show()

# %% [markdown]
# **Proposition 2.** For any differentiable strictly proper $L$ and $\gamma, \beta \in (0, 1)$,
#
# $$c^\beta(\gamma) = \frac{\beta\gamma}{1 - \beta - \gamma + 2\beta\gamma} \qquad \text{(eq. 8)}.$$
#
# `iml.optimal_score(gamma, beta)` is eq. 8. The rule does not depend on the base loss: solving
# eq. 5 numerically (`iml.optimal_score_for_loss`, bisection on the first-order condition with
# derivatives from autodiff) for log loss, squared loss and a loss built from the weight function
# $w(t) = 1/\sqrt{t(1-t)}$ (with `iml.losses.proper_loss`) gives the same scores.

# %%
gammas = jnp.linspace(0.001, 0.999, 999)
user_base = losses.proper_loss(lambda t: 1.0 / jnp.sqrt(t * (1.0 - t)))
for name, base in [
    ("log", losses.log_loss),
    ("squared", losses.squared_loss),
    ("w = 1/sqrt(t(1-t))", user_base),
]:

    def weighted(a, y, beta, base=base):
        return losses.beta_weighted_loss(a, y, beta, base)

    for beta in BETAS:
        numeric = iml.optimal_score_for_loss(weighted, gammas, beta)
        gap = float(jnp.max(jnp.abs(numeric - iml.optimal_score(gammas, beta))))
        assert gap < 1e-8, (name, beta, gap)
    print(f"base loss {name}: numerical minimiser = eq. 8 (max gap {gap:.1e} at beta=0.99)")

# %% [markdown]
# The paper lists the rule's properties below eq. 8: single-valued, symmetric in $(\beta, \gamma)$,
# increasing in $\gamma$, overscoring for $\beta > 1/2$ and underscoring for $\beta < 1/2$, the
# identity at $\beta = 1/2$, and $c^\beta(1/2) = \beta$ -- so with $\beta = 0.99$ a model that
# believes a coin flip reports 0.99.

# %%
interior = gammas[1:-1]
assert jnp.allclose(iml.optimal_score(interior, 0.5), interior, rtol=1e-14)
assert jnp.allclose(iml.optimal_score(0.5, jnp.array(BETAS)), jnp.array(BETAS), rtol=1e-14)
assert jnp.allclose(iml.optimal_score(0.3, 0.8), iml.optimal_score(0.8, 0.3), rtol=1e-14)
assert bool(jnp.all(jnp.diff(iml.optimal_score(gammas, 0.99)) > 0))
assert bool(jnp.all(iml.optimal_score(interior, 0.9) > interior))
assert bool(jnp.all(iml.optimal_score(interior, 0.1) < interior))
print("c^0.99(0.5) =", float(iml.optimal_score(0.5, 0.99)))

# %% [markdown]
# ### The theoretical calibration curves (Figure 2)
#
# If a model is loss-calibrated (Definition 2) for $L^\beta$, a score $a$ is reported exactly when
# the posterior is $(c^\beta)^{-1}(a)$, so the event rate among cases scored $a$ is
# $(c^\beta)^{-1}(a)$: the curve $(c^\beta(\gamma), \gamma)$. Figure 2 draws it for
# $\beta = 0.5, 0.9, 0.99$ on log-log axes; on the left, the same curves on linear axes.

# %%
gamma_log = jnp.logspace(-4, 0, 400)[:-1]
fig, (lin, log) = plt.subplots(1, 2, figsize=(10, 4.2))
for beta in BETAS:
    lin.plot(iml.optimal_score(gammas, beta), gammas, label=rf"$\beta$ = {beta}")
    log.plot(iml.optimal_score(gamma_log, beta), gamma_log, label=rf"$\beta$ = {beta}")
for ax in (lin, log):
    ax.plot([1e-4, 1], [1e-4, 1], color="gray", ls="--", lw=0.8, label="calibrated (45°)")
    ax.set_xlabel(r"confidence score $a = c^\beta(\gamma)$")
    ax.set_ylabel(r"event rate $P(y = 1 \mid a) = \gamma$")
    ax.legend()
lin.set(xlim=(0, 1), ylim=(0, 1), title="linear axes")
log.set(xscale="log", yscale="log", xlim=(1e-4, 1), ylim=(1e-4, 1), title="log-log axes (Figure 2)")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 3. The loss-corrected confidence score (Corollary 1, eqs. 3 and 12)
#
# Proposition 4: if $c^L$ is single-valued and invertible and the scores are loss-calibrated, the
# posterior given a score is $P(\cdot \mid a) = (c^L)^{-1}(a)$ (eq. 11). For the weighted loss
# (Corollary 1)
#
# $$g^\beta(a) = (c^\beta)^{-1}(a) = \frac{(1 - \beta)\, a}{\beta + (1 - 2\beta)\, a}
#   \qquad \text{(eq. 12, also eq. 3)},$$
#
# which is `iml.loss_corrected_score(a, beta)`. It undoes eq. 8 exactly, and in logits it is a
# shift, $\operatorname{logit} g^\beta(a) = \operatorname{logit} a - \operatorname{logit}\beta$
# (`iml.loss_corrected_logit`). Section 4 of the paper notes it coincides with the undersampling
# correction $h^\delta(a) = \delta a / (1 + (\delta - 1) a)$ of Dal Pozzolo et al. (eq. 13) with
# $\delta = (1 - \beta)/\beta$.

# %%
for beta in BETAS:
    round_trip = iml.loss_corrected_score(iml.optimal_score(gammas, beta), beta)
    error = float(jnp.max(jnp.abs(round_trip - gammas)))
    print(f"beta={beta}: max |g(c(gamma)) - gamma| = {error:.1e}")
    assert error < 1e-6

a = jnp.linspace(0.0, 1.0, 101)
beta = 0.9
delta = (1 - beta) / beta
undersampling = delta * a / (1 + (delta - 1) * a)  # eq. 13
assert jnp.allclose(iml.loss_corrected_score(a, beta), undersampling, rtol=1e-12, atol=1e-15)
logits = jnp.linspace(-8.0, 8.0, 33)
shifted = jax.nn.sigmoid(iml.loss_corrected_logit(logits, beta))
assert jnp.allclose(shifted, iml.loss_corrected_score(jax.nn.sigmoid(logits), beta), rtol=1e-12)

# One call corrects a grid of weights against a vector of scores by broadcasting.
grid = iml.loss_corrected_score(a[None, :], jnp.array(BETAS)[:, None])
print("grid of corrections:", grid.shape)

# %% [markdown]
# ## 4. Checking a rule by its first-order conditions
#
# `iml.check_first_order_conditions(loss, rule, posteriors, weights)` verifies, with autodiff,
# that the expected loss is stationary at `rule(gamma)` (the first-order condition used in the
# proofs of Propositions 2 and 3) and curves upwards there. Its `residual` is the worst relative
# gradient: 0 at a minimiser and of order 1 far from it. Eq. 8 passes; reporting the posterior
# itself (the right rule only for a proper, unweighted loss) fails under $\beta = 0.9$.

# %%
check_gammas = jnp.linspace(0.01, 0.99, 99)
right = iml.check_first_order_conditions(
    losses.beta_weighted_loss, iml.optimal_score, check_gammas, 0.9
)
wrong = iml.check_first_order_conditions(
    losses.beta_weighted_loss, lambda g, beta: g, check_gammas, 0.9
)
print(f"eq. 8:        residual {float(right.residual):.1e}, passed: {right.passed()}")
print(f"report gamma: residual {float(wrong.residual):.2f}, passed: {wrong.passed()}")
assert right.passed() and float(right.residual) < 1e-8
assert not wrong.passed() and float(wrong.residual) > 0.5

fig, ax = plt.subplots(figsize=(6, 3.4))
ax.semilogy(check_gammas, right.relative_gradient + 1e-17, label=r"$c^\beta(\gamma)$ (eq. 8)")
ax.semilogy(check_gammas, wrong.relative_gradient, label=r"report $\gamma$")
ax.set(xlabel=r"posterior $\gamma$", ylabel="relative first-order residual")
ax.set_title(r"First-order conditions under $\beta$ = 0.9")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 5. Many classes (eq. 9, Proposition 3) and the inverse
#
# With $n$ classes, a positive weight matrix $B$ (rows: the true class $y$, columns: the scored
# class $y'$) weighs one-vs-rest binary losses:
#
# $$L^B(a, y) = \sum_{y'} B_{y, y'}\, L(a_{y'}, \mathbf{1}\{y = y'\}) \qquad \text{(eq. 9)}.$$
#
# **Proposition 3.** The optimal scores are
# $c^B_y(\gamma) = \gamma_y B_{y,y} / \sum_{y'} \gamma_{y'} B_{y',y}$ (eq. 10,
# `iml.optimal_score_multiclass`). Each class is scored separately, so the scores need not sum to
# one.
#
# The inverse (`iml.loss_corrected_score_multiclass`) works output by output. Output $y'$ is
# a binary classifier: positives (class $y'$) weigh $B_{y',y'}$, negatives of class $y$ weigh
# $B_{y,y'}$. Given the other classes' posteriors normalised among themselves,
# $q_y = \gamma_y / \sum_{z \ne y'} \gamma_z$, its negatives weigh
# $b_{y'} = \sum_{y \ne y'} q_y B_{y,y'}$, and the output follows Proposition 2 at
# $\beta' = B_{y',y'} / (B_{y',y'} + b_{y'})$ -- on the simplex, exactly Proposition 3's rule.
# Corollary 1 at $\beta'$ inverts it:
#
# $$\gamma_{y'} = \frac{a_{y'}\, b_{y'}}{a_{y'}\, b_{y'} + (1 - a_{y'})\, B_{y',y'}}.$$
#
# Where column $y'$ has equal off-diagonal weights, $b_{y'}$ is that weight and this is a
# closed form; otherwise the outputs are coupled through $q$ and the posterior is the fixed
# point of $\gamma \to q \to b \to \gamma$. A posterior on the simplex is a fixed point, so
# scores in the image of the rule give it back. (The first-order check of section 4 covers this
# rule too, with `domain="box"` for independent one-vs-rest scores.)

# %%
B = jnp.array([[1.0, 2.0, 0.5], [1.5, 1.0, 1.0], [0.7, 3.0, 2.0]])
gamma = jnp.array([0.6, 0.3, 0.1])
scores3 = iml.optimal_score_multiclass(gamma, B)
recovered, residual = iml.loss_corrected_score_multiclass(scores3, B, return_residual=True)
print("posterior        ", np.round(np.asarray(gamma), 4))
print("optimal scores   ", np.round(np.asarray(scores3), 4), "sum", round(float(scores3.sum()), 4))
print("loss-corrected   ", np.round(np.asarray(recovered), 4), f"residual {float(residual):.1e}")
assert float(jnp.max(jnp.abs(recovered - gamma))) < 1e-6
assert float(residual) < 1e-6

# %% [markdown]
# With two classes and $B = \begin{pmatrix} 1-\beta & 1-\beta \\ \beta & \beta \end{pmatrix}$
# (row 1, the positive class, weighs $\beta$) Proposition 3 reduces to Proposition 2.

# %%
beta = 0.9
B2 = jnp.array([[1 - beta, 1 - beta], [beta, beta]])
gamma2 = jnp.stack([1 - gammas, gammas], axis=-1)
two_class = iml.optimal_score_multiclass(gamma2, B2)
assert jnp.allclose(two_class[:, 1], iml.optimal_score(gammas, beta), rtol=1e-12)
assert jnp.allclose(two_class[:, 0], 1 - iml.optimal_score(gammas, beta), rtol=1e-10)

# %% [markdown]
# ### Scores off the image of the rule
#
# A real model's one-vs-rest scores need not be optimal for *any* posterior on the simplex.
# Take $a = (0.9, 0.9, 0.05)$: two classes both scored 0.9 under this $B$. Each output is still
# inverted at the weight its negatives carry, and the result is one posterior per class: its
# entries need not sum to one. The residual $\max_{y'} |a_{y'} - \mathrm{rule}_{y'}(\hat\gamma)|$
# (each output's rule at the $q$ of $\hat\gamma$) is 0 up to rounding: every output's condition
# holds. Renormalising, `renormalise=True`, is a separate step: its posterior lies on the
# simplex, where the rule is Proposition 3's, and its residual says how far that posterior is
# from explaining $a$.

# %%
off_image = jnp.array([0.9, 0.9, 0.05])
gamma_hat, off_residual = iml.loss_corrected_score_multiclass(off_image, B, return_residual=True)
renormalised, renormalised_residual = iml.loss_corrected_score_multiclass(
    off_image, B, return_residual=True, renormalise=True
)
refit = iml.optimal_score_multiclass(renormalised, B)
print(
    "loss-corrected ", np.round(np.asarray(gamma_hat), 4), "sum", round(float(gamma_hat.sum()), 4)
)
print(f"residual        {float(off_residual):.1e}")
print("renormalised   ", np.round(np.asarray(renormalised), 4))
print(
    "c^B(renorm.)   ",
    np.round(np.asarray(refit), 4),
    f"residual {float(renormalised_residual):.3f}",
)
assert float(off_residual) < 1e-6 and float(gamma_hat.sum()) > 1.5
assert abs(float(renormalised.sum()) - 1.0) < 1e-6
assert abs(float(renormalised_residual) - float(jnp.max(jnp.abs(refit - off_image)))) < 1e-6

# With B all ones every output's rule is the identity, and the scores come back unchanged.
unit = iml.loss_corrected_score_multiclass(off_image, jnp.ones((3, 3)))
assert bool(jnp.all(unit == off_image))

# %%
classes = np.arange(3)
fig, (on, off) = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
width = 0.27
on.bar(classes - width, gamma, width, label=r"posterior $\gamma$")
on.bar(classes, scores3, width, label=r"optimal scores $c^B(\gamma)$")
on.bar(classes + width, recovered, width, label="loss-corrected", hatch="//", alpha=0.7)
on.set_title(rf"In the image: residual {float(residual):.0e}")
off.bar(classes - width, off_image, width, color="C1", label="observed scores $a$")
off.bar(classes, gamma_hat, width, color="C2", label=r"loss-corrected $\hat\gamma$")
off.bar(classes + width, renormalised, width, color="C4", label=r"$\hat\gamma$ renormalised")
off.set_title(
    rf"Off the image: $\hat\gamma$ sums to {float(gamma_hat.sum()):.2f}, residual "
    rf"{float(off_residual):.0e}"
)
for ax in (on, off):
    ax.set_xticks(classes, [f"class {k}" for k in classes])
    ax.legend(fontsize=8)
on.set_ylabel("probability / score")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Summary
#
# | paper | `iml` |
# | --- | --- |
# | eq. 6, Definition 4 (proper loss, weight $w$) | `losses.log_loss`, `losses.proper_loss` |
# | eq. 7 ($\beta$-weighted loss) | `losses.beta_weighted_loss` |
# | eq. 8, Proposition 2 | `optimal_score`, `optimal_logit`, `optimal_score_for_loss` |
# | eqs. 3, 12, Corollary 1 | `loss_corrected_score`, `loss_corrected_logit` |
# | eq. 11, Proposition 4 (any loss) | `loss_corrected_score_for_loss` |
# | eq. 9 ($B$-weighted loss) | `losses.matrix_weighted_loss` |
# | eq. 10, Proposition 3 | `optimal_score_multiclass` |
# | inverse of Proposition 3, output by output (Cor. 1) | `loss_corrected_score_multiclass` |
# | first-order conditions of eq. 5 | `check_first_order_conditions` |
#
# Notebook 04 applies the same machinery to a loss of your own.
