"""GPU primitives of the generated kernels that Numba does not spell: wide loads, byte unpacking, dp4a.

Each is a Numba `intrinsic` emitting a few PTX instructions through inline assembly; the simulator
equivalents with the same names and results are in `fwdshim.codegen.simulator`.

- `ld_i32x4(a, i) -> (int32, int32, int32, int32)`: 16 bytes of the 1-D array `a` starting at
  element `i` (`ld.global.nc.v4.b32`), as four little-endian int32 words. The address must be 16-byte
  aligned: `i * a.itemsize % 16 == 0` on a 16-byte aligned allocation. Read-only data only.
- `ld_f32x4(a, i) -> (float32 x 4)`: the same for a float32 array.
- `ld_i32(a, i) -> int32`: 4 bytes of the 1-D array `a` starting at element `i` (`ld.global.nc.b32`,
  4-byte aligned), as one little-endian int32 word (four int8 quants).
  The loads are `asm sideeffect`: LLVM must not hoist a load above the `if` that keeps its index in
  bounds (as plain inline asm, it did: the coalesced GEMV read past its activation on the H200).
- `lda_i32x4`, `lda_f32x4`, `lda_i32`: the same loads through a generic address (`ld.v4.b32`, ...):
  any state space, so a `cuda.shared.array` (16-byte aligned for the wide ones) or data written earlier
  in the same kernel (the merged launches' prologues, `codegen.merge`).
- `atomic_add_acq_rel(a, i, v) -> int32`: `a[i] += v` on an int32 array, returning the old value, as
  one atomic with acquire-release semantics at GPU scope (`atom.acq_rel.gpu.global.add.s32`): the
  writes ordered before it (a block's, by the barrier before thread 0's call) are visible to whoever
  acquires its result, and the caller sees the writes released before the values it counts — a
  block's "count myself done; am I last?" in one L2 round trip, without `membar.gl` (`fence.sc.gpu`)
  in every thread before a relaxed `atomic.add` and again after it.
- `prefetch_l2(a, i, nbytes)`: asks the copy engine to bring `nbytes` of the 1-D array `a` from
  element `i` into L2 (`cp.async.bulk.prefetch.L2.global`, sm_90; a hint: nothing waits for it). The
  address must be 16-byte aligned and `nbytes` a multiple of 16.
- `cp_async16(dst, di, src, si)`, `cp_async4(...)`: an asynchronous copy of 16 (4) bytes from
  element `si` of global array `src` to element `di` of a `cuda.shared.array` `dst`
  (`cp.async.cg` / `.ca`, sm_80+; both addresses aligned to the size); `cp_async_commit()` closes the
  thread's group of copies issued since the last one, `cp_async_wait(n)` (`n` a constant) waits until
  at most `n` of the thread's groups are in flight: the thread then reads its own copies.
- `pdl_wait()`, `pdl_launch()`: programmatic dependent launch (`griddepcontrol.wait` /
  `.launch_dependents`, sm_90): wait for the launches before this one on the stream to finish and
  their writes to be visible; let the launch after this one be scheduled. Without a launch that asks
  for it (`Tuning.pdl`) both do nothing.
- `globaltimer() -> uint64`, `clock64() -> uint64`: the GPU's global nanosecond timer (one clock for
  every SM; it advances in steps of tens of ns on the H200) and the SM's cycle counter
  (`%globaltimer`, `%clock64`), read in program order (`asm sideeffect` with a memory clobber): the
  stamps of a kernel's stages (`bench/stages.py`); no generated kernel of the plan reads them.
- `s8x4_f32(w) -> (float32 x 4)`: the four signed bytes of an int32 word (low byte first) as exact
  float32 values, without an integer-to-float conversion unit: each byte `b` is biased to `b ^ 0x80`,
  placed under the exponent of 2^23 by one `prmt` and the bias subtracted (`sub.f32`, exact).
- `u8x4_f32(w) -> (float32 x 4)`: the four unsigned bytes of an int32 word (low byte first) as exact
  float32 values: `s8x4_f32` without the bias (one `prmt` and one `sub.f32` a byte): the block types'
  unpacked quants, 0..63.
- `dp4a(a, b, c) -> int32`: `c + Σ_j a_j b_j` over the four signed bytes of `a` and `b`
  (`dp4a.s32.s32`), with int32 wrap-around (never reached for int8 blocks of 32).
- `f16x2_f32(w)`, `bf16x2_f32(w) -> (float32, float32)`: the two halves of an int32 word (low first)
  as float32, reading IEEE half (`cvt.f32.f16`) or bfloat16 (the bits shifted under a float32).
- `bf16_f32(u) -> float32`: one bfloat16 given as its 16 bits (a uint16 element) as float32.
"""

