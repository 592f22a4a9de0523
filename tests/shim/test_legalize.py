"""fwd-legalize and the forward shim's `fits`/`kernel_refusal`: one small module per seed branch, the
order of checks, the 48 KiB bound, strict vs mark, decomposition and the contract attribute.

Expected reasons are the seed's (`forward_shim.rs`), written out here, not read from fwdshim."""

from __future__ import annotations

import random

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, DictionaryAttr, ModuleOp, StringAttr
from xdsl.dialects.func import Func
from xdsl.dialects.test import Test
from xdsl.utils.exceptions import PassFailedException

from fwdshim.classes import Q8MatKind
from fwdshim.diagnostics import LocatingParser
from fwdshim.dialects.fwd import REFUSED_PRIMITIVES, FusedOp, Fwd, stages
from fwdshim.passes.legalize import LegalizePass, legalize
from fwdshim.shim.forward import ALL_BRANCHES, ForwardShim, kernel_refusal

SEED = {
    "K01": "an elementwise op over a row combined with every row of a block — its kernel reads both at one index",
    "K02": "a bias on an RMSNorm — its kernel scales and never shifts",
    "K03": "a weight, residual or bias on a softmax",
    "K04": "a residual added before a layernorm",
    "K05": "a rope reading its angles from a position in a cache of angles",
    "K06": "a rope with a table row per row of the query — its kernel reads one row of angles",
    "K07": "a partial rotary — its kernel turns every dimension of the head",
    "K08": "a soft-capped attention (`softcap C`) — its kernel caps no score",
    "K09": "a gated delta gated by a sigmoid (`gate sigmoid`) — its kernel gates by SiLU",
    "K10": "a masked attention (`pos P`) — its kernel attends every cached position",
    "K11": "a soft-capped tensor (`cap C`) — no kernel caps one",
    "K12": "an attention with sinks (`sinks(S)`) — its kernel's softmax has no sink",
    "K13": "a windowed attention (`window W`) — its kernel attends every cached position",
    "K14": "an attention whose values are narrower than its keys — its kernel reads values as wide as keys",
    "K15": "an attention with a given scale (`scale S`) — its kernel scales the scores by 1/√HD",
    "K16": "a causal block of query rows — its kernel attends for one query",
    "K17": "query heads that do not group evenly over the key/value heads",
    "K18": "a cache longer than the score row its kernel holds in static shared memory",
    "K19": "an expert mixture with biases — its kernels add none",
    "K20": "an expert mixture without renormalizing — its router renormalizes the kept experts' weights",
    "K21": "an expert mixture with a clamped SwiGLU — its kernels gate with SwiGLU",
    "K22": "an expert mixture whose router is not a softmax weighting its experts' outputs — scored by sigmoids, biased in its choice, limited to groups, scaled, or weighting its inputs",
    "K23": "this lane has no kernel for the op",
    "F01": "the forward's stages read and write whole buffers",
    "F02": "moe stage `%moe` has no entry in the MoE weight manifest",
    "F03": "the forward reads no view into another buffer",
    "F04": "the forward's precise numerics read no activation quantized",
    "F05": "the forward adds into a norm only where the norm is the next stage",
    "F06": "the forward adds into the norm that follows, over the whole of the sum",
    "F07": "the forward carries a chain's result through each step, as exactly one operand",
    "F08": "the forward's attention quantizes its result only where each head's values are whole 32-value blocks",
    "S01": "the forward links no ReLU",
    "S02": "the forward attends one query over a cache held in one block's shared scores",
    "S03": "the forward's attention takes no mask, window, sink, soft cap or given scale",
    "S04": "the forward attends a cache in one block, never in chunks",
    "S05": "the forward routes by one top-k over every expert",
    "S06": "the forward computes logits and picks no token",
    "S07": "the forward links no delta rule",
    "S08": "the forward holds its caches in f32",
    "S09": "the forward sums its residual in f32, uncompensated",
    "S10": "the forward keeps every buffer on the device",
    "S11": "the forward runs one sequence's row through its kept experts",
    "S12": "the forward replays a graph of a kernel a stage",
    "S13": "the forward's stages read and write whole buffers",
    "B01": "an op over 64-bit values — the forward's kernels accumulate in 32 bits",
    "B02": "a matmul over MXFP4 weights — its kernels dequantize F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and BF16 rows only",
    "B03": "a matmul over a bf16 tensor — its dense kernel multiplies f32 and f16 rows only",
    "B04": "`fwd.rms_norm` reading a quantized activation — only a block-quantized matmul's and a mixture's kernels read int8 blocks, as their input",
    "B05": "an op over f16 tensors — the forward's kernels read and write f32 buffers",
    "B06": "a fused cuda_graphs — the forward forms that class itself, never from fused parts",
    "B07": "a fused norm_weight of parts its kernel does not compute — fwd.silu, fwd.softmax, where it computes [add] rms_norm [mul by a weight] [quantize]",
    "B08": "an attention over heads of 12288 values — its kernel holds a split's scores and each warp's partial row of the head in 48 KiB of static shared memory",
    "B09": "an expert mixture keeping 33 experts — its router keeps at most 32, one a lane of one warp",
    "B10": "an expert mixture of 2049 experts — its router ranks at most 2048, 64 a lane of one warp",
    "B11": "a matmul or mixture over Q8_0 rows of 40 values — its kernels read whole blocks of 32",
}  # fmt: skip


def T(*dims: int, ty: str = "f32") -> str:
    return f"tensor<{'x'.join(map(str, dims))}x{ty}>"


def val(name: str, ty: str) -> str:
    return f'%{name} = "test.op"() : () -> {ty}\n'


def parse(text: str) -> ModuleOp:
    ctx = Context()
    for d in (Builtin, Func, Test, Fwd):
        ctx.load_dialect(d)
    module = LocatingParser(ctx, text, "t.mlir").parse_module()
    module.verify()
    return module


def regions(*texts: str) -> str:
    """Each text in a region of its own, so they may reuse SSA names."""
    return "".join(f"func.func @f{i}() {{\n{t}  func.return\n}}\n" for i, t in enumerate(texts))


def refusals(text: str, kind: Q8MatKind = Q8MatKind.DEQUANT):
    module = parse(text)
    return [r for _, r in legalize(ForwardShim(kind), module)]


def mismatches(text: str, kind: Q8MatKind) -> list[tuple[str, str]]:
    """(op name, why) of each stage whose activation read the contract's `activation()` does not
    name (`ForwardShim.read_mismatch`: the lowering's and the executor's check, not legality's)."""
    shim = ForwardShim(kind)
    ops = [op for op in parse(text).walk() if op.name.startswith("fwd.") and op.name != "fwd.weight"]
    return [(op.name, why) for op in ops if (why := shim.read_mismatch(op)) is not None]


