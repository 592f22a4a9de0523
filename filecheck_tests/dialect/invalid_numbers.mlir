// Numbers past what their attribute stores: an error at the number (xDSL's `struct.pack` failed
// while building the attribute: "internal error: argument out of range" / "float too large").
// RUN: fwdshim-opt %s --split-input-file --parsing-diagnostics | filecheck %s

func.func @covers(%a: tensor<64xf32>) -> tensor<64xf32> {
  %f = fwd.fused elementwise_chains covers [0, 18446744073709551615] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  // CHECK: invalid_numbers.mlir:[[# @LINE - 1]]:48
  // CHECK: 18446744073709551615 is out of range of a signed 64-bit integer
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    %t = fwd.silu %s : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %t : tensor<64xf32>
  }
  func.return %f : tensor<64xf32>
}

// -----

func.func @covers_negative(%a: tensor<64xf32>) -> tensor<64xf32> {
  %f = fwd.fused elementwise_chains covers [-9223372036854775809] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  // CHECK: invalid_numbers.mlir:[[# @LINE - 1]]:45
  // CHECK: -9223372036854775809 is out of range of a signed 64-bit integer
  ^bb0(%a_: tensor<64xf32>):
    %s = fwd.silu %a_ : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return %f : tensor<64xf32>
}

// -----

func.func @rope(%x: tensor<64xf32>, %t: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.rope %x, %t hd 64 half 32 rows 100000000000000000000 : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  // CHECK: invalid_numbers.mlir:[[# @LINE - 1]]:43
  // CHECK: Integer value 100000000000000000000 is out of range for type i64
  func.return %y : tensor<64xf32>
}

// -----

func.func @eps(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.rms_norm %x eps 3.5e38 : tensor<64xf32> -> tensor<64xf32>
  // CHECK: invalid_numbers.mlir:[[# @LINE - 1]]:28
  // CHECK: 3.5e38 is out of range of f32
  func.return %y : tensor<64xf32>
}

// -----

func.func @cap(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = "fwd.softcap"(%x) <{cap = -1.0e300 : f32}> : (tensor<64xf32>) -> tensor<64xf32>
  // CHECK: invalid_numbers.mlir:[[# @LINE - 1]]:34
  // CHECK: -1.0e300 is out of range of f32
  func.return %y : tensor<64xf32>
}

// -----

func.func @width(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.silu %x {n = 1 : i100000000000000000000} : tensor<64xf32> -> tensor<64xf32>
  // CHECK: invalid_numbers.mlir:[[# @LINE - 1]]:29
  // CHECK: integer bitwidth is limited to 16777215 bits
  func.return %y : tensor<64xf32>
}
