// A rule whose class the forward refuses does not fire and leaves a remark with the reason; a rule
// whose class the forward decomposes does not fire either, leaving its parts to later rules.
// RUN: fwdshim-opt %s --split-input-file -p fwd-fuse | filecheck %s
// RUN: fwdshim-opt %s --split-input-file -p 'fwd-fuse{order=shared}' | filecheck %s --check-prefix=SHARED

func.func @relu_sqr(%x: tensor<64xf32>) -> tensor<64xf32> {
  %r = fwd.relu %x : (tensor<64xf32>) -> tensor<64xf32>
  %y = fwd.elementwise mul %r, %r : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}

// CHECK-LABEL: func.func @relu_sqr
// CHECK-NEXT:    %[[R:.*]] = fwd.relu %{{.*}} {fwd.remark = "relu_sqr: the forward links no ReLU"}
// CHECK-NEXT:    fwd.elementwise mul %[[R]], %[[R]]
// CHECK-NOT:     fwd.fused

// -----

// glu_act_mul (silu(gate) * up) is DECOMPOSE for the forward: no remark, and the chain takes it,
// in the shared order too (where glu_act_mul runs before the chains).
func.func @glu(%g: tensor<64xf32>, %u: tensor<64xf32>) -> tensor<64xf32> {
  %s = fwd.silu %g : tensor<64xf32> -> tensor<64xf32>
  %y = fwd.elementwise mul %s, %u : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}

// CHECK-LABEL: func.func @glu
// CHECK-NOT:     fwd.remark
// CHECK-NOT:     glu_act_mul
// CHECK:         fwd.fused elementwise_chains covers [0, 1]
// SHARED-LABEL: func.func @glu
// SHARED-NOT:     glu_act_mul
// SHARED:         fwd.fused elementwise_chains covers [0, 1]

// -----

// Negative: a relu whose result is not squared matches no rule, and so carries no remark.
func.func @relu_alone(%x: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %r = fwd.relu %x : (tensor<64xf32>) -> tensor<64xf32>
  %y = fwd.elementwise mul %r, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}

// CHECK-LABEL: func.func @relu_alone
// CHECK-NOT:     fwd.remark
// CHECK:         func.return