# ---- IR builders --------------------------------------------------------------------------


def attention(h=4, kv=2, hd=32, vd=None, l=8, rows=1, extra="", sinks=False) -> str:  # noqa: E741
    vd = hd if vd is None else vd
    q, k, v = T(rows * h * hd), T(rows * kv * hd), T(rows * kv * vd)
    kc, vc, out = T(l - 1, kv * hd), T(l - 1, kv * vd), T(rows * h * vd)
    s = val("q", q) + val("k", k) + val("v", v) + val("kc", kc) + val("vc", vc)
    sk = ""
    if sinks:
        s += val("sk", T(h))
        sk = f" sinks(%sk : {T(h)})"
    return s + (
        f"%att = fwd.attention %q, %k, %v, %kc, %vc{sk} h {h} kv {kv} hd {hd} vd {vd} l {l} rows {rows} {extra}"
        f" : {q}, {k}, {v}, {kc}, {vc} -> {out}\n"
    )


def moe(extra="act swiglu scoring softmax", wtype="q8_0", router_ty=None, biases="", e=4, top_k=2, x_ty=None) -> str:
    d, ff = 64, 32
    r_ty = router_ty or f"!fwd.weights<{e}x{d}, {wtype}>"
    gu, dn = f"!fwd.weights<{e}x{ff}x{d}, {wtype}>", f"!fwd.weights<{e}x{d}x{ff}, {wtype}>"
    x_ty = x_ty or T(d)
    s = val("x", x_ty)
    s += f'%r = fwd.weight "r" : {r_ty}\n%g = fwd.weight "g" : {gu}\n%u = fwd.weight "u" : {gu}\n%dn = fwd.weight "d" : {dn}\n'
    if biases:
        s += val("rb", T(e))
    return s + (
        f"%moe = fwd.moe %x, %r, %g, %u, %dn {biases} n_expert {e} top_k {top_k} {extra}"
        f" : {x_ty}, {r_ty}, {gu}, {gu}, {dn} -> {T(d)}\n"
    )


def rope(hd=32, half=16, rows=1, extra="") -> str:
    return val("x", T(64)) + val("ang", T(2, half)) + (
        f"%y = fwd.rope %x, %ang hd {hd} half {half} rows {rows} {extra} : {T(64)}, {T(2, half)} -> {T(64)}\n"
    )


def fused(cls: str, covers: str, body: str, ins=("a", "b"), outs=(T(64),), yields="%s") -> str:
    t = T(64)
    head = "".join(val(n, t) for n in ins)
    args = ", ".join(f"%{n}_" for n in ins)
    types = ", ".join(t for _ in ins)
    bb = ", ".join(f"%{n}_: {t}" for n in ins)
    res = ", ".join(outs)
    return head + (
        f"%f:{len(outs)} = fwd.fused {cls} covers [{covers}] ins({', '.join('%' + n for n in ins)}) : ({types}) -> ({res}) {{\n"
        f"^bb0({bb}):\n{body}  fwd.yield {yields} : {res}\n}}\n"
    ).replace("ins(" + args, "ins(" + args)


def ew(out: str, kind: str, a: str, b: str, t: str = T(64)) -> str:
    return f"  %{out} = fwd.elementwise {kind} %{a}, %{b} : {t}, {t} -> {t}\n"


E = T(64)
X = val("x", E) + val("y", E)

