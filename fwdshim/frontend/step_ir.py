"""The `fwd` IR of one decode step of a llama model, from its hyperparameters and tensor manifest.

`step_text(params, uses, types, context)` writes the step as text (the signature is in `gguf_model`'s
docstring), `describe(...)` the comment lines heading it, and `parse_step(text, source_name)` parses
and verifies it with every op located in `source_name`: the text is what `fwdshim import -o` writes,
so a diagnostic's `file:line:col` points into the file a user opens (docs/ARCHITECTURE.md says why
the step is not built with xDSL's builders instead).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as QT
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import Func
from xdsl.utils.exceptions import ParseError, VerifyException

from fwdshim.diagnostics import LocatingParser, verify_located
from fwdshim.dialects.attributes import ggml_of
from fwdshim.dialects.fwd import Fwd
from fwdshim.frontend.gguf_model import (
    BIAS, NORM, LlamaParams, ModelError, TensorUse, _dims, _one_line, row_slice, sliced_name,
)  # fmt: skip


def _vec(n: int) -> str:
    return f"tensor<{n}xf32>"


def _wtype(use: TensorUse, qtype: QT) -> str:
    if use.role in (NORM, BIAS):
        return _vec(use.shape[0])
    return f"!fwd.weights<{_dims(use.shape)}, {ggml_of(qtype).value}>"


def step_text(p: LlamaParams, uses: dict[str, TensorUse], types: dict[str, QT], context: int) -> str:
    """The textual `fwd` IR of one decode step (see the module docstring for its signature).

    `types` gives each tensor's GGML type as the step reads it (after any conversion)."""
    l, kvd, qd, d = context, p.kv * p.hd, p.h * p.hd, p.d  # noqa: E741 - the seed's name
    cache = f"tensor<{l - 1}x{kvd}xf32>"
    args = [f"%x: {_vec(d)}", f"%angles: tensor<2x{p.half}xf32>"]
    # Gemma 3's windowed layers turn by angles of another base (`rope_base_swa`): a second table
    swa_angles = p.rope_base_swa is not None and p.rope_base_swa != p.rope_base
    if swa_angles:
        args.append(f"%angles_swa: tensor<2x{p.half}xf32>")
    for i in range(p.n_layer):
        args += [f"%l{i}_k_cache: {cache}", f"%l{i}_v_cache: {cache}"]
    # with qk-norm, q and k are typed as heads (`[h, hd]`, `[kv, hd]`): the norm's rows
    qt, kt = (f"tensor<{p.h}x{p.hd}xf32>", f"tensor<{p.kv}x{p.hd}xf32>") if p.qk_norm else (_vec(qd), _vec(kvd))
    results = [_vec(p.vocab)] + [kt, _vec(kvd)] * p.n_layer
    lines = [f"func.func @decode_step({', '.join(args)}) -> ({', '.join(results)}) {{"]
    emit = lines.append

    def wt(name: str) -> str:
        part = row_slice(name)
        if part is None:
            return _wtype(uses[name], types[name])
        tensor, start, stop = part  # rows of a fused tensor (Phi-3's attn_qkv, ffn_up)
        return _wtype(TensorUse((stop - start, *uses[tensor].shape[1:]), uses[tensor].role, ""), types[tensor])

    def weight(ssa: str, name: str, typed: str | None = None) -> str:
        emit(f'  %{ssa} = fwd.weight "{name}" : {typed or wt(name)}')
        return f"%{ssa}"

    def norm(out: str, x: str, w_name: str) -> str:
        w = weight(out + "_w", w_name)
        emit(f"  %{out}_n = fwd.rms_norm {x} eps {p.eps:.9e} : {_vec(d)} -> {_vec(d)}")
        emit(f"  %{out} = fwd.elementwise mul %{out}_n, {w} : {_vec(d)}, {_vec(d)} -> {_vec(d)}")
        return f"%{out}"

    def matmul(out: str, x: str, n_in: int, name: str, n_out: int, typed: str | None = None, later: list | None = None) -> str:
        """`x · wᵀ` (plus the bias the file holds), its result of type `typed` (default `[n_out]`).
        With `later`, the bias's lines are appended there instead (emitted after the projections that
        read the same x: the plan merges consecutive GEMVs into one launch, each bias its epilogue)."""
        yt = typed or _vec(n_out)
        w = weight(out + "_w", name)
        emit(f"  %{out} = fwd.matmul {x}, {w} : {_vec(n_in)}, {wt(name)} -> {yt}")
        bias = name.removesuffix(".weight") + ".bias"
        if bias not in uses:
            return f"%{out}"
        lines = [f'  %{out}_b = fwd.weight "{bias}" : {yt}', f"  %{out}_biased = fwd.elementwise add %{out}, %{out}_b : {yt}, {yt} -> {yt}"]
        if later is None:
            for line in lines:
                emit(line)
        else:
            later.extend(lines)
        return f"%{out}_biased"

    def head_norm(out: str, x: str, w_name: str, typed: str) -> str:
        """Each head's row of `x` RMS-normed and weighted by `w_name` (one head wide): qk-norm."""
        w = weight(out + "_w", w_name)
        emit(f"  %{out} = fwd.rms_norm {x} weight({w} : {_vec(p.hd)}) eps {p.eps:.9e} : {typed} -> {typed}")
        return f"%{out}"

    x = "%x"
    if p.gemma:  # the embedding row scaled by √d (llama.cpp's `inp_scaled`)
        emit(f"  %x_scaled = fwd.scale %x {{factor = {float(np.sqrt(d)):.9e} : f32}} : ({_vec(d)}) -> {_vec(d)}")
        x = "%x_scaled"
    rets = []
    for i in range(p.n_layer):
        b, s = f"blk.{i}.", f"l{i}_"
        # a window as long as the context attends every position it holds: exactly the plain attention
        window = f" window {p.window}" if p.is_windowed(i) and p.window < l else ""
        # in the op's syntax order: scale, softcap, window
        extra = (f" scale {p.attn_scale:.9e}" if p.attn_scale else "") + (f" softcap {p.attn_softcap:.9e}" if p.attn_softcap else "") + window
        angles_in = "%angles_swa" if swa_angles and p.is_windowed(i) else "%angles"
        emit(f"  // layer {i}: attention")
        h0 = norm(s + "attn_in", x, b + "attn_norm.weight")
        if p.fused:  # q, k and v: rows of the one attn_qkv tensor
            qkv = b + "attn_qkv.weight"
            names = [sliced_name(qkv, 0, qd), sliced_name(qkv, qd, qd + kvd), sliced_name(qkv, qd + kvd, qd + 2 * kvd)]
        else:
            names = [b + "attn_q.weight", b + "attn_k.weight", b + "attn_v.weight"]
        biases: list[str] = []
        q = matmul(s + "q", h0, d, names[0], qd, qt, biases)
        k = matmul(s + "k", h0, d, names[1], kvd, kt, biases)
        v = matmul(s + "v", h0, d, names[2], kvd, None, biases)
        for line in biases:
            emit(line)
        if p.qk_norm:
            q = head_norm(s + "q_normed", q, b + "attn_q_norm.weight", qt)
            k = head_norm(s + "k_normed", k, b + "attn_k_norm.weight", kt)
        rope = f"hd {p.hd} half {p.half} rows 1"
        angles = f"tensor<2x{p.half}xf32>"
        emit(f"  %{s}q_rot = fwd.rope {q}, {angles_in} {rope} : {qt}, {angles} -> {qt}")
        emit(f"  %{s}k_rot = fwd.rope {k}, {angles_in} {rope} : {kt}, {angles} -> {kt}")
        emit(
            f"  %{s}att = fwd.attention %{s}q_rot, %{s}k_rot, {v}, %{s}k_cache, %{s}v_cache "
            f"h {p.h} kv {p.kv} hd {p.hd} vd {p.hd} l {l} rows 1{extra} : "
            f"{qt}, {kt}, {_vec(kvd)}, {cache}, {cache} -> {_vec(qd)}"
        )
        o = matmul(s + "o", f"%{s}att", qd, b + "attn_output.weight", d)
        if p.post_norms:
            o = norm(s + "attn_post", o, b + "post_attention_norm.weight")
        emit(f"  %{s}x_mid = fwd.elementwise add {x}, {o} : {_vec(d)}, {_vec(d)} -> {_vec(d)}")
        emit(f"  // layer {i}: {'mixture of experts' if p.moe else 'GELU-gated MLP' if p.gemma else 'SwiGLU MLP'}")
        h1 = norm(s + "ffn_in", f"%{s}x_mid", b + "ffn_norm.weight")
        ffn = _moe(emit, weight, wt, p, s, b, h1) if p.moe else _mlp(emit, matmul, p, s, b, h1)
        if p.post_norms:
            ffn = norm(s + "ffn_post", ffn, b + "post_ffw_norm.weight")
        emit(f"  %{s}x_out = fwd.elementwise add %{s}x_mid, {ffn} : {_vec(d)}, {_vec(d)} -> {_vec(d)}")
        x = f"%{s}x_out"
        rets += [f"%{s}k_rot", v]
    emit("  // logits")
    hf = norm("out", x, "output_norm.weight")
    out_name = "output.weight" if "output.weight" in uses else "token_embd.weight"
    w = weight("logits_w", out_name)
    emit(f"  %logits = fwd.matmul {hf}, {w} : {_vec(d)}, {wt(out_name)} -> {_vec(p.vocab)}")
    logits = "%logits"
    if p.final_softcap:
        emit(f"  %logits_capped = fwd.softcap %logits cap {p.final_softcap:.9e} : {_vec(p.vocab)} -> {_vec(p.vocab)}")
        logits = "%logits_capped"
    emit(f"  func.return {logits}, {', '.join(rets)} : {', '.join(results)}")
    emit("}")
    return "\n".join(lines) + "\n"


