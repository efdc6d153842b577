"""The GPU fault probe: the convolutions it finds, the K-member program it runs, its record."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.benchmarks.ensemble import member_batches, member_states
from iml.training import adam, batch_members, member_train_step
from tools import probe_member_convs as probe_lib


def _signatures(jaxpr) -> list[tuple]:
    """Each ``conv_general_dilated`` of a traced program: operand shapes and parameters."""
    from jax.extend.core import jaxprs_in_params

    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "conv_general_dilated":
            shapes = tuple(tuple(v.aval.shape) for v in eqn.invars)
            found.append((shapes, tuple(sorted(eqn.params.items()))))
        for sub in jaxprs_in_params(eqn.params):
            found += _signatures(sub)
    return found


def test_densenet121_step_has_120_layers_of_convolutions_and_the_logged_ones():
    members = 48
    layers = probe_lib.step_convolutions(probe_lib._model(False, "float32"), members, 16, 224)
    # 1 stem + 58 dense layers x 2 + 3 transitions; the 3x3 ones repeat within a block
    assert sum(layer.count for layer in layers) == 1 + 2 * (6 + 12 + 24 + 16) + 3
    assert len(layers) == 66
    by_layer = {layer.layer: layer for layer in layers}
    # the stem's input is data: the step takes no gradient with respect to it
    assert [c.backward for c in by_layer["conv0"].calls].count(True) == 1
    assert all(len(layer.calls) == 3 for layer in layers if layer.layer != "conv0")
    # the first instructions the H200's failed compiles named (docs/results/gpu_h200), before
    # XLA's GPU rewrites: a kernel gradient over 288 maps at 28 x 28, an input gradient of 672
    shapes = {c.lhs_shape for c in by_layer["denseblock2/denselayer6/conv1"].calls}
    assert (members * 16, 28, 28, 288) in shapes
    shapes = {c.lhs_shape for c in by_layer["denseblock4/denselayer6/conv1"].calls}
    assert (16, 7, 7, members * 128) in shapes
    for layer in layers:
        assert {dict(c.params)["feature_group_count"] for c in layer.calls} == {members}


def test_layer_programs_hold_exactly_the_steps_convolutions():
    model, members = probe_lib._model(True, "float32"), 3
    layers = probe_lib.step_convolutions(model, members, 2, 32)
    probed = []
    for layer in layers:
        operands = probe_lib.layer_inputs(layer)
        jaxpr = jax.make_jaxpr(probe_lib.layer_program(layer))(*operands).jaxpr
        probed += _signatures(jaxpr)
    # the trainer's own step, traced independently
    step = batch_members(functools.partial(member_train_step, model, adam()), "vmap")
    state = jax.eval_shape(lambda: member_states(model, adam(), members, 32, 3))
    rest = jax.eval_shape(lambda: member_batches(members, 2, 32, 0, channels=3))
    trained = _signatures(jax.make_jaxpr(step)(state, *rest).jaxpr)
    assert set(probed) == set(trained)
    assert len(probed) == len(set(probed)) == sum(len(layer.calls) for layer in layers)


def test_layer_program_computes_the_convolutions():
    layer = probe_lib.step_convolutions(probe_lib._model(True, "float32"), 2, 2, 32)[1]
    operands = probe_lib.layer_inputs(layer)
    outputs = probe_lib.layer_program(layer)(*operands)
    for call, out, lhs, rhs in zip(
        layer.calls, outputs, operands[::2], operands[1::2], strict=True
    ):
        p = dict(call.params)
        expected = jax.lax.conv_general_dilated(
            lhs,
            rhs,
            p["window_strides"],
            p["padding"],
            lhs_dilation=p["lhs_dilation"],
            rhs_dilation=p["rhs_dilation"],
            dimension_numbers=p["dimension_numbers"],
            feature_group_count=p["feature_group_count"],
            batch_group_count=p["batch_group_count"],
        )
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_probe_runs_every_layer_and_records_it(tmp_path, capsys):
    out = tmp_path / "probe.json"
    record = probe_lib.main(["--quick", "--members", "2", "--out", str(out)])
    assert json.loads(out.read_text()) == record
    assert record["failed"] is None and len(record["probed"]) == record["layers"] == 6
    assert record["convolutions"] == sum(len(e["convolutions"]) for e in record["probed"]) == 17
    assert all(entry["compile_s"] > 0 and entry["run_s"] > 0 for entry in record["probed"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary == {
        "probe": "member_convs",
        "members": 2,
        "dtype": "float32",
        "device": record["device"],
        "layers": 6,
        "convolutions": 17,
        "ran": 6,
        "failed": None,
    }


def test_probe_stops_at_the_first_failure_and_keeps_it(tmp_path, monkeypatch, capsys):
    measured = probe_lib.probe

    def probe(layer):
        if layer.layer.endswith("transition1/conv"):
            raise RuntimeError("INTERNAL: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access")
        return measured(layer)

    monkeypatch.setattr(probe_lib, "probe", probe)
    out = tmp_path / "probe.json"
    argv = ["--quick", "--members", "2", "--first", "denseblock1/denselayer1/conv1"]
    with pytest.raises(SystemExit) as stop:
        probe_lib.main([*argv, "--out", str(out)])
    assert stop.value.code == 1
    record = json.loads(out.read_text())
    assert [e["layer"] for e in record["probed"]] == [
        "denseblock1/denselayer1/conv1",  # --first goes first
        "conv0",
        "denseblock1/denselayer1/conv2",
    ]
    assert record["failed"]["layer"] == "transition1/conv"
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in record["failed"]["error"]
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["failed"] == (
        "transition1/conv"
    )


def test_probe_refuses_a_layer_without_a_convolution(tmp_path):
    unknown = r"layers without convolutions of their own: .*'denseblock9/conv1'"
    for flag in ("--first", "--only"):
        with pytest.raises(ValueError, match=unknown):
            probe_lib.main(["--quick", flag, "denseblock9/conv1", "--out", str(tmp_path / "p")])


def test_probe_only_runs_the_layers_named(tmp_path, capsys):
    out = tmp_path / "probe.json"
    layers = "transition1/conv,conv0"
    probe_lib.main(["--quick", "--members", "2", "--only", layers, "--out", str(out)])
    assert [e["layer"] for e in json.loads(out.read_text())["probed"]] == layers.split(",")
    with pytest.raises(SystemExit):
        probe_lib.main(["--quick", "--only", "conv0", "--first", "conv0", "--out", str(out)])
    assert "--only and --first exclude each other" in capsys.readouterr().err


def test_probe_traces_bfloat16_convolutions():
    layers = probe_lib.step_convolutions(probe_lib._model(True, "bfloat16"), 2, 2, 32)
    assert {c.dtype for layer in layers for c in layer.calls} == {str(jnp.dtype(jnp.bfloat16))}
