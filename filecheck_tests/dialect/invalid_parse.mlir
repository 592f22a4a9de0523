// Malformed `fwd` IR: each parse error names `file:line:col` of the offending token, shows the line, and
// says what was expected. (Without --parsing-diagnostics the driver prints the same and exits 1.)
// RUN: fwdshim-opt %s --split-input-file --parsing-diagnostics --verify-diagnostics | filecheck %s

%w = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576, q8_0>
// CHECK: invalid_parse.mlir:[[# @LINE - 1]]:54
// CHECK: weights have rank 2 or 3

// -----

%w = fwd.weight "blk.0.ffn_gate_exps.weight" : !fwd.weights<8x0x576, q8_0>
// CHECK: invalid_parse.mlir:[[# @LINE - 1]]:61
// CHECK: weights have positive dimensions

// -----

%w = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x-3, q8_0>
// CHECK: invalid_parse.mlir:[[# @LINE - 1]]:58
// CHECK: expected a dimension (a positive integer) after `x`

// -----

%w = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<q8_0>
// CHECK: invalid_parse.mlir:[[# @LINE - 1]]:54
// CHECK: expected the weights' dimensions (`NxK` or `ExNxK`)

// -----

%w = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q9_0>
// CHECK: invalid_parse.mlir:[[# @LINE - 1]]:63
// CHECK: Expected `f32`, `f16`, `q4_0`, {{.*}}`q8_0`{{.*}}

// -----

func.func @kind(%a: tensor<576xf32>, %b: tensor<576xf32>) -> tensor<576xf32> {
  %s = fwd.elementwise bogus %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:24
  // CHECK: unknown kind `bogus` (expected one of: add, sub, mul, div, max, min)
  func.return %s : tensor<576xf32>
}

// -----

func.func @format(%x: tensor<576xf32>) -> !fwd.qact<576, one_word> {
  %q = fwd.quantize %x three_words : tensor<576xf32> -> !fwd.qact<576, one_word>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:24
  // CHECK: unknown format `three_words` (expected one of: one_word, two_words)
  func.return %q : !fwd.qact<576, one_word>
}

// -----

func.func @gate(%x: tensor<576xf32>) -> tensor<576xf32> {
  %o = fwd.gated_delta relu %x : (tensor<576xf32>) -> tensor<576xf32>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:24
  // CHECK: unknown gate `relu` (expected one of: silu, sigmoid)
  func.return %o : tensor<576xf32>
}

// -----

func.func @moe_act(%x: tensor<576xf32>, %r: !fwd.weights<8x576, q8_0>, %g: !fwd.weights<8x1536x576, q8_0>, %u: !fwd.weights<8x1536x576, q8_0>, %d: !fwd.weights<8x576x1536, q8_0>) -> tensor<576xf32> {
  %m = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 act geglu scoring softmax : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:58
  // CHECK: unknown act `geglu` (expected one of: swiglu, swiglu_clamped)
  func.return %m : tensor<576xf32>
}

// -----

func.func @moe_scoring(%x: tensor<576xf32>, %r: !fwd.weights<8x576, q8_0>, %g: !fwd.weights<8x1536x576, q8_0>, %u: !fwd.weights<8x1536x576, q8_0>, %d: !fwd.weights<8x576x1536, q8_0>) -> tensor<576xf32> {
  %m = fwd.moe %x, %r, %g, %u, %d n_expert 8 top_k 2 act swiglu scoring topk : tensor<576xf32>, !fwd.weights<8x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x1536x576, q8_0>, !fwd.weights<8x576x1536, q8_0> -> tensor<576xf32>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:73
  // CHECK: unknown scoring `topk` (expected one of: softmax, sigmoid)
  func.return %m : tensor<576xf32>
}

// -----

