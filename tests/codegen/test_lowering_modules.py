"""Small decode-step modules for the lowering and runtime tests, and the helpers that build them.

`llama_src(...)`: one Llama-style decode layer (the shape of `examples/llama_layer.mlir`) at any size;
`llama_weights(rng, ...)`: random weights for it (norm weights f32, projections Q8_0 by gguf's own
quantizer); `parse(src)`, `pipeline(module, numerics)` (`forward-shim`), `legalize_only(module,
numerics)` (no fusion: the unfused stages of the same IR).
"""

from __future__ import annotations

from support.llama_ir import (
    TINY,
    TINY_MOE,
    llama_src,
    parse,
    pipeline,
)


def test_tiny_llama_parses_and_fuses():
    m = pipeline(parse(llama_src(**TINY)), "int8-act")
    fused = [op.class_.data for op in m.walk() if op.name == "fwd.fused" and op.parent_op().name == "func.func"]
    assert fused == ["norm_quant", "attn_output_quant", "add_norm_quant", "elementwise_chains"]


def test_tiny_mixtral_parses_and_fuses():
    m = pipeline(parse(llama_src(**TINY_MOE)), "int8-act")
    ops = [op.name for op in m.walk() if op.parent_op() is not None and op.parent_op().name == "func.func"]
    assert ops.count("fwd.moe") == 1 and ops.count("fwd.matmul") == 4
