"""Helpers the tests share (from tests/codegen/test_lowering_modules.py, which imports them from here, as others do)."""

from __future__ import annotations

import numpy as np
from xdsl.context import Context
from xdsl.dialects import builtin, func, test
from xdsl.dialects.builtin import ModuleOp

from fwdshim.diagnostics import LocatingParser, verify_located
from fwdshim.dialects.fwd import Fwd
from fwdshim.weights import DictWeights, quantize_weight

TINY = dict(d=32, h=2, kv=1, hd=32, ff=64, l=4)
"""The sizes of the simulator tests: every GEMV K a multiple of 32, heads of 32 (whole blocks)."""


TINY_MOE = dict(d=32, h=2, kv=1, hd=32, ff=32, l=4, experts=(4, 2))
"""A tiny Mixtral layer: 4 experts, top 2."""


SMOL = dict(d=576, h=9, kv=3, hd=64, ff=1536, l=4096)
"""The sizes of `examples/llama_layer.mlir` (SmolLM-135M), for the GPU suite."""


def context() -> Context:
    ctx = Context(allow_unregistered=True)
    for d in (builtin.Builtin, func.Func, test.Test, Fwd):
        ctx.load_dialect(d)
    return ctx


def parse(src: str, name: str = "test.mlir") -> ModuleOp:
    m = LocatingParser(context(), src, name).parse_module()
    verify_located(m)
    return m


def pipeline(m: ModuleOp, numerics: str) -> ModuleOp:
    from fwdshim.passes.pipeline import ForwardShimPass

    ForwardShimPass(numerics=numerics).apply(context(), m)
    return m


def legalize_only(m: ModuleOp, numerics: str = "dequant", mode: str = "strict") -> ModuleOp:
    from fwdshim.passes.legalize import LegalizePass

    LegalizePass(numerics=numerics, mode=mode).apply(context(), m)
    return m


def unfused(m: ModuleOp, numerics: str) -> ModuleOp:
    """The stages `forward-shim` would run, without fusion: activations quantized, then legalized."""
    from fwdshim.passes.quantize_activations import QuantizeActivationsPass

    QuantizeActivationsPass(numerics=numerics).apply(context(), m)
    return legalize_only(m, numerics)


