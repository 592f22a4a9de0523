"""Block decoders: what one weight type contributes to the coalesced GEMV (`gemv.gemv_blocks`).

The GEMV family owns the launch: its shape (`gemv_rows.Shape`), the lanes' walk over a row's pieces,
unrolling, the weight loads before a late wait, split-K through shared memory, the row stores and
every epilogue a merged launch gives it. A weight type owns one thing, a `Decoder`: how the quants of
one *piece* (16 bytes of its quants array, one lane's wide load) and their scales are loaded and
dotted with the piece's activations, in float32 (dequant) or in int32 dot products with an int8
activation (int8-act).

- `Q8Decoder(vec)`: Q8_0 in `weights.repack_q8_0`'s layout (`qs int8 [N*K]`, `dw float32 [N*K/32]`);
  a piece is `vec` (4 or 16) quants.
- `DenseDecoder(type)`: F32, F16, BF16 rows as stored (`wv`); a piece is 16 bytes (4 or 8 values).
- `AffineDecoder(type)`: Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K in
  `ggml_blocks.repack`'s layout (`qs` nibbles, `K/2` bytes a row, byte `b` of each 32-value chunk
  holding values `b` and `b + 16`; `qh int32`, a bit plane a word for the 5- and 6-bit types; the
  file's scales, `ggml_blocks.SCALES`); a piece is one 32-value chunk. Each sub-block's `sc`, `mn`
  are gguf's float32 products (`ggml_blocks` module docstring: exact), the chunk's value
  `sc · q + mn`. Under dequant the row adds `sc · Σ q x + mn · Σ x` a sub-block; under int8-act
  `(sc · d_x) · Σ q q_x + (mn · d_x) · Σ q_x` (llama.cpp's MMVQ form, `ggml_blocks.int8_act_dot`).
  `Σ x`, `Σ q_x` do not depend on the row: a piece computes them once for all its rows.

A decoder writes statements over registers the family names: row `r`'s piece `u` of a step holds
`q{r}_{tag}{u}_*` (int32 quant words) and `s{r}_{tag}{u}*` (float32 scales), its activations `x{u}_*`
or `xq{u}_*` and `xs{u}`; `w{r}`, `d{r}` are row `r`'s first quant byte and first block (`row_base`).
A weight load is a statement `names = load` whose names start with `q` (int32) or `s` (float32), so
the family can hoist them before its wait and zero them under a lane condition (`gemv_rows._zeros`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from fwdshim.codegen.kernel import Param
from fwdshim.codegen.source import ld
from fwdshim.dialects.attributes import GgmlType, gguf_of
from fwdshim.ggml_blocks import AFFINE_GGML, BLOCK_VALUES, part_specs

_MASK = "0x0F0F0F0F"
_MASK_HI = "(~0x0F0F0F0F)"  # 0xF0F0F0F0 as an int32
ONES = "int32(0x01010101)"


@dataclass(frozen=True)
class Decoder:
    """A weight type's block decoder (see the module docstring)."""

    weights: str
    """The weight type's name (`GemvSpec.weights`): `q8_0`, `q4_k`, ..."""

    @property
    def values(self) -> int:
        """The values one piece (one lane's 16- or 4-byte load of quants) covers."""
        raise NotImplementedError

    @property
    def block(self) -> int:
        """The values of one of the type's blocks (a row is whole blocks): 32, or a K-quant's 256."""
        return 32

    def arrays(self, n: int, k: int) -> list[tuple[str, str, int]]:
        """(name, dtype, elements) of each weight array of an N x K matrix, in parameter order."""
        raise NotImplementedError

    def params(self, n: int, k: int, suffix: str = "") -> list[Param]:
        """The weight parameters (names with `suffix`: a pair's second matrix's are `qs2`, ...)."""
        raise NotImplementedError

    def row_base(self, r: int, row: str, k: int) -> str:
        """The statements giving row `row`'s (an expression) first quant byte `w{r}` and block `d{r}`."""
        raise NotImplementedError

    def loads(self, r: int, q: str, s: str, c: str, suffix: str = "") -> list[str]:
        """Row `r`'s weight loads of piece `c` (an expression) into quant registers `{q}_*` and scale
        registers `{s}*`, from the arrays named with `suffix`."""
        raise NotImplementedError

    def act_loads(self, u: int, c: str, act: str) -> list[str]:
        """The loads of piece `c`'s activations (`x{u}_*`, or `xq{u}_*` and scale `xs{u}`), and what
        every row's dot shares of them."""
        raise NotImplementedError

    def dot(self, r: int, q: str, s: str, u: int, act: str) -> list[str]:
        """Row `r`'s dot product of its piece (registers `{q}_*`, `{s}*`) with piece `u`'s
        activations, added to `acc{r}`."""
        raise NotImplementedError


