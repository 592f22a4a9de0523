"""What holds each value of a decode step: its `%name` (`value_names`), its role (`role_of`) and the
device arrays it is kept in (`type_parts`: `Part(name, dtype, size)`: one unnamed part for a float32
tensor; `qs int8 [N*K]` and `dw float32 [N*K/32]` for a Q8_0 weight; `qs int8` and the file's scales
(`ggml_blocks.part_specs`) for an affine block type; `q int8`, `d float32` (and `s float32` for
`two_words`) for a quantized activation). `plan.py` builds its buffer table from these.
"""

from __future__ import annotations

from xdsl.dialects.builtin import Float16Type, Float32Type, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import BlockArgument, OpResult, SSAValue

from fwdshim.codegen.launch import Part, Unlowerable
from fwdshim.dialects.attributes import QActType, WeightsType, gguf_of
from fwdshim.dialects.fwd import AttentionOp, FusedOp, WeightOp, numel
from fwdshim.ggml_blocks import AFFINE_GGML, GEMV_TYPES, names, part_specs


def value_names(func: FuncOp) -> dict[SSAValue, str]:
    """A unique `%name` for every argument and top-level result of `func` (the IR's name hints;
    `%vN` where there is none, `_N` appended to a repeated one)."""
    names: dict[SSAValue, str] = {}
    taken: set[str] = set()

    def give(v: SSAValue, hint: str | None, fallback: str) -> None:
        base = hint or fallback
        name, i = base, 1
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        names[v] = f"%{name}"

    for j, a in enumerate(func.body.block.args):
        give(a, a.name_hint, f"arg{j}")
    count = 0
    for op in func.body.block.ops:
        for r in op.results:
            give(r, r.name_hint, f"v{count}")
            count += 1
    return names


def top_value(v: SSAValue) -> SSAValue:
    """A value used inside fused regions traced to the function's level (region args -> operands)."""
    while isinstance(v, BlockArgument) and isinstance(v.block.parent_op(), FusedOp):
        v = v.block.parent_op().operands[v.index]  # type: ignore[union-attr]
    return v


def cache_values(func: FuncOp) -> set[SSAValue]:
    """The values the function's attentions read as `k_cache`/`v_cache` (traced to the function's level)."""
    out: set[SSAValue] = set()
    for op in func.walk():
        if isinstance(op, AttentionOp):
            out.update(top_value(v) for v in (op.k_cache, op.v_cache))
    return out


def role_of(v: SSAValue, func: FuncOp, caches: set[SSAValue], returned: set[SSAValue]) -> str:
    """The buffer role of `v` (`plan.ROLES`): input, cache, weight, output or intermediate."""
    if isinstance(v, BlockArgument):
        return "cache" if v in caches else "input"
    if isinstance(v, OpResult) and isinstance(v.op, WeightOp):
        return "weight"
    return "output" if v in returned else "intermediate"


def type_parts(t) -> tuple[str, tuple[int, ...], tuple[Part, ...]]:
    """(dtype text, shape, default parts) of an IR type; Unlowerable for a type no kernel holds."""
    if isinstance(t, WeightsType):
        ggml = t.type.value
        n = numel(t)
        if ggml == "q8_0":
            return "q8_0", t.dims, (Part("qs", "int8", n), Part("dw", "float32", n // 32))
        if t.type in AFFINE_GGML:  # the layout of ggml_blocks.repack: quants and the file's scales
            rows, k = numel(t) // t.dims[-1], t.dims[-1]
            return ggml, t.dims, tuple(Part(*spec) for spec in part_specs(gguf_of(t.type), rows, k))
        dtype = {"f32": "float32", "f16": "float16", "bf16": "uint16"}.get(ggml)
        if dtype is None:
            raise Unlowerable(f"weights of GGML type {ggml} — the kernels read {names(GEMV_TYPES)} rows only")
        return ggml, t.dims, (Part("", dtype, n),)
    if isinstance(t, QActType):
        n = t.size.data
        fmt = t.format.data.value if hasattr(t.format, "data") else str(t.format)
        parts = [Part("q", "int8", n), Part("d", "float32", -(-n // 32))]
        if fmt == "two_words":
            parts.append(Part("s", "float32", -(-n // 32)))
        return f"qact.{fmt}", (n,), tuple(parts)
    if isinstance(t, TensorType):
        if isinstance(t.element_type, Float16Type):
            # only a dense matmul's weights: legality refuses every other non-f32 tensor (B05)
            return "f16", tuple(t.get_shape()), (Part("", "float16", numel(t) or 0),)
        if not isinstance(t.element_type, Float32Type):
            raise Unlowerable(f"a tensor of {t.element_type} — the forward's buffers hold float32")
        return "f32", tuple(t.get_shape()), (Part("", "float32", numel(t) or 0),)
    raise Unlowerable(f"a value of type {t} — no kernel reads or writes it")
