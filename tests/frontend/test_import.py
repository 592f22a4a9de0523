"""GGUF import: the decode-step IR, the Q/K un-permutation, requantization into the sidecar, the
tokenizer, and one clear line for each kind of bad input.

The models are tiny `llama` files written by `export.write_llama` from fresh random weights; the
oracle is a float64 NumPy Llama written here from the weights in the halves layout (never from what
the importer un-permuted), fed the same Q8_0-rounded values.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from support.llama_numpy import MERGES, TINY, numpy_llama, rounded

from fwdshim.dialects import fwd
from fwdshim.frontend.export import byte_vocab, copy_metadata, permute_rows, random_llama, write_llama
from fwdshim.frontend.gguf_model import LlamaParams, ModelError, unpermute_rows
from fwdshim.frontend.importer import import_gguf
from fwdshim.frontend.tokenizer import GGUFTokenizer
from fwdshim.tools import cli
from fwdshim.tools.runner import Decoder, RunError, compile_step, generate


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))


def tiny(tmp_path: Path, name="tiny.gguf", params=TINY, seed=0, **kw) -> tuple[Path, dict[str, np.ndarray]]:
    w = random_llama(params, seed=seed, tied=kw.pop("tied", True))
    return write_llama(tmp_path / name, params, w, vocab=byte_vocab(MERGES), **kw), w


# ---------------------------------------------------------------------------------------------
# an independent Llama (float64, halves-layout weights)


# ---------------------------------------------------------------------------------------------
# the step


def test_step_signature_and_ops(tmp_path):
    path, _ = tiny(tmp_path)
    m = import_gguf(path, context=100)
    f = m.decode_step()
    args = [a.type for a in f.body.block.args]
    assert [fwd.dims_of(t) for t in args[:2]] == [(64,), (2, 8)]
    assert [fwd.dims_of(t) for t in args[2:]] == [(99, 32)] * 4
    assert [fwd.dims_of(t) for t in f.function_type.outputs] == [(262,)] + [(32,)] * 4
    names = [op.tensor_name.data for op in f.walk() if isinstance(op, fwd.WeightOp)]
    assert names[:5] == ["blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
                         "blk.0.attn_v.weight", "blk.0.attn_output.weight"]  # fmt: skip
    assert names[-1] == "token_embd.weight"  # tied output
    att = [op for op in f.walk() if isinstance(op, fwd.AttentionOp)]
    assert [(a.h.value.data, a.kv.value.data, a.hd.value.data, a.l.value.data) for a in att] == [
        (4, 2, 16, 100)
    ] * 2
    # weighted RMS norm = rms_norm then elementwise mul by the weight (norm_weight fuses them)
    norms = [op for op in f.walk() if isinstance(op, fwd.RmsNormOp)]
    assert len(norms) == 5 and all(isinstance(n.next_op, fwd.ElementwiseOp) for n in norms)
    assert all(abs(n.eps.value.data - 1e-5) < 1e-12 for n in norms)
    assert sum(isinstance(op, fwd.MatmulOp) for op in f.walk()) == 2 * 7 + 1


def test_header_counts_one_in_the_singular(tmp_path):
    """The IR's heading comment said `1 layers`, `1 heads / 1 kv heads`, `1 tensors converted`."""
    one = dataclasses.replace(TINY, n_layer=1, d=32, h=1, kv=1, hd=32, rope_dim=32)
    path, _ = tiny(tmp_path, params=one, types={"blk.0.ffn_up.weight": QT.Q4_1})
    text = import_gguf(path, requantize="q8_0", sidecar=tmp_path / "side.gguf").text
    assert text.startswith("// fwdshim import of tiny.gguf: llama, 1 layer, d 32, ff 96, 1 head / 1 kv head of 32, ")
    assert f"// weights: {tmp_path / 'side.gguf'} (1 tensor converted by fwdshim)\n" in text
    two = import_gguf(tiny(tmp_path, "two.gguf")[0], context=32).text
    assert two.startswith("// fwdshim import of two.gguf: llama, 2 layers, d 64, ff 96, 4 heads / 2 kv heads of 16, ")