CASES: dict[str, tuple[str, Q8MatKind]] = {
    "K01": (X + f"%z = fwd.elementwise add %x, %y row : {E}, {E} -> {E}\n", Q8MatKind.DEQUANT),
    "K02": (X + f"%z = fwd.rms_norm %x bias(%y : {E}) : {E} -> {E}\n", Q8MatKind.DEQUANT),
    "K03": (X + f"%z = fwd.softmax %x residual(%y : {E}) : {E} -> {E}\n", Q8MatKind.DEQUANT),
    "K04": (X + f"%z = fwd.layer_norm %x residual(%y : {E}) eps 1.0e-05 : {E} -> {E}\n", Q8MatKind.DEQUANT),
    "K05": (rope(extra="from 3"), Q8MatKind.DEQUANT),
    "K06": (rope(rows=2), Q8MatKind.DEQUANT),
    "K07": (rope(hd=32, half=8), Q8MatKind.DEQUANT),
    "K08": (attention(extra="softcap 3.0e+01"), Q8MatKind.DEQUANT),
    "K09": (X + f"%z = fwd.gated_delta sigmoid %x, %y : ({E}, {E}) -> {E}\n", Q8MatKind.DEQUANT),
    "K10": (attention(extra="pos 5"), Q8MatKind.DEQUANT),
    "K11": (X + f"%z = fwd.softcap %x cap 3.0e+01 : {E} -> {E}\n", Q8MatKind.DEQUANT),
    "K12": (attention(sinks=True), Q8MatKind.DEQUANT),
    "K13": (attention(extra="window 4"), Q8MatKind.DEQUANT),
    "K14": (attention(vd=16), Q8MatKind.DEQUANT),
    "K15": (attention(extra="scale 1.25e-01"), Q8MatKind.DEQUANT),
    "K16": (attention(rows=2), Q8MatKind.DEQUANT),
    "K17": (attention(h=3, kv=2), Q8MatKind.DEQUANT),
    "K18": (attention(l=12257, h=1, kv=1), Q8MatKind.DEQUANT),
    "K19": (moe(biases="router_bias(%rb : tensor<4xf32>)", extra="renormalize act swiglu scoring softmax"), Q8MatKind.DEQUANT),
    "K20": (moe(), Q8MatKind.DEQUANT),
    "K21": (moe(extra="renormalize act swiglu_clamped scoring softmax"), Q8MatKind.DEQUANT),
    "K22": (moe(extra="renormalize act swiglu scoring sigmoid"), Q8MatKind.DEQUANT),
    "K23": (X + f"%z = fwd.relu %x : ({E}) -> {E}\n", Q8MatKind.DEQUANT),
    "F01": (X + f"%z = fwd.elementwise add %x, %y access [#fwd.access<whole>, #fwd.access<strided>] : {E}, {E} -> {E}\n", Q8MatKind.DEQUANT),
    "F02": (moe(extra="renormalize act swiglu scoring softmax", router_ty=T(4, 64)), Q8MatKind.DEQUANT),
    "F03": (X + f"%z = fwd.view %x offset 8 : {E} -> {T(32)}\n", Q8MatKind.DEQUANT),
    "F04": (X + f"%z = fwd.quantize %x one_word : {E} -> !fwd.qact<64, one_word>\n", Q8MatKind.DEQUANT),
    "F05": (fused("add_norm", "0, 2", ew("s", "add", "a_", "b_") + f"  %n = fwd.rms_norm %s : {E} -> {E}\n", outs=(E, E), yields="%s, %n"), Q8MatKind.DEQUANT),
    "F06": (fused("add_norm", "0, 1", ew("s", "add", "a_", "b_") + f"  %n = fwd.rms_norm %s residual(%b_ : {E}) : {E} -> {E}\n", outs=(E, E), yields="%s, %n"), Q8MatKind.DEQUANT),
    "F07": (fused("elementwise_chains", "0, 1", ew("t", "add", "a_", "b_") + ew("s", "mul", "t", "t")), Q8MatKind.DEQUANT),
    "F08": (
        attention(h=2, kv=1, hd=48, l=4)
        + "%f = fwd.fused attn_output_quant covers [0, 1] ins(%q, %k, %v, %kc, %vc) : (tensor<96xf32>, tensor<48xf32>, tensor<48xf32>, tensor<3x48xf32>, tensor<3x48xf32>) -> !fwd.qact<96, one_word> {\n"
        "^bb0(%q_: tensor<96xf32>, %k_: tensor<48xf32>, %v_: tensor<48xf32>, %kc_: tensor<3x48xf32>, %vc_: tensor<3x48xf32>):\n"
        "  %a = fwd.attention %q_, %k_, %v_, %kc_, %vc_ h 2 kv 1 hd 48 vd 48 l 4 rows 1 : tensor<96xf32>, tensor<48xf32>, tensor<48xf32>, tensor<3x48xf32>, tensor<3x48xf32> -> tensor<96xf32>\n"
        "  %aq = fwd.quantize %a one_word : tensor<96xf32> -> !fwd.qact<96, one_word>\n"
        "  fwd.yield %aq : !fwd.qact<96, one_word>\n}\n",
        Q8MatKind.INT8_ACT,
    ),
    "B01": (val("x", T(64, ty="f64")) + f"%z = fwd.silu %x : {T(64, ty='f64')} -> {T(64, ty='f64')}\n", Q8MatKind.DEQUANT),
    "B02": (X + f'%w = fwd.weight "w" : !fwd.weights<32x64, mxfp4>\n%z = fwd.matmul %x, %w : {E}, !fwd.weights<32x64, mxfp4> -> {T(32)}\n', Q8MatKind.DEQUANT),
    "B03": (X + val("w", T(32, 64, ty="bf16")) + f"%z = fwd.matmul %x, %w : {E}, {T(32, 64, ty='bf16')} -> {T(32)}\n", Q8MatKind.DEQUANT),
    "B04": (X + f"%q = fwd.quantize %x one_word : {E} -> !fwd.qact<64, one_word>\n%z = fwd.rms_norm %q : !fwd.qact<64, one_word> -> {E}\n", Q8MatKind.INT8_ACT),
    "B05": (val("h", T(64, ty="f16")) + f"%z = fwd.silu %h : {T(64, ty='f16')} -> {T(64, ty='f16')}\n", Q8MatKind.DEQUANT),
    "B06": (fused("cuda_graphs", "0", f"  %s = fwd.silu %a_ : {E} -> {E}\n", ins=("a",)), Q8MatKind.DEQUANT),
    "B07": (fused("norm_weight", "0, 1", f"  %t = fwd.silu %a_ : {E} -> {E}\n  %s = fwd.softmax %t : {E} -> {E}\n", ins=("a",)), Q8MatKind.DEQUANT),
    "B08": (attention(h=1, kv=1, hd=12288, l=2), Q8MatKind.DEQUANT),
    "B09": (moe(extra="renormalize act swiglu scoring softmax", e=34, top_k=33), Q8MatKind.DEQUANT),
    "B10": (moe(extra="renormalize act swiglu scoring softmax", e=2049), Q8MatKind.DEQUANT),
    "B11": (val("x", T(40)) + f'%w = fwd.weight "w" : !fwd.weights<8x40, q8_0>\n%z = fwd.matmul %x, %w : {T(40)}, !fwd.weights<8x40, q8_0> -> {T(8)}\n', Q8MatKind.DEQUANT),
}
for _i, (_sid, _cls) in enumerate(
    [("S01", "relu_sqr"), ("S02", "flash_decode"), ("S03", "softcap"), ("S04", "attn_lse_merge"), ("S05", "grouped_topk"),
     ("S06", "sampling"), ("S07", "gdn_step"), ("S08", "kv_cache_quant"), ("S09", "compensated_residual"),
     ("S10", "host_resident_kv"), ("S11", "moe_direct_pairs"), ("S12", "persistent_layer_megakernel"), ("S13", "row_write")]
):  # fmt: skip
    CASES[_sid] = (fused(_cls, "0", f"  %s = fwd.silu %a_ : {E} -> {E}\n", ins=("a",)), Q8MatKind.DEQUANT)


SPECIFICS = {  # the numbers each case's op gives, after the seed's sentence (issue 42's friction)
    "K06": " (rows 2)",
    "K07": " (hd 32, half 8)",
    "K14": " (vd 16 under hd 32)",
    "K16": " (rows 2)",
    "K17": " (h 3 over kv 2)",
    "K18": f" (l 12257: {12257 * 4 + 128} bytes of scores, 49152 held)",
    "K23": " (fwd.relu)",
}


@pytest.mark.parametrize("branch", sorted(CASES))
def test_each_branch_refuses_with_the_seed_reason(branch: str) -> None:
    """The seed's sentence, word for word, then the op's numbers where the branch has some."""
    text, kind = CASES[branch]
    got = refusals(text, kind)
    assert [(r.branch, r.reason) for r in got] == [(branch, SEED[branch] + SPECIFICS.get(branch, ""))]
    assert got[0].location.startswith("t.mlir:")


@pytest.mark.parametrize("ggml, k, block", [("q4_0", 40, 32), ("q4_k", 100, 256), ("q4_k", 96, 256), ("q6_k", 288, 256)])
def test_b11_names_the_block_of_the_weights_type(ggml: str, k: int, block: int) -> None:
    """B11 refuses rows that are not whole blocks of the weights' own GGML type — 32 values, 256 for
    the K-quants — and says which (a Q4_K row of 96 values is not whole blocks either)."""
    w = f"!fwd.weights<8x{k}, {ggml}>"
    text = val("x", T(k)) + f'%w = fwd.weight "w" : {w}\n%z = fwd.matmul %x, %w : {T(k)}, {w} -> {T(8)}\n'
    got = refusals(text, Q8MatKind.DEQUANT)
    name = ggml.upper()
    assert [(r.branch, r.reason) for r in got] == [
        ("B11", f"a matmul or mixture over {name} rows of {k} values — its kernels read whole blocks of {block}")
    ]


