// The kernels' limits beyond the seed's K18 (B08-B10, `fwdshim.limits`): refused by legality with the
// reason, where they were legal and then failed to lower (a head of 12288 values) or computed another
// mixture (top_k 33 kept 32 experts). Each beside the widest the kernel computes.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p fwd-legalize 2>&1 | filecheck %s

// B08: one warp's partial row of a 12288-value head alone fills the 48 KiB (issue 10's wide_head.mlir)
// CHECK: kernel_limits.mlir:[[# @LINE + 2]]:3: error: an attention over heads of 12288 values — its kernel holds a split's scores and each warp's partial row of the head in 48 KiB of static shared memory
func.func @wide_head(%q: tensor<12288xf32>, %k: tensor<12288xf32>, %v: tensor<12288xf32>, %kc: tensor<1x12288xf32>, %vc: tensor<1x12288xf32>) -> tensor<12288xf32> {
  %a = fwd.attention %q, %k, %v, %kc, %vc h 1 kv 1 hd 12288 vd 12288 l 2 rows 1 : tensor<12288xf32>, tensor<12288xf32>, tensor<12288xf32>, tensor<1x12288xf32>, tensor<1x12288xf32> -> tensor<12288xf32>
  func.return %a : tensor<12288xf32>
}

// -----

// Negative: the widest head one warp's row holds (12256 values) is legal.
// CHECK-NOT: error: an attention over heads of 12256
// CHECK: func.func @widest_head
func.func @widest_head(%q: tensor<12256xf32>, %k: tensor<12256xf32>, %v: tensor<12256xf32>, %kc: tensor<1x12256xf32>, %vc: tensor<1x12256xf32>) -> tensor<12256xf32> {
  %a = fwd.attention %q, %k, %v, %kc, %vc h 1 kv 1 hd 12256 vd 12256 l 2 rows 1 : tensor<12256xf32>, tensor<12256xf32>, tensor<12256xf32>, tensor<1x12256xf32>, tensor<1x12256xf32> -> tensor<12256xf32>
  func.return %a : tensor<12256xf32>
}

// -----

// B09: the router keeps one expert a lane of one warp (issue 10's moe_topk33.mlir)
// CHECK: kernel_limits.mlir:[[# @LINE + 7]]:3: error: an expert mixture keeping 33 experts — its router keeps at most 32, one a lane of one warp
func.func @top33(%x: tensor<32xf32>) -> tensor<32xf32> {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<34x32, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<34x32x32, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<34x32x32, q8_0>
  %d = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<34x32x32, q8_0>

  %y = fwd.moe %x, %r, %g, %u, %d n_expert 34 top_k 33 renormalize act swiglu scoring softmax : tensor<32xf32>, !fwd.weights<34x32, q8_0>, !fwd.weights<34x32x32, q8_0>, !fwd.weights<34x32x32, q8_0>, !fwd.weights<34x32x32, q8_0> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}

// -----

// Negative: top_k 32 is legal.
// CHECK-NOT: error: an expert mixture keeping 32
// CHECK: func.func @top32
func.func @top32(%x: tensor<32xf32>) -> tensor<32xf32> {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<34x32, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<34x32x32, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<34x32x32, q8_0>
  %d = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<34x32x32, q8_0>
  %y = fwd.moe %x, %r, %g, %u, %d n_expert 34 top_k 32 renormalize act swiglu scoring softmax : tensor<32xf32>, !fwd.weights<34x32, q8_0>, !fwd.weights<34x32x32, q8_0>, !fwd.weights<34x32x32, q8_0>, !fwd.weights<34x32x32, q8_0> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}

// -----

// B10: the router ranks at most 2048 experts (64 a lane)
// CHECK: kernel_limits.mlir:[[# @LINE + 6]]:3: error: an expert mixture of 2049 experts — its router ranks at most 2048, 64 a lane of one warp
func.func @experts2049(%x: tensor<32xf32>) -> tensor<32xf32> {
  %r = fwd.weight "r" : !fwd.weights<2049x32, q8_0>
  %g = fwd.weight "g" : !fwd.weights<2049x32x32, q8_0>
  %u = fwd.weight "u" : !fwd.weights<2049x32x32, q8_0>
  %d = fwd.weight "d" : !fwd.weights<2049x32x32, q8_0>
  %y = fwd.moe %x, %r, %g, %u, %d n_expert 2049 top_k 2 renormalize act swiglu scoring softmax : tensor<32xf32>, !fwd.weights<2049x32, q8_0>, !fwd.weights<2049x32x32, q8_0>, !fwd.weights<2049x32x32, q8_0>, !fwd.weights<2049x32x32, q8_0> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}

// -----

// B11: the block GEMVs read whole 32-value blocks (Q8_0 rows of 40 values were legal, then failed to lower)
// CHECK: kernel_limits.mlir:[[# @LINE + 3]]:3: error: a matmul or mixture over Q8_0 rows of 40 values — its kernels read whole blocks of 32
func.func @q8_rows_of_40(%x: tensor<40xf32>) -> tensor<8xf32> {
  %w = fwd.weight "w" : !fwd.weights<8x40, q8_0>
  %y = fwd.matmul %x, %w : tensor<40xf32>, !fwd.weights<8x40, q8_0> -> tensor<8xf32>
  func.return %y : tensor<8xf32>
}

// -----

// Negative: dense f32 rows of 40 values are legal (the dense GEMV reads any row).
// CHECK-NOT: error: a matmul or mixture over F32
// CHECK: func.func @f32_rows_of_40
func.func @f32_rows_of_40(%x: tensor<40xf32>) -> tensor<8xf32> {
  %w = fwd.weight "w" : !fwd.weights<8x40, f32>
  %y = fwd.matmul %x, %w : tensor<40xf32>, !fwd.weights<8x40, f32> -> tensor<8xf32>
  func.return %y : tensor<8xf32>
}
