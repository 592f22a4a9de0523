// RUN: not fwdshim-opt %s --split-input-file -p fwd-legalize 2>&1 | filecheck %s
// Every located error after parsing prints as a parse error does: `file:line:col: error: <reason>`, the
// source line, and a caret under the op's column (lines counted in the whole file, chunks or not).

// A refusal of the strict legality (the seed's reason names no op: the source line shows it).
func.func @refused(%x: tensor<64xf32>, %y: tensor<64xf32>) -> tensor<64xf32> {
  %z = fwd.gelu %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return %z : tensor<64xf32>
}

// -----

// A verify error of a parsed op, in a later chunk; its tab is kept under the caret's line.
func.func @unverified(%a: tensor<64xf32>, %b: tensor<32xf32>) -> tensor<64xf32> {
	%y = fwd.elementwise add %a, %b : tensor<64xf32>, tensor<32xf32> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}

// CHECK:      located_errors.mlir:7:3: error: this lane has no kernel for the op
// CHECK-NEXT: {{^  %z = fwd.gelu %x, %y : \(tensor<64xf32>, tensor<64xf32>\) -> tensor<64xf32>$}}
// CHECK-NEXT: {{^  \^$}}
// CHECK:      located_errors.mlir:15:2: error: elementwise operands and result agree in shape unless `row`
// CHECK-NEXT: {{^	%y = fwd.elementwise add %a, %b : tensor<64xf32>, tensor<32xf32> -> tensor<64xf32>$}}
// CHECK-NEXT: {{^	\^$}}
// CHECK-NOT:  Traceback
