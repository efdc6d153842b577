"""The ``iml reveal`` command (``iml.commands.reveal``), end to end: what reveal finds in a sweep,
in the stored digits run and in merged reproduce runs, and bad input named in one line with exit
status 2, nothing written."""

import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
from _sweep_tables import write_sweep_scores

from iml import cli, loss_spec
from iml.pipeline.reveal import verdicts_title
from iml.pipeline.reveal_input import load_reveal_input
from iml.revealed import reveal, simulate_gaussian_agents

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "docs" / "results" / "reproduce_digits"
BETAS = np.asarray([0.3, 0.5, 0.8, 0.95])
N = 2000
N_BOOTSTRAP = 100
FIGURES = ("revealed_information", "revealed_value_matrix", "revealed_cost_bounds")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Four Bayesian agents of one precision (capacity-constrained), each at its beta, stored
    as a finished sweep's member batches."""
    scores, labels = simulate_gaussian_agents(jax.random.key(3), BETAS, 1.5, 0.2, N)
    scores, labels = np.asarray(scores, np.float64), np.asarray(labels)
    train = {"l2": "auto", "l2_grid": [1e-3, 1e-2], "l2_scale": "paper", "standardize": True}
    return write_sweep_scores(tmp_path_factory.mktemp("sweep"), scores, labels, BETAS, train=train)


def _check_record(record: dict, scores, labels, losses, seed: int = 0) -> None:
    """``record`` holds what reveal() gives on the same arrays, to the last float32 bit."""
    direct = reveal(
        scores,
        labels,
        losses,
        record["n_bins"],
        record["strategy"],
        n_bootstrap=record["n_bootstrap"],
        key=jax.random.key(seed),
    )

    def same(got, want):
        np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want))

    same(record["information"]["estimate"], direct.information)
    same(record["information"]["interval"], direct.information_interval)
    assert record["information"]["interval_kind"].startswith("basic bootstrap interval")
    same(record["value_matrix"]["estimate"], direct.value_matrix)
    same(record["value_matrix"]["interval"], direct.value_matrix_interval)
    same(record["experiments"]["posterior"], direct.experiments.posterior)
    for name, test in (("nis", direct.nis_test), ("niac", direct.niac_test)):
        for field in ("margin", "lower_bound", "critical_value", "p_value"):
            same(record[name][field], getattr(test, field))
        assert record[name]["violated"] == bool(test.violated)
    assert record["nis"]["pairs"] == np.argwhere(np.asarray(direct.nis_pairs)).tolist()
    assert record["niac"]["cycle"] == [int(k) for k in direct.niac.cycle if k >= 0]
    same(record["cost_bounds"]["lower"], direct.cost_bounds.lower)
    same(record["cost_bounds"]["upper"], direct.cost_bounds.upper)
    same(record["cost_bounds"]["upper_interval"], direct.cost_upper_interval)
    for end in ("lower", "upper"):
        same(record["shannon_lambda"][end], getattr(direct.shannon, end))
        same(record["shannon_lambda"][f"{end}_interval"], getattr(direct, f"lambda_{end}_interval"))
    same(record["nias"]["p_value"], direct.nias.p_value)
    assert record["nias"]["rejected"] == bool(np.any(direct.nias.violated))
    assert (record["K"], record["n"]) == np.shape(scores)
    # Each verdict at 5, 10 and 20 quantile bins, as reveal() reaches it there, and the fragile
    # label wherever the four verdicts differ.
    assert set(record["bins"]) == {"adaptive", "quantile_5", "quantile_10", "quantile_20"}
    for bins in (5, 10, 20):
        at = reveal(scores, labels, losses, bins, "quantile", n_bootstrap=record["n_bootstrap"],
                    key=jax.random.key(seed))  # fmt: skip
        got = record["bins"][f"quantile_{bins}"]
        assert got["nis"]["rejected"] == bool(at.nis_test.violated)
        assert got["niac"]["rejected"] == bool(at.niac_test.violated)
        assert got["nias"]["rejected"] == bool(np.any(at.nias.violated))
    for test in ("nis", "niac", "nias"):
        verdicts = {v[test]["rejected"] for v in record["bins"].values()}
        assert record["fragile"][test] == (len(verdicts) > 1)
    assert "bootstrap over the evaluation observations" in record["intervals"]
    assert "not the noise of training" in record["intervals"]


