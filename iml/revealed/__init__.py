"""What the machine learns: revealed experiments and tests of learning models across losses.

The paper separates *what* a model learned, its statistical experiment (signals and Bayesian
posteriors), from *how* it reports, the optimal scoring rule ``c^L`` (eq. ``choice``). This package
recovers the experiments of ``K`` models trained under losses ``L_1, ..., L_K`` on the same
labelled observations and tests two economic models of learning on them, after Caplin & Dean
(2015, *Revealed preference, rational inattention, and costly information acquisition*, AER) and
Caplin, Martin & Marx (2025, *Modeling machine learning: a cognitive economic approach*, JET):

* **Revealed experiment** (:func:`revealed_experiments`): model ``k``'s scores, binned, give the
  probability ``P_k(s)`` of each signal (bin) ``s`` and its posterior
  ``gamma_{k,s} = P_k(y = 1 | s)``; all models share the prior ``pi = P(y = 1)``.
* **Minimised expected loss** ``l*_k(gamma) = min_a [gamma L_k(a, 1) + (1 - gamma) L_k(a, 0)]``
  (:meth:`iml.LossSpec.minimised_expected_loss`; ``Z h(c^beta(gamma))`` for the beta-weighted log
  loss of eq. ``b-loss-bin``, with the paper's weights ``beta`` and ``1 - beta``).
* **Value matrix** (:func:`value_matrix`): ``G[k, j] = -sum_s P_j(s) l*_k(gamma_{j,s})``, the value
  in decision problem ``k`` of the experiment learned under loss ``j``, re-scored optimally for
  ``k``.
* **Mutual information** (:func:`mutual_information`) ``I_k`` in nats, and the information
  about each class (:func:`class_information`, one-vs-rest) ``I_{k,c}``.
* **NIAS** (no improving action switches): each model reports optimally given its revealed
  posteriors. That is loss calibration (Definition 2): :func:`nias_test` compares each bin's
  positives with those its loss-corrected scores expect (each model's loss-calibration
  chi-square), with Holm's familywise control over the models.
* **NIS** (no improving switches, :func:`nis_check`): capacity-constrained learning, one feasible
  set of experiments for every loss, implies ``G[k, k] >= G[k, j]`` for all ``j, k``.
* **NIAC** (no improving attention cycles, :func:`niac_check`): costly learning, any cost of
  experiments, implies ``sum_i G[k_i, k_i] >= sum_i G[k_i, k_{i+1}]`` on every cycle: the identity
  solves ``max_sigma sum_k G[k, sigma(k)]`` (cyclical monotonicity), equivalently the graph with
  edge weights ``w(j -> k) = G[k, k] - G[k, j]`` has no negative cycle.
* **Revealed cost bounds** (:func:`revealed_cost_bounds`): costly learning implies
  ``C_k - C_j <= G[k, k] - G[k, j]``; with ``C_ref = 0`` shortest paths bound each ``C_k``.
* **Shannon cost** (:func:`shannon_lambda_interval`): ``C_k = lambda I_k`` requires
  ``lambda (I_k - I_j) <= G[k, k] - G[k, j]``, an interval for ``lambda``.
* **Shannon agent** (:func:`shannon_agent`): the learner with that cost, which concavifies
  ``N(gamma) = -l*(gamma) + lambda H(gamma)`` at the prior; for losses of ``n`` classes by
  Blahut-Arimoto over optimal scores (:func:`shannon_class_agent`).

:func:`reveal` runs everything with a paired bootstrap: each replicate is one vector of
resampling counts (:func:`paired_bootstrap_weights`), used as observation weights for every model
at once (the same resample for every ``k``, so that differences between models are resampled
jointly, and without gathering the data). NIS and NIAC are declared violated only when a one-sided
bootstrap lower confidence bound of their margin is above zero; the critical value comes from the
recentred bootstrap at the least-favourable null (every inequality binding), which holds the size
however many inequalities are compared (see :func:`reveal`).

**Models of n classes.** Caplin & Dean's framework holds for any finite set of states, and every
function above takes the class scores ``[K, N, n]`` of models trained under losses of ``n``
class scores (the B-weighted loss of eq. ``b-loss-multi``, the class-weighted softmax, the
softmax focal loss, any registered one) by the same code. A model's signals are the cells of
the simplex of its loss-corrected posteriors (:func:`iml.revealed.bins.cell_signals`: its top
class, then quantiles of its confidence within that class, merged alike for every model until
each cell holds :data:`MIN_COUNT` expected observations of its top class and of the others);
posteriors ``gamma_{k,s,c} = P_k(y = c | s)`` carry a class axis ``[K, S, n]``, and
``l*_k(gamma) = min_a sum_c gamma_c L_k(a, c)``. NIS, NIAC, the cost bounds and ``lambda`` are
functions of ``G`` alone, so they are unchanged; NIAS is one multinomial chi-square per model
over its cells (:func:`multinomial_calibration_test`), with Holm over the models. The binary
path is the two-class case: binary experiments read as posteriors ``[1 - gamma, gamma]`` under
the class-weighted softmax with weights ``(1 - beta, beta)`` have the same ``G`` and ``I``.

One idea per module, all of whose public names are imported here:

* :mod:`~iml.revealed.losses`: the ``K`` models' binary losses, read as one batched
  :class:`iml.LossSpec` or a list, with ``l*_k`` and the loss-corrected scores of every model.
* :mod:`~iml.revealed.bins`: each model's signals, the bins of its scores (:data:`STRATEGIES`:
  quantile, uniform, or adaptive, merged until each holds :data:`MIN_COUNT` expected positives
  and negatives), or the cells of its class posteriors.
* :mod:`~iml.revealed.experiments`: revealed experiments ``P_k(s)`` and posteriors
  ``gamma_{k,s}``, from signals, from scores or given directly (:class:`RevealedExperiments`),
  and what they are worth: the value matrix ``G`` and the mutual information ``I_k``.
* :mod:`~iml.revealed.learning_tests`: the tests of models of learning: NIS and NIAC on ``G``
  (with the host-side NIAC checks and the revealed cost bounds) and NIAS on the scores.
* :mod:`~iml.revealed.shannon`: Shannon cost, the ``lambda`` interval and the Shannon agent.
* :mod:`~iml.revealed.simulation`: observations from given experiments, and Gaussian agents.
* :mod:`~iml.revealed.report`: :func:`reveal` with its paired bootstrap and its
  :class:`RevealedReport`.

Input checks shared with the calibration analysis live in :mod:`iml.calibration._checks`, and the
resampling (rows and seeds) and percentile intervals in :mod:`iml._bootstrap`.

Conventions: arrays follow ``[..., K, S]`` for ``K`` models and ``S`` signals; leading axes are
batches (bootstrap replicates, data sets). ``scores`` are ``[K, N]`` positive-class scores in
``[0, 1]`` of ``K`` models on the same ``N`` observations, with ``{0, 1}`` ``labels`` ``[N]``;
``losses`` are the ``K`` models' binary losses, one per model: a batched :class:`iml.LossSpec`
(batch shape ``(K,)``), an array of betas, or a sequence of anything :func:`iml.loss_spec` reads;
``G`` is a value matrix ``[..., K, K]`` (:func:`value_matrix`). Models of ``n`` classes have
``scores`` ``[K, N, n]``, class-index ``labels`` ``[N]`` and losses of ``n`` class scores.
Every function here is pure JAX and works under ``jax.jit`` and ``jax.vmap`` except the host-side
checks :func:`niac_assignment_check` and :func:`niac_brute_force`. Concrete bad input raises
``ValueError`` naming the argument; under a transformation the affected outputs are NaN.
"""

