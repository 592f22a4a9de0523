"""Numba CUDA kernel families of the forward (DESIGN.md §6), generated as Python source.

One module per family, each a set of cached factories taking a kernel spec (sizes, `eps`, options)
and returning a `kernel.Kernel` (generated source, compiled dispatcher, grid, block, parameters in
launch order with dtype, size and logical shape):

- `norms`: RMS norm (weighted, residual, add+norm writing the sum on, quantize epilogue), layer norm,
  softmax — one block per row.
- `unary`: silu, elementwise (add/sub/mul/div/max/min), transpose; `binary_expr`/`silu_expr` give the
  rounded expression text for generated chain and region kernels.
- `gemv`: Q8_0 GEMV dequantizing in-kernel, the int8-activation GEMV, dense f32/f16/bf16 GEMV;
  `q8_dots` emits Q8_0 row dot products for other kernels.
- `quantize`: the quantize stage (one_word, two_words) and the quantize `epilogue` text.
- `rope`: rope over heads with one row of angles.
- `attention`: single-query GQA attention, each head's cache rows split over blocks (flash-decoding,
  the last block of a head combines), optional quantize epilogue; `kv_append`.
- `moe`: top-k router, gate-up SwiGLU, down-and-combine.
- `embed`, `argmax`: the device-resident decode loop's first and last launches (the token's
  embedding row and angles; the greedy pick, the position advanced); `loop.DeviceLoop` captures them
  around a plan as one graph.

`merge` groups a plan's stage launches into merged launches (parallel parts and last-block tails,
bit for bit their stages).

`kernel` turns generated source into kernels (disk cache, simulator prelude); `intrinsics` holds
the GPU primitives and `simulator` their simulator equivalents.
"""