def test_every_seed_branch_has_a_case() -> None:
    ids = {b.id for b in ALL_BRANCHES}
    assert ids == set(CASES) == set(SEED)
    assert len([i for i in ids if i.startswith("K")]) == 23


@pytest.mark.parametrize("op", [*(c.name for c in REFUSED_PRIMITIVES), "fwd.gated_delta"])
def test_no_kernel_ops(op: str) -> None:
    """The seed's last arm: the 19 ops the forward never computes and a SiLU-gated delta."""
    gate = "silu " if op == "fwd.gated_delta" else ""
    text = X + f"%z = {op} {gate}%x, %y : ({E}, {E}) -> {E}\n"
    got = refusals(text)
    # fwd.set_row writes a row into another buffer: it owns no destination, and the seed's `fits`
    # checks ownership (F01) before it asks `kernel_refusal` (K23)
    branch = "F01" if op == "fwd.set_row" else "K23"
    why = SEED[branch] + (f" ({op})" if branch == "K23" else "")  # K23 names the op it has no kernel for
    assert [(r.op_name, r.branch, r.reason) for r in got] == [(op, branch, why)]


NATIVE = (
    X
    + f'%w = fwd.weight "w" : !fwd.weights<32x64, q8_0>\n%w16 = fwd.weight "w16" : !fwd.weights<32x64, f16>\n'
    + val("wt", T(32, 64, ty="f16"))
    + f"%m = fwd.matmul %x, %w : {E}, !fwd.weights<32x64, q8_0> -> {T(32)}\n"
    + f"%m2 = fwd.matmul %x, %w16 : {E}, !fwd.weights<32x64, f16> -> {T(32)}\n"
    + f"%m3 = fwd.matmul %x, %wt : {E}, {T(32, 64, ty='f16')} -> {T(32)}\n"
    + f"%s = fwd.silu %x : {E} -> {E}\n%t = fwd.transpose %x : {E} -> {E}\n"
    + f"%e = fwd.elementwise max %x, %y : {E}, {E} -> {E}\n"
    + f"%n = fwd.rms_norm %x weight(%y : {E}) residual(%y : {E}) eps 1.0e-06 : {E} -> {E}\n"
    + f"%sm = fwd.softmax %x : {E} -> {E}\n"
    + f"%ln = fwd.layer_norm %x weight(%y : {E}) bias(%y : {E}) : {E} -> {E}\n"
)


def test_computed_primitives_fit() -> None:
    """Every computed primitive fits under every numerics, as the seed answers (it places its quantizes
    by `activation()` and checks none); under the int8 numerics the Q8_0 matmul and the mixture read
    their f32 activation where the contract reads it quantized, which the lowering and the executor
    refuse (`read_mismatch`), never legality."""
    text = regions(NATIVE, rope(), attention(l=12256, h=1, kv=1), moe(extra="renormalize act swiglu scoring softmax groups 1 scale 1.0"))
    assert refusals(text, Q8MatKind.DEQUANT) == [] and mismatches(text, Q8MatKind.DEQUANT) == []
    for kind in (Q8MatKind.INT8_ACT, Q8MatKind.TWO_PASS_INT8):
        assert refusals(text, kind) == []
        assert [name for name, _ in mismatches(text, kind)] == ["fwd.matmul", "fwd.moe"]


Q8 = '%w = fwd.weight "w" : !fwd.weights<32x64, q8_0>\n'


def q8_matmul(x: str, ty: str) -> str:
    return f"%z = fwd.matmul %{x}, %w : {ty}, !fwd.weights<32x64, q8_0> -> {T(32)}\n"


@pytest.mark.parametrize(
    "kind,fmt", [(Q8MatKind.INT8_ACT, "one_word"), (Q8MatKind.TWO_PASS_INT8, "two_words")], ids=lambda v: str(v)
)
def test_the_contracts_activation_fits(kind, fmt) -> None:
    """The format `activation()` names matches — a Q8_0 matmul over the quantize's result, the mixture
    over a quantized argument — and the other format does not (IR quantized under the other numerics:
    forward-shim{int8-act} then forward-shim{two-pass-int8} left one_word reads): legal as the seed
    says, refused by `read_mismatch` with the pass that fixes it."""
    q = f"!fwd.qact<64, {fmt}>"
    text = X + Q8 + f"%q = fwd.quantize %x {fmt} : {E} -> {q}\n" + q8_matmul("q", q)
    assert refusals(text, kind) == [] and mismatches(text, kind) == []
    mixture = moe(extra="renormalize act swiglu scoring softmax", x_ty=q)
    assert refusals(mixture, kind) == [] and mismatches(mixture, kind) == []
    assert refusals(mixture, Q8MatKind.DEQUANT) == []
    assert [name for name, _ in mismatches(mixture, Q8MatKind.DEQUANT)] == ["fwd.moe"]
    other = "two_words" if fmt == "one_word" else "one_word"
    qo = f"!fwd.qact<64, {other}>"
    text = X + Q8 + f"%q = fwd.quantize %x {other} : {E} -> {qo}\n" + q8_matmul("q", qo)
    want = (  # the quantize pass quantizes f32 reads only: it is no fix here
        f"`fwd.matmul` reading a {other} activation — the {kind.value} numerics read a block-quantized matmul's and a "
        f"mixture's activation as {fmt} blocks (this one was quantized for other numerics: run "
        f"fwd-quantize-activations{{numerics={kind.value}}} on the IR from before that)"
    )
    assert refusals(text, kind) == [] and mismatches(text, kind) == [("fwd.matmul", want)]


