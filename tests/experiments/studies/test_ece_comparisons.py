"""experiments.studies.ece_comparisons: its stored record, and the READMEs' sentences that
state it."""

import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.studies import ece_comparisons as E
from iml.calibration import compare_ece, expected_calibration_error

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "docs" / "results"
STORED = RESULTS / "ece_comparisons" / "comparisons.json"


def stored() -> dict[tuple[str, str], dict]:
    return {(r["folder"], r["comparison"]): r for r in json.loads(STORED.read_text())}


def test_every_comparison_is_stored_in_order():
    records = json.loads(STORED.read_text())
    assert [(r["folder"], r["comparison"], r["first"], r["second"]) for r in records] == [
        (folder, claim, first, second) for folder, claim, first, second in E.COMPARISONS
    ]
    assert {r["bootstrap"] for r in records} == {1000}


@pytest.mark.parametrize(
    "claim",
    [
        "beta 0.99 with the floor: corrected against cross-fitted Platt",
        "mean of the nine other classes: weighted and corrected against unweighted",
    ],
)
def test_the_stored_point_estimates_are_what_the_experiment_computes(claim):
    (index,) = [i for i, c in enumerate(E.COMPARISONS) if c[1] == claim]
    fresh = E.record(index, n_bootstrap=20)  # point estimates do not depend on the replicates
    old = stored()[(fresh["folder"], claim)]
    for field in ("ece_first", "ece_second", "difference", "ratio", "n"):
        assert fresh[field] == pytest.approx(old[field], abs=1e-4), field


def test_paired_bootstrap_resamples_the_rows_that_compare_ece_does():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    a = np.clip(0.3 * y + 0.6 * rng.random(300), 0.01, 0.99).astype(np.float32)
    b = rng.random(300).astype(np.float32)
    key = jax.random.key(3)
    expected = compare_ece(a, b, y, n_bootstrap=50, key=key)

    ja, jb, jy = jnp.asarray(a), jnp.asarray(b), jnp.asarray(y)

    def both(rows):
        return jnp.stack(
            [
                expected_calibration_error(ja[rows], jy[rows]),
                expected_calibration_error(jb[rows], jy[rows]),
            ]
        )

    got = E.paired_bootstrap(both, 300, 50, key)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-7)


def test_a_missing_results_folder_is_named(tmp_path, capsys):
    assert E.main(["--results", str(tmp_path), "--n-bootstrap", "2"]) == 2
    assert "ece_comparisons: error:" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# The sentences that state the intervals
# ----------------------------------------------------------------------------------------------


def difference(folder: str, claim: str) -> list[float]:
    r = stored()[(folder, claim)]
    return [r["difference"], *r["difference_interval"]]


def ratio(folder: str, claim: str) -> list[float]:
    r = stored()[(folder, claim)]
    return [r["ratio"], *r["ratio_interval"]]


def schedule(name: str) -> list[float]:
    records = json.loads((RESULTS / "pneumoniamnist_schedules" / "ratios.json").read_text())
    (r,) = [r for r in records if r["schedule"] == name]
    return [r["difference"], *r["difference_interval"]]


PMN, STOPPED = "pneumoniamnist", "pneumoniamnist_early_stopping"
PATIENCE = "pneumoniamnist_patience"
FLOOR, FLOOR_LOW = "pneumoniamnist_lr_floor", "pneumoniamnist_lr_floor_other_betas"
SEEDS, FLOOR_SEEDS = "pneumoniamnist_seeds", "pneumoniamnist_lr_floor_seeds"
DIGITS, MULTICLASS = "reproduce_digits", "reproduce_digits_multiclass"
PMN_BETAS = ("0.5", "0.9", "0.99")
FLOOR_CORRECTED = "beta 0.99 with the floor, corrected"