def llama_src(d: int, h: int, kv: int, hd: int, ff: int, l: int, experts: tuple[int, int] | None = None,  # noqa: E741
              wtype: str = "q8_0", qk_norm: bool = False, bias: bool = False) -> str:  # fmt: skip
    """One decode layer: weighted RMS norm, q/k/v (`wtype`, default Q8_0), rope, GQA attention, o,
    residual; weighted RMS norm, SwiGLU MLP (or, with `experts = (E, top_k)`, a Mixtral MoE, Q8_0),
    residual. Returns (out, k_r, v). `qk_norm` (Qwen3's): q and k typed as heads, each head's row
    RMS-normed and weighted before the rope. `bias` (Qwen2's): a bias added to q, k and v after the
    three projections."""
    q, kvw, half = h * hd, kv * hd, hd // 2
    t = lambda n: f"tensor<{n}xf32>"  # noqa: E731
    qt, kt = (f"tensor<{h}x{hd}xf32>", f"tensor<{kv}x{hd}xf32>") if qk_norm else (t(q), t(kvw))
    heads = f"""  %qnw = fwd.weight "blk.0.attn_q_norm.weight" : {t(hd)}
  %knw = fwd.weight "blk.0.attn_k_norm.weight" : {t(hd)}
  %qn = fwd.rms_norm %q weight(%qnw : {t(hd)}) eps 1.0e-06 : {qt} -> {qt}
  %kn = fwd.rms_norm %k weight(%knw : {t(hd)}) eps 1.0e-06 : {kt} -> {kt}
""" if qk_norm else ""
    qn, kn = ("%qn", "%kn") if qk_norm else ("%q", "%k")
    biases = f"""\
  %qb = fwd.weight "blk.0.attn_q.bias" : {qt}
  %kb = fwd.weight "blk.0.attn_k.bias" : {kt}
  %vb = fwd.weight "blk.0.attn_v.bias" : {t(kvw)}
  %qbi = fwd.elementwise add %q, %qb : {qt}, {qt} -> {qt}
  %kbi = fwd.elementwise add %k, %kb : {kt}, {kt} -> {kt}
  %vbi = fwd.elementwise add %v, %vb : {t(kvw)}, {t(kvw)} -> {t(kvw)}
""" if bias else ""
    if bias:
        assert not qk_norm, "one of qk_norm and bias"
        qn, kn = "%qbi", "%kbi"
    v = "%vbi" if bias else "%v"
    w = lambda n, k: f"!fwd.weights<{n}x{k}, {wtype}>"  # noqa: E731
    cache = f"tensor<{l - 1}x{kvw}xf32>"
    mlp = f"""\
  %wg = fwd.weight "blk.0.ffn_gate.weight" : {w(ff, d)}
  %wu = fwd.weight "blk.0.ffn_up.weight" : {w(ff, d)}
  %wd = fwd.weight "blk.0.ffn_down.weight" : {w(d, ff)}
  %g = fwd.matmul %h1, %wg : {t(d)}, {w(ff, d)} -> {t(ff)}
  %u = fwd.matmul %h1, %wu : {t(d)}, {w(ff, d)} -> {t(ff)}
  %ga = fwd.silu %g : {t(ff)} -> {t(ff)}
  %gu = fwd.elementwise mul %ga, %u : {t(ff)}, {t(ff)} -> {t(ff)}
  %dn = fwd.matmul %gu, %wd : {t(ff)}, {w(d, ff)} -> {t(d)}
"""
    if experts is not None:
        e, k = experts
        ws = f"!fwd.weights<{e}x{d}, q8_0>, !fwd.weights<{e}x{ff}x{d}, q8_0>, !fwd.weights<{e}x{ff}x{d}, q8_0>, !fwd.weights<{e}x{d}x{ff}, q8_0>"
        mlp = f"""\
  %router = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<{e}x{d}, q8_0>
  %gexps = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<{e}x{ff}x{d}, q8_0>
  %uexps = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<{e}x{ff}x{d}, q8_0>
  %dexps = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<{e}x{d}x{ff}, q8_0>
  %dn = fwd.moe %h1, %router, %gexps, %uexps, %dexps n_expert {e} top_k {k} renormalize act swiglu scoring softmax : {t(d)}, {ws} -> {t(d)}
"""
    return f"""\
func.func @decode_step(%x: {t(d)}, %angles: tensor<2x{half}xf32>, %k_cache: {cache}, %v_cache: {cache}) -> ({t(d)}, {kt}, {t(kvw)}) {{
  %anw = fwd.weight "blk.0.attn_norm.weight" : {t(d)}
  %wq = fwd.weight "blk.0.attn_q.weight" : {w(q, d)}
  %wk = fwd.weight "blk.0.attn_k.weight" : {w(kvw, d)}
  %wv = fwd.weight "blk.0.attn_v.weight" : {w(kvw, d)}
  %wo = fwd.weight "blk.0.attn_output.weight" : {w(d, q)}
  %fnw = fwd.weight "blk.0.ffn_norm.weight" : {t(d)}
  %n0 = fwd.rms_norm %x eps 1.0e-05 : {t(d)} -> {t(d)}
  %h0 = fwd.elementwise mul %n0, %anw : {t(d)}, {t(d)} -> {t(d)}
  %q = fwd.matmul %h0, %wq : {t(d)}, {w(q, d)} -> {qt}
  %k = fwd.matmul %h0, %wk : {t(d)}, {w(kvw, d)} -> {kt}
  %v = fwd.matmul %h0, %wv : {t(d)}, {w(kvw, d)} -> {t(kvw)}
{heads}{biases}  %q_r = fwd.rope {qn}, %angles hd {hd} half {half} rows 1 : {qt}, tensor<2x{half}xf32> -> {qt}
  %k_r = fwd.rope {kn}, %angles hd {hd} half {half} rows 1 : {kt}, tensor<2x{half}xf32> -> {kt}
  %att = fwd.attention %q_r, %k_r, {v}, %k_cache, %v_cache h {h} kv {kv} hd {hd} vd {hd} l {l} rows 1 : {qt}, {kt}, {t(kvw)}, {cache}, {cache} -> {t(q)}
  %o = fwd.matmul %att, %wo : {t(q)}, {w(d, q)} -> {t(d)}
  %x1 = fwd.elementwise add %x, %o : {t(d)}, {t(d)} -> {t(d)}
  %n1 = fwd.rms_norm %x1 eps 1.0e-05 : {t(d)} -> {t(d)}
  %h1 = fwd.elementwise mul %n1, %fnw : {t(d)}, {t(d)} -> {t(d)}
{mlp}  %out = fwd.elementwise add %x1, %dn : {t(d)}, {t(d)} -> {t(d)}
  func.return %out, %k_r, {v} : {t(d)}, {kt}, {t(kvw)}
}}
"""


