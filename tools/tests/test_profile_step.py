"""Tests for tools.profile_step: the per-fusion profile of a training step."""

from __future__ import annotations

from tools.profile_step import instruction_kinds, main

_HLO = """HloModule m

%fused_conv (p0: f32[1,4,4,2], p1: f32[3,3,2,2]) -> f32[1,4,4,2] {
  %p0 = f32[1,4,4,2]{3,2,1,0} parameter(0)
  %p1 = f32[3,3,2,2]{3,2,1,0} parameter(1)
  ROOT %c = f32[1,4,4,2]{3,2,1,0} convolution(%p0, %p1), dim_labels=b01f_01io->b01f, \
metadata={op_name="jit(step)/layer1/conv"}
}

%fused_add (q0: f32[1,4,4,2]) -> f32[1,4,4,2] {
  %q0 = f32[1,4,4,2]{3,2,1,0} parameter(0)
  ROOT %a = f32[1,4,4,2]{3,2,1,0} add(%q0, %q0)
}

ENTRY %main (x: f32[1,4,4,2], w: f32[3,3,2,2]) -> f32[1,4,4,2] {
  %x = f32[1,4,4,2]{3,2,1,0} parameter(0)
  %w = f32[3,3,2,2]{3,2,1,0} parameter(1)
  %conv_fusion = f32[1,4,4,2]{3,2,1,0} fusion(%x, %w), kind=kCustom, calls=%fused_conv
  ROOT %add_fusion = f32[1,4,4,2]{3,2,1,0} fusion(%conv_fusion), kind=kLoop, calls=%fused_add
}
"""


def test_instruction_kinds_reads_fusions_and_their_layer():
    kinds = instruction_kinds(_HLO)
    assert kinds["conv_fusion"] == ("convolution", "jit(step)/layer1/conv")
    assert kinds["add_fusion"] == ("elementwise", "")
    assert kinds["x"][0] == "parameter"


def test_profile_of_a_small_step_accounts_for_its_thunks(capsys):
    summary = main(["--model", "small", "--batch", "2", "--size", "16", "--steps", "1"])
    assert summary["total_ms"] > 0
    assert abs(sum(summary["by_kind_ms"].values()) - summary["total_ms"]) < 1e-6
    # the thunks are mapped to the compiled HLO: convolutions or matrix products show up by kind
    assert {"convolution", "dot"} & {k for s in summary["by_kind_ms"] for k in s.split(",")}
    assert summary["slowest"] and all(s["kind"] != "runtime" for s in summary["slowest"])
    assert any("denseblock" in s["op"] for s in summary["slowest"])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("{")
