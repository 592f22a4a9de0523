// Strings outside printable ASCII print as escapes (MLIR's form) and parse back as the same strings:
// print → parse → print is a fixed point, custom and generic.
// RUN: fwdshim-opt %s | fwdshim-opt | filecheck %s
// RUN: fwdshim-opt %s --print-op-generic | fwdshim-opt --print-op-generic | fwdshim-opt | filecheck %s

// CHECK-LABEL: func.func @"\C3\A9tape"
func.func @"étape"(%x: tensor<64xf32>) -> tensor<64xf32> {
  // CHECK-NEXT: %w = fwd.weight "blk.0.\C3\A9" : tensor<64xf32>
  %w = fwd.weight "blk.0.é" : tensor<64xf32>
  // CHECK-NEXT: %m = fwd.elementwise mul %x, %w into "\E5\B1\A4\F0\9F\A6\99" {note = "a \E2\80\94 b \22q\22 \\ \0A"} : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %m = fwd.elementwise mul %x, %w into "層🦙" {note = "a — b \"q\" \\ \0A"} : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %m : tensor<64xf32>
}
