"""fwdshim-opt and the passes against bad and odd input, as an adversarial user writes it.

Each case is a defect once found: the input, and what fwdshim-opt must answer — one located error
(`file:line:col: error: ...`, then its source line and a caret) or one clear line, exit status 1, never a traceback, never a hang, never
an op silently dropped — or the IR a pass must leave.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fwdshim.tools.driver import main

T576 = "tensor<576xf32>"


def opt(tmp_path: Path, text: str, *args: str, capsys) -> tuple[int, str, str]:
    """Run `fwdshim-opt FILE ARGS` in this process on `text` written to `t.mlir`."""
    src = tmp_path / "t.mlir"
    src.write_text(text)
    capsys.readouterr()
    rc = main([str(src), *args])
    out, err = capsys.readouterr()
    return rc, out, err.replace(str(src), "t.mlir")


def func(body: str, args: str = f"%x: {T576}, %y: {T576}", ret: str = "%s", ty: str = T576) -> str:
    return f"func.func @f({args}) -> {ty} {{\n{body}\n  func.return {ret} : {ty}\n}}\n"


# ---------------------------------------------------------------------------------------------
# parsing and verifying: located errors


def test_truncated_region_names_the_end_of_input(tmp_path, capsys):
    text = f"func.func @f(%x: {T576}) -> {T576} {{\n  %s = fwd.silu %x : {T576} -> {T576}\n"
    rc, out, err = opt(tmp_path, text, capsys=capsys)
    assert rc == 1 and out == ""
    assert err.splitlines()[0] == "t.mlir:3:1: error: unexpected end of input: expected `}` to close the region"


def test_undefined_value_is_reported_at_its_use(tmp_path, capsys):
    rc, _, err = opt(tmp_path, func(f"  %s = fwd.silu %nope : {T576} -> {T576}"), capsys=capsys)
    assert rc == 1
    assert err.splitlines()[0] == "t.mlir:2:17: error: use of undefined value %nope"


@pytest.mark.parametrize(
    "body,line,name",
    [
        (f"  %s = fwd.silu %s : {T576} -> {T576}", 2, "%s"),
        (f"  %s = fwd.silu %t : {T576} -> {T576}\n  %t = fwd.silu %s : {T576} -> {T576}", 2, "%t"),
    ],
    ids=["self", "cycle"],
)
def test_use_before_definition_is_an_error_not_a_hang(tmp_path, capsys, body, line, name):
    """xDSL checks no dominance; `fwd-fuse` went round such a cycle forever."""
    rc, out, err = opt(tmp_path, func(body), "-p", "fwd-fuse", capsys=capsys)
    assert (rc, out) == (1, "")
    assert err.splitlines() == [f"t.mlir:{line}:3: error: fwd.silu reads {name} before it is defined", body.splitlines()[0], "  ^"]


def test_value_of_another_branch_is_an_error(tmp_path, capsys):
    """The parser scopes names per region; IR a pass leaves is checked by `verify_located`."""
    from xdsl.utils.exceptions import VerifyException

    from fwdshim.diagnostics import LocatingParser, verify_located
    from fwdshim.dialects.fwd import SiluOp
    from fwdshim.tools.driver import FwdOptMain

    text = f"""func.func @f(%x: {T576}, %c: i1) -> {T576} {{
  %r = scf.if %c -> ({T576}) {{
    %a = fwd.silu %x : {T576} -> {T576}
    scf.yield %a : {T576}
  }} else {{
    %b = fwd.silu %a : {T576} -> {T576}
    scf.yield %b : {T576}
  }}
  func.return %r : {T576}
}}
"""
    rc, _, err = opt(tmp_path, text, capsys=capsys)
    assert rc == 1 and err.splitlines()[0] == "t.mlir:6:19: error: use of undefined value %a"
    ctx = FwdOptMain(args=[]).ctx
    module = LocatingParser(ctx, text.replace("fwd.silu %a", "fwd.silu %x"), "t.mlir").parse_module()
    verify_located(module)
    a, b = [op for op in module.walk() if isinstance(op, SiluOp)]
    b.operands = [a.result]
    with pytest.raises(VerifyException, match="^t.mlir:6:5: error: fwd.silu reads %a, defined in a region that does not enclose it$"):
        verify_located(module)


def test_symbol_redefinition_names_the_second_definition(tmp_path, capsys):
    one = f"func.func @f(%x: {T576}) -> {T576} {{\n  func.return %x : {T576}\n}}\n"
    rc, _, err = opt(tmp_path, one + one, capsys=capsys)
    assert rc == 1
    assert err.splitlines() == ['t.mlir:4:1: error: Redefinition of symbol "f"', one.splitlines()[0], "^"]


# ---------------------------------------------------------------------------------------------
# the driver's own errors


@pytest.mark.parametrize(
    "spec,col,message",
    [
        ("fwd-legalize{", 14, "expected argument name here"),
        ("fwd-legalize{mode=}", 19, "unknown argument value, wrap argument in quotes to pass arbitrary string values"),
        ("fwd-legalize,,fwd-fuse", 14, "expected pass name here"),
        # a comma between options: the caret on the comma, which the message names (it pointed past it)
        ("fwd-legalize{numerics=int8-act,mode=mark}", 31, "pass options are separated by spaces, not commas: 'pass{a=1 b=2}'"),
        ("fwd-legalize{numerics=int8-act, mode=mark}", 31, "pass options are separated by spaces, not commas: 'pass{a=1 b=2}'"),
        # a trailing comma: xDSL ran `cse` alone; a comma in a list value is not one between options
        ("fwd-legalize,", 13, "expected a pass name after the last ','"),
        ("fwd-legalize, ", 13, "expected a pass name after the last ','"),
    ],
)
def test_malformed_pipeline_is_one_error(tmp_path, capsys, spec, col, message):
    """xDSL raises these as a BaseException, which went past every handler as a traceback."""
    rc, out, err = opt(tmp_path, func(f"  %s = fwd.silu %x : {T576} -> {T576}"), "-p", spec, capsys=capsys)
    assert (rc, out) == (1, "")
    lines = err.splitlines()
    assert lines[0] == f"fwdshim-opt: error: -p: column {col}: {message}"
    assert lines[1] == f"  {spec}"
    assert lines[2] == "  " + " " * (col - 1) + "^"


def test_a_list_value_is_named_as_a_list_not_a_comma_between_options(tmp_path, capsys):
    rc, out, err = opt(tmp_path, func(f"  %s = fwd.silu %x : {T576} -> {T576}"), "-p", "fwd-legalize{numerics=[1,2]}", capsys=capsys)
    assert (rc, out) == (1, "")
    assert err.splitlines()[:3] == ["fwdshim-opt: error: -p: column 23: option `numerics` of `fwd-legalize` takes one value, "
                                    "not the list `[1,2]`", "  fwd-legalize{numerics=[1,2]}", "  " + " " * 22 + "^^^^^"]  # fmt: skip


def test_report_json_write_error_names_the_file(tmp_path, capsys):
    """A write that fails at close (no filename in the OSError) printed `None: ...`."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    rc, out, err = opt(tmp_path, func(f"  %s = fwd.silu %x : {T576} -> {T576}"), "--report-json", "/dev/full", capsys=capsys)
    assert rc == 1
    assert err.strip() == "fwdshim-opt: error: --report-json /dev/full: no space left on device"