# (README folder, phrase with {} for each number, the values the numbers state)
SENTENCES = [
    (
        PMN,
        "the corrected ECE over the raw one is {} [{}, {}] and {} [{}, {}]",
        lambda: [
            *ratio(PMN, "beta 0.9: loss-corrected against raw"),
            *ratio(PMN, "beta 0.99: loss-corrected against raw"),
        ],
    ),
    (
        PMN,
        "The loss-corrected ECE minus Platt's is {} [{}, {}], {} [{}, {}] and {} [{}, {}] at "
        "β = 0.5, 0.9 and 0.99; minus isotonic's, {} [{}, {}], {} [{}, {}] and {} [{}, {}].",
        lambda: [
            x
            for m in ("platt", "isotonic")
            for b in PMN_BETAS
            for x in difference(PMN, f"beta {b}: loss-corrected against cross-fitted {m}")
        ],
    ),
    (
        PMN,
        "No ECE difference is significant: {} [{}, {}], {} [{}, {}] and {} [{}, {}] at β = 0.5",
        lambda: [
            x
            for b in PMN_BETAS
            for x in difference(PMN, f"beta {b}: beta calibration against Platt scaling")
        ],
    ),
    (
        STOPPED,
        "goes from 0.037 to 0.032, a difference of {} [{}, {}]",
        lambda: difference(STOPPED, "beta 0.99, corrected: patience 2 against the 6-epoch cap"),
    ),
    (
        STOPPED,
        "and stays {} [{}, {}] above the ECE at β = 0.5",
        lambda: schedule("patience 2"),
    ),
    (
        STOPPED,
        "falls to 0.010, a difference of {} [{}, {}] from this run's",
        lambda: difference(STOPPED, "beta 0.99, corrected: floor 1e-4 (seed 0) against patience 2"),
    ),
    (
        STOPPED,
        "Its difference from the floor's ensemble at β = 0.5, {} [{}, {}]",
        lambda: schedule("floor 1e-4"),
    ),
    (
        STOPPED,
        "a difference of {} [{}, {}] between the two.",
        lambda: difference(STOPPED, "corrected: beta 0.9 against beta 0.5"),
    ),
    (
        PATIENCE,
        "the corrected ECE lies {} [{}, {}] above the ECE at β = 0.5",
        lambda: schedule("patience 6"),
    ),
    (
        PATIENCE,
        "moved from 0.032 to 0.027, a difference of {} [{}, {}]",
        lambda: difference(PATIENCE, "beta 0.99, corrected: patience 6 against patience 2"),
    ),
    (
        PATIENCE,
        "Its difference from the floor's ensemble at β = 0.5, {} [{}, {}]",
        lambda: schedule("floor 1e-4"),
    ),
    (
        FLOOR,
        "The difference is {} [{}, {}] and the ratio {} [{}, {}]",
        lambda: [
            *difference(FLOOR, E.COMPARISONS[_index(FLOOR, "beta 0.5 without it")][1]),
            *ratio(FLOOR, E.COMPARISONS[_index(FLOOR, "beta 0.5 without it")][1]),
        ],
    ),
    (
        FLOOR,
        "the floor changes the corrected ECE by {} [{}, {}] against the patience run",
        lambda: difference(FLOOR, "beta 0.99, corrected: floor 1e-4 against patience 6 without it"),
    ),
    (
        FLOOR,
        "the corrected ECE minus Platt's, {} [{}, {}], is not significant",
        lambda: difference(FLOOR, "beta 0.99 with the floor: corrected against cross-fitted Platt"),
    ),
    (
        FLOOR,
        "differences of {} [{}, {}] (not significant) and {} [{}, {}].",
        lambda: [
            *difference(FLOOR_LOW, "beta 0.5, corrected: floor 1e-4 against patience 6 without it"),
            *difference(
                FLOOR_LOW,
                "beta 0.9, corrected: floor 1e-4 (patience 6) against patience 2 without it",
            ),
        ],
    ),
    (
        FLOOR,
        "differs from seeds 1 and 2 by {} [{}, {}] and {} [{}, {}], not significant, and from "
        "seed 3 by {} [{}, {}].",
        lambda: [
            x
            for s in (1, 2, 3)
            for x in difference(FLOOR_SEEDS, f"{FLOOR_CORRECTED}: seed 0 against seed {s}")
        ],
    ),
    (
        FLOOR_LOW,
        "The differences are {} [{}, {}], {} [{}, {}] and {} [{}, {}]",
        lambda: [
            *difference(FLOOR_LOW, "beta 0.5, corrected: floor 1e-4 against patience 6 without it"),
            *difference(
                FLOOR_LOW,
                "beta 0.9, corrected: floor 1e-4 (patience 6) against patience 2 without it",
            ),
            *difference(FLOOR, "beta 0.99, corrected: floor 1e-4 against patience 6 without it"),
        ],
    ),
    (
        FLOOR_LOW,
        "The corrected ECE minus Platt's is {} [{}, {}] and {} [{}, {}] there, neither "
        "significant at 5%, and {} [{}, {}] at β = 0.5.",
        lambda: [
            *difference(FLOOR_LOW, "beta 0.9 with the floor: corrected against cross-fitted Platt"),
            *difference(FLOOR, "beta 0.99 with the floor: corrected against cross-fitted Platt"),
            *difference(FLOOR_LOW, "beta 0.5 with the floor: corrected against cross-fitted Platt"),
        ],
    ),
    (
        SEEDS,
        "a difference of {} [{}, {}], and {} [{}, {}] above the early-stopping run's β = 0.5",
        lambda: [
            *difference(
                SEEDS, "beta 0.99, corrected: 4 seeds' mean score against patience 2's one seed"
            ),
            *difference(
                SEEDS, "4 seeds' mean score at beta 0.99, corrected, against beta 0.5 (patience 2)"
            ),
        ],
    ),
    (
        SEEDS,
        "differences of {} [{}, {}] and {} [{}, {}]. Against β = 0.5 they stay {} [{}, {}] and "
        "{} [{}, {}] above.",
        lambda: [
            *difference(
                SEEDS, "beta 0.99: 4 seeds' mean of corrected scores against patience 2's one seed"
            ),
            *difference(
                SEEDS, "beta 0.99, corrected: 4 seeds' mean logit against patience 2's one seed"
            ),
            *difference(
                SEEDS,
                "4 seeds' mean of corrected scores at beta 0.99 against beta 0.5 (patience 2)",
            ),
            *difference(
                SEEDS, "4 seeds' mean logit at beta 0.99, corrected, against beta 0.5 (patience 2)"
            ),
        ],
    ),
    (
        FLOOR_SEEDS,
        "Seed 0's ECE differs from seeds 1 and 2's by {} [{}, {}] and {} [{}, {}], not "
        "significant, and from seed 3's by {} [{}, {}]",
        lambda: [
            x
            for s in (1, 2, 3)
            for x in difference(FLOOR_SEEDS, f"{FLOOR_CORRECTED}: seed 0 against seed {s}")
        ],
    ),
    (
        FLOOR_SEEDS,
        "it lies {} [{}, {}], {} [{}, {}], {} [{}, {}] and {} [{}, {}] above seeds 0 to 3.",
        lambda: [
            x
            for s in (0, 1, 2, 3)
            for x in difference(
                FLOOR_SEEDS, f"{FLOOR_CORRECTED}: 4 seeds' mean score against seed {s}"
            )
        ],
    ),
    (
        FLOOR_SEEDS,
        "differs from seeds 0 to 3 by {} [{}, {}], {} [{}, {}], {} [{}, {}] and {} [{}, {}]:",
        lambda: [
            x
            for s in (0, 1, 2, 3)
            for x in difference(
                FLOOR_SEEDS, f"{FLOOR_CORRECTED}: 4 seeds' mean logit against seed {s}"
            )
        ],
    ),
    (
        FLOOR_SEEDS,
        "Against the paper's ensemble it is {} [{}, {}].",
        lambda: difference(
            FLOOR_SEEDS, f"{FLOOR_CORRECTED}: 4 seeds' mean logit against their mean score"
        ),
    ),
    (
        FLOOR_SEEDS,
        "with the paper's average, a difference of {} [{}, {}]",
        lambda: difference(
            FLOOR_SEEDS, f"{FLOOR_CORRECTED}: seeds 1-3's mean logit against their mean score"
        ),
    ),
    (
        DIGITS,
        "None of the differences is significant: {} [{}, {}], {} [{}, {}] and {} [{}, {}]",
        lambda: [
            x
            for b in PMN_BETAS
            for x in difference(DIGITS, f"beta {b}: beta calibration against Platt scaling")
        ],
    ),
    (
        MULTICLASS,
        "quadruples their ECE: {} [{}, {}] times the unweighted ensemble's",
        lambda: ratio(MULTICLASS, "class 8: weighted, raw, against unweighted"),
    ),
    (
        MULTICLASS,
        "a difference of {} [{}, {}] from the raw scores'. Against the unweighted ensemble's "
        "0.0096 the difference is {} [{}, {}], not significant, with a wide ratio of {} [{}, {}].",
        lambda: [
            *difference(MULTICLASS, "class 8, weighted: corrected against raw"),
            *difference(MULTICLASS, "class 8: weighted and corrected against unweighted"),
            *ratio(MULTICLASS, "class 8: weighted and corrected against unweighted"),
        ],
    ),
    (
        MULTICLASS,
        "a difference of {} [{}, {}], and the corrected one is {} [{}, {}] times",
        lambda: [
            *difference(
                MULTICLASS, "mean of the nine other classes, weighted: corrected against raw"
            ),
            *ratio(
                MULTICLASS,
                "mean of the nine other classes: weighted and corrected against unweighted",
            ),
        ],
    ),
    (
        MULTICLASS,
        "The difference, {} [{}, {}], is not significant; from the unweighted ensemble's 0.0279 "
        "the corrected one differs by {} [{}, {}].",
        lambda: [
            *difference(MULTICLASS, "top label, weighted: corrected against raw"),
            *difference(MULTICLASS, "top label: weighted and corrected against unweighted"),
        ],
    ),
    (
        "ece_comparisons",
        "in `../pneumoniamnist_lr_floor/`: ratio {} [{}, {}]",
        lambda: ratio(FLOOR, "beta 0.99 with the floor: corrected against cross-fitted Platt"),
    ),
]


