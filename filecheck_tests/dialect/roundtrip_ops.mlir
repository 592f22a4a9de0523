// Every computing op of the `fwd` dialect the forward knows, with its optional fields present and absent:
// printed in the custom form, re-parsed, and through the generic form and back.
// RUN: fwdshim-opt %s | filecheck %s
// RUN: fwdshim-opt %s | fwdshim-opt | filecheck %s
// RUN: fwdshim-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: fwdshim-opt %s --print-op-generic | fwdshim-opt | filecheck %s
// RUN: fwdshim-opt %s --print-op-generic | fwdshim-opt --print-op-generic | filecheck %s --check-prefix=GENERIC
// Stock xdsl-opt sees the dialect through the `xdsl.universe` entry point:
// RUN: xdsl-opt %s | filecheck %s

func.func @weight() {
  %w0 = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>
  %w1 = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<8x1536x576, q8_0>
  %w2 = fwd.weight "blk.0.attn_norm.weight" : tensor<576xf32>
  %w3 = fwd.weight "token_embd.weight" : !fwd.weights<49152x576, f16>
  %w4 = fwd.weight "blk.3.ffn_down.weight" : !fwd.weights<576x1536, q4_k>
  %w5 = fwd.weight "output.weight" : !fwd.weights<49152x576, bf16>
  "test.op"(%w0, %w1, %w2, %w3, %w4, %w5) : (!fwd.weights<576x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, tensor<576xf32>, !fwd.weights<49152x576, f16>, !fwd.weights<576x1536, q4_k>, !fwd.weights<49152x576, bf16>) -> ()
  func.return
}

