"""Random single-stage functions for tests/passes/test_legal_lowers.py: one stage of each kind the forward
computes (attention, MoE, row norms, rope, matmul, pointwise, transpose), tiny or at the kernels' limits
(`big`: heads up to 16384 values, caches up to 12257 positions, up to 2049 experts, top_k up to 40)."""

import numpy as np


def v(n): return f"tensor<{n}xf32>"

def attention(r, big):
    kv = int(r.choice([1, 2, 3, 4, 8]) if not big else r.choice([1, 2, 8, 16]))
    g = int(r.choice([1, 2, 3, 4]))
    h = kv * g
    hd = int(r.choice([1, 3, 4, 8, 12, 16, 32, 64, 96, 128]) if not big else r.choice([64, 128, 256, 1024, 4096, 8192, 12288, 12256, 16384]))
    l = int(r.choice([1, 2, 3, 5, 9]) if not big else r.choice([1, 2, 100, 4096, 12255, 12256, 12257]))
    c = f"tensor<{l-1}x{kv*hd}xf32>"
    return (f"func.func @f(%q: {v(h*hd)}, %k: {v(kv*hd)}, %v: {v(kv*hd)}, %kc: {c}, %vc: {c}) -> {v(h*hd)} {{\n"
            f"  %a = fwd.attention %q, %k, %v, %kc, %vc h {h} kv {kv} hd {hd} vd {hd} l {l} rows 1 : {v(h*hd)}, {v(kv*hd)}, {v(kv*hd)}, {c}, {c} -> {v(h*hd)}\n"
            f"  func.return %a : {v(h*hd)}\n}}\n")

def moe(r, big):
    e = int(r.choice([1, 2, 3, 4, 8]) if not big else r.choice([32, 33, 34, 40, 64, 2048, 2049]))
    top_k = int(r.integers(1, min(e, 4) + 1)) if not big else int(r.choice([1, 8, 31, 32, 33, min(e, 40)]))
    top_k = min(top_k, e)
    d = int(r.choice([32, 64]))
    ff = int(r.choice([32, 64]))
    W = lambda s: f"!fwd.weights<{s}, q8_0>"
    return (f"func.func @f(%x: {v(d)}) -> {v(d)} {{\n"
            f'  %r = fwd.weight "r" : {W(f"{e}x{d}")}\n'
            f'  %g = fwd.weight "g" : {W(f"{e}x{ff}x{d}")}\n'
            f'  %u = fwd.weight "u" : {W(f"{e}x{ff}x{d}")}\n'
            f'  %d = fwd.weight "d" : {W(f"{e}x{d}x{ff}")}\n'
            f"  %y = fwd.moe %x, %r, %g, %u, %d n_expert {e} top_k {top_k} renormalize act swiglu scoring softmax : {v(d)}, {W(f'{e}x{d}')}, {W(f'{e}x{ff}x{d}')}, {W(f'{e}x{ff}x{d}')}, {W(f'{e}x{d}x{ff}')} -> {v(d)}\n"
            f"  func.return %y : {v(d)}\n}}\n")

def rownorm(r, big):
    kind = str(r.choice(["rms_norm", "layer_norm", "softmax"]))
    rows = int(r.choice([1, 2, 3]))
    n = int(r.choice([1, 3, 8, 32, 33, 100]) if not big else r.choice([1024, 4096, 12288, 65536, 262144]))
    t = f"tensor<{rows}x{n}xf32>" if rows > 1 else v(n)
    w = r.uniform() < 0.5 and kind != "softmax"
    args = f"%x: {t}" + (f", %w: {v(n)}" if w else "")
    wtxt = f" weight(%w : {v(n)})" if w else ""
    return (f"func.func @f({args}) -> {t} {{\n"
            f"  %y = fwd.{kind} %x{wtxt} eps 1.0e-05 : {t} -> {t}\n"
            f"  func.return %y : {t}\n}}\n")

def rope(r, big):
    half = int(r.choice([1, 2, 4, 8, 16, 64]))
    hd = 2 * half
    heads = int(r.choice([1, 2, 3, 9]) if not big else r.choice([32, 128, 1024]))
    n = hd * heads
    return (f"func.func @f(%x: {v(n)}, %a: tensor<2x{half}xf32>) -> {v(n)} {{\n"
            f"  %y = fwd.rope %x, %a hd {hd} half {half} rows 1 : {v(n)}, tensor<2x{half}xf32> -> {v(n)}\n"
            f"  func.return %y : {v(n)}\n}}\n")

def matmul(r, big):
    k = int(r.choice([32, 40, 64, 96]) if not big else r.choice([4096, 8192, 16384]))
    n = int(r.choice([1, 3, 32, 64]) if not big else r.choice([4096, 151936]))
    ty = str(r.choice(["q8_0", "f32", "f16", "q4_0", "q4_1", "q5_0", "q5_1"]))
    W = f"!fwd.weights<{n}x{k}, {ty}>"
    return (f"func.func @f(%x: {v(k)}) -> {v(n)} {{\n"
            f'  %w = fwd.weight "w" : {W}\n'
            f"  %y = fwd.matmul %x, %w : {v(k)}, {W} -> {v(n)}\n"
            f"  func.return %y : {v(n)}\n}}\n")

def pointwise(r, big):
    n = int(r.choice([1, 3, 32, 1000]) if not big else r.choice([1 << 20, 1 << 24]))
    kind = str(r.choice(["silu", "add", "mul", "max"]))
    if kind == "silu":
        body = f"  %y = fwd.silu %a : {v(n)} -> {v(n)}\n"
    else:
        body = f"  %y = fwd.elementwise {kind} %a, %b : {v(n)}, {v(n)} -> {v(n)}\n"
    return f"func.func @f(%a: {v(n)}, %b: {v(n)}) -> {v(n)} {{\n{body}  func.return %y : {v(n)}\n}}\n"

def transpose(r, big):
    a, b = int(r.choice([1, 3, 32])), int(r.choice([1, 5, 64]))
    return (f"func.func @f(%x: tensor<{a}x{b}xf32>) -> tensor<{b}x{a}xf32> {{\n"
            f"  %y = fwd.transpose %x : tensor<{a}x{b}xf32> -> tensor<{b}x{a}xf32>\n"
            f"  func.return %y : tensor<{b}x{a}xf32>\n}}\n")

KINDS = {"attention": attention, "moe": moe, "rownorm": rownorm, "rope": rope, "matmul": matmul, "pointwise": pointwise, "transpose": transpose}

def draw(seed):
    r = np.random.default_rng(seed)
    kind = str(r.choice(sorted(KINDS)))
    big = bool(r.uniform() < 0.5)
    return kind, big, KINDS[kind](r, big)
