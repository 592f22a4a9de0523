// Fused ops of Decompose classes are split back into their parts (fwd.decomposed_from names the class), which
// are then checked like any stage.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics -p fwd-legalize | filecheck %s

// qk_norm_rope (Decompose): split into its norm and rope, which the forward runs as two kernels
// CHECK-LABEL: func.func @qk_norm_rope(
// CHECK-SAME: %[[X:[^:]*]]: tensor<64xf32>, %[[ANG:[^:]*]]: tensor<2x16xf32>)
// CHECK-NOT: fwd.fused
// CHECK: %[[N:.*]] = fwd.rms_norm %[[X]] eps 1.000000e-05 {fwd.decomposed_from = "qk_norm_rope"}
// CHECK-NEXT: %[[R:.*]] = fwd.rope %[[N]], %[[ANG]] hd 32 half 16 rows 1 {fwd.decomposed_from = "qk_norm_rope"}
// CHECK-NEXT: func.return %[[R]] : tensor<64xf32>
func.func @qk_norm_rope(%x: tensor<64xf32>, %ang: tensor<2x16xf32>) -> tensor<64xf32> {
  %f = fwd.fused qk_norm_rope covers [0, 1] ins(%x, %ang) : (tensor<64xf32>, tensor<2x16xf32>) -> tensor<64xf32> {
  ^bb0(%x_: tensor<64xf32>, %ang_: tensor<2x16xf32>):
    %n = fwd.rms_norm %x_ eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
    %r = fwd.rope %n, %ang_ hd 32 half 16 rows 1 : tensor<64xf32>, tensor<2x16xf32> -> tensor<64xf32>
    fwd.yield %r : tensor<64xf32>
  }
  func.return %f : tensor<64xf32>
}

// -----

// glu_act_mul (Decompose): silu then the product
// CHECK-LABEL: func.func @glu_act_mul(
// CHECK-SAME: %[[G:[^:]*]]: tensor<64xf32>, %[[U:[^:]*]]: tensor<64xf32>)
// CHECK-NOT: fwd.fused
// CHECK: %[[A:.*]] = fwd.silu %[[G]] {fwd.decomposed_from = "glu_act_mul"}
// CHECK-NEXT: %[[M:.*]] = fwd.elementwise mul %[[A]], %[[U]] {fwd.decomposed_from = "glu_act_mul"}
// CHECK-NEXT: func.return %[[M]] : tensor<64xf32>
func.func @glu_act_mul(%g: tensor<64xf32>, %u: tensor<64xf32>) -> tensor<64xf32> {
  %f = fwd.fused glu_act_mul covers [0, 1] ins(%g, %u) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%g_: tensor<64xf32>, %u_: tensor<64xf32>):
    %a = fwd.silu %g_ : tensor<64xf32> -> tensor<64xf32>
    %m = fwd.elementwise mul %a, %u_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %m : tensor<64xf32>
  }
  func.return %f : tensor<64xf32>
}

// -----

// merged_gate_up (Decompose): two Q8_0 GEMVs; each result goes to its users
// CHECK-LABEL: func.func @merged_gate_up(
// CHECK-NOT: fwd.fused
// CHECK: %[[G:.*]] = fwd.matmul %x, %wg {fwd.decomposed_from = "merged_gate_up"}
// CHECK-NEXT: %[[U:.*]] = fwd.matmul %x, %wu {fwd.decomposed_from = "merged_gate_up"}
// CHECK-NEXT: %[[P:.*]] = fwd.elementwise mul %[[G]], %[[U]] :
// CHECK-NEXT: func.return %[[P]]
func.func @merged_gate_up(%x: tensor<64xf32>) -> tensor<32xf32> {
  %wg = fwd.weight "blk.0.ffn_gate.weight" : !fwd.weights<32x64, q8_0>
  %wu = fwd.weight "blk.0.ffn_up.weight" : !fwd.weights<32x64, q8_0>
  %f:2 = fwd.fused merged_gate_up covers [0, 1] ins(%x, %wg, %wu) : (tensor<64xf32>, !fwd.weights<32x64, q8_0>, !fwd.weights<32x64, q8_0>) -> (tensor<32xf32>, tensor<32xf32>) {
  ^bb0(%x_: tensor<64xf32>, %wg_: !fwd.weights<32x64, q8_0>, %wu_: !fwd.weights<32x64, q8_0>):
    %g = fwd.matmul %x_, %wg_ : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
    %u = fwd.matmul %x_, %wu_ : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
    fwd.yield %g, %u : tensor<32xf32>, tensor<32xf32>
  }
  %p = fwd.elementwise mul %f#0, %f#1 : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  func.return %p : tensor<32xf32>
}

// -----

