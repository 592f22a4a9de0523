"""What a real Llama-family GGUF carries beyond the plain model, each on a small file written here:
Llama 3.1's `rope_freqs.weight` (and linear rope scaling) applied to the angles, the `llama-bpe`
pre-tokenizer's whole-word lookup before merges, converted copies written at the file's own
`general.alignment`, attention biases honoured, and every other key or tensor that would change the
computation refused by name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from support.llama_numpy import MERGES, TINY, numpy_llama, rounded

from fwdshim.frontend.export import byte_vocab, copy_metadata, random_llama, write_llama
from fwdshim.frontend.gguf_model import ModelError
from fwdshim.frontend.importer import import_gguf
from fwdshim.frontend.tokenizer import GGUFTokenizer
from fwdshim.tools.runner import Decoder


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))


def _logits(path: Path, tokens: list[int], **kw) -> np.ndarray:
    dec = Decoder(import_gguf(path, context=32, **kw), "dequant", "cpu")
    return np.stack([dec.step(t) for t in tokens])


def _err(a: np.ndarray, b: np.ndarray) -> float:
    return float((np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)).max())


TOKENS = [5, 77, 130, 9, 200, 41, 3, 250]


def _with_kv(src: Path, dst: Path, kv: dict, tensors: dict | None = None) -> Path:
    """A copy of `src` with metadata `kv` (key -> (value, GGUFValueType)) and extra float32 `tensors`."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    copy_metadata(r, w, skip=tuple(kv))
    for k, (v, vt) in kv.items():
        w.add_key_value(k, v, vt)
    for t in r.tensors:
        w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    for name, a in (tensors or {}).items():
        w.add_tensor(name, np.asarray(a, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


# ---------------------------------------------------------------------------------------------
# rope


def test_rope_freqs_divide_each_frequency(tmp_path):
    factors = tuple(float(f) for f in np.geomspace(1.0, 8.0, TINY.half))  # Llama 3.1: 1 (fast) .. 8 (slow)
    p = replace(TINY, rope_factors=factors)
    w = random_llama(p, seed=5)
    path = write_llama(tmp_path / "l31.gguf", p, w, vocab=byte_vocab(MERGES))
    m = import_gguf(path, context=32)
    assert m.params.rope_factors == pytest.approx(factors, rel=1e-7)
    assert "divided by their rope factors" in m.text
    ours = _logits(path, TOKENS)
    assert _err(ours, numpy_llama(rounded(w), p, TOKENS)) < 1e-5
    assert _err(ours, numpy_llama(rounded(w), TINY, TOKENS)) > 1e-3  # ignoring them would show


def test_linear_rope_scaling_is_honoured(tmp_path):
    w = random_llama(TINY, seed=6)
    plain = write_llama(tmp_path / "plain.gguf", TINY, w, vocab=byte_vocab(MERGES))
    VT = gguf.GGUFValueType
    path = _with_kv(plain, tmp_path / "lin.gguf", {"llama.rope.scaling.type": ("linear", VT.STRING),
                                                   "llama.rope.scaling.factor": (4.0, VT.FLOAT32)})  # fmt: skip
    m = import_gguf(path, context=32)
    assert m.params.rope_factors == (4.0,) * TINY.half
    ref = numpy_llama(rounded(w), replace(TINY, rope_factors=(4.0,) * TINY.half), TOKENS)
    assert _err(_logits(path, TOKENS), ref) < 1e-5


def test_bad_rope_freqs_refused(tmp_path):
    w = random_llama(TINY, seed=6)
    plain = write_llama(tmp_path / "plain.gguf", TINY, w, vocab=byte_vocab(MERGES))
    short = _with_kv(plain, tmp_path / "short.gguf", {}, {"rope_freqs.weight": np.ones(3)})
    with pytest.raises(ModelError, match=r"short\.gguf: tensor `rope_freqs.weight` has 3 values for 8 rope"):
        import_gguf(short)
    neg = _with_kv(plain, tmp_path / "neg.gguf", {}, {"rope_freqs.weight": -np.ones(8)})
    with pytest.raises(ModelError, match="holds a factor that is not finite and positive"):
        import_gguf(neg)


# ---------------------------------------------------------------------------------------------
# metadata that changes the computation


_VT = gguf.GGUFValueType


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("llama.attn_logit_softcapping", (50.0, _VT.FLOAT32), "`llama.attn_logit_softcapping` = 50.0 asks for attention soft-capping"),
        ("llama.final_logit_softcapping", (30.0, _VT.FLOAT32), "`llama.final_logit_softcapping` = 30.0 asks for final-logit soft-capping"),
        ("llama.attention.sliding_window", (4096, _VT.UINT32), "asks for sliding-window attention"),
        ("llama.rope.scaling.type", ("yarn", _VT.STRING), "`llama.rope.scaling.type` = 'yarn' is not computed"),
        ("llama.logit_scale", (0.5, _VT.FLOAT32), "asks for scaled logits"),
        ("llama.attention.causal", (False, _VT.BOOL), "causal attention only"),
        ("llama.some_new_knob", (1, _VT.UINT32), "metadata key `llama.some_new_knob` = 1 is not one fwdshim reads"),
    ],
)  # fmt: skip
def test_computation_keys_refused_by_name(tmp_path, key, value, words):
    plain = write_llama(tmp_path / "plain.gguf", TINY, random_llama(TINY), vocab=byte_vocab(MERGES))
    path = _with_kv(plain, tmp_path / "k.gguf", {key: value})
    with pytest.raises(ModelError, match=r"k\.gguf: .*" + words.replace("(", r"\(").replace(".", r"\.")):
        import_gguf(path)


