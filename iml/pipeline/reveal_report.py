"""The report of ``iml reveal`` on a ``revealed.json`` record: its figures, the verdicts'
wording in the value matrix's title, and the lines printed on the terminal.

A verdict reads "rejected" or "not rejected"; a non-rejection carries the test's simulated power
against its stated alternative, and a verdict that changes with the bins is labelled fragile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from iml.grids import beta_key
from iml.plots import figure_cost_bounds, figure_information_by_weight, figure_value_matrix

FIGURES = ("revealed_information", "revealed_value_matrix", "revealed_cost_bounds")


def _short_keys(betas: Sequence[float]) -> list[str]:
    """Labels of the class weights: three significant digits where that keeps them apart."""
    short = [f"{b:.3g}" for b in betas]
    return short if len(set(short)) == len(short) else [beta_key(b) for b in betas]


def revealed_figures(record: Mapping[str, Any]) -> dict[str, Any]:
    """The three figures of a ``revealed.json`` record, by file name (:data:`FIGURES`)."""

    betas = record["betas"]
    weight = record["loss"]["weight_name"]
    cost = record["cost_bounds"]
    niac = record["niac"]
    interval = np.stack(
        [np.asarray(cost["lower_interval"])[0], np.asarray(cost["upper_interval"])[1]]
    )
    return {
        "revealed_information": figure_information_by_weight(
            betas, record["information"]["estimate"], record["information"]["interval"],
            weight_name=weight,
        ),
        "revealed_value_matrix": figure_value_matrix(
            record["value_matrix"]["estimate"],
            _short_keys(betas),
            record["nis"]["pairs"],
            niac["cycle"] if niac["violated"] else None,
            weight_name=weight,
            title=verdicts_title(record),
        ),
        "revealed_cost_bounds": figure_cost_bounds(
            betas, cost["lower"], cost["upper"], interval, reference=cost["reference"],
            weight_name=weight,
        ),
    }  # fmt: skip


def verdicts_title(record: Mapping[str, Any]) -> str:
    """``"NIS rejected, NIAC not rejected (fragile)"``: each verdict, and which change with the
    bins."""
    fragile = record.get("fragile", {})
    parts = []
    for name in ("nis", "niac"):
        word = "rejected" if record[name]["violated"] else "not rejected"
        parts.append(f"{name.upper()} {word}" + (" (fragile)" if fragile.get(name) else ""))
    return ", ".join(parts)


def revealed_summary(record: Mapping[str, Any]) -> str:
    """A few lines for the terminal: the data, ``I_k``, NIS, NIAC, ``lambda`` and NIAS.

    Each verdict reads "rejected" or "not rejected"; a non-rejection carries the test's
    simulated power against its stated alternative, and a verdict that changes with the bins is
    labelled fragile."""

    def verdict(name: str, rejected: bool, detail: str) -> str:
        line = f"{'rejected' if rejected else 'not rejected'}{detail}"
        power = record.get("simulated", {}).get("power", {}).get(name)
        if not rejected and power is not None:
            line += f"; power {power['rate']:.2f} (se {power['se']:.2f}) against {power['against']}"
        if record.get("fragile", {}).get(name):
            shown = ", ".join(
                f"{key.replace('quantile_', '')} bins: "
                f"{'rejected' if v[name]['rejected'] else 'not rejected'}"
                for key, v in record["bins"].items()
                if key != "adaptive"
            )
            line += f"; FRAGILE ({shown})"
        return line

    def margin(test: Mapping[str, Any]) -> str:
        return (
            f": margin {test['margin']:.4g}, lower bound {test['lower_bound']:.4g}, "
            f"p = {test['p_value']:.3g}"
        )

    weight = record["loss"]["weight_name"]
    keys = [beta_key(b) for b in record["betas"]]
    info = np.asarray(record["information"]["estimate"])
    low, high = np.asarray(record["information"]["interval"])
    if len(keys) <= 6:
        shown = "; ".join(
            f"{key}: {i:.4f} [{lo:.4f}, {hi:.4f}]"
            for key, i, lo, hi in zip(keys, info, low, high, strict=True)
        )
    else:
        a, b = int(info.argmin()), int(info.argmax())
        short = _short_keys(record["betas"])
        shown = f"from {info[a]:.4f} (at {short[a]}) to {info[b]:.4f} (at {short[b]})"
    nis = record["nis"]
    pairs = ""
    if nis["pairs"]:
        pairs = f"; {len(nis['pairs'])} significant pairs (k, j)"
        if len(nis["pairs"]) <= 6:
            pairs += ": " + ", ".join(f"({keys[k]}, {keys[j]})" for k, j in nis["pairs"])
    lam = record["shannon_lambda"]
    if lam["rejected"]:
        shannon = "rejected at the point estimates (no lambda fits them)"
    else:
        shannon = f"lambda in [{lam['lower']:.4g}, {lam['upper']:.4g}] at the point estimates"
    bins = f"at most {record['n_bins']} {record['strategy']} bins"
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
    if "nias" in record:
        nias = record["nias"]
        short = _short_keys(record["betas"])
        flagged = [key for key, v in zip(short, nias["violated"], strict=True) if v]
        detail = f" at {weight} {', '.join(flagged)}" if flagged else ""
        if len(flagged) > 6:
            detail = (
                f" for {len(flagged)} of {len(short)} models ({weight} {flagged[0]}, "
                f"{flagged[1]}, ..., {flagged[-1]})"
            )
        lines.append(
            "NIAS (loss calibration, one test over every model and bin) "
            + verdict("nias", bool(flagged), detail)
        )
    simulated = record.get("simulated")
    if simulated:
        size = ", ".join(f"{name.upper()} {v['rate']:.3f}" for name, v in simulated["size"].items())
        lines.append(
            f"Simulated sizes at this N, K and prior ({simulated['datasets']} data sets, "
            f"{simulated['bootstrap']} replicates): {size}"
        )
    lines.append(f"Intervals: {record['intervals']}")
    return "\n".join(lines)