def test_report_json_with_an_empty_name_is_an_error(tmp_path, capsys):
    rc, out, err = opt(tmp_path, func(f"  %s = fwd.silu %x : {T576} -> {T576}"), "--report-json", "", capsys=capsys)
    assert (rc, out, err.strip()) == (1, "", "fwdshim-opt: error: --report-json needs a file name")


def test_report_json_dash_is_stdout_with_the_ir_in_a_file(tmp_path, capsys, monkeypatch):
    """`--report-json -` writes the JSON report to stdout (it had made a file named `-`) when the IR
    goes to a file; with the IR on stdout too it is refused, naming `-o FILE`."""
    import json

    monkeypatch.chdir(tmp_path)
    src = func(f"  %s = fwd.silu %x : {T576} -> {T576}")
    rc, out, err = opt(tmp_path, src, "-p", "forward-shim", "--report-json", "-", "-o", str(tmp_path / "o.mlir"), capsys=capsys)
    doc = json.loads(out)
    assert (rc, err) == (0, "") and doc["rows"][0]["op_name"] == "fwd.silu" and not (tmp_path / "-").exists()
    assert "fwd.silu" in (tmp_path / "o.mlir").read_text()
    for more in ([], ["-o", "-"]):
        rc, out, err = opt(tmp_path, src, "-p", "forward-shim", "--report-json", "-", *more, capsys=capsys)
        assert (rc, out) == (1, "") and err.strip() == (
            "fwdshim-opt: error: --report-json - writes the report to stdout, where the IR goes too: give the IR a file (-o FILE)"
        )
        assert not (tmp_path / "-").exists()


