"""GEMVs over the GGUF file's own quantized blocks, dequantized in-kernel: Q4_0, Q4_1, Q5_0, Q5_1,
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (`fwdshim.ggml_blocks.AFFINE`). `y[m, n] = Σ_k W[n, k] x[m, k]`.

The weights are read in the layout of `ggml_blocks.repack` (made once at load time from the file's
blocks; the values are the file's, bit for bit): `qs int8` (nibbles: `K/2` bytes a row, byte `b` of
each 32-value chunk holding values `b` and `b + 16`), `qh int32` (the 5- and 6-bit types' bits 4 and
5: one bit plane per chunk each) and the file's scales
(`ggml_blocks.SCALES`: f16 block or super-block scales, int8 sub-block scales and mins), from which
each chunk forms its sub-blocks' `sc`, `mn` in float32; value = `sc · q + mn` over sub-blocks of `S`
= 16 or 32 values.

- `affine(n, k, m=1, ggml=, act="f32", warps=4)`:
  - `act="f32"` (dequant): params `qs`, the scale parts (`ggml_blocks.part_specs`), `x f32 [M*K]`,
    `y f32 [M*N]`. Per 32-value chunk
    a lane loads its quants (one 16-byte load of nibbles, a word per bit plane), unpacks them to
    exact floats (`s8x4_f32` of the masked nibbles with the planes' bits or-ed in) and the 32 x values, and adds `sc · Σ q x + mn · Σ x` per
    sub-block, in float32.
  - `act="int8"` (int8-act, llama.cpp's MMVQ): params `qs`, the scale parts, `xq int8 [M*K]`, `xd f32
    [M*K/32]` (a quantized activation, one scale per 32 values), `y`. Per chunk the integer sums
    `Σ q q_x` and `Σ q_x` (`dp4a`, exact) of each sub-block, then `sc · d_x · Σ q q_x + mn · d_x ·
    Σ q_x` in float32 (`ggml_blocks.int8_act_dot` is the same sum in float64).

Launch: one warp a row, `warps` warps a block, grid `(ceil(N / warps), M)`; a row's chunks of 32
are dealt to the warp's lanes (K/32 need not be a multiple of 32), the lanes' sums added by the warp
butterfly. K must be a multiple of 32 (the files' blocks are 32 or 256 values).
"""

from __future__ import annotations

import functools

from fwdshim.codegen.gemv_rows import GemvSpec, binary_params, store
from fwdshim.codegen.kernel import Kernel, Param, build
from fwdshim.codegen.source import check_block, indent, ld
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.dialects.attributes import GgmlType, gguf_of
from fwdshim.ggml_blocks import AFFINE_GGML, BLOCK_VALUES, SCALES, part_specs

_MASK = "0x0F0F0F0F"


def _words(planes: int) -> list[str]:
    """The int32 expression of each of the chunk's 8 words of quants (values 4j..4j+3, one a byte):
    the nibbles, then the bit planes' bits shifted to bits 4 and 5."""
    out = [f"(w{j} & {_MASK})" for j in range(4)] + [f"((w{j} >> 4) & {_MASK})" for j in range(4)]
    for p in range(planes):
        out = [f"({w} | (((h{p} >> {j}) & 0x01010101) << {4 + p}))" for j, w in enumerate(out)]
    return out


def _chunk(planes: int, s: int, scales: str, act: str, k: int, nc: int) -> str:
    """The statements adding one 32-value chunk `c` of row `row` to `acc`."""
    lines = ["i = row * %d + c" % nc, "w0, w1, w2, w3 = ld_i32x4(qs, i * 16)"]
    lines += [f"h{p} = qh[i * {planes} + {p}]" for p in range(planes)]
    words = _words(planes)
    lines.extend(scales.splitlines())
    if act == "f32":
        lines.append(f"xo = m * {k} + c * 32")
        for j in range(8):
            vs = ", ".join(f"x{4 * j + i}" for i in range(4))
            lines.append(f"{vs} = " + ld("f32x4", "x", f"xo + {4 * j}"))
        for h in range(2):  # the two halves of 16 values
            for j in range(4 * h, 4 * h + 4):
                lines.append(f"c0, c1, c2, c3 = s8x4_f32({words[j]})")
                terms = " + ".join(f"c{i} * x{4 * j + i}" for i in range(4))
                lines.append(f"p{h} = {terms}" if j % 4 == 0 else f"p{h} += {terms}")
            xs = " + ".join(f"x{i}" for i in range(16 * h, 16 * h + 16))
            lines.append(f"t{h} = {xs}")
        if s == 32:
            lines.append("acc += s0 * (p0 + p1) + m0 * (t0 + t1)")
        else:
            lines.append("acc += s0 * p0 + m0 * t0 + s1 * p1 + m1 * t1")
        return "\n".join(lines)
    lines.append(f"xo = m * {k} + c * 32")
    lines.append("v0, v1, v2, v3 = " + ld("i32x4", "xq", "xo"))
    lines.append("v4, v5, v6, v7 = " + ld("i32x4", "xq", "xo + 16"))
    lines.append(f"xs = xd[m * {nc} + c]")
    for h in range(2):
        js = range(4 * h, 4 * h + 4)
        dot, ones = "int32(0)", "int32(0)"
        for j in reversed(js):
            dot = f"dp4a({words[j]}, v{j}, {dot})"
            ones = f"dp4a(ONES, v{j}, {ones})"
        lines.append(f"i{h} = {dot}")
        lines.append(f"j{h} = {ones}")
    if s == 32:
        lines.append("acc += (s0 * xs) * float32(int32(i0 + i1)) + (m0 * xs) * float32(int32(j0 + j1))")
    else:
        lines.append(
            "acc += (s0 * xs) * float32(i0) + (m0 * xs) * float32(j0)"
            " + (s1 * xs) * float32(i1) + (m1 * xs) * float32(j1)"
        )
    return "\n".join(lines)


