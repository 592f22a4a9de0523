"""The capability manifest (`fwdshim-opt --print-capabilities`) and the fusion rules left out by name
(`fwd-fuse{disable=…}`, `forward-shim{disable=…}`): issue 42's item 5."""

from __future__ import annotations

import json

import pytest
from xdsl.context import Context

from fwdshim.dialects.fwd import FusedOp
from fwdshim.passes.capabilities import capabilities, capabilities_json, capabilities_table, rule_order
from fwdshim.passes.fuse import FusePass
from fwdshim.passes.pipeline import ForwardShimPass
from fwdshim.tools.driver import (
    FwdOptMain,  # noqa: F401 - the driver's parser must import
    main,
)

# The seed's `supports` answers (forward_shim.rs, `ForwardShim::supports`): written out here, not
# read from fwdshim.shim, so a change of the table or of the manifest's plumbing fails.
SEED_NATIVE = {"norm_weight", "add_norm", "elementwise_chains", "elementwise_regions", "gemm_dequant_inkernel",
               "cuda_graphs", "router_topk", "moe_gate_up_act", "moe_down_combine"}  # fmt: skip
SEED_NATIVE_UNDER_INT8_ACT = {"norm_quant", "add_norm_quant", "attn_output_quant"}
SEED_REFUSED = {
    "relu_sqr": ("S01", "the forward links no ReLU"),
    "flash_decode": ("S02", "the forward attends one query over a cache held in one block's shared scores"),
    "sampling": ("S06", "the forward computes logits and picks no token"),
    "strided_values": ("S13", "the forward's stages read and write whole buffers"),
}


def test_every_class_has_the_seed_answer_under_every_numerics():
    caps = {c.cls: c for c in capabilities()}
    assert len(caps) == 86 and list(caps)[:3] == ["norm_weight", "add_norm", "elementwise_chains"]
    for name, c in caps.items():
        for numerics, kind in c.support.items():
            native = name in SEED_NATIVE or (numerics == "int8-act" and name in SEED_NATIVE_UNDER_INT8_ACT)
            want = "native" if native else ("refuse" if c.branch else "decompose")
            assert kind == want, (name, numerics)
    refused = [c for c in caps.values() if c.support["dequant"] == "refuse"]
    assert len(refused) == 22 and all(c.reason and c.branch.startswith("S") for c in refused)
    for name, (branch, reason) in SEED_REFUSED.items():
        assert (caps[name].branch, caps[name].reason) == (branch, reason)
    assert caps["add_norm"].rule == "add_norm" and caps["gemm_dequant_inkernel"].rule == ""


def test_the_table_counts_and_the_rule_order():
    text = capabilities_table()
    assert text.splitlines()[-3:] == [
        "// dequant: 9 native, 55 decompose, 22 refuse",
        "// int8-act: 12 native, 52 decompose, 22 refuse",
        "// two-pass-int8: 9 native, 55 decompose, 22 refuse",
    ]
    # the forward moves the region and chain rules before add_norm (the seed's `rules()`)
    order = rule_order()["dequant"]
    assert order.index("elementwise_regions") < order.index("elementwise_chains") < order.index("add_norm")
    assert sorted(order) == sorted(rule_order()["int8-act"]) and len(order) == 11


def test_the_cli_prints_the_table_or_json_and_exits(capsys):
    assert main(["--print-capabilities"]) == 0
    assert capsys.readouterr().out == capabilities_table()
    assert main(["--print-capabilities", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == capabilities_json() and got["numerics"] == ["dequant", "int8-act", "two-pass-int8"]
    assert main(["--json"]) == 1
    assert "--json goes with --print-capabilities" in capsys.readouterr().err


ADD_NORM_MUL = """\
func.func @f(%x: tensor<64xf32>, %y: tensor<64xf32>, %z: tensor<64xf32>) -> tensor<64xf32> {
  %s = fwd.elementwise add %x, %y : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %n = fwd.rms_norm %s : tensor<64xf32> -> tensor<64xf32>
  %t = fwd.elementwise mul %n, %z : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %u = fwd.elementwise add %t, %z : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %u : tensor<64xf32>
}
"""


def _classes(module) -> list[str]:
    return [op.class_id.value for op in module.walk() if isinstance(op, FusedOp)]


@pytest.mark.parametrize(
    "disable, fused",
    [((), ["elementwise_chains", "add_norm"]), (("add_norm",), ["elementwise_chains"]),
     (("elementwise_chains",), ["add_norm"]), (("add_norm", "elementwise_chains"), [])],
)  # fmt: skip
def test_a_disabled_rule_leaves_its_stages_unfused(disable, fused):
    from support.ir import parse

    m = parse(ADD_NORM_MUL)
    FusePass(disable=disable).apply(Context(), m)
    assert sorted(_classes(m)) == sorted(fused)
    m = parse(ADD_NORM_MUL)
    ForwardShimPass(disable=disable, mode="mark").apply(Context(), m)
    assert sorted(_classes(m)) == sorted(fused)


def test_an_unknown_rule_is_an_error_naming_the_rules(capsys, tmp_path):
    path = tmp_path / "f.mlir"
    path.write_text(ADD_NORM_MUL)
    for pipeline in ("fwd-fuse{disable=add_norms}", "forward-shim{disable=add_norm,bogus}"):
        assert main([str(path), "-p", pipeline]) == 1
        err = capsys.readouterr().err
        name = pipeline.split("{")[0]
        bad = pipeline.rstrip("}").rsplit(",", 1)[-1].split("=")[-1]
        assert err.startswith(f"fwdshim-opt: error: -p: option `disable` of `{name}` takes rule names (norm_weight, ")
        assert f"not `{bad}`" in err


def test_forward_shim_explain_prints_the_report(capsys, tmp_path):
    path = tmp_path / "f.mlir"
    path.write_text(ADD_NORM_MUL)
    assert main([str(path), "-p", "forward-shim{mode=mark explain=true}"]) == 0
    out = capsys.readouterr()
    assert "// legality report: cuda-forward:Dequant" in out.out + out.err
    assert "add_norm  covers [0, 1]" in out.out + out.err


def test_the_report_says_which_stages_a_disabled_rule_would_have_taken(tmp_path, capsys):
    """A stage a disabled rule would take is `<rule>: not run`, never "fwd-fuse would fuse it" (the
    newcomer trial of 2026-12-07 read that fwd-fuse had not run); the rule is listed as not run, not
    as one that did not fire. Run without `disable`, the module forgets the names."""
    from fwdshim.passes.fuse import unfused_guards
    from fwdshim.shim.contract import forward_shim
    from support.ir import parse

    m = parse(ADD_NORM_MUL)
    FusePass(disable=("add_norm",)).apply(Context(), m)
    rows = unfused_guards(m, forward_shim("dequant"))
    norm = next(r for r in rows if r["op_name"] == "fwd.rms_norm")
    assert (norm["rule"], norm["guard"]) == ("add_norm", "not run: fwd-fuse{disable=add_norm}")
    path = tmp_path / "f.mlir"
    path.write_text(ADD_NORM_MUL)
    assert main([str(path), "-p", "forward-shim{disable=add_norm}", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "// not run (fwd-fuse{disable=...}): add_norm\n" in out and "did not fire: add_norm" not in out
    assert 'fwd.fuse_disabled = ["add_norm"]' in out
    FusePass().apply(Context(), m)
    assert "fwd.fuse_disabled" not in m.attributes and "add_norm" in _classes(m)