def _mlp(emit, matmul, p: LlamaParams, s: str, b: str, h1: str) -> str:
    ff, d = p.ff, p.d
    up = b + "ffn_up.weight"
    gate_w, up_w = (sliced_name(up, 0, ff), sliced_name(up, ff, 2 * ff)) if p.fused else (b + "ffn_gate.weight", up)
    g = matmul(s + "gate", h1, d, gate_w, ff)
    u = matmul(s + "up", h1, d, up_w, ff)
    if p.gemma:  # GELU (tanh approximation) gates the up projection
        emit(f"  %{s}gate_act = fwd.gelu {g} : ({_vec(ff)}) -> {_vec(ff)}")
    else:
        emit(f"  %{s}gate_act = fwd.silu {g} : {_vec(ff)} -> {_vec(ff)}")
    emit(f"  %{s}glu = fwd.elementwise mul %{s}gate_act, {u} : {_vec(ff)}, {_vec(ff)} -> {_vec(ff)}")
    return matmul(s + "down", f"%{s}glu", ff, b + "ffn_down.weight", d)


def _moe(emit, weight, wt, p: LlamaParams, s: str, b: str, h1: str) -> str:
    names = [b + n + ".weight" for n in ("ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")]
    ws = [weight(s + short, n) for short, n in zip(("router", "gate_exps", "up_exps", "down_exps"), names)]
    emit(
        f"  %{s}moe = fwd.moe {h1}, {', '.join(ws)} n_expert {p.n_expert} top_k {p.top_k} renormalize "
        f"act swiglu scoring softmax : {_vec(p.d)}, {', '.join(wt(n) for n in names)} -> {_vec(p.d)}"
    )
    return f"%{s}moe"