@functools.cache
def affine(n: int, k: int, m: int = 1, *, ggml: str, act: str = "f32", warps: int = 4,
           binary: tuple[str, bool] | None = None, tuning: Tuning = DEFAULT) -> Kernel:  # fmt: skip
    """The GEMV over an affine GGML type's repacked blocks (see the module docstring); `binary` an
    elementwise epilogue after its stores (`gemv.gemv_q8`'s)."""
    g = GgmlType(ggml)
    if g not in AFFINE_GGML:
        raise ValueError(f"no affine GEMV reads {ggml} weights (it reads {', '.join(t.value for t in AFFINE_GGML)})")
    if act not in ("f32", "int8"):
        raise ValueError(f"an affine GEMV over `{act}` activations")
    if n <= 0 or k <= 0 or m <= 0:
        raise ValueError(f"a GEMV of {n}x{k} over {m} rows")
    if k % 32:
        raise ValueError(f"{g.value} rows of {k} values are not whole chunks of 32")
    check_block(32 * warps)
    planes, s = AFFINE_GGML[g]
    qt = gguf_of(g)
    if k % BLOCK_VALUES[qt]:
        raise ValueError(f"{g.value} rows of {k} values are not whole blocks of {BLOCK_VALUES[qt]}")
    specs = part_specs(qt, n, k)
    names = ", ".join(name for name, _, _ in specs)
    nc = k // 32
    xs = "x" if act == "f32" else "xq, xd"
    ones = "    ONES = int32(0x01010101)\n" if act == "int8" else ""
    body = f"""\
@cuda.jit(cache=True)
def gemv_k({names}, {xs}, y{", ep_in, ep_out" if binary else ""}):
    lane = $tx % 32
    row = $bx * {warps} + $tx // 32
    m = $by
    if row >= {n}:
        return
{ones}    acc = float32(0.0)
    for c in range(lane, {nc}, 32):
{indent(_chunk(planes, s, SCALES[qt][1], act, k, nc), 2)}
    acc = warp_sum(acc)
    if lane == 0:
{indent(store("y", f"m * {n} + row", "acc", binary), 2)}
"""
    params = [
        Param("qs", "int8", specs[0][2], "in", f"{g.value} quants [{n}, {k}] (their low nibbles)"),
        *(Param(name, dt, size, "in", f"{g.value} {'high bit planes' if name == 'qh' else 'scales'} ({name})")
          for name, dt, size in specs[1:]),
    ]
    if act == "f32":
        params.append(Param("x", "float32", m * k, "in", f"[{m}, {k}]"))
    else:
        params.append(Param("xq", "int8", m * k, "in", f"activation quants [{m}, {k}]"))
        params.append(Param("xd", "float32", m * nc, "in", f"activation scales [{m}, {nc}]"))
    params.append(Param("y", "float32", m * n, "out", f"[{m}, {n}]"))
    grid = (-(-n // warps), m)
    tag = g.value if act == "f32" else f"{g.value}_int8"
    what = "dequantizing in-kernel" if act == "f32" else "int8 activations"
    name, notes = f"gemv_{tag}_{m}x{n}x{k}_w{warps}", f"{g.value.upper()} GEMV {n}x{k} ({what}) over {m} rows"
    if binary:
        params, name, notes = binary_params(params, name, notes, binary)
    return build(name, body, "gemv_k", grid, (32 * warps,), params, notes, pdl=tuning.pdl,
                 spec=GemvSpec(g.value, n, k, m, act, warps=warps, binary=binary))  # fmt: skip
