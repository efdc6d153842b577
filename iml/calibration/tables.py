"""Metric tables: the metrics of one vector of binary scores or one matrix of class scores (the
rows of the reports' and sweeps' tables), and the table of a grid of losses: each loss's scores
from its logits, its loss-corrected scores (Proposition 4; Corollary 1 for a beta) and the
metrics of both, as a dictionary (its Markdown: :mod:`iml.pipeline.markdown`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from iml import _validation as V
from iml.calibration._checks import check_binary
from iml.calibration.comparison import ece_intervals, multiclass_ece_intervals
from iml.calibration.loss_calibration import (
    POWER_ODDS,
    calibration_test,
    holm_adjusted,
    loss_calibration_verdict,
)
from iml.calibration.metrics import auroc, brier_score, expected_calibration_error, mean_log_loss
from iml.calibration.smooth import smooth_ece
from iml.grids import loss_grid
from iml.spec import LossLike, LossSpec

Array = jax.Array
ArrayLike = jax.typing.ArrayLike

__all__ = [
    "METRICS",
    "MULTICLASS_METRICS",
    "RENORMALISED",
    "loss_calibration_summary",
    "loss_calibration_verdicts",
    "loss_corrected_scores",
    "multiclass_score_metrics",
    "score_metrics",
    "score_metrics_by_row",
    "scores_from_logits",
    "table_by_loss",
]


#: The metrics of one binary score vector (:func:`score_metrics`), in table order.
METRICS = ("ece", "ece_debiased", "smooth_ece", "brier", "log_loss", "auroc")
#: The metrics of one multiclass score matrix (:func:`multiclass_score_metrics`), in table order.
MULTICLASS_METRICS = ("top_label_ece", "classwise_ece", "brier", "log_loss", "accuracy")
#: The method of :func:`table_by_loss` for the B-weighted loss's corrected one-vs-rest posteriors
#: divided by their row's sum (``iml.loss_corrected_score_multiclass(..., renormalise=True)``).
RENORMALISED = "loss_corrected_renormalised"
_CLIP = 1e-7


def score_metrics(scores: ArrayLike, labels: ArrayLike, n_bins: int = 10) -> dict[str, float]:
    """The :data:`METRICS` of binary scores, as floats: ECE (l1, quantile bins), the debiased ECE
    (l2, Kumar, Liang & Ma 2019), the smooth ECE (Blasiok & Nakkiran 2023), the Brier score, the
    log loss and the AUROC. Scores are clipped to ``[1e-7, 1 - 1e-7]`` first."""
    return score_metrics_by_row(np.asarray(scores)[None], labels, n_bins)[0]


def score_metrics_by_row(
    scores: ArrayLike, labels: ArrayLike, n_bins: int = 10
) -> list[dict[str, float]]:
    """:func:`score_metrics` of every row of ``scores [m, N]`` against the same ``labels [N]``,
    computed in one compiled program (the metrics vmapped over blocks of rows), which is several
    times faster than a loop over the rows. The values equal each row's alone to float32
    rounding. A row holding NaN (loss-corrected scores where the rule has no inverse) gets NaN
    metrics and ``"nan_scores"``, how many of its scores are NaN, and the other rows are scored
    as usual."""
    raw = np.asarray(scores, np.float64)
    if raw.ndim < 2 or raw.shape[0] == 0:
        raise ValueError(f"scores must be [m, N] with m >= 1, got shape {raw.shape}")
    missing = nan_counts(raw)
    s = _clipped_float32(raw, 0.5)
    y = np.asarray(labels, np.int32)
    for row, count in zip(s, missing, strict=True):
        check_binary(row if count == 0 else np.full_like(row, 0.5), y, None, n_bins)
    values = np.asarray(_metric_rows(jnp.asarray(s), jnp.asarray(y), n_bins), np.float64)
    values[missing > 0] = np.nan
    rows = [dict(zip(METRICS, map(float, row), strict=True)) for row in values]
    for row, count in zip(rows, missing, strict=True):
        if count:
            row["nan_scores"] = int(count)
    return rows


def _clipped_float32(scores: np.ndarray, fill: float) -> np.ndarray:
    """``clip(nan_to_num(scores, nan=fill), 1e-7, 1 - 1e-7)`` as float32: the same numbers made
    from the float32 scores (rounding to float32 is monotone, so clipping at the bounds' float32
    values after it clips as before it), without the float64 passes."""
    s = np.asarray(scores, np.float32)
    nan = np.isnan(s)
    if nan.any():
        s = np.where(nan, np.float32(fill), s)
    return np.clip(s, np.float32(_CLIP), np.float32(1 - _CLIP))


def nan_counts(scores: np.ndarray) -> np.ndarray:
    """How many observations of each row of ``scores [m, N(, n)]`` hold a NaN score, ``[m]``."""
    nan = np.isnan(scores)
    return (nan.any(axis=-1) if nan.ndim == 3 else nan).sum(axis=1)


# Rows that score_metrics_by_row vmaps at once (its memory: this many rows' sorts and kernels).
_METRIC_ROWS = 64


@functools.partial(jax.jit, static_argnums=2)
def _metric_rows(scores: Array, labels: Array, n_bins: int) -> Array:
    def one(s: Array) -> Array:  # the public metrics; their checks are no-ops when traced
        return jnp.stack(
            [
                expected_calibration_error(s, labels, n_bins, "quantile"),
                expected_calibration_error(s, labels, n_bins, "quantile", norm="l2", debias=True),
                smooth_ece(s, labels).ece,
                brier_score(s, labels),
                mean_log_loss(s, labels),
                auroc(s, labels),
            ]
        )

    return jax.lax.map(one, scores, batch_size=_METRIC_ROWS)


def _multiclass_row_metrics(scores: np.ndarray, labels: np.ndarray, n_bins: int) -> dict:
    """:func:`multiclass_score_metrics`, or NaN metrics and ``"nan_scores"`` (the observations
    with a NaN class score) where the scores hold NaN."""
    count = int(np.isnan(scores).any(axis=-1).sum())
    if count == 0:
        return multiclass_score_metrics(scores, labels, n_bins)
    return {**dict.fromkeys(MULTICLASS_METRICS, float("nan")), "nan_scores": count}


def multiclass_score_metrics(
    scores: ArrayLike, labels: ArrayLike, n_bins: int = 10
) -> dict[str, float]:
    """The :data:`MULTICLASS_METRICS` of class scores ``[N, n]``, as floats.

    ``top_label_ece`` and ``classwise_ece`` are :func:`expected_calibration_error` (l1, quantile
    bins) of the top score and the mean over classes; ``brier`` sums over classes; ``log_loss``
    is ``-log a_y`` of the true class's score; ``accuracy`` is that of the top score. Scores are
    taken as the model reports them (rows need not sum to one: a one-vs-rest model's do not) and
    clipped to ``[1e-7, 1 - 1e-7]``.
    """
    s = np.clip(np.asarray(scores, np.float64), _CLIP, 1 - _CLIP).astype(np.float32)
    y = np.asarray(labels, np.int32)
    return {
        "top_label_ece": float(expected_calibration_error(s, y, n_bins, "quantile")),
        "classwise_ece": float(
            expected_calibration_error(s, y, n_bins, "quantile", multiclass="classwise")
        ),
        "brier": float(brier_score(s, y)),
        "log_loss": float(mean_log_loss(s, y)),
        "accuracy": float(np.mean(np.argmax(s, axis=-1) == y)),
    }


def scores_from_logits(losses: LossSpec, logits: ArrayLike) -> np.ndarray:
    """The scores ``[m, ...]`` that logits ``[m, ...]`` of a grid's members stand for
    (:meth:`iml.LossSpec.link` of each loss), in float64."""
    if not losses.multiclass:  # every binary loss reads its logit through the sigmoid
        return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(logits, np.float64)))
    z = jnp.asarray(logits, jnp.float32)
    spec = jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.float32), losses)
    return np.asarray(jax.vmap(LossSpec.link)(spec, z), np.float64)


def loss_corrected_scores(losses: LossSpec, scores: ArrayLike) -> np.ndarray:
    """The loss-corrected scores ``(c^L)^{-1}(a)`` of every loss of a grid (Proposition 4;
    Corollary 1 for a beta): ``scores [m, N(, n)]``, row ``i`` corrected by loss ``i``."""
    a = jnp.asarray(np.clip(np.asarray(scores, np.float64), 0.0, 1.0), jnp.float32)
    return np.asarray(jax.vmap(LossSpec.loss_corrected_score)(losses, a), np.float64)


def table_by_loss(
    losses: LossLike,
    scores: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 10,
    corrected: ArrayLike | None = None,
    *,
    others: Mapping[str, ArrayLike] | None = None,
    ece_bootstrap: int = 0,
    key: Array | None = None,
    test_family: int | None = None,
    level: float = 0.05,
) -> dict[str, dict[str, dict[str, float]]]:
    """Metrics of the raw and loss-corrected scores of every loss: ``table[key][method][metric]``.

    Keys are :func:`iml.grid_keys` (for a beta grid, the exact betas). Methods: ``"raw"`` (the
    ensemble's scores ``a``) and ``"loss_corrected"`` (``(c^L)^{-1}(a)``, Proposition 4;
    ``g^beta(a)``, Corollary 1, for a beta); for the B-weighted loss (``"matrix"``), whose
    corrected one-vs-rest posteriors need not sum to one, also
    ``"loss_corrected_renormalised"``: those posteriors divided by their row's sum, so that the
    effect of renormalising is reported apart from the correction's. Metrics: :data:`METRICS` for
    binary
    losses (``"ece"`` over ``n_bins`` quantile bins, the paper's deciles, ...) and
    :data:`MULTICLASS_METRICS` for multiclass ones (top-label and class-wise
    ECE, Brier score, log loss, accuracy).

    Args:
      losses: the grid of ``m`` losses (:func:`iml.loss_grid`: e.g. an array of betas).
      scores: ``[m, N]`` raw scores per loss, or ``[m, N, n]`` class scores.
      labels: ``[N]`` labels.
      n_bins: bins of the calibration errors.
      corrected: the loss-corrected scores, where the caller has them already
        (:func:`loss_corrected_scores` of ``scores``); computed here otherwise.
      others: more methods of binary losses, by name: ``[m, N]`` scores each (e.g. the
        recalibration baselines of a report), scored and resampled with the two above.
      ece_bootstrap: replicates of each ECE's 95% percentile interval (the same resampled rows
        for every loss and method), recorded as ``"ece_interval": [low, high]`` for binary losses
        (:func:`ece_intervals`), ``"top_label_ece_interval"`` and ``"classwise_ece_interval"``
        for multiclass ones (:func:`multiclass_ece_intervals`); 0 for none. Each method but
        ``"raw"`` also records its ECE minus the raw scores' ECE of the same loss, with its
        paired interval on the same replicates: ``"ece_minus_raw"`` and
        ``"ece_minus_raw_interval"`` for a binary loss, ``"top_label_ece_minus_raw"`` and
        ``"classwise_ece_minus_raw"`` (each with its ``"..._interval"``) for a multiclass one.
      key: ``jax.random`` key of those replicates (required with ``ece_bootstrap``).
      test_family, level: each loss's loss-calibration test
        (:func:`iml.calibration.loss_calibration_test` of its corrected scores) is recorded as
        ``table[key]["raw"]["loss_calibration"]`` (:func:`loss_calibration_record`; for a
        multiclass loss, its classes' one-vs-rest tests and the top label's), with its power at
        ``level / test_family`` (Holm's first step), ``test_family`` the number of tests the
        run's verdicts are adjusted over. By default the table is the whole family and its
        verdicts are added (:func:`loss_calibration_verdicts`); with ``test_family`` given, the
        caller adds them once the run's table is whole.
    """
    grid = loss_grid(losses)
    spec = grid.spec
    (m,) = spec.batch_shape
    a = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    shape = (m, y.shape[0], *((spec.n_classes,) if spec.multiclass else ()))
    V.check_shape("scores", a, shape)
    if corrected is None:
        corrected = loss_corrected_scores(spec, a)
    else:
        V.check_shape("corrected", corrected, shape)
    corrected = np.asarray(corrected, np.float64)
    if spec.multiclass and others:
        raise ValueError(f"others: methods beside the loss correction are for binary losses, not "
                         f"the {spec.describe()}")  # fmt: skip
    if spec.multiclass:
        stacked = {"raw": a, "loss_corrected": corrected}
        if spec.record.domain == "box":  # one sigmoid per class: rows need not sum to one
            # As loss_corrected_score_multiclass(..., renormalise=True): a row of zeros is NaN.
            with np.errstate(invalid="ignore", divide="ignore"):
                stacked[RENORMALISED] = corrected / corrected.sum(axis=-1, keepdims=True)
        methods = {
            name: [_multiclass_row_metrics(row, y, n_bins) for row in values]
            for name, values in stacked.items()
        }
        if ece_bootstrap:  # every loss and method on the same resampled rows
            joined = np.concatenate(list(stacked.values()))
            missing = nan_counts(joined) > 0
            clipped = np.clip(np.nan_to_num(joined, nan=1.0 / joined.shape[-1]), _CLIP, 1 - _CLIP)
            pairs = _minus_raw_pairs(len(joined), m)
            intervals = multiclass_ece_intervals(clipped.astype(np.float32), y, n_bins,
                                                 n_bootstrap=ece_bootstrap, key=key,
                                                 differences=pairs)  # fmt: skip
            every = [row for method in stacked for row in methods[method]]
            for metric in ("top_label_ece", "classwise_ece"):
                values = np.asarray(intervals[metric], np.float64)
                values[missing] = np.nan
                for row, interval in zip(every, values, strict=True):
                    row[f"{metric}_interval"] = interval.tolist()
                apart = np.asarray(intervals[f"{metric}_difference"], np.float64)
                _minus_raw(every, pairs, apart, missing, metric)
    else:
        named = {"raw": a, "loss_corrected": corrected}
        for name, values in (others or {}).items():
            named[name] = np.asarray(values, np.float64)
            V.check_shape(f"others[{name!r}]", named[name], shape)
        stacked = np.concatenate(list(named.values()))
        rows = score_metrics_by_row(stacked, y, n_bins)
        if ece_bootstrap:  # every loss and method on the same resampled rows
            clipped = _clipped_float32(stacked, 0.5)
            pairs = _minus_raw_pairs(len(stacked), m)
            intervals, apart = (np.asarray(x, np.float64) for x in ece_intervals(
                clipped, y, n_bins, n_bootstrap=ece_bootstrap, key=key,
                differences=pairs))  # fmt: skip
            missing = nan_counts(stacked) > 0
            intervals[missing] = np.nan
            for row, interval in zip(rows, intervals, strict=True):
                row["ece_interval"] = interval.tolist()
            _minus_raw(rows, pairs, apart, missing, "ece")
        methods = {name: rows[i * m : (i + 1) * m] for i, name in enumerate(named)}
    tests = _loss_calibration_records(corrected, y, n_bins, level, test_family)
    for row, record in zip(methods["raw"], tests, strict=True):
        row["loss_calibration"] = record
    table = {
        key: {method: rows[i] for method, rows in methods.items()}
        for i, key in enumerate(grid.keys)
    }
    if test_family is None:  # the table is the run's whole family of tests
        loss_calibration_verdicts(table, level)
    return table


def _minus_raw_pairs(rows: int, m: int) -> np.ndarray:
    """``[rows - m, 2]``: each method's row against the raw scores' row of its loss, the
    methods stacked by ``m`` losses, the raw scores first."""
    return np.array([(i, i % m) for i in range(m, rows)], np.int32).reshape(-1, 2)


def _minus_raw(
    rows: list[dict], pairs: np.ndarray, apart: np.ndarray, missing: np.ndarray, metric: str
) -> None:
    """Record each method's ``metric`` minus the raw scores' of its loss (``pairs``), with its
    paired interval ``apart`` (NaN where either row holds NaN scores)."""
    apart = np.where(missing[pairs].any(axis=1)[:, None], np.nan, apart)
    for (i, raw), interval in zip(pairs, apart, strict=True):
        rows[i][f"{metric}_minus_raw"] = rows[i][metric] - rows[raw][metric]
        rows[i][f"{metric}_minus_raw_interval"] = interval.tolist()


def loss_calibration_record(test, level: float) -> dict:
    """One :class:`iml.calibration.LossCalibrationTest` as floats: the JSON of a table."""
    return {
        "p_value": float(test.p_value),
        "statistic": float(test.statistic),
        "n_bins": int(test.n_bins),
        "power": float(test.power),
        "power_against": f"odds x{POWER_ODDS:g}",
        "power_level": float(level),
        "calibration_error": float(test.calibration_error),
        "calibration_error_interval": [float(v) for v in test.calibration_error_interval],
        "null_calibration_error": float(test.null_calibration_error),
    }


def _loss_calibration_records(
    corrected: np.ndarray, labels: np.ndarray, n_bins: int, level: float, family: int | None
) -> list[dict]:
    """Each loss's test record: ``{...}`` for a binary loss; ``{"classes": [...], "top_label":
    {...}}`` for a multiclass one. A loss whose corrected scores hold NaN (a rule with no inverse
    there) records how many, and no test."""
    multiclass = corrected.ndim == 3
    per_loss = corrected.shape[2] + 1 if multiclass else 1
    at = level / (family or corrected.shape[0] * per_loss)
    out = []
    for row, missing in zip(corrected, nan_counts(corrected), strict=True):
        if missing:
            out.append({"p_value": float("nan"), "n_bins": 0, "nan_scores": int(missing)})
            continue
        test = calibration_test(np.clip(row, 0.0, 1.0).astype(np.float32), labels, n_bins,
                                level=at)  # fmt: skip
        if multiclass:
            records = [loss_calibration_record(jax.tree.map(lambda x, i=i: x[i], test), at)
                       for i in range(per_loss)]  # fmt: skip
            out.append({"classes": records[:-1], "top_label": records[-1]})
        else:
            out.append(loss_calibration_record(test, at))
    return out


def table_tests(table: Mapping[str, Mapping]) -> list[tuple[str, str, dict]]:
    """``(key, which, record)`` of every loss-calibration test in a table (``which``: "" for a
    binary loss, ``"class j"`` or ``"top label"`` for a multiclass one)."""
    found = []
    for key, row in table.items():
        record = row["raw"].get("loss_calibration")
        if record is None:
            continue
        if "classes" in record:
            found += [(key, f"class {j}", r) for j, r in enumerate(record["classes"])]
            found.append((key, "top label", record["top_label"]))
        else:
            found.append((key, "", record))
    return found


def loss_calibration_verdicts(table: Mapping[str, Mapping], level: float = 0.05) -> None:
    """Each test's verdict, adjusted over every test of the run's table (Holm; in place).

    Adds ``p_value_familywise``, ``rejected``, ``family`` and ``verdict`` (the words of
    :func:`iml.calibration.loss_calibration_verdict`: "rejected (p, bins)", "not rejected (p,
    bins; power against odds x2)" or "not testable (bins)") to every record of
    :func:`table_by_loss`. Where every loss's scores are loss-calibrated, the chance that any
    is rejected is then at most ``level`` (up to the chi-square approximation), whatever the
    number of losses.
    """
    tests = table_tests(table)
    if not tests:
        return
    p = np.asarray([r["p_value"] if r.get("n_bins", 0) >= 2 else np.nan for _, _, r in tests])
    adjusted = np.asarray(holm_adjusted(p.astype(np.float32)), np.float64)
    family = int(np.isfinite(p).sum())
    for (_, _, record), q in zip(tests, adjusted, strict=True):
        record["p_value_familywise"] = float(q)
        record["rejected"] = bool(np.isfinite(q) and q <= level)
        record["family"] = family
        if "nan_scores" in record:
            record["verdict"] = f"not testable ({record['nan_scores']} corrected scores are NaN)"
        else:
            record["verdict"] = loss_calibration_verdict(
                q, record["n_bins"], record.get("power", np.nan), level
            )


def loss_calibration_summary(table: Mapping[str, Mapping], key_name: str = "beta") -> str:
    """What a run says of loss calibration, in a few lines: the losses where it is rejected,
    ranked by the size of the miss, and what that means; else that it is rejected nowhere, with
    the least power; and the losses left untested. Reads :func:`loss_calibration_verdicts`."""
    tests = [t for t in table_tests(table) if "verdict" in t[2]]
    if not tests:
        return ""

    def name(key: str, which: str) -> str:
        return f"{key_name} = {key}" + (f" ({which})" if which else "")

    rejected = sorted((t for t in tests if t[2]["rejected"]),
                      key=lambda t: -t[2]["calibration_error"])  # fmt: skip
    no_inverse = [t for t in tests if "nan_scores" in t[2]]
    untested = [t for t in tests if t[2]["verdict"].startswith("not testable") and
                t not in no_inverse]  # fmt: skip
    family = tests[0][2]["family"]
    lines = []
    if rejected:
        lines.append(
            f"Loss calibration (Definition 2) is rejected for {len(rejected)} of {len(tests)} "
            f"tests (Holm over {family}, level 0.05), largest miss first:"
        )
        for key, which, r in rejected:
            low, high = r["calibration_error_interval"]
            lines.append(
                f"  {name(key, which)}: calibration error of the corrected scores "
                f"{r['calibration_error']:.4f} [{low:.4f}, {high:.4f}] against "
                f"{r['null_calibration_error']:.4f} expected of calibrated scores at this N and "
                f"these bins; {r['verdict']}"
            )
        lines.append(
            "The loss correction cannot be trusted there: the test rejects that the model is at "
            "the optimum of its weighted loss for what it knows (under-training, "
            "misspecification or saturation can put it elsewhere; the test does not say which)."
        )
    kept = [t for t in tests if not t[2]["rejected"] and t not in untested and t not in no_inverse]
    if kept:
        least = min(kept, key=lambda t: t[2]["power"])
        bins = sorted({int(t[2]["n_bins"]) for t in kept})
        each = f"{bins[0]} bins each" if len(bins) == 1 else f"{bins[0]} to {bins[-1]} bins"
        power = (f"the least power against odds x{POWER_ODDS:g} is {least[2]['power']:.2f} "
                 f"({name(least[0], least[1])})")  # fmt: skip
        if not rejected:
            lines.append(
                f"Loss calibration (Definition 2) is not rejected for any of {len(kept)} tests "
                f"(Holm over {family}, level 0.05; {each}); {power}."
            )
        elif len(kept) <= 6:
            lines.append(
                "Not rejected: "
                + "; ".join(f"{name(k, w)}, {r['verdict']}" for k, w, r in kept)
                + "."
            )
        else:
            lines.append(f"Not rejected for the other {len(kept)} tests ({each}); {power}.")
    if no_inverse:
        lines.append(
            "The loss correction has no inverse at some scores (NaN corrected scores; those "
            "losses' rows report no metrics and no test): "
            + ", ".join(f"{name(k, w)}: {r['nan_scores']} of the scores" for k, w, r in no_inverse)
            + "."
        )
    if untested:
        lines.append(
            "Not testable (fewer than two bins of 10 expected positives and negatives): "
            + ", ".join(name(k, w) for k, w, _ in untested)
            + "."
        )
    # A multiclass grid's weighted classes (``w[8]=10``, ``B[8,8]=10``: class 8), each named.
    for key, which, r in tests:
        if which in {f"class {j}" for j in re.findall(r"\[(\d+)(?:,\1)?\]=", key)}:
            lines.append(f"The weighted {which} at {key}: {r['verdict']}.")
    return "\n".join(lines)
