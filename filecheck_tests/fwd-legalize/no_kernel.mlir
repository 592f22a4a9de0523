// The seed's last kernel_refusal arm (K23): the 19 ops the forward never computes, and fwd.gated_delta.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p fwd-legalize | filecheck %s

// K23: fwd.swiglu
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.swiglu)
func.func @swiglu(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.swiglu %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.sigmoid
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.sigmoid)
func.func @sigmoid(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.sigmoid %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.gelu
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.gelu)
func.func @gelu(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.gelu %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.scale
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.scale)
func.func @scale(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.scale %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.decay
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.decay)
func.func @decay(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.decay %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.l2_norm
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.l2_norm)
func.func @l2_norm(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.l2_norm %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.head_slice
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.head_slice)
func.func @head_slice(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.head_slice %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.join
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.join)
func.func @join(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.join %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.head_matmul
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.head_matmul)
func.func @head_matmul(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.head_matmul %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.causal_conv
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.causal_conv)
func.func @causal_conv(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.causal_conv %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.full_attention
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.full_attention)
func.func @full_attention(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.full_attention %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.row_gather
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.row_gather)
func.func @row_gather(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.row_gather %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.rows_gather
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.rows_gather)
func.func @rows_gather(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.rows_gather %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.argmax
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.argmax)
func.func @argmax(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.argmax %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// F01 before K23: fwd.set_row writes into rows of another buffer, so it owns no destination
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: the forward's stages read and write whole buffers
func.func @set_row(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.set_row %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.int_requant
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.int_requant)
func.func @int_requant(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.int_requant %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.int_clamp
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.int_clamp)
func.func @int_clamp(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.int_clamp %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.relu
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.relu)
func.func @relu(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.relu %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: fwd.lut_attention
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.lut_attention)
func.func @lut_attention(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.lut_attention %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// K23: a gated delta gated by SiLU still has no kernel (the seed's GatedDelta in the last arm)
// CHECK: no_kernel.mlir:[[# @LINE + 2]]:3: error: this lane has no kernel for the op (fwd.gated_delta)
func.func @gated_delta_silu(%x: tensor<64xf32>, %y: tensor<64xf32>) {
  %z = fwd.gated_delta silu %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return
}