def _count(n: int, noun: str) -> str:
    """`1 layer`, `2 layers`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _comment_text(text: str) -> str:
    """`text` (a file name) as a comment line holds it: every character that is not printable escaped
    as Python writes it (a line break in a model's or its weights' name ended the comment, and the
    rest of the name was parsed as IR: "the imported step does not verify")."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def describe(p: LlamaParams, source: Path, weights: Path, converted: dict[str, QT], context: int) -> str:
    """The comment lines heading an imported step: the model, where its weights are, the context."""
    mix = f", {_count(p.n_expert, 'expert')} top-{p.top_k}" if p.moe else ""
    lines = [
        f"// fwdshim import of {_comment_text(source.name)}: {p.arch}, {_count(p.n_layer, 'layer')}, d {p.d}, ff {p.ff}{mix}, "
        f"{_count(p.h, 'head')} / {_count(p.kv, 'kv head')} of {p.hd}, rope base {p.rope_base:g}"
        + (" (frequencies divided by their rope factors)" if p.rope_factors else "")
        + f", vocab {p.vocab}",
        f"// weights: {_comment_text(str(weights))}"
        + (f" ({_count(len(converted), 'tensor')} converted by fwdshim)" if converted else ""),
        *(["// the Q/K rows of each layer are un-permuted from GGUF's interleaved layout when loaded"] if p.arch == "llama" else []),
        *(["// q, k, v are rows of each layer's attn_qkv, gate and up of its ffn_up: `tensor[start:stop]` names rows"] if p.fused else []),
        *([f"// attention window {p.window}" + (f" in {sum(p.windowed)} of {p.n_layer} layers" if p.windowed is not None else "") + ": "
           + ("as long as the context, so every position is attended" if p.window >= context else f"each position attends the last {p.window}, itself included")] if p.window else []),
        *([f"// windowed layers turn by rope base {p.rope_base_swa:g}: the runner passes their angles as %angles_swa"] if p.rope_base_swa is not None and p.rope_base_swa != p.rope_base else []),
        f"// context capacity l = {context}; per token the runner passes the embedding row, the rope angles",
        "// and the cache rows written so far, and appends the returned k, v rows",
    ]
    return "\n".join(lines) + "\n"


def parse_step(text: str, source_name: str) -> ModuleOp:
    """Parse and verify step IR, every op located in `source_name` (for diagnostics)."""
    ctx = Context()
    ctx.load_dialect(Func)
    ctx.load_dialect(Fwd)
    try:
        module = LocatingParser(ctx, text, source_name).parse_module()
        verify_located(module)
    except (ParseError, VerifyException) as e:  # a bug of the importer, not of the file: say so in one line
        raise ModelError(f"{source_name}: the imported step does not verify ({_one_line(e)})") from None
    return module
