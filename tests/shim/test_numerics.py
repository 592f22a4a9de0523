"""Activation quantization and the int8 GEMV (fwdshim.int8) against float64 hand formulas and
gguf's own Q8_0 quantizer, on fresh random inputs."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT

from fwdshim.dialects.attributes import QuantFormat
from fwdshim.int8 import QK, QAct, gemv_int8, quantize_act, round_half_away
from fwdshim.weights import repack_q8_0

rng = np.random.default_rng(0)  # reseeded before each test by tests/conftest.py


def _randn(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _hand_quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float64 hand formula per block of a 1-D x: d (f32 of amax/127), q (half away from zero of the
    f64 quotient), and where the f32 quotient may round to the other side of a half (ambiguous)."""
    ds, qs, amb = [], [], []
    for start in range(0, x.size, QK):
        blk = x[start : start + QK].astype(np.float64)
        d = np.float32(np.float32(np.max(np.abs(blk))) / np.float32(127))
        ds.append(d)
        if d == 0:
            qs += [0] * blk.size
            amb += [False] * blk.size
            continue
        r = blk / np.float64(d)
        qs += [int(np.sign(v) * np.floor(abs(v) + 0.5)) for v in r]
        amb += [abs(abs(v) - np.floor(abs(v)) - 0.5) < 2e-5 for v in r]
    return np.array(ds, np.float32), np.array(qs, np.int64), np.array(amb)


@pytest.mark.parametrize("k", [32, 576, 45, 7])
def test_quantize_matches_hand_formula(k):
    x = _randn(k, scale=3.0)
    qa = quantize_act(x)
    d, q, amb = _hand_quantize(x)
    assert qa.q.dtype == np.int8 and qa.q.shape == (k,)
    assert qa.d.dtype == np.float32 and qa.d.shape == (-(-k // QK),)
    np.testing.assert_array_equal(qa.d, d)
    diff = qa.q.astype(np.int64) - q
    assert np.all(diff[~amb] == 0)
    assert np.all(np.abs(diff) <= 1)
    assert qa.s is None and qa.format == QuantFormat.ONE_WORD


def test_quantize_reaches_127_and_never_more():
    x = _randn(64, 32, scale=10.0)
    qa = quantize_act(x)
    assert np.abs(qa.q.astype(np.int32)).max() == 127
    # each block's largest magnitude quantizes to exactly ±127
    amax_idx = np.argmax(np.abs(x), axis=-1)
    np.testing.assert_array_equal(np.abs(qa.q[np.arange(64), amax_idx]), 127)


def test_quantize_vs_gguf_q8_0():
    """Same d (gguf rounds it to f16) and the same quants, except at near-half quotients."""
    x = _randn(4, 256, scale=2.0)
    qa = quantize_act(x)
    qs, d16 = repack_q8_0(gguf.quants.quantize(x, QT.Q8_0))
    np.testing.assert_array_equal(qa.d.astype(np.float16).astype(np.float32), d16)
    ratio = np.abs(x.astype(np.float64) / np.repeat(qa.d, QK, axis=-1))
    near_half = np.abs(ratio - np.floor(ratio) - 0.5) < 2e-5
    diff = qa.q.astype(np.int32) - qs.astype(np.int32)
    assert np.all(diff[~near_half] == 0)
    assert np.all(np.abs(diff) <= 1)


def test_all_zero_block_gives_zero_scale_and_quants():
    x = _randn(96)
    x[32:64] = 0.0
    for fmt in QuantFormat:
        qa = quantize_act(x, fmt)
        assert qa.d[1] == 0 and np.all(qa.q[32:64] == 0)
        assert qa.d[0] > 0 and qa.d[2] > 0
        assert not np.isnan(qa.values()).any()
        if qa.s is not None:
            assert qa.s[1] == 0 and not np.isnan(qa.s).any()
    whole = quantize_act(np.zeros(40, np.float32), "two_words")
    np.testing.assert_array_equal(whole.d, [0, 0])
    np.testing.assert_array_equal(whole.s, [0, 0])
    assert not np.any(whole.q)


def test_round_half_away_from_zero_at_exact_halves():
    # amax 127 -> d = 1 exactly, so x/d is x: halves are exact and must round away from zero
    halves = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -126.5, 41.5, -64.5], np.float32)
    x = np.zeros(32, np.float32)
    x[0] = 127.0
    x[1 : 1 + halves.size] = halves
    qa = quantize_act(x)
    assert qa.d[0] == np.float32(1.0)
    np.testing.assert_array_equal(qa.q[1 : 1 + halves.size], [1, -1, 2, -2, 3, -3, 127, -127, 42, -65])
    # d = 0.125 exactly (amax 15.875): 0.0625 * odd is a half
    y = np.zeros(32, np.float32)
    y[0] = -15.875
    y[1:4] = [0.0625, 0.1875, -0.3125]
    qy = quantize_act(y)
    assert qy.d[0] == np.float32(0.125)
    np.testing.assert_array_equal(qy.q[:4], [-127, 1, 2, -3])


