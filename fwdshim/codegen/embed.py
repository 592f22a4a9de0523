"""The inputs of a decode step made on the device: the token's embedding row and the position's angles.

`step_inputs(d, vocab, table, positions, n_angles, block=256) -> Kernel`, the first launch of the
device-resident decode loop (`codegen.loop`), inside the captured graph:

params `ids int32 [positions+1]` (the token at each position: the prompt's, written by the host, then
the greedy picks, written by `codegen.argmax`), `pos int32 [1]` (the step's position: the plan's
`%cache_len`), the embedding table — by `table`:

- `q8_0`: `eq int8 [vocab*d]`, `ed float32 [vocab*d/32]` (GGML's Q8_0 blocks, row-major, the f16
  scale of each block as float32): `x_i = d_b * q_i`, one rounded float32 product, the bits of
  `gguf.quants.dequantize` (`weights.WeightData.rows`), so the host's row and the device's agree;
- `f16`: `e float16 [vocab*d]`; `f32`: `e float32 [vocab*d]` (any other type, dequantized on the
  host once) — exact conversions;

then `angle_table float32 [positions*n_angles]` (row `p`: `reference.rope_angles(p, ...)`, computed
on the host once, so the angles are the bits the host loop used), and the outputs `x float32 [d]`,
`angles float32 [n_angles]`. The position is clamped to `0..positions-1` and the token to
`0..vocab-1` (the host checks the ids it writes; the argmax writes ids inside the vocabulary).

Grid `(ceil(d / (4*block)),)`: each thread a few elements of the row (grid-stride); block 0 also
copies the angle row.
"""

from __future__ import annotations

from fwdshim.codegen.kernel import Kernel, Param, build, factory
from fwdshim.codegen.source import check_block
from fwdshim.codegen.tuning import DEFAULT, Tuning

TABLES = ("q8_0", "f16", "f32")


@factory
def step_inputs(d: int, vocab: int, table: str, positions: int, n_angles: int, block: int = 256, *, tuning: Tuning = DEFAULT) -> Kernel:
    """The embedding-gather and angle-row kernel (see the module docstring)."""
    if table not in TABLES:
        raise ValueError(f"an embedding table of {table} (expected one of: {', '.join(TABLES)})")
    if min(d, vocab, positions, n_angles) <= 0 or (table == "q8_0" and d % 32):
        raise ValueError(f"step inputs of rows of {d} over {vocab} tokens, {positions} positions, {n_angles} angles")
    check_block(block)
    grid = max(1, -(-d // (4 * block)))
    params = [
        Param("ids", "int32", positions + 1, "in", "the token at each position"),
        Param("pos", "int32", 1, "in", "the step's position"),
    ]
    if table == "q8_0":
        params += [
            Param("eq", "int8", vocab * d, "in", f"[{vocab}, {d}] Q8_0 quants"),
            Param("ed", "float32", vocab * d // 32, "in", f"[{vocab}, {d // 32}] Q8_0 scales"),
        ]
        value = f"fmul_rn(ed[row * {d // 32} + i // 32], float32(eq[row * {d} + i]))"
    else:
        params.append(Param("e", "float16" if table == "f16" else "float32", vocab * d, "in", f"[{vocab}, {d}]"))
        value = f"float32(e[row * {d} + i])"
    params += [
        Param("angle_table", "float32", positions * n_angles, "in", f"[{positions}, {n_angles}]"),
        Param("x", "float32", d, "out", f"[{d}] the token's embedding row"),
        Param("angles", "float32", n_angles, "out", f"[{n_angles}] the position's angles"),
    ]
    names = ", ".join(p.name for p in params)
    body = f"""\
@cuda.jit(cache=True)
def step_inputs_k({names}):
    tid = $tx
    p = min(max(pos[0], 0), {positions - 1})
    row = min(max(ids[p], 0), {vocab - 1})
    for i in range($bx * {block} + tid, {d}, {grid * block}):
        x[i] = {value}
    if $bx == 0:
        for j in range(tid, {n_angles}, {block}):
            angles[j] = angle_table[p * {n_angles} + j]
"""
    name = f"step_inputs_{table}_{vocab}x{d}_p{positions}a{n_angles}"
    notes = f"embedding row ({table}) of the token at the step's position, and its angles"
    return build(name, body, "step_inputs_k", (grid,), (block,), params, notes, pdl=tuning.pdl)
