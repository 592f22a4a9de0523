"""Weight stores (fwdshim.weights): DictWeights, GGUFWeights over a real GGUF file, dequantize and the
Q8_0 repack, against gguf's own quantizer and dequantizer."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT

from fwdshim.dialects.attributes import GgmlType
from fwdshim.frontend.gguf_model import GGUFWeights
from fwdshim.weights import (
    DictWeights,
    MissingWeight,
    WeightStore,
    dequantize,
    quantize_weight,
    repack_q8_0,
)

rng = np.random.default_rng(0)  # reseeded before each test by tests/conftest.py


def _randn(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def test_repack_q8_0_reads_the_34_byte_blocks():
    w = _randn(5, 96)
    raw = gguf.quants.quantize(w, QT.Q8_0)
    qs, d = repack_q8_0(raw)
    assert qs.dtype == np.int8 and qs.shape == (5, 96)
    assert d.dtype == np.float32 and d.shape == (5, 3)
    blocks = raw.reshape(5, 3, 34)
    for n, b in [(0, 0), (4, 2), (2, 1)]:
        assert d[n, b] == np.frombuffer(blocks[n, b, :2].tobytes(), "<f2")[0]
        np.testing.assert_array_equal(qs[n, b * 32 : (b + 1) * 32], blocks[n, b, 2:].view(np.int8))
    deq = gguf.quants.dequantize(raw, QT.Q8_0)
    np.testing.assert_array_equal(np.repeat(d, 32, axis=1) * qs.astype(np.float32), deq)


def test_repack_rejects_partial_blocks():
    with pytest.raises(ValueError, match="34-byte blocks"):
        repack_q8_0(np.zeros((2, 35), np.uint8))


def test_dict_weights_from_arrays_and_quantized_blocks():
    f32, f16, wq = _randn(4, 8), _randn(3, 5).astype(np.float16), _randn(6, 64)
    raw = gguf.quants.quantize(wq, QT.Q8_0)
    store = DictWeights({"a": f32, "b": f16, "c": (raw, QT.Q8_0), "d": quantize_weight(wq)}, e=(raw, "q8_0"))
    assert isinstance(store, WeightStore)
    a, b, c, d, e = (store.get(n) for n in "abcde")
    assert (a.ggml, a.shape) == (GgmlType.F32, (4, 8))
    assert (b.ggml, b.shape) == (GgmlType.F16, (3, 5))
    assert (c.ggml, c.shape, c.raw.shape) == (GgmlType.Q8_0, (6, 64), (6, 68))
    np.testing.assert_array_equal(d.raw, raw)
    np.testing.assert_array_equal(e.f32, c.f32)
    np.testing.assert_array_equal(a.f32, f32)
    np.testing.assert_array_equal(b.f32, f16.astype(np.float32))
    np.testing.assert_array_equal(c.f32, gguf.quants.dequantize(raw, QT.Q8_0))
    assert c.f32.dtype == np.float32 and c.f64.dtype == np.float64
    np.testing.assert_array_equal(c.f64, c.f32.astype(np.float64))
    assert c.f64 is c.f64  # cached
    assert store.get("c") is c


def test_missing_weight_names_the_tensor():
    with pytest.raises(MissingWeight, match=r"^weight `blk.9.attn_q.weight` is not in the store \(it holds 0 weights\)$"):
        DictWeights().get("blk.9.attn_q.weight")
    store = DictWeights({"blk.0.attn_q.weight": np.ones((2, 32), np.float32), "output_norm.weight": np.ones(32, np.float32)})
    with pytest.raises(MissingWeight, match=r"^weight `blk.0.attn_q.weigth` is not in the store \(did you mean `blk.0.attn_q.weight`\?\)$"):
        store.get("blk.0.attn_q.weigth")
    with pytest.raises(MissingWeight, match=r"\(it holds 2 weights\)$"):
        store.get("token_embd.weight")


def test_bare_arrays_must_be_f32_or_f16():
    with pytest.raises(TypeError, match="float32 or float16"):
        DictWeights(a=np.zeros((2, 2), np.float64))


def test_expert_stack_and_rows_dequantize_alone():
    w = _randn(4, 6, 64)
    wd = quantize_weight(w)
    assert wd.shape == (4, 6, 64) and wd.raw.shape == (4, 6, 68)
    full = dequantize(wd)
    for e in range(4):
        np.testing.assert_array_equal(wd.expert(e), full[e].astype(np.float64))
    assert wd.expert(2) is wd.expert(2)
    np.testing.assert_array_equal(wd.rows(3), full[3])
    np.testing.assert_array_equal(wd.rows(np.array([1, 0])), full[[1, 0]])
    qs, d = wd.q8_0
    assert qs.shape == (4, 6, 64) and d.shape == (4, 6, 2)
    with pytest.raises(ValueError, match="not an expert stack"):
        quantize_weight(_randn(3, 32)).expert(0)


def test_gguf_weights_give_logical_shapes(tmp_path):
    path = tmp_path / "tiny.gguf"
    wq, norm, emb = _randn(6, 64), _randn(64), _randn(10, 32).astype(np.float16)
    stack = _randn(3, 4, 32)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("blk.0.attn_q.weight", gguf.quants.quantize(wq, QT.Q8_0), raw_dtype=QT.Q8_0)
    writer.add_tensor("blk.0.attn_norm.weight", norm)
    writer.add_tensor("token_embd.weight", emb)
    writer.add_tensor("blk.0.ffn_up_exps.weight", gguf.quants.quantize(stack, QT.Q8_0), raw_dtype=QT.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    store = GGUFWeights(str(path))
    assert isinstance(store, WeightStore)
    assert set(store.names()) == {"blk.0.attn_q.weight", "blk.0.attn_norm.weight", "token_embd.weight", "blk.0.ffn_up_exps.weight"}
    q = store.get("blk.0.attn_q.weight")
    assert (q.ggml, q.shape) == (GgmlType.Q8_0, (6, 64))  # GGUF stores ne = [64, 6]
    np.testing.assert_array_equal(q.raw, gguf.quants.quantize(wq, QT.Q8_0))
    np.testing.assert_array_equal(q.f32, gguf.quants.dequantize(gguf.quants.quantize(wq, QT.Q8_0), QT.Q8_0))
    n = store.get("blk.0.attn_norm.weight")
    assert (n.ggml, n.shape) == (GgmlType.F32, (64,))
    np.testing.assert_array_equal(n.f32, norm)
    e = store.get("token_embd.weight")
    assert (e.ggml, e.shape) == (GgmlType.F16, (10, 32))
    np.testing.assert_array_equal(e.rows(7), emb[7].astype(np.float32))
    s = store.get("blk.0.ffn_up_exps.weight")
    assert s.shape == (3, 4, 32)
    np.testing.assert_allclose(s.expert(1), stack[1], atol=0.05)
    assert store.get("blk.0.attn_q.weight") is q
    with pytest.raises(MissingWeight, match=r"^weight `output.weight` is not in \S+tiny.gguf \(it holds 4 weights\)$"):
        store.get("output.weight")


@pytest.mark.parametrize("shape,ggml,what", [((32, 40), "q8_0", "32 values, not rows of 40 values"),
                                             ((4, 96), "q4_k", "256 values, not rows of 96 values"),
                                             ((), "q8_0", "32 values, not a scalar")])  # fmt: skip
def test_quantize_weight_of_partial_blocks_is_a_value_error(shape, ggml, what):
    """gguf's quantizer raised its own QuantError."""
    with pytest.raises(ValueError, match=rf"^weight `w`: {ggml} stores rows of whole blocks of {what}$"):
        quantize_weight(np.zeros(shape, np.float32), ggml, name="w")
    assert quantize_weight(np.ones((2, 64), np.float32), "q8_0").shape == (2, 64)
