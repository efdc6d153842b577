"""The signal-based representation (SBR) of data, Definition 3, and its conditions checked
from data and from exact tables (Proposition 1; the conditions are listed in :mod:`iml.sbr`).

:func:`signal_based_representation` builds the canonical SBR ``S = A`` of Proposition 1's proof
from data, and :func:`signal_based_representation_from_joint` from an exact table; each returns a
:class:`SignalBasedRepresentation` that reports every condition, with condition 3 measured
through the loss: per signal, how far ``alpha^s`` is from ``c^L(gamma^s)``, how much expected loss
replacing it would save, and a score test of the first-order condition.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.sbr.simulation import loss_from_keywords, optimal
from iml.spec import LossLike, LossSpec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "SignalBasedRepresentation",
    "signal_based_representation",
    "signal_based_representation_from_joint",
]


@dataclasses.dataclass(frozen=True)
class SignalBasedRepresentation:
    """The canonical SBR of a distribution of scores and labels, and how well it holds.

    Per signal (``S`` of them; binary scores are positive-class scores): ``signal_scores`` to
    ``z``; then the conditions of Definition 3 and Proposition 1 (residuals: 0 when exact), from
    ``prior_residual`` on.

    Attributes:
      signal_scores: ``alpha^s`` ``[S]`` or ``[S, n]``.
      joint: ``pi(s, y)`` ``[S, k]``.
      prior: ``pi(y) = sum_s pi(s, y)`` ``[k]``.
      posteriors: ``gamma^s`` ``[S, k]`` by Bayes' rule (the recovered posterior per signal).
      counts: observations per signal (``None`` for a population table).
      optimal_scores: ``c^L(gamma^s)``.
      distance: ``|alpha^s - c^L(gamma^s)|`` (max over classes when multiclass).
      loss_reduction: ``sum_y gamma^s_y [L(alpha^s, y) - L(c^L(gamma^s), y)]``, the expected
        loss saved by switching this signal's score to the optimal one (eq. ``loss-calibration``).
      z: per signal, the score test of the first-order condition: the mean gradient of the loss
        at ``alpha^s`` over the signal's observations divided by its standard error under the
        null that ``alpha^s`` is optimal (max over classes when multiclass; ``NaN`` without
        counts). Binary, it equals ``(gamma^s_1 - g(alpha^s)) / sqrt(g (1 - g) / n_s)`` with
        ``g`` the posterior that makes ``alpha^s`` optimal.
      prior_residual: condition 1, ``max_y |pi(y) - P(y)|`` with ``P(y)`` the label frequency.
      bayes_residual: condition 2, ``max |gamma^s_y pi(s) - pi(s, y)|``.
      worst_distance, worst_signal: condition 3, ``max_s`` distance and where.
      total_loss_reduction: condition 3 in loss: ``sum_s pi(s) loss_reduction_s``.
      max_abs_z, z_critical: condition 3 as a test (``z_critical`` from Bonferroni at
        ``significance``; ``None`` when judged by ``atol`` on the distance).
      model_residual: condition 4, the largest gap between an observation's score and its
        signal's ``alpha^s`` (0 for the canonical ``S = A``; positive when ``signals`` were
        given and scores vary within a signal).
      distinct_gap, distinct_pair: the distinct-distributions condition:
        ``min_{s != s'} max_y |pi(s, y) - pi(s', y)|`` and the pair attaining it.
      holds: condition name -> bool.
    """

    signal_scores: Array
    joint: Array
    prior: Array
    posteriors: Array
    counts: Array | None
    optimal_scores: Array
    distance: Array
    loss_reduction: Array
    z: Array
    prior_residual: float
    bayes_residual: float
    worst_distance: float
    worst_signal: int
    total_loss_reduction: float
    max_abs_z: float
    z_critical: float | None
    model_residual: float
    distinct_gap: float
    distinct_pair: tuple[int, int] | None
    holds: dict[str, bool]

    @property
    def has_sbr(self) -> bool:
        """Conditions 1-4 of Definition 3 all hold."""
        keys = ("prior", "bayes", "loss_minimizing", "generated_by_model")
        return all(self.holds[k] for k in keys)

    def failures(self) -> list[str]:
        """One line per failing condition, saying by how much."""
        lines = []
        if not self.holds["prior"]:
            lines.append(f"condition 1 (correct prior) fails by {self.prior_residual:.3g}")
        if not self.holds["bayes"]:
            lines.append(f"condition 2 (Bayes' rule) fails by {self.bayes_residual:.3g}")
        if not self.holds["loss_minimizing"]:
            how = (
                f"max |z| = {self.max_abs_z:.3g} > {self.z_critical:.3g}; "
                if self.z_critical is not None
                else ""
            )
            lines.append(
                "condition 3 (loss-minimising scores) fails: "
                f"{how}worst |alpha - c^L(gamma)| = {self.worst_distance:.3g} at signal "
                f"{self.worst_signal}; expected loss reduction {self.total_loss_reduction:.3g}"
            )
        if not self.holds["generated_by_model"]:
            lines.append(
                f"condition 4 (scores generated by the model) fails by {self.model_residual:.3g}"
            )
        if not self.holds["distinct_distributions"]:
            lines.append(
                "distinct-distributions condition fails: signals "
                f"{self.distinct_pair} have label distributions {self.distinct_gap:.3g} apart"
            )
        return lines

    def __str__(self) -> str:
        verdict = "has an SBR" if self.has_sbr else "has no SBR"
        details = "; ".join(self.failures()) or "all conditions hold"
        return f"SignalBasedRepresentation({len(self.joint)} signals: {verdict}; {details})"


def _distinct_gap(joint: np.ndarray) -> tuple[float, tuple[int, int] | None]:
    """``min_{s != s'} max_y |joint[s] - joint[s']|`` and the pair attaining it."""
    if joint.shape[0] < 2:
        return float("inf"), None
    gaps, partners = _nearest_rows(jnp.asarray(joint))
    i = int(jnp.argmin(gaps))
    return float(gaps[i]), (min(i, int(partners[i])), max(i, int(partners[i])))


@jax.jit
def _nearest_rows(j: Array) -> tuple[Array, Array]:
    """Per row, the L-infinity distance to the nearest other row and its index (in blocks)."""
    S = j.shape[0]

    def row_min(i: Array) -> tuple[Array, Array]:
        d = jnp.max(jnp.abs(j - j[i]), axis=1)
        d = jnp.where(jnp.arange(S) == i, jnp.inf, d)
        k = jnp.argmin(d)
        return d[k], k

    return jax.lax.map(row_min, jnp.arange(S), batch_size=min(S, 256))


@jax.jit
def _condition3(
    spec: LossSpec, alpha: Array, gamma: Array, counts: Array | None
) -> tuple[Array, Array, Array, Array]:
    """Per signal: ``c^L(gamma)``, distance, expected-loss reduction and the score-test z."""
    k = gamma.shape[1]
    labels = jnp.arange(k)
    c = optimal(spec, gamma)

    def expected_loss(a: Array, g: Array) -> Array:
        values = jax.vmap(lambda y: spec.loss(a, y))(labels)
        return jnp.sum(jnp.where(g > 0, g * values, 0.0))  # 0 log 0 = 0

    reduction = jax.vmap(expected_loss)(alpha, gamma) - jax.vmap(expected_loss)(c, gamma)
    distance = jnp.abs(alpha - c)
    if spec.multiclass:
        distance = jnp.max(distance, axis=-1)
    if counts is None:
        return c, distance, reduction, jnp.full(alpha.shape[0], jnp.nan)

    # h[s, y] = dL(alpha^s, y)/da: per-label gradients at the reported score.
    def grads(a: Array) -> Array:
        return jax.vmap(lambda y: jax.grad(lambda t: jnp.sum(spec.loss(t, y)))(a))(labels)

    h = jax.vmap(grads)(alpha)  # [S, k] (binary) or [S, k, n]
    if spec.multiclass:
        # The null draws one label per signal: a distribution over classes, so the B-weighted
        # inverse's one posterior per output is renormalised here.
        null = jnp.clip(spec.loss_corrected_score(alpha), 0.0, 1.0)
        null = null / jnp.sum(null, axis=-1, keepdims=True)
        mean = jnp.einsum("sy,syn->sn", gamma, h)
        var = jnp.einsum("sy,syn->sn", null, h**2)
    else:
        d0, d1 = h[:, 0], h[:, 1]
        null = d0 / (d0 - d1)  # the posterior at which alpha^s satisfies the first-order condition
        mean = gamma[:, 1] * d1 + gamma[:, 0] * d0
        var = null * d1**2 + (1.0 - null) * d0**2
    z = mean / jnp.sqrt(var / counts.reshape((-1,) + (1,) * (mean.ndim - 1)))
    if spec.multiclass:
        z = z[jnp.arange(z.shape[0]), jnp.argmax(jnp.abs(z), axis=-1)]
    return c, distance, reduction, z


def _represent(
    spec: LossSpec,
    alpha: Array,
    joint: Array,
    counts: Array | None,
    label_freq: Array,
    model_residual: float,
    atol: float,
    significance: float | None,
) -> SignalBasedRepresentation:
    mass = jnp.sum(joint, axis=1)
    gamma = joint / mass[:, None]
    prior = jnp.sum(joint, axis=0)
    c, distance, reduction, z = _condition3(spec, alpha, gamma, counts)
    prior_residual = float(jnp.max(jnp.abs(prior - label_freq)))
    bayes_residual = float(jnp.max(jnp.abs(gamma * mass[:, None] - joint)))
    worst = int(jnp.argmax(distance))
    max_abs_z = float(jnp.nanmax(jnp.abs(z))) if counts is not None else float("nan")
    z_critical = None
    if significance is not None:
        if counts is None:
            raise ValueError("significance needs data (counts per signal), not a population table")
        tail = significance / (2 * joint.shape[0])
        z_critical = float(jax.scipy.stats.norm.ppf(1.0 - tail))
        loss_minimizing = max_abs_z <= z_critical
    else:
        loss_minimizing = float(distance[worst]) <= atol
    gap, pair = _distinct_gap(np.asarray(joint))
    holds = {
        "prior": prior_residual <= atol,
        "bayes": bayes_residual <= atol,
        "loss_minimizing": bool(loss_minimizing),
        "generated_by_model": model_residual <= atol,
        "distinct_distributions": gap > 0.0,
    }
    return SignalBasedRepresentation(
        signal_scores=alpha,
        joint=joint,
        prior=prior,
        posteriors=gamma,
        counts=counts,
        optimal_scores=c,
        distance=distance,
        loss_reduction=reduction,
        z=z,
        prior_residual=prior_residual,
        bayes_residual=bayes_residual,
        worst_distance=float(distance[worst]),
        worst_signal=worst,
        total_loss_reduction=float(jnp.sum(mass * reduction)),
        max_abs_z=max_abs_z,
        z_critical=z_critical,
        model_residual=float(model_residual),
        distinct_gap=gap,
        distinct_pair=pair,
        holds=holds,
    )


def signal_based_representation_from_joint(
    signal_scores: ArrayLike,
    joint: ArrayLike,
    loss: LossLike,
    *,
    atol: float = 1e-5,
) -> SignalBasedRepresentation:
    """The canonical SBR of an exact distribution ``P^L(a, y)`` given as a table.

    Use it for populations (e.g. :func:`model_distribution`), where condition 3 can be judged
    exactly: it holds when every ``|alpha^s - c^L(gamma^s)| <= atol``.

    Args:
      signal_scores: the distinct scores ``a`` ``[S]`` (binary) or ``[S, n]``.
      joint: ``P^L(a, y)`` ``[S, k]``, non-negative, summing to one; rows of zero mass are
        dropped.
      atol: tolerance for conditions 1-4.
    """
    spec = loss_from_keywords(None, None, loss)
    alpha = np.asarray(signal_scores, dtype=np.float32)
    p = np.asarray(joint, dtype=np.float32)
    if p.ndim != 2 or p.shape[0] != alpha.shape[0] or p.size == 0:
        raise ValueError(f"joint must be [S, k] with S = {alpha.shape[0]}, got {p.shape}")
    if np.isnan(p).any() or (p < 0).any() or not np.isclose(p.sum(), 1.0, atol=1e-4):
        raise ValueError("joint must be non-negative, free of NaN and sum to one")
    if np.isnan(alpha).any():
        raise ValueError("signal_scores contains NaN")
    _check_spec_shapes(spec, alpha, p.shape[1])
    keep = p.sum(1) > 0
    alpha, p = alpha[keep], p[keep]
    return _represent(
        spec, jnp.asarray(alpha), jnp.asarray(p), None, jnp.asarray(p.sum(0)), 0.0, atol, None
    )


def _check_spec_shapes(spec: LossSpec, alpha: np.ndarray, k: int) -> None:
    if spec.multiclass:
        n = spec.n_classes
        if alpha.ndim != 2 or alpha.shape[1] != n or k != n:
            raise ValueError(
                f"the {spec.describe()} has {n} classes: scores must be [N, {n}] with {n} labels"
            )
    elif alpha.ndim != 1 or k != 2:
        raise ValueError(
            f"the {spec.describe()} is binary: it needs positive-class scores [N] and labels in "
            "{0, 1}"
        )


def signal_based_representation(
    scores: ArrayLike,
    labels: ArrayLike,
    loss: LossLike,
    *,
    n_bins: int | None = None,
    strategy: str = "quantile",
    signals: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
    atol: float = 1e-5,
    significance: float | None = None,
) -> SignalBasedRepresentation:
    """Build the canonical SBR of Proposition 1 from data and check Definition 3.

    Signals: by default every distinct score (or score vector) is its own signal, ``S = A``.
    Continuous scores make every observation its own signal, which leaves one label per signal:
    condition 3 then fails trivially and the distinct-distributions condition too. So bin them:
    ``n_bins`` groups binary scores into quantile (or uniform) bins and takes each bin's
    (weighted) mean score as its signal's score ``alpha^s``; within a bin posteriors vary, so the
    bin's event rate matches ``c^L``'s inverse only up to the curvature of ``c^L`` over the bin
    (fine bins make that small). Or pass ``signals``, an integer id per observation (e.g. the
    simulator's, or any grouping of multiclass scores): ``alpha^s`` is the signal's mean score,
    and condition 4 measures how far scores vary within a signal.

    Condition 3 on finite data: the empirical posterior ``gamma^s`` is an estimate, so exact
    equality ``alpha^s = c^L(gamma^s)`` never holds. With ``significance`` (e.g. ``0.01``) the
    condition is judged by the score test ``z`` of each signal against a Bonferroni critical
    value; without it, by ``worst_distance <= atol`` (right for exact tables).

    Args:
      scores: ``[N]`` positive-class scores (binary) or ``[N, n]`` score vectors (with ``B``).
      labels: ``[N]`` labels in ``{0, 1}`` (binary) or ``{0, ..., n - 1}``.
      n_bins: bin binary scores into this many signals (``None``: distinct scores).
      strategy: ``"quantile"`` or ``"uniform"`` bins.
      signals: optional integer signal per observation (overrides ``n_bins``).
      sample_weight: optional non-negative weights ``[N]``.
      atol: tolerance for conditions 1, 2, 4 (and 3 without ``significance``).
      significance: family-wise level of the condition-3 score test over signals.

    Returns:
      A :class:`SignalBasedRepresentation`; ``.has_sbr`` and ``.failures()`` say which
      condition fails and by how much; ``.posteriors`` are the recovered posteriors.
    """
    spec = loss_from_keywords(None, None, loss)
    s = np.asarray(scores)
    if s.size == 0:
        raise ValueError("scores is empty")
    s = s.astype(np.float64)
    V.check_unit("scores", s)
    n_classes = spec.n_classes
    _check_spec_shapes(spec, s, n_classes)
    N = s.shape[0]
    y = np.asarray(labels)
    V.check_shape("labels", y, (N,))
    if np.isnan(y.astype(float)).any() or not np.isin(y, np.arange(n_classes)).all():
        raise ValueError(f"labels must take values in {{0, ..., {n_classes - 1}}}")
    y = y.astype(np.int64)
    w = np.ones(N) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    V.check_shape("sample_weight", w, (N,))
    V.check_weights("sample_weight", w)
    if significance is not None:
        V.check_open_unit("significance", significance)
    if strategy not in ("quantile", "uniform"):
        raise ValueError(f"strategy must be 'quantile' or 'uniform', got {strategy!r}")

    if signals is not None:
        sig = np.asarray(signals)
        V.check_shape("signals", sig, (N,))
        _, index = np.unique(sig, return_inverse=True)
    elif n_bins is not None:
        if spec.multiclass:
            raise ValueError("n_bins bins binary scores; group multiclass scores with signals=")
        V.check_count("n_bins", n_bins)
        if strategy == "quantile":
            edges = np.quantile(s, np.linspace(0, 1, n_bins + 1))
        else:
            edges = np.linspace(0, 1, n_bins + 1)
        raw = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, n_bins - 1)
        _, index = np.unique(raw, return_inverse=True)  # drop empty bins
    else:
        _, index = np.unique(s, axis=0 if s.ndim == 2 else None, return_inverse=True)
    index = index.reshape(-1)
    S = int(index.max()) + 1

    mass = np.bincount(index, weights=w, minlength=S)
    keep = mass > 0
    flat = s.reshape(N, -1) * w[:, None]
    alpha = (
        np.stack(
            [np.bincount(index, weights=flat[:, j], minlength=S) for j in range(flat.shape[1])],
            axis=1,
        )
        / np.where(keep, mass, 1.0)[:, None]
    )
    alpha = alpha.reshape((S, *s.shape[1:]))
    joint = np.zeros((S, n_classes))
    np.add.at(joint, (index, y), w)
    total = w.sum()
    counts = np.bincount(index, minlength=S).astype(float)
    spread = np.abs(s - alpha[index])
    model_residual = float(spread.max()) if signals is not None else 0.0
    label_freq = np.bincount(y, weights=w, minlength=n_classes) / total
    return _represent(
        spec,
        jnp.asarray(alpha[keep], jnp.float32),
        jnp.asarray(joint[keep] / total, jnp.float32),
        jnp.asarray(counts[keep], jnp.float32),
        jnp.asarray(label_freq, jnp.float32),
        model_residual,
        atol,
        significance,
    )