def test_untied_output_reads_output_weight(tmp_path):
    path, _ = tiny(tmp_path, tied=False)
    names = [
        op.tensor_name.data for op in import_gguf(path).decode_step().walk() if isinstance(op, fwd.WeightOp)
    ]
    assert names[-1] == "output.weight" and names.count("token_embd.weight") == 0


def test_unpermute_inverts_gguf_permutation():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4 * 16, 64)).astype(np.float32)
    g = permute_rows(w, 4)
    assert not np.array_equal(g, w)
    # GGUF interleaves: row 1 of a head is row `half` of the halves order
    np.testing.assert_array_equal(g[1], w[8])
    np.testing.assert_array_equal(unpermute_rows(g, 4), w)
    raw = gguf.quants.quantize(w, QT.Q8_0)  # quantized rows move whole
    np.testing.assert_array_equal(unpermute_rows(gguf.quants.quantize(g, QT.Q8_0), 4), raw)


def test_step_matches_numpy_llama_at_every_position(tmp_path):
    """Rope, Q/K un-permutation, GQA and the KV-cache append checked at positions 0..9."""
    path, w = tiny(tmp_path, seed=3)
    m = import_gguf(path, context=32)
    dec = Decoder(m, "dequant", "cpu")
    tokens = [int(t) for t in np.random.default_rng(7).integers(0, TINY.vocab, 10)]
    ours = np.stack([dec.step(t) for t in tokens])
    ref = numpy_llama(rounded(w), TINY, tokens)
    err = np.linalg.norm(ours - ref, axis=1) / np.linalg.norm(ref, axis=1)
    assert err.max() < 1e-5, err
    # without the un-permutation, positions after 0 go wrong: the check has teeth
    wrong = dict(w)
    for i in range(TINY.n_layer):
        for name, heads in (("attn_q", TINY.h), ("attn_k", TINY.kv)):
            wrong[f"blk.{i}.{name}.weight"] = permute_rows(w[f"blk.{i}.{name}.weight"], heads)
    bad = numpy_llama(rounded(wrong), TINY, tokens)
    assert np.linalg.norm(bad[0] - ref[0]) / np.linalg.norm(ref[0]) < 1e-6  # pos 0: rope is the identity
    assert (np.linalg.norm(bad[1:] - ref[1:], axis=1) / np.linalg.norm(ref[1:], axis=1)).min() > 1e-3


def test_greedy_generation_and_context_full(tmp_path):
    path, w = tiny(tmp_path, seed=4)
    m = import_gguf(path, context=8)
    gen = generate(Decoder(m, "dequant", "cpu"), [3, 4, 5], 20)
    assert gen.stopped == "context full" and len(gen.tokens) == 6  # 3 + 5 = 8 positions
    ref = numpy_llama(rounded(w), TINY, [3, 4, 5, *gen.tokens[:-1]])
    assert gen.tokens == [int(np.argmax(r)) for r in ref[2:]]


# ---------------------------------------------------------------------------------------------
# requantization


def test_requantize_q4_1_into_sidecar(tmp_path):
    types = {n: QT.Q4_1 for n, a in random_llama(TINY).items() if a.ndim == 2}
    types.update({"blk.0.attn_norm.weight": QT.F16, "token_embd.weight": QT.Q8_0})
    path, _ = tiny(tmp_path, types=types)
    side = tmp_path / "side.gguf"
    m = import_gguf(path, sidecar=side, requantize="q8_0")
    assert m.gguf_path == side and side.is_file()
    assert set(m.converted) == (set(types) - {"token_embd.weight"})
    src = {t.name: t for t in gguf.GGUFReader(path).tensors}
    out = {t.name: t for t in gguf.GGUFReader(side).tensors}
    for name in m.converted:
        if src[name].tensor_type == QT.Q4_1:
            want = gguf.quants.quantize(gguf.quants.dequantize(src[name].data, QT.Q4_1), QT.Q8_0)
            assert out[name].tensor_type == QT.Q8_0
            np.testing.assert_array_equal(out[name].data, want)
    assert out["blk.0.attn_norm.weight"].tensor_type == QT.F32
    np.testing.assert_array_equal(
        out["blk.0.attn_norm.weight"].data, src["blk.0.attn_norm.weight"].data.astype(np.float32)
    )
    np.testing.assert_array_equal(out["token_embd.weight"].data, src["token_embd.weight"].data)  # kept as is
    ggml = {
        op.tensor_name.data: fwd.ggml_type_of(op.result)
        for op in m.decode_step().walk()
        if isinstance(op, fwd.WeightOp)
    }
    assert {ggml[n] for n in types if ggml[n] is not None} == {"q8_0"}
    # the tokenizer and hyperparameters travel with the sidecar
    r = gguf.GGUFReader(side)
    assert r.fields["tokenizer.ggml.merges"].contents() == [f"{a} {b}" for a, b in MERGES]
    assert r.fields["llama.attention.head_count_kv"].contents() == 2