def _index(folder: str, part: str) -> int:
    (index,) = [i for i, c in enumerate(E.COMPARISONS) if c[0] == folder and part in c[1]]
    return index


_NUMBER = r"([+-]?\d+\.\d+)"


def _stated(folder: str, phrase: str) -> list[str]:
    text = re.sub(r"\s+", " ", (RESULTS / folder / "README.md").read_text())
    regex = "".join(_NUMBER if p == "{}" else re.escape(p) for p in re.split(r"(\{\})", phrase))
    found = re.findall(regex, text)
    assert len(found) == 1, f"{folder}: {len(found)} places read {phrase!r}"
    return list(found[0]) if isinstance(found[0], tuple) else [found[0]]


def _written_as(value: float, text: str) -> bool:
    places = len(text.partition(".")[2])
    signed = text[0] in "+-"
    return f"{value:{'+' if signed else ''}.{places}f}" == text


@pytest.mark.parametrize("folder, phrase, values", SENTENCES, ids=[s[1][:50] for s in SENTENCES])
def test_the_readmes_state_the_stored_intervals(folder, phrase, values):
    texts, expected = _stated(folder, phrase), values()
    assert len(texts) == len(expected)
    wrong = [(t, v) for t, v in zip(texts, expected, strict=True) if not _written_as(v, t)]
    assert not wrong, f"{folder}: {phrase!r} states (text, record): {wrong}"


