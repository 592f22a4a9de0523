// Characters outside MLIR's grammar where a token starts: each is named by its code point (xDSL printed
// it raw, invisible for a no-break or zero-width space), and a digit other than 0-9 no longer starts a
// number (`tensor<６4xf32>` was read as `tensor<64xf32>`).
// RUN: fwdshim-opt %s --split-input-file --parsing-diagnostics --verify-diagnostics | filecheck %s

func.func @nbsp(%x: tensor<64xf32>) -> tensor<64xf32> {
  %s = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}
// CHECK: invalid_characters.mlir:[[# @LINE - 3]]:21
// CHECK: unexpected character U+00A0 NO-BREAK SPACE: only ASCII spaces, tabs and line breaks separate tokens

// -----

func.func @zero_width(%x: tensor<64xf32>) -> tensor<64xf32> {
  ​func.return %x : tensor<64xf32>
}
// CHECK: invalid_characters.mlir:[[# @LINE - 2]]:3
// CHECK: unexpected character U+200B ZERO WIDTH SPACE: only ASCII spaces, tabs and line breaks separate tokens

// -----

func.func @fullwidth_digit(%x: tensor<64xf32>) -> tensor<64xf32> {
  %s = fwd.silu %x : tensor<６4xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}
// CHECK: invalid_characters.mlir:[[# @LINE - 3]]:29
// CHECK: unexpected character U+FF16 FULLWIDTH DIGIT SIX: a number is written with the digits 0-9

// -----

func.func @arabic_indic_digit(%x: tensor<64xf32>) -> tensor<64xf32> {
  %s = fwd.rope %x, %x hd ٣ half 1 rows 1 : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}
// CHECK: invalid_characters.mlir:[[# @LINE - 3]]:27
// CHECK: unexpected character U+0663 ARABIC-INDIC DIGIT THREE: a number is written with the digits 0-9

// -----

// Letters are identifiers as before (an unknown op, not an unexpected character):
func.func @letter(%x: tensor<64xf32>) -> tensor<64xf32> {
  é func.return %x : tensor<64xf32>
}
// CHECK: invalid_characters.mlir:[[# @LINE - 2]]:3
// CHECK: Operation é is not registered
