"""The peer check: fwdshim against Hugging Face transformers (CPU torch) on the same GGUF file.

fwdshim writes a GGUF holding exactly the weights it runs (requantized to Q8_0, in GGUF layout, by
its own exporter); transformers loads *that file* through its own GGUF loader and its own GGUF
tokenizer, so the peer un-permutes Q/K and tokenizes by itself. SmolLM2 as shipped (Q4_1, read by
fwdshim's own Q4_1 GEMV, `requantize="none"`): transformers loads the original file itself, and five
prompts (two through the chat template) give the same 32 greedy tokens, logits within 1e-3. Under dequant numerics the logits of
the first 8 steps agree within ||Δ||/||ref|| <= 1e-3 and 16 greedy tokens are identical.

SmolLM2-135M-Instruct is fetched once into fwdshim's model cache (about 100 MB); the tiny models are
written fresh by each test.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT

from fwdshim.frontend.export import byte_vocab, random_llama, write_llama
from fwdshim.frontend.gguf_model import LlamaParams
from fwdshim.frontend.importer import ImportedModel, import_gguf
from fwdshim.tools.runner import Decoder, generate

TOL = 1e-3
STEPS, LOGIT_STEPS = 16, 8


@pytest.fixture(scope="module")
def torch():
    import torch
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    torch.set_num_threads(2)
    return torch


def hf_model(torch, model: ImportedModel, **config):
    """transformers' own model, loaded from the GGUF fwdshim runs (`model.gguf_path`); `config`: the
    values its GGUF loader does not read from the file (passed on to its config)."""
    from transformers import AutoModelForCausalLM

    path = model.gguf_path
    hf = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32, **config)
    return hf.eval()


def hf_greedy(torch, hf, prompt: list[int], steps: int = STEPS) -> tuple[list[int], np.ndarray]:
    """The peer's own greedy decoding (`generate`, its KV cache) of `steps` tokens after `prompt`:
    its tokens and the raw logits each was chosen from."""
    from transformers import GenerationConfig

    cfg = GenerationConfig(
        max_new_tokens=steps, do_sample=False, eos_token_id=None, pad_token_id=0,
        return_dict_in_generate=True, output_logits=True,
    )  # fmt: skip
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), generation_config=cfg)
    return out.sequences[0, len(prompt) :].tolist(), np.stack([x[0].double().numpy() for x in out.logits])


def compare(
    torch, hf, model: ImportedModel, prompt: list[int], hf_prompt: list[int] | None = None, numerics="dequant",
    steps: int = STEPS, decoder: Decoder | None = None,
):  # fmt: skip
    """Our greedy run against the peer's own (from its own prompt ids, `hf_prompt`, when given):
    returns (our generation, the peer's tokens, relative errors of the logits of every step)."""
    dec = decoder or Decoder(model, numerics, "cpu")
    dec.reset()
    gen = generate(dec, prompt, steps)
    assert len(gen.tokens) == steps
    tokens, ref = hf_greedy(torch, hf, prompt if hf_prompt is None else hf_prompt, steps)
    ours = np.stack(gen.logits).astype(np.float64)[: len(ref)]  # the peer stops at its EOS token
    err = np.linalg.norm(ours - ref, axis=1) / np.linalg.norm(ref, axis=1)
    return gen, tokens, err


# ---------------------------------------------------------------------------------------------
# a tiny llama, written fresh (fast)

TINY = LlamaParams(n_layer=2, d=64, ff=96, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                   vocab=257, context_length=256)  # fmt: skip


@pytest.mark.parametrize("source", ["q8_0", "q4_1 requantized"])
def test_tiny_llama_against_transformers(tmp_path, monkeypatch, torch, source):
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    w = random_llama(TINY, seed=11)
    types = (
        {n: QT.Q4_1 for n, a in w.items() if a.ndim == 2 and n != "token_embd.weight"}
        if source != "q8_0"
        else None
    )
    path = write_llama(tmp_path / "tiny.gguf", TINY, w, types=types, vocab=byte_vocab())
    model = import_gguf(path, context=64, requantize="q8_0")
    assert (model.gguf_path != path) == (types is not None)  # the peer reads the sidecar fwdshim runs
    hf = hf_model(torch, model)
    prompt = [int(t) for t in np.random.default_rng(1).integers(0, TINY.vocab, 6)]
    gen, peer_tokens, err = compare(torch, hf, model, prompt)
    assert err[:LOGIT_STEPS].max() <= TOL, err
    assert gen.tokens == peer_tokens
    assert len(set(gen.tokens)) > 3  # a sequence that moves: rope and the cache matter


def qwen2_weights(params: LlamaParams, seed: int) -> dict[str, np.ndarray]:
    """Random weights of a Qwen2 step: a llama's, with a bias on each Q, K and V projection."""
    w = random_llama(params, seed=seed)
    rng = np.random.default_rng(seed + 1)
    for i in range(params.n_layer):
        for name, n in (("attn_q", params.h * params.hd), ("attn_k", params.kv * params.hd), ("attn_v", params.kv * params.hd)):
            w[f"blk.{i}.{name}.bias"] = (0.5 * rng.standard_normal(n)).astype(np.float32)
    return w


TINY_QWEN2 = dataclasses.replace(TINY, arch="qwen2", rope_base=1000000.0, eps=1e-6)


@pytest.mark.parametrize("source", ["q8_0", "q4_1 requantized"])
def test_tiny_qwen2_against_transformers(tmp_path, monkeypatch, torch, source):
    """issue 41: a Qwen2 file (biases on Q/K/V; rows as Hugging Face writes them, never permuted),
    loaded by transformers' own GGUF loader: the same greedy tokens and logits within TOL. The biases
    are large (0.5), so a step that dropped one, or rows un-permuted as a llama's, would fail."""
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    w = qwen2_weights(TINY_QWEN2, seed=17)
    types = {n: QT.Q4_1 for n, a in w.items() if a.ndim == 2 and n != "token_embd.weight"} if source != "q8_0" else None
    path = write_llama(tmp_path / "qwen2.gguf", TINY_QWEN2, w, types=types, vocab=byte_vocab(), pre="qwen2")
    model = import_gguf(path, context=64, requantize="q8_0")
    assert model.params.arch == "qwen2" and model.params.rope_base == 1000000.0
    step = str(model.module)
    assert step.count("fwd.elementwise add") == 2 * 3 + 2 * 2  # three biases and two residuals a layer
    hf = hf_model(torch, model)
    assert type(hf).__name__ == "Qwen2ForCausalLM"
    prompt = [int(t) for t in np.random.default_rng(2).integers(0, TINY.vocab, 6)]
    gen, peer_tokens, err = compare(torch, hf, model, prompt)
    assert err[:LOGIT_STEPS].max() <= TOL, err
    assert gen.tokens == peer_tokens
    assert len(set(gen.tokens)) > 3


TINY_QWEN3 = dataclasses.replace(TINY, arch="qwen3", rope_base=1000000.0, eps=1e-6)
TINY_QWEN3_MOE = dataclasses.replace(TINY_QWEN3, arch="qwen3moe", ff=32, n_expert=4, top_k=2)


@pytest.mark.parametrize("params", [TINY_QWEN3, TINY_QWEN3_MOE], ids=["qwen3", "qwen3moe"])
def test_tiny_qwen3_against_transformers(tmp_path, monkeypatch, torch, params):
    """issue 41: Qwen3 and Qwen3-MoE files (qk-norm: each head's q and k rows RMS-normed by their own
    weights, `1 + N(0, 0.1)`, before the rope; the mixture's experts `expert_feed_forward_length` wide,
    a softmax router over all experts renormalizing the kept two), loaded by transformers' own GGUF
    loader: the same greedy tokens, logits within TOL, and under int8-act the same tokens. transformers'
    GGUF loader reads neither `key_length` (its Qwen3 heads default to 128 wide) nor the experts'
    width, and its Qwen3-MoE config does not renormalize by default (llama.cpp's `qwen3moe` does):
    those three are passed to its config."""
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    path = write_llama(tmp_path / f"{params.arch}.gguf", params, random_llama(params, seed=5), vocab=byte_vocab(), pre="qwen2")
    model = import_gguf(path, context=64)
    assert model.params.qk_norm and model.params.ff == params.ff
    step = str(model.module)
    assert step.count(f"weight(%") == 2 * 2 and f"-> tensor<{params.h}x{params.hd}xf32>" in step
    config = {"head_dim": params.hd} | ({"moe_intermediate_size": params.ff, "norm_topk_prob": True} if params.moe else {})
    hf = hf_model(torch, model, **config)
    assert type(hf).__name__ == ("Qwen3MoeForCausalLM" if params.moe else "Qwen3ForCausalLM")
    prompt = [int(t) for t in np.random.default_rng(2).integers(0, TINY.vocab, 6)]
    gen, peer_tokens, err = compare(torch, hf, model, prompt)
    assert err[:LOGIT_STEPS].max() <= TOL, err
    assert gen.tokens == peer_tokens
    assert len(set(gen.tokens)) > 3
    # without the heads' norms the step computes another model: the check can fail
    hf_plain = hf_model(torch, model, **config)
    for layer in hf_plain.model.layers:
        layer.self_attn.q_norm.weight.data.fill_(1.0)
    *_, err_plain = compare(torch, hf_plain, model, prompt, steps=2)
    assert err_plain.min() > 10 * TOL, err_plain


TINY_PHI3 = dataclasses.replace(TINY, arch="phi3", window=64)


@pytest.mark.parametrize("source", ["q8_0", "q4_1 requantized"])
def test_tiny_phi3_against_transformers(tmp_path, monkeypatch, torch, source):
    """issue 41: a Phi-3 file (q, k, v in one `attn_qkv` tensor, gate and up in one `ffn_up`, gate rows
    first; a sliding window as long as the context) loaded by transformers' own GGUF loader: the same
    greedy tokens, logits within TOL. The step reads each part as rows of the fused tensor
    (`attn_qkv.weight[0:64]`), a view of its blocks. The byte vocabulary has no Phi-3 pad token
    (transformers' default 32000): `pad_token_id=0` is passed to its config."""
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    w = random_llama(TINY_PHI3, seed=9)
    types = {n: QT.Q4_1 for n, a in w.items() if a.ndim == 2 and n != "token_embd.weight"} if source != "q8_0" else None
    path = write_llama(tmp_path / "phi3.gguf", TINY_PHI3, w, types=types, vocab=byte_vocab())
    model = import_gguf(path, context=64, requantize="q8_0")
    step = str(model.module)
    assert '"blk.1.attn_qkv.weight[64:96]"' in step and '"blk.0.ffn_up.weight[96:192]"' in step
    assert " window " not in step  # 64 positions attended: the window holds them all
    hf = hf_model(torch, model, pad_token_id=0)
    assert type(hf).__name__ == "Phi3ForCausalLM"
    prompt = [int(t) for t in np.random.default_rng(4).integers(0, TINY.vocab, 6)]
    gen, peer_tokens, err = compare(torch, hf, model, prompt)
    assert err[:LOGIT_STEPS].max() <= TOL, err
    assert gen.tokens == peer_tokens
    assert len(set(gen.tokens)) > 3


# ---------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct

PROMPTS = ["The capital of France is", "Once upon a time, in a small village,", "def fibonacci(n):\n   "]


@pytest.fixture(scope="module")
def smollm2():
    from fwdshim.frontend.cache import fetch_model

    return import_gguf(fetch_model("smollm2", quiet=True), context=64, requantize="q8_0")


@pytest.fixture(scope="module")
def smollm2_hf(torch, smollm2):
    from transformers import AutoTokenizer

    path = smollm2.gguf_path
    return hf_model(torch, smollm2), AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def test_smollm2_is_requantized_q8_0(smollm2):
    p = smollm2.params
    assert (p.n_layer, p.d, p.h, p.kv, p.hd, p.ff, p.rope_base, p.vocab) == (
        30,
        576,
        9,
        3,
        64,
        1536,
        1e5,
        49152,
    )
    assert len(smollm2.converted) == 210 and set(smollm2.converted.values()) == {QT.Q8_0}
    assert "output.weight" not in smollm2.weights  # tied: the logits read token_embd.weight


def test_smollm2_prompt_ids_equal_transformers(smollm2, smollm2_hf):
    from fwdshim.frontend.tokenizer import GGUFTokenizer

    ours = GGUFTokenizer(smollm2.reader, smollm2.gguf_path)
    _, hf_tok = smollm2_hf
    for text in [*PROMPTS, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n", "Ünïcödé, 日本語 and 12345!"]:
        assert ours.encode(text) == hf_tok(text)["input_ids"], text
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    assert ours.chat("What is the capital of France?") == hf_tok.apply_chat_template(
        chat, tokenize=False, add_generation_prompt=True
    )


def test_smollm2_dequant_matches_transformers(torch, smollm2, smollm2_hf):
    from fwdshim.frontend.tokenizer import GGUFTokenizer

    hf, hf_tok = smollm2_hf
    tok = GGUFTokenizer(smollm2.reader, smollm2.gguf_path)
    ours, theirs = tok.encode(PROMPTS[0]), hf_tok(PROMPTS[0])["input_ids"]
    assert ours == theirs
    gen, peer_tokens, err = compare(torch, hf, smollm2, ours, theirs)
    print(
        f"\nsmollm2 dequant: max rel err of the first {LOGIT_STEPS} steps {err[:LOGIT_STEPS].max():.2e}; "
        f"{tok.decode(gen.tokens)!r}"
    )
    assert err[:LOGIT_STEPS].max() <= TOL, err
    assert gen.tokens == peer_tokens
    assert tok.decode(gen.tokens).startswith(" Paris")


def test_smollm2_int8_act_cpu_run_is_recorded(torch, smollm2, smollm2_hf):
    """The executor's int8-act run (the GPU graph is checked against this record on the device)."""
    from fwdshim.frontend.cache import models_dir
    from fwdshim.frontend.tokenizer import GGUFTokenizer

    hf, hf_tok = smollm2_hf
    tok = GGUFTokenizer(smollm2.reader, smollm2.gguf_path)
    prompt = tok.encode(PROMPTS[0])
    gen, peer_tokens, err = compare(torch, hf, smollm2, prompt, hf_tok(PROMPTS[0])["input_ids"], "int8-act")
    same = next((i for i, (a, b) in enumerate(zip(gen.tokens, peer_tokens)) if a != b), STEPS)
    assert same >= 4, (gen.tokens, peer_tokens)  # quantized activations: near the peer, not equal
    assert err[:same].max() < 0.25, err
    record = {
        "model": "smollm2", "numerics": "int8-act", "device": "cpu", "prompt": PROMPTS[0],
        "prompt_ids": prompt, "tokens": gen.tokens, "text": tok.decode(gen.tokens),
        "tokens_equal_to_transformers_dequant": same, "rel_err_vs_transformers": [float(e) for e in err[:same]],
    }  # fmt: skip
    out = models_dir() / "smollm2.int8-act.cpu.json"
    out.write_text(json.dumps(record, indent=1))
    print(f"\nint8-act (cpu): {record['text']!r}; {same} tokens as the peer's; recorded in {out}")


# ---------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct as shipped: its own Q4_1 projections and Q8_0 embedding, no requantization;
# transformers loads the very same (original) file

SHIPPED_STEPS = 32
CHAT_PROMPTS = ["Hello", "What is the capital of France?"]


@pytest.fixture(scope="module")
def smollm2_shipped():
    from fwdshim.frontend.cache import fetch_model

    return import_gguf(fetch_model("smollm2", quiet=True), requantize="none", context=128)


def test_smollm2_shipped_is_read_as_it_is(smollm2_shipped):
    m = smollm2_shipped
    assert m.gguf_path == m.source_path and not m.converted
    types = {t.name: QT(t.tensor_type) for t in m.reader.tensors}
    assert {types[n] for n in types if n.startswith("blk.") and n.endswith("_q.weight")} == {QT.Q4_1}
    assert types["token_embd.weight"] == QT.Q8_0


def test_smollm2_shipped_dequant_matches_transformers_on_the_original_file(torch, smollm2_shipped):
    """Five prompts (two through the chat template, as `--chat`), 32 greedy tokens each: identical
    tokens, every step's logits within 1e-3 relative."""
    from transformers import AutoTokenizer

    from fwdshim.frontend.tokenizer import GGUFTokenizer

    m = smollm2_shipped
    hf = hf_model(torch, m)
    hf_tok = AutoTokenizer.from_pretrained(m.gguf_path.parent, gguf_file=m.gguf_path.name)
    tok = GGUFTokenizer(m.reader, m.gguf_path)
    dec = Decoder(m, "dequant", "cpu")
    texts = [*PROMPTS, *(tok.chat(p) for p in CHAT_PROMPTS)]
    for text in texts:
        ours, theirs = tok.encode(text), hf_tok(text)["input_ids"]
        assert ours == theirs, text
        gen, peer_tokens, err = compare(torch, hf, m, ours, theirs, steps=SHIPPED_STEPS, decoder=dec)
        print(f"\nshipped Q4_1 {text!r}: max rel err {err.max():.2e}; {tok.decode(gen.tokens)!r}")
        # the peer stops after its end-of-turn token; ours (no stop ids) goes on: the same up to there
        assert len(peer_tokens) == SHIPPED_STEPS or peer_tokens[-1] in tok.stop_ids, (text, peer_tokens)
        assert gen.tokens[: len(peer_tokens)] == peer_tokens, (text, tok.decode(gen.tokens), tok.decode(peer_tokens))
        assert err.max() <= TOL, (text, err)
    hello = tok.chat("Hello")
    assert tok.decode(generate(dec, tok.encode(hello), SHIPPED_STEPS).tokens).startswith("Hello! How can I")
    dec.reset()


# ---------------------------------------------------------------------------------------------
# on the GPU (`FWDSHIM_GPU=1 pytest -m gpu tests/frontend/test_peer.py`): the CUDA graph against the executor

MOE = LlamaParams(n_layer=2, d=64, ff=64, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                  vocab=257, n_expert=8, top_k=2, context_length=256)  # fmt: skip


def _gpu_against_cpu(
    model: ImportedModel, prompt: list[int], numerics: str, int8_bound: float = 1e-5
) -> tuple[list[int], float]:
    cpu = generate(Decoder(model, numerics, "cpu"), prompt, STEPS)
    dec = Decoder(model, numerics, "gpu")
    gpu = generate(dec, prompt, STEPS)
    assert gpu.tokens == cpu.tokens, (numerics, gpu.tokens, cpu.tokens)
    err = np.linalg.norm(np.stack(gpu.logits) - np.stack(cpu.logits)) / np.linalg.norm(np.stack(cpu.logits))
    # Under dequant the GPU's f32 sums and the executor's f64 sums agree closely. Under int8-act the
    # token-for-token agreement is the contract: both round x/d half away from zero, and where the
    # GPU's f32 norm lands an ulp on the other side of a .5 than the executor's f64 one, a quant moves
    # by 1; over 30 layers of SmolLM2 that spreads to ~3e-2 of the logits (1.3e-7 on the 2-layer
    # models, which keep the tight default `int8_bound`).
    assert err < (1e-3 if numerics == "dequant" else int8_bound), (numerics, err)
    print(f"\n{numerics}: gpu == cpu for {STEPS} tokens (logits rel err {err:.1e}); "
          f"{gpu.tokens_per_s:.1f} tokens/s on the GPU; {dec.stages} stages")  # fmt: skip
    return gpu.tokens, gpu.tokens_per_s


@pytest.mark.gpu
@pytest.mark.parametrize("params", [TINY, MOE], ids=["dense", "moe"])
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_tiny_gpu_graph_matches_cpu(tmp_path, monkeypatch, params, numerics):
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    model = import_gguf(write_llama(tmp_path / "m.gguf", params, random_llama(params, seed=13)), context=64)
    _gpu_against_cpu(model, [5, 6, 7, 8], numerics)


@pytest.mark.gpu
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_smollm2_gpu_graph_matches_cpu(smollm2, numerics):
    """Needs SmolLM2 in the model cache (`$FWDSHIM_CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf`: the
    device cannot download it)."""
    from fwdshim.frontend.tokenizer import GGUFTokenizer

    tok = GGUFTokenizer(smollm2.reader, smollm2.gguf_path)
    tokens, _ = _gpu_against_cpu(smollm2, tok.encode(PROMPTS[0]), numerics, int8_bound=1e-1)
    assert tok.decode(tokens).startswith(" Paris")


@pytest.mark.gpu
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_smollm2_shipped_gpu_graph_matches_cpu(smollm2_shipped, numerics):
    """SmolLM2 as shipped (Q4_1 GEMVs over the file's own blocks) on the GPU against the executor."""
    from fwdshim.frontend.tokenizer import GGUFTokenizer

    tok = GGUFTokenizer(smollm2_shipped.reader, smollm2_shipped.gguf_path)
    tokens, _ = _gpu_against_cpu(smollm2_shipped, tok.encode(PROMPTS[0]), numerics, int8_bound=1e-1)
    assert tok.decode(tokens).startswith(" Paris")


@pytest.mark.gpu
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_smollm2_100_graph_replays_equal_100_stagewise_steps(smollm2_shipped, numerics):
    """SmolLM2 as shipped: 100 replays of the decode loop's graph (the token gathered, the angles
    taken, the greedy pick made on the device) give, step by step, the same logits bit for bit as 100
    steps whose stages are launched one by one from host inputs; and each pick is the logits' first
    maximum."""
    from fwdshim.frontend.tokenizer import GGUFTokenizer
    from fwdshim.tools.runner import angles_of

    n = 100
    dec = Decoder(smollm2_shipped, numerics, "gpu")
    loop, rt = dec.forward.loop, dec.forward.runtime
    assert loop is not None and loop.graph is not None
    prompt = GGUFTokenizer(smollm2_shipped.reader, smollm2_shipped.gguf_path).encode(PROMPTS[0])
    loop.feed(0, prompt)
    replayed, ids = [], list(prompt)
    for p in range(n):
        assert loop.launch() == p
        pick, _ = loop.result(p)
        replayed.append(loop.logits())
        if p + 1 >= len(prompt):
            ids.append(pick)
            assert pick == int(np.argmax(replayed[-1])), f"step {p}: the device picked {pick}"
    loop.forget_position()
    embd = smollm2_shipped.weights.get("token_embd.weight")
    for p in range(n):
        x = np.ascontiguousarray(embd.rows(ids[p]).reshape(-1), dtype=np.float32)
        out = rt.run_stagewise([x, angles_of(smollm2_shipped.params, p)], cache_len=p)
        rt.sync()
        stagewise = np.asarray(out[0].copy_to_host(), dtype=np.float32).reshape(-1)
        same = np.array_equal(stagewise.view(np.uint32), replayed[p].view(np.uint32))
        assert same, f"step {p}: stagewise logits differ from the replay's (max |diff| {np.abs(stagewise - replayed[p]).max()})"
    print(f"\n{numerics}: {n} replays == {n} stagewise steps bit for bit; {len(ids) - len(prompt)} tokens picked on the device")
