"""Revealed experiments of a stored run: ``revealed.json`` and its figures (``iml reveal``).

Reads the scores of ``K`` models trained at ``K`` class weights from a run folder in the one
layout every run stores (:func:`iml.pipeline.reveal_input.load_reveal_input`: the member
batches, pooled as the run pools them, and the loss its manifest records), an ``iml reproduce``
run or a finished ``iml sweep`` over a grid of class weights of one binary loss,
keeps the observations that every model scored, and runs :func:`iml.revealed.reveal` (the
revealed experiments, the value matrix, mutual information, NIS, NIAC, the revealed cost bounds,
the Shannon ``lambda`` interval and NIAS, with paired bootstrap inference) under each model's own
loss, ``L_k = family(weight_k)`` (the beta-weighted log loss for ``"log"`` runs). The results go to
``revealed.json`` (its fields: ``docs/howto/read_reveal.md``, "The record"). A multiclass run
(a grid of ``K`` losses of ``c`` class scores) is revealed from its raw class scores
``[K, N, c]`` under the grid's losses: each model's signals are the cells of the simplex of its
loss-corrected posteriors (its top class, then ``n_bins`` quantiles of its confidence within
that class, merged alike for every model; Caplin & Dean 2015's revealed experiments, on ``c``
states), and NIAS is one multinomial chi-square per model over its cells
(:func:`iml.revealed.multinomial_calibration_test`, Holm over the models). The figures, under
``figures/``, are :data:`FIGURES` (:data:`CLASS_FIGURES` for a multiclass run). Every file is
written atomically.

A verdict (``violated`` / ``rejected`` at ``1 - confidence``) reads "rejected", "not rejected"
(with the test's simulated power against its stated alternative, never as support) or "not
testable": with fewer than two signals, or for a rejection by a test whose simulated size at the
run's N, K and prior exceeds its level by more than its Monte Carlo error (the test there rejects
learning models that hold more often than its level). The verdicts read so in the figures'
titles and the lines printed (:func:`revealed_summary`); the record keeps each test's own
``violated``. A verdict that changes with the bins is labelled fragile. Reading a run
into the inputs, and their checks, live in :mod:`iml.pipeline.reveal_input`.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from iml import power as P
from iml._io import atomic_write_bytes
from iml.calibration.loss_calibration import POWER_ODDS
from iml.grids import beta_key
from iml.pipeline.reveal_input import (
    RevealInput,
    check_reveal_input,
)
from iml.plots import (
    figure_cost_bounds,
    figure_information_by_class,
    figure_information_by_weight,
    figure_value_matrix,
    save_figure,
)
from iml.power import TESTS
from iml.revealed import (
    MIN_COUNT,
    reveal,
)

__all__ = [
    "CLASS_FIGURES",
    "FIGURES",
    "figure_names",
    "reveal_run",
    "revealed_figures",
    "revealed_summary",
    "verdicts_title",
]

# The settings of iml.revealed.reveal that a run's record does not choose: recorded with it.
# How the intervals of I_k and of the information about each class are made (iml.revealed.reveal).
BASIC_INTERVAL = "basic bootstrap interval, 2 I - [upper, lower] replicate quantiles, clipped at 0"
_SETTINGS = {"strategy": "adaptive", "confidence": 0.95, "reference": 0, "resampling": "poisson"}
# The quantile bin counts each verdict is also reached at (its sensitivity to the bins).
BIN_COUNTS = (5, 10, 20)


def reveal_run(
    inputs: RevealInput,
    out: str | Path,
    *,
    n_bins: int = 10,
    n_bootstrap: int = 1000,
    seed: int = 0,
    formats: Sequence[str] = ("png", "pdf"),
    power_datasets: int = 100,
    power_bootstrap: int = 200,
    progress: bool = False,
    sensitivity: bool = True,
) -> dict[str, Any]:
    """Run :func:`iml.revealed.reveal` on a run's scores; write ``revealed.json`` and figures.

    The verdicts come from the adaptive bins (at most ``n_bins`` per model); each is reached
    again at 5, 10 and 20 quantile bins, and a verdict that differs among the four is labelled
    fragile. Each test's size at the least-favourable null at this ``N``, ``K`` and prior (and,
    where it does not reject, its power against a stated alternative) is simulated by
    :mod:`iml.power`, with Gaussian agents as informative as the run's models (their median
    ``I_k``).

    A multiclass input (``inputs.grid``) is revealed from its class scores under the grid's
    losses, ``n_bins`` confidence quantiles per class, each verdict reached again at 5, 10 and
    20 quantiles per class; its power is simulated for agents of its number of classes at its
    class frequencies (:func:`iml.power.simulated_class_power`).

    The bootstrap key is ``jax.random.key(seed)``, so the verdicts equal
    ``reveal(inputs.scores, inputs.labels, inputs.loss(inputs.betas), n_bins, "adaptive",
    n_bootstrap=..., key=jax.random.key(seed))``. The record's fields are listed in
    ``docs/howto/read_reveal.md``.

    Args:
      inputs: the run's scores (:func:`load_reveal_input` or :func:`reveal_input`).
      out: the folder to write into (created if missing).
      n_bins: signals per model (deciles, merged adaptively).
      n_bootstrap: paired bootstrap replicates.
      seed: the seed of the bootstrap and of the simulations.
      formats: figure formats; ``()``: ``revealed.json`` alone.
      power_datasets: simulated data sets per scenario for size and power (0: none).
      power_bootstrap: bootstrap replicates of each simulated ``reveal``.
      progress: report each stage on stderr.
      sensitivity: whether the verdicts are reached again at 5, 10 and 20 quantile bins
        (``bins`` and ``fragile`` in the record; without them, the summary says they were not).

    Returns:
      The record written to ``revealed.json``.
    """
    check_reveal_input(inputs, n_bins)
    losses = inputs.grid.spec if inputs.multiclass else inputs.loss(inputs.betas)

    def run(bins: int, strategy: str) -> Any:
        return reveal(
            inputs.scores,
            inputs.labels,
            losses,
            bins,
            strategy,
            n_bootstrap=n_bootstrap,
            key=jax.random.key(seed),
            confidence=_SETTINGS["confidence"],
            reference=_SETTINGS["reference"],
            resampling=_SETTINGS["resampling"],
            seed_scores=inputs.seed_scores,
            seed_average=inputs.average,
        )

    def say(message: str) -> None:
        if progress:
            print(f"  {message} ...", file=sys.stderr, flush=True)

    bins_named = "cells" if inputs.multiclass else "bins"
    say(f"revealing with adaptive {bins_named} ({n_bootstrap} paired bootstrap replicates)")
    report = run(n_bins, _SETTINGS["strategy"])
    by_bins = {"adaptive": _verdicts(report)}
    for bins in BIN_COUNTS if sensitivity else ():
        say(f"the verdicts at {bins} quantile {bins_named}")
        by_bins[f"quantile_{bins}"] = _verdicts(run(bins, "quantile"))
    power = None
    information = float(np.median(np.asarray(report.information)))
    prior = np.asarray(report.experiments.prior)[0]
    settings = {
        "n_bins": n_bins,
        "n_datasets": power_datasets,
        "n_bootstrap": power_bootstrap,
        "seed": seed,
        "rejected": {test: verdict["rejected"] for test, verdict in by_bins["adaptive"].items()},
        "say": say,
    }
    # Agents as informative as the models need the models to carry some information.
    if power_datasets > 0 and information > 0 and inputs.multiclass:
        power = P.simulated_class_power(inputs.grid.spec, inputs.keys, inputs.scores.shape[1],
                                        prior, information, **settings)  # fmt: skip
    elif power_datasets > 0 and information > 0:
        power = P.simulated_power(inputs.loss, inputs.betas, inputs.labels, float(prior),
                                  information, **settings)  # fmt: skip
    record = revealed_record(
        inputs,
        report,
        n_bins=n_bins,
        n_bootstrap=n_bootstrap,
        seed=seed,
        sensitivity=by_bins if sensitivity else None,
        power=power,
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "revealed.json", _dumps(record).encode())
    for name, fig in (revealed_figures(record) if formats else {}).items():
        save_figure(fig, out / "figures" / name, formats)
    return record


def _verdicts(report: Any) -> dict[str, Any]:
    """Each test's verdict (``True``: rejected) and the number behind it."""
    verdicts = {
        "nis": {"rejected": bool(report.nis_test.violated),
                "lower_bound": _floats(report.nis_test.lower_bound)},
        "niac": {"rejected": bool(report.niac_test.violated),
                 "lower_bound": _floats(report.niac_test.lower_bound)},
    }  # fmt: skip
    if report.nias is not None:
        verdicts["nias"] = {
            "rejected": bool(np.any(report.nias.violated)),
            "models_rejected": int(np.sum(report.nias.violated)),
        }
    return verdicts