def test_a_quantized_argument_under_dequant_is_refused() -> None:
    """A `!fwd.qact` argument read by a Q8_0 matmul under dequant planned an int8 GEMV (no quantize op for
    F04 to refuse): legal as the seed says, refused by `read_mismatch`; a dense matmul reading one is B04's."""
    q = "!fwd.qact<64, one_word>"
    text = val("q", q) + Q8 + q8_matmul("q", q)
    want = ("`fwd.matmul` reading a one_word activation — the dequant numerics read every activation as f32 "
            "(fwd-quantize-activations{numerics=int8-act} makes one_word blocks: run the pipeline on the IR from before it)")  # fmt: skip
    assert refusals(text, Q8MatKind.DEQUANT) == [] and mismatches(text, Q8MatKind.DEQUANT) == [("fwd.matmul", want)]
    text = X + Q8 + f"%q = fwd.quantize %x one_word : {E} -> {q}\n" + q8_matmul("q", q)
    got = refusals(text, Q8MatKind.DEQUANT)  # one error, at the quantize (F04), none at its reader
    assert [(r.op_name, r.branch) for r in got] == [("fwd.quantize", "F04")] and mismatches(text, Q8MatKind.DEQUANT) == []
    text = val("q", q) + val("wt", T(32, 64, ty="f16")) + f"%z = fwd.matmul %q, %wt : {q}, {T(32, 64, ty='f16')} -> {T(32)}\n"
    assert [r.branch for r in refusals(text, Q8MatKind.DEQUANT)] == ["B04"]


def test_attention_soft_capped_and_masked_reports_the_soft_cap() -> None:
    got = refusals(attention(extra="scale 2.0 softcap 3.0e+01 pos 5 window 2"))
    assert [r.branch for r in got] == ["K08"]
    got = refusals(attention(h=3, kv=2, rows=2, extra="scale 2.0 pos 5"))
    assert [r.branch for r in got] == ["K10"]
    got = refusals(attention(h=3, kv=2, rows=2, vd=16, extra="scale 2.0"))
    assert [r.branch for r in got] == ["K14"]


def test_rope_with_from_and_rows_reports_from() -> None:
    assert [r.branch for r in refusals(rope(rows=2, half=8, extra="from 3"))] == ["K05"]
    assert [r.branch for r in refusals(rope(rows=2, half=8))] == ["K06"]


def test_moe_order() -> None:
    """Biases before renormalization before the act before the router; the manifest defers to them."""
    text = moe(biases="router_bias(%rb : tensor<4xf32>)", extra="act swiglu_clamped scoring sigmoid", wtype="f16")
    assert [r.branch for r in refusals(text)] == ["K19"]
    assert [r.branch for r in refusals(moe(extra="act swiglu_clamped scoring sigmoid", wtype="f16"))] == ["K20"]
    assert [r.branch for r in refusals(moe(extra="renormalize act swiglu scoring softmax", wtype="f16"))] == ["F02"]
    text = moe(extra="renormalize act swiglu scoring softmax weight_inputs")
    assert [r.branch for r in refusals(text)] == ["K22"]


def test_fits_order_accumulator_then_access_then_kind() -> None:
    t64 = T(64, ty="i64")
    text = val("x", t64) + f"%z = fwd.relu %x access [#fwd.access<rows>] : ({t64}) -> {t64}\n"
    assert [r.branch for r in refusals(text)] == ["B01"]
    text = X + f'%z = fwd.relu %x into "buf" : ({E}) -> {E}\n'
    assert [r.branch for r in refusals(text)] == ["F01"]
    text = X + f'%z = fwd.view %x into "buf" : {E} -> {E}\n'
    assert [r.branch for r in refusals(text)] == ["F01"]


@pytest.mark.parametrize("l,ok", [(12255, True), (12256, True), (12257, False), (20000, False)])
def test_attention_48_kib_boundary(l: int, ok: bool) -> None:
    """`l*4 + 32*4 > 49152` refuses: the score row of l floats plus the 32-float reduction row."""
    assert (l * 4 + 128 <= 48 * 1024) == ok
    got = refusals(attention(l=l, h=1, kv=1, hd=32))
    assert [r.branch for r in got] == ([] if ok else ["K18"])
    op = next(iter(stages(parse(attention(l=l, h=1, kv=1)))))
    assert kernel_refusal(op) == (None if ok else SEED["K18"])


def test_fused_leaf_refusal_is_reported_at_the_fused_op() -> None:
    body = ew("t", "add", "a_", "b_") + f"  %s = fwd.elementwise mul %t, %b_ row : {E}, {E} -> {E}\n"
    got = refusals(fused("elementwise_chains", "0, 1", body))
    assert [(r.op_name, r.branch, r.location) for r in got] == [("fwd.fused", "K01", "t.mlir:3:1")]


@pytest.mark.parametrize(
    "body,ok",
    [
        (ew("t", "add", "a_", "b_") + f"  %u = fwd.silu %t : {E} -> {E}\n" + ew("s", "mul", "b_", "u"), True),
        (ew("t", "add", "a_", "b_") + ew("s", "mul", "t", "t"), False),  # both operands carry: not XOR
        (ew("t", "add", "a_", "b_") + ew("s", "mul", "a_", "b_"), False),  # neither carries
        (ew("t", "add", "a_", "b_") + f"  %s = fwd.silu %a_ : {E} -> {E}\n", True),  # a silu always steps
    ],
)
def test_elementwise_chains_carry(body: str, ok: bool) -> None:
    covers = ", ".join(str(i) for i in range(body.count(" = fwd.")))
    assert [r.branch for r in refusals(fused("elementwise_chains", covers, body))] == ([] if ok else ["F07"])


def add_norm(covers: str, norm: str, shape: str = E) -> str:
    body = ew("s", "add", "a_", "b_", shape) + f"  %n = {norm} : {shape} -> {shape}\n"
    return fused("add_norm", covers, body, outs=(shape, shape), yields="%s, %n").replace(E, shape)


@pytest.mark.parametrize(
    "text,branch",
    [
        (add_norm("4, 5", "fwd.rms_norm %s eps 1.0e-05"), None),
        (add_norm("4, 6", "fwd.rms_norm %s eps 1.0e-05"), "F05"),
        (add_norm("4, 6", f"fwd.rms_norm %s residual(%b_ : {E})"), "F06"),  # `pre` is reported before `next`
        (add_norm("4, 5", "fwd.rms_norm %s", shape=T(2, 32)), "F06"),  # `part`: rows of 32 of a sum of 64
        (add_norm("4, 5", "fwd.softmax %s"), "F06"),  # no norm at all
    ],
)
def test_add_norm(text: str, branch: str | None) -> None:
    assert [r.branch for r in refusals(text)] == ([] if branch is None else [branch])


def test_attn_output_quant_hd_multiple_of_32() -> None:
    text = CASES["F08"][0].replace("48", "64").replace("96", "128").replace("3x64", "3x64")
    assert refusals(text, Q8MatKind.INT8_ACT) == []
    assert [r.branch for r in refusals(CASES["F08"][0], Q8MatKind.INT8_ACT)] == ["F08"]
    # Under the other numerics attn_output_quant is a DECOMPOSE class: its parts are judged instead.
    assert [r.branch for r in refusals(CASES["F08"][0], Q8MatKind.DEQUANT)] == ["F04"]
    assert refusals(CASES["F08"][0], Q8MatKind.TWO_PASS_INT8) == []


