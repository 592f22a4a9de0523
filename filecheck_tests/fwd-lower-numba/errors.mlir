// A stage the plan cannot lower is an error at its location (its source line, a caret), one per stage — never a silent skip.
// RUN: not fwdshim-opt %s -p 'fwd-legalize{mode=mark}' -t numba 2>&1 | filecheck %s --check-prefix=MARK
// RUN: not fwdshim-opt %s -p fwd-lower-numba 2>&1 | filecheck %s --check-prefix=PASS

// A soft-capped attention, marked refused by the legality pass (mode=mark), reaches the lowering.
func.func @capped(%q: tensor<64xf32>, %k: tensor<32xf32>, %v: tensor<32xf32>, %kc: tensor<7x32xf32>, %vc: tensor<7x32xf32>) -> tensor<64xf32> {
  %a = fwd.attention %q, %k, %v, %kc, %vc h 2 kv 1 hd 32 vd 32 l 8 rows 1 softcap 30.0 : tensor<64xf32>, tensor<32xf32>, tensor<32xf32>, tensor<7x32xf32>, tensor<7x32xf32> -> tensor<64xf32>
  func.return %a : tensor<64xf32>
}

// An op the forward has no kernel for, and a row-broadcast elementwise op: both reported.
func.func @two(%x: tensor<64xf32>, %r: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.relu %x : (tensor<64xf32>) -> tensor<64xf32>
  %w = fwd.elementwise add %y, %r row : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %w : tensor<64xf32>
}

// MARK:      errors.mlir:7:3: error: a soft-capped attention (`softcap C`) — its kernel caps no score (refused by fwd-legalize)
// MARK-NEXT: {{^}}  %a = fwd.attention %q, %k, %v, %kc, %vc h 2 kv 1 hd 32 vd 32 l 8 rows 1 softcap 30.0 :
// MARK-NEXT: {{^  \^$}}
// MARK-NEXT: errors.mlir:13:3: error: this lane has no kernel for the op (fwd.relu) (refused by fwd-legalize)
// MARK-NEXT: {{^}}  %y = fwd.relu %x :
// MARK-NEXT: {{^  \^$}}
// MARK-NEXT: errors.mlir:14:3: error: an elementwise op over a row combined with every row of a block — its kernel reads both at one index (refused by fwd-legalize)
// MARK-NEXT: {{^}}  %w = fwd.elementwise add %y, %r row :
// MARK-NEXT: {{^  \^$}}
// MARK-NOT:  launch plan

// PASS:      errors.mlir:7:3: error: a soft-capped attention (`softcap C`) — its kernel caps no score
// PASS-NEXT: {{^}}  %a = fwd.attention %q, %k, %v, %kc, %vc h 2 kv 1 hd 32 vd 32 l 8 rows 1 softcap 30.0 :
// PASS-NEXT: {{^  \^$}}
// PASS-NEXT: errors.mlir:13:3: error: this lane has no kernel for the op
// PASS-NEXT: {{^}}  %y = fwd.relu %x :
// PASS-NEXT: {{^  \^$}}
// PASS-NEXT: errors.mlir:14:3: error: an elementwise op over a row combined with every row of a block — its kernel reads both at one index
// PASS-NEXT: {{^}}  %w = fwd.elementwise add %y, %r row :
// PASS-NEXT: {{^  \^$}}
