// B05 (beyond the seed): the forward's kernels read and write f32 buffers, so a stage over tensors of
// another element type is refused (64-bit ones are B01, checked first; a dense matmul's weights are
// B03's); a negative case beside it. Strict and mark.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p fwd-legalize | filecheck %s
// RUN: fwdshim-opt %s --split-input-file -p 'fwd-legalize{mode=mark}' | filecheck %s --check-prefix=MARK

// CHECK: activation_types.mlir:[[# @LINE + 2]]:3: error: an op over f16 tensors — the forward's kernels read and write f32 buffers
func.func @silu_f16(%x: tensor<64xf16>) {
  %z = fwd.silu %x : tensor<64xf16> -> tensor<64xf16>
  func.return
}

// MARK-LABEL: func.func @silu_f16
// MARK: fwd.silu %x {fwd.refused = "an op over f16 tensors \E2\80\94 the forward's kernels read and write f32 buffers"}

// -----

// The result's type counts too: an f32 sum written as i32.
// CHECK: activation_types.mlir:[[# @LINE + 2]]:3: error: an op over i32 tensors — the forward's kernels read and write f32 buffers
func.func @add_to_i32(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.elementwise add %x, %y : tensor<64xf32>, tensor<64xf32> -> tensor<64xi32>
  func.return
}

// -----

// A norm weight in bf16.
// CHECK: activation_types.mlir:[[# @LINE + 3]]:3: error: an op over bf16 tensors — the forward's kernels read and write f32 buffers
func.func @norm_weight_bf16(%x: tensor<64xf32>) {
  %w = fwd.weight "w" : tensor<64xbf16>
  %z = fwd.rms_norm %x weight(%w : tensor<64xbf16>) : tensor<64xf32> -> tensor<64xf32>
  func.return
}

// -----

// f64 is B01, before B05.
// CHECK: activation_types.mlir:[[# @LINE + 2]]:3: error: an op over 64-bit values — the forward's kernels accumulate in 32 bits
func.func @silu_f64(%x: tensor<64xf64>) {
  %z = fwd.silu %x : tensor<64xf64> -> tensor<64xf64>
  func.return
}

// -----

// Negative: f32 activations over a dense f16 matmul weight (B03 allows F16 rows) fit.
// CHECK-LABEL: func.func @dense_f16_weights
// CHECK-NOT: error
// MARK-LABEL: func.func @dense_f16_weights
// MARK-NOT: fwd.refused
func.func @dense_f16_weights(%x: tensor<64xf32>) -> tensor<32xf32> {
  %w = fwd.weight "w" : tensor<32x64xf16>
  %z = fwd.matmul %x, %w : tensor<64xf32>, tensor<32x64xf16> -> tensor<32xf32>
  func.return %z : tensor<32xf32>
}
