"""A run of ``iml reproduce`` (``iml.pipeline.runner``): the model, trainer settings and initial
weights it takes from its config, resuming a stored run, and batches that fail."""

import json
from pathlib import Path

import numpy as np
import pytest
from _pipeline_runs import MULTICLASS, run_config

from iml.config import first_difference, load_config_file, to_dict
from iml.pipeline import RunStore
from iml.pipeline.defaults import default_config
from iml.pipeline.experiment import build, check_resumable
from iml.pipeline.run_config import as_config, check_config
from iml.pipeline.runner import config_model, initial_variables
from iml.pipeline.train_plan import run


def test_the_validation_batch_reaches_the_trainer_and_defaults_to_what_stored_runs_used():
    from iml.training import TrainConfig

    assert build(run_config(**{"train.eval_batch_size": 16})).train.eval_batch_size == 16
    # a run stored before the key existed takes the default, which is what it validated with
    assert default_config().train.eval_batch_size == TrainConfig().eval_batch_size == 64


def test_conv_impl_key_reaches_the_model():
    import jax

    from iml.models import DEFAULT_CONV_IMPL

    default = DEFAULT_CONV_IMPL[jax.default_backend()]
    assert config_model(default_config()).conv_impl == default  # the backend's default
    matmul = run_config(**{"model.conv_impl": "matmul"})
    check_config(matmul)
    assert config_model(matmul).conv_impl == "matmul"


@pytest.mark.slow
def test_initial_variables_adapt_torchvision_rgb_weights_to_gray_images(tmp_path):
    torch = pytest.importorskip("torch")
    import jax
    import jax.numpy as jnp

    from iml.models import variables_to_torchvision_state_dict

    config = run_config(**{"model.name": "densenet_tiny"})
    model = config_model(config)
    assert initial_variables(config, model, 1) is None  # no file: random initialisation
    rgb = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, 8, 8, 3)))
    state = variables_to_torchvision_state_dict(rgb)
    path = tmp_path / "weights.pth"
    torch.save({k: torch.from_numpy(v.copy()) for k, v in state.items()}, path)
    weighted = run_config(**{"model.name": "densenet_tiny", "model.weights": str(path)})
    got = initial_variables(weighted, model, 1)
    np.testing.assert_allclose(
        got["params"]["conv0"]["kernel"][:, :, 0],
        np.asarray(rgb["params"]["conv0"]["kernel"]).sum(axis=2),
        rtol=1e-6,
    )
    np.testing.assert_array_equal(
        got["batch_stats"]["norm5"]["var"], rgb["batch_stats"]["norm5"]["var"]
    )
    other = config_model(default_config())
    with pytest.raises(ValueError, match="state_dict"):
        initial_variables(weighted, other, 1)


def test_a_stored_run_resumes_only_with_its_config_and_names_the_first_difference(tmp_path):
    store = RunStore(tmp_path / "run")
    stored = check_resumable(build(default_config()), store.root)
    store.open_run(stored, kind="images")
    # resumes without complaint
    assert check_resumable(build(default_config()), store.root) == stored
    with pytest.raises(ValueError, match=r"config\.loss\.betas: \[0\.5, 0\.9, 0\.99\] stored"):
        check_resumable(build(run_config(**{"loss.betas": (0.5,)})), store.root)
    # other report settings name the iml figures command that reports the stored members
    hint = r"iml figures --run .*run --out DIR --config\.eval\.average=logit$"
    with pytest.raises(ValueError, match=r"config\.eval\.average: 'score' stored, 'logit' now.*"
                       + hint):  # fmt: skip
        check_resumable(build(run_config(**{"eval.average": "logit"})), store.root)
    both = run_config(**{"eval.n_bins": 20, "eval.average": "logit"})
    with pytest.raises(ValueError, match=r"config\.eval\.average: .* --out DIR "
                       r"--config\.eval\.average=logit --config\.eval\.n_bins=20$"):  # fmt: skip
        check_resumable(build(both), store.root)
    # where training differs too, the stored members do not serve: no iml figures hint
    trained = run_config(**{"eval.n_bins": 20, "train.max_epochs": 5})
    with pytest.raises(ValueError, match=r"config\.eval\.n_bins: 10 stored, 20 now") as err:
        check_resumable(build(trained), store.root)
    assert "iml figures" not in str(err.value)