@pytest.mark.parametrize("tensor, words", [("blk.1.attn_k_norm.weight", "qk-norm"),
                                           ("blk.0.ffn_down.bias", "a feed-forward down bias")])  # fmt: skip
def test_computation_tensors_refused_by_name(tmp_path, tensor, words):
    plain = write_llama(tmp_path / "plain.gguf", TINY, random_llama(TINY), vocab=byte_vocab(MERGES))
    path = _with_kv(plain, tmp_path / "t.gguf", {}, {tensor: np.ones(16)})
    with pytest.raises(ModelError, match=rf"t\.gguf: tensor `{tensor}` asks for {words}"):
        import_gguf(path)


QWEN3_MOE = replace(TINY, arch="qwen3moe", ff=32, n_expert=4, top_k=2)


@pytest.mark.parametrize("kv, tensors, words", [
    ({"qwen3moe.expert_count": (0, gguf.GGUFValueType.UINT32)}, {},
     "`qwen3moe.expert_count` = 0: every layer of a `qwen3moe` model is a mixture of experts"),
    ({"qwen3moe.expert_feed_forward_length": (48, gguf.GGUFValueType.UINT32)}, {},
     "tensor `blk.0.ffn_gate_exps.weight` has shape 4x32x64, expected n_expert x ff x d = 4x48x64"),
    ({}, {"blk.0.attn_q_norm.weight": None}, "missing tensor `blk.0.attn_q_norm.weight` (hd = 16)"),
    ({}, {"blk.1.attn_k_norm.weight": np.ones(32)}, "tensor `blk.1.attn_k_norm.weight` has shape 32, expected hd = 16"),
])  # fmt: skip
def test_qwen3moe_faults_are_named(tmp_path, kv, tensors, words):
    """issue 41: a Qwen3-MoE file whose layers are not mixtures, whose experts are not the width its
    `expert_feed_forward_length` says, or whose heads' norms are missing or not one head wide."""
    path = write_llama(tmp_path / "m.gguf", QWEN3_MOE, random_llama(QWEN3_MOE, seed=3), vocab=byte_vocab(MERGES))
    if kv:
        path = _with_kv(path, tmp_path / "k.gguf", kv)
    if tensors:
        r = gguf.GGUFReader(path)
        w = gguf.GGUFWriter(tmp_path / "t.gguf", "qwen3moe")
        copy_metadata(r, w)
        for t in r.tensors:
            if t.name not in tensors:
                w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
            elif tensors[t.name] is not None:
                w.add_tensor(t.name, np.asarray(tensors[t.name], np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        path = tmp_path / "t.gguf"
    with pytest.raises(ModelError) as e:
        import_gguf(path)
    assert str(e.value) == f"{path}: {words}"


PHI3 = replace(TINY, arch="phi3", window=8)


def test_phi3_window_shorter_than_the_context_is_refused_by_legality(tmp_path, monkeypatch, capsys):
    """issue 41: Phi-3's sliding window of 8 under a context of 64 is `fwd.attention ... window 8` in
    the step (the importer lifts it), and `fwdshim run` refuses it with the seed's reason at each
    attention's line; a context no longer than the window drops it (every position is attended) and
    runs, and is the default context of such a model."""
    from fwdshim.tools import cli

    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    path = write_llama(tmp_path / "phi3.gguf", PHI3, random_llama(PHI3, seed=2), vocab=byte_vocab(MERGES))
    assert " window 8 : " in str(import_gguf(path, context=64).module)
    assert " window " not in str(import_gguf(path, context=8).module)
    assert import_gguf(path, context=None).context == 8  # by default, a context within the window: it runs
    argv = ["run", "--model", str(path), "--prompt", "hi", "--max-tokens", "1", "--device", "cpu"]
    assert cli.main([*argv, "--context", "64"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fwdshim: error: ") and "Traceback" not in err
    assert err.count("a windowed attention (`window W`) — its kernel attends every cached position") == 2, err
    assert err.rstrip().endswith("(the model attends a sliding window of 8 positions: --context 8 or less runs it)")
    assert cli.main([*argv, "--context", "8"]) == 0


def test_phi3_faults_are_named(tmp_path):
    """A Phi-3 file with longrope factors (Phi-3 128k) is refused by name; a fused tensor of the wrong
    rows, and a row slice past a tensor's rows, are named."""
    from fwdshim.frontend.gguf_model import ModelWeights

    w = random_llama(PHI3, seed=2)
    path = write_llama(tmp_path / "phi3.gguf", PHI3, w, vocab=byte_vocab(MERGES))
    long = _with_kv(path, tmp_path / "long.gguf", {}, {"rope_factors_long.weight": np.ones(8)})
    with pytest.raises(ModelError, match=r"long\.gguf: tensor `rope_factors_long.weight` asks for longrope scaling"):
        import_gguf(long)
    bad = write_llama(tmp_path / "bad.gguf", replace(PHI3, kv=4), {**random_llama(replace(PHI3, kv=4), seed=2)}, vocab=byte_vocab(MERGES))
    with pytest.raises(ModelError) as e:
        ModelWeights(gguf.GGUFReader(bad), PHI3, bad).get("blk.0.attn_qkv.weight[96:200]")
    assert str(e.value) == f"{bad}: weight `blk.0.attn_qkv.weight[96:200]` reaches past the tensor's 192 rows"
    model = import_gguf(path, context=8)
    q = model.weights.get("blk.0.attn_qkv.weight[0:64]")
    assert q.shape == (64, 64) and "blk.0.attn_qkv.weight[96:128]" in model.weights
    whole = model.weights.get("blk.0.attn_qkv.weight")
    np.testing.assert_array_equal(q.f32, whole.f32[:64])


GEMMAS = {
    "gemma": replace(TINY, arch="gemma"),
    "gemma2": replace(TINY, arch="gemma2", window=8, attn_softcap=50.0, final_softcap=30.0),
    "gemma3": replace(TINY, arch="gemma3", window=8, rope_base_swa=10000.0, rope_base=1000000.0),
}


def test_qwen2_biases_and_gemma_patterns_are_checked(tmp_path):
    """A Qwen2 file without a Q/K/V bias is refused (llama.cpp requires them: running without one
    computes another model); a Gemma 3 `sliding_window_pattern` array of anything but booleans, or a
    negative period, is named."""
    from gguf import GGUFValueType as VT

    q = replace(TINY, arch="qwen2")
    full = write_llama(tmp_path / "q.gguf", q, random_llama(q, seed=1), vocab=byte_vocab(MERGES))
    r = gguf.GGUFReader(full)
    w = gguf.GGUFWriter(tmp_path / "nob.gguf", "qwen2")
    copy_metadata(r, w)
    for t in r.tensors:
        if t.name != "blk.1.attn_v.bias":
            w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ModelError, match=r"nob\.gguf: missing tensor `blk\.1\.attn_v\.bias` \(kv\*hd = 32\)"):
        import_gguf(tmp_path / "nob.gguf")
    g = GEMMAS["gemma3"]
    path = write_llama(tmp_path / "g.gguf", g, random_llama(g, seed=1), vocab=byte_vocab(MERGES))
    for kv, words in (({"gemma3.attention.sliding_window_pattern": ([1, 2], VT.ARRAY)}, "holds 1, not true or false"),
                      ({"gemma3.attention.sliding_window_pattern": (-6, VT.INT32)}, "= -6 is negative")):  # fmt: skip
        bad = _with_kv(path, tmp_path / "p.gguf", kv)
        with pytest.raises(ModelError, match=r"p\.gguf: `gemma3\.attention\.sliding_window_pattern` " + words):
            import_gguf(bad)


@pytest.mark.parametrize("arch", sorted(GEMMAS))
def test_gemma_imports_and_legality_refuses_it(tmp_path, monkeypatch, capsys, arch):
    """issue 41: Gemma files import as their computation (the embedding row scaled by √d, a GELU-gated
    feed-forward; Gemma 2 and 3: each block's output normed before its residual, windowed layers by
    llama.cpp's pattern; Gemma 2: scores and logits soft-capped; Gemma 3: qk-norm, its windowed layers'
    own rope base as a second angle table), and `fwdshim run` refuses the step at its first refused
    ops with the seed's reasons, each at its line — not the importer."""
    from fwdshim.tools import cli

    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    p = GEMMAS[arch]
    path = write_llama(tmp_path / f"{arch}.gguf", p, random_llama(p, seed=4), vocab=byte_vocab(MERGES))
    step = str(import_gguf(path, context=64).module)
    assert step.count("fwd.scale %x {factor = 8.000000e+00 : f32}") == 1 and step.count("fwd.gelu") == 2
    assert step.count("post_attention_norm") == step.count("post_ffw_norm") == (0 if arch == "gemma" else 2)
    windowed = {"gemma": 0, "gemma2": 1, "gemma3": 2}[arch]  # layers 0 (of every 2), 0 and 1 (five of every 6)
    assert step.count(" window 8 ") == windowed
    assert step.count("softcap 5.000000e+01") == (2 if arch == "gemma2" else 0)
    assert ("fwd.softcap %logits cap 3.000000e+01" in step) == (arch == "gemma2")
    assert step.count("%angles_swa hd") == (4 if arch == "gemma3" else 0) and step.count("attn_q_norm") == (2 if arch == "gemma3" else 0)
    rc = cli.main(["run", "--model", str(path), "--prompt", "hi", "--max-tokens", "1", "--device", "cpu", "--context", "64"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err and err.startswith("fwdshim: error: ")
    assert ":3: error: this lane has no kernel for the op (fwd.scale)" in err
    assert ":3: error: this lane has no kernel for the op (fwd.gelu)" in err or "more (`fwdshim-opt" in err
    if arch == "gemma2":
        assert "a soft-capped attention (`softcap C`) — its kernel caps no score" in err


def test_attention_biases_are_honoured(tmp_path):
    w = random_llama(TINY, seed=8)
    rng = np.random.default_rng(8)
    for i in range(TINY.n_layer):
        for name, n in (("attn_q", 64), ("attn_k", 32), ("attn_v", 32), ("attn_output", 64)):
            w[f"blk.{i}.{name}.bias"] = (0.5 * rng.standard_normal(n)).astype(np.float32)
    path = write_llama(tmp_path / "bias.gguf", TINY, w, vocab=byte_vocab(MERGES))
    ours = _logits(path, TOKENS)
    assert _err(ours, numpy_llama(rounded(w), TINY, TOKENS)) < 1e-5
    plain = {k: v for k, v in w.items() if not k.endswith(".bias")}
    assert _err(ours, numpy_llama(rounded(plain), TINY, TOKENS)) > 1e-3


# ---------------------------------------------------------------------------------------------
# alignment


@pytest.mark.parametrize("alignment", [16, 64, 128])
def test_converted_copy_keeps_the_declared_alignment(tmp_path, alignment):
    p = replace(TINY, rope_factors=(2.0,) * TINY.half)
    w = random_llama(p, seed=9)
    # the 16 bytes of an F16 `rope_freqs` put every later tensor off a 32-byte boundary
    types = {"blk.0.ffn_up.weight": QT.Q4_1, "blk.1.attn_norm.weight": QT.F16, "rope_freqs.weight": QT.F16}
    path = write_llama(tmp_path / "a.gguf", p, w, vocab=byte_vocab(MERGES), types=types, alignment=alignment)
    assert gguf.GGUFReader(path).alignment == alignment
    m = import_gguf(path, sidecar=tmp_path / "side.gguf", context=32, requantize="q8_0")
    assert m.gguf_path == tmp_path / "side.gguf" and "blk.1.attn_norm.weight" in m.converted
    side = gguf.GGUFReader(m.gguf_path)
    assert side.alignment == alignment
    assert all(t.data_offset % alignment == 0 for t in side.tensors)
    src = {t.name: t for t in gguf.GGUFReader(path).tensors}
    for t in side.tensors:
        if t.name not in m.converted:
            np.testing.assert_array_equal(np.asarray(t.data), np.asarray(src[t.name].data), err_msg=t.name)
    ref = rounded(w)
    ref["blk.0.ffn_up.weight"] = gguf.quants.dequantize(
        gguf.quants.quantize(gguf.quants.dequantize(gguf.quants.quantize(w["blk.0.ffn_up.weight"], QT.Q4_1), QT.Q4_1), QT.Q8_0),
        QT.Q8_0,
    )  # fmt: skip
    ref["blk.1.attn_norm.weight"] = w["blk.1.attn_norm.weight"].astype(np.float16)
    dec = Decoder(m, "dequant", "cpu")
    ours = np.stack([dec.step(t) for t in TOKENS[:4]])
    assert _err(ours, numpy_llama(ref, p, TOKENS[:4])) < 1e-5


# ---------------------------------------------------------------------------------------------
# tokenizer


@pytest.mark.parametrize("pre, whole", [("llama-bpe", True), ("llama3", True), ("default", False), ("smollm", False)])
def test_llama_bpe_looks_up_whole_words_first(tmp_path, pre, whole):
    tokens, merges, types = byte_vocab([("a", "b"), ("Ġ", "t")])
    tokens.insert(-1, "abc")  # a token no merge builds
    tokens.insert(-1, "Ġtab")
    types.insert(-1, int(gguf.TokenType.NORMAL))
    types.insert(-1, int(gguf.TokenType.NORMAL))
    p = replace(TINY, vocab=len(tokens))
    path = write_llama(tmp_path / "v.gguf", p, random_llama(p), vocab=(tokens, merges, types), pre=pre)
    tok = GGUFTokenizer(gguf.GGUFReader(path), path)
    got = [tokens[i] for i in tok.encode("abc tab")]
    assert got == (["abc", "Ġtab"] if whole else ["ab", "c", "Ġt", "ab"])
    assert tok.decode(tok.encode("abc tab")) == "abc tab"
