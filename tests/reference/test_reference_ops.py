"""The reference executor's per-op functions against float64 hand formulas (loops written out here,
independent of fwdshim.reference), on fresh random inputs."""

from __future__ import annotations

import math

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT

from fwdshim import reference as ref
from fwdshim.int8 import quantize_act
from fwdshim.weights import quantize_weight

rng = np.random.default_rng(0)  # reseeded before each test by tests/conftest.py


def _randn(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def tol_close(actual, expected, rtol=2e-6, atol=1e-6):
    assert actual.dtype == np.float32
    np.testing.assert_allclose(actual, np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------------
# row reductions


def test_rms_norm_weighted_with_residual():
    x, r, w = _randn(576), _randn(576), _randn(576)
    h = (x + r).astype(np.float64)  # the sum is an f32 value
    rms = math.sqrt(sum(v * v for v in h) / h.size + float(np.float32(1e-6)))
    tol_close(ref.rms_norm(x, weight=w, residual=r, eps=1e-6), h / rms * w.astype(np.float64))


def test_rms_norm_rows_per_head():
    x, w = _randn(9, 64), _randn(64)
    out = ref.rms_norm(x, weight=w)
    for i in range(9):
        h = x[i].astype(np.float64)
        tol_close(out[i], h / math.sqrt(np.dot(h, h) / 64 + float(np.float32(1e-5))) * w)


def test_layer_norm_weight_and_bias():
    x, w, b = _randn(3, 100, scale=3.0) + 2.0, _randn(100), _randn(100)
    out = ref.layer_norm(x, weight=w, bias=b, eps=1e-5)
    for i in range(3):
        h = x[i].astype(np.float64)
        mean = sum(h) / h.size
        var = sum((v - mean) ** 2 for v in h) / h.size
        tol_close(out[i], (h - mean) / math.sqrt(var + float(np.float32(1e-5))) * w + b)


def test_softmax_rows():
    x = _randn(4, 17, scale=5.0)
    out = ref.softmax(x)
    for i in range(4):
        e = [math.exp(v - max(x[i])) for v in x[i].astype(np.float64)]
        tol_close(out[i], [v / sum(e) for v in e])
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# elementwise


def test_silu():
    x = _randn(1000, scale=8.0)
    tol_close(ref.silu(x), [v / (1 + math.exp(-v)) for v in x.astype(np.float64)])
    assert ref.silu(np.array([-1e4], np.float32))[0] == 0.0


@pytest.mark.parametrize("kind,fn", [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b), ("max", max), ("min", min),
])  # fmt: skip
def test_elementwise_kinds(kind, fn):
    a, b = _randn(300), _randn(300)
    out = ref.elementwise(kind, a, b)
    expect = np.array([fn(float(u), float(v)) for u, v in zip(a, b)], np.float64).astype(np.float32)
    np.testing.assert_array_equal(out, expect)  # one f32 operation: correctly rounded


def test_elementwise_row_keeps_operand_order():
    block, row = _randn(4, 8), _randn(8)
    np.testing.assert_array_equal(ref.elementwise("sub", block, row, row=True), block - row[None, :])
    np.testing.assert_array_equal(ref.elementwise("div", row, block, row=True), row[None, :] / block)
    with pytest.raises(ValueError, match="without `row`"):
        ref.elementwise("add", block, row)


def test_transpose():
    x = _randn(3, 5)
    out = ref.transpose(x)
    assert out.shape == (5, 3) and all(out[j, i] == x[i, j] for i in range(3) for j in range(5))


# ---------------------------------------------------------------------------------------------
# rope


def test_rope_angles_standard_theta():
    ang = ref.rope_angles(37, 32, base=10000.0)
    assert ang.shape == (2, 32) and ang.dtype == np.float32
    for i in (0, 1, 13, 31):
        theta = 37 * 10000.0 ** (-2 * i / 64)
        assert ang[0, i] == np.float32(math.cos(theta)) and ang[1, i] == np.float32(math.sin(theta))
    np.testing.assert_array_equal(ref.rope_angles(0, 8), np.stack([np.ones(8), np.zeros(8)]))


def _hand_rope(x, cos, sin, hd, half):
    y = x.astype(np.float64).copy()
    for head in range(x.size // hd):
        base = head * hd
        for i in range(half):
            a, b = float(x[base + i]), float(x[base + i + half])
            y[base + i] = a * cos[i] - b * sin[i]
            y[base + i + half] = a * sin[i] + b * cos[i]
    return y


def test_rope_turns_pairs_of_every_head():
    x = _randn(9 * 64)
    ang = ref.rope_angles(1234, 32)
    out = ref.rope(x, ang, hd=64, half=32)
    tol_close(out, _hand_rope(x, ang[0].astype(np.float64), ang[1].astype(np.float64), 64, 32))
    # a rotation keeps each pair's length
    pairs = lambda v: v.reshape(9, 2, 32) ** 2  # noqa: E731
    np.testing.assert_allclose(pairs(out).sum(1), pairs(x).sum(1), rtol=1e-5)


def test_rope_partial_rotary_copies_the_tail():
    x = _randn(2 * 16)
    ang = _randn(2, 4)
    out = ref.rope(x, ang, hd=16, half=4)
    tol_close(out, _hand_rope(x, ang[0].astype(np.float64), ang[1].astype(np.float64), 16, 4))
    np.testing.assert_array_equal(out.reshape(2, 16)[:, 8:], x.reshape(2, 16)[:, 8:])


# ---------------------------------------------------------------------------------------------
# attention


def _hand_attention(q, k, v, kc, vc, h, kv, hd, vd, scale=None, cap=None):
    out = np.zeros(h * vd)
    keys = [row.astype(np.float64) for row in kc] + [k.astype(np.float64)]
    vals = [row.astype(np.float64) for row in vc] + [v.astype(np.float64)]
    s = 1 / math.sqrt(hd) if scale is None else scale
    for j in range(h):
        g = j // (h // kv)
        qj = q[j * hd : (j + 1) * hd].astype(np.float64)
        scores = [float(np.dot(qj, key[g * hd : (g + 1) * hd])) * s for key in keys]
        if cap is not None:
            scores = [cap * math.tanh(x / cap) for x in scores]
        m = max(scores)
        e = [math.exp(x - m) for x in scores]
        for t, val in enumerate(vals):
            out[j * vd : (j + 1) * vd] += e[t] / sum(e) * val[g * vd : (g + 1) * vd]
    return out


@pytest.mark.parametrize("h,kv", [(4, 4), (6, 2), (8, 2), (8, 1)])  # GQA ratios 1, 3, 4, 8
@pytest.mark.parametrize("rows", [0, 1, 7])
def test_attention_gqa_over_written_cache_rows(h, kv, rows):
    hd = 16
    q, k, v = _randn(h * hd), _randn(kv * hd), _randn(kv * hd)
    kc, vc = _randn(rows, kv * hd), _randn(rows, kv * hd)
    out = ref.attention(q, k, v, kc, vc, h, kv, hd)
    assert out.shape == (h * hd,)
    tol_close(out, _hand_attention(q, k, v, kc, vc, h, kv, hd, hd), rtol=1e-5, atol=1e-6)


def test_attention_empty_cache_returns_current_values():
    h, kv, hd = 6, 3, 8
    v = _randn(kv * hd)
    out = ref.attention(_randn(h * hd), _randn(kv * hd), v, np.zeros((0, kv * hd)), np.zeros((0, kv * hd)), h, kv, hd)
    np.testing.assert_array_equal(out.reshape(kv, 2, hd), np.repeat(v.reshape(kv, 1, hd), 2, axis=1))


def test_attention_scale_softcap_and_narrow_values():
    h, kv, hd, vd = 4, 2, 16, 8
    q, k, v = _randn(h * hd, scale=3), _randn(kv * hd, scale=3), _randn(kv * vd)
    kc, vc = _randn(5, kv * hd, scale=3), _randn(5, kv * vd)
    out = ref.attention(q, k, v, kc, vc, h, kv, hd, vd, scale=0.3, softcap=5.0)
    tol_close(out, _hand_attention(q, k, v, kc, vc, h, kv, hd, vd, scale=0.3, cap=5.0), rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# matmul


def test_matmul_q8_0_against_gguf_dequantized():
    w, x = _randn(48, 96, scale=0.2), _randn(96)
    raw = gguf.quants.quantize(w, QT.Q8_0)
    wdeq = gguf.quants.dequantize(raw, QT.Q8_0).astype(np.float64)
    expect = [math.fsum(wdeq[n] * x.astype(np.float64)) for n in range(48)]
    tol_close(ref.matmul_q8_0(x, raw), expect)
    tol_close(ref.matmul(x, quantize_weight(w)), expect)


def test_matmul_dense_k_not_a_multiple_of_32_and_rows():
    w, x = _randn(10, 45), _randn(3, 45)
    out = ref.matmul_dense(x, w)
    assert out.shape == (3, 10)
    tol_close(out, [[math.fsum(w[n].astype(np.float64) * x[r]) for n in range(10)] for r in range(3)])
    w16 = w.astype(np.float16)
    tol_close(ref.matmul_dense(x[0], w16), [math.fsum(w16[n].astype(np.float64) * x[0]) for n in range(10)])


def test_matmul_of_quantized_activation_is_the_int8_gemv():
    w, x = _randn(40, 128, scale=0.1), _randn(128)
    wd = quantize_weight(w)
    qx = quantize_act(x)
    literal = ref.matmul_int8act(qx, wd)
    qs, d = wd.q8_0
    hand = [
        sum(float(d[n, b]) * float(qx.d[b]) * int(np.dot(qs[n, b * 32 : b * 32 + 32].astype(np.int64), qx.q[b * 32 : b * 32 + 32]))
            for b in range(4))
        for n in range(40)
    ]  # fmt: skip
    tol_close(literal, hand)
    tol_close(ref.matmul(qx, wd), hand)  # the executor's re-associated form: the same sum
    tol_close(ref.matmul_int8act(qx, wd.raw), hand)
    # and it differs from the float matmul by the activation's quantization error only
    assert np.abs(ref.matmul(qx, wd) - ref.matmul(x, wd)).max() < 0.05


# ---------------------------------------------------------------------------------------------
# mixture of experts


def _hand_moe(x, router, gate, up, down, top_k):
    xs = x.astype(np.float64)
    logits = [float(np.dot(router[e], xs)) for e in range(router.shape[0])]
    m = max(logits)
    p = [math.exp(v - m) for v in logits]
    p = [v / sum(p) for v in p]
    order = sorted(range(len(p)), key=lambda e: (-p[e], e))[:top_k]
    total = sum(p[e] for e in order)
    y = np.zeros(down.shape[1])
    for e in order:
        g, u = gate[e] @ xs, up[e] @ xs
        y += p[e] / total * (down[e] @ (g / (1 + np.exp(-g)) * u))
    return order, y


def test_moe_against_hand_formula_with_q8_0_weights():
    e, d, ff = 8, 64, 96
    x = _randn(d)
    wds = [quantize_weight(_randn(*s, scale=0.2)) for s in [(e, d), (e, ff, d), (e, ff, d), (e, d, ff)]]
    deq = [wd.f64 for wd in wds]
    order, expect = _hand_moe(x, *deq, top_k=2)
    experts, weights = ref.moe_route(x, wds[0], 2)
    assert experts.tolist() == order
    np.testing.assert_allclose(weights.sum(), 1.0, rtol=1e-6)
    tol_close(ref.moe(x, *wds, top_k=2), expect, rtol=1e-5)


def test_moe_top_k_ties_keep_the_lower_index():
    e, d, ff = 6, 32, 32
    router = _randn(e, d)
    router[1] = router[3] = router[5] = np.abs(router[0]) * 10  # three equal best logits
    x = np.abs(_randn(d)) + 0.1
    experts, weights = ref.moe_route(x, router, 2)
    assert experts.tolist() == [1, 3]
    np.testing.assert_array_equal(weights, [0.5, 0.5])
    experts, _ = ref.moe_route(x, router, 3, renormalize=False)
    assert experts.tolist() == [1, 3, 5]
    gate, up, down = _randn(e, ff, d), _randn(e, ff, d), _randn(e, d, ff)
    _, expect = _hand_moe(x, router, gate, up, down, 2)
    tol_close(ref.moe(x, router, gate, up, down, top_k=2), expect, rtol=1e-5, atol=1e-5)


def test_moe_with_quantized_x_reads_the_int8_sum():
    e, d, ff = 4, 64, 64
    x = _randn(d)
    wds = [quantize_weight(_randn(*s, scale=0.2)) for s in [(e, d), (e, ff, d), (e, ff, d), (e, d, ff)]]
    qx = quantize_act(x)
    xq = qx.values().astype(np.float32)  # d_x * q_x: what the int8 GEMV sums against
    experts, _ = ref.moe_route(qx, wds[0], 2)
    # gate/up through the literal int8 GEMV for the chosen experts
    p = ref.softmax(ref.matmul_int8act(qx, wds[0])).astype(np.float64)
    w = p[experts] / p[experts].sum()
    y = np.zeros(d)
    for ex, we in zip(experts, w):
        g = ref.matmul_int8act(qx, tuple(a[ex] for a in wds[1].q8_0)).astype(np.float64)
        u = ref.matmul_int8act(qx, tuple(a[ex] for a in wds[2].q8_0)).astype(np.float64)
        y += we * (wds[3].f64[ex] @ (g / (1 + np.exp(-g)) * u))
    tol_close(ref.moe(qx, *wds, top_k=2), y, rtol=1e-5, atol=1e-6)
    tol_close(ref.moe(qx, *wds, top_k=2), ref.moe(xq, *wds, top_k=2), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# quantize and view


def test_quantize_and_view():
    x = _randn(2, 64)
    qa = ref.quantize(x, "two_words")
    assert qa.q.shape == (2, 64) and qa.d.shape == (2, 2) and qa.s is not None
    np.testing.assert_array_equal(ref.view(x, (4, 8), offset=70), x.ravel()[70:102].reshape(4, 8))
    with pytest.raises(ValueError, match="overruns"):
        ref.view(x, (64,), offset=65)