def fragile(sensitivity: Mapping[str, Mapping[str, Any]]) -> dict[str, bool]:
    """Whether each test's verdict differs among the bins of ``sensitivity``."""
    tests = [t for t in TESTS if all(t in v for v in sensitivity.values())]
    return {t: len({v[t]["rejected"] for v in sensitivity.values()}) > 1 for t in tests}


def intervals_cover(inputs: RevealInput) -> str:
    """What the record's intervals and tests cover: the evaluation rows, and the seeds where
    some model has several."""
    rows = "paired bootstrap over the evaluation observations (the same resample for every model)"
    if inputs.seed_scores is None:
        return (
            f"{rows}, bins and scores fixed: the sampling noise of the evaluation data, not the "
            "noise of training (one seed per model, or seeds the run does not separate)"
        )
    counts = [len(s) for s in inputs.seeds_per_model()]
    many = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)} to {max(counts)}"
    return (
        f"{rows} and, per model, over its training seeds ({many} a model), each replicate's "
        "scores pooled from the drawn seeds and binned anew: the noise of the evaluation data "
        "and of training between seeds"
    )


# A JSON array of numbers, laid out one item per line: strings hold no newline, so a "[" followed
# by a newline opens an array.
_NUMBER_ARRAY = re.compile(r"\[\n\s+([^\[\]{}]*?)\n\s*\]")