def llama_weights(rng: np.random.Generator, d: int, h: int, kv: int, hd: int, ff: int, l: int, experts: tuple[int, int] | None = None,  # noqa: E741
                  wtype: str = "q8_0", qk_norm: bool = False, bias: bool = False) -> DictWeights:  # fmt: skip
    """Random weights of `llama_src`: f32 norm weights near 1, Q8_0 (or F32, F16, BF16) projections
    (gguf quantizer), or random blocks of `wtype` (`ggml_blocks.random_raw`); with `qk_norm`, the heads' norm weights; with
    `bias`, the q, k, v biases."""
    q, kvw = h * hd, kv * hd
    shapes = {"attn_q": (q, d), "attn_k": (kvw, d), "attn_v": (kvw, d), "attn_output": (d, q)}
    if experts is None:
        shapes.update({"ffn_gate": (ff, d), "ffn_up": (ff, d), "ffn_down": (d, ff)})
    else:
        e = experts[0]
        shapes.update({"ffn_gate_inp": (e, d), "ffn_gate_exps": (e, ff, d), "ffn_up_exps": (e, ff, d), "ffn_down_exps": (e, d, ff)})
    if wtype not in ("q8_0", "f32", "f16", "bf16"):
        from fwdshim import ggml_blocks as G

        qt = G.QT[wtype.upper()]
        small = 1e-3 if G.BLOCK_VALUES[qt] == 256 else 1.0  # a K-quant's scale times 6-bit sub-block scales
        mats = {f"blk.0.{n}.weight": (G.random_raw(qt, *s, rng, scale=0.3 * small / np.sqrt(s[-1])), qt) for n, s in shapes.items()}
    else:
        mats = {
            f"blk.0.{n}.weight": quantize_weight((rng.standard_normal(s) / np.sqrt(s[-1])).astype(np.float32), wtype)
            for n, s in shapes.items()
        }
    norms = {
        f"blk.0.{n}.weight": (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)
        for n in ("attn_norm", "ffn_norm")
    }
    if qk_norm:  # drawn after the rest: a layer without qk-norm keeps its weights
        norms.update({f"blk.0.{n}.weight": (1.0 + 0.3 * rng.standard_normal(hd)).astype(np.float32) for n in ("attn_q_norm", "attn_k_norm")})
    if bias:
        norms.update({f"blk.0.{n}.bias": (0.5 * rng.standard_normal(w)).astype(np.float32) for n, w in (("attn_q", q), ("attn_k", kvw), ("attn_v", kvw))})
    return DictWeights({**mats, **norms})


def llama_inputs(rng: np.random.Generator, d: int, h: int, kv: int, hd: int, ff: int, l: int, rows: int, experts=None) -> dict[str, np.ndarray]:  # noqa: E741
    """Random inputs with `rows` cache rows written (x, angles as cos/sin of random angles, caches)."""
    theta = rng.uniform(0, 2 * np.pi, hd // 2)
    return {
        "x": rng.standard_normal(d).astype(np.float32),
        "angles": np.stack([np.cos(theta), np.sin(theta)]).astype(np.float32),
        "k_cache": rng.standard_normal((rows, kv * hd)).astype(np.float32),
        "v_cache": rng.standard_normal((rows, kv * hd)).astype(np.float32),
    }