def test_requantize_none_is_refused_naming_the_type(tmp_path):
    types = {"blk.1.ffn_down.weight": QT.MXFP4}
    path, _ = tiny(tmp_path, types=types)
    m = import_gguf(path, requantize="none")
    assert not m.converted and m.gguf_path == path
    with pytest.raises(
        RunError, match=r"tiny\.gguf\.decode_step\.mlir:\d+:\d+: error: a matmul over MXFP4 weights"
    ):
        compile_step(m, "dequant")


def test_sidecar_is_cached_and_reused(tmp_path):
    path, _ = tiny(tmp_path, types={"blk.0.attn_q.weight": QT.Q5_0})
    a = import_gguf(path, requantize="q8_0")
    assert a.gguf_path.parent == tmp_path / "cache" / "models" and a.converted == {
        "blk.0.attn_q.weight": QT.Q8_0
    }
    stamp = a.gguf_path.stat().st_mtime_ns
    b = import_gguf(path, requantize="q8_0")
    assert (
        b.gguf_path == a.gguf_path and b.gguf_path.stat().st_mtime_ns == stamp and b.converted == a.converted
    )


def test_context_past_the_score_row_is_refused(tmp_path):
    path, _ = tiny(tmp_path)
    from fwdshim.dialects.fwd import AttentionOp

    step = compile_step(import_gguf(path, context=12256), "dequant")
    lengths = [op.l.value.data for op in step.walk() if isinstance(op, AttentionOp)]
    assert lengths and set(lengths) == {12256}, "the step attends the asked context"
    with pytest.raises(ModelError, match="^context=12257: the attention holds at most 12256 positions$"):
        import_gguf(path, context=12257)  # refused at the import (legality's K18 refuses such IR too: test_legalize)


# ---------------------------------------------------------------------------------------------
# MoE


MOE = LlamaParams(n_layer=2, d=64, ff=64, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                  vocab=262, n_expert=8, top_k=2)  # fmt: skip


def test_moe_import_requantizes_the_whole_manifest(tmp_path):
    w = random_llama(MOE, seed=2)
    router = {f"blk.{i}.ffn_gate_inp.weight": QT.F32 for i in range(2)}
    path = write_llama(tmp_path / "moe.gguf", MOE, w, types=router)
    m = import_gguf(path)
    assert set(m.converted) == set(router)
    moes = [op for op in m.decode_step().walk() if isinstance(op, fwd.MoeOp)]
    assert len(moes) == 2
    for op in moes:
        assert (op.n_expert.value.data, op.top_k.value.data, op.renormalize is not None) == (8, 2, True)
        assert [fwd.ggml_type_of(v) for v in (op.router, op.gate_exps, op.up_exps, op.down_exps)] == [
            "q8_0"
        ] * 4
    none = import_gguf(path, requantize="none", sidecar=tmp_path / "none.gguf")  # the mixture's kernels read Q8_0
    assert set(none.converted) == set(router) and compile_step(none, "dequant") is not None


# ---------------------------------------------------------------------------------------------
# tokenizer


def test_tokenizer_from_gguf_metadata(tmp_path):
    path, _ = tiny(tmp_path)
    tok = GGUFTokenizer(gguf.GGUFReader(path), path)
    tokens = byte_vocab(MERGES)[0]
    ids = tok.encode("the abc<|endoftext|>")
    assert [tokens[i] for i in ids] == ["t", "he", "Ġ", "abc", "<|endoftext|>"]
    assert tok.decode(ids) == "the abc<|endoftext|>"
    assert tok.stop_ids == {261} and not tok.add_bos
    assert tok.encode("é") == [195, 169] and tok.decode([195, 169]) == "é"  # bytes of UTF-8, byte-level


