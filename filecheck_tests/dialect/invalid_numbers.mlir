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
  // CHECK: 100000000000000000000 is out of range of a signed 64-bit integer (the largest is 9223372036854775807)
  func.return %y : tensor<64xf32>
}

// -----

// Past 2^63 - 1 but under 2^64: xDSL stores it in the i64 as its two's complement (it became `l -1`, and
// a verify error about -1); a fwd op's integers are signed.
func.func @wrapped(%q: tensor<128xf32>, %k: tensor<64xf32>, %v: tensor<64xf32>, %kc: tensor<7x64xf32>, %vc: tensor<7x64xf32>) -> tensor<128xf32> {
  %att = fwd.attention %q, %k, %v, %kc, %vc h 4 kv 2 hd 32 vd 32 l 18446744073709551615 rows 1 : tensor<128xf32>, tensor<64xf32>, tensor<64xf32>, tensor<7x64xf32>, tensor<7x64xf32> -> tensor<128xf32>
  // CHECK: invalid_numbers.mlir:[[# @LINE - 1]]:68
  // CHECK: 18446744073709551615 is out of range of a signed 64-bit integer
  func.return %att : tensor<128xf32>
}

// -----

func.func @wrapped_offset(%x: tensor<128xf32>) -> tensor<64xf32> {
  %v = fwd.view %x offset 18446744073709551615 : tensor<128xf32> -> tensor<64xf32>
  // CHECK: invalid_numbers.mlir:[[# @LINE - 1]]:27
  // CHECK: 18446744073709551615 is out of range of a signed 64-bit integer
  func.return %v : tensor<64xf32>
}

// -----

// A nonzero eps its f32 stores as zero (it became `eps 0.0` silently: a row of zeros divided by zero).
func.func @eps_underflow(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.rms_norm %x eps 1.0e-50 : tensor<64xf32> -> tensor<64xf32>
  // CHECK: invalid_numbers.mlir:[[# @LINE - 1]]:28
  // CHECK: 1.0e-50 is too small for an f32: it would be stored as 0.0
  func.return %y : tensor<64xf32>
}

// -----

// A subnormal eps is an f32 (not zero), and a discardable attribute keeps xDSL's reading: both parse.
// CHECK-LABEL: func.func @eps_subnormal
// CHECK: fwd.rms_norm %x eps 9.999950e-41 {n = -1 : i64}
func.func @eps_subnormal(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.rms_norm %x eps 1.0e-40 {n = 18446744073709551615 : i64} : tensor<64xf32> -> tensor<64xf32>
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
