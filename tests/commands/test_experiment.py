"""The ``iml reproduce`` and ``iml sweep`` commands (``iml.commands.experiment``), end to end.

Sweeps on a CSV, a semicolon export and the built-in digits: their table, figures and scores,
resumption and refusals before any work. One small ``iml reproduce`` run: the documented table,
figures, manifest and ensemble sizes, and ``iml figures`` reporting that stored run (a run killed
and rerun to the same results: tests/pipeline/test_distributed.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from _sweep_tables import simulated_table

import iml._io
from iml import cli, loss_spec
from iml.calibration import MULTICLASS_METRICS
from iml.commands import parser as command_parser
from iml.commands.experiment import experiment_command
from iml.commands.figures import eval_overrides
from iml.config import to_dict
from iml.pipeline import report as R
from iml.pipeline import train_plan as TP
from iml.pipeline.defaults import sweep_config
from iml.pipeline.run_config import check_config
from iml.training import TrainConfig, host

# each multiclass ECE of a sweep's table with its bootstrap interval
MULTICLASS_INTERVALS = {"top_label_ece_interval", "classwise_ece_interval"}


@pytest.fixture(scope="module")
def simulated() -> tuple[np.ndarray, np.ndarray]:
    return simulated_table()


def _write_csv(path, x, y) -> None:
    lines = ["a,b,c,label"] + [
        f"{r[0]},{r[1]},{r[2]},{'yes' if t else 'no'}" for r, t in zip(x, y, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")


def _sweep(argv: list[str]) -> int:
    return cli.main(["sweep", *map(str, argv)])


#: The config key of each argument of :func:`_args` that no named option sets.
KEYS = {
    "positive": "data.positive", "delimiter": "data.delimiter", "data_dir": "data.data_dir",
    "classes": "data.classes", "n_folds": "data.n_folds", "image_size": "data.image_size",
    "loss_weights": "loss.weights", "beta_min": "loss.beta_min", "n_betas": "loss.n_betas",
    "gamma": "loss.params.gamma", "lr": "train.learning_rate", "l2": "train.l2",
    "l2_scale": "train.l2_scale", "solver": "train.solver", "epochs": "train.max_epochs",
    "losses_per_batch": "plan.losses_per_batch", "model": "model.name", "n_bins": "eval.n_bins",
    "average": "eval.average", "figures": "eval.figures",
}  # fmt: skip


def _argv(flags) -> list[str]:
    """``--option VALUE`` for a named option, ``--config.KEY=VALUE`` for any other key."""
    out = []
    for k, v in flags.items():
        if v is not None:
            out += [f"--config.{KEYS[k]}={v}"] if k in KEYS else [f"--{k}", str(v)]
    return out


def _args(**flags) -> list[str]:
    train = [
        "--config.train.max_epochs=40",
        "--config.train.batch_size=128",
        "--config.train.learning_rate=0.05",
        "--config.train.patience=4",
    ]
    # 20 replicates, under the 100 from which a report simulates its tests' size and power
    return _argv(flags) + train + ["--config.eval.n_bootstrap=20", "--no-progress"]


def _semicolon_export(path, n: int = 300) -> np.ndarray:
    """A spreadsheet export: ';'-separated, quoted names and text, a BOM, CRLF line ends."""
    rng = np.random.default_rng(5)
    age = rng.integers(18, 80, n)
    income = rng.normal(40.0, 12.0, n).round(2)
    region = rng.choice(["north, coast", "south", "east; inland"], n)
    logits = 0.06 * (age - 50) + 1.2 * (region == "south") - 3.0
    y = rng.random(n) < 1.0 / (1.0 + np.exp(-logits))
    lines = ['"age";"income (k)";"region";"y"'] + [
        f'{a};{i};"{r}";"{"yes" if t else "no"}"'
        for a, i, r, t in zip(age, income, region, y, strict=True)
    ]
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    return y.astype(np.int32)


@pytest.mark.slow
def test_command_on_a_csv_writes_table_markdown_and_figures(simulated, tmp_path, capsys):
    x, y = simulated
    _write_csv(tmp_path / "data.csv", x, y)
    out = tmp_path / "out"
    flags = {"csv": tmp_path / "data.csv", "target": "label", "positive": "yes"}
    rc = _sweep(_args(**flags, betas="0.5,0.9", out=out))
    assert rc == 0, capsys.readouterr().err
    table = json.loads((out / "table.json").read_text())
    assert list(table) == ["0.5", "0.9"]
    assert table["0.9"]["loss_corrected"]["ece"] < 0.05 < 0.2 < table["0.9"]["raw"]["ece"]
    # The default ridge: one of the grid's per rotation, chosen on its validation folds.
    grid = sweep_config().train.l2_grid
    assert all(len(row["l2"]) == 1 and len(row["l2"][0]) == 10 for row in table.values())
    assert {v for row in table.values() for v in row["l2"][0]} <= set(grid)
    table_md = (out / "table.md").read_text()
    # a section per beta, its methods (with the baselines) as rows, and the run's summary
    assert "## beta = 0.5" in table_md and "| platt |" in table_md
    assert "## Loss calibration" in table_md
    for name in ("ece_by_loss", "figure1", "figure2", "figure3", "figure4"):
        assert (out / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name
        assert (out / "figures" / f"{name}.pdf").read_bytes()[:4] == b"%PDF", name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["data"]["target"] == "label"
    # the host memory settings in force (this process's first command set them)
    assert manifest["host_memory"] == host.host_memory_record() != "system"
    # the summary line's ECEs are point estimates, and it says where their intervals are
    assert "(point estimates; intervals and tests in table.md)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"target": "nope"}, r"--target 'nope': no such column .*\['a', 'label'\]"),
        ({"target": "label", "betas": "0.5,1.5"}, r"--betas.*\(0, 1\).*1\.5"),
        ({"target": "label", "betas": "0,0.5"}, r"--betas.*\(0, 1\)"),
        ({"target": "label", "beta_min": "-0.1"}, "beta_min must lie in"),
        ({"target": "label", "seeds": "0"}, "--seeds"),
        ({"target": "label", "lr": "-1"}, "learning_rate"),
        ({"target": "label", "csv": "missing.csv"}, "--csv 'missing.csv': file not found"),
        ({"target": "label", "positive": "maybe"}, r"config\.data\.positive='maybe' .*'no', 'yes'"),
        ({"target": "label", "delimiter": "tab"}, r"--target 'label': no such column"),
        ({"csv": None, "dataset": "letter", "data_dir": "no-such-dir"}, "folder not found"),
        ({"csv": None, "dataset": "adult"}, "needs config.data.data_dir"),
        (
            {"csv": None, "dataset": "adult", "delimiter": ";"},
            "config.data.delimiter applies to --csv only",
        ),
        ({"csv": None, "dataset": "letter", "data_dir": "."}, "letter-recognition.data not found"),
    ],
)
def test_bad_input_is_reported_before_any_work(flags, message, tmp_path, capsys, monkeypatch):
    (tmp_path / "data.csv").write_text("a,label\n1,yes\n2,no\n")
    monkeypatch.chdir(tmp_path)

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(TP, "train", no_work)
    assert _sweep(_argv({"csv": "data.csv", "out": "out", **flags})) == 2
    err = capsys.readouterr().err
    assert err.startswith("iml sweep: error:")
    assert __import__("re").search(message, err), err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_command_on_a_semicolon_export_writes_every_file_atomically(tmp_path, monkeypatch):
    y = _semicolon_export(tmp_path / "export.csv")
    assert 0.05 < y.mean() < 0.15  # a rare "yes" class
    written = []
    for name in ("atomic_write_bytes",):
        real = getattr(R, name)
        monkeypatch.setattr(R, name,
                            lambda path, data, real=real: (written.append(path.name),
                                                           real(path, data)))  # fmt: skip
    out = tmp_path / "out"
    argv = [
        "sweep",
        "--csv",
        str(tmp_path / "export.csv"),
        "--target",
        "y",
        "--config.data.positive=yes",
    ]
    argv += [
        "--out",
        str(out),
        "--config.loss.n_betas=3",
        "--seeds",
        "1",
        "--config.train.max_epochs=3",
    ]
    argv += ["--config.eval.figures=svg", "--config.eval.n_bootstrap=20"]
    assert cli.main([*argv, "--config.data.n_folds=4", "--no-progress"]) == 0
    assert sorted(written) == ["ensemble.json", "table.json", "table.md"]
    table = json.loads((out / "table.json").read_text())
    assert list(table) == ["0.01", "0.5", "0.99"]
    assert (out / "table.md").read_text().count("## beta = ") == 3
    with np.load(out / "ensemble_scores.npz") as scores:
        np.testing.assert_array_equal(scores["labels"], y)
        assert scores["scores"].shape == (3, 300)
    assert (out / "figures" / "ece_by_loss.svg").read_text().lstrip().startswith("<?xml")
    assert not list((out / "figures").glob("*.png")) and not list((out / "figures").glob("*.pdf"))
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    ("argv", "shared"),
    [(["sweep", "--dataset", "digits"], True), (["reproduce"], False)],
    ids=["table", "images"],
)
def test_a_table_run_keeps_one_heap_and_an_image_run_one_per_thread(
    argv, shared, tmp_path, monkeypatch, capsys
):
    asked = []

    def keep_step_memory(shared_heap=False):  # stops the command before any work
        asked.append(shared_heap)
        raise ValueError("stopped after the memory setting")

    monkeypatch.setattr(host, "keep_step_memory", keep_step_memory)
    assert cli.main([*argv, "--out", str(tmp_path / "run")]) == 2
    assert "stopped after the memory setting" in capsys.readouterr().err
    assert asked == [shared]


def test_a_failure_during_the_work_propagates_instead_of_exit_2(tmp_path, monkeypatch):
    (tmp_path / "data.csv").write_text("a;label\n1;yes\n2;no\n3;no\n4;yes\n5;no\n6;no\n")

    def fail(*args, **kwargs):
        raise RuntimeError("device lost")

    monkeypatch.setattr(TP, "train", fail)
    argv = ["--csv", str(tmp_path / "data.csv"), "--target", "label", "--config.data.positive=yes"]
    argv += ["--out", str(tmp_path / "out"), "--config.data.n_folds=4", "--no-progress"]
    args = command_parser.parse_args(["sweep", *argv])
    work = args.func(args)  # checked, nothing trained yet
    with pytest.raises(RuntimeError, match="device lost"):
        work()
    with pytest.raises(RuntimeError, match="device lost"):
        cli.main(["sweep", *argv])


@pytest.mark.slow
def test_finished_chunks_survive_a_failure_and_another_config_is_refused_first(
    simulated, tmp_path, monkeypatch, capsys
):
    # The second chunk fails during the work: the first stays stored. A later sweep with other
    # settings into the same folder is bad input, found before any work (exit 2 naming --out).
    x, y = simulated
    _write_csv(tmp_path / "data.csv", x[:300], y[:300])
    out = tmp_path / "out"
    flags = {"csv": tmp_path / "data.csv", "target": "label", "positive": "yes", "out": out}
    argv = _args(**flags, betas="0.5,0.9", seeds=1, losses_per_batch=1, n_folds=4)
    train_chunk = TP.train
    calls = []

    def fail_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("device lost")
        return train_chunk(*args, **kwargs)

    monkeypatch.setattr(TP, "train", fail_second)
    with pytest.raises(RuntimeError, match="device lost"):
        _sweep(argv)
    stored = sorted(p.name for p in (out / "batches").iterdir())
    assert stored == ["batch-0000.npz"]
    first = (out / "batches" / "batch-0000.npz").read_bytes()
    manifest = (out / "manifest.json").read_text()
    assert (
        "note: config.train.learning_rate, config.train.batch_size, config.train.max_epochs, "
        "config.train.patience not used" in " ".join(capsys.readouterr().err.split())
    )

    monkeypatch.setattr(TP, "train", fail_second)
    assert _sweep(_args(**flags, betas="0.5,0.8", seeds=1, losses_per_batch=1, n_folds=4)) == 2
    err = capsys.readouterr().err
    assert err.startswith("iml sweep: error: --out: ") and err.count("\n") == 1
    assert "config.loss.beta: [0.5, 0.9] stored, [0.5, 0.8] now" in err
    assert len(calls) == 2  # nothing trained
    assert (out / "batches" / "batch-0000.npz").read_bytes() == first
    assert (out / "manifest.json").read_text() == manifest


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            {"loss": "matrix", "loss_weights": "ones"},
            "--loss matrix is multiclass: set config.data.classes='all'",
        ),
        ({"classes": "all"}, "config.data.classes='all' needs a multiclass --loss"),
        ({"loss": "matrix", "classes": "all"}, "--loss matrix needs config.loss.weights"),
        ({"loss": "log", "loss_weights": "ones"}, "config.loss.weights applies to the multiclass"),
        (
            {"loss": "squared", "gamma": "1"},
            "config.loss.params.gamma: the loss 'squared' takes no",
        ),
        (
            {"loss": "focal", "solver": "exact"},
            "config.train.solver='exact': the exact solver fits logistic regression under a "
            "loss with an exact form (class_weighted_softmax, log, matrix), not "
            "LogisticRegression under the focal loss",
        ),
        ({"positive": "x"}, "config.data.positive of --dataset digits is one digit"),
    ],
)
def test_loss_flags_are_checked_before_any_work(flags, message, tmp_path, capsys):
    argv = _args(dataset="digits", **flags, out=tmp_path / "out")
    assert _sweep(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_command_trains_digits_with_all_ten_classes_and_draws_each_class(tmp_path, capsys):
    out = tmp_path / "out"
    # the exact solver by default (multinomial logistic regression); digits' classes separate
    # without a ridge
    argv = _args(dataset="digits", classes="all", loss="class_weighted_softmax",
                 loss_weights="ones;w[8]=10", seeds=1, n_folds=4, l2="1e-3", out=out)  # fmt: skip
    assert _sweep(argv) == 0, capsys.readouterr().err
    table = json.loads((out / "table.json").read_text())
    assert list(table) == ["ones", "w[8]=10"]
    assert set(table["ones"]["raw"]) == set(MULTICLASS_METRICS) | MULTICLASS_INTERVALS | {
        "loss_calibration"
    }
    assert table["ones"]["raw"]["accuracy"] > 0.85
    with np.load(out / "ensemble_scores.npz") as stored:
        assert stored["scores"].shape == (2, 1797, 10)
        assert list(stored["keys"]) == ["ones", "w[8]=10"]
    for name in ("ones", "w_8_=10"):
        path = out / "figures" / "reliability_by_class" / f"{name}.png"
        assert path.read_bytes()[:4] == b"\x89PNG"
    assert "top-label ECE" in capsys.readouterr().out
    assert json.loads((out / "manifest.json").read_text())["config"]["loss"]["name"] == (
        "class_weighted_softmax"
    )


@pytest.mark.slow
def test_a_config_file_runs_a_sweep_stored_in_the_layout_of_named_options(tmp_path, capsys):
    path = tmp_path / "digits.py"
    path.write_text(
        "from iml.pipeline.defaults import sweep_config\n\n\n"
        "def get_config():\n"
        "    c = sweep_config()\n"
        "    c.data.name = 'digits'\n"
        "    c.data.n_folds = 4\n"
        "    c.loss.betas = (0.5, 0.9)\n"
        "    c.plan.seeds = (0,)\n"
        "    c.eval.n_bootstrap = 20\n"  # no simulated size and power, which this test reads not
        "    c.eval.figures = ()\n"
        "    return c\n"
    )
    out = tmp_path / "out"
    argv = ["--config", path, "--config.eval.n_bins=5", "--out", out, "--no-progress"]
    assert _sweep(argv) == 0, capsys.readouterr().err
    assert list(json.loads((out / "table.json").read_text())) == ["0.5", "0.9"]
    stored = json.loads((out / "manifest.json").read_text())["config"]
    # The sections of a sweep's record (iml.pipeline.sweep.SECTIONS).
    assert list(stored) == ["data", "model", "loss", "train", "plan", "eval", "store"]
    data = stored["data"]
    assert list(data) == ["name", "n_folds", "fold_seed", "sha256"] and len(data["sha256"]) == 64
    assert (data["name"], data["n_folds"], data["fold_seed"]) == ("digits", 4, 0)
    assert stored["model"] == {"name": "logistic", "hidden": 32}
    assert stored["loss"] == {"name": "log", "beta": [0.5, 0.9]}
    assert stored["plan"] == {"seeds": [0], "losses_per_batch": 2}
    assert stored["train"]["solver"] == "exact"  # TrainConfig's fields, as it ran
    assert set(stored["train"]) <= {f.name for f in dataclasses.fields(TrainConfig)}
    assert stored["eval"] == {"n_bins": 5, "average": "score", "n_bootstrap": 20,
                              "report_seed": 0}  # fmt: skip
    assert stored["store"] == "batches"
    # The same sweep by named options finds the stored one: it resumes, training nothing, and
    # draws its figure in the formats asked now (which the record does not hold).
    flags = ["--dataset", "digits", "--config.data.n_folds=4", "--betas", "0.5,0.9", "--seeds", "1",
             "--config.eval.n_bootstrap=20"]  # fmt: skip
    argv = [
        *flags,
        "--config.eval.n_bins=5",
        "--config.eval.figures=svg",
        "--out",
        out,
        "--no-progress",
    ]
    assert _sweep(argv) == 0
    assert "trained batches []" in capsys.readouterr().out
    assert [p.name for p in (out / "figures").glob("ece_by_loss.*")] == ["ece_by_loss.svg"]
    assert (out / "figures" / "ece_by_loss.svg").stat().st_size > 0
    # Another report setting is refused, named by its section.
    assert _sweep([*flags, "--config.eval.n_bins=6", "--out", out, "--no-progress"]) == 2
    assert "first difference: config.eval.n_bins: 5 stored, 6 now" in capsys.readouterr().err


def test_misspelled_keys_and_bad_values_of_a_config_are_named_before_any_work(tmp_path, capsys):
    out = tmp_path / "out"
    assert _sweep(["--dataset", "digits", "--config.train.learnig_rate=1", "--out", out]) == 2
    assert capsys.readouterr().err == (
        "iml sweep: error: --config.train.learnig_rate: no such key; "
        "did you mean config.train.learning_rate?\n"
    )
    path = tmp_path / "matrix.py"
    path.write_text(
        "from iml.pipeline.defaults import sweep_config\n\n\n"
        "def get_config():\n"
        "    c = sweep_config()\n"
        "    c.data.name = 'digits'\n"
        "    c.loss.name = 'matrix'\n"
        "    return c\n"
    )
    # Keys set by the file (or left at its defaults) are named as config keys, flags as flags.
    for argv, message in [
        ([], "config.loss.name='matrix' needs config.loss.weights"),
        (["--config.loss.weights=ones;w[1]=2"], "config.loss.weights: cannot read 'w[1]=2'"),
        (
            ["--config.loss.weights=ones", "--config.data.classes=binary"],
            "set config.data.classes='all'",
        ),
        (
            [
                "--config.loss.weights=ones",
                "--config.data.classes=all",
                "--config.loss.params.gamma=1",
            ],
            "config.loss.params.gamma: the loss 'matrix' takes no parameter",
        ),
        (
            [
                "--config.loss.weights=ones",
                "--config.data.classes=all",
                "--config.train.max_epochs=0",
            ],
            "config.train.max_epochs: TrainConfig.max_epochs must be an integer >= 1, got 0",
        ),
    ]:
        assert _sweep(["--config", path, *argv, "--out", out]) == 2
        err = capsys.readouterr().err
        assert err.startswith("iml sweep: error: ") and err.count("\n") == 1
        assert message in err, err
    plain = to_dict(sweep_config())  # plain nested dicts are checked too
    plain["loss"]["name"] = "hinge"
    with pytest.raises(ValueError, match=r"config.loss.name must be one of"):
        check_config(plain)
    config = sweep_config()
    with pytest.raises(
        ValueError, match=r"give exactly one of config.data.csv or config.data.name"
    ):
        check_config(config)
    config.data.name = "digits"
    check_config(config)
    config.plan.losses_per_batch = -1
    with pytest.raises(ValueError, match=r"config.plan.losses_per_batch must be an integer >= 0"):
        check_config(config)
    config.plan.losses_per_batch = 0
    for key, value, message in [
        ("l2", "none", r"config.train.l2: TrainConfig.l2 must be a number >= 0 or 'auto'"),
        ("l2", -1.0, r"config.train.l2: TrainConfig.l2 must be a finite number >= 0"),
        ("l2_grid", (1e-3, 0.0), r"config.train.l2_grid: TrainConfig.l2_grid must be a finite"),
        ("l2_scale", "unit", r"config.train.l2_scale: unknown value 'unit'; expected one of"),
    ]:
        config.train[key] = value
        with pytest.raises(ValueError, match=message):
            check_config(config)
        config.train[key] = sweep_config().train[key]
    assert not out.exists()


def test_adam_options_of_an_exact_sweep_are_named_as_unused(tmp_path, capsys):
    def prepare(*argv):
        experiment_command(
            command_parser.parse_args(
                ["sweep", "--dataset", "digits", *argv, "--out", str(tmp_path)]
            )
        )
        return capsys.readouterr().err

    # the logistic model under the log loss is fitted exactly: the learning rate is not read
    err = prepare("--config.train.learning_rate=0.05", "--config.train.max_epochs=3")
    assert err == (
        "iml: note: config.train.learning_rate, config.train.max_epochs not used: the "
        "logistic model under this loss is fitted exactly (--config.train.solver=adam trains it "
        "by Adam)\n"
    )
    assert prepare("--config.train.learning_rate=0.05", "--config.train.solver=adam") == ""
    assert prepare("--config.train.learning_rate=0.05", "--config.model.name=mlp") == ""
    assert prepare("--config.train.l2=1e-3") == ""  # the exact solver's own options


@pytest.mark.slow
def test_the_multiclass_focal_loss_sweeps_with_its_focusing_parameter(tmp_path, capsys):
    """`--loss softmax_focal --gamma 1`: a registered multiclass loss without a closed-form rule,
    its grid over class weights and its gamma from the config, corrected by the generic inverse."""
    out = tmp_path / "out"
    argv = [
        "--dataset",
        "digits",
        "--config.data.classes=all",
        "--loss",
        "softmax_focal",
        "--config.loss.params.gamma=1",
        "--config.loss.weights=ones;w[8]=10",
        "--seeds",
        "1",
        "--config.train.l2=1e-3",
        "--config.train.max_epochs=1",
        "--config.train.learning_rate=0.05",
        "--config.train.batch_size=512",
        "--config.data.n_folds=4",
        "--out",
        str(out),
        "--config.eval.figures=",
        "--config.eval.n_bootstrap=20",
        "--no-progress",
    ]
    assert _sweep(argv) == 0, capsys.readouterr().err
    table = json.loads((out / "table.json").read_text())
    assert list(table) == ["gamma=1,ones", "gamma=1,w[8]=10"]
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == [
        "ece_by_class.json",
        "ensemble.json",
        "ensemble_scores.npz",
        "manifest.json",
        "revealed.json",  # what the models learned across the grid of losses
        "table.json",
        "table.md",
    ]
    assert not (out / "figures").exists()  # no figures
    with np.load(out / "ensemble_scores.npz") as stored:
        scores, corrected = stored["scores"][1], stored["corrected"][1]
    spec = loss_spec("softmax_focal", gamma=1.0, class_weights=np.r_[np.ones(8), 10.0, 1.0])
    want = np.asarray(spec.loss_corrected_score(scores[:50].astype(np.float32)))
    np.testing.assert_allclose(corrected[:50], want, atol=1e-4)
    # posteriors on the simplex, wherever the generic inverse found one
    assert np.mean(np.abs(corrected.sum(-1) - 1.0) < 1e-4) > 0.99


@pytest.mark.slow
def test_a_loss_whose_corrected_scores_hold_nan_is_named_and_the_others_reported(
    simulated, tmp_path, capsys, monkeypatch
):
    # A rule with no inverse at some scores leaves NaN corrected scores in its row: that row
    # reports no metrics and no test, and says how many; the other rows are reported in full.
    from iml.pipeline import scores as run_scores

    correction = run_scores.LossCorrection

    class WithNan(correction):
        def transform(self, scores):
            corrected = np.array(super().transform(scores), np.float64)
            if np.isclose(self.spec.to_config()["beta"], 0.9):
                corrected[:7] = np.nan
            return corrected

    monkeypatch.setattr(run_scores, "LossCorrection", WithNan)
    x, y = simulated
    _write_csv(tmp_path / "data.csv", x, y)
    out = tmp_path / "out"
    flags = {"csv": tmp_path / "data.csv", "target": "label", "positive": "yes"}
    rc = _sweep(_args(**flags, betas="0.5,0.9,0.99", out=out, figures="png"))
    err = capsys.readouterr().err
    assert rc == 0, err
    table = json.loads((out / "table.json").read_text())
    assert table["0.9"]["loss_corrected"]["nan_scores"] == 7
    assert np.isnan(table["0.9"]["loss_corrected"]["ece"])
    assert np.isnan(table["0.9"]["loss_corrected"]["ece_interval"]).all()
    assert np.isfinite(table["0.9"]["raw"]["ece"])  # the raw scores have no NaN
    assert table["0.9"]["raw"]["loss_calibration"]["verdict"].startswith("not testable (7 ")
    for beta in ("0.5", "0.99"):
        assert "nan_scores" not in table[beta]["loss_corrected"]
        assert np.isfinite(table[beta]["loss_corrected"]["ece"])
        assert np.isfinite(table[beta]["raw"]["loss_calibration"]["p_value"])
    assert "warning: " in err and "beta = 0.9: 7 of the scores" in err.split("warning: ")[1]
    table_md = (out / "table.md").read_text()
    assert "beta = 0.9: 7 of the scores" in table_md
    assert (out / "figures" / "ece_by_loss.png").is_file()


# ----------------------------------------------------------------------------------------------
# iml reproduce: one small run on images
# ----------------------------------------------------------------------------------------------


GLIBC = host._glibc() is not None  # the C library of this process and of the `iml` it starts


BASELINES = ("platt", "beta", "temperature", "isotonic", "histogram", "prior_shift")


METRICS = ("ece", "ece_debiased", "brier", "log_loss", "auroc")


@pytest.fixture(scope="module")
def run_dir(tiny_reproduce_run):
    # conftest's tiny run: trained only (as on a GPU machine), then reported from the stored run
    # alone with `iml figures` (tests/pipeline/test_distributed.py checks that a whole `iml
    # reproduce`, killed and run again, writes the same report)
    return tiny_reproduce_run


@pytest.mark.slow
def test_figures_reports_a_stored_run_with_the_logit_average_writing_each_file_atomically(
    run_dir, tmp_path, monkeypatch, capsys
):
    from iml.pipeline import RunStore, load_ensemble

    written = []
    original = iml._io.atomic_write_bytes

    def spy(path, data):
        written.append(Path(path).resolve())
        original(path, data)

    monkeypatch.setattr(iml._io, "atomic_write_bytes", spy)
    for module in list(sys.modules.values()):  # modules that imported the name itself
        if getattr(module, "atomic_write_bytes", None) is original:
            monkeypatch.setattr(module, "atomic_write_bytes", spy)
    out = tmp_path / "logit"
    argv = ["figures", "--run", str(run_dir), "--out", str(out), "--config.eval.average=logit",
            "--config.eval.n_bins=4", "--config.eval.n_bootstrap", "3",
            "--config.eval.figures=png"]  # fmt: skip
    assert cli.main(argv) == 0
    files = {p.resolve() for p in out.rglob("*") if p.is_file()}
    assert len(files) >= 10  # tables, ensemble scores and sizes, figures
    assert {p.suffix for p in (out / "figures").iterdir()} == {".png"}
    assert files <= set(written), sorted(map(str, files - set(written)))
    assert json.loads((out / "ensemble.json").read_text())["average"] == "logit"
    assert json.loads((run_dir / "ensemble.json").read_text())["average"] == "score"
    # the report's settings: the run's own, but for those given, and recorded
    settings = json.loads((out / "ensemble.json").read_text())["eval"]
    stored = json.loads((run_dir / "manifest.json").read_text())["config"]["eval"]
    assert settings == {**stored, "n_bins": 4, "average": "logit", "n_bootstrap": 3,
                        "figures": ["png"]}  # fmt: skip
    assert json.loads((run_dir / "ensemble.json").read_text())["eval"] == stored
    revealed = json.loads((out / "revealed.json").read_text())
    assert (revealed["n_bins"], revealed["n_bootstrap"]) == (4, 3)
    with np.load(out / "ensemble_scores.npz") as stored:
        labels, scores = stored["labels"], stored["scores"]
    by_logit = load_ensemble(RunStore(run_dir), (0.5, 0.9), len(labels), "logit")
    np.testing.assert_allclose(scores, by_logit.scores, rtol=1e-12)
    capsys.readouterr()
    assert cli.main(["figures", "--run", str(run_dir), "--config.eval.average=mean"]) == 2
    assert "config.eval.average must be one of ('score', 'logit')" in capsys.readouterr().err


@pytest.mark.slow
def test_figures_takes_only_the_report_settings_and_checks_them(run_dir, tmp_path, capsys):
    # a key given twice: the last one counts
    argv = ["figures", "--run", str(run_dir), "--config.eval.n_bins=4",
            "--config.eval.average=logit", "--config.eval.average=score"]  # fmt: skip
    assert eval_overrides(command_parser.parse_args(argv)) == {"n_bins": 4, "average": "score"}
    for flag, message in (
        ("--config.eval.n_binz=4", "config.eval.n_binz: no such key; did you mean config.eval."),
        ("--config.eval.n_bins=0", "config.eval.n_bins must be an integer >= 1, got 0"),
        ("--config.eval.n_bins", "--config.eval.n_bins: no value"),
        ("--config.train.max_epochs=1", "--config.train.max_epochs: `iml figures` trains nothing"),
        ("--config.eval=3", "--config.eval: `iml figures` trains nothing"),
        ("--config.eval.figures=png,gif", "config.eval.figures: unknown figure format 'gif'"),
    ):
        bad = tmp_path / "bad"
        assert cli.main(["figures", "--run", str(run_dir), "--out", str(bad), flag]) == 2, flag
        assert message in capsys.readouterr().err, flag
        assert not bad.exists()


@pytest.mark.slow
def test_reproduce_writes_the_documented_table(run_dir):
    table = json.loads((run_dir / "table.json").read_text())
    assert list(table) == ["0.5", "0.9"]
    for methods in table.values():
        assert list(methods) == ["raw", "loss_corrected", *BASELINES]
        for metrics in methods.values():
            for m in METRICS:
                assert math.isfinite(metrics[m]), metrics
            assert 0.0 <= metrics["auroc"] <= 1.0 and metrics["brier"] >= 0.0
        test = methods["raw"]["loss_calibration"]
        assert test["verdict"].split(" (")[0] in ("rejected", "not rejected", "not testable")
        assert test["family"] <= 2 and test["n_bins"] >= 1
    assert "## beta = 0.9" in (run_dir / "table.md").read_text()


@pytest.mark.slow
def test_reproduce_writes_figures_manifest_and_ensemble_sizes(run_dir):
    for k in range(1, 5):
        png = (run_dir / "figures" / f"figure{k}.png").read_bytes()
        pdf = (run_dir / "figures" / f"figure{k}.pdf").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and pdf[:5] == b"%PDF-"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["loss"] == {  # the schema's every key, the grid's unread here
        **{"name": "log", "betas": [0.5, 0.9], "params": {}, "weights": ""},
        **{"n_betas": 64, "beta_min": 0.01, "beta_max": 0.99},
    }
    assert manifest["config"]["data"]["classes"] == "binary"
    assert manifest["config"]["plan"]["members_per_batch"] == 2
    assert manifest["num_members"] == 8 and manifest["devices"]
    assert "jax" in manifest["packages"] and manifest["seeds"]["members"] == [0]
    # set before JAX started: CPU steps run on the calling thread, and where the C library is glibc
    # (whose mallopt it sets) freed memory is kept; elsewhere nothing is changed and it says so
    assert manifest["host_memory"] == {
        "freed_memory_kept": GLIBC,
        "synchronous_cpu_dispatch": True,
        "shared_heap": False,  # an image run keeps one heap per thread
    }
    sizes = json.loads((run_dir / "ensemble.json").read_text())["ensemble_size"]
    assert sizes["0.9"] == {"min": 1, "max": 1, "mean": 1.0, "histogram": {"1": 160}}
    batches = sorted((run_dir / "batches").glob("*.npz"))
    assert len(batches) == 4 and not (run_dir / "checkpoints").exists()
    # what the two ensembles learned: iml reveal's record and figures, at the report's settings
    revealed = json.loads((run_dir / "revealed.json").read_text())
    assert revealed["kind"] == "images" and revealed["betas"] == [0.5, 0.9]
    assert (revealed["K"], revealed["n"], revealed["n_bootstrap"]) == (2, 160, 20)
    assert 0.0 < revealed["nis"]["p_value"] <= 1.0 and len(revealed["nias"]["p_value"]) == 2
    for name in ("information", "value_matrix", "cost_bounds"):
        assert (run_dir / "figures" / f"revealed_{name}.png").read_bytes()[:4] == b"\x89PNG"
    with np.load(batches[0]) as b:
        assert b["train_loss"].shape == (2, 1) and np.isfinite(b["train_loss"]).all()