# MIN_COUNT and STRATEGIES are imported from here by the pipeline and the experiments.
from iml._bootstrap import paired_bootstrap_weights
from iml.revealed.bins import MIN_COUNT, STRATEGIES  # noqa: F401
from iml.revealed.experiments import (
    RevealedExperiments,
    class_information,
    experiments_from_posteriors,
    experiments_from_signals,
    mutual_information,
    revealed_experiments,
    value_matrix,
)
from iml.revealed.learning_tests import (
    CostBounds,
    NIACCheck,
    NIASTest,
    NISCheck,
    multinomial_calibration_test,
    niac_assignment_check,
    niac_brute_force,
    niac_check,
    nias_test,
    nis_check,
    revealed_cost_bounds,
)
from iml.revealed.report import MarginTest, RevealedReport, reveal
from iml.revealed.shannon import (
    LambdaInterval,
    shannon_agent,
    shannon_class_agent,
    shannon_lambda_interval,
)
from iml.revealed.simulation import simulate_gaussian_agents, simulate_observations

__all__ = [
    "CostBounds",
    "LambdaInterval",
    "MarginTest",
    "NIACCheck",
    "NIASTest",
    "NISCheck",
    "RevealedExperiments",
    "RevealedReport",
    "class_information",
    "experiments_from_posteriors",
    "experiments_from_signals",
    "multinomial_calibration_test",
    "mutual_information",
    "niac_assignment_check",
    "niac_brute_force",
    "niac_check",
    "nias_test",
    "nis_check",
    "paired_bootstrap_weights",
    "reveal",
    "revealed_cost_bounds",
    "revealed_experiments",
    "shannon_agent",
    "shannon_class_agent",
    "shannon_lambda_interval",
    "simulate_gaussian_agents",
    "simulate_observations",
    "value_matrix",
]