SOFTCAP = func(
    f"  %a = fwd.elementwise add %x, %y : {T576}, {T576} -> {T576}\n"
    f"  %n = fwd.rms_norm %a : {T576} -> {T576}\n"
    f"  %s = fwd.softcap %n cap 3.0 : {T576} -> {T576}"
)
K11 = "a soft-capped tensor (`cap C`) — no kernel caps one"


def test_failed_pipeline_still_writes_the_report(tmp_path, capsys):
    """--report-json and --explain are wanted most when legalization fails; they wrote nothing."""
    report = tmp_path / "r.json"
    rc, out, err = opt(tmp_path, SOFTCAP, "-p", "forward-shim", "--explain", "--report-json", str(report), capsys=capsys)
    assert (rc, out) == (1, "")
    rows = json.loads(report.read_text())["rows"]
    assert [(r["op_name"], r["verdict"], r["detail"]) for r in rows] == [
        ("fwd.fused", "native kernel", "add_norm"),
        ("fwd.softcap", "refused", K11),
    ]
    lines = err.splitlines()
    assert lines[0] == "// legality report: cuda-forward:Dequant"
    assert lines[-3:] == [f"t.mlir:4:3: error: {K11}", SOFTCAP.splitlines()[3], "  ^"]
    assert any(line.startswith("// 1 ") and line.endswith(f"refused        {K11}") for line in lines)


