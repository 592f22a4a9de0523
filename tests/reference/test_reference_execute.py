"""The reference executor on parsed `fwd` IR: a tiny 2-layer decode step (a Llama layer, then an
add_norm-fused layer with a MoE) run end to end against an independent float64 NumPy forward; its
int8-activation variant against the per-op functions; inputs, weights and refusals."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func

from fwdshim import reference as ref
from fwdshim.diagnostics import LocatingParser
from fwdshim.dialects.fwd import Fwd
from fwdshim.int8 import QAct
from fwdshim.weights import DictWeights, MissingWeight, quantize_weight

rng = np.random.default_rng(0)  # reseeded before each test by tests/conftest.py
D, H, KV, HD, HALF, FF, L, E, TOP = 64, 4, 2, 16, 8, 96, 8, 4, 2


def parse(text: str) -> ModuleOp:
    ctx = Context()
    for dialect in (Builtin, Func, Fwd):
        ctx.load_dialect(dialect)
    return LocatingParser(ctx, text, "test.mlir").parse_module()


def _w(name: str, t: str) -> str:
    return f'%{name.replace(".", "_")} = fwd.weight "{name}" : {t}'


def _mm(out: str, x: str, w: str, n: int, k: int, quant: bool) -> str:
    xt = f"!fwd.qact<{k}, one_word>" if quant else f"tensor<{k}xf32>"
    return f"%{out} = fwd.matmul %{x}, %{w} : {xt}, !fwd.weights<{n}x{k}, q8_0> -> tensor<{n}xf32>"


def _q(out: str, x: str, k: int, quant: bool) -> str:
    if not quant:
        return ""
    return f"%{out} = fwd.quantize %{x} one_word : tensor<{k}xf32> -> !fwd.qact<{k}, one_word>"


def _attention_block(i: int, x: str, quant: bool) -> list[str]:
    b, v64, t = f"blk_{i}_", "tensor<64xf32>", "tensor<32xf32>"
    a = "qn" if quant else "n"
    return [
        _w(f"blk.{i}.attn_norm.weight", v64),
        *(_w(f"blk.{i}.attn_{p}.weight", f"!fwd.weights<{n}x{D}, q8_0>") for p, n in (("q", 64), ("k", 32), ("v", 32), ("output", 64))),
        f"%n{i} = fwd.rms_norm %{x} weight(%{b}attn_norm_weight : {v64}) eps 1.0e-05 : {v64} -> {v64}",
        _q(f"qn{i}", f"n{i}", D, quant),
        _mm(f"q{i}", f"{a}{i}", f"{b}attn_q_weight", 64, D, quant),
        _mm(f"k{i}", f"{a}{i}", f"{b}attn_k_weight", 32, D, quant),
        _mm(f"v{i}", f"{a}{i}", f"{b}attn_v_weight", 32, D, quant),
        f"%qr{i} = fwd.rope %q{i}, %angles hd {HD} half {HALF} rows 1 : {v64}, tensor<2x{HALF}xf32> -> {v64}",
        f"%kr{i} = fwd.rope %k{i}, %angles hd {HD} half {HALF} rows 1 : {t}, tensor<2x{HALF}xf32> -> {t}",
        f"%att{i} = fwd.attention %qr{i}, %kr{i}, %v{i}, %kc{i}, %vc{i} h {H} kv {KV} hd {HD} vd {HD} l {L} rows 1 : "
        f"{v64}, {t}, {t}, tensor<{L - 1}x32xf32>, tensor<{L - 1}x32xf32> -> {v64}",
        f"%o{i} = fwd.matmul %att{i}, %{b}attn_output_weight : {v64}, !fwd.weights<64x{D}, q8_0> -> {v64}",
    ]


def module_text(quant: bool) -> str:
    v64, vff = "tensor<64xf32>", f"tensor<{FF}xf32>"
    cache = f"tensor<{L - 1}x32xf32>"
    body = [
        *_attention_block(0, "x", quant),
        # layer 0 MLP: residual, weighted norm, SwiGLU, down, residual
        "%x1 = fwd.elementwise add %x, %o0 : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>",
        _w("blk.0.ffn_norm.weight", v64),
        *(_w(f"blk.0.ffn_{p}.weight", f"!fwd.weights<{FF}x{D}, q8_0>") for p in ("gate", "up")),
        _w("blk.0.ffn_down.weight", f"!fwd.weights<{D}x{FF}, q8_0>"),
        f"%m0 = fwd.rms_norm %x1 eps 1.0e-05 : {v64} -> {v64}",
        f"%h0 = fwd.elementwise mul %m0, %blk_0_ffn_norm_weight : {v64}, {v64} -> {v64}",
        _q("hq0", "h0", D, quant),
        _mm("g0", "hq0" if quant else "h0", "blk_0_ffn_gate_weight", FF, D, quant),
        _mm("u0", "hq0" if quant else "h0", "blk_0_ffn_up_weight", FF, D, quant),
        f"%ga0 = fwd.silu %g0 : {vff} -> {vff}",
        f"%gu0 = fwd.elementwise mul %ga0, %u0 : {vff}, {vff} -> {vff}",
        f"%d0 = fwd.matmul %gu0, %blk_0_ffn_down_weight : {vff}, !fwd.weights<{D}x{FF}, q8_0> -> {v64}",
        f"%y0 = fwd.elementwise add %x1, %d0 : {v64}, {v64} -> {v64}",
        # layer 1: attention, then add_norm fused (sum carried on), MoE, residual
        *_attention_block(1, "y0", quant),
        _w("blk.1.ffn_norm.weight", v64),
        _w("blk.1.ffn_gate_inp.weight", f"!fwd.weights<{E}x{D}, q8_0>"),
        *(_w(f"blk.1.ffn_{p}_exps.weight", f"!fwd.weights<{E}x{FF}x{D}, q8_0>") for p in ("gate", "up")),
        _w("blk.1.ffn_down_exps.weight", f"!fwd.weights<{E}x{D}x{FF}, q8_0>"),
        f"%an:2 = fwd.fused add_norm covers [30, 31] ins(%y0, %o1, %blk_1_ffn_norm_weight) : ({v64}, {v64}, {v64}) -> ({v64}, {v64}) {{",
        f"^bb0(%a: {v64}, %b: {v64}, %w: {v64}):",
        f"  %s = fwd.elementwise add %a, %b : {v64}, {v64} -> {v64}",
        f"  %n = fwd.rms_norm %s weight(%w : {v64}) eps 1.0e-05 : {v64} -> {v64}",
        f"  fwd.yield %s, %n : {v64}, {v64}",
        "}",
        _q("hq1", "an#1", D, quant),
        f"%moe = fwd.moe %{'hq1' if quant else 'an#1'}, %blk_1_ffn_gate_inp_weight, %blk_1_ffn_gate_exps_weight, "
        f"%blk_1_ffn_up_exps_weight, %blk_1_ffn_down_exps_weight n_expert {E} top_k {TOP} renormalize act swiglu "
        f"scoring softmax : {f'!fwd.qact<{D}, one_word>' if quant else v64}, !fwd.weights<{E}x{D}, q8_0>, "
        f"!fwd.weights<{E}x{FF}x{D}, q8_0>, !fwd.weights<{E}x{FF}x{D}, q8_0>, !fwd.weights<{E}x{D}x{FF}, q8_0> -> {v64}",
        f"%out = fwd.elementwise add %an#0, %moe : {v64}, {v64} -> {v64}",
        "func.return %out, %kr0, %v0, %kr1, %v1 : tensor<64xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>",
    ]
    head = (
        f"func.func @decode_step(%x: {v64}, %angles: tensor<2x{HALF}xf32>, %kc0: {cache}, %vc0: {cache}, "
        f"%kc1: {cache}, %vc1: {cache}) -> ({v64}, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) {{"
    )
    return "\n".join([head, *("  " + line for line in body if line), "}"])


def _weights() -> DictWeights:
    m = parse(module_text(False))
    data = {}
    for op in m.walk():
        if op.name == "fwd.weight":
            shape = op.result.type.dims if hasattr(op.result.type, "dims") else tuple(op.result.type.get_shape())
            values = (rng.standard_normal(shape) * (0.15 if len(shape) > 1 else 1.0)).astype(np.float32)
            if len(shape) == 1:
                values = 1.0 + 0.1 * values
            data[op.tensor_name.data] = values if len(shape) == 1 else quantize_weight(values)
    return DictWeights(data)


def _inputs(rows: int) -> dict[str, np.ndarray]:
    return {
        "x": rng.standard_normal(D).astype(np.float32),
        "angles": ref.rope_angles(rows, HALF),
        **{f"{c}{i}": rng.standard_normal((rows, KV * HD)).astype(np.float32) for c in ("kc", "vc") for i in (0, 1)},
    }


# ---------------------------------------------------------------------------------------------
# an independent float64 forward


def _f64_forward(inp: dict[str, np.ndarray], store: DictWeights) -> list[np.ndarray]:
    def w(name):
        return store.get(name).f32.astype(np.float64)

    def norm(h, weight):
        return h / np.sqrt(np.mean(h**2) + 1e-5) * weight

    def rope(v, ang):
        heads = v.reshape(-1, HD)
        lo, hi = heads[:, :HALF], heads[:, HALF:]
        return np.concatenate([lo * ang[0] - hi * ang[1], lo * ang[1] + hi * ang[0]], axis=1).ravel()

    def attend(q, k, v, kc, vc):
        keys = np.vstack([kc, k[None]]).reshape(-1, KV, HD)
        vals = np.vstack([vc, v[None]]).reshape(-1, KV, HD)
        out = []
        for j in range(H):
            g = j // (H // KV)
            s = keys[:, g] @ q[j * HD : (j + 1) * HD] / np.sqrt(HD)
            p = np.exp(s - s.max())
            out.append((p / p.sum()) @ vals[:, g])
        return np.concatenate(out)

    def silu(v):
        return v / (1 + np.exp(-v))

    ang = inp["angles"].astype(np.float64)
    x = inp["x"].astype(np.float64)
    outs = []
    for i in (0, 1):
        b = f"blk.{i}."
        n = norm(x, w(b + "attn_norm.weight"))
        q, k, v = (w(b + f"attn_{p}.weight") @ n for p in "qkv")
        q, k = rope(q, ang), rope(k, ang)
        att = attend(q, k, v, inp[f"kc{i}"].astype(np.float64), inp[f"vc{i}"].astype(np.float64))
        x = x + w(b + "attn_output.weight") @ att
        outs += [k, v]
        h = norm(x, w(b + "ffn_norm.weight"))
        if i == 0:
            x = x + w(b + "ffn_down.weight") @ (silu(w(b + "ffn_gate.weight") @ h) * (w(b + "ffn_up.weight") @ h))
            continue
        logits = w(b + "ffn_gate_inp.weight") @ h
        p = np.exp(logits - logits.max())
        p /= p.sum()
        top = sorted(range(E), key=lambda e: (-p[e], e))[:TOP]
        gate, up, down = (w(b + f"ffn_{n}_exps.weight") for n in ("gate", "up", "down"))
        x = x + sum(p[e] / p[top].sum() * (down[e] @ (silu(gate[e] @ h) * (up[e] @ h))) for e in top)
    return [x, *outs]


@pytest.mark.parametrize("rows", [0, 3, L - 1])
def test_two_layer_decode_step_against_float64_forward(rows):
    m, store, inp = parse(module_text(False)), _weights(), _inputs(rows)
    outs = ref.execute(m, inp, store)
    expect = _f64_forward(inp, store)
    assert [o.shape for o in outs] == [(64,), (32,), (32,), (32,), (32,)]
    for o, e in zip(outs, expect):
        assert o.dtype == np.float32
        np.testing.assert_allclose(o, e, rtol=1e-4, atol=1e-5)


def test_int8_activation_variant_follows_the_per_op_functions():
    """The quantized module: each Q8_0 projection reads a QAct; checked against the per-op functions
    (themselves checked against hand formulas; `ref.matmul` of a QAct is the int8 GEMV's sum, checked
    against the literal `matmul_int8act` in test_reference_ops — not used here, since a last-bit
    difference before the next quantize could flip a quant)."""
    m, store, inp = parse(module_text(True)), _weights(), _inputs(5)
    outs = ref.execute(m, [inp[n] for n in ("x", "angles", "kc0", "vc0", "kc1", "vc1")], store)

    def w(name):
        return store.get(name)

    x, ang, res = inp["x"], inp["angles"], []
    for i in (0, 1):
        b = f"blk.{i}."
        qn = ref.quantize(ref.rms_norm(x, weight=w(b + "attn_norm.weight").f32))
        q, k, v = (ref.matmul(qn, w(b + f"attn_{p}.weight")) for p in "qkv")
        q, k = ref.rope(q, ang, HD, HALF), ref.rope(k, ang, HD, HALF)
        att = ref.attention(q, k, v, inp[f"kc{i}"], inp[f"vc{i}"], H, KV, HD)
        o = ref.matmul(att, w(b + "attn_output.weight"))
        res += [k, v]
        if i == 0:
            x1 = ref.elementwise("add", x, o)
            hq = ref.quantize(ref.elementwise("mul", ref.rms_norm(x1), w(b + "ffn_norm.weight").f32))
            g, u = (ref.matmul(hq, w(b + f"ffn_{p}.weight")) for p in ("gate", "up"))
            x = ref.elementwise("add", x1, ref.matmul(ref.elementwise("mul", ref.silu(g), u), w(b + "ffn_down.weight")))
            continue
        s = ref.elementwise("add", x, o)
        hq = ref.quantize(ref.rms_norm(s, weight=w(b + "ffn_norm.weight").f32))
        mo = ref.moe(hq, *(w(b + f"ffn_{n}.weight") for n in ("gate_inp", "gate_exps", "up_exps", "down_exps")), top_k=TOP)
        x = ref.elementwise("add", s, mo)
    for o, e in zip(outs, [x, *res]):
        np.testing.assert_allclose(o, e, rtol=1e-5, atol=1e-6)
    # and the quantization shows: layer 0's k and v differ from the dequant module's by quantization
    # error only (later values may route to other experts)
    plain = ref.execute(parse(module_text(False)), inp, store)
    for i in (1, 2):
        assert not np.array_equal(plain[i], outs[i])
        np.testing.assert_allclose(plain[i], outs[i], atol=0.05)


def test_execute_op_and_fused_region():
    m = parse(module_text(False))
    fused = next(op for op in m.walk() if op.name == "fwd.fused")
    a, b, wn = (rng.standard_normal(64).astype(np.float32) for _ in range(3))
    s, n = ref.execute_op(fused, [a, b, wn])
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_allclose(n, ref.rms_norm(a + b, weight=wn), rtol=0, atol=0)
    quant = parse(module_text(True))
    qop = next(op for op in quant.walk() if op.name == "fwd.quantize")
    (qa,) = ref.execute_op(qop, [a])
    assert isinstance(qa, QAct) and qa.q.shape == (64,)


def test_returned_qact_and_view():
    text = """func.func @f(%x: tensor<96xf32>) -> (!fwd.qact<32, two_words>, tensor<2x16xf32>) {
      %v = fwd.view %x offset 40 : tensor<96xf32> -> tensor<32xf32>
      %q = fwd.quantize %v two_words : tensor<32xf32> -> !fwd.qact<32, two_words>
      %w = fwd.view %x offset 8 : tensor<96xf32> -> tensor<2x16xf32>
      func.return %q, %w : !fwd.qact<32, two_words>, tensor<2x16xf32>
    }"""
    x = rng.standard_normal(96).astype(np.float32)
    q, w = ref.execute(parse(text), {"x": x})
    assert isinstance(q, QAct) and q.s is not None
    np.testing.assert_array_equal(q.q, ref.quantize(x[40:72]).q)
    np.testing.assert_array_equal(w, x[8:40].reshape(2, 16))


# ---------------------------------------------------------------------------------------------
# errors


def test_refused_primitive_names_the_op_and_location():
    text = """func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
      %r = fwd.relu %x : (tensor<8xf32>) -> tensor<8xf32>
      func.return %r : tensor<8xf32>
    }"""
    with pytest.raises(NotImplementedError, match=r"test.mlir:2:\d+: .*`fwd.relu`"):
        ref.execute(parse(text), [np.ones(8, np.float32)])


def test_refused_attention_field():
    text = """func.func @f(%q: tensor<32xf32>, %k: tensor<16xf32>, %c: tensor<3x16xf32>) -> tensor<32xf32> {
      %a = fwd.attention %q, %k, %k, %c, %c h 2 kv 1 hd 16 vd 16 l 4 rows 1 pos 2 : tensor<32xf32>, tensor<16xf32>, tensor<16xf32>, tensor<3x16xf32>, tensor<3x16xf32> -> tensor<32xf32>
      func.return %a : tensor<32xf32>
    }"""
    inputs = [np.ones(32, np.float32), np.ones(16, np.float32), np.ones((3, 16), np.float32)]
    with pytest.raises(NotImplementedError, match="an attention with `pos`"):
        ref.execute(parse(text), inputs)


def test_inputs_and_weights_are_checked():
    m, store = parse(module_text(False)), _weights()
    inp = _inputs(2)
    with pytest.raises(ValueError, match="inputs lack angles"):
        ref.execute(m, {k: v for k, v in inp.items() if k != "angles"}, store)
    with pytest.raises(ValueError, match="takes 6 inputs, given 1"):
        ref.execute(m, [inp["x"]], store)
    with pytest.raises(ValueError, match=r"input `x` has shape \[65\]"):
        ref.execute(m, {**inp, "x": np.ones(65, np.float32)}, store)
    with pytest.raises(ValueError, match=r"input `kc0` has shape \[9, 32\]"):
        ref.execute(m, {**inp, "kc0": np.ones((9, 32), np.float32)}, store)
    # complex or non-numeric inputs: one message naming the input (NumPy dropped the imaginary parts
    # with a ComplexWarning, or said only "could not convert string to float")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"^input `x` holds complex numbers: the step computes on real values$"):
            ref.execute(m, {**inp, "x": inp["x"] + 1j}, store)
        with pytest.raises(ValueError, match=r"^input `x` is not an array of numbers \(could not convert"):
            ref.execute(m, {**inp, "x": ["a"] * 64}, store)
    with pytest.raises(MissingWeight, match="blk.0.attn_norm.weight"):
        ref.execute(m, inp, DictWeights())
    bad = DictWeights({n: store.get(n) for n in store.names()} | {"blk.0.attn_q.weight": quantize_weight(np.ones((32, 64), np.float32))})
    with pytest.raises(ValueError, match=r"weight `blk.0.attn_q.weight` is \[32, 64\] in the store, declared \[64, 64\]"):
        ref.execute(m, inp, bad)


def test_unknown_entry_lists_every_function_and_takes_an_at_sign():
    two = "func.func @a(%x: tensor<64xf32>) -> tensor<64xf32> {\n  func.return %x : tensor<64xf32>\n}\n"
    m = parse(two + two.replace("@a", "@b"))
    with pytest.raises(ValueError, match=r"entry 'c'; found: a, b\)$"):
        ref.execute(m, [np.ones(64, np.float32)], entry="c")
    out = ref.execute(m, [np.arange(64, dtype=np.float32)], entry="@b")
    assert np.array_equal(out[0], np.arange(64, dtype=np.float32))


def test_an_op_it_cannot_compute_is_named_with_its_location():
    """`kv 0` verifies (legality refuses it, with the seed's reason); the executor said only NumPy's
    `cannot reshape array of size 0 into shape (0)`."""
    text = """func.func @f(%q: tensor<64xf32>, %k: tensor<0xf32>, %kc: tensor<8x0xf32>) -> tensor<64xf32> {
  %a = fwd.attention %q, %k, %k, %kc, %kc h 4 kv 0 hd 16 vd 16 l 9 rows 1 : tensor<64xf32>, tensor<0xf32>, tensor<0xf32>, tensor<8x0xf32>, tensor<8x0xf32> -> tensor<64xf32>
  func.return %a : tensor<64xf32>
}
"""
    m = parse(text)
    ins = [np.ones(64, np.float32), np.ones(0, np.float32), np.ones((8, 0), np.float32)]
    with pytest.raises(ValueError, match=r"^test\.mlir:2:3: the reference executor cannot compute this `fwd.attention` \("):
        ref.execute(m, ins)


@pytest.mark.parametrize("elem", ["f16", "bf16", "i32"])
def test_values_other_than_f32_are_refused_naming_the_op(elem):
    """The executor ran f16, bf16 and i32 IR as float32 and returned float32 arrays."""
    m = parse(f"func.func @f(%x: tensor<64x{elem}>) -> tensor<64x{elem}> {{\n"
              f"  %s = fwd.silu %x : tensor<64x{elem}> -> tensor<64x{elem}>\n  func.return %s : tensor<64x{elem}>\n}}\n")  # fmt: skip
    with pytest.raises(NotImplementedError, match=rf"^test\.mlir:2:3: the reference executor does not compute {elem} values \(`fwd.silu`\)$"):
        ref.execute(m, [np.ones(64, np.float32)])