def test_tokenizer_refuses_other_models(tmp_path):
    path, _ = tiny(tmp_path)
    out = _rewrite(path, tmp_path / "ugm.gguf", kv={"tokenizer.ggml.model": "t5"})
    with pytest.raises(ModelError, match=r"ugm\.gguf: tokenizer `t5` is not supported \(fwdshim reads byte-level BPE `gpt2` and SentencePiece `llama` vocabularies\)"):
        GGUFTokenizer(gguf.GGUFReader(out), out)
    # a SentencePiece vocabulary without its scores is named as such
    out = _rewrite(path, tmp_path / "spm.gguf", kv={"tokenizer.ggml.model": "llama"})
    with pytest.raises(ModelError, match=r"spm\.gguf: `tokenizer.ggml.scores` has 0 entries for \d+ tokens"):
        GGUFTokenizer(gguf.GGUFReader(out), out)


# ---------------------------------------------------------------------------------------------
# bad input: one line naming the file, exit status 1, no traceback


def _rewrite(src: Path, dst: Path, *, drop=(), replace=None, kv=None, arch=None) -> Path:
    """A copy of a GGUF file without tensors `drop`, with tensors `replace` (name -> float32 array)
    and metadata `kv` (string values) changed."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch or r.fields["general.architecture"].contents())
    copy_metadata(r, w, skip=tuple(kv or ()))
    for k, v in (kv or {}).items():
        w.add_string(k, v)
    for t in r.tensors:
        if t.name in drop:
            continue
        if t.name in (replace or {}):
            w.add_tensor(t.name, replace[t.name])
        else:
            w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good, _ = tiny(tmp_path, "good.gguf")
    data = good.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) // 2])
    header = tmp_path / "header.gguf"
    header.write_bytes(data[:40])
    text = tmp_path / "notes.gguf"
    text.write_text("just some text, not a model\n")
    return {
        "missing": (tmp_path / "absent.gguf", "no such file"),
        "truncated": (cut, "truncated or corrupt GGUF file of"),
        "truncated header": (header, "truncated or corrupt GGUF file"),
        "not gguf": (text, "not a GGUF file"),
        "architecture": (_rewrite(good, tmp_path / "falcon.gguf", arch="falcon"), "unsupported architecture `falcon` (fwdshim imports `llama`, `qwen2`, `qwen3`, `qwen3moe`, `phi3`, `gemma`, `gemma2` and `gemma3`)"),
        "missing tensor": (_rewrite(good, tmp_path / "hole.gguf", drop={"blk.1.ffn_up.weight"}),
                           "missing tensor `blk.1.ffn_up.weight`"),
        "shape": (_rewrite(good, tmp_path / "shape.gguf", replace={"blk.0.attn_k.weight": np.zeros((64, 64), np.float32)}),
                  "tensor `blk.0.attn_k.weight` has shape 64x64, expected kv*hd x d = 32x64"),
    }  # fmt: skip


@pytest.mark.parametrize("case", ["missing", "truncated", "truncated header", "not gguf", "architecture",
                                  "missing tensor", "shape"])  # fmt: skip
@pytest.mark.parametrize("command", ["import", "run"])
def test_bad_input_is_one_line(tmp_path, capsys, case, command):
    path, why = _bad_inputs(tmp_path)[case]
    argv = ["import", str(path), "-o", str(tmp_path / "step.mlir")] if command == "import" else \
        ["run", "--model", str(path), "--prompt", "hi", "--max-tokens", "1", "--device", "cpu"]  # fmt: skip
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 1
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"fwdshim: error: {path}: ") and why in err, err


def test_bad_input_from_the_console_script(tmp_path):
    import subprocess

    exe = shutil.which("fwdshim")
    assert exe is not None
    text = tmp_path / "x.gguf"
    text.write_text("hello")
    out = subprocess.run([exe, "import", str(text)], capture_output=True, text=True)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == f"fwdshim: error: {text}: not a GGUF file (it starts with b'hell', not b'GGUF')\n"