from __future__ import annotations

from llvmlite import ir
from numba.cuda import cgutils, types
from numba.cuda.extending import intrinsic
from numba.cuda.typing import signature

_I32 = ir.IntType(32)
_F32 = ir.FloatType()


def _pointer(context, builder, aryty, ary, index, elem: ir.Type):
    """The address of `ary[index]` cast to a pointer to `elem` (global address space, generic ptr)."""
    arr = context.make_array(aryty)(context, builder, ary)
    ptr = cgutils.get_item_pointer(context, builder, aryty, arr, [index])
    return builder.bitcast(ptr, elem.as_pointer())


def _tuple(context, builder, rtype, values):
    return context.make_tuple(builder, rtype, values)


def _ld_v4(kind: str, elem_type, llvm_elem: ir.Type, reg: str, name: str, space: str = "global.nc."):
    def typer(typingctx, a, i):
        if not isinstance(a, types.Array) or a.ndim != 1 or not isinstance(i, types.Integer):
            return None
        rtype = types.UniTuple(elem_type, 4)

        def codegen(context, builder, sig, args):
            ptr = _pointer(context, builder, sig.args[0], args[0], args[1], llvm_elem)
            out = ir.LiteralStructType([llvm_elem] * 4)
            asm = ir.InlineAsm(
                ir.FunctionType(out, [llvm_elem.as_pointer()]),
                f"ld.{space}v4.{kind} {{$0, $1, $2, $3}}, [$4];",
                f"={reg},={reg},={reg},={reg},l",
                side_effect=True,  # a load: never speculated past the guard that keeps it in bounds
            )
            res = builder.call(asm, [ptr])
            return _tuple(context, builder, rtype, [builder.extract_value(res, j) for j in range(4)])

        return signature(rtype, a, i), codegen

    typer.__name__ = name
    return typer


ld_i32x4 = intrinsic(_ld_v4("b32", types.int32, _I32, "r", "ld_i32x4"))
ld_f32x4 = intrinsic(_ld_v4("f32", types.float32, _F32, "f", "ld_f32x4"))
lda_i32x4 = intrinsic(_ld_v4("b32", types.int32, _I32, "r", "lda_i32x4", space=""))
lda_f32x4 = intrinsic(_ld_v4("f32", types.float32, _F32, "f", "lda_f32x4", space=""))