@dataclass(frozen=True)
class Q8Decoder(Decoder):
    """Q8_0 (see the module docstring): a piece is `vec` quants, 4 or 16."""

    weights: str = "q8_0"
    vec: int = 16

    @property
    def values(self) -> int:
        return self.vec

    def arrays(self, n, k):
        return [("qs", "int8", n * k), ("dw", "float32", n * (k // 32))]

    def params(self, n, k, suffix=""):
        nb = k // 32
        what = "second Q8_0" if suffix else "Q8_0"
        return [Param(f"qs{suffix}", "int8", n * k, "in", f"{what} quants [{n}, {k}]"),
                Param(f"dw{suffix}", "float32", n * nb, "in", f"{what} scales [{n}, {nb}]")]  # fmt: skip

    def row_base(self, r, row, k):
        return f"w{r} = {row} * {k}\nd{r} = {row} * {k // 32}"

    def loads(self, r, q, s, c, suffix=""):
        shift = 1 if self.vec == 16 else 3  # piece -> its block of 32
        if self.vec == 16:
            quants = f"{q}_0, {q}_1, {q}_2, {q}_3 = ld_i32x4(qs{suffix}, w{r} + {c} * 16)"
        else:
            quants = f"{q}_0 = ld_i32(qs{suffix}, w{r} + {c} * 4)"
        return [quants, f"{s} = dw{suffix}[d{r} + ({c} >> {shift})]"]

    def act_loads(self, u, c, act):
        vec = self.vec
        shift = 1 if vec == 16 else 3
        if act == "f32":
            return [
                f"{', '.join(f'x{u}_{4 * j + i}' for i in range(4))} = " + ld("f32x4", "x", f"xo + {c} * {vec} + {4 * j}")
                for j in range(vec // 4)
            ]
        if vec == 16:
            load = f"xq{u}_0, xq{u}_1, xq{u}_2, xq{u}_3 = " + ld("i32x4", "xq", f"xo + {c} * 16")
        else:
            load = f"xq{u}_0 = " + ld("i32", "xq", f"xo + {c} * 4")
        return [load, f"xs{u} = xd[xdo + ({c} >> {shift})]"]

    def dot(self, r, q, s, u, act):
        words = self.vec // 4
        if act == "int8":
            dot = "int32(0)"
            for j in reversed(range(words)):
                dot = f"dp4a({q}_{j}, xq{u}_{j}, {dot})"
            return [f"acc{r} += ({s} * xs{u}) * float32({dot})"]
        lines = []
        for j in range(words):
            lines.append(f"f0, f1, f2, f3 = s8x4_f32({q}_{j})")
            terms = " + ".join(f"f{i} * x{u}_{4 * j + i}" for i in range(4))
            lines.append(f"p{j % 2} += {terms}" if j >= 2 else f"p{j} = {terms}")
        lines.append(f"acc{r} += {s} * (p0 + p1)" if words > 1 else f"acc{r} += {s} * p0")
        return lines


_SCALES: dict[str, tuple[tuple[tuple[str, int, int, bool], ...], tuple[tuple[tuple[str, ...], tuple], ...]]] = {
    # type: (its scale loads: (array, multiplier, offset, by super-block) of chunk index i, read into
    #        registers a, b, c, ...; each sub-block's (sc: the product of those registers, mn: one
    #        register, `-(x * y)` of two, or sc times a constant))
    "q4_0": ((("d", 1, 0, False),), ((("a",), ("times", -8.0)),)),
    "q5_0": ((("d", 1, 0, False),), ((("a",), ("times", -16.0)),)),
    "q4_1": ((("dm", 2, 0, False), ("dm", 2, 1, False)), ((("a",), ("reg", "b")),)),
    "q4_k": ((("dd", 2, 0, True), ("dd", 2, 1, True), ("sm", 2, 0, False), ("sm", 2, 1, False)),
             ((("a", "c"), ("neg", "b", "d")),)),
    "q6_k": ((("dd", 1, 0, True), ("sc8", 2, 0, False), ("sc8", 2, 1, False)),
             ((("a", "b"), ("times", -32.0)), (("a", "c"), ("times", -32.0)))),
    "q3_k": ((("dd", 1, 0, True), ("sc8", 2, 0, False), ("sc8", 2, 1, False)),
             ((("a", "b"), ("times", -4.0)), (("a", "c"), ("times", -4.0)))),
    "q2_k": ((("dd", 2, 0, True), ("dd", 2, 1, True), ("sm", 4, 0, False), ("sm", 4, 1, False), ("sm", 4, 2, False),
              ("sm", 4, 3, False)),
             ((("a", "c"), ("neg", "b", "d")), (("a", "e"), ("neg", "b", "f")))),
}  # fmt: skip
"""Each affine type's scales (`ggml_blocks.SCALES`' products, written per chunk): Q4_K's super-block
`d`, `dmin` are `dd[2 sb]`, `dd[2 sb + 1]` of super-block `sb = i >> 3` (8 chunks of 32), its
sub-block's 6-bit scale and min `sm[2 i]`, `sm[2 i + 1]`; `sc = d · scale`, `mn = -(dmin · min)`."""
_SCALES["q5_1"] = _SCALES["q4_1"]
_SCALES["q5_k"] = _SCALES["q4_k"]


def _index(i: str, mult: int, off: int, by_super: bool) -> str:
    """`mult * i + off`, `i` the chunk index or (`by_super`) its super-block `i >> 3`."""
    at = f"({i} >> 3)" if by_super else i
    at = at if mult == 1 else f"{mult} * {at}"
    return f"{at}{f' + {off}' if off else ''}"


def _min(mn: tuple, sc: str, reg) -> str:
    """A sub-block's `mn` (`_SCALES`) of its registers `reg(x)` and its scale `sc`."""
    if mn[0] == "times":
        return f"{sc} * float32({mn[1]})"
    if mn[0] == "reg":
        return reg(mn[1])
    return f"-({reg(mn[1])} * {reg(mn[2])})"


_REG = "abcdef"
_WORDS = {("dd", 2): "f16x2_f32", ("dm", 2): "f16x2_f32", ("sm", 4): "s8x4_f32"}
"""Scale arrays read a 4-byte word at a time where a chunk's registers are a whole aligned word of
them: a super-block's f16 `d`, `dmin` (Q4_K, Q5_K, Q2_K) or a block's `d`, `m` (Q4_1, Q5_1), and
Q2_K's four int8 sub-block scales and mins (exact conversions: `f16x2_f32`, `s8x4_f32`)."""


@dataclass(frozen=True)
class AffineDecoder(Decoder):
    """An affine GGML type (see the module docstring): a piece is one chunk of 32 values."""

    @property
    def values(self) -> int:
        return 32

    @property
    def planes(self) -> int:
        return AFFINE_GGML[GgmlType(self.weights)][0]

    @property
    def block(self) -> int:
        return BLOCK_VALUES[gguf_of(GgmlType(self.weights))]

    def arrays(self, n, k):
        return part_specs(gguf_of(GgmlType(self.weights)), n, k)

    def params(self, n, k, suffix=""):
        t = self.weights.upper()
        what = f"second {t}" if suffix else t
        out = []
        for name, dt, size in self.arrays(n, k):
            about = {"qs": f"quants [{n}, {k}] (their low nibbles)", "qh": "high bit planes"}.get(name, f"scales ({name})")
            out.append(Param(name + suffix, dt, size, "in", f"{what} {about}"))
        return out

    def row_base(self, r, row, k):
        return f"w{r} = {row} * {k // 2}\nd{r} = {row} * {k // 32}"

    def loads(self, r, q, s, c, suffix=""):
        i = f"(d{r} + {c})"
        out = [f"{q}_0, {q}_1, {q}_2, {q}_3 = ld_i32x4(qs{suffix}, w{r} + {c} * 16)"]
        out += [f"{q}_h{p} = qh{suffix}[{i} * {self.planes} + {p}]" for p in range(self.planes)]
        specs = list(zip(_REG, _SCALES[self.weights][0]))
        while specs:
            reg, (array, mult, off, by_super) = specs[0]
            word = _WORDS.get((array, mult))
            if word and [x[1] for x in specs[:mult]] == [(array, mult, o, by_super) for o in range(mult)]:
                regs = ", ".join(s + x[0] for x in specs[:mult])  # the whole aligned word: one 4-byte load
                out.append(f"{regs} = {word}(ld_i32({array}{suffix}, {_index(i, mult, 0, by_super)}))")
                specs = specs[mult:]
                continue
            out.append(f"{s}{reg} = float32({array}{suffix}[{_index(i, mult, off, by_super)}])")
            specs = specs[1:]
        return out

    def _words(self, q: str, scaled: bool = False) -> list[str]:
        """The int32 expressions of the chunk's 8 words of quants (values 4j..4j+3, one a byte): the
        nibbles, then the bits above them (`ggml_blocks.pack_planes`) moved to bit 4 (and 5) by one
        shift and one mask-or a word. `scaled` (a type of no planes): the high nibbles left in place,
        each byte 16 q (one mask a word, no shift) for a float32 conversion the dot scales by 1/16."""
        hi = f"({{}} & {_MASK_HI})" if scaled else f"(({{}} >> 4) & {_MASK})"
        out = [f"({q}_{j} & {_MASK})" for j in range(4)] + [hi.format(f"{q}_{j}") for j in range(4)]
        if not self.planes:
            return out
        for j, w in enumerate(out):
            h, by, bits = (f"{q}_h0", 4 - j, "0x10101010") if self.planes == 1 else (f"{q}_h{j // 4}", 4 - 2 * (j % 4), "0x30303030")
            moved = h if by == 0 else f"({h} << {by})" if by > 0 else f"({h} >> {-by})"
            out[j] = f"({w} | ({moved} & {bits}))"
        return out

    def act_loads(self, u, c, act):
        if act == "f32":
            out = [
                f"{', '.join(f'x{u}_{4 * j + i}' for i in range(4))} = " + ld("f32x4", "x", f"xo + {c} * 32 + {4 * j}")
                for j in range(8)
            ]
            out += [f"t{u}_{h} = " + " + ".join(f"x{u}_{i}" for i in range(16 * h, 16 * h + 16)) for h in range(2)]
            return out
        out = [f"xq{u}_0, xq{u}_1, xq{u}_2, xq{u}_3 = " + ld("i32x4", "xq", f"xo + {c} * 32"),
               f"xq{u}_4, xq{u}_5, xq{u}_6, xq{u}_7 = " + ld("i32x4", "xq", f"xo + {c} * 32 + 16"),
               f"xs{u} = xd[xdo + {c}]"]  # fmt: skip
        for h in range(2):
            ones = "int32(0)"
            for j in reversed(range(4 * h, 4 * h + 4)):
                ones = f"dp4a({ONES}, xq{u}_{j}, {ones})"
            out.append(f"t{u}_{h} = {ones}")
        return out

    def dot(self, r, q, s, u, act):
        reg = lambda x: f"{s}{x}"  # noqa: E731
        lines = []
        subs = _SCALES[self.weights][1]
        for b, (sc, mn) in enumerate(subs):
            lines.append(f"sc{b} = {' * '.join(map(reg, sc))}")
            lines.append(f"mn{b} = {_min(mn, f'sc{b}', reg)}")
        scaled = act == "f32" and not self.planes  # the high half's words 16 q (`_words`)
        words = self._words(q, scaled)
        if act == "f32":
            for h in range(2):  # the two halves of 16 values, each one chain of fused multiply-adds
                for j in range(4 * h, 4 * h + 4):
                    lines.append(f"f0, f1, f2, f3 = u8x4_f32({words[j]})")
                    terms = " + ".join(f"f{i} * x{u}_{4 * j + i}" for i in range(4))
                    lines.append(f"p{h} = {terms}" if j % 4 == 0 else f"p{h} = p{h} + {terms}")
            p1 = "p1 * float32(0.0625)" if scaled else "p1"  # exact: a power of two
            if len(subs) == 1:
                lines.append(f"acc{r} += sc0 * (p0 + {p1}) + mn0 * (t{u}_0 + t{u}_1)")
            else:
                lines.append(f"acc{r} += sc0 * p0 + mn0 * t{u}_0 + sc1 * ({p1}) + mn1 * t{u}_1")
            return lines
        for h in range(2):
            dot = "int32(0)"
            for j in reversed(range(4 * h, 4 * h + 4)):
                dot = f"dp4a({words[j]}, xq{u}_{j}, {dot})"
            lines.append(f"i{h} = {dot}")
        if len(subs) == 1:
            lines.append(f"acc{r} += (sc0 * xs{u}) * float32(int32(i0 + i1)) + (mn0 * xs{u}) * float32(int32(t{u}_0 + t{u}_1))")
        else:
            lines.append(f"acc{r} += (sc0 * xs{u}) * float32(i0) + (mn0 * xs{u}) * float32(t{u}_0)"
                         f" + (sc1 * xs{u}) * float32(i1) + (mn1 * xs{u}) * float32(t{u}_1)")  # fmt: skip
        return lines


_DENSE = {"f32": ("float32", 4), "f16": ("float16", 8), "bf16": ("uint16", 8)}
"""A dense type's stored dtype (bfloat16 as its 16 bits) and values a 16-byte piece."""


@dataclass(frozen=True)
class DenseDecoder(Decoder):
    """F32, F16 or BF16 rows (`wv`, the values as the file stores them, bfloat16 as `uint16` bits):
    a piece is 16 bytes, 4 or 8 values, converted exactly to float32 (`f16x2_f32`, `bf16x2_f32`) and
    added to the row's sum one product at a time in the piece's order (dequant only: no int8 dot)."""

    @property
    def values(self) -> int:
        return _DENSE[self.weights][1]

    @property
    def block(self) -> int:
        return 32  # the family's rows are whole blocks of 32 (16-byte aligned rows of every type)

    def arrays(self, n, k):
        return [("wv", _DENSE[self.weights][0], n * k)]

    def params(self, n, k, suffix=""):
        what = f"second {self.weights.upper()}" if suffix else self.weights.upper()
        return [Param(f"wv{suffix}", _DENSE[self.weights][0], n * k, "in", f"{what} weights [{n}, {k}]")]

    def row_base(self, r, row, k):
        return f"w{r} = {row} * {k}"

    def loads(self, r, q, s, c, suffix=""):
        if self.weights == "f32":
            return [f"{s}_0, {s}_1, {s}_2, {s}_3 = ld_f32x4(wv{suffix}, w{r} + {c} * 4)"]
        return [f"{q}_0, {q}_1, {q}_2, {q}_3 = ld_i32x4(wv{suffix}, w{r} + {c} * 8)"]

    def act_loads(self, u, c, act):
        if act != "f32":
            raise ValueError(f"{self.weights.upper()} rows read float32 activations only")
        v = self.values
        return [
            f"{', '.join(f'x{u}_{4 * j + i}' for i in range(4))} = " + ld("f32x4", "x", f"xo + {c} * {v} + {4 * j}")
            for j in range(v // 4)
        ]

    def dot(self, r, q, s, u, act):
        if self.weights == "f32":
            return [f"acc{r} = acc{r} + " + " + ".join(f"{s}_{i} * x{u}_{i}" for i in range(4))]
        pair = "f16x2_f32" if self.weights == "f16" else "bf16x2_f32"
        lines = [f"f{2 * j}, f{2 * j + 1} = {pair}({q}_{j})" for j in range(4)]
        return lines + [f"acc{r} = acc{r} + " + " + ".join(f"f{i} * x{u}_{i}" for i in range(8))]


BLOCK_TYPES = ("q8_0", *sorted(t.value for t in AFFINE_GGML))
"""The block-quantized weight types the coalesced GEMV reads (`decoder`)."""
DENSE_TYPES = tuple(_DENSE)
"""The dense weight types it reads too (`DenseDecoder`: F32, F16, BF16 rows of whole blocks of 32)."""


@functools.cache
def decoder(weights: str, vec: int = 16) -> Decoder:
    """The decoder of weight type `weights` (`BLOCK_TYPES`, `DENSE_TYPES`) for pieces of `vec` bytes
    (Q8_0: 4 or 16; the others: 16). ValueError for another type or piece."""
    if weights == "q8_0":
        if vec not in (4, 16):
            raise ValueError(f"{vec}-byte pieces of Q8_0 quants (4 or 16)")
        return Q8Decoder(vec=vec)
    if weights in _DENSE:
        if vec != 16:
            raise ValueError(f"{vec}-byte pieces of {weights.upper()} values (16)")
        return DenseDecoder(weights)
    if weights not in BLOCK_TYPES:
        raise ValueError(f"no block decoder reads {weights} weights (it reads {', '.join(BLOCK_TYPES + DENSE_TYPES)})")
    if vec != 16:
        raise ValueError(f"{vec}-byte pieces of {weights.upper()} quants (16: a chunk of 32 values)")
    return AffineDecoder(weights)
