// elementwise_chains: a maximal run where each step carries the last one's result as exactly one
// operand (the seed's XOR), or is a silu of it.
// RUN: fwdshim-opt %s --split-input-file -p fwd-fuse | filecheck %s

func.func @long_run(%a: tensor<32xf32>, %b: tensor<32xf32>, %c: tensor<32xf32>) -> tensor<32xf32> {
  %0 = fwd.elementwise add %a, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %1 = fwd.silu %0 : tensor<32xf32> -> tensor<32xf32>
  %2 = fwd.elementwise mul %c, %1 : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %3 = fwd.elementwise div %2, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %4 = fwd.elementwise max %3, %a : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %5 = fwd.elementwise sub %a, %4 : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  func.return %5 : tensor<32xf32>
}

// CHECK-LABEL: func.func @long_run
// CHECK-SAME:      (%[[A:.*]]: tensor<32xf32>, %[[B:.*]]: tensor<32xf32>, %[[C:.*]]: tensor<32xf32>)
// CHECK-NEXT:    %[[R:.*]] = fwd.fused elementwise_chains covers [0, 1, 2, 3, 4, 5] ins(%[[A]], %[[B]], %[[C]]) : (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>
// CHECK-NEXT:    ^{{.*}}(%[[A1:.*]]: tensor<32xf32>, %[[B1:.*]]: tensor<32xf32>, %[[C1:.*]]: tensor<32xf32>):
// CHECK-NEXT:      %[[V0:.*]] = fwd.elementwise add %[[A1]], %[[B1]]
// CHECK-NEXT:      %[[V1:.*]] = fwd.silu %[[V0]]
// CHECK-NEXT:      %[[V2:.*]] = fwd.elementwise mul %[[C1]], %[[V1]]
// CHECK-NEXT:      %[[V3:.*]] = fwd.elementwise div %[[V2]], %[[B1]]
// CHECK-NEXT:      %[[V4:.*]] = fwd.elementwise max %[[V3]], %[[A1]]
// CHECK-NEXT:      %[[V5:.*]] = fwd.elementwise sub %[[A1]], %[[V4]]
// CHECK-NEXT:      fwd.yield %[[V5]] : tensor<32xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]]

// -----