def test_no_traceback_as_a_user_runs_it(tmp_path):
    """The same malformed pipeline through the installed script: one error, no traceback."""
    src = tmp_path / "t.mlir"
    src.write_text(func(f"  %s = fwd.silu %x : {T576} -> {T576}"))
    exe = Path(sys.executable).parent / "fwdshim-opt"
    cmd = [str(exe)] if exe.exists() else ["fwdshim-opt"]
    p = subprocess.run([*cmd, str(src), "-p", "fwd-legalize{"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("fwdshim-opt: error: -p: column 14: expected argument name here")


# ---------------------------------------------------------------------------------------------
# fwd-quantize-activations


SCF = f"""func.func @f(%x: {T576}, %y: {T576}, %c: i1) -> {T576} {{
  %w = fwd.weight "w" : !fwd.weights<576x576, q8_0>
  %s = fwd.elementwise add %x, %y : {T576}, {T576} -> {T576}
  %r = scf.if %c -> ({T576}) {{
    %m = fwd.matmul %s, %w : {T576}, !fwd.weights<576x576, q8_0> -> {T576}
    scf.yield %m : {T576}
  }} else {{
    %m2 = fwd.matmul %s, %w : {T576}, !fwd.weights<576x576, q8_0> -> {T576}
    scf.yield %m2 : {T576}
  }}
  func.return %r : {T576}
}}
"""


def test_shared_quantize_is_defined_where_every_consumer_reads_it(tmp_path, capsys):
    """Both arms read one quantize of %s: it was put in the first arm, and the second arm read a
    value its region does not see."""
    rc, out, err = opt(tmp_path, SCF, "-p", "fwd-quantize-activations{numerics=int8-act}", capsys=capsys)
    assert (rc, err) == (0, "")
    lines = [line.strip() for line in out.splitlines()]
    q = lines.index(f"%s_q = fwd.quantize %s one_word : {T576} -> !fwd.qact<576, one_word>")
    assert lines[q - 1].startswith("%s = fwd.elementwise add") and lines[q + 1].startswith("%r = scf.if")
    assert sum(line.startswith("%m") and "fwd.matmul %s_q, %w" in line for line in lines) == 2


def test_an_existing_quantize_in_another_arm_is_not_reused(tmp_path, capsys):
    text = SCF.replace(
        f"    %m = fwd.matmul %s, %w : {T576}",
        f"    %q0 = fwd.quantize %s one_word : {T576} -> !fwd.qact<576, one_word>\n    %m = fwd.matmul %q0, %w : !fwd.qact<576, one_word>",
    )
    rc, out, err = opt(tmp_path, text, "-p", "fwd-quantize-activations{numerics=int8-act}", capsys=capsys)
    assert (rc, err) == (0, "")
    assert "%m2 = fwd.matmul %s_q, %w" in out and "%m = fwd.matmul %q0, %w" in out


# ---------------------------------------------------------------------------------------------
# the dialect (more in filecheck_tests/adversarial/invalid_values.mlir)


CHAIN = (
    f"func.func @f(%x: {T576}) -> {T576} {{\n"
    f"  %f = fwd.fused CLASS covers [0] ins(%x) : ({T576}) -> {T576} {{\n"
    f"  ^bb0(%a: {T576}):\n    %s = fwd.silu %a : {T576} -> {T576}\n    fwd.yield %s : {T576}\n  }}\n"
    f"  func.return %f : {T576}\n}}\n"
)


def test_fused_class_keyword_error_reads_as_one_message(tmp_path, capsys):
    """It read "identifier expectedexpected a `class` keyword"."""
    rc, _, err = opt(tmp_path, CHAIN.replace("CLASS", "[0]"), capsys=capsys)
    assert rc == 1 and err.splitlines()[0] == "t.mlir:2:18: error: expected a `class` keyword"


def test_fused_class_prints_and_parses_as_a_string_where_not_a_keyword(tmp_path, capsys):
    """The printer writes a class that is no identifier as a string literal; the parser read only
    identifiers, so --disable-verify output did not parse back."""
    from xdsl.ir import Attribute

    post_init = Attribute.__post_init__
    rc, out, err = opt(tmp_path, CHAIN.replace("CLASS", '"two words"'), "--disable-verify", capsys=capsys)
    # xDSL's --disable-verify swaps Attribute.__post_init__ for the process: main() puts it back
    assert Attribute.__post_init__ is post_init
    assert (rc, err) == (0, "") and 'fwd.fused "two words" covers [0]' in out
    rc, out2, err = opt(tmp_path, out, "--disable-verify", capsys=capsys)
    assert (rc, err, out2) == (0, "", out)
    rc, _, err = opt(tmp_path, out, capsys=capsys)
    assert rc == 1 and err.splitlines() == ["t.mlir:3:5: error: unknown fused class `two words`", out.splitlines()[2], "    ^"]


def test_empty_quantized_activation_type(tmp_path, capsys):
    rc, _, err = opt(tmp_path, '"test.op"() : () -> !fwd.qact<0, one_word>\n', "--allow-unregistered-dialect", capsys=capsys)
    assert rc == 1
    assert err.splitlines()[0] == "t.mlir:1:1: error: a quantized activation holds a positive number of values"


def test_weights_where_a_stage_reads_them_still_verify(tmp_path, capsys):
    """The weights rule leaves matmul `w`, the mixture's matrices, fused-op operands and the ops the
    forward never computes alone."""
    w, e = "!fwd.weights<4x64, q8_0>", "!fwd.weights<4x128x64, q8_0>"
    d = "!fwd.weights<4x64x128, q8_0>"
    text = f"""func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {{
  %r = fwd.weight "r" : {w}
  %g = fwd.weight "g" : {e}
  %d = fwd.weight "d" : {d}
  %m = fwd.moe %x, %r, %g, %g, %d n_expert 4 top_k 2 renormalize act swiglu scoring softmax : tensor<64xf32>, {w}, {e}, {e}, {d} -> tensor<64xf32>
  %p = fwd.matmul %m, %r : tensor<64xf32>, {w} -> tensor<4xf32>
  %h = fwd.head_matmul %x, %r : (tensor<64xf32>, {w}) -> tensor<4xf32>
  %f = fwd.fused gemv_quant covers [3] ins(%m, %r) : (tensor<64xf32>, {w}) -> tensor<4xf32> {{
  ^bb0(%a: tensor<64xf32>, %b: {w}):
    %y = fwd.matmul %a, %b : tensor<64xf32>, {w} -> tensor<4xf32>
    fwd.yield %y : tensor<4xf32>
  }}
  func.return %m : tensor<64xf32>
}}
"""
    rc, out, err = opt(tmp_path, text, capsys=capsys)
    assert (rc, err) == (0, "")
    assert out.count("fwd.weights<4x64, q8_0>") == 7


# ---------------------------------------------------------------------------------------------
# the legality report


LLAMA = Path(__file__).resolve().parents[2] / "examples" / "llama_layer.mlir"


def test_explain_judges_by_the_numerics_the_passes_ran_with(tmp_path, capsys):
    """After `fwd-fuse{numerics=int8-act}` (no legalization yet) the table judged by Dequant: it
    called the int8-act epilogues decomposed and every quantize refused."""
    report = tmp_path / "r.json"
    spec = "fwd-quantize-activations{numerics=int8-act},fwd-fuse{numerics=int8-act}"
    rc, out, err = opt(tmp_path, LLAMA.read_text(), "-p", spec, "--explain", "--report-json", str(report), capsys=capsys)
    assert (rc, err) == (0, "")
    doc = json.loads(report.read_text())
    assert doc["shim"] == "cuda-forward:Int8Act"
    assert {r["verdict"] for r in doc["rows"]} == {"native kernel"}
    assert [r["detail"] for r in doc["rows"] if r["op_name"] == "fwd.fused"] == [
        "norm_quant", "attn_output_quant", "add_norm_quant", "elementwise_chains",
    ]  # fmt: skip
    assert "// legality report: cuda-forward:Int8Act" in out.splitlines()


@pytest.mark.parametrize(
    "body,numerics,want",
    [
        (f"  %s = fwd.silu %x : {T576} -> {T576}", "dequant", None),
        ("  %h = fwd.silu %x : tensor<576xf16> -> tensor<576xf16>\n  %s = fwd.silu %y : {T576} -> {T576}", "dequant", ("fwd.silu", "f16")),
        ("  %q = fwd.quantize %x one_word : tensor<576xf16> -> !fwd.qact<576, one_word>\n  %s = fwd.silu %y : {T576} -> {T576}", "int8-act", ("fwd.quantize", "f16")),
        ("  %q = fwd.elementwise max %x, %x : tensor<576xf16>, tensor<576xf16> -> tensor<576xi8>\n  %s = fwd.silu %y : {T576} -> {T576}", "dequant", ("fwd.elementwise", "f16")),
    ],
    ids=["f32", "silu_f16", "quantize_f16", "max_to_i8"],
)
def test_non_f32_tensors_are_refused_not_native(tmp_path, capsys, body, numerics, want):
    """DESIGN.md §3: f32 element types are a limit of the kernels, refused by legality; the report
    called them native kernels (only 64-bit values were refused) and the lowering then failed."""
    text = func(body.format(T576=T576), args="%x: tensor<576xf16>, %y: tensor<576xf32>" if "f16" in body else f"%x: {T576}, %y: {T576}")
    report = tmp_path / "r.json"
    rc, _, err = opt(tmp_path, text, "-p", f"fwd-legalize{{numerics={numerics} mode=mark}}", "--report-json", str(report), capsys=capsys)
    assert (rc, err) == (0, "")
    refused = [(r["op_name"], r["branch"], r["detail"]) for r in json.loads(report.read_text())["rows"] if r["verdict"] == "refused"]
    if want is None:
        assert refused == []
    else:
        op, ty = want
        assert refused == [(op, "B05", f"an op over {ty} tensors — the forward's kernels read and write f32 buffers")]


def test_an_unlocated_refusal_names_its_result():
    """Parsed by stock xdsl-opt (no locations), a strict error read `<unknown>: error: ...` and said
    nothing of which op."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func
    from xdsl.parser import Parser

    from fwdshim.dialects.fwd import Fwd
    from fwdshim.passes.legalize import legalize
    from fwdshim.shim.forward import ForwardShim

    ctx = Context()
    for d in (Builtin, Func, Fwd):
        ctx.load_dialect(d)
    module = Parser(ctx, SOFTCAP).parse_module()
    refused = legalize(ForwardShim(), module)
    assert [r.error_line() for _, r in refused] == [f"<unknown> %s: error: {K11}"]


def test_a_stale_refusal_mark_is_dropped_where_the_op_now_fits(tmp_path, capsys):
    """Marked under dequant (every quantize refused), legalized again under int8-act: the marks
    stayed, the report said native, and fwd-lower-numba refused the marked ops."""
    rc, marked, _ = opt(tmp_path, LLAMA.read_text(), "-p", "forward-shim{numerics=int8-act},fwd-legalize{mode=mark}", capsys=capsys)
    assert rc == 0 and marked.count("fwd.refused") == 4
    rc, out, err = opt(tmp_path, marked, "-p", "fwd-legalize{numerics=int8-act mode=mark}", capsys=capsys)
    assert (rc, err) == (0, "") and "fwd.refused" not in out
    rc, out, err = opt(tmp_path, marked, "-p", "fwd-legalize{numerics=dequant mode=mark}", capsys=capsys)
    assert (rc, err) == (0, "") and out.count("fwd.refused") == 4


# ---------------------------------------------------------------------------------------------
# scale: a many-layer step


def _parse(text: str):
    from fwdshim.diagnostics import LocatingParser
    from fwdshim.tools.driver import FwdOptMain

    return LocatingParser(FwdOptMain(args=[]).ctx, text, "t.mlir").parse_module()


def test_program_order_costs_the_distance_not_the_block():
    """Sorting by `Block.get_operation_index` (a scan of the block) made fwd-fuse quadratic: 120
    Llama layers took 25 s. The fusion and quantize passes order ops by `comes_before` now."""
    from xdsl.ir import Block

    from fwdshim.classes import Q8MatKind
    from fwdshim.passes.fuse import fuse_module
    from fwdshim.passes.ir_order import comes_before, in_program_order
    from fwdshim.passes.quantize_activations import quantize_activations
    from fwdshim.shim.forward import ForwardShim

    module = _parse(LLAMA.read_text())
    ops = list(module.body.block.first_op.body.block.ops)  # type: ignore[union-attr]
    assert [comes_before(a, b) for a, b in [(ops[0], ops[5]), (ops[5], ops[0]), (ops[3], ops[3])]] == [True, False, False]
    assert in_program_order([ops[9], ops[2], ops[20], ops[0]]) == [ops[0], ops[2], ops[9], ops[20]]

    def scan(self, op):
        raise AssertionError("a block scanned for an op's index")

    original = Block.get_operation_index
    Block.get_operation_index = scan  # type: ignore[method-assign]
    try:
        shim = ForwardShim(Q8MatKind.INT8_ACT)
        quantize_activations(module, shim)
        fuse_module(module, shim)
    finally:
        Block.get_operation_index = original  # type: ignore[method-assign]
    assert sum(1 for op in module.walk() if op.name == "fwd.fused") >= 4


def test_report_json_of_split_input_holds_every_chunk(tmp_path, capsys):
    """Each chunk overwrote the file: only the last chunk's report was left."""
    report = tmp_path / "r.json"
    chunk = func("  %s = fwd.softcap %x cap 3.0 : {T} -> {T}".replace("{T}", T576))
    text = chunk + "\n// -----\n\n" + func(f"  %s = fwd.silu %x : {T576} -> {T576}") + "\n// -----\n\n" + chunk
    rc, out, err = opt(tmp_path, text, "--split-input-file", "-p", "fwd-legalize{mode=mark}", "--report-json", str(report), capsys=capsys)
    assert (rc, err) == (0, "")
    docs = json.loads(report.read_text())
    assert [[(Path(r["location"]).name, r["verdict"]) for r in d["rows"]] for d in docs] == [
        [("t.mlir:2:3", "refused")], [("t.mlir:9:3", "native kernel")], [("t.mlir:16:3", "refused")],
    ]  # fmt: skip


@pytest.mark.parametrize(
    "args,message",
    [
        (["--bogus-flag"], "unrecognized arguments: --bogus-flag"),
        (["-t", "bogus"], "argument -t/--target: invalid choice: 'bogus'"),
        (["-p"], "argument -p/--passes: expected one argument"),
    ],
)
def test_a_bad_command_line_is_one_line_and_status_1(tmp_path, capsys, args, message):
    """argparse printed its whole usage and exited 2."""
    rc, out, err = opt(tmp_path, func(f"  %s = fwd.silu %x : {T576} -> {T576}"), *args, capsys=capsys)
    assert (rc, out) == (1, "")
    assert len(err.splitlines()) == 1
    assert err.startswith(f"fwdshim-opt: error: {message}") and err.rstrip().endswith("(fwdshim-opt --help lists the options)")


def test_an_internal_error_is_one_line_unless_asked(tmp_path, capsys, monkeypatch):
    """IR that --disable-verify let through (an unknown fused class) crashed the passes with a
    traceback; now one line, and the traceback on request."""
    monkeypatch.delenv("FWDSHIM_TRACEBACK", raising=False)
    text = CHAIN.replace("CLASS", "silu")
    rc, out, err = opt(tmp_path, text, "--disable-verify", "-p", "forward-shim", capsys=capsys)
    assert (rc, out) == (1, "")
    assert err.strip() == (
        "fwdshim-opt: internal error: AssertionError: verified "
        "(the input was not verified: --disable-verify; FWDSHIM_TRACEBACK=1 shows where)"
    )
    monkeypatch.setenv("FWDSHIM_TRACEBACK", "1")
    with pytest.raises(AssertionError):
        opt(tmp_path, text, "--disable-verify", "-p", "forward-shim", capsys=capsys)


@pytest.mark.parametrize("spec, want", [
    ("forward-shim{numerics=int9}", "-p: option `numerics` of `forward-shim` takes dequant, int8-act or two-pass-int8, not `int9`"),
    ('fwd-legalize{numerics="int9"}', "-p: option `numerics` of `fwd-legalize` takes dequant, int8-act or two-pass-int8, not `int9`"),
    ("fwd-fuse,fwd-legalize{mode=lax}", "-p: option `mode` of `fwd-legalize` takes strict or mark, not `lax`"),
    ("forward-shim{numerics}", "-p: option `numerics` of `forward-shim` needs a value (`numerics=...`)"),
])  # fmt: skip
def test_a_pass_rejecting_its_option_value_is_named_like_xdsls_rejections(tmp_path, capsys, spec, want):
    """A value the pass itself checks (numerics, legalize's mode) reads as the values xDSL's option
    parser rejects (`-p: option `o` of `pass` takes ..., not `v``); it lacked the `-p:` and the pass."""
    rc, out, err = opt(tmp_path, func(f"  %s = fwd.silu %x : {T576} -> {T576}"), "-p", spec, capsys=capsys)
    assert (rc, out, err.strip()) == (1, "", f"fwdshim-opt: error: {want}")


def test_outputs_never_destroy_the_input_or_an_earlier_file(tmp_path, capsys):
    """`-o` naming the input (or a link to it) writes the transformed IR over it (it emptied the input
    before reading it, and then printed an empty module); a failed run leaves `-o`'s file as it was
    (it left it empty); `--report-json` naming the input or the `-o` file is refused (the input became
    the JSON; the report was lost), and a file that is not a report is never removed."""
    src = tmp_path / "t.mlir"
    src.write_text(func(f"  %s = fwd.silu %x : {T576} -> {T576}"))
    capsys.readouterr()
    assert main([str(src), "-p", "forward-shim", "-o", str(src)]) == 0
    text = src.read_text()
    assert "fwd.silu" in text and "fwd.numerics" in text
    link = tmp_path / "link.mlir"
    link.symlink_to(src)
    assert main([str(link), "-o", str(link)]) == 0 and link.is_symlink() and "fwd.silu" in src.read_text()
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f( {\n")
    out = tmp_path / "out.mlir"
    out.write_text("precious\n")
    assert main([str(bad), "-o", str(out)]) == 1 and out.read_text() == "precious\n"
    assert main([str(bad), "-o", str(bad)]) == 1 and bad.read_text() == "func.func @f( {\n"
    capsys.readouterr()
    for report, why in ((src, "is the input file"), (out, f"is also -o {out}")):
        before = report.read_text()
        assert main([str(src), "-p", "forward-shim", "-o", str(out), "--report-json", str(report)]) == 1
        assert capsys.readouterr().err == f"fwdshim-opt: error: --report-json {report}: {why} (give the report another name)\n"
        assert report.read_text() == before
    notes = tmp_path / "notes.txt"
    notes.write_text("x\n")
    assert main([str(bad), "--report-json", str(notes)]) == 1 and notes.read_text() == "x\n"


@pytest.mark.parametrize("target, why", [("llvm", "NotImplementedError: Conversion not implemented for op: func.func"), ("x86-asm", "AssertionError")])
def test_xdsls_targets_refuse_fwd_ir_in_one_line(tmp_path, capsys, target, why):
    """xDSL's printers (`-t llvm`, the assembly targets) know none of fwd's ops: one error naming the
    target and the targets that print fwd IR (it was an internal error asking for a bug report, or
    an op dumped over thirty lines)."""
    rc, out, err = opt(tmp_path, func(f"  %s = fwd.silu %x : {T576} -> {T576}"), "-t", target, capsys=capsys)
    assert (rc, out) == (1, "")
    assert err == f"fwdshim-opt: error: -t {target}: xDSL's `{target}` target cannot print this IR ({why}); fwd IR prints as mlir or numba\n"


def test_a_step_with_a_branch_is_a_located_plan_error(tmp_path, capsys):
    """A decode step of two blocks (a `cf.br`) is refused at the branch by the launch plan (it was
    xDSL's `'block' property ... single-block regions`, with no location)."""
    text = (f"func.func @f(%x: {T576}) -> {T576} {{\n  %y = fwd.silu %x : {T576} -> {T576}\n"
            f"  cf.br ^bb1(%y : {T576})\n^bb1(%a: {T576}):\n  %z = fwd.silu %a : {T576} -> {T576}\n"
            f"  func.return %z : {T576}\n}}\n")  # fmt: skip
    for args in (("-p", "forward-shim,fwd-lower-numba"), ("-t", "numba{plan_only=true}")):
        rc, out, err = opt(tmp_path, text, *args, capsys=capsys)
        assert (rc, out) == (1, "")
        assert err == ("t.mlir:3:3: error: cf.br in a decode step of 2 blocks — the launch plan lowers one straight-line block\n"
                       f"  cf.br ^bb1(%y : {T576})\n  ^\n")


@pytest.mark.parametrize("eps, said", [("-1.0e-05", "-1e-05"), ("-0.3", "-0.3"), ("-3.4e+38", "-3.4e+38")])
def test_a_negative_eps_is_said_as_written(tmp_path, capsys, eps, said):
    """A norm's negative eps is a located verify error that gives the value as its f32 reads shortest
    (it said `-9.999999747378752e-06` for `-1.0e-05`)."""
    rc, out, err = opt(tmp_path, func(f"  %s = fwd.rms_norm %x eps {eps} : {T576} -> {T576}"), capsys=capsys)
    assert (rc, out) == (1, "")
    assert err.startswith(f"t.mlir:2:3: error: fwd.rms_norm eps is negative ({said})\n")


@pytest.mark.filterwarnings("ignore:Expected all top-level operations")
@pytest.mark.parametrize("target", ["wat", "wgsl", "csl"])
def test_xdsls_targets_that_print_nothing_are_errors(tmp_path, capsys, target):
    """xDSL's printers of their own dialects (`-t wat`, `wgsl`, `csl`) find no op of theirs in fwd IR:
    an error naming the target (they printed nothing and exited 0; csl with a warning alone)."""
    rc, out, err = opt(tmp_path, func(f"  %s = fwd.silu %x : {T576} -> {T576}"), "-t", target, capsys=capsys)
    assert (rc, out) == (1, "")
    assert err.endswith(f"fwdshim-opt: error: -t {target}: xDSL's `{target}` target printed nothing (it prints its own "
                        "dialect's ops, and this IR holds none); fwd IR prints as mlir or numba\n")
    out_file = tmp_path / "out.txt"
    out_file.write_text("kept\n")
    assert opt(tmp_path, func(f"  %s = fwd.silu %x : {T576} -> {T576}"), "-t", target, "-o", str(out_file), capsys=capsys)[0] == 1
    assert out_file.read_text() == "kept\n"


def test_shapes_past_a_signed_64_bit_count_are_located_errors(tmp_path, capsys):
    """A tensor or weights type of more than 2^63 - 1 values (MLIR's limit) is a located verify error;
    it verified, was judged a native kernel and planned a kernel of 10^20 values."""
    big = "tensor<99999999999999999999xf32>"
    rc, out, err = opt(tmp_path, func(f"  %s = fwd.silu %x : {big} -> {big}", args=f"%x: {big}, %y: {T576}", ty=big), capsys=capsys)
    assert (rc, out) == (1, "")
    assert err.startswith("t.mlir:2:3: error: a tensor of 99999999999999999999 holds 99999999999999999999 values, past 9223372036854775807")
    w = '  %w = fwd.weight "w" : !fwd.weights<4294967296x4294967296, q8_0>\n  %s = fwd.silu %x : {T576} -> {T576}'
    rc, out, err = opt(tmp_path, func(w.format(T576=T576)), capsys=capsys)
    assert (rc, out) == (1, "")
    assert err.startswith("t.mlir:2:38: error: weights of 4294967296x4294967296 hold 18446744073709551616 values, past 9223372036854775807")


def test_unlocated_unnamed_ops_are_told_apart():
    """Built in Python, ops have no location and no result names: two refusals of one reason read
    the same `<unknown>: error: ...`; each now names its op and its place in its function."""
    from xdsl.builder import ImplicitBuilder
    from xdsl.dialects.builtin import ModuleOp, TensorType, f32
    from xdsl.dialects.func import FuncOp, ReturnOp

    from fwdshim.dialects.attributes import QActType, QuantFormat, QuantFormatAttr
    from fwdshim.dialects.fwd import QuantizeOp
    from fwdshim.passes.legalize import legalize
    from fwdshim.shim.forward import ForwardShim

    t = TensorType(f32, [64])
    func = FuncOp("f", ((t, t), ()))
    with ImplicitBuilder(func.body) as (a, b):
        for x in (a, b):
            QuantizeOp(operands=[x], result_types=[QActType(64, QuantFormat.ONE_WORD)],
                       properties={"format": QuantFormatAttr(QuantFormat.ONE_WORD)})  # fmt: skip
        ReturnOp()
    module = ModuleOp([func])
    lines = [r.error_line() for _, r in legalize(ForwardShim(), module)]
    assert lines == [f"<unknown> fwd.quantize, op {i} of @f: error: the forward's precise numerics read no activation quantized"
                     for i in (0, 1)], lines  # fmt: skip
