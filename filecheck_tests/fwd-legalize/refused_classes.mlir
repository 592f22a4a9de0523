// A fused op of each of the 22 classes the forward refuses (supports: Refuse): refused with the shim's reason,
// under every numerics.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p fwd-legalize | filecheck %s
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p 'fwd-legalize{numerics=int8-act}' | filecheck %s
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p 'fwd-legalize{numerics=two-pass-int8}' | filecheck %s

// S01: a fwd.fused of class relu_sqr (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward links no ReLU
func.func @relu_sqr(%a: tensor<64xf32>) {
  %f = fwd.fused relu_sqr covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S02: a fwd.fused of class flash_decode (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward attends one query over a cache held in one block's shared scores
func.func @flash_decode(%a: tensor<64xf32>) {
  %f = fwd.fused flash_decode covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S02: a fwd.fused of class flash_prefill (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward attends one query over a cache held in one block's shared scores
func.func @flash_prefill(%a: tensor<64xf32>) {
  %f = fwd.fused flash_prefill covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S03: a fwd.fused of class attention_variants_inline (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward's attention takes no mask, window, sink, soft cap or given scale
func.func @attention_variants_inline(%a: tensor<64xf32>) {
  %f = fwd.fused attention_variants_inline covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S03: a fwd.fused of class softcap (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward's attention takes no mask, window, sink, soft cap or given scale
func.func @softcap(%a: tensor<64xf32>) {
  %f = fwd.fused softcap covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S03: a fwd.fused of class mixed_batch_attention (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward's attention takes no mask, window, sink, soft cap or given scale
func.func @mixed_batch_attention(%a: tensor<64xf32>) {
  %f = fwd.fused mixed_batch_attention covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S03: a fwd.fused of class sparse_attention (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward's attention takes no mask, window, sink, soft cap or given scale
func.func @sparse_attention(%a: tensor<64xf32>) {
  %f = fwd.fused sparse_attention covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S04: a fwd.fused of class attn_gqa_row_packing (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward attends a cache in one block, never in chunks
func.func @attn_gqa_row_packing(%a: tensor<64xf32>) {
  %f = fwd.fused attn_gqa_row_packing covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S04: a fwd.fused of class attn_lse_merge (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward attends a cache in one block, never in chunks
func.func @attn_lse_merge(%a: tensor<64xf32>) {
  %f = fwd.fused attn_lse_merge covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S05: a fwd.fused of class grouped_topk (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward routes by one top-k over every expert
func.func @grouped_topk(%a: tensor<64xf32>) {
  %f = fwd.fused grouped_topk covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S06: a fwd.fused of class sampling (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward computes logits and picks no token
func.func @sampling(%a: tensor<64xf32>) {
  %f = fwd.fused sampling covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S07: a fwd.fused of class gdn_step (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward links no delta rule
func.func @gdn_step(%a: tensor<64xf32>) {
  %f = fwd.fused gdn_step covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S08: a fwd.fused of class kv_cache_quant (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward holds its caches in f32
func.func @kv_cache_quant(%a: tensor<64xf32>) {
  %f = fwd.fused kv_cache_quant covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S08: a fwd.fused of class hadamard_rotation (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward holds its caches in f32
func.func @hadamard_rotation(%a: tensor<64xf32>) {
  %f = fwd.fused hadamard_rotation covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S09: a fwd.fused of class compensated_residual (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward sums its residual in f32, uncompensated
func.func @compensated_residual(%a: tensor<64xf32>) {
  %f = fwd.fused compensated_residual covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S10: a fwd.fused of class host_resident_kv (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward keeps every buffer on the device
func.func @host_resident_kv(%a: tensor<64xf32>) {
  %f = fwd.fused host_resident_kv covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S11: a fwd.fused of class moe_direct_pairs (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward runs one sequence's row through its kept experts
func.func @moe_direct_pairs(%a: tensor<64xf32>) {
  %f = fwd.fused moe_direct_pairs covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S12: a fwd.fused of class persistent_layer_megakernel (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward replays a graph of a kernel a stage
func.func @persistent_layer_megakernel(%a: tensor<64xf32>) {
  %f = fwd.fused persistent_layer_megakernel covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S13: a fwd.fused of class strided_read (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward's stages read and write whole buffers
func.func @strided_read(%a: tensor<64xf32>) {
  %f = fwd.fused strided_read covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S13: a fwd.fused of class row_write (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward's stages read and write whole buffers
func.func @row_write(%a: tensor<64xf32>) {
  %f = fwd.fused row_write covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S13: a fwd.fused of class join_in_place (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward's stages read and write whole buffers
func.func @join_in_place(%a: tensor<64xf32>) {
  %f = fwd.fused join_in_place covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// S13: a fwd.fused of class strided_values (its parts would fit)
// CHECK: refused_classes.mlir:[[# @LINE + 2]]:3: error: the forward's stages read and write whole buffers
func.func @strided_values(%a: tensor<64xf32>) {
  %f = fwd.fused strided_values covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}