// Not a chain step: y = x * x after x carries x as both operands; nothing fuses.
func.func @square(%a: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<32xf32> {
  %x = fwd.elementwise add %a, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %y = fwd.elementwise mul %x, %x : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}

// CHECK-LABEL: func.func @square
// CHECK-NEXT:    %[[X:.*]] = fwd.elementwise add
// CHECK-NEXT:    %[[Y:.*]] = fwd.elementwise mul %[[X]], %[[X]]
// CHECK-NEXT:    func.return %[[Y]]
// CHECK-NOT:     fwd.fused

// -----

// The square breaks a run in two: [x] alone, then y = x*x starts the next run.
func.func @square_in_run(%a: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<32xf32> {
  %x = fwd.elementwise add %a, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %y = fwd.elementwise mul %x, %x : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %z = fwd.elementwise add %y, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  func.return %z : tensor<32xf32>
}

// CHECK-LABEL: func.func @square_in_run
// CHECK-NEXT:    %[[X:.*]] = fwd.elementwise add
// CHECK-NEXT:    %[[Z:.*]] = fwd.fused elementwise_chains covers [1, 2] ins(%[[X]], %{{.*}})
// CHECK-NEXT:    ^
// CHECK-NEXT:      %[[Y:.*]] = fwd.elementwise mul %[[X1:.*]], %[[X1]]
// CHECK-NEXT:      fwd.elementwise add %[[Y]]
// CHECK-NEXT:      fwd.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Z]]

// -----

// An intermediate the outside reads is yielded as an extra result.
func.func @yield_intermediate(%a: tensor<32xf32>, %b: tensor<32xf32>, %w: tensor<32x32xf32>) -> tensor<32xf32> {
  %t = fwd.elementwise mul %a, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %s = fwd.elementwise add %t, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %m = fwd.matmul %t, %w : tensor<32xf32>, tensor<32x32xf32> -> tensor<32xf32>
  %r = fwd.elementwise add %s, %m : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  func.return %r : tensor<32xf32>
}

// CHECK-LABEL: func.func @yield_intermediate
// CHECK-NEXT:    %[[T:.*]], %[[S:.*]] = fwd.fused elementwise_chains covers [0, 1] ins(%{{.*}}, %{{.*}}) : (tensor<32xf32>, tensor<32xf32>) -> (tensor<32xf32>, tensor<32xf32>)
// CHECK:           fwd.yield %{{.*}}, %{{.*}} : tensor<32xf32>, tensor<32xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[M:.*]] = fwd.matmul %[[T]]
// CHECK-NEXT:    %[[R:.*]] = fwd.elementwise add %[[S]], %[[M]]
// CHECK-NEXT:    func.return %[[R]]

// -----

// Negative: a step through a matmul is no chain (the run would both feed and read the matmul); an
// elementwise op over a row is refused by the forward and never fused.
func.func @through_matmul(%a: tensor<32xf32>, %b: tensor<32xf32>, %w: tensor<32x32xf32>, %blk: tensor<4x32xf32>) -> (tensor<32xf32>, tensor<4x32xf32>) {
  %t = fwd.elementwise mul %a, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %m = fwd.matmul %t, %w : tensor<32xf32>, tensor<32x32xf32> -> tensor<32xf32>
  %s = fwd.elementwise add %t, %m : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %r = fwd.elementwise add %s, %blk row : tensor<32xf32>, tensor<4x32xf32> -> tensor<4x32xf32>
  func.return %s, %r : tensor<32xf32>, tensor<4x32xf32>
}

// CHECK-LABEL: func.func @through_matmul
// CHECK-NOT:     fwd.fused
// CHECK:         func.return

// -----

// An outside op between the parts that reads one of them moves after the fused op.
func.func @move_reader(%a: tensor<32xf32>, %b: tensor<32xf32>, %w: tensor<32x32xf32>) -> (tensor<32xf32>, tensor<32xf32>) {
  %t = fwd.elementwise mul %a, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %m = fwd.matmul %t, %w : tensor<32xf32>, tensor<32x32xf32> -> tensor<32xf32>
  %s = fwd.elementwise add %t, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  func.return %s, %m : tensor<32xf32>, tensor<32xf32>
}

// CHECK-LABEL: func.func @move_reader
// CHECK-NEXT:    %[[T:.*]], %[[S:.*]] = fwd.fused elementwise_chains covers [0, 2]
// CHECK:         }
// CHECK-NEXT:    %[[M:.*]] = fwd.matmul %[[T]]
// CHECK-NEXT:    func.return %[[S]], %[[M]]

// -----

// A user that cannot continue the run (the norm lies between: silu -> norm -> min) is passed over
// for the next user that can (issue 10, FWDSHIM_SEED=3433607886: "silu -> min left unfused").
func.func @skip_a_user_that_cannot_continue(%a: tensor<32xf32>, %b: tensor<32xf32>) -> (tensor<32xf32>, tensor<32xf32>) {
  %s = fwd.silu %a : tensor<32xf32> -> tensor<32xf32>
  %n = fwd.rms_norm %s eps 1.0e-05 : tensor<32xf32> -> tensor<32xf32>
  %m = fwd.elementwise min %n, %s : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  %k = fwd.elementwise min %s, %b : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  func.return %m, %k : tensor<32xf32>, tensor<32xf32>
}

// CHECK-LABEL: func.func @skip_a_user_that_cannot_continue
// CHECK-NEXT:    %[[S:.*]], %[[K:.*]] = fwd.fused elementwise_chains covers [0, 3]
// CHECK-NEXT:    ^
// CHECK-NEXT:      %[[S1:.*]] = fwd.silu
// CHECK-NEXT:      %[[K1:.*]] = fwd.elementwise min %[[S1]]
// CHECK-NEXT:      fwd.yield %[[S1]], %[[K1]]
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[N:.*]] = fwd.rms_norm %[[S]]
// CHECK-NEXT:    %[[M:.*]] = fwd.elementwise min %[[N]], %[[S]]
// CHECK-NEXT:    func.return %[[M]], %[[K]]

// -----

// Negative: the only user reads the silu through the norm too; no chain forms.
func.func @no_user_can_continue(%a: tensor<32xf32>) -> tensor<32xf32> {
  %s = fwd.silu %a : tensor<32xf32> -> tensor<32xf32>
  %n = fwd.rms_norm %s eps 1.0e-05 : tensor<32xf32> -> tensor<32xf32>
  %m = fwd.elementwise min %n, %s : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  func.return %m : tensor<32xf32>
}

// CHECK-LABEL: func.func @no_user_can_continue
// CHECK-NOT:     fwd.fused
// CHECK:         func.return