def _ld_word(name: str, space: str = "global.nc."):
    def typer(typingctx, a, i):
        if not isinstance(a, types.Array) or a.ndim != 1 or not isinstance(i, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ptr = _pointer(context, builder, sig.args[0], args[0], args[1], _I32)
            asm = ir.InlineAsm(ir.FunctionType(_I32, [_I32.as_pointer()]), f"ld.{space}b32 $0, [$1];", "=r,l", side_effect=True)
            return builder.call(asm, [ptr])

        return signature(types.int32, a, i), codegen

    typer.__name__ = name
    return typer


ld_i32 = intrinsic(_ld_word("ld_i32"))
lda_i32 = intrinsic(_ld_word("lda_i32", space=""))


@intrinsic
def atomic_add_acq_rel(typingctx, a, i, v):
    if not (isinstance(a, types.Array) and a.ndim == 1 and a.dtype == types.int32) or not all(isinstance(t, types.Integer) for t in (i, v)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _pointer(context, builder, sig.args[0], args[0], args[1], _I32)
        val = context.cast(builder, args[2], sig.args[2], types.int32)
        asm = ir.InlineAsm(ir.FunctionType(_I32, [_I32.as_pointer(), _I32]), "atom.acq_rel.gpu.global.add.s32 $0, [$1], $2;",
                           "=r,l,r,~{memory}", side_effect=True)  # fmt: skip
        return builder.call(asm, [ptr, val])

    return signature(types.int32, a, i, v), codegen


@intrinsic
def prefetch_l2(typingctx, a, i, nbytes):
    if not isinstance(a, types.Array) or a.ndim != 1 or not all(isinstance(t, types.Integer) for t in (i, nbytes)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _pointer(context, builder, sig.args[0], args[0], args[1], ir.IntType(8))
        size = context.cast(builder, args[2], sig.args[2], types.uint32)
        asm = ir.InlineAsm(
            ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), _I32]),
            "cp.async.bulk.prefetch.L2.global [$0], $1;",
            "l,r",
            side_effect=True,
        )
        builder.call(asm, [ptr, size])
        return context.get_dummy_value()

    return signature(types.none, a, i, nbytes), codegen


def _shared_addr(builder, ptr):
    """The 32-bit shared-space address of a generic pointer into a `cuda.shared.array`."""
    i8 = ir.IntType(8)
    sp = builder.addrspacecast(builder.bitcast(ptr, i8.as_pointer()), ir.PointerType(i8, 3))
    return builder.ptrtoint(sp, _I32)


def _cp_async(size: int, name: str):
    cache = "cg" if size == 16 else "ca"  # .cg (L2 only) takes 16-byte copies alone

    def typer(typingctx, dst, di, src, si):
        arrays = (dst, src)
        if not all(isinstance(a, types.Array) and a.ndim == 1 for a in arrays):
            return None
        if not all(isinstance(t, types.Integer) for t in (di, si)):
            return None

        def codegen(context, builder, sig, args):
            d = _shared_addr(builder, _pointer(context, builder, sig.args[0], args[0], args[1], ir.IntType(8)))
            g = _pointer(context, builder, sig.args[2], args[2], args[3], ir.IntType(8))
            g = builder.addrspacecast(g, ir.PointerType(ir.IntType(8), 1))
            asm = ir.InlineAsm(
                ir.FunctionType(ir.VoidType(), [_I32, g.type]),
                f"cp.async.{cache}.shared.global [$0], [$1], {size};",
                "r,l",
                side_effect=True,
            )
            builder.call(asm, [d, g])
            return context.get_dummy_value()

        return signature(types.none, dst, di, src, si), codegen

    typer.__name__ = name
    return typer


cp_async16 = intrinsic(_cp_async(16, "cp_async16"))
cp_async4 = intrinsic(_cp_async(4, "cp_async4"))


@intrinsic
def cp_async_commit(typingctx):
    def codegen(context, builder, sig, args):
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "cp.async.commit_group;", "", side_effect=True)
        builder.call(asm, [])
        return context.get_dummy_value()

    return signature(types.none), codegen


@intrinsic
def cp_async_wait(typingctx, n):
    if not isinstance(n, types.IntegerLiteral):
        return None
    pending = int(n.literal_value)

    def codegen(context, builder, sig, args):
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), f"cp.async.wait_group {pending};", "", side_effect=True)
        builder.call(asm, [])
        return context.get_dummy_value()

    return signature(types.none, n), codegen


def _pdl(ptx: str, name: str):
    def typer(typingctx):
        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), ptx, "~{memory}", side_effect=True)
            builder.call(asm, [])
            return context.get_dummy_value()

        return signature(types.none), codegen

    typer.__name__ = name
    return typer


pdl_wait = intrinsic(_pdl("griddepcontrol.wait;", "pdl_wait"))
pdl_launch = intrinsic(_pdl("griddepcontrol.launch_dependents;", "pdl_launch"))