def test_quantize_fits_under_int8_numerics() -> None:
    assert [r.branch for r in refusals(CASES["F04"][0], Q8MatKind.DEQUANT)] == ["F04"]
    assert refusals(CASES["F04"][0], Q8MatKind.INT8_ACT) == []
    assert refusals(CASES["F04"][0], Q8MatKind.TWO_PASS_INT8) == []


def test_matmul_weight_types() -> None:
    """B02 for every GGML type but the GEMVs' (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K;
    64-bit types are B01)."""
    read = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]
    for ggml, want in [*((g, []) for g in read), ("mxfp4", ["B02"]), ("tq2_0", ["B02"]), ("iq4_nl", ["B02"]),
                       ("iq2_xxs", ["B02"]), ("i32", ["B02"]), ("f64", ["B01"]), ("i64", ["B01"])]:  # fmt: skip
        w = f"!fwd.weights<32x256, {ggml}>"  # whole blocks of every type (256 values: the K-quants', B11)
        text = val("x", T(256)) + f'%w = fwd.weight "w" : {w}\n%z = fwd.matmul %x, %w : {T(256)}, {w} -> {T(32)}\n'
        got = refusals(text)
        assert [r.branch for r in got] == want, ggml
        if want == ["B02"]:
            assert got[0].reason.startswith(f"a matmul over {ggml.upper()} weights — ")


# ---- the pass -----------------------------------------------------------------------------

MIXED = (
    X
    + f"%a = fwd.relu %x : ({E}) -> {E}\n"  # line 3
    + f"%b = fwd.silu %a : {E} -> {E}\n"  # line 4: fits
    + f"%c = fwd.softcap %b cap 5.0 : {E} -> {E}\n"  # line 5
    + f"%d = fwd.view %c : {E} -> {E}\n"  # line 6
)


def test_strict_reports_every_refusal_in_one_run() -> None:
    module = parse(MIXED)
    with pytest.raises(PassFailedException) as e:
        LegalizePass().apply(Context(), module)
    assert str(e.value).splitlines() == [
        f"t.mlir:3:1: error: {SEED['K23']} (fwd.relu)",
        f"t.mlir:5:1: error: {SEED['K11']}",
        f"t.mlir:6:1: error: {SEED['F03']}",
    ]
    assert "fwd.numerics" not in module.attributes


def test_mark_puts_the_reason_on_each_refused_op() -> None:
    module = parse(MIXED)
    LegalizePass(mode="mark").apply(Context(), module)
    marks = {op.name: op.attributes.get("fwd.refused") for op in stages(module)}
    assert marks == {
        "fwd.relu": StringAttr(SEED["K23"] + " (fwd.relu)"),
        "fwd.silu": None,
        "fwd.softcap": StringAttr(SEED["K11"]),
        "fwd.view": StringAttr(SEED["F03"]),
    }
    assert isinstance(module.attributes["fwd.numerics"], DictionaryAttr)


@pytest.mark.parametrize("kind", list(Q8MatKind))
def test_contract_attribute(kind: Q8MatKind) -> None:
    module = parse(X + f"%b = fwd.silu %x : {E} -> {E}\n")
    LegalizePass(numerics=kind.value).apply(Context(), module)
    got = {k: getattr(v, "data", None) for k, v in module.attributes["fwd.numerics"].data.items()}
    got["accumulator_bits"] = module.attributes["fwd.numerics"].data["accumulator_bits"].value.data
    words = {"dequant": ("Dequant", "none"), "int8-act": ("Int8Act", "int8 blocks of 32, one_word"),
             "two-pass-int8": ("TwoPassInt8", "int8 blocks of 32, two_words")}[kind.value]  # fmt: skip
    assert got == {
        "shim": f"cuda-forward:{words[0]}",
        "point": f"the older forward: {words[0]} activations",
        "activations": words[1],
        "cache": "f32",
        "state": "f32",
        "attention": "none",
        "fused": "exact",
        "accumulator_bits": 32,
    }


def test_bad_options_are_value_errors() -> None:
    with pytest.raises(ValueError, match="option `mode` of `fwd-legalize` takes strict or mark, not `lax`"):
        LegalizePass(mode="lax")
    with pytest.raises(ValueError, match="unknown numerics `int4`"):
        LegalizePass(numerics="int4")
    for bad in ("false", 1):  # a truthy non-bool printed the report where none was asked for
        with pytest.raises(ValueError) as e:
            LegalizePass(explain=bad)
        assert str(e.value) == f"option `explain` of `fwd-legalize` takes true or false, not `{bad!r}`"
    assert LegalizePass(explain=False).explain is False


def test_bare_options_from_a_pipeline_spec() -> None:
    """`{explain}` is explain=true (mlir-opt's bare flag: xDSL read it as unset and printed no report);
    a bare option that is not a flag needs a value."""
    from xdsl.utils.arg_spec import ArgSpec

    from fwdshim.passes.fuse import FusePass

    assert LegalizePass.from_spec(ArgSpec("fwd-legalize", {"explain": ()})).explain is True
    assert LegalizePass.from_spec(ArgSpec("fwd-legalize", {"explain": (False,)})).explain is False
    assert LegalizePass.from_spec(ArgSpec("fwd-legalize", {})).explain is None
    with pytest.raises(ValueError, match=r"option `mode` of `fwd-legalize` needs a value \(`mode=...`\)"):
        LegalizePass.from_spec(ArgSpec("fwd-legalize", {"mode": ()}))
    with pytest.raises(ValueError, match="option `numerics` of `fwd-fuse` needs a value"):
        FusePass.from_spec(ArgSpec("fwd-fuse", {"numerics": ()}))


def test_decompose_inlines_parts_and_checks_them() -> None:
    body = ew("t", "add", "a_", "b_") + f"  %s = fwd.relu %t : ({E}) -> {E}\n"
    text = fused("qk_norm_rope", "0, 1", body) + f"%o = fwd.silu %f#0 : {E} -> {E}\n"
    module = parse(text)
    LegalizePass(mode="mark").apply(Context(), module)
    ops = list(stages(module))
    assert [o.name for o in ops] == ["fwd.elementwise", "fwd.relu", "fwd.silu"]
    assert [o.attributes["fwd.decomposed_from"].data for o in ops[:2]] == ["qk_norm_rope"] * 2
    assert ops[1].attributes["fwd.refused"].data == SEED["K23"] + " (fwd.relu)"
    assert ops[2].operands[0] is ops[1].results[0]
    assert ops[0].operands[0].owner.attributes == {} and ops[0].operands[0].name_hint == "a"
    assert str(ops[1].location) == 'loc("t.mlir":6:3)'
    module.verify()