# The comparisons that the READMEs call not significant at 5%, and those they call significant.
NOT_SIGNIFICANT = [
    (PMN, "beta 0.5: loss-corrected against cross-fitted isotonic"),
    *[(PMN, f"beta {b}: beta calibration against Platt scaling") for b in PMN_BETAS],
    *[(DIGITS, f"beta {b}: beta calibration against Platt scaling") for b in PMN_BETAS],
    (FLOOR, "beta 0.99, corrected with the floor, against beta 0.5 without it (patience 6)"),
    (FLOOR, "beta 0.99 with the floor: corrected against cross-fitted Platt"),
    (FLOOR_LOW, "beta 0.5, corrected: floor 1e-4 against patience 6 without it"),
    (FLOOR_LOW, "beta 0.9 with the floor: corrected against cross-fitted Platt"),
    *[(FLOOR_SEEDS, f"{FLOOR_CORRECTED}: seed 0 against seed {s}") for s in (1, 2)],
    *[(FLOOR_SEEDS, f"{FLOOR_CORRECTED}: 4 seeds' mean logit against seed {s}") for s in (0, 1, 2)],
    (MULTICLASS, "class 8: weighted and corrected against unweighted"),
    (MULTICLASS, "top label, weighted: corrected against raw"),
]
SIGNIFICANT = [
    (MULTICLASS, "class 8, weighted: corrected against raw"),
    (MULTICLASS, "class 8: weighted, raw, against unweighted"),
    (MULTICLASS, "mean of the nine other classes: weighted and corrected against unweighted"),
    (MULTICLASS, "top label: weighted and corrected against unweighted"),
    *[(PMN, f"beta {b}: loss-corrected against raw") for b in ("0.9", "0.99")],
    (STOPPED, "beta 0.99, corrected: patience 2 against the 6-epoch cap"),
    (STOPPED, "beta 0.99, corrected: floor 1e-4 (seed 0) against patience 2"),
    (PATIENCE, "beta 0.99, corrected: patience 6 against patience 2"),
    (SEEDS, "beta 0.99, corrected: 4 seeds' mean score against patience 2's one seed"),
    *[(PMN, f"beta {b}: loss-corrected against cross-fitted platt") for b in PMN_BETAS],
    *[(PMN, f"beta {b}: loss-corrected against cross-fitted isotonic") for b in ("0.9", "0.99")],
    (FLOOR_LOW, "beta 0.9, corrected: floor 1e-4 (patience 6) against patience 2 without it"),
    (FLOOR, "beta 0.99, corrected: floor 1e-4 against patience 6 without it"),
    (FLOOR_SEEDS, f"{FLOOR_CORRECTED}: seed 0 against seed 3"),
    *[(FLOOR_SEEDS, f"{FLOOR_CORRECTED}: 4 seeds' mean score against seed {s}") for s in range(4)],
    (FLOOR_SEEDS, f"{FLOOR_CORRECTED}: 4 seeds' mean logit against seed 3"),
]


def test_the_verdicts_of_significance_follow_the_intervals():
    records = stored()
    for key in NOT_SIGNIFICANT:
        lo, hi = records[key]["difference_interval"]
        assert lo <= 0 <= hi, key
    for key in SIGNIFICANT:
        lo, hi = records[key]["difference_interval"]
        assert not lo <= 0 <= hi, key
