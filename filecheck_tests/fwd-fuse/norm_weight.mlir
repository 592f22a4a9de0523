// norm_weight: an RMS norm, then a multiply by a weight vector, is one weighted-norm row kernel.
// RUN: fwdshim-opt %s --split-input-file -p fwd-fuse | filecheck %s

func.func @weighted(%x: tensor<576xf32>) -> tensor<576xf32> {
  %nw = fwd.weight "blk.0.attn_norm.weight" : tensor<576xf32>
  %n = fwd.rms_norm %x eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %h = fwd.elementwise mul %nw, %n : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  func.return %h : tensor<576xf32>
}

// CHECK-LABEL: func.func @weighted
// CHECK-SAME:      (%[[X:.*]]: tensor<576xf32>)
// CHECK-NEXT:    %[[NW:.*]] = fwd.weight
// CHECK-NEXT:    %[[H:.*]] = fwd.fused norm_weight covers [0, 1] ins(%[[X]], %[[NW]]) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32> {
// CHECK-NEXT:    ^{{.*}}(%[[X1:.*]]: tensor<576xf32>, %[[NW1:.*]]: tensor<576xf32>):
// CHECK-NEXT:      %[[N:.*]] = fwd.rms_norm %[[X1]] eps
// CHECK-NEXT:      %[[H1:.*]] = fwd.elementwise mul %[[NW1]], %[[N]]
// CHECK-NEXT:      fwd.yield %[[H1]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[H]]

// -----

// Negative: a multiply by an activation (not a weight), and a norm that already has its weight.
func.func @not_weighted(%x: tensor<576xf32>, %g: tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  %nw = fwd.weight "blk.0.attn_norm.weight" : tensor<576xf32>
  %n = fwd.rms_norm %x eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %h = fwd.elementwise mul %n, %g : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %n2 = fwd.rms_norm %x weight(%nw : tensor<576xf32>) eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %h2 = fwd.elementwise mul %n2, %nw : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  func.return %h, %h2 : tensor<576xf32>, tensor<576xf32>
}

// CHECK-LABEL: func.func @not_weighted
// CHECK-NOT:     fwd.fused
// CHECK:         func.return
