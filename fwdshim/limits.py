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