def _timer(register: str, name: str):
    def typer(typingctx):
        def codegen(context, builder, sig, args):
            i64 = ir.IntType(64)
            asm = ir.InlineAsm(ir.FunctionType(i64, []), f"mov.u64 $0, {register};", "=l,~{{memory}}", side_effect=True)
            return builder.call(asm, [])

        return signature(types.uint64), codegen

    typer.__name__ = name
    return typer


globaltimer = intrinsic(_timer("%globaltimer", "globaltimer"))
clock64 = intrinsic(_timer("%clock64", "clock64"))


_S8X4 = """{
 .reg .b32 t, u0, u1, u2, u3;
 xor.b32 t, $4, 0x80808080;
 prmt.b32 u0, t, 0x4B000000, 0x7440;
 prmt.b32 u1, t, 0x4B000000, 0x7441;
 prmt.b32 u2, t, 0x4B000000, 0x7442;
 prmt.b32 u3, t, 0x4B000000, 0x7443;
 sub.f32 $0, u0, 0f4B000080;
 sub.f32 $1, u1, 0f4B000080;
 sub.f32 $2, u2, 0f4B000080;
 sub.f32 $3, u3, 0f4B000080;
}"""


_U8X4 = """{
 .reg .b32 u0, u1, u2, u3;
 prmt.b32 u0, $4, 0x4B000000, 0x7440;
 prmt.b32 u1, $4, 0x4B000000, 0x7441;
 prmt.b32 u2, $4, 0x4B000000, 0x7442;
 prmt.b32 u3, $4, 0x4B000000, 0x7443;
 sub.f32 $0, u0, 0f4B000000;
 sub.f32 $1, u1, 0f4B000000;
 sub.f32 $2, u2, 0f4B000000;
 sub.f32 $3, u3, 0f4B000000;
}"""


def _word_f32(template: str, name: str, count: int):
    """The typer of an intrinsic giving an int32 word as `count` float32 values by `template` (inline
    PTX: outputs `$0..`, the word `$count`)."""

    def typer(typingctx, w):
        if not isinstance(w, types.Integer):
            return None
        rtype = types.UniTuple(types.float32, count)

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], sig.args[0], types.int32)
            out = ir.LiteralStructType([_F32] * count)
            asm = ir.InlineAsm(ir.FunctionType(out, [_I32]), template, ",".join(["=f"] * count + ["r"]))
            res = builder.call(asm, [v])
            return _tuple(context, builder, rtype, [builder.extract_value(res, j) for j in range(count)])

        return signature(rtype, w), codegen

    typer.__name__ = name
    return typer


s8x4_f32 = intrinsic(_word_f32(_S8X4, "s8x4_f32", 4))
u8x4_f32 = intrinsic(_word_f32(_U8X4, "u8x4_f32", 4))


@intrinsic
def dp4a(typingctx, a, b, c):
    if not all(isinstance(t, types.Integer) for t in (a, b, c)):
        return None

    def codegen(context, builder, sig, args):
        vals = [context.cast(builder, v, t, types.int32) for v, t in zip(args, sig.args)]
        asm = ir.InlineAsm(ir.FunctionType(_I32, [_I32] * 3), "dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r")
        return builder.call(asm, vals)

    return signature(types.int32, a, b, c), codegen


_F16X2 = """{
 .reg .b16 lo, hi;
 mov.b32 {lo, hi}, $2;
 cvt.f32.f16 $0, lo;
 cvt.f32.f16 $1, hi;
}"""

_BF16X2 = """{
 shl.b32 $0, $2, 16;
 and.b32 $1, $2, 0xFFFF0000;
}"""


f16x2_f32 = intrinsic(_word_f32(_F16X2, "f16x2_f32", 2))
bf16x2_f32 = intrinsic(_word_f32(_BF16X2, "bf16x2_f32", 2))


@intrinsic
def bf16_f32(typingctx, u):
    if not isinstance(u, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.uint32)
        asm = ir.InlineAsm(ir.FunctionType(_F32, [_I32]), "shl.b32 $0, $1, 16;", "=f,r")
        return builder.call(asm, [v])

    return signature(types.float32, u), codegen
