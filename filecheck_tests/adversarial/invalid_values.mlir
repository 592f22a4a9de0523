// Structurally bad IR that used to verify (and then went to the kernels as "native"): weights read
// as activations, stages yielding weights or quantized activations, dynamic and unranked shapes, a
// rope's angle table of the wrong size, empty tensors (an empty cache is fine), negative covers, nested
// covers that disagree with their place, a negative eps. Each is a verify error at the op's
// `file:line:col`.
// RUN: fwdshim-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect | filecheck %s

func.func @silu_of_weights() -> tensor<576xf32> {
  %w = fwd.weight "w" : !fwd.weights<1x576, q8_0>
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.silu operand 0 is !fwd.weights<1x576, q8_0>: a stage reads weights only as a matmul's `w` or a mixture's matrices
  %s = fwd.silu %w : !fwd.weights<1x576, q8_0> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @matmul_of_weights() -> tensor<576xf32> {
  %w = fwd.weight "w" : !fwd.weights<576x576, q8_0>
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.matmul operand 0 is !fwd.weights<576x576, q8_0>: a stage reads weights only as a matmul's `w` or a mixture's matrices
  %s = fwd.matmul %w, %w : !fwd.weights<576x576, q8_0>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @elementwise_of_weights(%x: tensor<576xf32>) -> tensor<576xf32> {
  %w = fwd.weight "w" : !fwd.weights<1x576, f32>
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.elementwise operand 1 is !fwd.weights<1x576, f32>: a stage reads weights only as a matmul's `w` or a mixture's matrices
  %s = "fwd.elementwise"(%x, %w) <{kind = #fwd.elementwise_kind<mul>}> : (tensor<576xf32>, !fwd.weights<1x576, f32>) -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @norm_weight_of_weights(%x: tensor<576xf32>) -> tensor<576xf32> {
  %w = fwd.weight "w" : !fwd.weights<1x576, f32>
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.rms_norm operand 1 is !fwd.weights<1x576, f32>: a stage reads weights only as a matmul's `w` or a mixture's matrices
  %s = fwd.rms_norm %x weight(%w : !fwd.weights<1x576, f32>) : tensor<576xf32> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @norm_weight_scalar(%x: tensor<576xf32>, %w: f32) -> tensor<576xf32> {
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.rms_norm weight is a tensor, not f32
  %s = fwd.rms_norm %x weight(%w : f32) : tensor<576xf32> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @yields_weights(%x: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.silu yields !fwd.weights<1x576, q8_0>: only fwd.weight declares weights
  %w = fwd.silu %x : tensor<576xf32> -> !fwd.weights<1x576, q8_0>
  func.return %x : tensor<576xf32>
}

// -----

func.func @silu_yields_qact(%x: tensor<576xf32>) -> tensor<576xf32> {
  %w = fwd.weight "w" : !fwd.weights<576x576, q8_0>
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.silu yields !fwd.qact<576, one_word>: only fwd.quantize makes a quantized activation
  %q = fwd.silu %x : tensor<576xf32> -> !fwd.qact<576, one_word>
  %s = fwd.matmul %q, %w : !fwd.qact<576, one_word>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @quantize_of_qact(%x: tensor<576xf32>) -> tensor<576xf32> {
  %q = fwd.quantize %x one_word : tensor<576xf32> -> !fwd.qact<576, one_word>
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: quantize x is a tensor of activations, not !fwd.qact<576, one_word>
  %q2 = fwd.quantize %q one_word : !fwd.qact<576, one_word> -> !fwd.qact<576, one_word>
  func.return %x : tensor<576xf32>
}

// -----

func.func @dynamic(%x: tensor<?xf32>) -> tensor<576xf32> {
  %w = fwd.weight "w" : !fwd.weights<576x576, q8_0>
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.matmul operand 0 has a dynamic shape (tensor<?xf32>)
  %s = fwd.matmul %x, %w : tensor<?xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @unranked(%x: tensor<*xf32>) -> tensor<*xf32> {
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.relu operand 0 is an unranked tensor (tensor<*xf32>)
  %s = fwd.relu %x : (tensor<*xf32>) -> tensor<*xf32>
  func.return %s : tensor<*xf32>
}

// -----

func.func @rope_angles(%x: tensor<576xf32>, %a: tensor<2x7xf32>) -> tensor<576xf32> {
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: rope angles hold 14 values, not [2, half] = 64 (a row of cos, a row of sin)
  %s = fwd.rope %x, %a hd 64 half 32 rows 1 : tensor<576xf32>, tensor<2x7xf32> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @attention_zero_heads(%q: tensor<0xf32>, %k: tensor<0xf32>, %v: tensor<0xf32>, %kc: tensor<3x0xf32>, %vc: tensor<3x0xf32>) -> tensor<0xf32> {
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.attention operand 0 holds no values (tensor<0xf32>)
  %s = fwd.attention %q, %k, %v, %kc, %vc h 2 kv 1 hd 0 vd 0 l 4 rows 1 : tensor<0xf32>, tensor<0xf32>, tensor<0xf32>, tensor<3x0xf32>, tensor<3x0xf32> -> tensor<0xf32>
  func.return %s : tensor<0xf32>
}

// -----

// An empty cache (l = 1: the first position) is a decode step's; an empty activation is not.
func.func @empty_cache(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<0x64xf32>, %vc: tensor<0x64xf32>) -> tensor<128xf32> {
  %s = fwd.attention %q, %k, %v, %kc, %vc h 2 kv 1 hd 64 vd 64 l 1 rows 1 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<0x64xf32>, tensor<0x64xf32> -> tensor<128xf32>
  func.return %s : tensor<128xf32>
}
// CHECK-LABEL: func.func @empty_cache
// CHECK: fwd.attention

// -----

func.func @empty_norm(%x: tensor<0xf32>) -> tensor<0xf32> {
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.rms_norm operand 0 holds no values (tensor<0xf32>)
  %s = fwd.rms_norm %x : tensor<0xf32> -> tensor<0xf32>
  func.return %s : tensor<0xf32>
}

// -----

func.func @yields_nothing(%x: tensor<4x64xf32>) -> tensor<0x64xf32> {
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.transpose yields no values (tensor<0x64xf32>)
  %s = fwd.transpose %x : tensor<4x64xf32> -> tensor<0x64xf32>
  func.return %s : tensor<0x64xf32>
}

// -----

func.func @eps(%x: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fwd.rms_norm eps is negative (-1)
  %s = fwd.rms_norm %x eps -1.0 : tensor<576xf32> -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}

// -----

func.func @covers_negative(%x: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: fused covers hold a negative number
  %f = fwd.fused elementwise_chains covers [-5] ins(%x) : (tensor<576xf32>) -> tensor<576xf32> {
  ^bb0(%a: tensor<576xf32>):
    %s = fwd.silu %a : tensor<576xf32> -> tensor<576xf32>
    fwd.yield %s : tensor<576xf32>
  }
  func.return %f : tensor<576xf32>
}

// -----

func.func @nested_covers(%x: tensor<576xf32>, %y: tensor<576xf32>, %w: tensor<576xf32>) -> tensor<576xf32> {
  // CHECK: invalid_values.mlir:[[# @LINE + 1]]:3: error: nested fused covers [7, 9] where its place says [1, 2]
  %f:2 = fwd.fused add_norm covers [0, 1, 2] ins(%x, %y, %w) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>, %c: tensor<576xf32>):
    %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
    %n = fwd.fused norm_weight covers [7, 9] ins(%s, %c) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32> {
    ^bb0(%s1: tensor<576xf32>, %c1: tensor<576xf32>):
      %n1 = fwd.rms_norm %s1 : tensor<576xf32> -> tensor<576xf32>
      %n2 = fwd.elementwise mul %n1, %c1 : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
      fwd.yield %n2 : tensor<576xf32>
    }
    fwd.yield %s, %n : tensor<576xf32>, tensor<576xf32>
  }
  func.return %f#1 : tensor<576xf32>
}

