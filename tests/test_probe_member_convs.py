"""The GPU fault probe: the convolutions it finds, the K-member program it runs, its record."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import probe_member_convs as probe_lib


def test_densenet121_has_66_distinct_convolutions_and_the_logged_ones():
    convs = probe_lib.member_convolutions(probe_lib._model(False, "float32"), 16, 224)
    # 1 stem + 58 dense layers x 2 + 3 transitions; the 3x3 ones repeat within a block
    assert sum(c.count for c in convs) == 1 + 2 * (6 + 12 + 24 + 16) + 3
    assert len(convs) == 66
    by_layer = {c.layer: c for c in convs}
    # the first instructions the H200's failed compiles named (docs/results/gpu_h200)
    assert by_layer["denseblock2/denselayer6/conv1"].lhs_shape == (16, 28, 28, 288)
    assert by_layer["denseblock4/denselayer6/conv1"].lhs_shape == (16, 7, 7, 672)
    assert by_layer["conv0"].rhs_shape == (7, 7, 3, 64)
    assert by_layer["conv0"].window_strides == (2, 2)


def test_member_program_is_grouped_and_equals_each_member_alone():
    conv = probe_lib.member_convolutions(probe_lib._model(True, "float32"), 2, 32)[2]
    members = 3
    x, kernel = probe_lib.member_inputs(conv, members)
    program = probe_lib.member_program(conv)
    groups = [
        e.params["feature_group_count"]
        for e in jax.make_jaxpr(program)(x, kernel).jaxpr.eqns[0].params["jaxpr"].eqns
        if e.primitive.name == "conv_general_dilated"
    ]
    assert members in groups  # vmap batched the members into grouped convolutions
    got = program(x, kernel)
    for m in range(members):

        def apply(xm, km):
            return jax.lax.conv_general_dilated(
                xm, km, conv.window_strides, conv.padding, dimension_numbers=conv.dimension_numbers
            )

        y, pullback = jax.vjp(apply, x[m], kernel[m])
        for batched, alone in zip(got, (y, *pullback(y)), strict=True):
            np.testing.assert_allclose(batched[m], alone, rtol=1e-4, atol=1e-4)


def test_probe_runs_every_convolution_and_records_them(tmp_path, capsys):
    out = tmp_path / "probe.json"
    record = probe_lib.main(["--quick", "--members", "2", "--out", str(out)])
    assert json.loads(out.read_text()) == record
    assert record["failed"] is None and len(record["probed"]) == record["convolutions"] == 6
    assert all(entry["compile_s"] > 0 and entry["run_s"] > 0 for entry in record["probed"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary == {
        "probe": "member_convs",
        "members": 2,
        "dtype": "float32",
        "device": record["device"],
        "convolutions": 6,
        "ran": 6,
        "failed": None,
    }


def test_probe_stops_at_the_first_failure_and_keeps_it(tmp_path, monkeypatch, capsys):
    measured = probe_lib.probe

    def probe(conv, members):
        if conv.layer.endswith("transition1/conv"):
            raise RuntimeError("INTERNAL: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access")
        return measured(conv, members)

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
    unknown = r"layers without a convolution of their own: .*'denseblock9/conv1'"
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
    convs = probe_lib.member_convolutions(probe_lib._model(True, "bfloat16"), 2, 32)
    assert {c.dtype for c in convs} == {str(jnp.dtype(jnp.bfloat16))}