def test_nested_fused_parts() -> None:
    """A native add_norm over an add and a native norm_weight fits; a nested refused class refuses it;
    a nested DECOMPOSE class is split inside, and the add_norm then ends in the weight's product, not
    in the norm: the norm is no longer its last part (F05)."""
    def nested(inner: str) -> str:
        body = (
            ew("s", "add", "a_", "b_")
            + f"  %n = fwd.fused {inner} covers [5, 6] ins(%s, %b_) : ({E}, {E}) -> {E} {{\n"
            + f"  ^bb1(%p: {E}, %w: {E}):\n    %r = fwd.rms_norm %p : {E} -> {E}\n"
            + f"    %m = fwd.elementwise mul %r, %w : {E}, {E} -> {E}\n    fwd.yield %m : {E}\n  }}\n"
        )
        return fused("add_norm", "4, 5, 6", body, outs=(E, E), yields="%s, %n")

    assert refusals(nested("norm_weight")) == []
    assert [r.branch for r in refusals(nested("strided_read"))] == ["S13"]
    module = parse(nested("norm_scale"))
    assert [r.branch for _, r in legalize(ForwardShim(), module)] == ["F05"]
    (f,) = [op for op in module.walk() if isinstance(op, FusedOp)]
    assert f.class_.data == "add_norm"
    assert [p.name for p in f.parts()] == ["fwd.elementwise", "fwd.rms_norm", "fwd.elementwise"]


def test_random_modules_strict_and_mark_agree() -> None:
    """Random mixes of branch cases: strict errors and mark attributes name the same ops and reasons."""
    rng = random.Random()
    ids = [b for b, (_, k) in CASES.items() if k is Q8MatKind.DEQUANT and not b.startswith("F0") and b[0] != "S"]
    for _ in range(5):
        picks = rng.sample(ids, 4)
        texts = [CASES[b][0] for b in picks]
        text = regions(*texts)
        strict = parse(text)
        with pytest.raises(PassFailedException) as e:
            LegalizePass().apply(Context(), strict)
        lines = str(e.value).splitlines()
        marked = parse(text)
        LegalizePass(mode="mark").apply(Context(), marked)
        reasons = [op.attributes["fwd.refused"].data for op in marked.walk() if "fwd.refused" in op.attributes]
        assert [ln.split(": error: ", 1)[1] for ln in lines] == reasons == [SEED[b] + SPECIFICS.get(b, "") for b in picks]


def test_kernel_refusal_judges_primitives_only() -> None:
    module = parse(X + f'%w = fwd.weight "w" : !fwd.weights<32x64, q8_0>\n%z = fwd.view %x : {E} -> {E}\n%q = fwd.quantize %x one_word : {E} -> !fwd.qact<64, one_word>\n')
    assert [kernel_refusal(op) for op in module.body.block.ops] == [None] * 5
    assert [ForwardShim().fits(op) for op in stages(module)] == [SEED["F03"], SEED["F04"]]


def test_moe_manifest_names_an_unnamed_stage_by_location() -> None:
    text = moe(extra="renormalize act swiglu scoring softmax", router_ty=T(4, 64)).replace("%moe =", "%0 =")
    (r,) = refusals(text)
    assert r.reason == "moe stage `fwd.moe at t.mlir:6:1` has no entry in the MoE weight manifest"


# ---- B07: the shapes of parts each native fused class's kernel computes ----------------------

_WANT = "where it computes [add] rms_norm [mul by a weight] [quantize]"
_Q = "!fwd.qact<64, one_word>"
B07_CASES = [
    # (class, covers, body, ins, outs, yields, branch, the words after B07's dash)
    ("norm_weight", "0, 1", f"  %t = fwd.rms_norm %a_ : {E} -> {E}\n" + ew("s", "mul", "t", "t"), ("a",), (E,), "%s",
     "B07", "a multiply after the norm that is not by a weight vector"),
    ("norm_weight", "0, 1", f"  %t = fwd.rms_norm %a_ : {E} -> {E}\n" + ew("s", "mul", "t", "b_"), ("a", "b"), (E, E), "%s, %s",
     "B07", "its normed row yielded 2 times, where it writes it once"),
    ("norm_quant", "0, 1", f"  %t = fwd.rms_norm %a_ : {E} -> {E}\n  %s = fwd.silu %t : {E} -> {E}\n", ("a",), (E,), "%s",
     "B07", f"a fwd.silu after the norm, {_WANT}"),
    ("add_norm_quant", "0, 1", ew("t", "sub", "a_", "b_") + f"  %s = fwd.rms_norm %t : {E} -> {E}\n", ("a", "b"), (E,), "%s",
     "B07", "an elementwise sub into the norm, where it adds a residual"),
    ("add_norm", "0, 1", ew("t", "add", "a_", "b_") + f"  %s = fwd.layer_norm %t : {E} -> {E}\n", ("a", "b"), (E,), "%s",
     "B07", f"fwd.elementwise add, fwd.layer_norm, {_WANT}"),
    ("elementwise_regions", "0, 1", ew("t", "add", "a_", "b_") + f"  %s = fwd.softmax %t : {E} -> {E}\n", ("a", "b"), (E,), "%s",
     "B07", "a fwd.softmax, where it computes silus and elementwise ops only"),
    ("elementwise_chains", "0, 1", f"  %t = fwd.rms_norm %a_ : {E} -> {E}\n  %s = fwd.silu %t : {E} -> {E}\n", ("a",), (E,), "%s",
     "B07", "a fwd.rms_norm, where it computes silus and elementwise ops only"),
    # the seed's class checks win: F05 (the norm is not the next stage) over a layer_norm's B07
    ("add_norm", "0, 2", ew("t", "add", "a_", "b_") + f"  %s = fwd.layer_norm %t : {E} -> {E}\n", ("a", "b"), (E,), "%s",
     "F05", None),
]  # fmt: skip


