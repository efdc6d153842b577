"""Plugins on the command line (``iml.commands.plugins``): a loss, a model and a dataset, each
registered by its own file outside the repository, given to ``iml sweep`` with ``--import``;
the run's manifest records them, ``iml figures`` and ``iml reveal`` load them again (given with
``--import``, or from the manifest), and a plugin that is missing or fails to import is named,
with exit status 2, before any work.

The three files register the beta-weighted boosting loss, a one-layer GELU network and
scikit-learn's breast-cancer table. One tiny sweep is shared by the tests of this module.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from iml import cli, plugins
from iml import losses as L

LOSS, MODEL, DATASET = "boosting_file", "gelu_file", "cancer_file"

FILES = {
    "boosting_loss.py": f"""
        import jax.numpy as jnp

        import iml
        from iml import losses


        def boosting(a, y, beta):
            a = jnp.asarray(a)
            return jnp.where(jnp.asarray(y) == 1, beta * jnp.sqrt((1 - a) / a),
                             (1 - beta) * jnp.sqrt(a / (1 - a)))


        def boosting_logits(z, y, beta):
            z = jnp.asarray(z)
            y = jnp.asarray(y, z.dtype)
            return beta * y * jnp.exp(-z / 2) + (1 - beta) * (1 - y) * jnp.exp(z / 2)


        losses.register(losses.LossRecord(
            name="{LOSS}", title="beta-weighted boosting loss",
            make=lambda beta=0.5: ({{"beta": losses.as_parameter("beta", beta)}}, 2),
            loss=boosting, logits_loss=boosting_logits, event_ndims={{"beta": 0}},
            optimal_score=iml.optimal_score, inverse=iml.loss_corrected_score,
            class_weight="beta"))
    """,
    "gelu_mlp.py": f"""
        from flax import linen as nn

        from iml.models import register_model


        class GeluMLP(nn.Module):
            n_outputs: int = 1
            hidden: int = 16

            @nn.compact
            def __call__(self, x, train=False):
                h = nn.gelu(nn.Dense(self.hidden)(x.reshape(x.shape[0], -1)))
                out = nn.Dense(self.n_outputs)(h)
                return out[..., 0] if self.n_outputs == 1 else out


        register_model("{MODEL}", lambda n, hidden=16: GeluMLP(n, hidden), inputs=("rows",),
                       options=("hidden",))
    """,
    "cancer_table.py": f"""
        import numpy as np

        from iml.data import Dataset, register_dataset


        def load(manual_dir):
            from sklearn.datasets import load_breast_cancer

            x, y = load_breast_cancer(return_X_y=True)
            x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
            n = len(y)
            return Dataset(name="{DATASET}", labels=(y == 0).astype(np.int32),
                           groups=np.arange(n), ids=np.arange(n), input_shape=(x.shape[1],),
                           kind="tabular", reader=x.__getitem__)


        register_dataset("{DATASET}", load, kind="tabular")
    """,
}


def _forget_plugins() -> None:
    """Unregister what the files register and unload them, as a new process starts."""
    from iml.data import unregister_dataset
    from iml.models import unregister_model

    if LOSS in L.registered():
        L.unregister(LOSS)
    unregister_model(MODEL)
    unregister_dataset(DATASET)
    for name, record in list(plugins._IMPORTED.items()):
        if record.get("path", "").endswith(tuple(FILES)):
            del plugins._IMPORTED[name]
            sys.modules.pop(name, None)


def _imports(folder) -> list[str]:
    return [arg for name in FILES for arg in ("--import", str(folder / name))]


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory):
    """A tiny sweep of the three plugins, given as paths relative to the working folder:
    returns the folder of the files and the run's folder."""
    folder = tmp_path_factory.mktemp("researcher")
    for name, text in FILES.items():
        (folder / name).write_text(textwrap.dedent(text))
    run = folder / "sweep"
    argv = [
        "sweep",
        "--import",
        "boosting_loss.py",
        "--import",
        "gelu_mlp.py",
        "--import",
        "cancer_table.py",
        "--dataset",
        DATASET,
        "--loss",
        LOSS,
        f"--config.model.name={MODEL}",
        "--config.model.hidden=4",
        "--betas",
        "0.5,0.9",
        "--seeds",
        "1",
        "--config.train.l2=1e-4",
        "--config.train.max_epochs=3",
        "--config.train.batch_size=128",
        "--config.train.learning_rate=0.05",
        "--config.data.n_folds=5",
        "--config.eval.figures=",
        "--config.eval.n_bootstrap=20",
        "--no-progress",
        "--out",
        str(run),
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        status = cli.main(argv)
    try:
        assert status == 0
        yield folder, run
    finally:
        _forget_plugins()


@pytest.mark.slow
def test_a_sweep_of_plugin_files_runs_and_its_manifest_records_them(plugin_run):
    folder, run = plugin_run
    table = json.loads((run / "table.json").read_text())
    assert list(table) == ["0.5", "0.9"]
    manifest = json.loads((run / "manifest.json").read_text())
    config = manifest["config"]
    assert (config["loss"]["name"], config["model"]["name"]) == (LOSS, MODEL)
    assert config["data"]["name"] == DATASET
    imports = manifest["plugins"]["imports"]
    # as given, and resolved to the files' absolute paths
    assert [item["given"] for item in imports] == list(FILES)
    assert [item["path"] for item in imports] == [str(folder / name) for name in FILES]
    assert manifest["plugins"]["entry_points"] == []


@pytest.mark.slow
def test_figures_and_reveal_load_the_runs_plugins(plugin_run, tmp_path, capsys):
    folder, run = plugin_run
    _forget_plugins()  # as a new process starts
    assert LOSS not in L.registered()
    argv = ["figures", "--run", str(run), "--out", str(tmp_path / "figures"),
            "--config.eval.figures=", *_imports(folder)]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    figures = json.loads((tmp_path / "figures" / "table.json").read_text())
    assert figures == json.loads((run / "table.json").read_text())

    _forget_plugins()  # without --import, from the run's manifest
    argv = [
        "reveal",
        "--run",
        str(run),
        "--out",
        str(tmp_path / "revealed"),
        "--config.eval.n_bootstrap=20",
        "--power-datasets",
        "0",
        "--config.eval.figures=",
        "--no-progress",
    ]
    assert cli.main(argv) == 0, capsys.readouterr().err
    revealed = json.loads((tmp_path / "revealed" / "revealed.json").read_text())
    assert revealed["loss"]["name"] == LOSS and revealed["betas"] == [0.5, 0.9]
    assert LOSS in L.registered()


def _stored_manifest(run, folder, edit) -> None:
    """A folder holding ``run``'s manifest as ``edit`` changes it (a run fails before reading
    anything else)."""
    manifest = json.loads((run / "manifest.json").read_text())
    edit(manifest)
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.slow
def test_reveal_without_the_plugins_of_a_run_names_the_plugin_to_load(plugin_run, tmp_path, capsys):
    _, run = plugin_run
    _forget_plugins()

    def moved(manifest):  # the loss's file is no longer where the run was made
        manifest["plugins"]["imports"][0]["path"] = str(tmp_path / "gone" / "boosting_loss.py")

    _stored_manifest(run, tmp_path / "moved", moved)
    argv = ["reveal", "--run", str(tmp_path / "moved"), "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("iml reveal: error: --run: ")
    assert f"plugin 'boosting_loss.py' ({tmp_path / 'gone' / 'boosting_loss.py'})" in err
    assert "which is not found: give it with --import PATH/boosting_loss.py" in err
    assert "focal, log, squared" not in err and not (tmp_path / "out").exists()

    # a run that records no plugins (made before they were recorded): its loss is named
    _forget_plugins()
    _stored_manifest(run, tmp_path / "unrecorded", lambda manifest: manifest.pop("plugins"))
    argv = ["reveal", "--run", str(tmp_path / "unrecorded"), "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"was made with the loss '{LOSS}', which no loaded plugin registers" in err
    assert "--import MODULE_OR_FILE" in err and "focal, log, squared" not in err
    # and from Python, reading the run
    from iml.pipeline.reveal_input import load_reveal_input

    with pytest.raises(ValueError, match=f"the loss '{LOSS}', which is not registered"):
        load_reveal_input(run)


def test_a_plugin_that_fails_to_import_stops_the_command_with_exit_2(tmp_path, capsys):
    (tmp_path / "broken.py").write_text("raise RuntimeError('no weights file')\n")
    out = tmp_path / "out"
    argv = ["sweep", "--import", str(tmp_path / "broken.py"), "--dataset", "digits", "--out"]
    assert cli.main([*argv, str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("iml sweep: error: --import: plugin ")
    assert f"'{tmp_path / 'broken.py'}' failed to import: RuntimeError: no weights file" in err
    assert f"(at {tmp_path / 'broken.py'}:1)" in err
    assert not out.exists()
    for spec, message in [
        ("no_such_plugin_module", "no module named 'no_such_plugin_module' on the Python path"),
        (str(tmp_path / "absent.py"), f"file not found: {tmp_path / 'absent.py'}"),
    ]:
        assert cli.main(["figures", "--import", spec, "--run", str(tmp_path / "run")]) == 2
        assert message in capsys.readouterr().err


LINEAR = """
    import jax.numpy as jnp

    from iml import losses


    def linear(a, y, beta):  # improper: a linear loss has no interior optimum to invert
        a = jnp.asarray(a)
        return jnp.where(jnp.asarray(y) == 1, beta * (1 - a), (1 - beta) * a)


    losses.register(losses.LossRecord(
        name="linear_file", title="beta-weighted linear loss",
        make=lambda beta=0.5: ({"beta": losses.as_parameter("beta", beta)}, 2),
        loss=linear, event_ndims={"beta": 0}, class_weight="beta"))
"""


@pytest.mark.slow
def test_a_loss_whose_rule_has_no_inverse_is_refused_before_training(tmp_path, capsys):
    (tmp_path / "linear_loss.py").write_text(textwrap.dedent(LINEAR))
    out = tmp_path / "out"
    argv = ["sweep", "--import", str(tmp_path / "linear_loss.py"), "--loss", "linear_file",
            "--dataset", "digits", "--betas", "0.5,0.9", "--no-progress",
            "--out", str(out)]  # fmt: skip
    reproduce = ["reproduce", "--import", str(tmp_path / "linear_loss.py"), "--loss",
                 "linear_file", "--betas", "0.5", "0.9", "--no-progress",
                 "--out", str(out)]  # fmt: skip
    try:
        assert cli.main(argv) == 2
        sweep_err = capsys.readouterr().err
        assert cli.main(reproduce) == 2
        reproduce_err = capsys.readouterr().err
    finally:
        L.unregister("linear_file")
        _forget_plugins()
    for err in (sweep_err, reproduce_err):
        assert err.count("\n") == 1, err
        assert "the beta-weighted linear loss at beta = 0.5 has an optimal scoring rule that is " \
            "not invertible for scores in [" in err  # fmt: skip
        assert "iml.check_invertibility" in err
    assert not (out / "manifest.json").exists()  # nothing trained, nothing stored
