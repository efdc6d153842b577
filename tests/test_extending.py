"""Extending ``iml`` from a researcher's own file: a loss registered here, and nowhere in
``iml/``, trains in a sweep and in an image ensemble, is corrected by the inverse of its own
rule, and goes through ``iml reveal``; so do a model and a dataset registered here.

The loss is the beta-weighted spherical scoring rule, ``-beta_y S(a, y)`` with
``S(a, y) = a_y / ||a||``. It is strictly proper, so its optimal score at a class weight is the
beta-tilted posterior (Proposition 2), and its loss correction must equal Corollary 1's; and its
expected loss is flat to float32 precision near the minimum, where the generic rule has to find
the minimum from the first-order condition's sign.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from iml import cli, loss_spec
from iml import losses as L
from iml.recalibration import Recalibrator
from iml.scoring import loss_corrected_score, optimal_score

NAME = "spherical_test"


@jax.custom_jvp
def spherical_scores(a):
    """``(S(a, 1), S(a, 0)) = (a, 1 - a) / sqrt(a^2 + (1 - a)^2)``, with their derivatives
    ``(1 - a, -a) / (a^2 + (1 - a)^2)^(3/2)`` in closed form: differentiated as written, the
    quotient cancels to float32 noise beyond logits of about 9 in size, and the check before
    training refuses the loss there (``iml.check_invertibility``)."""
    norm = jnp.sqrt(a**2 + (1.0 - a) ** 2)
    return a / norm, (1.0 - a) / norm


@spherical_scores.defjvp
def _spherical_scores_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    cube = (a**2 + (1.0 - a) ** 2) ** 1.5
    return spherical_scores(a), ((1.0 - a) / cube * da, -a / cube * da)


def spherical(a, y, beta):
    """``-beta S(a, 1)`` for a positive, ``-(1 - beta) S(a, 0)`` for a negative."""
    positive_score, negative_score = spherical_scores(jnp.asarray(a))
    return jnp.where(jnp.asarray(y) == 1, -beta * positive_score, -(1.0 - beta) * negative_score)


def make(beta=0.5):
    if not 0.0 < float(np.min(beta)) <= float(np.max(beta)) < 1.0:
        raise ValueError(f"beta must lie in (0, 1), got {beta}")
    return {"beta": L.as_parameter("beta", beta)}, 2


@pytest.fixture(scope="module")
def registered():
    record = L.LossRecord(
        name=NAME,
        title="beta-weighted spherical loss",
        make=make,
        loss=spherical,
        event_ndims={"beta": 0},
        class_weight="beta",
    )
    L.register(record)
    yield record
    L.unregister(NAME)


@pytest.mark.slow
def test_a_registered_loss_is_a_specification_with_the_generic_rule(registered):
    spec = loss_spec(NAME, beta=[0.5, 0.9, 0.99])
    assert spec.batch_shape == (3,) and spec.record is registered
    assert spec.describe().startswith("beta-weighted spherical loss")
    gamma = jnp.asarray([0.2, 0.5, 0.99969])
    for i, beta in enumerate((0.5, 0.9, 0.99)):
        a = spec[i].optimal_score(gamma)
        np.testing.assert_allclose(a, optimal_score(gamma, beta), rtol=2e-6)
        np.testing.assert_allclose(spec[i].loss_corrected_score(a), gamma, rtol=2e-4)
    assert loss_spec(spec.to_config()).name == NAME
    with pytest.raises(ValueError, match="beta must lie in"):
        loss_spec(NAME, beta=1.5)
    with pytest.raises(ValueError, match="registered already"):
        L.register(registered)


@pytest.mark.slow
def test_a_registered_loss_sweeps_and_goes_through_reveal(registered, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = [
        "sweep",
        "--dataset",
        "digits",
        "--loss",
        NAME,
        "--betas",
        "0.5,0.9,0.99",
        "--seeds",
        "1",
        "--config.train.l2=1e-4",
        "--config.train.max_epochs=5",
        "--config.train.batch_size=256",
        "--config.train.learning_rate=0.1",
        "--config.data.n_folds=5",
        "--config.eval.figures=",
        "--config.eval.n_bootstrap=20",  # under 100: no simulated size and power in the report
        "--out",
        str(out),
        "--no-progress",
    ]
    assert cli.main(argv) == 0, capsys.readouterr().err
    table = json.loads((out / "table.json").read_text())
    assert list(table) == ["0.5", "0.9", "0.99"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["loss"]["name"] == NAME
    with np.load(out / "ensemble_scores.npz") as stored:
        scores, corrected = stored["scores"], stored["corrected"]
    for row, beta in enumerate((0.5, 0.9, 0.99)):
        # the generic inverse of the spherical rule is Corollary 1's closed form
        want = np.asarray(loss_corrected_score(scores[row].astype(np.float32), beta))
        np.testing.assert_allclose(corrected[row], want, atol=2e-4)
    # the class weight's correction does its work at beta = 0.99
    assert table["0.99"]["loss_corrected"]["ece"] < table["0.99"]["raw"]["ece"]

    revealed = tmp_path / "revealed"
    argv = ["reveal", "--run", str(out), "--out", str(revealed), "--power-datasets", "0",
            "--config.eval.n_bootstrap=20", "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    result = json.loads((revealed / "revealed.json").read_text())
    assert result["betas"] == [0.5, 0.9, 0.99] and result["K"] == 3
    assert result["loss"]["name"] == NAME
    assert {"nis", "niac", "nias"} <= set(result)


@pytest.mark.slow
def test_a_registered_loss_trains_an_image_ensemble(registered, tmp_path):
    """`iml reproduce` with the registered loss: each beta's DenseNet ensemble trains under it,
    the run's loss is this loss by its class weight, the ensemble scores are corrected by its own
    (generic) inverse, and `iml reveal` reads the run. (The sweep test above runs reveal's
    bootstrap; here the ensemble's report would only add minutes.)"""
    from iml.pipeline.reveal_input import load_reveal_input
    from iml.pipeline.runner import run_loss
    from iml.pipeline.store import RunStore, load_ensemble

    out, config = _tiny_ensemble(tmp_path, loss__name=NAME)
    family = run_loss(config)
    assert family.name == NAME and family.weight_name == "beta"
    ensemble = load_ensemble(RunStore(out), [0.5, 0.9], 200)
    raw = np.clip(ensemble.scores[1], 1e-7, 1 - 1e-7).astype(np.float32)
    corrected = np.asarray(family(0.9).loss_corrected_score(raw))
    np.testing.assert_allclose(corrected, np.asarray(loss_corrected_score(raw, 0.9)), atol=2e-4)
    inputs = load_reveal_input(out)
    assert list(inputs.betas) == [0.5, 0.9] and inputs.loss.name == NAME


SCALED = "scaled_log_test"


def scaled_log(a, y, beta, alpha):
    """``alpha`` times the beta-weighted log loss: a parameter beside the class weight."""
    a = jnp.asarray(a)
    return -alpha * jnp.where(jnp.asarray(y) == 1, beta * jnp.log(a), (1.0 - beta) * jnp.log1p(-a))


def make_scaled(beta=0.5, alpha=1.0):
    if not float(np.min(alpha)) > 0.0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    shape = np.broadcast_shapes(np.shape(beta), np.shape(alpha))  # a grid's shape, both
    return {
        "beta": jnp.broadcast_to(L.as_parameter("beta", beta), shape),
        "alpha": jnp.broadcast_to(L.as_parameter("alpha", alpha), shape),
    }, 2


@pytest.fixture(scope="module")
def scaled():
    record = L.LossRecord(name=SCALED, title="alpha-scaled beta-weighted log loss",
                          make=make_scaled, loss=scaled_log,
                          event_ndims={"beta": 0, "alpha": 0}, class_weight="beta")  # fmt: skip
    L.register(record)
    yield record
    L.unregister(SCALED)


@pytest.mark.slow
def test_a_loss_with_a_new_parameter_is_set_from_the_config_of_both_commands(
    scaled, tmp_path, capsys
):
    """`--config.loss.params.alpha=0.3`: a parameter no schema names reaches the loss of a sweep
    and of an image ensemble, and a parameter the loss does not take is refused before work."""
    from iml.pipeline.runner import run_loss

    out = tmp_path / "sweep"
    argv = ["sweep", "--dataset", "digits", "--loss", SCALED, "--betas", "0.5,0.9",
            "--config.loss.params.alpha=0.3", "--config.train.max_epochs=2",
            "--config.data.n_folds=4", "--config.eval.figures=", "--config.eval.n_bootstrap=20",
            "--out", str(out), "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    recorded = json.loads((out / "manifest.json").read_text())["config"]["loss"]
    assert recorded["name"] == SCALED and np.allclose(recorded["alpha"], 0.3)
    bad = [*argv[:7], "--config.loss.params.gamma=2", *argv[8:]]
    bad[bad.index(str(out))] = str(tmp_path / "bad")
    assert cli.main(bad) == 2
    assert f"config.loss.params.gamma: the loss '{SCALED}' takes alpha" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    ensemble, config = _tiny_ensemble(tmp_path, loss__name=SCALED, loss__params={"alpha": 0.3})
    assert run_loss(config).params == {"alpha": 0.3}
    stored = json.loads((ensemble / "manifest.json").read_text())["config"]["loss"]
    assert stored["params"] == {"alpha": 0.3}


@pytest.mark.slow
def test_a_callable_loss_goes_through_reveal_as_the_registered_ones_do(tmp_path):
    """A user's function ``L(a, y, beta)`` with no registration: its family (the class weight
    its first extra argument) reveals the same experiments as the built-in beta-weighted log
    loss it writes out."""
    from iml.grids import loss_family
    from iml.pipeline.reveal import reveal_run
    from iml.pipeline.reveal_input import reveal_input

    def weighted_log(a, y, beta):
        return jnp.where(y == 1, -beta * jnp.log(a), -(1.0 - beta) * jnp.log1p(-a))

    rng = np.random.default_rng(3)
    betas = [0.5, 0.9, 0.99]
    posterior = rng.beta(0.6, 4.0, 600)
    labels = (rng.random(600) < posterior).astype(np.int32)
    scores = np.stack([np.asarray(optimal_score(jnp.asarray(posterior, jnp.float32), b))
                       for b in betas])  # fmt: skip
    records = {}
    for name, family in (("callable", loss_family(weighted_log)), ("log", loss_family("log"))):
        inputs = reveal_input(betas, scores, labels, family)
        records[name] = reveal_run(inputs, tmp_path / name, n_bootstrap=8, power_datasets=0,
                                   formats=())  # fmt: skip
    stored = json.loads((tmp_path / "callable" / "revealed.json").read_text())
    assert stored["loss"]["name"] == "callable" and stored["loss"]["weight_name"] == "weight"
    mine, theirs = records["callable"], records["log"]
    values = [np.asarray(r["value_matrix"]["estimate"]) for r in (mine, theirs)]
    np.testing.assert_allclose(*values, atol=1e-5)
    assert mine["nis"]["violated"] == theirs["nis"]["violated"]
    assert mine["nis"]["margin"] == pytest.approx(theirs["nis"]["margin"], abs=1e-5)


# ----------------------------------------------------------------------------------------------
# A model and a dataset, each registered from this file
# ----------------------------------------------------------------------------------------------

MODEL, DATASET = "tanh_test", "stripes_test"


def _tiny_ensemble(tmp_path, **settings):
    """`iml reproduce`'s pipeline on 200 examples at 8 px: two betas (of the log loss unless
    ``loss__name`` says otherwise), three folds rotated 1/1/1, one epoch; returns the run's folder
    and config after checking that every example was scored once, by the rotation that tests
    it, and that `iml reveal` reads the run."""
    from iml.pipeline.defaults import default_config
    from iml.pipeline.experiment import build
    from iml.pipeline.reveal_input import check_reveal_input, load_reveal_input
    from iml.pipeline.store import RunStore, load_ensemble
    from iml.pipeline.train_plan import run

    config = default_config()
    config.unlock()
    config.loss.betas = (0.5, 0.9)
    config.data.image_size = 8
    config.data.max_examples = 200
    config.data.n_folds = 3
    config.data.n_val_folds = 1
    config.model.name = "densenet_tiny"
    config.train.max_epochs = 1
    config.plan.checkpoint = False
    config.eval.n_bins = 5
    for key, value in settings.items():
        section, field = key.split("__")
        if isinstance(value, dict):  # an open section: the loss's parameters
            config[section][field].update(value)
        else:
            config[section][field] = value
    config.lock()
    out = tmp_path / "ensemble"
    run(build(config), RunStore(out), progress=False)
    ensemble = load_ensemble(RunStore(out), [0.5, 0.9], 200)
    assert (ensemble.sizes > 0).all()  # every example scored, by the rotation that tests it
    assert np.isfinite(ensemble.scores).all()
    check_reveal_input(load_reveal_input(out), 5)
    return out, config


def _sweep(tmp_path, *extra):
    out = tmp_path / "sweep"
    argv = [
        "sweep",
        "--betas",
        "0.5,0.9",
        "--seeds",
        "1",
        "--config.train.l2=1e-4",
        "--config.train.max_epochs=3",
        "--config.train.batch_size=128",
        "--config.train.learning_rate=0.05",
        "--config.data.n_folds=5",
        "--out",
        str(out),
        "--config.eval.figures=",
        "--config.eval.n_bootstrap=20",  # under 100: no simulated size and power in the report
        "--no-progress",
        *extra,
    ]
    assert cli.main(argv) == 0
    table = json.loads((out / "table.json").read_text())
    assert list(table) == ["0.5", "0.9"]
    with np.load(out / "ensemble_scores.npz") as stored:
        scores, corrected = stored["scores"], stored["corrected"]
    for row, beta in enumerate((0.5, 0.9)):  # each corrected by the log loss's own inverse
        want = np.asarray(loss_corrected_score(scores[row].astype(np.float32), beta))
        np.testing.assert_allclose(corrected[row], want, atol=1e-5)
    return out, json.loads((out / "manifest.json").read_text())


class TanhNet(nn.Module):
    """Images or rows, flattened, through one tanh layer of ``width`` units."""

    n_outputs: int = 1
    width: int = 8

    @nn.compact
    def __call__(self, x, train=False):
        h = jnp.tanh(nn.Dense(self.width)(x.reshape(x.shape[0], -1)))
        out = nn.Dense(self.n_outputs)(h)
        return out[..., 0] if self.n_outputs == 1 else out


@pytest.fixture
def tanh_model():
    from iml.models import MODELS, register_model, unregister_model

    record = register_model(
        MODEL, lambda n, hidden=8: TanhNet(n_outputs=n, width=hidden), options=("hidden",)
    )
    assert MODELS[MODEL] is record
    yield record
    unregister_model(MODEL)


@pytest.mark.slow
def test_a_registered_model_sweeps_and_trains_an_image_ensemble(tanh_model, tmp_path):
    from iml.models import build_model

    # the config's `hidden` reaches the model; the keys it does not take are left out
    model = build_model(MODEL, 3, "rows", hidden=5, weights="", name=MODEL)
    assert (model.n_outputs, model.width) == (3, 5)
    out, manifest = _sweep(
        tmp_path, "--dataset", "digits", f"--config.model.name={MODEL}", "--config.model.hidden=4"
    )
    assert manifest["config"]["model"] == {"name": MODEL, "hidden": 4}
    with np.load(out / "ensemble_scores.npz") as stored:
        assert stored["scores"].shape == (2, 1797)
    # the kind of run follows from the model's inputs: the same network registered for images
    # alone trains an ensemble fed from the host
    from iml.models import register_model, unregister_model

    images_only = f"{MODEL}_images"
    register_model(images_only, lambda n, hidden=8: TanhNet(n_outputs=n, width=hidden),
                   inputs=("images",), options=("hidden",))  # fmt: skip
    try:
        run, _ = _tiny_ensemble(tmp_path, model__name=images_only)
    finally:
        unregister_model(images_only)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["model"]["name"] == images_only and manifest["kind"] == "images"


def test_an_unknown_or_unfit_model_is_named_before_any_work(tanh_model, tmp_path, capsys):
    from iml.models import model_record, register_model, unregister_model
    from iml.pipeline.defaults import sweep_config
    from iml.pipeline.run_config import experiment_kind

    # the kind of run follows from the model, whichever command's defaults start the config
    config = sweep_config()
    config.model.name = "densenet_tiny"
    assert experiment_kind(config) == "images" and experiment_kind(sweep_config()) == "table"
    register_model("rows_only_test", lambda n: TanhNet(n_outputs=n), inputs=("rows",))
    try:
        with pytest.raises(ValueError, match="does not take images; the models that do are"):
            model_record("rows_only_test", "images")
    finally:
        unregister_model("rows_only_test")
    with pytest.raises(ValueError, match="unknown model 'nope'; the models are"):
        model_record("nope")


def _stripes(data_dir, manual_dir, image_size, n=300):
    """300 grey images; a positive (one in four) carries faint vertical stripes."""
    from iml.data.datasets import Dataset

    size = image_size or 8
    rng = np.random.default_rng(0)
    labels = (rng.random(n) < 0.25).astype(np.int32)
    images = rng.integers(0, 160, (n, size, size, 1))
    images[:, :, ::2, :] += 60 * labels[:, None, None, None]
    images = images.astype(np.uint8)
    return Dataset(
        name=DATASET,
        labels=labels,
        groups=np.arange(n),
        ids=np.arange(n),
        input_shape=(size, size, 1),
        kind="image",
        reader=lambda indices: images[indices],
    )


@pytest.fixture
def stripes():
    from iml.data import register_dataset, unregister_dataset

    yield register_dataset(DATASET, _stripes, kind="image", options=["n"])
    unregister_dataset(DATASET)


@pytest.mark.slow
def test_a_registered_dataset_sweeps_and_trains_an_image_ensemble(stripes, tmp_path):
    from iml.data import load_dataset

    assert load_dataset(DATASET, n=40).num_examples == 40
    out, manifest = _sweep(tmp_path, "--dataset", DATASET)
    assert manifest["config"]["data"]["name"] == DATASET
    with np.load(out / "ensemble_scores.npz") as stored:
        labels, scores = stored["labels"], stored["scores"]
    assert labels.shape == (300,) and labels.sum() == _stripes(None, None, 8).labels.sum()
    # the stripes are learnt: positives score above negatives
    assert scores[0][labels == 1].mean() > scores[0][labels == 0].mean() + 0.2
    run, _ = _tiny_ensemble(tmp_path, data__name=DATASET)
    assert json.loads((run / "manifest.json").read_text())["config"]["data"]["name"] == DATASET


class PriorRate(Recalibrator):
    """A baseline a user brings: every score replaced by the fitting folds' positive rate."""

    def _fit(self, scores, labels, sample_weight):
        return jnp.asarray(np.mean(labels), jnp.float32)

    def _transform(self, params, scores):
        return jnp.full(jnp.shape(scores), params)


def test_a_baseline_added_from_a_file_is_cross_fitted_in_every_binary_table(monkeypatch):
    """One registry entry (iml.recalibration.BASELINES) from a user's file: the one table of
    every run (a run on images or a sweep) cross-fits it over the outer folds beside the others."""
    from iml.grids import loss_family, loss_grid
    from iml.pipeline.scores import run_table
    from iml.recalibration import BASELINES

    monkeypatch.setitem(BASELINES, "prior_rate", lambda beta: lambda labels: PriorRate())
    rng = np.random.default_rng(0)
    labels = (rng.random(400) < 0.3).astype(np.int32)
    scores = np.clip(0.3 + 0.3 * labels + 0.1 * rng.normal(size=(2, 400)), 0.01, 0.99)
    folds = np.arange(400) % 4
    table = run_table(loss_grid(np.array([0.5, 0.9])), scores, np.ones((2, 400), np.int64), labels,
                      folds, n_bootstrap=0, family=loss_family("log"))  # fmt: skip
    for row in table.values():
        # each fold's constant is the other folds' rate, so its Brier score is the variance's
        rates = [labels[folds != f].mean() for f in range(4)]
        want = np.mean([(labels[folds == f] - rates[f]) ** 2 for f in range(4)])
        assert row["prior_rate"]["brier"] == pytest.approx(want, rel=1e-5)