// a Decompose class holding a native fused part: the part stays one fused kernel
// CHECK-LABEL: func.func @native_part_kept(
// CHECK-NOT: fwd.fused gemv_norm_epilogue
// CHECK: %[[T:.*]] = fwd.silu %x {fwd.decomposed_from = "gemv_norm_epilogue"}
// CHECK-NEXT: %{{.*}}, %[[N:.*]] = fwd.fused add_norm covers [1, 2] ins(%[[T]], %y) {fwd.decomposed_from = "gemv_norm_epilogue"}
// CHECK: func.return %[[N]] :
// CHECK-NOT: error
func.func @native_part_kept(%x: tensor<64xf32>, %y: tensor<64xf32>) -> tensor<64xf32> {
  %f = fwd.fused gemv_norm_epilogue covers [0, 1, 2] ins(%x, %y) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%x_: tensor<64xf32>, %y_: tensor<64xf32>):
    %t = fwd.silu %x_ : tensor<64xf32> -> tensor<64xf32>
    %an:2 = fwd.fused add_norm covers [1, 2] ins(%t, %y_) : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
    ^bb0(%a_: tensor<64xf32>, %b_: tensor<64xf32>):
      %s = fwd.elementwise add %a_, %b_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
      %n = fwd.rms_norm %s eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
      fwd.yield %s, %n : tensor<64xf32>, tensor<64xf32>
    }
    fwd.yield %an#1 : tensor<64xf32>
  }
  func.return %f : tensor<64xf32>
}

// -----

// a Decompose class nested in another: both split; each part names the class it came from
// CHECK-LABEL: func.func @nested(
// CHECK-NOT: fwd.fused
// CHECK: %[[T:.*]] = fwd.silu %x {fwd.decomposed_from = "embed_norm"}
// CHECK-NEXT: %[[A:.*]] = fwd.silu %[[T]] {fwd.decomposed_from = "glu_act_mul"}
// CHECK-NEXT: %[[M:.*]] = fwd.elementwise mul %[[A]], %y {fwd.decomposed_from = "glu_act_mul"}
// CHECK-NEXT: func.return %[[M]]
func.func @nested(%x: tensor<64xf32>, %y: tensor<64xf32>) -> tensor<64xf32> {
  %f = fwd.fused embed_norm covers [0, 1, 2] ins(%x, %y) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%x_: tensor<64xf32>, %y_: tensor<64xf32>):
    %t = fwd.silu %x_ : tensor<64xf32> -> tensor<64xf32>
    %i = fwd.fused glu_act_mul covers [1, 2] ins(%t, %y_) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
    ^bb0(%p_: tensor<64xf32>, %q_: tensor<64xf32>):
      %a = fwd.silu %p_ : tensor<64xf32> -> tensor<64xf32>
      %m = fwd.elementwise mul %a, %q_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
      fwd.yield %m : tensor<64xf32>
    }
    fwd.yield %i : tensor<64xf32>
  }
  func.return %f : tensor<64xf32>
}

// -----

// interplay: under dequant norm_quant is Decompose, and its quantize part is refused at the part's own location
// CHECK: decompose.mlir:[[# @LINE + 5]]:5: error: the forward's precise numerics read no activation quantized
func.func @norm_quant_dequant(%x: tensor<64xf32>) {
  %f = fwd.fused norm_quant covers [0, 1] ins(%x) : (tensor<64xf32>) -> !fwd.qact<64, one_word> {
  ^bb0(%x_: tensor<64xf32>):
    %n = fwd.rms_norm %x_ eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
    %q = fwd.quantize %n one_word : tensor<64xf32> -> !fwd.qact<64, one_word>
    fwd.yield %q : !fwd.qact<64, one_word>
  }
  func.return
}

// -----

// every refused part of every decomposed op is reported in one run
// CHECK: decompose.mlir:[[# @LINE + 5]]:5: error: this lane has no kernel for the op
// CHECK: decompose.mlir:[[# @LINE + 10]]:5: error: a soft-capped tensor (`cap C`) — no kernel caps one
func.func @refused_parts(%g: tensor<64xf32>, %u: tensor<64xf32>) {
  %f = fwd.fused glu_act_mul covers [0, 1] ins(%g, %u) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%g_: tensor<64xf32>, %u_: tensor<64xf32>):
    %a = fwd.relu %g_ : (tensor<64xf32>) -> tensor<64xf32>
    %m = fwd.elementwise mul %a, %u_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %m : tensor<64xf32>
  }
  %h = fwd.fused dual_norm covers [2, 3] ins(%g, %u) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%g_: tensor<64xf32>, %u_: tensor<64xf32>):
    %a = fwd.softcap %g_ cap 5.0 : tensor<64xf32> -> tensor<64xf32>
    %m = fwd.elementwise add %a, %u_ : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %m : tensor<64xf32>
  }
  func.return
}
