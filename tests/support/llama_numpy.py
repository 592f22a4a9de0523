"""Helpers the tests share (from tests/frontend/test_import.py, which imports them from here, as others do)."""

from __future__ import annotations

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

from fwdshim.frontend.gguf_model import LlamaParams

TINY = LlamaParams(n_layer=2, d=64, ff=96, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                   vocab=262, context_length=256)  # fmt: skip


MERGES = [("a", "b"), ("ab", "c"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he")]


def q8_roundtrip(a: np.ndarray) -> np.ndarray:
    return gguf.quants.dequantize(gguf.quants.quantize(np.asarray(a, np.float32), QT.Q8_0), QT.Q8_0).reshape(
        a.shape
    )


def numpy_llama(w: dict[str, np.ndarray], p: LlamaParams, tokens: list[int]) -> np.ndarray:
    """Logits `[len(tokens), vocab]` of a plain float64 Llama with a KV cache."""
    W = {k: np.asarray(v, np.float64) for k, v in w.items()}
    out_w = W.get("output.weight", W["token_embd.weight"])
    inv = p.rope_base ** (-np.arange(0, p.hd, 2) / p.hd)
    if p.rope_factors is not None:  # Llama 3.1's rope_freqs: each frequency divided by its factor
        inv = inv / np.asarray(p.rope_factors, np.float64)
    ks: list[list] = [[] for _ in range(p.n_layer)]
    vs: list[list] = [[] for _ in range(p.n_layer)]

    def rms(x, g):
        return x / np.sqrt(np.mean(x * x) + p.eps) * g

    def rope(x, pos):  # x [heads, hd], rotate_half convention
        c, s = np.cos(pos * inv), np.sin(pos * inv)
        a, b = x[:, : p.hd // 2], x[:, p.hd // 2 :]
        return np.concatenate([a * c - b * s, a * s + b * c], axis=1)

    logits = []
    for pos, t in enumerate(tokens):
        x = W["token_embd.weight"][t]
        for i in range(p.n_layer):
            b = f"blk.{i}."
            h = rms(x, W[b + "attn_norm.weight"])
            q = rope(((W[b + "attn_q.weight"] @ h + W.get(b + "attn_q.bias", 0.0))).reshape(p.h, p.hd), pos)
            ks[i].append(rope(((W[b + "attn_k.weight"] @ h + W.get(b + "attn_k.bias", 0.0))).reshape(p.kv, p.hd), pos))
            vs[i].append(((W[b + "attn_v.weight"] @ h + W.get(b + "attn_v.bias", 0.0))).reshape(p.kv, p.hd))
            K, V = np.stack(ks[i]), np.stack(vs[i])  # [t, kv, hd]
            att = []
            for j in range(p.h):
                g = j // (p.h // p.kv)
                sc = K[:, g] @ q[j] / np.sqrt(p.hd)
                pr = np.exp(sc - sc.max())
                att.append((pr / pr.sum()) @ V[:, g])
            x = x + W[b + "attn_output.weight"] @ np.concatenate(att) + W.get(b + "attn_output.bias", 0.0)
            h = rms(x, W[b + "ffn_norm.weight"])
            gate = W[b + "ffn_gate.weight"] @ h
            x = x + W[b + "ffn_down.weight"] @ (gate / (1 + np.exp(-gate)) * (W[b + "ffn_up.weight"] @ h))
        logits.append(out_w @ rms(x, W["output_norm.weight"]))
    return np.stack(logits)


def rounded(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The values a file written with the default types holds: projections through Q8_0."""
    return {k: (v if v.ndim == 1 else q8_roundtrip(v)) for k, v in w.items()}