func.func @access(%x: tensor<576xf32>) -> tensor<576xf32> {
  %s = fwd.silu %x access [#fwd.access<diagonal>] : tensor<576xf32> -> tensor<576xf32>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:40
  // CHECK: Expected `whole`, `strided`, `rows`, or `part`.
  func.return %s : tensor<576xf32>
}

// -----

func.func @qact(%x: tensor<576xf32>) -> !fwd.qact<576, one_byte> {
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:56
  // CHECK: Expected `one_word`, or `two_words`.
  func.return %x : !fwd.qact<576, one_byte>
}

// -----

func.func @unknown_op(%x: tensor<576xf32>) -> tensor<576xf32> {
  %s = fwd.bogus %x : tensor<576xf32> -> tensor<576xf32>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:8: error: Operation fwd.bogus is not registered
  // CHECK-NEXT: %s = fwd.bogus %x : tensor<576xf32> -> tensor<576xf32>
  // CHECK-NEXT: ^^^^^^^^^
  func.return %s : tensor<576xf32>
}

// -----

func.func @unknown_op_generic(%x: tensor<576xf32>) -> tensor<576xf32> {
  %s = "fwd.bogus"(%x) : (tensor<576xf32>) -> tensor<576xf32>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:8: error: Operation fwd.bogus is not registered
  // CHECK-NEXT: %s = "fwd.bogus"(%x) : (tensor<576xf32>) -> tensor<576xf32>
  // CHECK-NEXT: ^^^^^^^^^^^
  func.return %s : tensor<576xf32>
}

// -----

func.func @missing_property(%q: tensor<576xf32>, %a: tensor<2x32xf32>) -> tensor<576xf32> {
  %r = fwd.rope %q, %a hd 64 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:30
  // CHECK: Expected 'half'
  func.return %r : tensor<576xf32>
}

// -----

func.func @property_value(%q: tensor<576xf32>, %a: tensor<2x32xf32>) -> tensor<576xf32> {
  %r = fwd.rope %q, %a hd 1.5 half 32 rows 1 : tensor<576xf32>, tensor<2x32xf32> -> tensor<576xf32>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:27
  // CHECK: Expected integer literal
  func.return %r : tensor<576xf32>
}

// -----

func.func @fused_covers(%x: tensor<576xf32>) -> tensor<576xf32> {
  %f = fwd.fused elementwise_chains covers 0 ins(%x) : (tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>):
    %s = fwd.silu %a : tensor<576xf32> -> tensor<576xf32>
    fwd.yield %s : tensor<576xf32>
  }
  // CHECK: invalid_parse.mlir:[[# @LINE - 5]]:44
  // CHECK: '[' expected
  func.return %f : tensor<576xf32>
}

// -----

// A numeric block label (MLIR's `^0`) xDSL cannot name a block by: located, where it was a Python tuple.
func.func @numeric_label(%x: tensor<64xf32>) -> tensor<64xf32> {
  %h = fwd.fused elementwise_chains covers [0, 1] ins(%x) : (tensor<64xf32>) -> tensor<64xf32> {
  ^0(%a: tensor<64xf32>):
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:3
  // CHECK: block label ^0: a block name here starts with a letter
    %s = fwd.silu %a : tensor<64xf32> -> tensor<64xf32>
    %t = fwd.silu %s : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %t : tensor<64xf32>
  }
  func.return %h : tensor<64xf32>
}

// -----

func.func @numeric_successor() {
  cf.br ^1
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:9
  // CHECK: block label ^1: a block name here starts with a letter
^1:
  func.return
}

// -----

// String escapes that make bytes which are not UTF-8 text: an error at the literal (xDSL kept bytes,
// which its verifier called `"blk\FF\FE" should be of base attribute string`).
%w = fwd.weight "blk\FF\FE" : tensor<576xf32>
// CHECK: invalid_parse.mlir:[[# @LINE - 1]]:17
// CHECK: "blk\FF\FE" is not UTF-8 text: a fwd op's names (weights, caches) are UTF-8 strings

// -----

func.func @into_not_utf8(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.silu %x into "k\c3" : tensor<64xf32> -> tensor<64xf32>
  // CHECK: invalid_parse.mlir:[[# @LINE - 1]]:25
  // CHECK: "k\C3" is not UTF-8 text
  func.return %y : tensor<64xf32>
}