@pytest.mark.slow
def test_reveal_of_a_sweep_records_what_reveal_finds(sweep, tmp_path, capsys):
    out = tmp_path / "revealed"
    argv = [
        "reveal",
        "--run",
        str(sweep),
        "--out",
        str(out),
        f"--config.eval.n_bootstrap={N_BOOTSTRAP!s}",
        "--power-datasets",
        "16",
    ]
    assert cli.main([*argv, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"K=4 models, N={N} observations" in printed
    assert "NIS (capacity-constrained learning)" in printed and "NIAC (costly learning)" in printed
    record = json.loads((out / "revealed.json").read_text())
    assert record["kind"] == "table" and record["betas"] == BETAS.tolist()
    assert record["loss"]["name"] == "log" and record["seed"] == 0
    # The ridge the sweep chose per loss, and what it means for the tests of learning.
    assert record["ridge"]["l2"] == "auto" and record["ridge"]["l2_grid"] == [1e-3, 1e-2]
    assert "Ridge: the ridge was chosen per loss and rotation on the validation folds" in printed
    assert "test the learning and the choice of penalty together" in printed
    # the fixture's agents, as stored
    scores, labels = simulate_gaussian_agents(jax.random.key(3), BETAS, 1.5, 0.2, N)
    _check_record(record, np.asarray(scores, np.float32), np.asarray(labels), BETAS)
    # Size and power simulated at the run's N, K and prior, each beside its alternative.
    simulated = record["simulated"]
    assert simulated["datasets"] == 16 and simulated["bootstrap"] == 200
    assert set(simulated["scenarios"]) == {"capacity", "falling", "rising", "misreported"}
    for test in ("nis", "niac", "nias"):
        for entry in (simulated["size"][test], simulated["power"][test]):
            assert 0.0 <= entry["rate"] <= 1.0 and 0.0 <= entry["se"] <= 0.5
    against = simulated["power"]["niac"]["against"]
    assert against == "precision rising by 0.3 along the class weights"
    assert simulated["scenarios"]["rising"]["niac_margin"] > 0  # the alternative fails NIAC
    assert simulated["scenarios"]["capacity"]["nis_margin"] == 0.0
    # Agents as informative as the run's models.
    assert simulated["information"] == pytest.approx(np.median(record["information"]["estimate"]))
    # Verdicts are worded "rejected" or "not rejected", a non-rejection with its power.
    assert "VIOLATED" not in printed and "holds" not in printed
    for line in printed.splitlines():
        if line.startswith(("NIS", "NIAC", "NIAS")) and "not rejected" in line:
            assert "; power " in line and " against " in line
    # The value matrix's title gives both verdicts and labels a fragile one.
    title = verdicts_title(record)
    assert title.startswith("NIS ") and ", NIAC " in title
    fragile = {**record, "fragile": {"nis": True, "niac": False, "nias": False}}
    nis, niac = verdicts_title(fragile).split(", NIAC ")
    assert nis.endswith("fragile)") and "fragile" not in niac
    for name in FIGURES:
        assert (out / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
        assert (out / "figures" / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"


@pytest.mark.slow
def test_reveal_of_the_stored_digits_run_records_what_reveal_finds(tmp_path, capsys):
    before = sorted(p.relative_to(DIGITS) for p in DIGITS.rglob("*"))
    # the report's settings as every command takes them, the figures in the formats asked
    argv = ["reveal", "--run", str(DIGITS), "--out", str(tmp_path), "--config.eval.n_bootstrap",
            "200", "--config.eval.figures=svg", "--config.eval.report_seed=3",
            "--power-datasets", "0"]  # fmt: skip
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert f"{tmp_path / 'figures'}/{{{','.join(FIGURES)}}}.{{svg}}" in captured.out
    drawn = sorted(p.name for p in (tmp_path / "figures").iterdir())
    assert drawn == sorted(f"{name}.svg" for name in FIGURES)
    assert "revealing 3 models on 1797 observations" in captured.err
    assert "K=3 models, N=1797 observations scored by all (of 1797)" in captured.out
    record = json.loads((tmp_path / "revealed.json").read_text())
    assert record["kind"] == "images" and record["betas"] == [0.5, 0.9, 0.99]
    assert record["n_bootstrap"] == 200 and record["seed"] == 3
    with np.load(DIGITS / "ensemble_scores.npz") as stored:
        scores, labels = stored["scores"].astype(np.float32), stored["labels"]
    _check_record(record, scores, labels, np.asarray([0.5, 0.9, 0.99]), seed=3)
    assert "simulated" not in record  # --power-datasets 0
    assert sorted(p.relative_to(DIGITS) for p in DIGITS.rglob("*")) == before  # read only


# ----------------------------------------------------------------------------------------------
# Bad input: one line naming it, exit status 2, nothing written
# ----------------------------------------------------------------------------------------------


def _bad(argv, tmp_path, capsys) -> str:
    out = tmp_path / "out"
    assert cli.main(["reveal", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iml reveal: error: ") and err.count("\n") == 1, err
    assert not out.exists()
    return err


def test_a_missing_run_folder_is_named(tmp_path, capsys):
    err = _bad(["--run", str(tmp_path / "norun")], tmp_path, capsys)
    assert "--run: no run folder" in err and "norun" in err


def test_a_folder_of_neither_kind_is_named(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    err = _bad(["--run", str(tmp_path / "empty")], tmp_path, capsys)
    assert "neither an `iml reproduce` run" in err and "nor an `iml sweep` run" in err


def test_a_single_model_is_too_few(tmp_path, capsys):
    scores, labels = simulate_gaussian_agents(jax.random.key(0), [0.5], 1.5, 0.2, 200)
    run = write_sweep_scores(tmp_path / "one", scores, labels, [0.5])
    err = _bad(["--run", str(run)], tmp_path, capsys)
    assert "holds 1 model (beta 0.5)" in err and "at least 2" in err


@pytest.mark.slow
def test_a_multiclass_sweep_is_revealed_by_its_cells(tmp_path, capsys):
    """A sweep of 3 softmax losses over 3 classes (calibrated agents): `iml reveal` records its
    keys and classes, its cells and NIAS by degrees of freedom, and draws the information by
    class; NIAS is not rejected and its p-values recorded (a test at 5% rejects about one data
    set of calibrated agents in 20: key 4's, for one; this is key 2's)."""
    weights = np.ones((3, 3))
    weights[:, 2] = [1.0, 2.0, 4.0]
    losses = loss_spec("class_weighted_softmax", class_weights=weights)
    scores, labels = simulate_gaussian_agents(jax.random.key(2), losses, 1.5, (0.4, 0.4, 0.2), N)
    keys = ["ones", "w[2]=2", "w[2]=4"]
    run = write_sweep_scores(tmp_path / "multi", scores, labels, loss=losses, keys=keys)
    out = tmp_path / "revealed"
    argv = ["reveal", "--run", str(run), "--out", str(out), "--config.eval.n_bins=5",
            f"--config.eval.n_bootstrap={N_BOOTSTRAP!s}", "--config.eval.figures=png",
            "--power-datasets", "0", "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"K=3 models, N={N} observations" in printed and "3 classes; signals: cells" in printed
    record = json.loads((out / "revealed.json").read_text())
    assert record["classes"] == 3 and record["keys"] == keys and record["kind"] == "table"
    assert np.shape(record["experiments"]["posterior"]) == (3, 15, 3)
    assert np.shape(record["class_information"]["interval"]) == (2, 3, 3)
    assert not record["nias"]["rejected"] and min(record["nias"]["p_value"]) > 0.05
    assert len(record["nias"]["degrees_of_freedom"]) == 3 and "simulated" not in record
    assert "NIAS (each model's multinomial loss-calibration test" in printed
    assert "holds" not in printed
    for name in ("revealed_information_by_class", "revealed_value_matrix", "revealed_cost_bounds"):
        assert (out / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    assert "revealed_information_by_class" in printed.splitlines()[-1]


def test_a_sweep_without_class_weights_is_refused(tmp_path, capsys):
    scores, labels = simulate_gaussian_agents(jax.random.key(0), [0.5, 0.9], 1.5, 0.2, 200)

    def brier(a, y, w):  # a researcher's loss, weighted by w: no class weight that reveal knows
        return w * (y - a) ** 2

    loss = loss_spec(brier, np.array([1.0, 2.0]))
    run = write_sweep_scores(tmp_path / "nobeta", scores, labels, loss=loss, keys=["L1", "L2"])
    err = _bad(["--run", str(run)], tmp_path, capsys)
    assert f"holds a sweep of the loss {loss.describe()!r}" in err and "one binary loss" in err


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--config.eval.n_bins=1", None, "config.eval.n_bins must be an integer >= 2"),
        ("--config.eval.report_seed=-1", None, "config.eval.report_seed must be an integer >= 0"),
        ("--config.eval.n_bootstrap=1", None, "config.eval.n_bootstrap must be an integer >= 2"),
        ("--config.eval.figures=tiff", None, "config.eval.figures: unknown figure format 'tiff'"),
        ("--config.eval.average=logit", None, "--config.eval.average: `iml reveal` trains nothing"),
        (
            "--config.train.max_epochs=2",
            None,
            "--config.train.max_epochs: `iml reveal` trains nothing",
        ),
        ("--config.eval.n_binz=4", None, "config.eval.n_binz: no such key; did you mean"),
        ("--power-datasets", "-1", "--power-datasets must be an integer >= 0"),
    ],
)
def test_bad_settings_are_named(flag, value, named, sweep, tmp_path, capsys):
    err = _bad(["--run", str(sweep), flag, *([value] if value else [])], tmp_path, capsys)
    assert named in err


def test_an_output_that_is_a_file_is_named(sweep, tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    argv = ["reveal", "--run", str(sweep), "--out", str(tmp_path / "taken")]
    assert cli.main(argv) == 2
    assert f"--out: {tmp_path / 'taken'} is a file, not a folder" in capsys.readouterr().err
    assert (tmp_path / "taken").read_text() == ""


PNEUMONIA = [ROOT / "docs" / "results" / name for name in (
    "pneumoniamnist_lr_floor_other_betas", "pneumoniamnist_lr_floor",
    "pneumoniamnist_lr_floor_seeds")]  # fmt: skip


@pytest.mark.slow
def test_reproduce_runs_merge_with_their_seeds_and_the_intervals_cover_them(tmp_path, capsys):
    """The best-trained PneumoniaMNIST members: beta 0.5 and 0.9 from one run (seed 0), 0.99
    from two (seeds 0 and 1-3). The merged input pools every member of a beta, keeps each
    seed's own ensemble, and the record says what its intervals cover."""
    inputs = load_reveal_input(PNEUMONIA)
    assert inputs.betas.tolist() == [0.5, 0.9, 0.99] and inputs.scores.shape == (3, 5856)
    assert inputs.seeds == (0, 1, 2, 3)
    assert inputs.seeds_per_model() == [[0], [0], [0, 1, 2, 3]]
    # The 0.99 ensemble is the mean of its four seeds' ensembles (each seed's members cover
    # every observation once through the folds' rotations).
    np.testing.assert_allclose(
        inputs.scores[2], np.mean(inputs.seed_scores[:, 2], axis=0), rtol=1e-5, atol=1e-7
    )
    argv = [
        "reveal",
        "--run",
        *map(str, PNEUMONIA),
        "--out",
        str(tmp_path),
        "--config.eval.n_bootstrap=60",
        "--power-datasets",
        "0",
        "--no-progress",
        "--config.eval.figures=",
    ]
    assert cli.main(argv) == 0
    assert not (tmp_path / "figures").exists()  # no formats: revealed.json alone
    record = json.loads((tmp_path / "revealed.json").read_text())
    assert record["seeds"] == [[0], [0], [0, 1, 2, 3]]
    assert "over its training seeds (1 to 4 a model)" in record["intervals"]
    printed = capsys.readouterr().out
    assert "training seeds" in printed


@pytest.mark.slow
def test_a_run_given_twice_or_a_seed_trained_twice_is_named(capsys, tmp_path):
    err = _bad(["--run", str(PNEUMONIA[1]), str(PNEUMONIA[1])], tmp_path, capsys)
    assert "pneumoniamnist_lr_floor given more than once" in err
    copy = tmp_path / "copy"
    shutil.copytree(PNEUMONIA[1], copy, ignore=shutil.ignore_patterns("figures"))
    err = _bad(["--run", str(PNEUMONIA[1]), str(copy)], tmp_path, capsys)
    assert "beta 0.99 with seed 0 was trained in both" in err
