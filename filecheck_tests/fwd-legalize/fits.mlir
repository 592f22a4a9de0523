// The seed's fits (F01-F07) and the branches beyond the seed (B01-B03), dequant numerics, strict mode.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p fwd-legalize | filecheck %s

// B01 (beyond the seed): a 64-bit float
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: an op over 64-bit values — the forward's kernels accumulate in 32 bits
func.func @f64_silu(%x: tensor<64xf64>) {
  %z = fwd.silu %x : tensor<64xf64> -> tensor<64xf64>
  func.return
}

// -----

// B01 first: the accumulator before access and before the op's kind
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: an op over 64-bit values — the forward's kernels accumulate in 32 bits
func.func @i64_relu_strided(%x: tensor<64xi64>) {
  %z = fwd.relu %x access [#fwd.access<rows>] : (tensor<64xi64>) -> tensor<64xi64>
  func.return
}

// -----

// B01: i64 weights
// CHECK: fits.mlir:[[# @LINE + 3]]:3: error: an op over 64-bit values — the forward's kernels accumulate in 32 bits
func.func @i64_weights(%x: tensor<64xf32>) {
  %w = fwd.weight "w" : !fwd.weights<32x64, i64>
  %z = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, i64> -> tensor<32xf32>
  func.return
}

// -----

// F01: a strided operand
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward's stages read and write whole buffers
func.func @strided(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.elementwise add %x, %y access [#fwd.access<whole>, #fwd.access<strided>] : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return
}

// -----

// F01: writes into another buffer (not owned) — before the op's kind (K23)
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward's stages read and write whole buffers
func.func @into(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.relu %x into "kv_cache" : (tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// F02: the router is an f32 tensor, not Q8_0 rows
// CHECK: fits.mlir:[[# @LINE + 6]]:3: error: moe stage `%moe` has no entry in the MoE weight manifest
func.func @moe_manifest(%x: tensor<64xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : tensor<4x64xf32>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, q8_0>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, q8_0>
  %moe = fwd.moe %x, %r, %g, %u, %dn n_expert 4 top_k 2 renormalize act swiglu scoring softmax : tensor<64xf32>, tensor<4x64xf32>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x32x64, q8_0>, !fwd.weights<4x64x32, q8_0> -> tensor<64xf32>
  func.return
}

// -----

// F02: f16 experts
// CHECK: fits.mlir:[[# @LINE + 6]]:3: error: moe stage `%moe` has no entry in the MoE weight manifest
func.func @moe_manifest_f16(%x: tensor<64xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, f16>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, f16>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, f16>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, f16>
  %moe = fwd.moe %x, %r, %g, %u, %dn n_expert 4 top_k 2 renormalize act swiglu scoring softmax : tensor<64xf32>, !fwd.weights<4x64, f16>, !fwd.weights<4x32x64, f16>, !fwd.weights<4x32x64, f16>, !fwd.weights<4x64x32, f16> -> tensor<64xf32>
  func.return
}

// -----

// outside the manifest, the kernel's reason comes first where there is one
// CHECK: fits.mlir:[[# @LINE + 6]]:3: error: an expert mixture with a clamped SwiGLU — its kernels gate with SwiGLU
func.func @moe_manifest_kernel_reason(%x: tensor<64xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<4x64, f16>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<4x32x64, f16>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<4x32x64, f16>
  %dn = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<4x64x32, f16>
  %moe = fwd.moe %x, %r, %g, %u, %dn n_expert 4 top_k 2 renormalize act swiglu_clamped scoring softmax : tensor<64xf32>, !fwd.weights<4x64, f16>, !fwd.weights<4x32x64, f16>, !fwd.weights<4x32x64, f16>, !fwd.weights<4x64x32, f16> -> tensor<64xf32>
  func.return
}

// -----

// F03
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward reads no view into another buffer
func.func @view(%x: tensor<64xf32>) {
  %z = fwd.view %x offset 32 : tensor<64xf32> -> tensor<32xf32>
  func.return
}

// -----

// F04: no quantize under numerics=dequant
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward's precise numerics read no activation quantized
func.func @quantize_dequant(%x: tensor<64xf32>) {
  %z = fwd.quantize %x two_words : tensor<64xf32> -> !fwd.qact<64, two_words>
  func.return
}

// -----

// F05: the norm is not the next stage (covers 0, 2)
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward adds into a norm only where the norm is the next stage
func.func @add_norm_not_next(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f:2 = fwd.fused add_norm covers [0, 2] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.rms_norm %s eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s, %n : tensor<64xf32>, tensor<64xf32>
  }
  func.return
}

// -----

// F06: the norm has a residual of its own (`pre`)
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward adds into the norm that follows, over the whole of the sum
func.func @add_norm_pre(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f:2 = fwd.fused add_norm covers [0, 1] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.rms_norm %s residual(%b_ : tensor<64xf32>) : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s, %n : tensor<64xf32>, tensor<64xf32>
  }
  func.return
}

// -----

// F06: the norm normalizes rows of 32 of a sum of 64 (`part`)
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward adds into the norm that follows, over the whole of the sum
func.func @add_norm_part(%a: tensor<2x32xf32>, %b: tensor<2x32xf32>) {
  %f:2 = fwd.fused add_norm covers [0, 1] ins(%a, %b) : (tensor<2x32xf32>, tensor<2x32xf32>) -> (tensor<2x32xf32>, tensor<2x32xf32>) {
  ^bb0(%a_: tensor<2x32xf32>, %b_: tensor<2x32xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<2x32xf32>, tensor<2x32xf32> -> tensor<2x32xf32>
    %n = fwd.rms_norm %s : tensor<2x32xf32> -> tensor<2x32xf32>
    fwd.yield %s, %n : tensor<2x32xf32>, tensor<2x32xf32>
  }
  func.return
}

// -----

// order: `pre` (F06) is reported before `next` (F05)
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward adds into the norm that follows, over the whole of the sum
func.func @add_norm_pre_and_not_next(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f:2 = fwd.fused add_norm covers [3, 7] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.rms_norm %s residual(%b_ : tensor<64xf32>) : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s, %n : tensor<64xf32>, tensor<64xf32>
  }
  func.return
}

// -----

// F06: no norm at all
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward adds into the norm that follows, over the whole of the sum
func.func @add_norm_no_norm(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f:2 = fwd.fused add_norm covers [0, 1] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.softmax %s : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s, %n : tensor<64xf32>, tensor<64xf32>
  }
  func.return
}

// -----

// F07: a step reads the previous result as both operands
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward carries a chain's result through each step, as exactly one operand
func.func @chain_both(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f = fwd.fused elementwise_chains covers [0, 1] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %t = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %s = fwd.elementwise mul %t, %t : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// F07: a step does not read the previous result
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: the forward carries a chain's result through each step, as exactly one operand
func.func @chain_neither(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f:2 = fwd.fused elementwise_chains covers [0, 1] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %t = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %s = fwd.elementwise mul %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %t, %s : tensor<64xf32>, tensor<64xf32>
  }
  func.return
}

// -----

// a fused op whose part is refused: the part's reason, at the fused op
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: an elementwise op over a row combined with every row of a block — its kernel reads both at one index
func.func @chain_leaf_refused(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f = fwd.fused elementwise_chains covers [0, 1] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %t = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %s = fwd.elementwise mul %t, %b_ row : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}

// -----

// B02 (beyond the seed): the GEMVs dequantize F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and BF16 rows only
// CHECK: fits.mlir:[[# @LINE + 3]]:3: error: a matmul over MXFP4 weights — its kernels dequantize F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and BF16 rows only
func.func @matmul_mxfp4(%x: tensor<64xf32>) {
  %w = fwd.weight "w" : !fwd.weights<32x64, mxfp4>
  %z = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, mxfp4> -> tensor<32xf32>
  func.return
}

// -----

// B02: IQ4_NL
// CHECK: fits.mlir:[[# @LINE + 3]]:3: error: a matmul over IQ4_NL weights — its kernels dequantize F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and BF16 rows only
func.func @matmul_iq4_nl(%x: tensor<64xf32>) {
  %w = fwd.weight "w" : !fwd.weights<32x64, iq4_nl>
  %z = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, iq4_nl> -> tensor<32xf32>
  func.return
}

// -----

// B03 (beyond the seed): a dense matmul over bf16 values
// CHECK: fits.mlir:[[# @LINE + 2]]:3: error: a matmul over a bf16 tensor — its dense kernel multiplies f32 and f16 rows only
func.func @matmul_bf16_tensor(%x: tensor<64xf32>, %w: tensor<32x64xbf16>) {
  %z = fwd.matmul %x, %w : tensor<64xf32>, tensor<32x64xbf16> -> tensor<32xf32>
  func.return
}

// -----

// fused ops that fit: an add_norm, an add_norm over a nested norm_weight, a chain through a silu
// CHECK-LABEL: func.func @fits
// CHECK: fwd.fused add_norm covers [0, 1]
// CHECK: fwd.fused add_norm covers [4, 5, 6]
// CHECK: fwd.fused norm_weight covers [5, 6]
// CHECK: fwd.fused elementwise_chains covers [7, 8, 9]
// CHECK-NOT: error
func.func @fits(%a: tensor<64xf32>, %b: tensor<64xf32>) {
  %f:2 = fwd.fused add_norm covers [0, 1] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.rms_norm %s eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s, %n : tensor<64xf32>, tensor<64xf32>
  }
  %g:2 = fwd.fused add_norm covers [4, 5, 6] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %n = fwd.fused norm_weight covers [5, 6] ins(%s, %b_) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
    ^bb1(%p: tensor<64xf32>, %w: tensor<64xf32>):
      %r = fwd.rms_norm %p eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
      %m = fwd.elementwise mul %r, %w : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
      fwd.yield %m : tensor<64xf32>
    }
    fwd.yield %s, %n : tensor<64xf32>, tensor<64xf32>
  }
  %h = fwd.fused elementwise_chains covers [7, 8, 9] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
    %t = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %u = fwd.silu %t : tensor<64xf32> -> tensor<64xf32>
    %s = fwd.elementwise mul %b_, %u : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return
}