def _dumps(record: Mapping[str, Any]) -> str:
    """JSON indented by sections, with each innermost array of numbers on one line."""
    text = json.dumps(record, indent=2)
    return _NUMBER_ARRAY.sub(lambda m: "[" + re.sub(r",\n\s+", ", ", m.group(1)) + "]", text)


def _floats(x: Any) -> Any:
    """Nested lists of Python floats (or bools) from an array: float32 values by their shortest
    decimals (0.2352375, not 0.2352374792098999), which read back as the same float32."""
    a = np.asarray(x)
    if a.dtype == bool:
        return a.tolist()
    if a.dtype != np.float32:
        return (a.astype(np.float64) + 0.0).tolist()  # + 0.0: no -0.0
    shortest = [float(str(v + np.float32(0.0))) for v in a.ravel()]
    return np.asarray(shortest, dtype=object).reshape(a.shape).tolist()


def _test(test: Any) -> dict[str, Any]:
    return {
        "margin": _floats(test.margin),
        "lower_bound": _floats(test.lower_bound),
        "critical_value": _floats(test.critical_value),
        "p_value": _floats(test.p_value),
        "violated": bool(test.violated),
    }


def revealed_record(
    inputs: RevealInput,
    report: Any,
    *,
    n_bins: int,
    n_bootstrap: int,
    seed: int,
    sensitivity: Mapping[str, Any] | None = None,
    power: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON record of a :class:`iml.revealed.RevealedReport` (its fields:
    ``docs/howto/read_reveal.md``); for a multiclass run, the multiclass record
    (:func:`_class_record`)."""
    loss = inputs.loss
    cycle = [int(k) for k in np.asarray(report.niac.cycle) if k >= 0]
    if inputs.multiclass:
        spec = inputs.grid.spec
        described = {
            "name": spec.name,
            "description": f"{spec.record.title} over {len(inputs.keys)} losses",
            "config": spec.to_config(),
        }
        models = {"classes": int(inputs.scores.shape[2]), "keys": inputs.keys}
    else:
        described = {
            "name": loss.name,
            "weight_name": loss.weight_name,
            "params": dict(loss.params),
            "description": loss.describe(),
        }
        models = {"betas": inputs.betas.tolist()}
    record = {
        "run": inputs.run,
        "kind": inputs.kind,
        "loss": described,
        **models,
        "K": int(inputs.scores.shape[0]),
        "n": int(inputs.scores.shape[1]),
        "n_stored": inputs.n_stored,
        "prior": _floats(np.asarray(report.experiments.prior)[0]),
        "n_bins": int(n_bins),
        # the signals left to every model: with fewer than two, NIS and NIAC are not testable
        "signals": int(np.min(np.sum(np.asarray(report.experiments.probability) > 0, axis=-1))),
        "strategy": _SETTINGS["strategy"],
        "min_count": MIN_COUNT,
        "n_bootstrap": int(n_bootstrap),
        "confidence": _SETTINGS["confidence"],
        "intervals": intervals_cover(inputs),
        "seeds": inputs.seeds_per_model(),
        "resampling": _SETTINGS["resampling"],
        "seed": int(seed),
        "ridge": inputs.ridge,
        "information": {
            "estimate": _floats(report.information),
            "interval": _floats(report.information_interval),
            "interval_kind": BASIC_INTERVAL,
        },
        "value_matrix": {
            "estimate": _floats(report.value_matrix),
            "interval": _floats(report.value_matrix_interval),
        },
        "experiments": {
            "probability": _floats(report.experiments.probability),
            "posterior": _floats(report.experiments.posterior),
        },
        "nis": {
            **_test(report.nis_test),
            "pairs": np.argwhere(np.asarray(report.nis_pairs)).tolist(),
            "point_violations": np.argwhere(np.asarray(report.nis.violations)).tolist(),
        },
        "niac": {
            **_test(report.niac_test),
            "cycle": cycle,
            "negative_cycle": bool(report.niac.negative_cycle),
        },
        "cost_bounds": {
            "reference": _SETTINGS["reference"],
            "lower": _floats(report.cost_bounds.lower),
            "upper": _floats(report.cost_bounds.upper),
            "feasible": bool(report.cost_bounds.feasible),
            "lower_interval": _floats(report.cost_lower_interval),
            "upper_interval": _floats(report.cost_upper_interval),
            "feasible_fraction": _floats(report.cost_feasible_fraction),
        },
        "shannon_lambda": {
            "lower": _floats(report.shannon.lower),
            "upper": _floats(report.shannon.upper),
            "rejected": bool(report.shannon.rejected),
            "lower_interval": _floats(report.lambda_lower_interval),
            "upper_interval": _floats(report.lambda_upper_interval),
        },
    }
    if inputs.multiclass:
        _class_record(record, report)
    elif report.nias is not None:
        test, nias = report.nias.test, report.nias
        record["nias"] = {
            "calibration_error": _floats(nias.calibration_error),
            "null_calibration_error": _floats(test.null_calibration_error),
            "p_value": _floats(nias.p_value),
            "p_value_unadjusted": _floats(test.p_value),
            "n_bins": np.asarray(test.n_bins).tolist(),
            "power": _floats(test.power),
            "violated": _floats(nias.violated),
            "rejected": bool(np.any(nias.violated)),
        }
    if sensitivity is not None:
        record["bins"] = dict(sensitivity)
        record["fragile"] = fragile(sensitivity)
    if power is not None:
        record["simulated"] = dict(power)
    return record


def _class_record(record: dict[str, Any], report: Any) -> None:
    """The multiclass parts of ``record``: the information about each class, and NIAS as one
    multinomial chi-square per model over its adaptive cells
    (:func:`iml.revealed.multinomial_calibration_test`, Holm over the models)."""
    record["signals_kind"] = (
        "cells of the simplex of loss-corrected posteriors: top class, then confidence quantile"
    )
    record["class_information"] = {
        "estimate": _floats(report.class_information),
        "interval": _floats(report.class_information_interval),
        "interval_kind": BASIC_INTERVAL,
    }
    if report.nias is None:
        return
    test, nias = report.nias.test, report.nias
    record["nias"] = {
        "test": "multinomial chi-square of each model's class counts against its loss-corrected "
        "posteriors, summed over its cells (Holm over the models)",
        "statistic": _floats(test.statistic),
        "degrees_of_freedom": np.asarray(test.n_bins).tolist(),
        "cells": np.sum(np.asarray(test.count) > 0, axis=-1).tolist(),
        "calibration_error": _floats(nias.calibration_error),
        "null_calibration_error": _floats(test.null_calibration_error),
        "p_value": _floats(nias.p_value),
        "p_value_unadjusted": _floats(test.p_value),
        "power": _floats(test.power),
        "power_against": f"each observation's top-class odds {POWER_ODDS:g} or 1/{POWER_ODDS:g} "
        "times its loss-corrected posterior's (the smaller power of the two)",
        "violated": _floats(nias.violated),
        "rejected": bool(np.any(nias.violated)),
    }


# ----------------------------------------------------------------------------------------------
# The record reported: its figures, the verdicts' wording and the lines printed
# ----------------------------------------------------------------------------------------------

FIGURES = ("revealed_information", "revealed_value_matrix", "revealed_cost_bounds")
#: The figures of a multiclass record: the information about each class along the grid, ``G``
#: and the cost bounds by the grid's keys.
CLASS_FIGURES = ("revealed_information_by_class", "revealed_value_matrix", "revealed_cost_bounds")


def figure_names(record: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of ``record``'s figures: :data:`CLASS_FIGURES` for a multiclass record, else
    :data:`FIGURES`."""
    return CLASS_FIGURES if "classes" in record else FIGURES


def _record_keys(record: Mapping[str, Any]) -> list[str]:
    """Each model's name: a multiclass record's grid keys, else its class weights' exact keys."""
    return list(record["keys"]) if "keys" in record else [beta_key(b) for b in record["betas"]]


def _weight_name(record: Mapping[str, Any]) -> str:
    return record["loss"].get("weight_name", "loss")


def _short_keys(betas: Sequence[float]) -> list[str]:
    """Labels of the class weights: three significant digits where that keeps them apart."""
    short = [f"{b:.3g}" for b in betas]
    return short if len(set(short)) == len(short) else [beta_key(b) for b in betas]


def revealed_figures(record: Mapping[str, Any]) -> dict[str, Any]:
    """The three figures of a ``revealed.json`` record, by file name (:data:`FIGURES`; for a
    multiclass record :data:`CLASS_FIGURES`: the information about each class along the grid,
    :func:`iml.plots.figure_information_by_class`, then ``G`` and the cost bounds by the grid's
    keys)."""
    weight = _weight_name(record)
    cost = record["cost_bounds"]
    interval = np.stack(
        [np.asarray(cost["lower_interval"])[0], np.asarray(cost["upper_interval"])[1]]
    )
    if "classes" in record:
        keys = record["keys"]
        info = record["class_information"]
        return {
            "revealed_information_by_class": figure_information_by_class(
                info["estimate"], info["interval"], grid_keys=keys,
                title=textwrap.fill(
                    f"Information about each class (nats); {verdicts_title(record)}", 80
                ),
            ),
            "revealed_value_matrix": figure_value_matrix(
                record["value_matrix"]["estimate"], keys, *_evidence(record), weight_name="loss",
                title=textwrap.fill(verdicts_title(record), 80),
            ),
            "revealed_cost_bounds": figure_cost_bounds(
                None, cost["lower"], cost["upper"], interval, reference=cost["reference"],
                grid_keys=keys,
            ),
        }  # fmt: skip
    betas = record["betas"]
    return {
        "revealed_information": figure_information_by_weight(
            betas, record["information"]["estimate"], record["information"]["interval"],
            weight_name=weight,
        ),
        "revealed_value_matrix": figure_value_matrix(
            record["value_matrix"]["estimate"],
            _short_keys(betas),
            *_evidence(record),
            weight_name=weight,
            title=textwrap.fill(verdicts_title(record), 80),
        ),
        "revealed_cost_bounds": figure_cost_bounds(
            betas, cost["lower"], cost["upper"], interval, reference=cost["reference"],
            weight_name=weight,
        ),
    }  # fmt: skip


def _untestable(record: Mapping[str, Any]) -> str:
    """``"not testable (1 signal)"`` where the models' experiments have fewer than two signals
    (every experiment is then uninformative and NIS and NIAC compare nothing); else ``""``."""
    signals = record.get("signals", 2)
    what = "cell" if "classes" in record else "signal"
    return f"not testable ({signals} {what}{'s' * (signals != 1)})" if signals < 2 else ""


def _oversized(record: Mapping[str, Any], name: str) -> str:
    """Why a rejection by test ``name`` is not evidence at this run's N, K and prior: its
    simulated size (``record["simulated"]``) exceeds the level even at its 95% lower bound
    (rate minus 1.96 Monte Carlo standard errors), so it rejects true learning models too often
    here; ``""`` where it does not, or where no size was simulated."""
    size = record.get("simulated", {}).get("size", {}).get(name)
    level = 1.0 - float(record.get("confidence", 0.95))
    if size is None or size["rate"] - 1.96 * size["se"] <= level:
        return ""
    return f"simulated size {size['rate']:.2f} (se {size['se']:.2f}) above the level {level:.2g}"


def _word(record: Mapping[str, Any], name: str, rejected: bool) -> str:
    """``"rejected"``, ``"not rejected"``, or ``"not testable (...)"``: with under two signals,
    or for a rejection by a test whose simulated size here exceeds its level."""
    if name != "nias" and _untestable(record):
        return _untestable(record)
    oversized = _oversized(record, name) if rejected else ""
    if oversized:
        return f"not testable ({oversized})"
    return "rejected" if rejected else "not rejected"


def _evidence(record: Mapping[str, Any]) -> tuple[list, list | None]:
    """What the value-matrix figure marks: NIS's significant pairs and NIAC's improving cycle,
    each only where its test's verdict is "rejected" (:func:`_word`); none where the test is not
    testable, for there they are not evidence."""
    pairs = record["nis"]["pairs"] if _word(record, "nis", record["nis"]["violated"]) == (
        "rejected") else []  # fmt: skip
    niac = record["niac"]
    cycle = niac["cycle"] if _word(record, "niac", niac["violated"]) == "rejected" else None
    return pairs, cycle


def _power(record: Mapping[str, Any], name: str) -> str:
    """``"power 0.45 (se 0.05) against ..."``: test ``name``'s simulated power against its
    alternative (``record["simulated"]``), or ``""`` where none was simulated."""
    power = record.get("simulated", {}).get("power", {}).get(name)
    if power is None:
        return ""
    return f"power {power['rate']:.2f} (se {power['se']:.2f}) against {power['against']}"


def verdict_text(record: Mapping[str, Any], name: str) -> str:
    """Test ``name``'s verdict (``"nis"``, ``"niac"``) as the reports word it: ``"rejected"``,
    ``"not rejected"`` with its simulated power (or that none was simulated), or ``"not testable
    (...)"`` (:func:`_word`), then the signals compared (cells for a multiclass record) where the
    record says."""
    word = _word(record, name, bool(record[name]["violated"]))
    power = (_power(record, name) or "power not simulated") if word == "not rejected" else ""
    signals = record.get("signals")
    what = "cells" if "classes" in record else "signals"
    counted = f"{signals} {what}" if signals is not None and not _untestable(record) else ""
    notes = "; ".join(n for n in (power, counted) if n)
    return word + (f" ({notes})" if notes else "")


def verdicts_title(record: Mapping[str, Any]) -> str:
    """``"NIS rejected, NIAC not rejected (power 0.45 (se 0.05) against ...; fragile); 3
    signals"``: each verdict, a non-rejection's simulated power, which verdicts change with the
    bins, and the signals the tests compared (cells for a multiclass record)."""
    fragile = record.get("fragile", {})
    parts = []
    for name in ("nis", "niac"):
        rejected = bool(record[name]["violated"])
        word = _word(record, name, rejected)
        notes = [_power(record, name) if word == "not rejected" else "",
                 "fragile" if fragile.get(name) else ""]  # fmt: skip
        notes = "; ".join(n for n in notes if n)
        parts.append(f"{name.upper()} {word}" + (f" ({notes})" if notes else ""))
    unsimulated = (
        " (size and power not simulated)"
        if "simulated" not in record and not _untestable(record)
        else ""
    )
    signals = record.get("signals")
    what = "cells" if "classes" in record else "signals"
    counted = f"; {signals} {what}" if signals is not None and not _untestable(record) else ""
    return ", ".join(parts) + unsimulated + counted


def revealed_summary(record: Mapping[str, Any]) -> str:
    """A few lines for the terminal: the data, ``I_k``, NIS, NIAC, ``lambda`` and NIAS."""

    def verdict(name: str, rejected: bool, detail: str) -> str:
        if name != "nias" and _untestable(record):
            return _untestable(record)
        word = _word(record, name, rejected)
        if word.startswith("not testable"):  # the rejection is stated, not counted as evidence
            detail = (f"; its rejection{detail} is not evidence: it rejects simulated models "
                      "that hold at that rate")  # fmt: skip
        line = f"{word}{detail}"
        power = _power(record, name)
        if not rejected and power:
            line += f"; {power}"
        elif name != "nias" and "simulated" not in record and not _untestable(record):
            line += f"; {'size' if rejected else 'power'} at this N not simulated"
        if record.get("fragile", {}).get(name):
            shown = ", ".join(
                f"{key.replace('quantile_', '')} bins: "
                f"{'rejected' if v[name]['rejected'] else 'not rejected'}"
                for key, v in record["bins"].items()
                if key != "adaptive"
            )
            line += f"; FRAGILE ({shown}; quantile bins, size and power not simulated there)"
        return line

    def margin(test: Mapping[str, Any]) -> str:
        return (
            f": margin {test['margin']:.4g}, lower bound {test['lower_bound']:.4g}, "
            f"p = {test['p_value']:.3g}"
        )

    weight = _weight_name(record)
    keys = _record_keys(record)
    info = np.asarray(record["information"]["estimate"])
    low, high = np.asarray(record["information"]["interval"])
    if len(keys) <= 6:
        shown = "; ".join(
            f"{key}: {i:.4f} [{lo:.4f}, {hi:.4f}]"
            for key, i, lo, hi in zip(keys, info, low, high, strict=True)
        )
    else:
        a, b = int(info.argmin()), int(info.argmax())
        short = _short_keys(record["betas"]) if "betas" in record else keys
        shown = f"from {info[a]:.4f} (at {short[a]}) to {info[b]:.4f} (at {short[b]})"
    nis = record["nis"]
    pairs = ""
    if nis["pairs"] and _word(record, "nis", nis["violated"]) == "rejected":
        pairs = f"; {len(nis['pairs'])} significant pairs (k, j)"
        if len(nis["pairs"]) <= 6:
            pairs += ": " + ", ".join(f"({keys[k]}, {keys[j]})" for k, j in nis["pairs"])
    lam = record["shannon_lambda"]
    shannon = _untestable(record) or (
        "no lambda fits the point estimates (not a sized test)" if lam["rejected"] else
        f"lambda in [{lam['lower']:.4g}, {lam['upper']:.4g}] at the point estimates (not a sized "
        "test)"
    )  # fmt: skip
    if "classes" in record:
        bins = (
            f"{record['classes']} classes; signals: cells of the loss-corrected posteriors by top "
            f"class and {record['n_bins']} confidence quantiles per class, merged alike for "
            f"every model to {record['min_count']} expected observations of the top class and "
            f"of the others (cells with observations for every model: {record['signals']})"
        )
    else:
        bins = f"at most {record['n_bins']} {record['strategy']} bins"
        if "signals" in record:
            bins += f" (signals with observations for every model: {record['signals']})"
        if record["strategy"] == "adaptive":
            bins += f" (deciles merged to {record['min_count']} expected positives and negatives)"
    lines = [
        f"{record['run']} ({record['kind']} run, {record['loss']['description']}): "
        f"K={record['K']} models, N={record['n']} observations scored by all "
        f"(of {record['n_stored']}), {bins}, {record['n_bootstrap']} paired bootstrap "
        "replicates",
        f"I_k (nats, by {weight}): {shown}",
        f"NIS (capacity-constrained learning) {verdict('nis', nis['violated'], margin(nis))}"
        f"{pairs}",
        f"NIAC (costly learning) "
        f"{verdict('niac', record['niac']['violated'], margin(record['niac']))}",
        f"Shannon cost with one lambda: {shannon}",
    ]
    if record.get("ridge"):
        lines.append(f"Ridge: {record['ridge']['note']}")
    if "classes" in record and "nias" in record:
        lines.append(_class_nias_line(record, verdict))
    elif "nias" in record:
        nias = record["nias"]
        short = _short_keys(record["betas"])
        flagged = [key for key, v in zip(short, nias["violated"], strict=True) if v]
        detail = f" at {weight} {', '.join(flagged)}" if flagged else ""
        if len(flagged) > 6:
            detail = (
                f" for {len(flagged)} of {len(short)} models ({weight} {flagged[0]}, "
                f"{flagged[1]}, ..., {flagged[-1]})"
            )
        bins = nias.get("n_bins", [])
        untested = [k for k, n in zip(short, bins, strict=False) if n < 2]
        kept = [k for k, v in zip(short, nias["violated"], strict=True) if not v and k not in
                untested]  # fmt: skip
        # the models a rejecting family does not reject, said too (no power per model is
        # simulated); not where the rejection itself is not evidence
        if flagged and kept and _word(record, "nias", True) == "rejected":
            named = f"at {weight} {', '.join(kept)}" if len(kept) <= 6 else (
                f"for the other {len(kept)} models")  # fmt: skip
            detail += f"; not rejected {named} (power per model not simulated)"
        detail += f"; not testable (1 bin) at {weight} {', '.join(untested)}" if untested else ""
        detail += f"; {min(bins)}-{max(bins)} bins per model" if bins else ""
        said = verdict("nias", bool(flagged), detail)
        if bins and max(bins) < 2:  # no model has two bins to compare
            said = "not testable (1 bin for every model)"
        lines.append(f"NIAS (each model's loss-calibration test, Holm over the models) {said}")
    simulated = record.get("simulated")
    if simulated:
        size = ", ".join(f"{name.upper()} {v['rate']:.3f}" for name, v in simulated["size"].items())
        at = "N, K, number of classes and class frequencies" if "classes" in record else (
            "N, K and prior"
        )  # fmt: skip
        lines.append(
            f"Simulated sizes at this {at} ({simulated['datasets']} data sets, "
            f"{simulated['bootstrap']} replicates): {size}"
        )
    elif not _untestable(record):
        lines.append(
            f"Size and power not simulated: `iml reveal --run {record['run']}` simulates them "
            "and says whether a rejection is evidence at this N"
        )
    if "bins" not in record:
        counts = ", ".join(str(b) for b in BIN_COUNTS)
        lines.append(f"Verdicts not reached again at {counts} quantile bins: fragility unchecked")
    lines.append(f"Intervals: {record['intervals']}")
    return "\n".join(lines)


def _class_nias_line(record: Mapping[str, Any], verdict: Any) -> str:
    """The NIAS line of a multiclass record: each model's multinomial chi-square over its
    cells, with its degrees of freedom; "not testable" where a model has fewer than 2."""
    nias = record["nias"]
    keys = record["keys"]
    df, cells = nias["degrees_of_freedom"], nias["cells"]
    flagged = [key for key, v in zip(keys, nias["violated"], strict=True) if v]
    detail = f" at {', '.join(flagged)}" if flagged else ""
    untested = [key for key, d in zip(keys, df, strict=True) if d < 2]
    detail += f"; not testable (under 2 degrees of freedom) at {', '.join(untested)}" if (
        untested) else ""  # fmt: skip
    p = ", ".join(  # a p-value below float32's smallest normal number reads as 0
        f"{key}: p {'= ' + format(v, '.3g') if v > 0 else '< 1e-38'}"
        for key, v in zip(keys, nias["p_value"], strict=True)
    )

    def spread(x: Sequence[int]) -> str:
        return f"{min(x)}" if min(x) == max(x) else f"{min(x)}-{max(x)}"

    detail += (
        f"; {spread(cells)} cells and {spread(df)} degrees of freedom per model; Holm-adjusted {p}"
    )
    said = verdict("nias", bool(flagged), detail)
    if max(df) < 2:
        said = "not testable (under 2 degrees of freedom for every model)"
    return f"NIAS (each model's multinomial loss-calibration test, Holm over the models) {said}"
