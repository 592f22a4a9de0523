"""The forward's hard limits, each written once (the ground floor: imported by the shim, the front end,
codegen and the tools alike).

The weight types the GEMVs read are `ggml_blocks.GEMV_TYPES` (F32, F16, BF16, Q8_0 and GGUF's block
types); the numerics spellings are `classes.NUMERICS`.
"""

STATIC_SHARED_BYTES = 48 * 1024
"""The static shared memory one kernel block may declare: the 48 KiB every CUDA architecture grants
without an opt-in. The attention keeps its score row there (the seed's `sc[L]`)."""

REDUCTION_ROW_FLOATS = 32
"""The reduction row (one float per warp) the attention keeps beside its scores."""

MAX_CONTEXT = (STATIC_SHARED_BYTES - 4 * REDUCTION_ROW_FLOATS) // 4
"""The largest context `l` whose score row (one float per position) and reduction row fit in
`STATIC_SHARED_BYTES`: 12256 (the seed's K18 refuses a longer one)."""

DEFAULT_CONTEXT = 4096
"""The context capacity an import gives a model unless told (or the model's own, when shorter)."""


# ---------------------------------------------------------------------------------------------
# the attention kernel's launch shape (codegen/attention.py builds it; legality's B08 asks whether it
# fits): written here once, so the two never disagree


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def layout(hd: int) -> tuple[int, int, int]:
    """(W, S, C) for heads of `hd`: elements per load (4: a 16-byte vector, or 1 when `hd % 4`),
    lanes per position, loads per lane per row."""
    w = 4 if hd % 4 == 0 else 1
    nv = hd // w
    s = min(32, _pow2_at_least(nv))
    return w, s, -(-nv // s)


def default_block(hd: int, l: int) -> int:  # noqa: E741
    """Threads per block: 128 (4 warps; a head's rows are split over blocks, `default_splits`), fewer
    when the split rows of a short cache would leave warps idle, within the shared-memory bound."""
    _, s, _ = layout(hd)
    b = 128
    while b > 32 and (b // 32) * (32 // s) > max(1, l):
        b //= 2
    while b > 32 and 4 * max(l, (b // 32) * hd) + 128 > STATIC_SHARED_BYTES:
        b //= 2
    return b


SPLIT_ROWS = 60
"""Cache rows a split of the attention aims at over a full cache (`default_splits`): at half a cache
(the bench's fill 512 of 1024) a split of ~30 rows is two load steps of the default block
(`bench/attention.py`, H200: Llama-3-8B's heads 13.2 us at 9 splits, 9.3 at 17, 17.1 at 33; SmolLM2's
6.5 at 30, 6.3 at 15, 10.2 at 59: past one wave of blocks, more splits cost more than they save)."""

MAX_SPLITS = 17
"""The most splits `default_splits` gives a head: Llama-3-8B's quantizing attention (int8-act) took
9.8 us at 17 splits and 14.8 at 18 (its stored form 9.4 at 18), 19.7 at 24 (`bench/attention.py
--quant`, H200); fewer than the combine holds in registers (`Tuning.combine_registers`)."""


def default_splits(h: int, hd: int, l: int, block: int) -> int:  # noqa: E741
    """Blocks per head (flash-decoding splits): one per `SPLIT_ROWS` rows of the cache, at most
    `MAX_SPLITS`, and no more than a split of one position per lane segment of the block's warps needs.
    `h` is not used: the heads multiply the blocks, and the measured best rows a split did not move
    with them (9 and 32 heads)."""
    _, s, _ = layout(hd)
    per_pass = (block // 32) * (32 // s)
    return max(1, min(-(-l // per_pass), -(-(l - 1) // SPLIT_ROWS), MAX_SPLITS))


def default_unroll(hd: int) -> int:
    """Positions per lane per step of the attention: four 16-byte loads in flight per thread (a split
    holds tens to a few hundred rows), fewer for wide heads."""
    _, _, c = layout(hd)
    return max(1, 4 // c)


def split_rows(c: int, splits: int, block: int, hd: int, unroll: int = 1) -> int:
    """Rows per split for `c` cache rows (c + 1 positions with the current one): the positions over
    `splits`, rounded up to a whole step of the block (`unroll` passes of its lane segments; one pass
    for a single split). The kernel computes the same.

    Whole steps: a split's time is its steps (one memory round trip each), so rows rounded up to a
    step cost no step and leave fewer splits active — fewer blocks to combine, and Llama-3-8B's 32
    heads (17 splits: 544 blocks, 1.03 waves of 4 an SM) in one wave at most fills where the last
    split's blocks had run as a second wave (at a capacity of 1024 rows, 384 of the 480 fills that kept
    17 splits active). Measured on the H200 (2026-12-01, `bench/attention.py --quant`, one call against
    the same session's earlier one, us stored / quantizing): Llama-3-8B at fill 1000 15.15 / 14.88 ->
    10.44 / 10.53 (64 rows in 16 active splits where 60 rows took 17); at fill 512 (32 rows: whole
    steps already) 8.91 / 9.40 -> 8.85 / 9.39; SmolLM2 6.85 / 7.28 -> 6.75 / 7.26 and 5.49 / 5.93 ->
    5.59 / 6.01."""
    _, s, _ = layout(hd)
    per_pass = (block // 32) * (32 // s)
    step = per_pass * unroll if splits > 1 else per_pass
    per_split = -(-(c + 1) // splits)
    return step * -(-per_split // step)


def attention_shared_floats(hd: int, l: int, block: int, splits: int, unroll: int = 1) -> int:  # noqa: E741
    """The floats of the attention's static score array: the widest split's rows, each warp's partial
    row of the head (`warps * hd`), or two per split (the combine's maxima and sums), whichever is most."""
    return max(split_rows(l - 1, splits, block, hd, unroll), (block // 32) * hd, 2 * splits)


def attention_limit(h: int, kv: int, hd: int, l: int) -> str | None:  # noqa: E741
    """Why the attention kernel (at its default launch) cannot hold `h` heads of `hd` over `l`
    positions, or None. The seed's checks come first (K17: heads grouping; K18: `l`'s score row)."""
    if min(h, hd) <= 0:
        return f"{h} query heads of {hd} values"
    block = default_block(hd, l)
    floats = attention_shared_floats(hd, l, block, default_splits(h, hd, l, block), default_unroll(hd))
    if 4 * floats + 4 * REDUCTION_ROW_FLOATS > STATIC_SHARED_BYTES:
        return f"{floats} floats"
    return None


MOE_MAX_TOP_K = 32
"""The experts the MoE router keeps at most: one warp ranks them, each lane holding one kept expert."""

MOE_MAX_EXPERTS = 64 * 32
"""The experts the MoE router ranks at most: each lane marks the candidates it took in a 64-bit word."""
