"""The `iml` command line (``iml.cli``): bad input named in one line with exit status 2 before any
work, a failure during work exiting 1 with its traceback and finished results kept, and the
compiled programs' cache. (Each command end to end, and that every file it writes is written
atomically, is tested with that command's module in tests/commands/.)
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iml import cli

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------------------
# Bad input: a message naming it, exit status 2, before any work
# ----------------------------------------------------------------------------------------------


def _bad(args, tmp_path, capsys):
    out = tmp_path / "out"
    status = cli.main([*args, "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 2
    assert not (out / "manifest.json").exists()
    return err


def test_missing_data_dir_is_named(tmp_path, capsys):
    err = _bad(["reproduce", f"--config.data.data_dir={tmp_path / 'absent'!s}"], tmp_path, capsys)
    assert "data_dir" in err and "absent" in err


def test_reproduce_sends_tables_to_the_sweep(tmp_path, capsys):
    err = _bad(["reproduce", "--dataset", "csv"], tmp_path, capsys)
    assert "'csv' is tabular" in err and "iml sweep" in err


def test_beta_outside_unit_interval_is_named(tmp_path, capsys):
    err = _bad(["reproduce", "--betas", "0.5", "1.2"], tmp_path, capsys)
    assert "betas must lie in (0, 1)" in err and "max 1.2" in err


def test_misspelled_config_key_is_named_with_the_nearest_key(tmp_path, capsys):
    err = _bad(["reproduce", "--config.train.epochz=2"], tmp_path, capsys)
    assert "--config.train.epochz: no such key; did you mean config.train.max_epochs?" in err


def test_a_value_of_the_wrong_type_is_named(tmp_path, capsys):
    err = _bad(["reproduce", "--config.train.max_epochs", "2.5"], tmp_path, capsys)
    assert "--config.train.max_epochs: expected an integer, got 2.5" in err


def test_an_output_folder_holding_another_run_is_named_before_work(tmp_path, capsys):
    stored = ROOT / "docs" / "results" / "reproduce_digits"  # stored with the flat config
    before = (stored / "manifest.json").read_bytes()
    assert cli.main(["reproduce", "--config.train.max_epochs=2", "--out", str(stored)]) == 2
    err = capsys.readouterr().err
    assert "--out: " in err and "config.train.max_epochs: 3 stored, 2 now" in err
    assert (stored / "manifest.json").read_bytes() == before


def test_unknown_dataset_is_named(tmp_path, capsys):
    err = _bad(["reproduce", "--dataset", "imagenet"], tmp_path, capsys)
    assert "unknown dataset 'imagenet'" in err


def test_compiled_programs_are_kept_in_the_users_cache_unless_switched_off(tmp_path, monkeypatch):
    import jax

    from iml.cli import keep_compiled_programs

    before = (jax.config.jax_compilation_cache_dir,
              jax.config.jax_persistent_cache_min_compile_time_secs)  # fmt: skip
    try:
        monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
        monkeypatch.delenv("IML_JAX_CACHE", raising=False)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        assert keep_compiled_programs() == tmp_path / "iml" / "jax"
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "iml" / "jax")
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0  # every program
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "mine"))
        assert keep_compiled_programs() == tmp_path / "mine"  # JAX reads the variable itself
        monkeypatch.setenv("IML_JAX_CACHE", "off")
        assert keep_compiled_programs() is None
    finally:
        jax.config.update("jax_compilation_cache_dir", before[0])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", before[1])


def test_cli_misspelled_key_exits_2_naming_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["reproduce", "--config.train.learnig_rate=1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "iml reproduce: error: --config.train.learnig_rate: no such key; "
        "did you mean config.train.learning_rate?\n"
    )
    assert not out.exists()


def _python(script: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["figures", "--run", "no/such/run"], "no stored run (manifest.json) in no/such/run"),
        (["reproduce", "--betas", "0.5", "1.5", "--out", "unused"], "beta"),
        (
            ["reproduce", "--config.data.n_foldz=3", "--out", "unused"],
            "--config.data.n_foldz: no such key; did you mean config.data.n_folds?",
        ),
        (
            ["sweep", "--dataset", "digits", "--config.train.learnig_rate=1", "--out", "unused"],
            "--config.train.learnig_rate: no such key; did you mean config.train.learning_rate?",
        ),
        (
            ["reproduce", "--config.data.classes=all", "--loss", "matrix", "--out", "unused"],
            "--loss matrix needs config.loss.weights",  # named as the command line set it
        ),
        (
            [
                "reproduce",
                "--loss",
                "class_weighted_softmax",
                "--config.loss.weights=ones;w[1]=2",
                "--out",
                "unused",
            ],
            "is multiclass: set config.data.classes='all'",
        ),
        (["sweep", "--out", "unused"], "give exactly one of --csv PATH or --dataset "),
        (["sweep", "--dataset", "digits", "--betas", "0.5,1", "--out", "unused"], "--betas"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"iml {argv[0]}: error: ")
    assert message in err
    assert not (tmp_path / "unused").exists()  # nothing was started


@pytest.mark.slow
def test_failure_during_work_exits_1_with_traceback_and_keeps_finished_results(tmp_path):
    # The second chunk of a sweep fails (a device lost mid-way): exit 1 with the traceback, not
    # a one-line "bad input", and the first chunk stays stored.
    rows = ["x;label"] + [f"{i % 7};{'yes' if i % 5 == 0 else 'no'}" for i in range(80)]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "sweep"
    argv = ["sweep", "--csv", str(tmp_path / "data.csv"), "--target", "label"]
    argv += ["--config.data.positive=yes", "--betas", "0.5,0.9", "--seeds", "1"]
    argv += ["--config.plan.losses_per_batch=1"]
    argv += [
        "--config.train.max_epochs=2",
        "--config.data.n_folds=4",
        "--no-progress",
        "--out",
        str(out),
    ]
    done = _python(
        f"""
        import sys
        import iml.pipeline.train_plan as loop
        from iml import cli

        train, calls = loop.train, []

        def fail_second(*args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                raise RuntimeError("device lost")
            return train(*args, **kwargs)

        loop.train = fail_second
        sys.exit(cli.main({argv!r}))
        """
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" in done.stderr and "RuntimeError: device lost" in done.stderr
    assert "iml sweep: error:" not in done.stderr  # not reported as bad input
    assert sorted(p.name for p in (out / "batches").iterdir()) == ["batch-0000.npz"]
    recorded = json.loads((out / "manifest.json").read_text())["config"]["loss"]
    assert recorded == {"name": "log", "beta": [0.5, 0.9]}


def test_no_progress_hides_the_bars_of_preparing_a_dataset(tmp_path, capfd):
    import tensorflow_datasets as tfds

    from iml.data import load_dataset

    try:
        tfds.enable_progress_bar()
        load_dataset("digits", data_dir=tmp_path / "shown")
        assert "Generating splits" in capfd.readouterr().err  # tensorflow-datasets' own bars
        argv = ["reveal", "--run", str(tmp_path / "none"), "--out", str(tmp_path / "o")]
        assert cli.main([*argv, "--no-progress"]) == 2  # refused, after reading its options
        capfd.readouterr()
        load_dataset("digits", data_dir=tmp_path / "hidden")
        assert "Generating" not in capfd.readouterr().err
    finally:
        tfds.enable_progress_bar()


@pytest.mark.slow
def test_the_command_line_loads_no_training_or_report_code_until_a_command_runs():
    """`iml --help` and each command's checks of its arguments start in about a second: the
    trainer, the models, the data loaders, the report and their libraries load when a command's
    work needs them (a fresh process, as `iml` starts)."""
    heavy = ["iml.training", "iml.models", "iml.pipeline.report", "iml.pipeline.sweep",
             "iml.pipeline.runner", "iml.pipeline.reveal", "flax", "optax", "orbax",
             "tensorflow_datasets", "matplotlib", "pandas"]  # fmt: skip
    code = (
        "import sys\nfrom iml import cli  # noqa: F401\n"
        "from iml.commands import parser as command_parser\n"
        "for argv in (['reproduce', '--out', 'o'], ['sweep', '--out', 'o'],"
        " ['figures', '--run', 'r'], ['reveal', '--run', 'r', '--out', 'o']):\n"
        "    command_parser.parse_args(argv)\n"
        f"print([name for name in {heavy!r} if name in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