def test_a_class_out_of_range_is_named_when_the_data_is_loaded():
    with pytest.raises(ValueError, match=r"config\.loss\.weights: index \[12\] is out of range"):
        build(run_config(**{**MULTICLASS, "loss.weights": "ones;w[12]=2"}))


ROOT = Path(__file__).resolve().parents[2]


STORED_RUNS = [ROOT / "docs" / "results" / name for name in ("reproduce_digits", "pneumoniamnist")]


def to_dict_without_distributed(config):
    return {k: v for k, v in to_dict(config).items() if k != "distributed"}


def _stored(run):
    return json.loads((run / "manifest.json").read_text())["config"]


@pytest.mark.parametrize("run", STORED_RUNS, ids=lambda p: p.name)
def test_stored_runs_resume_as_recorded(run):
    config = as_config(_stored(run))
    assert config.loss.name == "log"  # the only loss these runs trained with
    record = to_dict_without_distributed(config)
    assert RunStore(run).check_resumable(record, "images") == _stored(run)


def test_the_stored_default_run_holds_the_default_config():
    default = to_dict(default_config())
    del default["distributed"]
    assert _stored(STORED_RUNS[0]) == default


def test_the_stored_pneumoniamnist_run_holds_its_config_file():
    stored = _stored(STORED_RUNS[1])
    config = load_config_file(ROOT / "experiments" / "configs" / "pneumoniamnist.py")
    config.data.manual_dir = stored["data"]["manual_dir"]  # given on its command line
    assert first_difference(stored, to_dict(config)) == "distributed"  # not recorded


# ----------------------------------------------------------------------------------------------
# Batches larger than the device's memory: trained in parts that fit, stored whole
# ----------------------------------------------------------------------------------------------

#: Two members of the tiny DenseNet in one batch. Batches of 15 images put every member whole on
#: one device whatever the members of a call (iml.training.make_mesh): members agree bit for bit.
_TWO_MEMBERS = {
    "loss.betas": (0.5, 0.9),
    "data.image_size": 8,
    "data.max_examples": 200,
    "data.n_folds": 3,
    "data.n_val_folds": 1,
    "data.rotations": (0,),
    "model.name": "densenet_tiny",
    "train.max_epochs": 1,
    "train.batch_size": 15,
    "plan.checkpoint": False,
}


@pytest.mark.slow
def test_a_memory_budget_trains_a_batch_in_parts_that_fit_and_stores_it_as_trained_whole(
    tmp_path,
):
    from iml.training.memory import estimate_member_memory

    whole = RunStore(tmp_path / "whole")
    run(build(run_config(**_TWO_MEMBERS)), whole, progress=False)
    config = run_config(**_TWO_MEMBERS)
    estimate = estimate_member_memory(config_model(config), 0.5, (8, 8, 1), build(config).train)
    budget = estimate.bytes_for(1) + estimate.member_bytes // 2  # one member fits, two do not
    config.plan.memory_budget_bytes = budget
    parts = RunStore(tmp_path / "parts")
    run(build(config), parts, progress=False)
    assert parts.manifest()["memory"] == {
        "budget_bytes": budget,
        **estimate.record(),
        "members_per_call": 1,
    }
    assert whole.manifest()["memory"] == {"budget_bytes": None, "members_per_call": None}
    (key,) = whole.keys("batches")
    want, got = whole.load_arrays(key), parts.load_arrays(key)
    np.testing.assert_array_equal(got.pop("split_sizes"), [1, 1])
    assert sorted(got) == sorted(want)
    for name, values in want.items():
        np.testing.assert_array_equal(got[name], values, err_msg=name)


def test_a_memory_budget_sizes_only_batches_the_user_does_not_size():
    config = run_config(**{"plan.members_per_batch": 3, "plan.memory_budget_bytes": 10**9})
    both = r"config\.plan\.memory_budget_bytes applies where config\.plan\.members_per_batch"
    with pytest.raises(ValueError, match=rf"^{both} is 0 \(the default\), not 3; set only one"):
        check_config(config)
    with pytest.raises(ValueError, match=r"config\.plan\.memory_budget_bytes"):
        check_config(run_config(**{"plan.memory_budget_bytes": -1}))
