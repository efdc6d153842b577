"""experiments.studies.ece_comparisons: its stored record, and the verdicts of significance that
its intervals give."""

import json
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


@pytest.mark.slow
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


@pytest.mark.slow
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


PMN, STOPPED = "pneumoniamnist", "pneumoniamnist_early_stopping"
PATIENCE = "pneumoniamnist_patience"
FLOOR, FLOOR_LOW = "pneumoniamnist_lr_floor", "pneumoniamnist_lr_floor_other_betas"
SEEDS, FLOOR_SEEDS = "pneumoniamnist_seeds", "pneumoniamnist_lr_floor_seeds"
DIGITS, MULTICLASS = "reproduce_digits", "reproduce_digits_multiclass"
PMN_BETAS = ("0.5", "0.9", "0.99")
FLOOR_CORRECTED = "beta 0.99 with the floor, corrected"


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
