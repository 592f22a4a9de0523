// Locations print (--print-debuginfo) and parse back the same: a written `loc(unknown)` stays unknown (the
// parser had put the parse position there, so print → parse changed it into the printed file's line:col);
// an op written without a location gets where its text starts; a written file location is kept.
// RUN: fwdshim-opt %s --print-debuginfo | filecheck %s
// RUN: fwdshim-opt %s --print-debuginfo | fwdshim-opt --print-debuginfo | filecheck %s
// RUN: fwdshim-opt %s --print-debuginfo --print-op-generic | fwdshim-opt --print-debuginfo | filecheck %s

// CHECK-LABEL: func.func @f(
// CHECK-SAME: %x: tensor<64xf32> loc(unknown)
func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  // CHECK-NEXT: %s = fwd.silu %x : tensor<64xf32> -> tensor<64xf32> loc(unknown)
  %s = fwd.silu %x : tensor<64xf32> -> tensor<64xf32> loc(unknown)
  // CHECK-NEXT: %t = fwd.silu %s : tensor<64xf32> -> tensor<64xf32> loc(unknown)
  %t = "fwd.silu"(%s) : (tensor<64xf32>) -> tensor<64xf32> loc(unknown)
  // The negative: no location written, the op's own position.
  // CHECK-NEXT: %u = fwd.silu %t : tensor<64xf32> -> tensor<64xf32> loc("{{.*}}roundtrip_locations.mlir":[[# @LINE + 1]]:3)
  %u = fwd.silu %t : tensor<64xf32> -> tensor<64xf32>
  // CHECK-NEXT: func.return %u : tensor<64xf32> loc("a.mlir":18:9)
  func.return %u : tensor<64xf32> loc("a.mlir":18:9)
// CHECK-NEXT: } loc(unknown)
} loc(unknown)
