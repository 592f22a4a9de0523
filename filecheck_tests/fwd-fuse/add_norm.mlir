// add_norm: a sum whose next stage RMS-norms the whole sum is one row kernel writing the sum on.
// RUN: fwdshim-opt %s --split-input-file -p fwd-fuse | filecheck %s

func.func @residual(%x: tensor<576xf32>, %o: tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  %nw = fwd.weight "blk.0.ffn_norm.weight" : tensor<576xf32>
  %s = fwd.elementwise add %x, %o : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %n = fwd.rms_norm %s eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %h = fwd.elementwise mul %n, %nw : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  func.return %s, %h : tensor<576xf32>, tensor<576xf32>
}

// The weighted norm fuses first (norm_weight), then add_norm takes the sum and the weighted norm,
// nesting it; the sum has a user outside, so it is yielded too.
// CHECK-LABEL: func.func @residual
// CHECK-SAME:      (%[[X:.*]]: tensor<576xf32>, %[[O:.*]]: tensor<576xf32>)
// CHECK-NEXT:    %[[NW:.*]] = fwd.weight "blk.0.ffn_norm.weight"
// CHECK-NEXT:    %[[S:.*]], %[[H:.*]] = fwd.fused add_norm covers [0, 1, 2] ins(%[[X]], %[[O]], %[[NW]]) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
// CHECK-NEXT:    ^{{.*}}(%[[X1:.*]]: tensor<576xf32>, %[[O1:.*]]: tensor<576xf32>, %[[NW1:.*]]: tensor<576xf32>):
// CHECK-NEXT:      %[[S1:.*]] = fwd.elementwise add %[[X1]], %[[O1]]
// CHECK-NEXT:      %[[H1:.*]] = fwd.fused norm_weight covers [1, 2] ins(%[[S1]], %[[NW1]])
// CHECK-NEXT:      ^
// CHECK-NEXT:        %[[N2:.*]] = fwd.rms_norm
// CHECK-NEXT:        fwd.elementwise mul %[[N2]]
// CHECK-NEXT:        fwd.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      fwd.yield %[[S1]], %[[H1]] : tensor<576xf32>, tensor<576xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[S]], %[[H]]

// -----

// add_norm refused: another stage sits between the add and the norm. A remark gives the reason.
func.func @not_next(%x: tensor<576xf32>, %o: tensor<576xf32>, %w: !fwd.weights<576x576, q8_0>) -> (tensor<576xf32>, tensor<576xf32>) {
  %s = fwd.elementwise add %x, %o : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %m = fwd.matmul %x, %w : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  %n = fwd.rms_norm %s eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  func.return %n, %m : tensor<576xf32>, tensor<576xf32>
}

// CHECK-LABEL: func.func @not_next
// CHECK-NEXT:    %[[S:.*]] = fwd.elementwise add %{{.*}}, %{{.*}} {fwd.remark = "add_norm: the forward adds into a norm only where the norm is the next stage"}
// CHECK-NEXT:    fwd.matmul
// CHECK-NEXT:    fwd.rms_norm %[[S]]
// CHECK-NOT:     fwd.fused

// -----

// add_norm refused: the norm carries a residual of its own, or normalizes per head (rows narrower than the sum).
func.func @not_whole(%x: tensor<576xf32>, %o: tensor<576xf32>, %r: tensor<576xf32>, %xh: tensor<9x64xf32>, %oh: tensor<9x64xf32>) -> (tensor<576xf32>, tensor<9x64xf32>) {
  %s = fwd.elementwise add %x, %o : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %n = fwd.rms_norm %s residual(%r : tensor<576xf32>) eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %sh = fwd.elementwise add %xh, %oh : tensor<9x64xf32>, tensor<9x64xf32> -> tensor<9x64xf32>
  %nh = fwd.rms_norm %sh eps 1.0e-05 : tensor<9x64xf32> -> tensor<9x64xf32>
  func.return %n, %nh : tensor<576xf32>, tensor<9x64xf32>
}

// CHECK-LABEL: func.func @not_whole
// CHECK-NEXT:    fwd.elementwise add {{.*}} {fwd.remark = "add_norm: the forward adds into the norm that follows, over the whole of the sum"}
// CHECK-NEXT:    fwd.rms_norm
// CHECK-NEXT:    fwd.elementwise add {{.*}} {fwd.remark = "add_norm: the forward adds into the norm that follows, over the whole of the sum"}
// CHECK-NEXT:    fwd.rms_norm
// CHECK-NOT:     fwd.fused