// CHECK-LABEL: func.func @weight() {
// CHECK-NEXT: %w0 = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>
// CHECK-NEXT: %w1 = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<8x1536x576, q8_0>
// CHECK-NEXT: %w2 = fwd.weight "blk.0.attn_norm.weight" : tensor<576xf32>
// CHECK-NEXT: %w3 = fwd.weight "token_embd.weight" : !fwd.weights<49152x576, f16>
// CHECK-NEXT: %w4 = fwd.weight "blk.3.ffn_down.weight" : !fwd.weights<576x1536, q4_k>
// CHECK-NEXT: %w5 = fwd.weight "output.weight" : !fwd.weights<49152x576, bf16>
// CHECK-NEXT: "test.op"(%w0, %w1, %w2, %w3, %w4, %w5) : (!fwd.weights<576x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, tensor<576xf32>, !fwd.weights<49152x576, f16>, !fwd.weights<576x1536, q4_k>, !fwd.weights<49152x576, bf16>) -> ()
// CHECK-NEXT: func.return
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "weight", function_type = () -> ()}> ({
// GENERIC-NEXT: %w0 = "fwd.weight"() <{name = "blk.0.attn_q.weight"}> : () -> !fwd.weights<576x576, q8_0>
// GENERIC-NEXT: %w1 = "fwd.weight"() <{name = "blk.0.ffn_gate_exps.weight"}> : () -> !fwd.weights<8x1536x576, q8_0>
// GENERIC-NEXT: %w2 = "fwd.weight"() <{name = "blk.0.attn_norm.weight"}> : () -> tensor<576xf32>
// GENERIC-NEXT: %w3 = "fwd.weight"() <{name = "token_embd.weight"}> : () -> !fwd.weights<49152x576, f16>
// GENERIC-NEXT: %w4 = "fwd.weight"() <{name = "blk.3.ffn_down.weight"}> : () -> !fwd.weights<576x1536, q4_k>
// GENERIC-NEXT: %w5 = "fwd.weight"() <{name = "output.weight"}> : () -> !fwd.weights<49152x576, bf16>
// GENERIC-NEXT: "test.op"(%w0, %w1, %w2, %w3, %w4, %w5) : (!fwd.weights<576x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, tensor<576xf32>, !fwd.weights<49152x576, f16>, !fwd.weights<576x1536, q4_k>, !fwd.weights<49152x576, bf16>) -> ()
// GENERIC-NEXT: "func.return"() : () -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @matmul(%x: tensor<576xf32>, %xs: tensor<4x576xf32>) -> (tensor<192xf32>, tensor<4x192xf32>, tensor<192xf32>) {
  %w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
  %y = fwd.matmul %x, %w : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  %ys = fwd.matmul %xs, %w : tensor<4x576xf32>, !fwd.weights<192x576, q8_0> -> tensor<4x192xf32>
  %yi = fwd.matmul %x, %w access [#fwd.access<strided>, #fwd.access<whole>] into "k_cache" : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
  func.return %y, %ys, %yi : tensor<192xf32>, tensor<4x192xf32>, tensor<192xf32>
}

// CHECK-LABEL: func.func @matmul(%x: tensor<576xf32>, %xs: tensor<4x576xf32>) -> (tensor<192xf32>, tensor<4x192xf32>, tensor<192xf32>) {
// CHECK-NEXT: %w = fwd.weight "blk.0.attn_k.weight" : !fwd.weights<192x576, q8_0>
// CHECK-NEXT: %y = fwd.matmul %x, %w : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
// CHECK-NEXT: %ys = fwd.matmul %xs, %w : tensor<4x576xf32>, !fwd.weights<192x576, q8_0> -> tensor<4x192xf32>
// CHECK-NEXT: %yi = fwd.matmul %x, %w access [#fwd.access<strided>, #fwd.access<whole>] into "k_cache" : tensor<576xf32>, !fwd.weights<192x576, q8_0> -> tensor<192xf32>
// CHECK-NEXT: func.return %y, %ys, %yi : tensor<192xf32>, tensor<4x192xf32>, tensor<192xf32>
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "matmul", function_type = (tensor<576xf32>, tensor<4x576xf32>) -> (tensor<192xf32>, tensor<4x192xf32>, tensor<192xf32>)}> ({
// GENERIC-NEXT: ^bb0(%x: tensor<576xf32>, %xs: tensor<4x576xf32>):
// GENERIC-NEXT: %w = "fwd.weight"() <{name = "blk.0.attn_k.weight"}> : () -> !fwd.weights<192x576, q8_0>
// GENERIC-NEXT: %y = "fwd.matmul"(%x, %w) : (tensor<576xf32>, !fwd.weights<192x576, q8_0>) -> tensor<192xf32>
// GENERIC-NEXT: %ys = "fwd.matmul"(%xs, %w) : (tensor<4x576xf32>, !fwd.weights<192x576, q8_0>) -> tensor<4x192xf32>
// GENERIC-NEXT: %yi = "fwd.matmul"(%x, %w) <{access = [#fwd.access<strided>, #fwd.access<whole>], into = "k_cache"}> : (tensor<576xf32>, !fwd.weights<192x576, q8_0>) -> tensor<192xf32>
// GENERIC-NEXT: "func.return"(%y, %ys, %yi) : (tensor<192xf32>, tensor<4x192xf32>, tensor<192xf32>) -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @silu_transpose(%x: tensor<1536xf32>, %m: tensor<4x8xf32>) -> (tensor<1536xf32>, tensor<8x4xf32>) {
  %s = fwd.silu %x : tensor<1536xf32> -> tensor<1536xf32>
  %t = fwd.transpose %m access [#fwd.access<part>] : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %s, %t : tensor<1536xf32>, tensor<8x4xf32>
}

// CHECK-LABEL: func.func @silu_transpose(%x: tensor<1536xf32>, %m: tensor<4x8xf32>) -> (tensor<1536xf32>, tensor<8x4xf32>) {
// CHECK-NEXT: %s = fwd.silu %x : tensor<1536xf32> -> tensor<1536xf32>
// CHECK-NEXT: %t = fwd.transpose %m access [#fwd.access<part>] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT: func.return %s, %t : tensor<1536xf32>, tensor<8x4xf32>
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "silu_transpose", function_type = (tensor<1536xf32>, tensor<4x8xf32>) -> (tensor<1536xf32>, tensor<8x4xf32>)}> ({
// GENERIC-NEXT: ^bb0(%x: tensor<1536xf32>, %m: tensor<4x8xf32>):
// GENERIC-NEXT: %s = "fwd.silu"(%x) : (tensor<1536xf32>) -> tensor<1536xf32>
// GENERIC-NEXT: %t = "fwd.transpose"(%m) <{access = [#fwd.access<part>]}> : (tensor<4x8xf32>) -> tensor<8x4xf32>
// GENERIC-NEXT: "func.return"(%s, %t) : (tensor<1536xf32>, tensor<8x4xf32>) -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @elementwise(%a: tensor<576xf32>, %b: tensor<576xf32>, %rows: tensor<9x64xf32>, %row: tensor<64xf32>) {
  %add = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %sub = fwd.elementwise sub %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %mul = fwd.elementwise mul %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %div = fwd.elementwise div %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %max = fwd.elementwise max %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %min = fwd.elementwise min %a, %b into "residual" : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %bc = fwd.elementwise mul %rows, %row row : tensor<9x64xf32>, tensor<64xf32> -> tensor<9x64xf32>
  "test.op"(%add, %sub, %mul, %div, %max, %min, %bc) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>) -> ()
  func.return
}

// CHECK-LABEL: func.func @elementwise(%a: tensor<576xf32>, %b: tensor<576xf32>, %rows: tensor<9x64xf32>, %row: tensor<64xf32>) {
// CHECK-NEXT: %add = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %sub = fwd.elementwise sub %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %mul = fwd.elementwise mul %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %div = fwd.elementwise div %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %max = fwd.elementwise max %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %min = fwd.elementwise min %a, %b into "residual" : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %bc = fwd.elementwise mul %rows, %row row : tensor<9x64xf32>, tensor<64xf32> -> tensor<9x64xf32>
// CHECK-NEXT: "test.op"(%add, %sub, %mul, %div, %max, %min, %bc) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>) -> ()
// CHECK-NEXT: func.return
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "elementwise", function_type = (tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<64xf32>) -> ()}> ({
// GENERIC-NEXT: ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>, %rows: tensor<9x64xf32>, %row: tensor<64xf32>):
// GENERIC-NEXT: %add = "fwd.elementwise"(%a, %b) <{kind = #fwd.elementwise_kind<add>}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %sub = "fwd.elementwise"(%a, %b) <{kind = #fwd.elementwise_kind<sub>}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %mul = "fwd.elementwise"(%a, %b) <{kind = #fwd.elementwise_kind<mul>}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %div = "fwd.elementwise"(%a, %b) <{kind = #fwd.elementwise_kind<div>}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %max = "fwd.elementwise"(%a, %b) <{kind = #fwd.elementwise_kind<max>}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %min = "fwd.elementwise"(%a, %b) <{kind = #fwd.elementwise_kind<min>, into = "residual"}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %bc = "fwd.elementwise"(%rows, %row) <{kind = #fwd.elementwise_kind<mul>, row}> : (tensor<9x64xf32>, tensor<64xf32>) -> tensor<9x64xf32>
// GENERIC-NEXT: "test.op"(%add, %sub, %mul, %div, %max, %min, %bc) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>) -> ()
// GENERIC-NEXT: "func.return"() : () -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @row_reductions(%x: tensor<576xf32>, %w: tensor<576xf32>, %r: tensor<576xf32>, %b: tensor<576xf32>, %heads: tensor<9x64xf32>, %hw: tensor<64xf32>) {
  %n0 = fwd.rms_norm %x : tensor<576xf32> -> tensor<576xf32>
  %n1 = fwd.rms_norm %x eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %n2 = fwd.rms_norm %x weight(%w : tensor<576xf32>) eps 1.0e-06 : tensor<576xf32> -> tensor<576xf32>
  %n3 = fwd.rms_norm %x residual(%r : tensor<576xf32>) : tensor<576xf32> -> tensor<576xf32>
  %n4 = fwd.rms_norm %x weight(%w : tensor<576xf32>) residual(%r : tensor<576xf32>) bias(%b : tensor<576xf32>) eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %n5 = fwd.rms_norm %heads weight(%hw : tensor<64xf32>) eps 1.0e-06 : tensor<9x64xf32> -> tensor<9x64xf32>
  %s0 = fwd.softmax %x : tensor<576xf32> -> tensor<576xf32>
  %s1 = fwd.softmax %heads access [#fwd.access<rows>] : tensor<9x64xf32> -> tensor<9x64xf32>
  %l0 = fwd.layer_norm %x weight(%w : tensor<576xf32>) bias(%b : tensor<576xf32>) eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
  %l1 = fwd.layer_norm %x : tensor<576xf32> -> tensor<576xf32>
  "test.op"(%n0, %n1, %n2, %n3, %n4, %n5, %s0, %s1, %l0, %l1) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<576xf32>, tensor<576xf32>) -> ()
  func.return
}

// CHECK-LABEL: func.func @row_reductions(%x: tensor<576xf32>, %w: tensor<576xf32>, %r: tensor<576xf32>, %b: tensor<576xf32>, %heads: tensor<9x64xf32>, %hw: tensor<64xf32>) {
// CHECK-NEXT: %n0 = fwd.rms_norm %x : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %n1 = fwd.rms_norm %x eps 1.000000e-05 : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %n2 = fwd.rms_norm %x weight(%w : tensor<576xf32>) eps 1.000000e-06 : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %n3 = fwd.rms_norm %x residual(%r : tensor<576xf32>) : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %n4 = fwd.rms_norm %x weight(%w : tensor<576xf32>) residual(%r : tensor<576xf32>) bias(%b : tensor<576xf32>) eps 1.000000e-05 : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %n5 = fwd.rms_norm %heads weight(%hw : tensor<64xf32>) eps 1.000000e-06 : tensor<9x64xf32> -> tensor<9x64xf32>
// CHECK-NEXT: %s0 = fwd.softmax %x : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %s1 = fwd.softmax %heads access [#fwd.access<rows>] : tensor<9x64xf32> -> tensor<9x64xf32>
// CHECK-NEXT: %l0 = fwd.layer_norm %x weight(%w : tensor<576xf32>) bias(%b : tensor<576xf32>) eps 1.000000e-05 : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %l1 = fwd.layer_norm %x : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: "test.op"(%n0, %n1, %n2, %n3, %n4, %n5, %s0, %s1, %l0, %l1) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<576xf32>, tensor<576xf32>) -> ()
// CHECK-NEXT: func.return
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "row_reductions", function_type = (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<64xf32>) -> ()}> ({
// GENERIC-NEXT: ^bb0(%x: tensor<576xf32>, %w: tensor<576xf32>, %r: tensor<576xf32>, %b: tensor<576xf32>, %heads: tensor<9x64xf32>, %hw: tensor<64xf32>):
// GENERIC-NEXT: %n0 = "fwd.rms_norm"(%x) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>}> : (tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %n1 = "fwd.rms_norm"(%x) <{eps = 1.000000e-05 : f32, operandSegmentSizes = array<i32: 1, 0, 0, 0>}> : (tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %n2 = "fwd.rms_norm"(%x, %w) <{eps = 1.000000e-06 : f32, operandSegmentSizes = array<i32: 1, 1, 0, 0>}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %n3 = "fwd.rms_norm"(%x, %r) <{operandSegmentSizes = array<i32: 1, 0, 1, 0>}> : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %n4 = "fwd.rms_norm"(%x, %w, %r, %b) <{eps = 1.000000e-05 : f32, operandSegmentSizes = array<i32: 1, 1, 1, 1>}> : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %n5 = "fwd.rms_norm"(%heads, %hw) <{eps = 1.000000e-06 : f32, operandSegmentSizes = array<i32: 1, 1, 0, 0>}> : (tensor<9x64xf32>, tensor<64xf32>) -> tensor<9x64xf32>
// GENERIC-NEXT: %s0 = "fwd.softmax"(%x) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>}> : (tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %s1 = "fwd.softmax"(%heads) <{access = [#fwd.access<rows>], operandSegmentSizes = array<i32: 1, 0, 0, 0>}> : (tensor<9x64xf32>) -> tensor<9x64xf32>
// GENERIC-NEXT: %l0 = "fwd.layer_norm"(%x, %w, %b) <{eps = 1.000000e-05 : f32, operandSegmentSizes = array<i32: 1, 1, 0, 1>}> : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %l1 = "fwd.layer_norm"(%x) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>}> : (tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: "test.op"(%n0, %n1, %n2, %n3, %n4, %n5, %s0, %s1, %l0, %l1) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<576xf32>, tensor<9x64xf32>, tensor<576xf32>, tensor<576xf32>) -> ()
// GENERIC-NEXT: "func.return"() : () -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @rope(%q: tensor<576xf32>, %k: tensor<3x64xf32>, %angles: tensor<2x32xf32>, %table: tensor<4096x64xf32>) -> (tensor<576xf32>, tensor<3x64xf32>) {
  %qr = fwd.rope %q, %angles hd 64 half 32 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
  %kr = fwd.rope %k, %table hd 64 half 32 rows 1 from 17 into "k_cache" : tensor<3x64xf32>, tensor<4096x64xf32> -> tensor<3x64xf32>
  func.return %qr, %kr : tensor<576xf32>, tensor<3x64xf32>
}

// CHECK-LABEL: func.func @rope(%q: tensor<576xf32>, %k: tensor<3x64xf32>, %angles: tensor<2x32xf32>, %table: tensor<4096x64xf32>) -> (tensor<576xf32>, tensor<3x64xf32>) {
// CHECK-NEXT: %qr = fwd.rope %q, %angles hd 64 half 32 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
// CHECK-NEXT: %kr = fwd.rope %k, %table hd 64 half 32 rows 1 from 17 into "k_cache" : tensor<3x64xf32>, tensor<4096x64xf32> -> tensor<3x64xf32>
// CHECK-NEXT: func.return %qr, %kr : tensor<576xf32>, tensor<3x64xf32>
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "rope", function_type = (tensor<576xf32>, tensor<3x64xf32>, tensor<2x32xf32>, tensor<4096x64xf32>) -> (tensor<576xf32>, tensor<3x64xf32>)}> ({
// GENERIC-NEXT: ^bb0(%q: tensor<576xf32>, %k: tensor<3x64xf32>, %angles: tensor<2x32xf32>, %table: tensor<4096x64xf32>):
// GENERIC-NEXT: %qr = "fwd.rope"(%q, %angles) <{hd = 64 : i64, half = 32 : i64, rows = 1 : i64}> : (tensor<576xf32>, tensor<2x32xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %kr = "fwd.rope"(%k, %table) <{hd = 64 : i64, half = 32 : i64, rows = 1 : i64, from = 17 : i64, into = "k_cache"}> : (tensor<3x64xf32>, tensor<4096x64xf32>) -> tensor<3x64xf32>
// GENERIC-NEXT: "func.return"(%qr, %kr) : (tensor<576xf32>, tensor<3x64xf32>) -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @attention(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<4095x192xf32>, %vc: tensor<4095x192xf32>, %sinks: tensor<9xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  %a0 = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
  %a1 = fwd.attention %q, %k, %v, %kc, %vc sinks(%sinks : tensor<9xf32>) h 9 kv 3 hd 64 vd 64 l 4096 rows 1 scale 0.125 softcap 50.0 pos 4000 window 128 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
  func.return %a0, %a1 : tensor<576xf32>, tensor<576xf32>
}

// CHECK-LABEL: func.func @attention(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<4095x192xf32>, %vc: tensor<4095x192xf32>, %sinks: tensor<9xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
// CHECK-NEXT: %a0 = fwd.attention %q, %k, %v, %kc, %vc h 9 kv 3 hd 64 vd 64 l 4096 rows 1 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
// CHECK-NEXT: %a1 = fwd.attention %q, %k, %v, %kc, %vc sinks(%sinks : tensor<9xf32>) h 9 kv 3 hd 64 vd 64 l 4096 rows 1 scale 1.250000e-01 softcap 5.000000e+01 pos 4000 window 128 : tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32> -> tensor<576xf32>
// CHECK-NEXT: func.return %a0, %a1 : tensor<576xf32>, tensor<576xf32>
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "attention", function_type = (tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32>, tensor<9xf32>) -> (tensor<576xf32>, tensor<576xf32>)}> ({
// GENERIC-NEXT: ^bb0(%q: tensor<576xf32>, %k: tensor<192xf32>, %v: tensor<192xf32>, %kc: tensor<4095x192xf32>, %vc: tensor<4095x192xf32>, %sinks: tensor<9xf32>):
// GENERIC-NEXT: %a0 = "fwd.attention"(%q, %k, %v, %kc, %vc) <{h = 9 : i64, kv = 3 : i64, hd = 64 : i64, vd = 64 : i64, l = 4096 : i64, rows = 1 : i64}> : (tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %a1 = "fwd.attention"(%q, %k, %v, %kc, %vc, %sinks) <{h = 9 : i64, kv = 3 : i64, hd = 64 : i64, vd = 64 : i64, l = 4096 : i64, rows = 1 : i64, scale = 1.250000e-01 : f32, softcap = 5.000000e+01 : f32, pos = 4000 : i64, window = 128 : i64}> : (tensor<576xf32>, tensor<192xf32>, tensor<192xf32>, tensor<4095x192xf32>, tensor<4095x192xf32>, tensor<9xf32>) -> tensor<576xf32>
// GENERIC-NEXT: "func.return"(%a0, %a1) : (tensor<576xf32>, tensor<576xf32>) -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @gated_delta_softcap(%q: tensor<128xf32>, %k: tensor<128xf32>, %v: tensor<128xf32>, %g: tensor<1xf32>, %s: tensor<128x128xf32>, %logits: tensor<49152xf32>) {
  %o0, %s0 = fwd.gated_delta silu %q, %k, %v, %g, %s : (tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<1xf32>, tensor<128x128xf32>) -> (tensor<128xf32>, tensor<128x128xf32>)
  %o1 = fwd.gated_delta sigmoid %q, %g access [#fwd.access<whole>, #fwd.access<part>] : (tensor<128xf32>, tensor<1xf32>) -> tensor<128xf32>
  %c = fwd.softcap %logits cap 30.0 : tensor<49152xf32> -> tensor<49152xf32>
  "test.op"(%o0, %s0, %o1, %c) : (tensor<128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<49152xf32>) -> ()
  func.return
}

// CHECK-LABEL: func.func @gated_delta_softcap(%q: tensor<128xf32>, %k: tensor<128xf32>, %v: tensor<128xf32>, %g: tensor<1xf32>, %s: tensor<128x128xf32>, %logits: tensor<49152xf32>) {
// CHECK-NEXT: %o0, %s0 = fwd.gated_delta silu %q, %k, %v, %g, %s : (tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<1xf32>, tensor<128x128xf32>) -> (tensor<128xf32>, tensor<128x128xf32>)
// CHECK-NEXT: %o1 = fwd.gated_delta sigmoid %q, %g access [#fwd.access<whole>, #fwd.access<part>] : (tensor<128xf32>, tensor<1xf32>) -> tensor<128xf32>
// CHECK-NEXT: %c = fwd.softcap %logits cap 3.000000e+01 : tensor<49152xf32> -> tensor<49152xf32>
// CHECK-NEXT: "test.op"(%o0, %s0, %o1, %c) : (tensor<128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<49152xf32>) -> ()
// CHECK-NEXT: func.return
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "gated_delta_softcap", function_type = (tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<1xf32>, tensor<128x128xf32>, tensor<49152xf32>) -> ()}> ({
// GENERIC-NEXT: ^bb0(%q: tensor<128xf32>, %k: tensor<128xf32>, %v: tensor<128xf32>, %g: tensor<1xf32>, %s: tensor<128x128xf32>, %logits: tensor<49152xf32>):
// GENERIC-NEXT: %o0, %s0 = "fwd.gated_delta"(%q, %k, %v, %g, %s) <{gate = #fwd.gate<silu>}> : (tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<1xf32>, tensor<128x128xf32>) -> (tensor<128xf32>, tensor<128x128xf32>)
// GENERIC-NEXT: %o1 = "fwd.gated_delta"(%q, %g) <{gate = #fwd.gate<sigmoid>, access = [#fwd.access<whole>, #fwd.access<part>]}> : (tensor<128xf32>, tensor<1xf32>) -> tensor<128xf32>
// GENERIC-NEXT: %c = "fwd.softcap"(%logits) <{cap = 3.000000e+01 : f32}> : (tensor<49152xf32>) -> tensor<49152xf32>
// GENERIC-NEXT: "test.op"(%o0, %s0, %o1, %c) : (tensor<128xf32>, tensor<128x128xf32>, tensor<128xf32>, tensor<49152xf32>) -> ()
// GENERIC-NEXT: "func.return"() : () -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @quantize_view(%x: tensor<576xf32>, %y: tensor<1536xf32>) {
  %q1 = fwd.quantize %x one_word : tensor<576xf32> -> !fwd.qact<576, one_word>
  %q2 = fwd.quantize %y two_words : tensor<1536xf32> -> !fwd.qact<1536, two_words>
  %v0 = fwd.view %x : tensor<576xf32> -> tensor<576xf32>
  %v1 = fwd.view %x offset 64 access [#fwd.access<strided>] : tensor<576xf32> -> tensor<9x64xf32>
  "test.op"(%q1, %q2, %v0, %v1) : (!fwd.qact<576, one_word>, !fwd.qact<1536, two_words>, tensor<576xf32>, tensor<9x64xf32>) -> ()
  func.return
}

// CHECK-LABEL: func.func @quantize_view(%x: tensor<576xf32>, %y: tensor<1536xf32>) {
// CHECK-NEXT: %q1 = fwd.quantize %x one_word : tensor<576xf32> -> !fwd.qact<576, one_word>
// CHECK-NEXT: %q2 = fwd.quantize %y two_words : tensor<1536xf32> -> !fwd.qact<1536, two_words>
// CHECK-NEXT: %v0 = fwd.view %x : tensor<576xf32> -> tensor<576xf32>
// CHECK-NEXT: %v1 = fwd.view %x offset 64 access [#fwd.access<strided>] : tensor<576xf32> -> tensor<9x64xf32>
// CHECK-NEXT: "test.op"(%q1, %q2, %v0, %v1) : (!fwd.qact<576, one_word>, !fwd.qact<1536, two_words>, tensor<576xf32>, tensor<9x64xf32>) -> ()
// CHECK-NEXT: func.return
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "quantize_view", function_type = (tensor<576xf32>, tensor<1536xf32>) -> ()}> ({
// GENERIC-NEXT: ^bb0(%x: tensor<576xf32>, %y: tensor<1536xf32>):
// GENERIC-NEXT: %q1 = "fwd.quantize"(%x) <{format = #fwd.qformat<one_word>}> : (tensor<576xf32>) -> !fwd.qact<576, one_word>
// GENERIC-NEXT: %q2 = "fwd.quantize"(%y) <{format = #fwd.qformat<two_words>}> : (tensor<1536xf32>) -> !fwd.qact<1536, two_words>
// GENERIC-NEXT: %v0 = "fwd.view"(%x) : (tensor<576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %v1 = "fwd.view"(%x) <{offset = 64 : i64, access = [#fwd.access<strided>]}> : (tensor<576xf32>) -> tensor<9x64xf32>
// GENERIC-NEXT: "test.op"(%q1, %q2, %v0, %v1) : (!fwd.qact<576, one_word>, !fwd.qact<1536, two_words>, tensor<576xf32>, tensor<9x64xf32>) -> ()
// GENERIC-NEXT: "func.return"() : () -> ()
// GENERIC-NEXT: }) : () -> ()

func.func @moe(%x: tensor<576xf32>, %rb: tensor<8xf32>, %sb: tensor<8xf32>, %gb: tensor<8x1536xf32>, %ub: tensor<8x1536xf32>, %db: tensor<8x576xf32>) -> (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) {
  %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<8x576, q8_0>
  %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<8x1536x576, q8_0>
  %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<8x1536x576, q8_0>
  %d = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<8x576x1536, q8_0>
  %m0 = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  %m1 = fwd.moe %x, %r, %g, %u, %d router_bias(%rb : tensor<8xf32>) selection_bias(%sb : tensor<8xf32>) gate_bias(%gb : tensor<8x1536xf32>) up_bias(%ub : tensor<8x1536xf32>) down_bias(%db : tensor<8x576xf32>) n_expert 8 top_k 8 act swiglu_clamped scoring sigmoid groups 2 scale 2.5 weight_inputs : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  %m2 = fwd.moe %x, %r, %g, %u, %d selection_bias(%sb : tensor<8xf32>) n_expert 8 top_k 1 act swiglu scoring softmax into "moe_out" : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  func.return %m0, %m1, %m2 : tensor<576xf32>, tensor<576xf32>, tensor<576xf32>
}

// CHECK-LABEL: func.func @moe(%x: tensor<576xf32>, %rb: tensor<8xf32>, %sb: tensor<8xf32>, %gb: tensor<8x1536xf32>, %ub: tensor<8x1536xf32>, %db: tensor<8x576xf32>) -> (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) {
// CHECK-NEXT: %r = fwd.weight "blk.0.ffn_gate_inp.weight" : !fwd.weights<8x576, q8_0>
// CHECK-NEXT: %g = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<8x1536x576, q8_0>
// CHECK-NEXT: %u = fwd.weight "blk.0.ffn_up_exps.weight" : !fwd.weights<8x1536x576, q8_0>
// CHECK-NEXT: %d = fwd.weight "blk.0.ffn_down_exps.weight" : !fwd.weights<8x576x1536, q8_0>
// CHECK-NEXT: %m0 = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 renormalize act swiglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
// CHECK-NEXT: %m1 = fwd.moe %x, %r, %g, %u, %d router_bias(%rb : tensor<8xf32>) selection_bias(%sb : tensor<8xf32>) gate_bias(%gb : tensor<8x1536xf32>) up_bias(%ub : tensor<8x1536xf32>) down_bias(%db : tensor<8x576xf32>) n_expert 8 top_k 8 act swiglu_clamped scoring sigmoid groups 2 scale 2.500000e+00 weight_inputs : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
// CHECK-NEXT: %m2 = fwd.moe %x, %r, %g, %u, %d selection_bias(%sb : tensor<8xf32>) n_expert 8 top_k 1 act swiglu scoring softmax into "moe_out" : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
// CHECK-NEXT: func.return %m0, %m1, %m2 : tensor<576xf32>, tensor<576xf32>, tensor<576xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }

// GENERIC-LABEL: "func.func"() <{sym_name = "moe", function_type = (tensor<576xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x1536xf32>, tensor<8x1536xf32>, tensor<8x576xf32>) -> (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>)}> ({
// GENERIC-NEXT: ^bb0(%x: tensor<576xf32>, %rb: tensor<8xf32>, %sb: tensor<8xf32>, %gb: tensor<8x1536xf32>, %ub: tensor<8x1536xf32>, %db: tensor<8x576xf32>):
// GENERIC-NEXT: %r = "fwd.weight"() <{name = "blk.0.ffn_gate_inp.weight"}> : () -> !fwd.weights<8x576, q8_0>
// GENERIC-NEXT: %g = "fwd.weight"() <{name = "blk.0.ffn_gate_exps.weight"}> : () -> !fwd.weights<8x1536x576, q8_0>
// GENERIC-NEXT: %u = "fwd.weight"() <{name = "blk.0.ffn_up_exps.weight"}> : () -> !fwd.weights<8x1536x576, q8_0>
// GENERIC-NEXT: %d = "fwd.weight"() <{name = "blk.0.ffn_down_exps.weight"}> : () -> !fwd.weights<8x576x1536, q8_0>
// GENERIC-NEXT: %m0 = "fwd.moe"(%x, %r, %g, %u, %d) <{n_expert = 8 : i64, top_k = 2 : i64, renormalize, act = #fwd.moe_act<swiglu>, scoring = #fwd.scoring<softmax>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0>}> : (tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0>) -> tensor<576xf32>
// GENERIC-NEXT: %m1 = "fwd.moe"(%x, %r, %g, %u, %d, %rb, %sb, %gb, %ub, %db) <{n_expert = 8 : i64, top_k = 8 : i64, act = #fwd.moe_act<swiglu_clamped>, scoring = #fwd.scoring<sigmoid>, groups = 2 : i64, scale = 2.500000e+00 : f32, weight_inputs, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1, 1>}> : (tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0>, tensor<8xf32>, tensor<8xf32>, tensor<8x1536xf32>, tensor<8x1536xf32>, tensor<8x576xf32>) -> tensor<576xf32>
// GENERIC-NEXT: %m2 = "fwd.moe"(%x, %r, %g, %u, %d, %sb) <{n_expert = 8 : i64, top_k = 1 : i64, act = #fwd.moe_act<swiglu>, scoring = #fwd.scoring<softmax>, into = "moe_out", operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 1, 0, 0, 0>}> : (tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0>, tensor<8xf32>) -> tensor<576xf32>
// GENERIC-NEXT: "func.return"(%m0, %m1, %m2) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> ()
// GENERIC-NEXT: }) : () -> ()
// GENERIC-NEXT: }) : () -> ()
