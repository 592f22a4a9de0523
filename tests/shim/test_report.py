"""The legality report: `fwdshim-opt --explain` and `--report-json`, driven in-process, and the
refusal data shared by the error, the `mark` attribute, the table and the JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fwdshim.passes.rules import RULES
from fwdshim.tools.driver import main

LAYER = """\
func.func @layer(%x: tensor<64xf32>, %g: tensor<32xf32>) -> tensor<32xf32> {
  %w = fwd.weight "blk.0.ffn_up.weight" {fwd.remark = "merged_gate_up: a remark off any stage"} : !fwd.weights<32x64, mxfp4>
  %u = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, mxfp4> -> tensor<32xf32>
  %s = fwd.softcap %u cap 3.0e+01 : tensor<32xf32> -> tensor<32xf32>
  %f = fwd.fused glu_act_mul covers [2, 3] ins(%g, %s) : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32> {
  ^bb0(%a: tensor<32xf32>, %b: tensor<32xf32>):
    %t = fwd.silu %a {fwd.remark = "elementwise_chains: a remark inside"} : tensor<32xf32> -> tensor<32xf32>
    %m = fwd.elementwise mul %t, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
    fwd.yield %m : tensor<32xf32>
  }
  %v = fwd.fused row_write covers [4] ins(%f) : (tensor<32xf32>) -> tensor<32xf32> {
  ^bb0(%a: tensor<32xf32>):
    %t = fwd.silu %a : tensor<32xf32> -> tensor<32xf32>
    fwd.yield %t : tensor<32xf32>
  }
  func.return %v : tensor<32xf32>
}
"""

B02 = "a matmul over MXFP4 weights — its kernels dequantize F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and BF16 rows only"
K11 = "a soft-capped tensor (`cap C`) — no kernel caps one"
S13 = "the forward's stages read and write whole buffers"
STAGES = "// stage: the stage number after fusion; covers [..]: a fused op's stages, numbered before fusion"


def run(tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:
    src = tmp_path / "layer.mlir"
    src.write_text(LAYER)
    rc = main([str(src), *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_strict_errors_through_the_driver(tmp_path, capsys) -> None:
    rc, out, err = run(tmp_path, capsys, "-p", "fwd-legalize")
    src = tmp_path / "layer.mlir"
    assert rc == 1 and out == ""
    line = LAYER.splitlines()  # each error: its source line and a caret under the column follow it
    assert err.splitlines() == [
        f"{src}:3:3: error: {B02}", line[2], "  ^",
        f"{src}:4:3: error: {K11}", line[3], "  ^",
        f"{src}:11:3: error: {S13}", line[10], "  ^",
    ]  # fmt: skip


def test_explain_table_follows_the_ir(tmp_path, capsys) -> None:
    rc, out, _ = run(tmp_path, capsys, "-p", "fwd-legalize{mode=mark numerics=two-pass-int8}", "--explain")
    assert rc == 0
    ir, table = out.split("\n// legality report: ", 1)
    assert ir.rstrip().endswith("}") and "fwd.refused" in ir
    rows = [line[3:].split() for line in table.split("// fusion coverage")[0].splitlines()[3:]]
    src = tmp_path / "layer.mlir"
    assert table.splitlines()[0] == "cuda-forward:TwoPassInt8"
    assert table.splitlines()[1] == STAGES
    assert [r[:4] for r in rows] == [
        ["0", "fwd.matmul", f"{src}:3:3", "refused"],
        ["1", "fwd.softcap", f"{src}:4:3", "refused"],
        ["2", "fwd.silu", f"{src}:7:5", "decomposed"],
        ["2", "fwd.silu", f"{src}:7:5", "remark"],
        ["3", "fwd.elementwise", f"{src}:8:5", "decomposed"],
        ["4", "fwd.fused", f"{src}:11:3", "refused"],
        ["fwd.weight", f"{src}:2:3", "remark", "merged_gate_up:"],  # a remark off any stage: no stage number
    ]
    assert table.splitlines()[2][3:].split() == ["stage", "op", "location", "verdict", "class", "or", "reason"]
    assert table.splitlines()[4].endswith(f"refused     {K11}")
    assert table.splitlines()[8].endswith(f"refused     {S13}  covers [4]")  # a fused row: its pre-fusion stages
    assert table.splitlines()[-6:-3] == [  # the fusion coverage closes it: a class off the rule table comes last
        "// fusion coverage: fused ops of each rule's class in the module (nested ones, and any written in the input, included)",
        "// row_write  1",
        "// did not fire: " + ", ".join(r.name for r in RULES),
    ]
    # then the primitives left alone: the parts split from glu_act_mul would chain (no fwd-fuse ran after)
    would = "nothing: fwd-fuse would fuse it (it has not run on this IR, or not since the IR changed)"
    assert table.splitlines()[-3] == "// left unfused: 2 fusable stage(s) (norm, elementwise op, silu, relu, quantize), and why no rule took each"
    assert [ln.split("  ")[:1] + ln.split(f"{src}:")[1:] for ln in table.splitlines()[-2:]] == [
        ["// 2", f"7:5  {would}"],
        ["// 3", f"8:5  {would}"],
    ]


def test_report_json_rows(tmp_path, capsys) -> None:
    path = tmp_path / "report.json"
    rc, out, _ = run(tmp_path, capsys, "-p", "fwd-legalize{mode=mark}", "--report-json", str(path))
    assert rc == 0 and "legality report" not in out
    doc = json.loads(path.read_text())
    src = str(tmp_path / "layer.mlir")
    assert doc["shim"] == "cuda-forward:Dequant"
    assert doc["rows"] == [
        {"stage": 0, "op_name": "fwd.matmul", "location": f"{src}:3:3", "verdict": "refused", "detail": B02, "branch": "B02", "covers": []},
        {"stage": 1, "op_name": "fwd.softcap", "location": f"{src}:4:3", "verdict": "refused", "detail": K11, "branch": "K11", "covers": []},
        {"stage": 2, "op_name": "fwd.silu", "location": f"{src}:7:5", "verdict": "decomposed", "detail": "part of glu_act_mul", "branch": "", "covers": []},
        {"stage": 2, "op_name": "fwd.silu", "location": f"{src}:7:5", "verdict": "remark", "detail": "elementwise_chains: a remark inside", "branch": "", "covers": []},
        {"stage": 3, "op_name": "fwd.elementwise", "location": f"{src}:8:5", "verdict": "decomposed", "detail": "part of glu_act_mul", "branch": "", "covers": []},
        {"stage": 4, "op_name": "fwd.fused", "location": f"{src}:11:3", "verdict": "refused", "detail": S13, "branch": "S13", "covers": [4]},
        {"stage": -1, "op_name": "fwd.weight", "location": f"{src}:2:3", "verdict": "remark", "detail": "merged_gate_up: a remark off any stage", "branch": "", "covers": []},
    ]


def test_json_reasons_equal_the_mark_attributes(tmp_path, capsys) -> None:
    """One refusal, printed as the attribute and as the JSON row."""
    path = tmp_path / "r.json"
    rc, out, _ = run(tmp_path, capsys, "-p", "fwd-legalize{mode=mark}", "--report-json", str(path))
    assert rc == 0
    refused = [r["detail"] for r in json.loads(path.read_text())["rows"] if r["verdict"] == "refused"]
    attrs = [line.split('fwd.refused = "', 1)[1].split('"', 1)[0] for line in out.splitlines() if "fwd.refused" in line]
    # the printer escapes non-ASCII bytes (an em dash prints as three `\XX` escapes): decode them
    decoded = [re.sub(rb"\\([0-9A-F]{2})", lambda m: bytes([int(m.group(1), 16)]), a.encode()).decode() for a in attrs]
    assert decoded == refused == [B02, K11, S13]


def test_explain_without_a_pass_judges_the_ir_as_it_is(tmp_path, capsys) -> None:
    rc, out, _ = run(tmp_path, capsys, "--explain")
    assert rc == 0
    table = out.split("// legality report: cuda-forward:Dequant\n", 1)[1].splitlines()
    assert table[0] == STAGES
    assert table[4].endswith("decomposed  glu_act_mul  covers [2, 3]")  # the fused op's pre-fusion stages
    verdicts = [(ln[3:].split()[1], re.sub(r"  covers \[[0-9, ]*\]$", "", ln).split("  ")[-1].strip()) for ln in table[2:]]
    assert verdicts[:6] == [
        ("fwd.matmul", B02),
        ("fwd.softcap", K11),
        ("fwd.fused", "glu_act_mul"),
        ("fwd.silu", "part of glu_act_mul"),
        ("fwd.elementwise", "part of glu_act_mul"),
        ("fwd.silu", "elementwise_chains: a remark inside"),  # a stage's remarks follow its rows
    ]


def test_explain_numbers_stages_after_fusion_and_fused_rows_cover_the_stages_before(tmp_path) -> None:
    """examples/llama_layer.mlir under int8-act: 19 stages fuse into 15; each fused row says which it took."""
    example = Path(__file__).resolve().parents[2] / "examples" / "llama_layer.mlir"
    report = tmp_path / "r.json"
    out = tmp_path / "out.mlir"
    rc = main([str(example), "-p", "forward-shim{numerics=int8-act}", "--explain", "--report-json", str(report), "-o", str(out)])
    assert rc == 0
    table = out.read_text().split("// legality report: cuda-forward:Int8Act\n", 1)[1].splitlines()
    assert table[0] == STAGES
    assert table[1].split() == ["//", "stage", "op", "location", "verdict", "class", "or", "reason"]
    fused = [(ln.split()[1], ln.split("native kernel  ", 1)[1]) for ln in table[2:17] if "fwd.fused" in ln]
    assert fused == [
        ("0", "norm_quant  covers [0, 1, 2]"),
        ("6", "attn_output_quant  covers [8, 9]"),
        ("8", "add_norm_quant  covers [11, 12, 13, 14]"),
        ("11", "elementwise_chains  covers [17, 18]"),
    ]
    assert [ln.split()[1] for ln in table[2:17]] == [str(i) for i in range(15)]
    # the quantize the pipeline inserted says so, at the line of the value it quantizes (silu·mul's, 39),
    # not at the matmul's (40) that reads it
    assert table[14].split(f"{example}:")[-1] == "39:3  native kernel  quantize, one_word (inserted by fwd-quantize-activations)"
    assert table[17:25] == [
        "// fusion coverage: fused ops of each rule's class in the module (nested ones, and any written in the input, included)",
        "// norm_weight         2  (2 inside another fused op)",
        "// add_norm            1  (1 inside another fused op)",
        "// add_norm_quant      1",
        "// norm_quant          1",
        "// attn_output_quant   1",
        "// elementwise_chains  1",
        "// did not fire: glu_act_mul, merged_gate_up, qk_norm_rope, relu_sqr, elementwise_regions",
    ]
    # what was left alone, and why: no rule takes a quantize of a chain, nor an add whose sum no norm reads
    assert [ln.split(f"{example}:")[-1] for ln in table[25:]] == [
        "// left unfused: 2 fusable stage(s) (norm, elementwise op, silu, relu, quantize), and why no rule took each",
        "39:3  no rule of the table matches it (reads fwd.fused (elementwise_chains); read by fwd.matmul)",
        "41:3  no rule of the table matches it (reads fwd.fused (add_norm_quant), fwd.matmul; read by func.return)",
    ]
    rows = json.loads(report.read_text())["rows"]
    assert [(r["stage"], r["detail"], r["covers"]) for r in rows if r["op_name"] == "fwd.fused"] == [
        (0, "norm_quant", [0, 1, 2]),
        (6, "attn_output_quant", [8, 9]),
        (8, "add_norm_quant", [11, 12, 13, 14]),
        (11, "elementwise_chains", [17, 18]),
    ]
    assert all(r["covers"] == [] for r in rows if r["op_name"] != "fwd.fused")
    fusion = json.loads(report.read_text())["fusion"]
    assert [(f["rule"], f["fired"], f["nested"]) for f in fusion if f["fired"]] == [
        ("norm_weight", 2, 2), ("add_norm", 1, 1), ("add_norm_quant", 1, 0), ("norm_quant", 1, 0),
        ("attn_output_quant", 1, 0), ("elementwise_chains", 1, 0),
    ]
    assert [f["rule"] for f in fusion] == [r.name for r in RULES]
    unfused = json.loads(report.read_text())["unfused"]
    # before fwd-fuse, a quantize that norm_quant takes once norm_weight has fired says so (not "no rule")
    early = tmp_path / "early.json"
    assert main([str(example), "-p", "fwd-quantize-activations{numerics=int8-act}", "--report-json", str(early)]) == 0
    first = json.loads(early.read_text())["unfused"][2]
    assert (first["stage"], first["op_name"], first["rule"]) == (2, "fwd.quantize", None)
    assert first["guard"].startswith("nothing: fwd-fuse would fuse it")
    assert [(u["stage"], u["op_name"], u["rule"], u["location"]) for u in unfused] == [
        (12, "fwd.quantize", None, f"{example}:39:3"), (14, "fwd.elementwise", None, f"{example}:41:3"),
    ]
    assert unfused[0]["guard"].startswith("no rule of the table matches it (reads fwd.fused (elementwise_chains)")
