"""Plugins (``iml.plugins``): a file or a module imported once and recorded, the entry points of
installed packages loaded once, a plugin that is missing or fails named with its exception, a
run's recorded plugins loaded again; and the example package, ``examples/iml-plugin-example``,
installed into a folder of its own, registering its loss in ``iml sweep`` through its entry
point."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iml
from iml import losses as L
from iml import plugins

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "iml-plugin-example"
#: The plugin modules the tests write.
MODULES = {"plugin_pkg_test", "needs_dep_test", "ep_plugin_test", "ep_module_test",
           "ep_broken_test"}  # fmt: skip


@pytest.fixture
def isolated(monkeypatch):
    """This test's plugins alone: none recorded before it, and its modules unloaded after."""
    monkeypatch.setattr(plugins, "_IMPORTED", {})
    monkeypatch.setattr(plugins, "_ENTRY_POINTS", None)
    yield
    for name in list(sys.modules):  # the plugin files' modules, and the modules written here
        if name.startswith("iml_plugin_") or name.split(".")[0] in MODULES:
            del sys.modules[name]


def _counting_plugin(path: Path) -> Path:
    """A plugin file that appends a line to ``path.with_suffix('.log')`` each time it runs."""
    log = path.with_suffix(".log")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"with open({str(log)!r}, 'a') as f:\n    f.write('ran\\n')\n")
    return log


def test_a_plugin_file_is_one_module_per_path_run_once_and_recorded(isolated, tmp_path):
    log = _counting_plugin(tmp_path / "a" / "my_loss.py")
    _counting_plugin(tmp_path / "b" / "my_loss.py")
    first = plugins.import_plugin(str(tmp_path / "a" / "my_loss.py"))
    again = plugins.import_plugin(str(tmp_path / "a" / ".." / "a" / "my_loss.py"))
    assert first is again and log.read_text() == "ran\n"  # run once
    assert first.__name__ == plugins.file_module_name(tmp_path / "a" / "my_loss.py")
    assert first.__name__.startswith("iml_plugin_my_loss_")
    other = plugins.import_plugin(str(tmp_path / "b" / "my_loss.py"))
    assert other.__name__ != first.__name__  # one name, two folders: two modules
    imports = plugins.plugins_record()["imports"]
    assert [item["path"] for item in imports] == [
        str(tmp_path / "a" / "my_loss.py"),
        str(tmp_path / "b" / "my_loss.py"),
    ]
    assert imports[0] == {
        "given": str(tmp_path / "a" / "my_loss.py"),
        "path": str(tmp_path / "a" / "my_loss.py"),
        "module": first.__name__,
    }