def test_round_half_away_is_exact_near_half():
    below = np.nextafter(np.float32(0.5), np.float32(0))  # 0.49999997: v + 0.5 would round up
    v = np.array([below, -below, 0.5, -0.5, 2.5, 3.5, -3.5, 0.0], np.float32)
    np.testing.assert_array_equal(round_half_away(v), [0, 0, 1, -1, 3, 4, -4, 0])
    assert round_half_away(v).dtype == np.float32


def test_partial_last_block_is_its_own_block():
    x = _randn(45, scale=4.0)
    qa = quantize_act(x)
    tail = quantize_act(x[32:])
    head = quantize_act(x[:32])
    np.testing.assert_array_equal(qa.q, np.concatenate([head.q, tail.q]))
    np.testing.assert_array_equal(qa.d, np.concatenate([head.d, tail.d]))
    assert qa.d[1] == np.float32(np.float32(np.abs(x[32:]).max()) / np.float32(127))


def test_two_words_keeps_scale_times_sum():
    x = _randn(3, 70)
    qa = quantize_act(x, QuantFormat.TWO_WORDS)
    assert qa.s is not None and qa.s.shape == qa.d.shape == (3, 3)
    padded = np.zeros((3, 96), np.int64)
    padded[:, :70] = qa.q
    sums = padded.reshape(3, 3, 32).sum(-1)
    np.testing.assert_array_equal(qa.s, (qa.d * sums.astype(np.float32)).astype(np.float32))
    np.testing.assert_array_equal(qa.q, quantize_act(x).q)  # same quants as one_word


def test_values_are_exact_products_in_float64():
    qa = quantize_act(_randn(50))
    v = qa.values()
    d = np.repeat(qa.d.astype(np.float64), QK)[:50]
    np.testing.assert_array_equal(v, d * qa.q.astype(np.float64))


def _hand_gemv(qs_w, d_w, qa: QAct) -> np.ndarray:
    n, k = qs_w.shape
    out = np.zeros(n)
    for i in range(n):
        for b in range(d_w.shape[1]):
            sl = slice(b * QK, min(k, (b + 1) * QK))
            dot = int(np.dot(qs_w[i, sl].astype(np.int64), qa.q[sl].astype(np.int64)))
            out[i] += float(d_w[i, b]) * float(qa.d[b]) * dot
    return out


@pytest.mark.parametrize("n,k", [(5, 64), (3, 96), (4, 45)])
def test_gemv_int8_matches_hand_formula(n, k):
    qs_w = rng.integers(-127, 128, size=(n, k)).astype(np.int8)
    d_w = (rng.random((n, -(-k // QK))) * 0.01 + 1e-3).astype(np.float32)
    qa = quantize_act(_randn(k))
    y = gemv_int8(qs_w, d_w, qa)
    assert y.dtype == np.float32 and y.shape == (n,)
    np.testing.assert_allclose(y, _hand_gemv(qs_w, d_w, qa), rtol=1e-6, atol=1e-7)


def test_gemv_int8_over_gguf_blocks_equals_dequantized_product():
    w = _randn(7, 128, scale=0.1)
    qs, d = repack_q8_0(gguf.quants.quantize(w, QT.Q8_0))
    qa = quantize_act(_randn(128))
    w_deq = gguf.quants.dequantize(gguf.quants.quantize(w, QT.Q8_0), QT.Q8_0).astype(np.float64)
    np.testing.assert_allclose(gemv_int8(qs, d, qa), w_deq @ qa.values(), rtol=1e-6, atol=1e-7)


def test_gemv_int8_rows_of_activations():
    qs_w = rng.integers(-127, 128, size=(6, 64)).astype(np.int8)
    d_w = rng.random((6, 2)).astype(np.float32)
    x = _randn(3, 64)
    qa = quantize_act(x)
    y = gemv_int8(qs_w, d_w, qa)
    assert y.shape == (3, 6)
    for r in range(3):
        np.testing.assert_allclose(y[r], _hand_gemv(qs_w, d_w, quantize_act(x[r])), rtol=1e-6)


def test_gemv_int8_rejects_mismatched_rows():
    with pytest.raises(ValueError, match="weight rows have 64 values"):
        gemv_int8(np.zeros((2, 64), np.int8), np.zeros((2, 2), np.float32), quantize_act(_randn(32)))
