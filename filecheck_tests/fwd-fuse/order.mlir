// The ordering case that motivates the seed's rules(): t = a*b; s = t + c; n = rms_norm(s).
// The forward runs regions and chains before add_norm, so the add stays in the chain and the norm is
// alone; the shared order (a lane that moves no rule) lets add_norm take the add and the norm.
// RUN: fwdshim-opt %s --split-input-file -p fwd-fuse | filecheck %s --check-prefix=FWD
// RUN: fwdshim-opt %s --split-input-file -p 'fwd-fuse{order=shared}' | filecheck %s --check-prefix=SHARED

func.func @chain_then_norm(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf32>) -> tensor<64xf32> {
  %t = fwd.elementwise mul %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %s = fwd.elementwise add %t, %c : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %n = fwd.rms_norm %s eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  func.return %n : tensor<64xf32>
}

// FWD-LABEL: func.func @chain_then_norm
// FWD-SAME:      (%[[A:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>, %[[C:.*]]: tensor<64xf32>)
// FWD-NEXT:    %[[S:.*]] = fwd.fused elementwise_chains covers [0, 1] ins(%[[A]], %[[B]], %[[C]])
// FWD-NEXT:    ^{{.*}}(%[[A1:.*]]: tensor<64xf32>, %[[B1:.*]]: tensor<64xf32>, %[[C1:.*]]: tensor<64xf32>):
// FWD-NEXT:      %[[T:.*]] = fwd.elementwise mul %[[A1]], %[[B1]]
// FWD-NEXT:      %[[S1:.*]] = fwd.elementwise add %[[T]], %[[C1]]
// FWD-NEXT:      fwd.yield %[[S1]] : tensor<64xf32>
// FWD-NEXT:    }
// FWD-NEXT:    %[[N:.*]] = fwd.rms_norm %[[S]] eps
// FWD-NEXT:    func.return %[[N]]
// FWD-NOT:   add_norm

// SHARED-LABEL: func.func @chain_then_norm
// SHARED-SAME:      (%[[A:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>, %[[C:.*]]: tensor<64xf32>)
// SHARED-NEXT:    %[[T:.*]] = fwd.elementwise mul %[[A]], %[[B]]
// SHARED-NEXT:    %[[N:.*]] = fwd.fused add_norm covers [1, 2] ins(%[[T]], %[[C]])
// SHARED-NEXT:    ^{{.*}}(%[[T1:.*]]: tensor<64xf32>, %[[C1:.*]]: tensor<64xf32>):
// SHARED-NEXT:      %[[S:.*]] = fwd.elementwise add %[[T1]], %[[C1]]
// SHARED-NEXT:      %[[N1:.*]] = fwd.rms_norm %[[S]]
// SHARED-NEXT:      fwd.yield %[[N1]] : tensor<64xf32>
// SHARED-NEXT:    }
// SHARED-NEXT:    func.return %[[N]]
// SHARED-NOT:   elementwise_chains

// -----

// Negative: no sum feeds the norm (the chain ends in a multiply): both orders form the same chain.
func.func @no_sum(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf32>) -> tensor<64xf32> {
  %t = fwd.elementwise add %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %s = fwd.elementwise mul %t, %c : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %n = fwd.rms_norm %s eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  func.return %n : tensor<64xf32>
}

// FWD-LABEL: func.func @no_sum
// FWD-NEXT:    %[[S:.*]] = fwd.fused elementwise_chains covers [0, 1]
// FWD:         fwd.rms_norm %[[S]]
// FWD-NOT:     add_norm

// SHARED-LABEL: func.func @no_sum
// SHARED-NEXT:    %[[S:.*]] = fwd.fused elementwise_chains covers [0, 1]
// SHARED:         fwd.rms_norm %[[S]]
// SHARED-NOT:     add_norm