def test_a_plugin_module_is_imported_by_its_dotted_name(isolated, tmp_path, monkeypatch):
    (tmp_path / "plugin_pkg_test").mkdir()
    (tmp_path / "plugin_pkg_test" / "__init__.py").write_text("")
    (tmp_path / "plugin_pkg_test" / "losses.py").write_text("NAME = 'mine'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert plugins.import_plugin("plugin_pkg_test.losses").NAME == "mine"
    assert plugins.plugins_record() == {
        "imports": [{"given": "plugin_pkg_test.losses", "module": "plugin_pkg_test.losses"}],
        "entry_points": [],
    }


def test_a_plugin_that_is_missing_or_fails_is_named_with_its_exception(
    isolated, tmp_path, monkeypatch
):
    bad = tmp_path / "bad_plugin.py"
    bad.write_text("x = 1\nraise KeyError('beta')\n")
    with pytest.raises(plugins.PluginError, match=r"failed to import: KeyError: 'beta'") as err:
        plugins.import_plugin(str(bad))
    assert f"plugin '{bad}'" in str(err.value) and f"(at {bad}:2)" in str(err.value)
    assert isinstance(err.value, ValueError) and isinstance(err.value.__cause__, KeyError)
    assert plugins.file_module_name(bad) not in sys.modules  # a retry runs it again
    with pytest.raises(plugins.PluginError, match=r"file not found: .*absent\.py"):
        plugins.import_plugin(str(tmp_path / "absent.py"))
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(plugins.PluginError, match=r"a plugin file is a \.py file"):
        plugins.import_plugin(str(tmp_path / "notes.txt"))
    with pytest.raises(plugins.PluginError, match=r"no module named 'absent_pkg_test' on the"):
        plugins.import_plugin("absent_pkg_test.losses")
    # a module that is there, whose own import needs a package that is not
    (tmp_path / "needs_dep_test.py").write_text("import not_installed_dep_test\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    message = r"'needs_dep_test' failed to import: ModuleNotFoundError: .*not_installed_dep_test"
    with pytest.raises(plugins.PluginError, match=message):
        plugins.import_plugin("needs_dep_test")
    assert plugins.plugins_record()["imports"] == []


def _entry_points(monkeypatch, tmp_path, **values: str) -> None:
    """Entry points of ``iml.plugins`` named ``values``' keys, as if installed."""
    found = [importlib.metadata.EntryPoint(name, value, plugins.ENTRY_POINT_GROUP)
             for name, value in values.items()]  # fmt: skip
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: found)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_entry_points_are_loaded_once_and_one_that_fails_is_named(isolated, tmp_path, monkeypatch):
    registers = "CALLS = []\n\ndef register():\n    CALLS.append(1)\n"
    (tmp_path / "ep_plugin_test.py").write_text(registers)
    (tmp_path / "ep_module_test.py").write_text("")
    _entry_points(monkeypatch, tmp_path, mine="ep_plugin_test:register", other="ep_module_test")
    want = [{"name": "mine", "value": "ep_plugin_test:register"},
            {"name": "other", "value": "ep_module_test"}]  # fmt: skip
    assert iml.load_plugins() == want
    assert iml.load_plugins() == want  # once per process: the function was called once
    assert sys.modules["ep_plugin_test"].CALLS == [1]
    assert plugins.plugins_record()["entry_points"] == want

    monkeypatch.setattr(plugins, "_ENTRY_POINTS", None)
    (tmp_path / "ep_broken_test.py").write_text("raise ImportError('needs torch')\n")
    _entry_points(monkeypatch, tmp_path, broken="ep_broken_test")
    message = r"entry point 'broken' \(ep_broken_test\) failed to import: ImportError: needs torch"
    with pytest.raises(plugins.PluginError, match=message):
        plugins.load_plugins()


def test_a_runs_recorded_plugins_load_again_or_are_named_with_how_to_supply_them(
    isolated, tmp_path, monkeypatch
):
    log = _counting_plugin(tmp_path / "my_model.py")
    record = {"imports": [{"given": "my_model.py", "path": str(tmp_path / "my_model.py"),
                           "module": plugins.file_module_name(tmp_path / "my_model.py")}],
              "entry_points": []}  # fmt: skip
    _entry_points(monkeypatch, tmp_path)
    plugins.import_recorded(record)
    assert log.read_text() == "ran\n"
    plugins.import_recorded(None)  # a run that records no plugins
    plugins.import_recorded(record)  # loaded already
    assert log.read_text() == "ran\n"

    gone = {"imports": [{"given": "lost.py", "path": str(tmp_path / "lost.py"), "module": "m"}]}
    with pytest.raises(plugins.PluginError, match=r"runs/a was made with the plugin 'lost.py' "):
        plugins.import_recorded(gone, run="runs/a")
    plugins.import_recorded(gone, supplied=["elsewhere/lost.py"])  # given in its place
    module = {"imports": [{"given": "absent_mod_test", "module": "absent_mod_test"}]}
    with pytest.raises(plugins.PluginError, match=r"'absent_mod_test', which is not on the"):
        plugins.import_recorded(module)
    entry = {"name": "boosting", "value": "iml_plugin_example.boosting",
             "distribution": "iml-plugin-example", "version": "0.1.0"}  # fmt: skip
    message = (
        r"plugin entry point 'boosting' \(iml-plugin-example 0.1.0: iml_plugin_example.boosting\)"
        r", which is not installed: install iml-plugin-example, or give its module with "
        r"--import iml_plugin_example.boosting"
    )
    with pytest.raises(plugins.PluginError, match=message):
        plugins.import_recorded({"entry_points": [entry]})
    plugins.import_recorded({"entry_points": [entry]}, supplied=["iml_plugin_example.boosting"])
    # a manifest resumed with another plugin lists each once
    merged = plugins.merge_records(record, {"imports": record["imports"], "entry_points": [entry]})
    assert merged == {"imports": record["imports"], "entry_points": [entry]}


# ----------------------------------------------------------------------------------------------
# The example package
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_example_loss_is_minimised_by_the_beta_tilted_posterior(isolated):
    """The closed forms the example registers (Proposition 2's rule, Corollary 1's inverse, its
    l*, its logit form) are those its loss implies, found by autodiff."""
    boosting = plugins.import_plugin(str(EXAMPLE / "iml_plugin_example" / "boosting.py"))
    try:
        gamma = jnp.asarray([0.01, 0.2, 0.5, 0.8, 0.99])
        for beta in (0.2, 0.5, 0.9):

            def loss(a, y, beta=beta):
                return boosting.boosting_loss(a, y, beta)

            a = iml.optimal_score(gamma, beta)
            np.testing.assert_allclose(iml.optimal_score_for_loss(loss, gamma), a, rtol=1e-4)
            np.testing.assert_allclose(iml.loss_corrected_score_for_loss(loss, a), gamma,
                                       rtol=1e-4)  # fmt: skip
            expected = gamma * loss(a, 1) + (1 - gamma) * loss(a, 0)
            np.testing.assert_allclose(
                boosting.minimised_expected_loss(gamma, beta), expected, rtol=1e-5
            )
            z = jnp.linspace(-6.0, 6.0, 7)
            for y in (0, 1):
                np.testing.assert_allclose(boosting.boosting_loss_logits(z, y, beta),
                                           loss(jax.nn.sigmoid(z), y), rtol=1e-5)  # fmt: skip
        spec = iml.loss_spec("boosting", beta=0.9)
        assert spec.describe().startswith("beta-weighted boosting loss")
        with pytest.raises(ValueError, match=r"beta must lie in \(0, 1\)"):
            iml.loss_spec("boosting", beta=1.5)
    finally:
        L.unregister("boosting")


# One process, as a user's shell runs the three commands: a sweep of the package's loss, model
# and dataset, the run reported again, and revealed (argv: the run's, the report's and the
# revealed folders).
THREE_COMMANDS = """
import sys
from iml import cli
run, report, revealed = sys.argv[1:]
sweep = ["sweep", "--dataset", "breast_cancer", "--config.model.name=gelu_mlp",
         "--config.model.hidden=4", "--loss", "boosting", "--betas", "0.5,0.9", "--seeds", "1",
         "--config.train.max_epochs=2", "--config.data.n_folds=4", "--config.train.l2=1e-4",
         "--config.eval.figures=", "--config.eval.n_bootstrap=20", "--no-progress", "--out", run]
figures = ["figures", "--run", run, "--out", report, "--config.eval.figures="]
reveal = ["reveal", "--run", run, "--out", revealed, "--config.eval.n_bootstrap=20",
          "--power-datasets", "0", "--config.eval.figures=", "--no-progress"]
for argv in (sweep, figures, reveal):
    status = cli.main(argv)
    if status:
        sys.exit(status)
"""


@pytest.mark.slow
def test_the_installed_example_package_registers_a_loss_a_model_and_a_dataset(tmp_path):
    """``pip install --target`` puts the package in a folder of its own (nothing is installed
    here); with that folder on its path, a new process sweeps the package's loss, model and
    dataset by name, reports the run again and reveals it, and the manifest records the entry
    points."""
    # a copy: pip builds in the source folder
    leftovers = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    source = shutil.copytree(EXAMPLE, tmp_path / "source", ignore=leftovers)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
           "--no-build-isolation", "--target", str(site), str(source)]  # fmt: skip
    done = subprocess.run(pip, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    run, report, revealed = tmp_path / "sweep", tmp_path / "report", tmp_path / "revealed"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", THREE_COMMANDS, str(run), str(report), str(revealed)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    table = json.loads((run / "table.json").read_text())
    assert list(table) == ["0.5", "0.9"]
    assert json.loads((report / "table.json").read_text()) == table
    assert json.loads((revealed / "revealed.json").read_text())["loss"]["name"] == "boosting"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["loss"]["name"] == "boosting"
    assert manifest["config"]["model"]["name"] == "gelu_mlp"
    assert manifest["config"]["data"]["name"] == "breast_cancer"
    assert manifest["plugins"]["imports"] == []
    entry_points = {e["name"]: e for e in manifest["plugins"]["entry_points"]}
    assert set(entry_points) == {"boosting", "gelu_mlp", "breast_cancer"}
    assert entry_points["gelu_mlp"]["value"] == "iml_plugin_example.gelu"
    assert entry_points["gelu_mlp"]["distribution"] == "iml-plugin-example"
