// elementwise_regions: a connected group of elementwise ops and silus that joins (a member reads two
// members) or forks (two members read one) is one region kernel, where a chain would take one arm.
// RUN: fwdshim-opt %s --split-input-file -p fwd-fuse | filecheck %s

func.func @glu_region(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf32>, %d: tensor<64xf32>) -> tensor<64xf32> {
  %g = fwd.elementwise add %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %u = fwd.elementwise mul %c, %d : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %sg = fwd.silu %g : tensor<64xf32> -> tensor<64xf32>
  %y = fwd.elementwise mul %sg, %u : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}

// CHECK-LABEL: func.func @glu_region
// CHECK-SAME:      (%[[A:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>, %[[C:.*]]: tensor<64xf32>, %[[D:.*]]: tensor<64xf32>)
// CHECK-NEXT:    %[[Y:.*]] = fwd.fused elementwise_regions covers [0, 1, 2, 3] ins(%[[A]], %[[B]], %[[C]], %[[D]])
// CHECK-SAME:        -> tensor<64xf32> {
// CHECK-NEXT:    ^{{.*}}(%[[A1:.*]]: tensor<64xf32>, %[[B1:.*]]: tensor<64xf32>, %[[C1:.*]]: tensor<64xf32>, %[[D1:.*]]: tensor<64xf32>):
// CHECK-NEXT:      %[[G:.*]] = fwd.elementwise add %[[A1]], %[[B1]]
// CHECK-NEXT:      %[[U:.*]] = fwd.elementwise mul %[[C1]], %[[D1]]
// CHECK-NEXT:      %[[SG:.*]] = fwd.silu %[[G]]
// CHECK-NEXT:      %[[Y1:.*]] = fwd.elementwise mul %[[SG]], %[[U]]
// CHECK-NEXT:      fwd.yield %[[Y1]] : tensor<64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]]
// CHECK-NOT:     elementwise_chains

// -----

// A fork: t feeds two members; the region yields both arms and t (the outside reads it).
func.func @fork(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %t = fwd.elementwise mul %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %s1 = fwd.elementwise add %t, %c : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %s2 = fwd.elementwise sub %c, %t : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %t, %s1, %s2 : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @fork
// CHECK-NEXT:    %[[R:.*]], %[[R1:.*]], %[[R2:.*]] = fwd.fused elementwise_regions covers [0, 1, 2]
// CHECK-SAME:        -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
// CHECK:           fwd.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]], %[[R1]], %[[R2]]

// -----

// A region of any shape: a diamond of depth 4 with a fan-in of three, all one kernel.
func.func @diamond(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %x = fwd.elementwise add %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %l = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
  %r = fwd.elementwise mul %x, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %j = fwd.elementwise max %l, %r : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %k = fwd.elementwise min %j, %x : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %z = fwd.elementwise add %k, %l : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %z : tensor<64xf32>
}

// CHECK-LABEL: func.func @diamond
// CHECK-NEXT:    %[[Z:.*]] = fwd.fused elementwise_regions covers [0, 1, 2, 3, 4, 5] ins(%{{.*}}, %{{.*}}) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
// CHECK-COUNT-6:   fwd.{{elementwise|silu}}
// CHECK-NEXT:      fwd.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Z]]

// -----

// Negative: a plain run neither joins nor forks: no region (the chain rule takes it).
func.func @run(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf32>) -> tensor<64xf32> {
  %t = fwd.elementwise mul %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %s = fwd.elementwise add %t, %c : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %y = fwd.silu %s : tensor<64xf32> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}

// CHECK-LABEL: func.func @run
// CHECK-NOT:     elementwise_regions
// CHECK:         fwd.fused elementwise_chains covers [0, 1, 2]

// -----

// Negative: unconnected ops, ops of another size, and a matmul between a join's arms are not one region.
func.func @apart(%a: tensor<64xf32>, %b: tensor<64xf32>, %w: tensor<64x64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %g = fwd.elementwise add %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %m = fwd.matmul %g, %w : tensor<64xf32>, tensor<64x64xf32> -> tensor<64xf32>
  %j = fwd.elementwise mul %g, %m : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %u = fwd.elementwise mul %a, %a : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %j, %u : tensor<64xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @apart
// CHECK-NOT:     fwd.fused
// CHECK:         func.return