@pytest.mark.parametrize("case", B07_CASES, ids=lambda c: c[0])
def test_fused_shapes_legality_and_lowering_agree(case) -> None:
    """A native fused op of parts its kernel does not compute: refused by B07 after the seed's class
    checks, and `fwd-lower-numba`'s `Unlowerable` says the same words (one source)."""
    from fwdshim.codegen.fused import lower_fused
    from fwdshim.codegen.launch import Unlowerable

    cls, covers, body, ins, outs, yields, branch, what = case
    module = parse(fused(cls, covers, body, ins=ins, outs=outs, yields=yields))
    got = [r for _, r in legalize(ForwardShim(Q8MatKind.INT8_ACT), module)]
    reason = f"a fused {cls} of parts its kernel does not compute — {what}" if what else SEED[branch]
    assert [(r.branch, r.reason) for r in got] == [(branch, reason)]
    if what is not None:
        op = next(o for o in module.walk() if isinstance(o, FusedOp))
        with pytest.raises(Unlowerable) as e:
            lower_fused(op)
        assert str(e.value) == reason


def test_well_formed_fused_ops_fit_and_lower() -> None:
    """Each norm class over `[add] rms_norm [mul w] [quantize]`, and the elementwise classes: native."""
    from fwdshim.codegen.fused import lower_fused

    norm_mul = f"  %t = fwd.rms_norm %a_ : {E} -> {E}\n" + ew("s", "mul", "t", "b_")
    add_norm = ew("t", "add", "a_", "b_") + f"  %s = fwd.rms_norm %t : {E} -> {E}\n"
    quant = f"  %q = fwd.quantize %s one_word : {E} -> {_Q}\n"
    texts = [
        fused("norm_weight", "0, 1", norm_mul),
        fused("add_norm", "0, 1", add_norm, outs=(E, E), yields="%t, %s"),
        fused("norm_quant", "0, 1, 2", norm_mul + quant, outs=(_Q,), yields="%q"),
        fused("add_norm_quant", "0, 1, 2", add_norm + quant, outs=(E, _Q), yields="%t, %q"),
        fused("elementwise_chains", "0, 1", ew("t", "add", "a_", "b_") + f"  %s = fwd.silu %t : {E} -> {E}\n"),
        fused("elementwise_regions", "0, 1, 2", ew("t", "add", "a_", "b_") + ew("u", "sub", "a_", "t") + ew("s", "mul", "t", "u")),
    ]
    module = parse(regions(*texts))
    assert [r for _, r in legalize(ForwardShim(Q8MatKind.INT8_ACT), module)] == []
    ops = [o for o in module.walk() if isinstance(o, FusedOp)]
    assert [o.class_.data for o in ops] == ["norm_weight", "add_norm", "norm_quant", "add_norm_quant", "elementwise_chains", "elementwise_regions"]
    assert all(len(lower_fused(o)) == 1 for o in ops)


def test_a_capped_attention_read_by_a_q8_projection_is_refused_once() -> None:
    """Mark mode under int8-act on IR without quantizes: the soft-capped attention is refused (the seed's
    reason), the Q8_0 projection reading its f32 output is not (the seed's `fits` is Ok there): one
    refusal, as the seed gives; the projection's f32 read is the lowering's error."""
    att = attention(extra="softcap 30.0")
    proj = f'%w = fwd.weight "w" : !fwd.weights<32x128, q8_0>\n%z = fwd.matmul %att, %w : {T(128)}, !fwd.weights<32x128, q8_0> -> {T(32)}\n'
    got = refusals(att + proj, Q8MatKind.INT8_ACT)
    assert [r.op_name for r in got] == ["fwd.attention"]
    assert [name for name, _ in mismatches(att + proj, Q8MatKind.INT8_ACT)] == ["fwd.matmul"]


def test_the_executor_refuses_reads_its_contract_does_not_name() -> None:
    """The reference executor runs the numerics the IR spells; a module whose `fwd.numerics` contract
    (int8-act) reads a Q8_0 matmul's activation as f32 is a located error there, naming the pass."""
    import gguf
    import numpy as np
    from support import seeds

    from fwdshim.reference import execute
    from fwdshim.shim.contract import contract_attr
    from fwdshim.weights import DictWeights

    g = seeds.rng()
    raw = gguf.quants.quantize(g.standard_normal((32, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    store = DictWeights(w=(raw, gguf.GGMLQuantizationType.Q8_0))
    x = g.standard_normal(64).astype(np.float32)
    want = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q8_0).astype(np.float64) @ x
    text = f"func.func @f(%x: {E}) -> {T(32)} {{\n" + Q8 + q8_matmul("x", E) + f"func.return %z : {T(32)}\n}}\n"
    module = parse(text)
    got = execute(module, [x], store)[0]  # no contract: dequant, as the IR says
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    module.attributes["fwd.numerics"] = contract_attr(ForwardShim(Q8MatKind.INT8_ACT))
    with pytest.raises(ValueError, match=r"^t\.mlir:3:1: `fwd\.matmul` reading an f32 activation .*fwd-quantize-activations\{numerics=int8-act\}"):
        execute(module, [x], store)


def test_a_contract_of_other_numerics_or_an_unreadable_one_is_not_replaced_silently() -> None:
    """fwd-legalize writes its contract (`fwd.numerics`); where the module holds one of other numerics, or
    one that names no shim, it says so (a located `ContractReplaced` warning) before replacing it; the
    same contract again is no news."""
    import warnings

    from xdsl.dialects.builtin import DictionaryAttr, StringAttr

    from fwdshim.passes.legalize import ContractReplaced
    from fwdshim.shim.contract import NUMERICS_ATTR

    text = f"func.func @f(%x: {E}) -> {E} {{\n  %y = fwd.silu %x : {E} -> {E}\n  func.return %y : {E}\n}}\n"
    module = parse(text)
    ctx = Context()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none on a module without a contract, nor for the same one again
        LegalizePass(numerics="int8-act").apply(ctx, module)
        LegalizePass(numerics="int8-act").apply(ctx, module)
    with pytest.warns(ContractReplaced, match=r": fwd-legalize\{numerics=dequant\} replaces the module's fwd\.numerics "
                                              r"contract cuda-forward:Int8Act \(written for numerics=int8-act\) with cuda-forward:Dequant$"):  # fmt: skip
        LegalizePass(numerics="dequant").apply(ctx, module)
    assert module.attributes[NUMERICS_ATTR].data["shim"] == StringAttr("cuda-forward:Dequant")
    module.attributes[NUMERICS_ATTR] = DictionaryAttr({"shim": StringAttr("bogus")})
    with pytest.warns(ContractReplaced, match=r'fwd\.numerics names the shim "bogus".*replaces it with cuda-forward:TwoPassInt8$'):
        LegalizePass(numerics="two-pass-int8").apply(ctx, module)
