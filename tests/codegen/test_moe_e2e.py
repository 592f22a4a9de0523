"""MoE end to end: a Mixtral-shaped model (2 layers, 8 experts, top-2, random weights) written to GGUF
by fwdshim's exporter (Q8_0 experts and router), imported, run, and compared with transformers'
`MixtralForCausalLM` holding the same weights.

transformers' GGUF loader does not take Mixtral, so the peer's weights are read from the file here with
gguf-py directly (its dequantizer; the Q/K rows un-permuted by this test's own code), never through
fwdshim's importer. Dequant numerics: the first 8 steps' logits within ||Δ||/||ref|| <= 1e-3, 16
identical greedy tokens.
"""

from __future__ import annotations

import gguf
import numpy as np

from fwdshim.frontend.export import random_llama, write_llama
from fwdshim.frontend.gguf_model import LlamaParams
from fwdshim.frontend.importer import import_gguf
from fwdshim.tools.runner import Decoder, generate

MOE = LlamaParams(n_layer=2, d=64, ff=64, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                  vocab=257, n_expert=8, top_k=2, context_length=256)  # fmt: skip
TOL, STEPS, LOGIT_STEPS = 1e-3, 16, 8


def read_gguf(path) -> dict[str, np.ndarray]:
    """Every tensor of a GGUF file dequantized by gguf-py, float32, shape outermost first."""
    out = {}
    for t in gguf.GGUFReader(path).tensors:
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))
        out[t.name] = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), np.float32).reshape(shape)
    return out


def halves(w: np.ndarray, n_head: int) -> np.ndarray:
    """GGUF's interleaved Q/K rows back to Hugging Face's halves order (per head: evens, then odds)."""
    hd = w.shape[0] // n_head
    heads = w.reshape(n_head, hd, -1)
    return np.concatenate([heads[:, 0::2], heads[:, 1::2]], axis=1).reshape(w.shape)


def mixtral_from_gguf(path, torch):
    from transformers import MixtralConfig, MixtralForCausalLM

    p = MOE
    t = read_gguf(path)
    cfg = MixtralConfig(
        vocab_size=p.vocab, hidden_size=p.d, intermediate_size=p.ff, num_hidden_layers=p.n_layer,
        num_attention_heads=p.h, num_key_value_heads=p.kv, head_dim=p.hd, rms_norm_eps=p.eps,
        num_local_experts=p.n_expert, num_experts_per_tok=p.top_k, tie_word_embeddings=True,
        max_position_embeddings=p.context_length, rope_parameters={"rope_type": "default", "rope_theta": p.rope_base},
    )  # fmt: skip
    sd = {"model.embed_tokens.weight": t["token_embd.weight"], "model.norm.weight": t["output_norm.weight"],
          "lm_head.weight": t["token_embd.weight"]}  # fmt: skip
    for i in range(p.n_layer):
        b, m = f"blk.{i}.", f"model.layers.{i}."
        sd[m + "input_layernorm.weight"] = t[b + "attn_norm.weight"]
        sd[m + "self_attn.q_proj.weight"] = halves(t[b + "attn_q.weight"], p.h)
        sd[m + "self_attn.k_proj.weight"] = halves(t[b + "attn_k.weight"], p.kv)
        sd[m + "self_attn.v_proj.weight"] = t[b + "attn_v.weight"]
        sd[m + "self_attn.o_proj.weight"] = t[b + "attn_output.weight"]
        sd[m + "post_attention_layernorm.weight"] = t[b + "ffn_norm.weight"]
        sd[m + "mlp.gate.weight"] = t[b + "ffn_gate_inp.weight"]
        sd[m + "mlp.experts.gate_up_proj"] = np.concatenate(
            [t[b + "ffn_gate_exps.weight"], t[b + "ffn_up_exps.weight"]], axis=1
        )
        sd[m + "mlp.experts.down_proj"] = t[b + "ffn_down_exps.weight"]
    model = MixtralForCausalLM(cfg).to(torch.float32)
    model.load_state_dict({k: torch.from_numpy(np.array(v, np.float32)) for k, v in sd.items()}, strict=True)
    return model.eval()


def test_mixtral_shaped_model_against_transformers(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    path = write_llama(tmp_path / "mixtral.gguf", MOE, random_llama(MOE, seed=21))
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(path).tensors}
    assert {
        types[f"blk.0.{n}.weight"] for n in ("ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")
    } == {gguf.GGMLQuantizationType.Q8_0}
    model = import_gguf(path, context=64)
    assert model.gguf_path == path and not model.converted  # nothing to requantize: the peer reads this file
    prompt = [int(t) for t in np.random.default_rng(3).integers(0, MOE.vocab, 5)]
    gen = generate(Decoder(model, "dequant", "cpu"), prompt, STEPS)
    peer = mixtral_from_gguf(path, torch)
    from transformers import GenerationConfig

    cfg = GenerationConfig(
        max_new_tokens=STEPS, do_sample=False, eos_token_id=None, pad_token_id=0,
        return_dict_in_generate=True, output_logits=True,
    )  # fmt: skip
    with torch.no_grad():
        out = peer.generate(torch.tensor([prompt]), generation_config=cfg)
    ref = np.stack([x[0].double().numpy() for x in out.logits])
    ours = np.stack(gen.logits).astype(np.float64)
    err = np.linalg.norm(ours - ref, axis=1) / np.linalg.norm(ref, axis=1)
    print(
        f"\nmoe: max rel err of the first {LOGIT_STEPS} steps {err[:LOGIT_STEPS].max():.2e}; tokens {gen.tokens}"
    )
    assert err[:LOGIT_STEPS].max() <= TOL, err
    assert gen.tokens == out.sequences[0, len(prompt) :].tolist()
    assert len(set(gen.tokens)) > 3
